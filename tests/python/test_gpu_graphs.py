"""mode="reduce-overhead" (issue 14 item 6, Note [Replayed launches]): a run's device work issued
as one CUDA graph launch, the graph kept per cache entry and patched with each run's pointers,
sizes and scalar values. Every result is checked against eager execution, run after run with new
inputs, and outputs stay the caller's (a later replay never overwrites them). Skipped without a
CUDA device (the GPU machine runs it: tools/device_build.sh)."""
import threading

import numpy as np
import pytest

import framejit

pytestmark = pytest.mark.skipif(not framejit.cuda.is_available(),
                                reason="no CUDA device: " + framejit.cuda.why_unavailable())


STATS = {"built": "cuda_graphs_built", "replays": "cuda_graph_replays", "patched": "cuda_graph_patched_nodes",
         "flushed": "cuda_graph_flushed_runs", "direct": "cuda_graph_direct_runs"}


def graph_stats():
    s = framejit.stats()
    return {k: s[name] for k, name in STATS.items()}


def delta(before):
    after = graph_stats()
    return {k: after[k] - before[k] for k in after}


@pytest.fixture
def torch():
    t = pytest.importorskip("torch")
    if not t.cuda.is_available():
        pytest.skip("no CUDA device for torch")
    return t


@pytest.fixture
def cp():
    c = pytest.importorskip("cupy")
    if c.cuda.runtime.getDeviceCount() == 0:
        pytest.skip("no CUDA device for CuPy")
    return c


def test_torch_replays_patch_new_inputs_and_keep_outputs(torch):
    # An MLP block at batch 8: products of few rows (framejit's own kernel, epilogue fused), a
    # softmax row chain, a reduction: each call new tensors, so every pointer in the graph is new.
    g = torch.Generator().manual_seed(0)
    w1, w2 = (torch.randn(256, 512, generator=g).cuda() * 0.05, torch.randn(512, 64, generator=g).cuda() * 0.05)
    b1 = torch.randn(512, generator=g).cuda()

    def mlp(x, w1, b1, w2):
        h = torch.relu(x @ w1 + b1)
        y = torch.softmax(h @ w2, dim=-1)
        return y, y.sum(dim=0) * 2.0

    framejit.reset()
    cf = framejit.compile(mlp, mode="reduce-overhead")
    before = graph_stats()
    kept = []
    for i in range(6):
        x = torch.randn(8, 256, generator=g).cuda()
        got = cf(x, w1, b1, w2)
        want = mlp(x, w1, b1, w2)
        for a, b in zip(got, want):
            torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)
        kept.append((got, want))
    torch.cuda.synchronize()
    for got, want in kept:  # no replay wrote into an earlier call's outputs
        for a, b in zip(got, want):
            torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-5)
    d = delta(before)
    assert d["built"] == 1 and d["replays"] == 6 and d["patched"] >= 5, d
    assert d["flushed"] == 0 and d["direct"] == 0, d


def test_torch_new_sizes_get_their_own_graph(torch):
    def f(x):
        return torch.tanh(x * 0.5) + x.mean(dim=-1, keepdim=True)

    framejit.reset()
    cf = framejit.compile(f, mode="reduce-overhead")
    before = graph_stats()
    for n in (100, 3000, 100, 3000, 70000, 100):
        x = torch.randn(n, 33, device="cuda")
        torch.testing.assert_close(cf(x), f(x), rtol=1e-5, atol=1e-5)
    d = delta(before)
    assert framejit.stats()["captured"] == 1
    assert d["replays"] == 6 and d["built"] <= 3, d  # the same graph serves sizes whose work has one shape


def test_torch_library_products_are_captured(torch):
    # Products past the small-product kernel are cuBLASLt's, captured into a child graph per
    # distinct call (pointers), reused when the call repeats.
    g = torch.Generator().manual_seed(1)
    a = torch.randn(300, 200, generator=g).cuda()
    b = torch.randn(200, 120, generator=g).cuda()

    def f(a, b):
        return torch.relu(a @ b) * 2.0 + 1.0

    framejit.reset()
    cf = framejit.compile(f, mode="reduce-overhead")
    before = graph_stats()
    for i in range(4):
        a2 = a + i  # a new tensor each time
        torch.testing.assert_close(cf(a2, b), f(a2, b), rtol=1e-4, atol=1e-3)
    for i in range(3):
        torch.testing.assert_close(cf(a, b), f(a, b), rtol=1e-4, atol=1e-3)
    d = delta(before)
    assert d["replays"] == 7 and d["direct"] == 0, d


