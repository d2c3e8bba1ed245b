"""Row-wise chains on the "jit" backend: softmax- and layernorm-like sequences of reductions and
kernels that run block by block over rows, reductions that store an expensive operand for later
kernels (Note [Stored reduction operands]), and kernels that write their output into a dying
input (Note [Output buffer reuse]). Small inputs run part by part; large ones run row-blocked:
both are compared with NumPy."""

import tracemalloc

import numpy as np
import pytest

import framejit

RNG = np.random.default_rng(11)
# (rows, cols): below and above the size where chains run block by block, odd tails, one row.
SHAPES = [(3, 5), (1, 4099), (300, 1001), (64, 2048), (4, 50, 200)]


def tol(dtype):
    return 1e-5 if dtype == np.float32 else 1e-12


def softmax(x):
    m = x.max(-1, keepdims=True)
    e = np.exp(x - m)
    return e / e.sum(-1, keepdims=True)


def layernorm(x, g, b):
    mu = x.mean(-1, keepdims=True)
    d = x - mu
    var = (d * d).mean(-1, keepdims=True)
    return d / np.sqrt(var + 1e-5) * g + b


def check(fn, *args, dtype):
    compiled = framejit.compile(fn, backend="jit")
    copies = [a.copy() for a in args]
    want = fn(*args)
    for _ in range(2):  # cold call, then the cache hit
        got = compiled(*args)
        np.testing.assert_allclose(got, want, rtol=tol(dtype), atol=tol(dtype))
    for a, c in zip(args, copies):  # inputs are never written (no output reuses them)
        np.testing.assert_array_equal(a, c)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", SHAPES)
def test_softmax(dtype, shape):
    x = (RNG.standard_normal(shape) * 4).astype(dtype)
    check(softmax, x, dtype=dtype)
    s = framejit.stats()
    assert s["reductions"] == 2 and s["kernels"] == 1 and s["extern_calls"] == 0, s


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", SHAPES)
def test_layernorm(dtype, shape):
    x = RNG.standard_normal(shape).astype(dtype)
    g = RNG.standard_normal(shape[-1]).astype(dtype)
    b = RNG.standard_normal(shape[-1]).astype(dtype)
    check(layernorm, x, g, b, dtype=dtype)
    assert framejit.stats()["extern_calls"] == 0


def layernorm_var(x, g, b):
    mu = x.mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(x.var(-1, keepdims=True) + 1e-5) * g + b


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_variance_reuses_the_graphs_mean(dtype):
    # var's own mean is the graph's `mu`: two reductions, not three (fuse_pointwise's same_mean).
    x = RNG.standard_normal((300, 1001)).astype(dtype)
    g = RNG.standard_normal(1001).astype(dtype)
    b = RNG.standard_normal(1001).astype(dtype)
    check(layernorm_var, x, g, b, dtype=dtype)
    s = framejit.stats()
    assert s["reductions"] == 2 and s["extern_calls"] == 0, s


def test_logistic_formula_runs_as_sigmoid():
    # Note [Sigmoid from its formula]: within 2 ulp of the true sigmoid, the formula's own overflow
    # (exp(100) in float32) included, where NumPy's 1 / (1 + inf) is 0 and the sigmoid is tiny.
    def f(x):
        return 1 / (1 + np.exp(-x)) * 2.0

    x = np.concatenate([np.linspace(-120, 40, 4001), [0.0, -0.0, np.inf, -np.inf, np.nan]]).astype(np.float32)
    with np.errstate(over="ignore"):
        want = 2.0 / (1.0 + np.exp(-x.astype(np.float64)))
    got = framejit.compile(f, backend="jit")(x)
    assert got.dtype == np.float32
    ok = np.isfinite(want)
    spacing = np.spacing(want[ok].astype(np.float32)).astype(np.float64)
    assert np.max(np.abs(got[ok] - want[ok]) / spacing) <= 2.5
    assert np.isnan(got[-1]) and got[-3] == 2.0 and got[-2] == 0.0
    tiny = framejit.compile(f, backend="jit")(np.array([-100.0], np.float32))
    assert tiny[0] > 0  # 2 exp(-100) survives as a subnormal


@pytest.mark.parametrize("layout", ["fortran", "strided", "reversed"])
@pytest.mark.parametrize("fn", [softmax, layernorm], ids=["softmax", "layernorm"])
def test_row_chain_layouts(fn, layout):
    # Rows that are not runs in memory: part by part in memory order (Fortran), or row blocks
    # copied into contiguous rows (Note [Buffered strided rows]).
    base = RNG.standard_normal((512, 1030)).astype(np.float32)
    x = {"fortran": np.asfortranarray(base), "strided": base[:, ::2], "reversed": base[::-1, ::-1]}[layout]
    params = () if fn is softmax else (RNG.standard_normal(x.shape[-1]).astype(np.float32),) * 2
    check(fn, x, *params, dtype=np.float32)


