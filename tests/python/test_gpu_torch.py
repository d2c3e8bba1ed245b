"""torch CUDA tensors under framejit (issue 14, Note [Torch tensors on a GPU]): graphs on the
device's CUDA backend, results as torch CUDA tensors from torch's allocator, launches on torch's
current stream, products through cuBLASLt (Note [Device GEMMs]), guards that keep devices apart.
Every result is checked against torch's eager run of the same code. Skipped without torch's CUDA
(the GPU machine runs it: tools/device_build.sh --gpu)."""
import numpy as np
import pytest

import framejit

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(not (torch.cuda.is_available() and framejit.cuda.is_available()),
                                reason="no CUDA device for torch and framejit")


def randn(*shape, dtype=torch.float32, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g, dtype=dtype).cuda()


def check(fn, *args, rtol=1e-5, atol=1e-5, graphs=1):
    """fn compiled against fn eager on the same CUDA tensors: same device, dtype, shape, values."""
    framejit.reset()
    want = fn(*args)
    cf = framejit.compile(fn, fullgraph=True)
    got = cf(*args)
    got2 = cf(*args)  # the cache hit
    for g in (got, got2):
        assert isinstance(g, torch.Tensor) and g.device == want.device, (type(g), getattr(g, "device", None))
        assert g.dtype == want.dtype and g.shape == want.shape, (g.dtype, want.dtype, g.shape, want.shape)
        torch.testing.assert_close(g, want, rtol=rtol, atol=atol)
    assert framejit.stats()["captured"] == graphs
    return got


