"""Float reductions at least as accurate as NumPy's (issue 16, Note [Pairwise sums] in
runtime/reduction_executor.cpp): sum, mean, var and std of long rows, against math.fsum references
on adversarial inputs (constants, a huge value then many small ones, large offsets, alternating
signs). framejit's error must stay within twice NumPy's plus one ulp of the exact result."""
import math
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import framejit


def exact_sum(x):
    return math.fsum(np.asarray(x, np.float64).ravel().tolist())


def exact_var(x, ddof=0):
    v = np.asarray(x, np.float64).ravel()
    m = exact_sum(v) / v.size
    return math.fsum(((v - m) ** 2).tolist()) / (v.size - ddof)


def inputs(dtype, n):
    rng = np.random.default_rng(7)
    huge_then_tiny = np.ones(n, dtype)
    huge_then_tiny[0] = 1e8 if dtype == np.float32 else 1e17
    alternating = np.where(np.arange(n) % 2 == 0, 1.0, -1.0).astype(dtype) * (1 + rng.random(n).astype(dtype))
    return {
        "constant 0.1": np.full(n, 0.1, dtype),
        "huge then tiny": huge_then_tiny,
        "offset 1000": (rng.random(n) + 1000).astype(dtype),
        "alternating": alternating,
    }


def within(got, numpy_result, exact, magnitudes=None):
    """Within twice NumPy's error plus one ulp of the exact result. Where signs alternate, errors
    of either order are random draws: both are held to the pairwise bound instead, 32 ulps of the
    sum of magnitudes (Note [Pairwise sums])."""
    dtype = np.asarray(got).dtype
    err = abs(float(got) - exact)
    if magnitudes is not None:
        return err <= 32 * np.finfo(dtype).eps * magnitudes
    return err <= 2 * abs(float(numpy_result) - exact) + abs(float(np.spacing(np.asarray(exact, dtype))))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("case", ["constant 0.1", "huge then tiny", "offset 1000", "alternating"])
def test_whole_array_sum_mean_var_std(dtype, case):
    x = inputs(dtype, 1 << 21)[case]
    s, v = exact_sum(x), exact_var(x)
    mags = math.fsum(np.abs(x.astype(np.float64)).tolist()) if case == "alternating" else None
    for fn, exact, scale in ((lambda a: a.sum(), s, 1), (lambda a: a.mean(), s / x.size, x.size),
                             (lambda a: a.var(), v, None), (lambda a: a.std(), math.sqrt(v), None)):
        framejit.reset()
        got = framejit.compile(fn)(x)
        assert framejit.stats()["reductions"] >= 1  # the compiled kernels, not a NumPy call
        want = fn(x)
        bound = mags / scale if mags is not None and scale else None
        assert within(got, want, exact, bound), (case, float(got), float(want), exact)


def test_pairwise_error_is_logarithmic():
    # A million copies of 0.1 in float32: a single pass is off by ~1e-4 relative; pairwise ~1e-7.
    x = np.full(10**6, 0.1, np.float32)
    exact = exact_sum(x)
    got = framejit.compile(lambda a: a.sum())(x)
    assert abs(float(got) - exact) / exact < 2e-6


def test_rows_and_outer_reduced_dims():
    rng = np.random.default_rng(3)
    x = (rng.random((6, 50000)) + 100).astype(np.float32)
    got = framejit.compile(lambda a: a.sum(axis=1))(x)
    want = x.sum(axis=1)
    for i in range(x.shape[0]):
        assert within(got[i], want[i], exact_sum(x[i]))
    # Several reduced dims that are not one row in memory: one output, every block in one cascade.
    y = (rng.random((40, 30000)) + 7).astype(np.float32)[:, ::2]
    got = framejit.compile(lambda a: a.sum())(y)
    assert within(got, y.sum(), exact_sum(y))
    got = framejit.compile(lambda a: a.mean(axis=(0, 1), keepdims=True))(y)
    assert got.shape == (1, 1) and within(got[0, 0], y.mean(), exact_sum(y) / y.size)


def test_special_values_survive_blocks():
    x = np.ones(100000, np.float32)
    for v, check in ((np.nan, math.isnan), (np.inf, lambda r: r == math.inf)):
        y = x.copy()
        y[77777] = v
        assert check(float(framejit.compile(lambda a: a.sum())(y)))
    y = x.copy()
    y[10], y[90000] = np.inf, -np.inf
    assert math.isnan(float(framejit.compile(lambda a: a.sum())(y)))
    assert float(framejit.compile(lambda a: a.sum())(np.zeros(0, np.float32))) == 0.0


def test_strided_rows_are_pairwise_too():
    # A strided row runs the kernel's scalar loop: leaves of its own, blocks of 128 elements.
    x = np.full(1 << 22, 0.1, np.float32)[::2]
    exact = exact_sum(x)
    assert within(framejit.compile(lambda a: a.sum())(x), x.sum(), exact)
    assert within(framejit.compile(lambda a: a.mean())(x), x.mean(), exact / x.size)


@pytest.mark.parametrize("isa", ["scalar", "avx2"])
def test_every_isa_level(isa):
    """The scalar loop and the vector loops each keep their leaves (a fresh process: FRAMEJIT_ISA
    is read once)."""
    code = textwrap.dedent(
        """
        import math, numpy as np, framejit
        for dt in (np.float32, np.float64):
            x = np.full(1 << 21, 0.1, dt)
            exact = math.fsum(x.astype(np.float64).tolist())
            got, want = framejit.compile(lambda a: a.sum())(x), x.sum()
            ulp = float(np.spacing(dt(exact)))
            assert abs(float(got) - exact) <= 2 * abs(float(want) - exact) + ulp, (dt, got, want, exact)
        print("ok")
        """
    )
    env = dict(os.environ, FRAMEJIT_ISA=isa)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stdout + r.stderr


def test_row_chains_sum_pairwise():
    # softmax and layer norm over long rows run as row chains (the row kernels row by row).
    x = np.full((3, 1 << 20), 0.1, np.float32)
    x[:, ::3] = 0.3

    def softmax(a):
        e = np.exp(a - a.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)

    def layernorm(a):
        mu = a.mean(axis=-1, keepdims=True)
        return (a - mu) / np.sqrt(((a - mu) ** 2).mean(axis=-1, keepdims=True) + 1e-5)

    for f in (softmax, layernorm):
        ref = f(x.astype(np.float64))
        scale = np.abs(ref).max()
        err_np = np.abs(f(x) - ref).max() / scale
        err_fj = np.abs(framejit.compile(f)(x) - ref).max() / scale
        assert err_fj <= 2 * err_np + np.finfo(np.float32).eps, (f.__name__, err_fj, err_np)