def test_stored_operand_also_returned():
    # exp(x - m) is stored by the sum and is also a result: it must stay intact and distinct from
    # the division's output (which may not reuse a buffer the caller receives).
    def f(x):
        e = np.exp(x - x.max(-1, keepdims=True))
        return e, e / e.sum(-1, keepdims=True)

    x = RNG.standard_normal((256, 700)).astype(np.float32)
    e, out = framejit.compile(f, backend="jit")(x)
    want_e, want_out = f(x)
    np.testing.assert_allclose(e, want_e, rtol=1e-6, atol=0)
    np.testing.assert_allclose(out, want_out, rtol=1e-5, atol=0)
    assert not np.shares_memory(e, out)


def test_operand_read_before_the_reduction():
    # y reads the exp before the sum runs, so the sum cannot be the one storing it.
    def f(x):
        e = np.exp(x - 1.0)
        y = e * 2.0
        return y / e.sum(-1, keepdims=True)

    x = RNG.standard_normal((128, 513)).astype(np.float64)
    check(f, x, dtype=np.float64)


def test_chain_result_broadcast_along_rows_is_not_blocked():
    # s (no keepdims) broadcasts along the last axis of a square matrix: row r of the product
    # needs all of s, so this chain must not run row block by row block.
    def f(x):
        s = np.exp(x).sum(-1)
        return np.exp(x) * s

    x = RNG.standard_normal((512, 512)).astype(np.float32) * 0.1
    check(f, x, dtype=np.float32)


def test_softmax_allocates_only_its_output():
    x = RNG.standard_normal((512, 1024)).astype(np.float32)
    f = framejit.compile(softmax, backend="jit")
    f(x)
    tracemalloc.start()
    tracemalloc.reset_peak()
    out = f(x)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    # The sum stores exp(x - m) and the division overwrites it in place: one full-size array plus
    # the per-row max and sum.
    assert peak <= out.nbytes * 1.05 + 64 * 1024, (peak, out.nbytes)


def test_dump_dir_gets_each_graph_and_kernel(tmp_path):
    """FRAMEJIT_DUMP_DIR (read once per process) receives the graph with its plan, and each
    generated kernel's loop IR and assembly listing."""
    import os
    import subprocess
    import sys
    import textwrap

    code = textwrap.dedent(
        """
        import numpy as np, framejit
        def softmax(x):
            m = x.max(-1, keepdims=True)
            e = np.exp(x - m)
            return e / e.sum(-1, keepdims=True)
        framejit.compile(softmax, backend="jit")(np.ones((4, 5), np.float32))
        """
    )
    dump = tmp_path / "nested" / "dump"
    env = dict(os.environ, FRAMEJIT_DUMP_DIR=str(dump))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0, r.stderr
    files = sorted(p.name for p in dump.iterdir())
    assert files[0] == "graph-1.txt", files
    graph = (dump / "graph-1.txt").read_text()
    assert "numpy.exp(sub)" in graph and "reduce_sum, storing the values" in graph
    kernels = [dump / f for f in files[1:]]
    # The division, the max (row and column forms) and the sum storing exp (row form only).
    assert len(kernels) == 4, files
    texts = [k.read_text() for k in kernels]
    assert any("reduce_max" in t for t in texts) and any("div(t0, t1)" in t for t in texts)
    assert all("ret" in t.split("\n") or "\nret" in t for t in texts)  # a real listing


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(5, 7), (300, 1001)])
def test_var_std_normalization(dtype, shape):
    # var/std are two reductions (a temporary mean, then the squared deviations): both join the
    # row chain with the kernels around them.
    def f(x):
        return (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + 1e-5) + x.std(-1, keepdims=True)

    check(f, (RNG.standard_normal(shape) * 3 + 1).astype(dtype), dtype=dtype)


def test_chain_with_column_and_full_reductions():
    # Reductions over axis 0 and over everything are not row-wise: the chain runs part by part,
    # and full reductions still come back as NumPy scalars.
    def f(x):
        e = np.exp(x * 0.1)
        return e / e.sum(0, keepdims=True), e.sum(), (e * 2).max()

    x = RNG.standard_normal((400, 300)).astype(np.float32)
    got = framejit.compile(f, backend="jit")(x)
    want = f(x)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-5)
    for g, w in zip(got[1:], want[1:]):
        assert type(g) is type(w)
        np.testing.assert_allclose(g, w, rtol=1e-5)
