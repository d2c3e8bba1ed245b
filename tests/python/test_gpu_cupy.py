"""CuPy arrays under framejit (issue 14, Note [CuPy arrays], Note [CuPy through NumPy's table]):
NumPy-style code calling cupy.* captured through NumPy's op table, compiled by the CUDA backend,
results as cupy.ndarrays from CuPy's pool, launches on CuPy's current stream. Every result is
checked against CuPy's eager run of the same code. Skipped without CuPy and a CUDA device (the GPU
machine runs it: tools/device_build.sh)."""
import numpy as np
import pytest

import framejit

cp = pytest.importorskip("cupy")
pytestmark = pytest.mark.skipif(not framejit.cuda.is_available() or cp.cuda.runtime.getDeviceCount() == 0,
                                reason="no CUDA device for CuPy and framejit")


def randn(*shape, dtype=np.float32, seed=0):
    return cp.asarray(np.random.default_rng(seed).standard_normal(shape).astype(dtype))


def check(fn, *args, rtol=1e-5, atol=1e-5, graphs=1, kernels=True):
    """fn compiled against fn eager on the same CuPy arrays: same type, device, dtype, shape,
    values; the whole function one graph, run by generated kernels (no library call)."""
    framejit.reset()
    want = fn(*args)
    cf = framejit.compile(fn, fullgraph=True)
    got = cf(*args)
    got2 = cf(*args)  # the cache hit
    for g in (got, got2):
        assert type(g) is cp.ndarray, type(g)
        assert g.device == want.device, (g.device, want.device)
        assert g.dtype == want.dtype and g.shape == want.shape, (g.dtype, want.dtype, g.shape, want.shape)
        np.testing.assert_allclose(cp.asnumpy(g), cp.asnumpy(want), rtol=rtol, atol=atol)
    st = framejit.stats()
    assert st["captured"] == graphs
    assert st["cache_hits"] >= 1
    if kernels:
        assert st["kernels"] + st["reductions"] + st["gemms"] >= 1 and st["extern_calls"] == 0, st
    return got


def test_pointwise_chains():
    x = randn(1000, 300)
    check(lambda x: cp.tanh(x) * cp.exp(-x) + 1, x)
    check(lambda x: cp.maximum(x, 0) ** 2 - cp.sqrt(cp.abs(x)), x)
    check(lambda x: cp.where(x > 0, x, 0.1 * x).astype(cp.float64) / 3, x)
    check(lambda x: x.T * 2 + 1, x)  # a transposed operand
    check(lambda x: x[::2, 1:-1] * x[1::2, :-2], x)  # strided views
    # Note [Payne–Hanek in PTX]: x * 1e5 reaches past the inline reduction's 2^16.
    check(lambda x: cp.sin(x) * cp.cos(x * 1e5) + cp.tan(x * 0.5), x, rtol=1e-5, atol=1e-5)
    check(lambda x: cp.sin(x * 1e9) + cp.cos(x), x.astype(cp.float64), rtol=1e-12, atol=1e-12)


def test_reductions_give_0d_arrays_not_numpy_scalars():
    x = randn(500, 700)
    check(lambda x: x.sum(axis=1) + cp.max(x, axis=0)[:500], x, rtol=1e-4, atol=1e-4)
    r = check(lambda x: x.mean(), x, rtol=1e-4, atol=1e-5)
    assert r.ndim == 0
    r = check(lambda x: x[3, 4] * 2 + cp.argmax(x), x)
    assert r.ndim == 0 and r.dtype == cp.float64  # float32 + int64, as CuPy promotes


def test_row_chains():
    x = randn(256, 1000)
    w, b = randn(1000, seed=1), randn(1000, seed=2)

    def softmax(x):
        e = cp.exp(x - x.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)

    def layernorm(x, w, b):
        mu = x.mean(axis=-1, keepdims=True)
        var = ((x - mu) ** 2).mean(axis=-1, keepdims=True)
        return (x - mu) / cp.sqrt(var + 1e-5) * w + b

    check(softmax, x, rtol=1e-5, atol=1e-6)
    check(layernorm, x, w, b, rtol=1e-4, atol=1e-4)


# The CUDA backend's dtypes (issue 14: float32 above, these, and the half types).
@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.uint8, np.bool_, np.float64])
def test_dtypes_follow_cupy(dtype):
    x = cp.asarray((np.arange(60).reshape(6, 10) % 7).astype(dtype))
    check(lambda x: x * 2 + 1, x)
    check(lambda x: x / 3, x)
    check(lambda x: x.sum(axis=0), x)
    check(lambda x: (x > 2) & (x < 5), x)
    if dtype != np.bool_:
        check(lambda x: x * 2.5 - x.astype(cp.float32), x)


def test_products():
    a, b = randn(64, 96), randn(96, 40, seed=1)
    check(lambda a, b: a @ b, a, b, rtol=1e-4, atol=1e-4)
    check(lambda a, b: cp.maximum(cp.dot(a, b) + 1, 0), a, b, rtol=1e-4, atol=1e-4)


def test_creation_on_cupys_device():
    # Note [Creation without the library]: allocated through CuPy's pool, filled by driver memsets.
    x = randn(50, 20)
    check(lambda x: cp.zeros_like(x) + x * 2, x, kernels=False)
    check(lambda x: cp.ones_like(x) - x, x, kernels=False)
    check(lambda x: cp.full_like(x, 0.1) * x, x, kernels=False)
    check(lambda x: cp.full(x.shape, -3, dtype=cp.int64) + x.astype(cp.int64), x, kernels=False)
    for dtype in (cp.float64, cp.float32, cp.int32, cp.uint8, cp.bool_):
        framejit.reset()
        f = framejit.compile(lambda n: cp.ones((n, 3), dtype=dtype) * 2, fullgraph=True)
        r = f(5)
        assert type(r) is cp.ndarray and r.shape == (5, 3) and r.dtype == (cp.ones(1, dtype) * 2).dtype
        np.testing.assert_array_equal(cp.asnumpy(r), cp.asnumpy(cp.ones((5, 3), dtype=dtype) * 2))
        z = framejit.compile(lambda n: cp.zeros(n, dtype=dtype), fullgraph=True)(7)
        np.testing.assert_array_equal(cp.asnumpy(z), np.zeros(7, dtype))


def test_new_sizes_do_not_recompile():
    framejit.reset()
    f = framejit.compile(lambda x: cp.tanh(x) * x)
    for n in (10, 1000, 77):
        x = randn(n, 3, seed=n)
        np.testing.assert_allclose(cp.asnumpy(f(x)), cp.asnumpy(cp.tanh(x) * x), rtol=1e-6)
    assert framejit.stats()["captured"] == 1


def test_runs_on_cupys_current_stream():
    x = randn(512, 512)
    cf = framejit.compile(lambda y: cp.tanh(y) * 2 + y.sum(axis=1, keepdims=True))
    want = cp.tanh(x) * 2 + x.sum(axis=1, keepdims=True)
    s = cp.cuda.Stream(non_blocking=True)
    with s:
        # Queued behind a long product on s: a launch on another stream would read y too early.
        y = x.copy()
        for _ in range(20):
            y = (y @ x) * 0 + x
        got = cf(y)
    s.synchronize()
    np.testing.assert_allclose(cp.asnumpy(got), cp.asnumpy(want), rtol=1e-4, atol=1e-4)


def test_guards_see_dtype_layout_and_type():
    framejit.reset()
    f = framejit.compile(lambda x: x * 3 + 1)
    a = randn(8, 6)
    for t in (a, a.astype(cp.float64), a.T, a):
        np.testing.assert_allclose(cp.asnumpy(f(t)), cp.asnumpy(t * 3 + 1), rtol=1e-6)
    assert framejit.stats()["captured"] == 3
    # A NumPy array is another kind of array: NumPy's graph, NumPy's result.
    r = f(cp.asnumpy(a))
    assert type(r) is np.ndarray


def test_numpy_and_cupy_arrays_in_one_function_keep_cupys_error():
    f = framejit.compile(lambda x, y: x + y)
    with pytest.raises(TypeError):
        f(randn(3), np.ones(3, np.float32))


def test_numpy_functions_on_cupy_arrays_break_with_a_reason():
    x = randn(10)

    def fn(x):
        y = x * 2
        return np.exp(y) + 1  # NumPy hands this to CuPy (__array_ufunc__)

    framejit.reset()
    e = framejit.explain(fn)(x)
    assert any("numpy.exp in a graph of CuPy arrays" in r for r in e.break_reasons), e.break_reasons
    got = framejit.compile(fn)(x)
    assert type(got) is cp.ndarray
    np.testing.assert_allclose(cp.asnumpy(got), cp.asnumpy(cp.exp(x * 2) + 1), rtol=1e-6)


def test_supported_ops_lists_cupy():
    ops = framejit.supported_ops()
    assert "cupy.exp" in ops and "cupy.sum" in ops and "cupy.zeros" in ops


def check_writes(fn, *args, rtol=1e-6, atol=1e-6, graphs=1):
    """fn compiled against fn eager, each on its own copies of the CuPy arguments: the same result
    and the same contents of every argument afterwards (Note [Stores on a device]); a returned
    argument is that argument itself."""
    framejit.reset()

    def copies():
        return [a.copy() if isinstance(a, cp.ndarray) else a for a in args]

    mine = copies()
    want = fn(*mine)
    cf = framejit.compile(fn, fullgraph=True)
    for _ in range(2):  # the trace's run and the cache hit's
        theirs = copies()
        got = cf(*theirs)
        if want is None:
            assert got is None
        elif any(want is a for a in mine):
            assert got is theirs[[k for k, a in enumerate(mine) if a is want][0]]
        else:
            assert type(got) is type(want) and got.dtype == want.dtype and got.shape == want.shape
            np.testing.assert_allclose(cp.asnumpy(got), cp.asnumpy(want), rtol=rtol, atol=atol)
        for a, b in zip(theirs, mine):
            if isinstance(a, cp.ndarray):
                np.testing.assert_allclose(cp.asnumpy(a), cp.asnumpy(b), rtol=rtol, atol=atol)
    st = framejit.stats()
    assert st["captured"] == graphs and st["extern_calls"] == 0, st
    return got


def test_writes_into_arguments():
    x, y = randn(64, 80), randn(64, 80, seed=1)

    def stencil(x):  # reads what it writes: the store goes through a copy
        x[1:-1] = 0.5 * (x[:-2] + x[2:])
        return x

    def columns(x, y):
        y[:, 1:] = cp.tanh(x[:, :-1])
        y[:, 0] = 0

    def inplace(x):
        x += 1
        x[::2] *= 3
        x[:, 5] = x[:, 6]
        return x.sum(axis=0)

    check_writes(stencil, x)
    check_writes(columns, x, y)
    check_writes(inplace, x, rtol=1e-5, atol=1e-4)

    def strided(x):
        x[:, 2:40:3] = x[:, 3:41:3] * 2

    check_writes(strided, x)
    # Other dtypes: the value is cast as CuPy casts it.
    i = cp.arange(100, dtype=cp.int32).reshape(10, 10)

    def fill(i):
        i[2:5] = 7

    def cast(i, x):
        i[:] = (x[:10, :10] * 10).astype(cp.int32)

    check_writes(fill, i)
    check_writes(cast, i, x)


def test_writes_into_intermediates_and_views():
    x = randn(50, 40)

    def intermediate(x):
        y = x * 2
        y[:, 0] = 0
        y[3] = y[4]
        return y

    def view(x):
        v = x[2:]
        v[0] = 7
        return v * 1 + x[:3].sum()

    check_writes(intermediate, x)
    check_writes(view, x, rtol=1e-5, atol=1e-5)


def test_element_writes():
    x = randn(20, 20)

    def swap(x, i, j):
        x[i, j] = x[j, i] + 1
        return x

    framejit.reset()
    f = framejit.compile(swap)
    for i, j in ((1, 2), (5, 3), (-1, 0)):
        a, b = x.copy(), x.copy()
        assert f(a, i, j) is a
        swap(b, i, j)
        np.testing.assert_array_equal(cp.asnumpy(a), cp.asnumpy(b))
    # Out of range: CuPy's IndexError, and nothing written.
    a = x.copy()
    with pytest.raises(IndexError):
        f(a, 40, 0)
    np.testing.assert_array_equal(cp.asnumpy(a), cp.asnumpy(x))


def test_numpy_scalar_arguments():
    # Note [NumPy scalars in CuPy graphs]: strong 0-d operands, as CuPy 13+ promotes them.
    a, c = randn(30, 40), randn(40, 50, seed=1)
    out = randn(30, 50, seed=2)

    def gemm(alpha, beta, C, A, B):
        C[:] = alpha * A @ B + beta * C

    check_writes(gemm, np.float64(1.5), np.float64(1.2), out, a, c, rtol=1e-5, atol=1e-5)
    check_writes(gemm, np.float32(1.5), np.float32(1.2), out, a, c, rtol=1e-5, atol=1e-5)
    r = check(lambda s, x: x * s + s, np.float64(0.5), a)
    assert r.dtype == cp.float64  # float32 * numpy.float64 is float64 under NEP 50
    r = check(lambda n, x: x * n - n, np.int64(3), a)
    assert r.dtype == cp.float64  # float32 and int64: float64
    # Arithmetic on NumPy scalars alone is NumPy's, on the host: a stated break, CuPy's result.
    framejit.reset()
    fn = lambda s, x: (s * 2) * x  # noqa: E731
    e = framejit.explain(fn)(np.float64(3.0), a)
    assert any("NumPy scalars" in r for r in e.break_reasons), e.break_reasons
    np.testing.assert_allclose(cp.asnumpy(framejit.compile(fn)(np.float64(3.0), a)), cp.asnumpy(6.0 * a), rtol=1e-6)


def test_matrix_vector_products_are_reductions():
    # Note [Vector products]: on a device every form is a reduction of the broadcast product.
    A, x, y = randn(300, 200), randn(200, seed=1), randn(300, seed=2)
    B = randn(3, 300, 200, seed=3)
    tol = dict(rtol=1e-4, atol=1e-4)
    check(lambda A, x: A @ x, A, x, **tol)
    check(lambda A, y: y @ A, A, y, **tol)
    check(lambda A, x: cp.dot(A, x) * 2 + 1, A, x, **tol)
    check(lambda B, x: B @ x, B, x, **tol)
    check(lambda B, y: y @ B, B, y, **tol)
    check(lambda A, x, y: 1.5 * (A @ x) + 1.2 * (A.T @ y)[:1].sum(), A, x, y, **tol)  # gesummv-like
    check(lambda A, x: A.astype(cp.float64) @ x, A, x, rtol=1e-10, atol=1e-10)  # cast to float64 first


def test_copies_are_kernels():
    x = randn(64, 80)

    def jacobi(u):
        un = u.copy()
        u[1:-1, 1:-1] = 0.25 * (un[:-2, 1:-1] + un[2:, 1:-1] + un[1:-1, :-2] + un[1:-1, 2:])
        return un

    check_writes(jacobi, x, rtol=1e-6, atol=1e-6)
    r = check(lambda x: cp.copy(x) * 2 + x.copy(), x)
    assert r.flags.c_contiguous


def test_views_handed_out_are_cupys_own():
    # check_device_program: a view the graph returns is made by CuPy's own call over its memory.
    x = randn(50, 40)
    r = check(lambda x: (x * 2).T, x, kernels=False)
    assert r.flags.f_contiguous
    r = check(lambda x: (x + 1)[::2, 1:].reshape(-1), x[:, :21], kernels=False)
