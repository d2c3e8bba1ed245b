"""NumPy scalars in compiled code (issue 12, item 6): a numpy.float64 argument is a run-time input
that kernels read, NumPy 1.x's value-based casting is guarded by value range, and ufuncs of
constants fold so `np.sqrt(2 / np.pi) * x32` stays float32 and in one graph."""

import numpy as np
import pytest

import framejit

NUMPY1 = np.lib.NumpyVersion(np.__version__) < "2.0.0"


def _same(got, want):
    assert type(got) is type(want)
    if isinstance(want, np.ndarray):
        assert got.dtype == want.dtype and got.shape == want.shape
        # Fused float32 kernels round differently from NumPy's op-by-op loops (1 + tanh near -1
        # cancels): a few float32 ulps of the operands' scale.
        tol = 1e-5 if want.dtype == np.float32 else 1e-12
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol)
    else:
        assert got == want


def affine(x, a):
    return x * a + 1.0


@pytest.mark.parametrize("a", [np.float64(2.0), np.float64(-3.5), np.float32(5.0), np.int64(3), np.int32(-2)])
def test_numpy_scalar_argument_is_read_by_the_kernel(a):
    x = np.linspace(-2, 2, 12, dtype=np.float32).reshape(3, 4)
    framejit.reset()
    f = framejit.compile(affine)
    for _ in range(2):  # the cold call and the cache hit
        _same(f(x, a), affine(x, a))
    stats = framejit.stats()
    assert stats["captured"] == 1 and stats["graph_breaks"] == 0
    assert stats["cache_hits"] == 1
    assert stats["extern_calls"] == 0, "the scalar should be a kernel operand, not a NumPy call"


def test_new_value_of_a_numpy_scalar_does_not_recompile():
    x = np.ones(16, dtype=np.float32)
    framejit.reset()
    f = framejit.compile(affine)
    for v in (2.0, 3.0, -7.25, 1e10):
        _same(f(x, np.float64(v)), affine(x, np.float64(v)))
    assert framejit.stats()["captured"] == 1


@pytest.mark.skipif(not NUMPY1, reason="value-based casting is NumPy 1.x's rule")
def test_value_based_casting_of_a_numpy_scalar_is_guarded():
    x = np.ones(8, dtype=np.float32)
    framejit.reset()
    f = framejit.compile(affine)
    small, huge = np.float64(2.0), np.float64(1e300)  # huge does not fit float32: float64 result
    _same(f(x, small), affine(x, small))
    got = f(x, huge)
    _same(got, affine(x, huge))
    assert got.dtype == np.float64
    _same(f(x, small), affine(x, small))  # the first entry still serves small values
    assert framejit.stats()["captured"] == 2


def gelu(x):
    return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x**3)))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_gelu_is_one_graph(dtype):
    x = np.linspace(-4, 4, 33, dtype=dtype)
    e = framejit.explain(gelu)(x)
    assert e.graph_count == 1 and not e.breaks
    framejit.reset()
    f = framejit.compile(gelu)
    for _ in range(2):
        _same(f(x), gelu(x))
    assert framejit.stats()["extern_calls"] == 0


def scalar_results(x):
    c = np.sqrt(2.0)
    return x * c, c, c * 2.0, np.exp(1)


def test_folded_constants_keep_numpys_types():
    x = np.arange(5, dtype=np.float32)
    f = framejit.compile(scalar_results)
    for _ in range(2):
        got, want = f(x), scalar_results(x)
        assert len(got) == len(want)
        for g, w in zip(got, want):
            _same(g, w)


def warns_on_constants(x):
    return x * np.log(0.0)  # -inf with a divide-by-zero warning: not folded


def test_a_constant_that_warns_is_not_folded():
    x = np.ones(3)
    with np.errstate(divide="raise"):
        with pytest.raises(FloatingPointError):
            warns_on_constants(x)
        with pytest.raises(FloatingPointError):
            framejit.compile(warns_on_constants)(x)


def scaled_by_constants(x):
    return x * np.float32(0.1) + np.float64(1.5) - np.int64(2) * np.int8(3)


def scaled_by_runtime(x, v, n):
    return (x + np.float32(v)) * np.float32(n), np.int64(n), np.float32(x.max())