def test_pointwise_and_rows():
    x = randn(64, 1000)
    w, b = randn(1000, seed=1), randn(1000, seed=2)
    check(lambda x: torch.sigmoid(x) * torch.tanh(x * 0.5 + 1), x)
    check(lambda x: torch.softmax(x, dim=-1), x)
    check(lambda x: torch.sin(x * 3e4) * torch.cos(x) + torch.tan(x * 0.3), x)  # huge arguments too
    check(lambda x, w, b: torch.nn.functional.layer_norm(x, (1000,), w, b), x, w, b, rtol=1e-4, atol=1e-4)
    check(lambda x: x.sum(dim=0) + x.amax(dim=1).mean(), x, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_products(dtype):
    tol = dict(rtol=1e-4, atol=1e-4) if dtype == torch.float32 else dict(rtol=1e-10, atol=1e-10)
    a, b = randn(33, 70, dtype=dtype), randn(70, 20, dtype=dtype, seed=1)
    check(lambda a, b: a @ b, a, b, **tol)
    fa, fb = a.T.contiguous().T, b.T.contiguous().T                   # Fortran order: unit row strides
    check(lambda a, b: a @ b, fa, b, **tol)
    check(lambda a, b: a @ b, a, fb, **tol)
    check(lambda a, b: (b.T @ a.T).relu(), a, b, **tol)                # transposed views, an epilogue
    check(lambda a, b: a[:, ::2] @ b[::2], a, b, **tol)               # no unit stride: packed first
    x = randn(4, 3, 9, 16, dtype=dtype)
    y = randn(16, 5, dtype=dtype, seed=1)
    z = randn(3, 16, 7, dtype=dtype, seed=2)
    check(lambda x, y: x @ y, x, y, **tol)                             # batches fold into rows
    check(lambda x, z: x @ z, x, z, **tol)                             # broadcast batch, looped
    check(lambda x: x @ x.transpose(-2, -1), x, **tol)                 # attention scores
    check(lambda a, b: a[:0] @ b, a, b, **tol)                        # nothing to compute


def test_products_past_the_small_kernel():
    # More than 32 rows: cuBLASLt, with its alignment, empty and k = 0 cases.
    tol = dict(rtol=1e-4, atol=1e-4)
    x, w = randn(70, 65), randn(65, 33, seed=1)
    check(lambda x, w: x[:, 1:] @ w[1:], x, w, **tol)                  # 4-byte aligned operands
    check(lambda x, w: x[1:] @ w + 1, x, w, **tol)
    check(lambda x: x[:, :0] @ x[:0, :5] + 2, x, **tol)                 # k = 0: zeros, then the epilogue
    check(lambda x, w: x[:0].reshape(0, 1, 65) @ w, x, w, **tol)         # no batches at all
    v, W = randn(1, 512), randn(512, 48, seed=2)
    check(lambda v, W: v.expand(64, 1, 512) @ W, v, W, **tol)            # a broadcast row per batch
    p, q = randn(3, 1, 40, 24), randn(3, 1, 24, 35, seed=3)
    check(lambda p, q: p @ q, p, q, **tol)                               # a size-1 inner batch dim
    r, t = randn(5, 3, 7, 2, 40, 24), randn(7, 24, 35, seed=4)
    check(lambda r, t: r[:, :, :, 1] @ t, r, t, **tol)                   # batches looped and strided


def test_mlp_module():
    torch.manual_seed(0)
    mlp = torch.nn.Sequential(torch.nn.Linear(256, 1024), torch.nn.GELU(approximate="tanh"),
                              torch.nn.Linear(1024, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 256)).cuda().eval()
    x = randn(8, 256)
    with torch.no_grad():
        check(mlp, x, rtol=2e-4, atol=2e-4)


def test_runs_on_torchs_current_stream():
    x = randn(512, 512)
    cf = framejit.compile(lambda x: torch.softmax(x @ x, dim=-1) * 2)
    want = torch.softmax(x @ x, dim=-1) * 2
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        # Queued behind a long product on s: a launch on another stream would read y too early.
        y = x.clone()
        for _ in range(20):
            y = (y @ x) * 0 + x
        got = cf(y)
    s.synchronize()
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
    torch.cuda.synchronize()


def test_guards_keep_devices_apart():
    framejit.reset()
    f = framejit.compile(lambda x: x * 3 + 1)
    a = torch.arange(10, dtype=torch.float32)
    for t in (a, a.cuda(), a):
        r = f(t)
        assert r.device == t.device
        torch.testing.assert_close(r.cpu(), a * 3 + 1)
    assert framejit.stats()["captured"] == 2


def test_mixed_devices_break_the_graph_with_torchs_error():
    f = framejit.compile(lambda x, y: x + y)
    with pytest.raises(RuntimeError, match="device"):
        f(torch.ones(3).cuda(), torch.ones(3))


def test_framejit_tensor_products():
    a = np.random.default_rng(0).standard_normal((40, 30)).astype(np.float32)
    b = np.random.default_rng(1).standard_normal((30, 50)).astype(np.float32)
    ta, tb = framejit.tensor(a, device="cuda"), framejit.tensor(b, device="cuda")
    np.testing.assert_allclose(np.asarray(np.matmul(ta, tb).cpu()), a @ b, rtol=1e-4, atol=1e-4)
    f = framejit.compile(lambda a, b: np.maximum(a @ b + 1, 0))
    np.testing.assert_allclose(np.asarray(f(ta, tb).cpu()), np.maximum(a @ b + 1, 0), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_half_types_round_like_eager(dtype):
    # Note [Half types]: each op computes in float32 and rounds; Python numbers meet CUDA tensors
    # in float32 (torch's opmath). Every bit pattern, then chains: eager's bits.
    x = torch.arange(-32768, 32768, dtype=torch.int32).to(torch.int16).view(dtype).cuda()
    for fn in (lambda x: x * 1.0009765625 + 0.1, lambda x: (x.float() * 3.0).to(dtype), lambda x: x.float() + 0.25):
        framejit.reset()
        want, got = fn(x), framejit.compile(fn, fullgraph=True)(x)
        assert got.dtype == want.dtype and got.device == want.device
        nan = torch.isnan(got) & torch.isnan(want)
        assert bool(((got == want) | nan).all()), fn
    a, b = randn(4097, dtype=dtype, seed=3), randn(4097, dtype=dtype, seed=4)
    for fn in (lambda a, b: (a * b + 1.5) * b - b / (a + 3), lambda a, b: torch.where(a > b, a * 2, b)):
        check(fn, a, b, rtol=0, atol=0)
    # framejit's own exp and tanh (within 2 ulp of float32 before the rounding).
    ulp = 2 ** -7 if dtype == torch.bfloat16 else 2 ** -10
    check(lambda a, b: torch.exp(a) + torch.tanh(b), a, b, rtol=ulp, atol=1e-5)


def test_bfloat16_composites_and_products():
    # Note [Composites in float32]: one rounding, as torch's kernels; products and reductions of
    # half types are torch's calls inside the graph.
    x = randn(64, 1024, dtype=torch.bfloat16) * 4
    w, b = randn(1024, dtype=torch.bfloat16, seed=1), randn(1024, dtype=torch.bfloat16, seed=2)
    m = randn(1024, 256, dtype=torch.bfloat16, seed=5)
    F = torch.nn.functional
    for fn, args in [(lambda x: torch.softmax(x, dim=-1), (x,)),
                     (lambda x, w, b: F.layer_norm(x, (1024,), w, b), (x, w, b)),
                     (lambda x: F.gelu(x, approximate="tanh") * F.silu(x), (x,)), (lambda x, m: F.gelu(x @ m), (x, m)),
                     (lambda x: x.sum(dim=-1) * 2 + x.mean(), (x,)), (lambda x: x.var(dim=0) + x.amax(dim=0), (x,))]:
        framejit.reset()
        got = framejit.compile(fn, fullgraph=True)(*args)
        want = fn(*args)
        assert got.dtype == torch.bfloat16 and got.device == want.device
        torch.testing.assert_close(got.float(), want.float(), rtol=2 ** -7, atol=1e-5)
    framejit.reset()
    assert torch.equal(framejit.compile(lambda x: x.argmax(dim=-1), fullgraph=True)(x), x.argmax(dim=-1))


def test_python_number_math_in_a_device_graph():
    # A run-time int's arithmetic (an attention scale) is a host call on numbers in a device graph.
    x = randn(64, 64)
    for d in (64, 32):
        check(lambda x: torch.softmax(x * (1.0 / d ** 0.5), dim=-1), x)


def test_cond_on_the_device():
    # Note [Running cond]: the host reads the device predicate and runs the branch's device program.
    w = randn(256, seed=3)

    def f(x):
        y = x * 2
        return framejit.cond(y.sum() > 0, lambda a: (torch.softmax(a, dim=-1) + w, a.abs()),
                             lambda a: (torch.tanh(a) - w, a * a), (y,))

    for seed in (1, 2, 5):
        x = randn(8, 256, seed=seed) + (0.5 if seed == 1 else -0.5)
        framejit.reset()
        want = f(x)
        got = framejit.compile(f, fullgraph=True)(x)
        for g, e in zip(got, want):
            assert g.device == e.device
            torch.testing.assert_close(g, e, rtol=1e-5, atol=1e-5)


def test_while_loop_on_the_device():
    # Note [Running while_loop]: the host reads each iteration's device condition.
    # The condition tests an array and the counter: a kernel with the bool `k < n` as a parameter.
    def f(x, n):
        y, k = framejit.while_loop(lambda v, k: (v.abs().max() > 1e-3) & (k < n), lambda v, k: (torch.tanh(v) * 0.5, k + 1),
                                   (x, 0))
        return framejit.fori_loop(0, n, lambda i, u: u + y * i, y), k

    x = randn(4, 128, seed=7) * 10
    framejit.reset()
    cf = framejit.compile(f, fullgraph=True)
    for n in (3, 40):
        (got, gk), (want, wk) = cf(x, n), f(x, n)
        assert got.device == want.device and gk == wk
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
    assert framejit.stats()["recompiles"] == 0


def test_scan_on_the_device():
    # Note [Running scan]: slices and torch.stack on the host, the body's kernels on the device.
    def f(xs, c0):
        return framejit.scan(lambda c, x: (c * 0.9 + torch.tanh(x), c - x), c0, xs)

    framejit.reset()
    cf = framejit.compile(f, fullgraph=True)
    c0 = randn(64, seed=1)
    for n in (5, 9):
        xs = randn(n, 64, seed=n)
        got, want = cf(xs, c0), f(xs, c0)
        for g, e in zip(got, want):
            assert g.device == e.device
            torch.testing.assert_close(g, e, rtol=1e-5, atol=1e-6)
    assert framejit.stats()["recompiles"] == 0


def test_writes_into_cuda_tensors():
    # Note [Stores on a device]; torch's own setitem writes the final value (Note [Torch writes]).
    x, y = randn(64, 80), randn(64, 80, seed=1)

    def fn(x, y):
        y[:, 1:] = torch.tanh(x[:, :-1])
        y[:, 0] = 0
        x.add_(1)
        x[::2].mul_(3)
        return x.sum(dim=0) + y[3]

    framejit.reset()
    x1, y1, x2, y2 = x.clone(), y.clone(), x.clone(), y.clone()
    want = fn(x1, y1)
    got = framejit.compile(fn, fullgraph=True)(x2, y2)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-4)
    torch.testing.assert_close(x2, x1)
    torch.testing.assert_close(y2, y1)
    assert framejit.stats()["captured"] == 1

    def intermediate(x):
        z = x * 2
        z[:, 0] = 0
        z[1:] = z[:-1] * 0.5  # reads what it writes: a copy first
        return z

    check(intermediate, x)


def test_matrix_vector_products():
    # Note [Vector products]: reductions of the broadcast product on a device.
    A, x, y = randn(300, 200), randn(200, seed=1), randn(300, seed=2)
    check(lambda A, x: A @ x + 1, A, x, rtol=1e-4, atol=1e-4)
    check(lambda A, y: torch.relu(y @ A), A, y, rtol=1e-4, atol=1e-4)