def test_torch_raise_mid_run_issues_what_came_before(torch):
    # An element write out of range runs torch's own setitem, which raises: what the run recorded
    # is issued first (flush), and the in-range calls after it replay as before.
    def f(x, i):
        y = x * 2.0
        y[i] = -1.0
        return y + 1.0

    framejit.reset()
    cf = framejit.compile(f, mode="reduce-overhead")
    x = torch.randn(50, device="cuda")
    for i in (3, 7):
        torch.testing.assert_close(cf(x, i), f(x, i))
    before = graph_stats()
    with pytest.raises(IndexError):
        cf(x, 500)
    d = delta(before)
    assert d["flushed"] == 1, d
    torch.testing.assert_close(cf(x, 9), f(x, 9))
    torch.testing.assert_close(cf(x, -2), f(x, -2))


def test_torch_writes_into_arguments(torch):
    def f(x, y):
        x[1:] += y[:-1]
        x.mul_(0.5)

    framejit.reset()
    cf = framejit.compile(f, mode="reduce-overhead")
    for i in range(4):
        x = torch.randn(64, 64, device="cuda")
        y = torch.randn(64, 64, device="cuda")
        want = x.clone()
        f(want, y)
        cf(x, y)
        torch.testing.assert_close(x, want)


def test_torch_other_streams(torch):
    def f(x):
        return torch.sigmoid(x) * x

    framejit.reset()
    cf = framejit.compile(f, mode="reduce-overhead")
    x = torch.randn(1000, 100, device="cuda")
    torch.testing.assert_close(cf(x), f(x))
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        for _ in range(3):
            y = cf(x)  # launched on s, torch's current stream there
        want = f(x)
    s.synchronize()
    torch.testing.assert_close(y, want)


def test_torch_threads(torch):
    # Two threads on one cache entry: one replays its graph, the other finds it busy and issues
    # its launches directly; both right.
    def f(x):
        return torch.softmax(x * 3.0, dim=-1)

    framejit.reset()
    cf = framejit.compile(f, mode="reduce-overhead")
    errors = []

    def worker(seed):
        try:
            gen = torch.Generator().manual_seed(seed)
            for _ in range(20):
                x = torch.randn(16, 300, generator=gen).cuda()
                torch.testing.assert_close(cf(x), f(x))
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    ts = [threading.Thread(target=worker, args=(s,)) for s in range(3)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors, errors


def test_default_mode_records_nothing(torch):
    framejit.reset()
    x = torch.randn(100, device="cuda")
    before = graph_stats()
    cf = framejit.compile(lambda x: x * 2 + 1)
    for _ in range(3):
        torch.testing.assert_close(cf(x), x * 2 + 1)
    assert delta(before) == {k: 0 for k in before}
    # The same cache entry, called through a reduce-overhead wrapper, replays: the mode is the caller's.
    cf2 = framejit.compile(cf.__wrapped__, mode="reduce-overhead")
    for _ in range(3):
        torch.testing.assert_close(cf2(x), x * 2 + 1)
    assert delta(before)["replays"] == 3


def test_cupy_scalars_and_creations(cp):
    # NumPy scalar arguments are uploaded as values in the graph (memset nodes), patched with each
    # call's value; creations are memsets too.
    rng = np.random.default_rng(0)

    def f(alpha, beta, A, B):
        z = cp.zeros_like(A)
        o = cp.full(A.shape, 2.5, dtype=A.dtype)
        return alpha * (A + z) + beta * B * o

    framejit.reset()
    cf = framejit.compile(f, mode="reduce-overhead")
    A = cp.asarray(rng.standard_normal((40, 50)))
    B = cp.asarray(rng.standard_normal((40, 50)))
    before = graph_stats()
    for alpha, beta in [(1.5, 0.25), (-3.0, 1e10), (0.0, -0.5), (np.pi, np.e)]:
        got = cf(np.float64(alpha), np.float64(beta), A, B)
        want = f(np.float64(alpha), np.float64(beta), A, B)
        np.testing.assert_allclose(cp.asnumpy(got), cp.asnumpy(want), rtol=1e-12)
    d = delta(before)
    assert d["replays"] == 4 and d["built"] == 1 and d["patched"] >= 3, d


def test_tensor_on_device():
    def f(x, y):
        return (x * y + 1.0).sum(axis=0)

    framejit.reset()
    cf = framejit.compile(f, mode="reduce-overhead")
    rng = np.random.default_rng(2)
    for _ in range(4):
        a, b = rng.standard_normal((64, 32)).astype(np.float32), rng.standard_normal((64, 32)).astype(np.float32)
        got = cf(framejit.tensor(a, device="cuda"), framejit.tensor(b, device="cuda"))
        np.testing.assert_allclose(np.asarray(got.cpu()), (a * b + 1.0).sum(axis=0), rtol=1e-5, atol=1e-5)