@pytest.mark.skipif(not NUMPY1, reason="NumPy 2 types NumPy scalar constants strongly (not captured yet)")
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int8, np.int64])
def test_numpy_scalar_types_called_in_the_function(dtype):
    # numpy.float32(0.1) folds to a constant whose exact value the kernel reads; numpy.float32(v)
    # of a run-time value is a cast to a NumPy scalar; both keep NumPy's result types.
    x = (np.arange(12).reshape(3, 4) - 5).astype(dtype)
    framejit.reset()
    # A run-time NumPy scalar's value decides NumPy 1.x's result type against an integer array
    # (value-based casting): that case breaks, correctly; float arrays do not depend on it.
    cases = [(scaled_by_constants, (x,))]
    if np.dtype(dtype).kind == "f":
        cases.append((scaled_by_runtime, (x, 0.25, 3)))
    for fn, args in cases:
        f = framejit.compile(fn)
        for _ in range(2):
            got, want = f(*args), fn(*args)
            for g, w in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,)):
                _same(g, w)
        e = framejit.explain(fn)(*args)
        if dtype == np.int8 and fn is scaled_by_constants:
            # int8 * numpy.float32(0.1) is float32 in NumPy 1.x, int8 * 0.1 float64: a graph
            # argument cannot say numpy.float32, so that statement runs in CPython.
            assert "reads differently from a Python number" in e.breaks[0].reason
        else:
            assert e.graph_count == 1 and not e.breaks, str(e)


def test_numpy_scalar_type_with_bad_arguments_raises_as_eager():
    def bad(x):
        return x + np.float32(1.0, 2.0)

    with pytest.raises(TypeError):
        bad(np.ones(3))
    with pytest.raises(TypeError):
        framejit.compile(bad)(np.ones(3))


def smoothing_kernel(x, h):
    # SPH's Gaussian kernel: a run-time float times a NumPy scalar constant (np.sqrt(np.pi)).
    return (1.0 / (h * np.sqrt(np.pi))) ** 3 * np.exp(-(x**2) / h**2)


def scalar_mix(h):
    return h * np.sqrt(np.pi), np.float32(2.0) * h, 3 - np.int64(2) * h


@pytest.mark.parametrize("h", [0.1, 0.7, 2, -3])
def test_a_run_time_number_with_a_numpy_scalar_constant(h):
    x = np.linspace(-1.0, 1.0, 11)
    framejit.reset()
    for fn, args in ((smoothing_kernel, (x, h)), (scalar_mix, (h,))):
        f = framejit.compile(fn)
        for _ in range(2):
            got, want = f(*args), fn(*args)
            for g, w in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,)):
                assert type(g) is type(w)
                np.testing.assert_allclose(g, w, rtol=1e-12)
    e = framejit.explain(smoothing_kernel)(x, h)
    assert e.graph_count == 1 and not e.breaks, str(e)


def test_comparison_with_a_0d_array_casts_by_value_as_numpy_does():
    # NumPy 1.x compares a float32 array with a 0-d float64 array in float32 (value-based casting);
    # found by the fuzzer (seed 8, program 2838).
    x1 = np.array(0.1)
    for x0 in (np.full((2, 3), np.float32(0.1)), np.zeros((3,), np.float32)):
        def f(x0, x1):
            return x0 <= x1, x1 > x0, x0 == x1
        want = f(x0, x1)
        got = framejit.compile(f)(x0, x1)
        for w, g in zip(want, got):
            np.testing.assert_array_equal(g, w)


def test_float16_compared_with_a_float_past_its_range():
    # NumPy 1.x compares float16 with 1e10 in float32 (by the value), where float16 would make it
    # inf and find it equal to an inf element; found by the fuzzer (seed 309, program 1503).
    x = np.array([np.inf, 1.0, -np.inf, 70000.0], np.float32)

    def f(x):
        h = x.astype(np.float16)
        return 1e10 == h, h < 1e10, h >= 0.1

    framejit.reset()
    for g, w in zip(framejit.compile(f)(x), f(x)):
        np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize(
    "s", [np.float64(0.5), np.float32(0.25), np.int64(2**60 + 1), np.int32(-3), np.uint8(7), np.bool_(True)], ids=repr
)
def test_comparisons_of_numpy_scalars_with_float64_and_int64_arrays_fuse(s):
    # A NumPy scalar's value cannot change the loop beside float64 arrays (float64), nor an integer
    # scalar's beside int64 arrays (int64): such comparisons fuse (azimint's r1 <= radius, with r1 a
    # NumPy scalar from radius.max()); float32 arrays keep NumPy's value-based loop, unfused.
    x = np.linspace(-4, 4, 101)
    i = np.arange(-50, 51, dtype=np.int64) * (2**54)
    x32 = np.array([16777216.0, 16777218.0, -1.0], np.float32)

    def f(x, i, s):
        r = x.max() * 0.125
        return np.logical_and(r <= x, x < s), i >= s, s == x, (x > s) & (r < x), (x * r) != s

    framejit.reset()
    compiled = framejit.compile(f, backend="jit")
    for _ in range(2):
        for g, w in zip(compiled(x, i, s), f(x, i, s)):
            np.testing.assert_array_equal(g, w)
    assert framejit.stats()["extern_calls"] == (1 if isinstance(s, np.floating) else 0), framejit.stats()

    def g(x32, s):
        return x32 <= s, s > x32, x32 == np.float64(16777217.0)

    for got, want in zip(framejit.compile(g)(x32, s), g(x32, s)):
        np.testing.assert_array_equal(got, want)
