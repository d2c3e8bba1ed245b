"""The "jit" backend's generated code: fused pointwise kernels, row reductions and GEMM, compared
with NumPy over dtypes, sizes (empty, one element, odd tails), layouts (strided, transposed,
broadcast) and every ISA level (forced in a subprocess with FRAMEJIT_ISA)."""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import framejit

RNG = np.random.default_rng(7)
SHAPES = [(0,), (1,), (7,), (33,), (3, 5), (4, 37), (2, 3, 9)]


def close(got, want, dtype):
    assert type(got) is type(want)
    assert got.dtype == want.dtype and got.shape == want.shape
    rtol = 2e-6 if dtype == np.float32 else 1e-13
    np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol)


def run_both(fn, *args):
    compiled = framejit.compile(fn)
    want = fn(*args)
    for _ in range(2):  # cold call, then the cache hit
        got = compiled(*args)
        yield got, want


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", SHAPES)
def test_fused_chain(dtype, shape):
    x = RNG.standard_normal(shape).astype(dtype)

    def f(x, a, b):
        return np.tanh(x * a + b) * np.exp(-x * x) + np.maximum(x, 0.25) / (1.0 + np.abs(x))

    for got, want in run_both(f, x, 0.5, -0.25):
        close(got, want, dtype)
    s = framejit.stats()
    assert s["kernels"] == 1 and s["extern_calls"] == 0, s


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_strided_transposed_and_broadcast_operands(dtype):
    x = RNG.standard_normal((6, 10)).astype(dtype)
    col = RNG.standard_normal((6, 1)).astype(dtype)
    row = RNG.standard_normal(10).astype(dtype)

    def f(x, col, row):
        return np.sqrt(np.abs(x.T[::2] * 2.0)) + col.T + row[::2][:, None]

    for got, want in run_both(f, x, col, row):
        close(got, want, dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(1, 1), (3, 7), (5, 64), (2, 3, 129)])
def test_row_reductions_with_prologue(dtype, shape):
    x = RNG.standard_normal(shape).astype(dtype)

    def f(x):
        m = x.max(axis=-1, keepdims=True)
        e = np.exp(x - m)
        s = e.sum(axis=-1, keepdims=True)
        mu = x.mean(axis=-1)
        return e / s, mu, np.min(x * 2.0, axis=-1)

    for got, want in run_both(f, x):
        for g, w in zip(got, want):
            close(g, w, dtype)
    assert framejit.stats()["reductions"] >= 3


def test_nan_propagates_through_max_and_min():
    x = np.array([[1.0, np.nan, 3.0], [np.inf, -np.inf, 0.0]], np.float32)

    def f(x):
        return x.max(axis=-1), np.maximum(x, 2.0), np.minimum(x, np.float32(-1.0) * x)

    for got, want in run_both(f, x):
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("mnk", [(1, 1, 1), (7, 17, 5), (64, 33, 130), (3, 1023, 17)])
def test_gemm(dtype, mnk):
    m, n, k = mnk
    a = RNG.standard_normal((m, k)).astype(dtype)
    b = RNG.standard_normal((k, n)).astype(dtype)
    bias = RNG.standard_normal(n).astype(dtype)

    def f(a, b, bias):
        return np.maximum(a @ b + bias, 0.0), a.T.T @ b, np.stack([a, a]) @ b

    tol = (1e-4 if dtype == np.float32 else 1e-11) * np.sqrt(k)
    for got, want in run_both(f, a, b, bias):
        for g, w in zip(got, want):
            assert g.shape == w.shape and g.dtype == w.dtype
            np.testing.assert_allclose(g, w, rtol=tol, atol=tol)
    assert framejit.stats()["gemms"] >= 3


def test_no_temporaries_in_a_fused_chain():
    import tracemalloc

    x = RNG.standard_normal(1 << 20).astype(np.float32)
    f = framejit.compile(lambda x: np.tanh(x * 0.5 + 0.25) * np.exp(-x * x))
    f(x)
    tracemalloc.start()
    tracemalloc.reset_peak()
    out = f(x)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak <= out.nbytes * 1.05 + 64 * 1024, (peak, out.nbytes)


@pytest.mark.parametrize("isa", ["scalar", "avx2"])
def test_forced_isa_levels(isa):
    """Every ISA level the code generator has gives NumPy's results (run in a fresh process:
    the level is read from FRAMEJIT_ISA once)."""
    code = textwrap.dedent(
        """
        import numpy as np, framejit
        rng = np.random.default_rng(3)
        for dt in (np.float32, np.float64):
            for n in (1, 5, 8, 13, 100):
                x = rng.standard_normal((3, n)).astype(dt)
                def f(x):
                    e = np.exp(x - x.max(axis=-1, keepdims=True))
                    return np.tanh(x) * np.sqrt(np.abs(x)) + e / e.sum(axis=-1, keepdims=True)
                got = framejit.compile(f)(x)
                want = f(x)
                tol = 2e-6 if dt == np.float32 else 1e-13
                np.testing.assert_allclose(got, want, rtol=tol, atol=tol)
        assert framejit.stats()["kernels"] > 0
        print("ok")
        """
    )
    env = dict(os.environ, FRAMEJIT_ISA=isa)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr
