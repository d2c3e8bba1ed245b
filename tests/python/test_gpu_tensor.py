"""framejit.Tensor on a CUDA device: transfers, ops as PTX kernels, compiled functions, guards,
and the errors for what does not run there yet. Skipped without a GPU (the GPU machine runs it:
tools/device_build.sh --gpu)."""
import math

import numpy as np
import pytest

import framejit

pytestmark = pytest.mark.skipif(not framejit.cuda.is_available(),
                                reason="no CUDA device: " + framejit.cuda.why_unavailable())


def cuda(a):
    return framejit.tensor(a, device="cuda")


def host(t):
    return np.asarray(t.cpu())


def same(a, b):
    """Bitwise equality, NaNs equal."""
    a, b = np.asarray(a), np.asarray(b)
    assert a.dtype == b.dtype and a.shape == b.shape, (a.dtype, b.dtype, a.shape, b.shape)
    if a.dtype.kind == "f":
        assert np.array_equal(a, b, equal_nan=True), np.argwhere(~((a == b) | (np.isnan(a) & np.isnan(b))))[:5]
    else:
        assert np.array_equal(a, b)


@pytest.mark.parametrize("dtype", ["bool", "uint8", "int32", "int64", "float32", "float64"])
def test_round_trip(dtype):
    a = (np.arange(-50, 50) % 7).astype(dtype).reshape(10, 10)
    t = cuda(a)
    assert t.device == "cuda:0" and t.shape == (10, 10) and t.dtype == dtype
    same(host(t), a)
    same(host(t.T), a.T)                   # a strided device view comes back contiguous
    same(host(t[::-2, 1::3]), a[::-2, 1::3])
    same(host(framejit.tensor(a.T, device="cuda")), a.T)
    assert t.cuda() is t and t.to("cuda:0") is t
    with pytest.raises(RuntimeError, match="cpu"):
        t.tolist()


def rng_array(shape, dtype, seed=0):
    r = np.random.default_rng(seed)
    if np.dtype(dtype).kind == "f":
        a = r.standard_normal(shape).astype(dtype) * 3
        a.flat[::17] = np.nan
        a.flat[1::23] = np.inf
        return a
    if dtype == "bool":
        return r.integers(0, 2, shape).astype(bool)
    return r.integers(-100 if dtype != "uint8" else 0, 100, shape).astype(dtype)


UNARY = [
    lambda x: -x, lambda x: abs(x), lambda x: np.exp(x), lambda x: np.log(x), lambda x: np.tanh(x),
    lambda x: np.sqrt(x), lambda x: np.log1p(x), lambda x: np.expm1(x), lambda x: np.arctan(x),
    lambda x: np.floor(x), lambda x: 1 / (1 + np.exp(-x)), lambda x: x * 2.5 - 1,
    lambda x: np.maximum(x, 0.5), lambda x: (x > 0.25).astype(np.float32), lambda x: x ** 2,
]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("k", range(len(UNARY)))
def test_float_ops_match_the_cpu_kernels(dtype, k):
    # The GPU and x86 kernels share their math routines: same bits (Note [One math library]),
    # except float32 exp, which the GPU takes from its ex2 unit: within 2 ulp of the exact value
    # on each side (Note [exp through the GPU's ex2]).
    fn = framejit.compile(UNARY[k])
    a = rng_array((37, 129), dtype)
    with np.errstate(all="ignore"):
        got, want = host(fn(cuda(a))), np.asarray(fn(framejit.tensor(a)))
    if dtype == "float32" and k in (2, 10):
        within_ulps(got, want, 4)
    else:
        same(got, want)


def within_ulps(a, b, n):
    """Same NaNs, infinities and signs; finite values within n ulp (float32)."""
    assert a.dtype == b.dtype == np.float32 and a.shape == b.shape
    nan = np.isnan(a)
    assert np.array_equal(nan, np.isnan(b))
    ia, ib = a[~nan].view(np.int32).astype(np.int64), b[~nan].view(np.int32).astype(np.int64)
    assert np.array_equal(ia < 0, ib < 0)
    d = np.abs(ia - ib)
    assert d.max(initial=0) <= n, (d.max(), np.argwhere(d > n)[:5])


@pytest.mark.parametrize("dtype", ["uint8", "int32", "int64"])
def test_int_ops(dtype):
    a, b = rng_array((5, 203), dtype, 1), rng_array((5, 203), dtype, 2)

    def f(x, y):
        return (x + y) * 3 - (x // (y | 1)) + (x % 7), x < y, np.where(x > y, x, y)

    cf = framejit.compile(f)
    got = cf(cuda(a), cuda(b))
    want = f(framejit.tensor(a), framejit.tensor(b))
    for g, w in zip(got, want):
        same(host(g), np.asarray(w))


def test_broadcasting_layouts_and_casts():
    x = rng_array((64, 48), "float32")
    bias = rng_array((48,), "float32", 3)
    col = rng_array((64, 1), "float64", 4)

    def f(x, b, c):
        return np.tanh(x * 0.5 + b) * c, (x + b).astype(np.int32)

    cf = framejit.compile(f)
    for xs in (x, x.T.copy().T, x[:, ::2].copy(), x[::-1]):
        with np.errstate(all="ignore"):
            got = cf(cuda(xs), cuda(bias[: xs.shape[1]]), cuda(col))
            want = f(framejit.tensor(xs), framejit.tensor(bias[: xs.shape[1]]), framejit.tensor(col))
        for g, w in zip(got, want):
            same(host(g), np.asarray(w))
    # A transposed device view as the input (strided reads on the device).
    t = cuda(x.T.copy())
    with np.errstate(all="ignore"):
        same(host(cf(t.T, cuda(bias), cuda(col))[0]),
             np.asarray(f(framejit.tensor(x), framejit.tensor(bias), framejit.tensor(col))[0]))


def test_large_and_odd_sizes():
    for n in (1, 3, 4, 5, 1023, 1 << 20, (1 << 20) + 3):
        a = rng_array((n,), "float32", n)
        with np.errstate(all="ignore"):
            same(host(cuda(a) * 2 + 1), (a * 2 + 1).astype(np.float32))


def test_guards_keep_devices_apart():
    f = framejit.compile(lambda x: x * 3 + 1)
    a = np.arange(10, dtype=np.float32)
    same(np.asarray(f(framejit.tensor(a))), a * 3 + 1)
    same(host(f(cuda(a))), a * 3 + 1)
    same(np.asarray(f(framejit.tensor(a))), a * 3 + 1)


def test_what_does_not_run_on_the_device_says_so():
    t = cuda(np.ones((4, 4), np.float32))
    with pytest.raises(NotImplementedError, match="on cuda:0"):
        ti = cuda(np.ones((4, 4), np.int32))
        np.matmul(ti, ti)  # integer products are no cuBLAS work
    with pytest.raises(Exception, match="cuda|device"):
        t + framejit.tensor(np.ones((4, 4), np.float32))
    # Float % and // run as a host loop where no JIT kernel does: a device tensor is refused, not
    # read through its device pointer (the fuzzer's --device cuda found the crash).
    with pytest.raises(NotImplementedError, match="cuda:0"):
        t % t


def test_one_element_comes_to_the_host_as_torch_does():
    t = cuda(np.array([[2.5]], np.float32))
    assert t.item() == 2.5 and float(t) == 2.5 and int(t) == 2 and bool(t)
    assert cuda(np.array(7, np.int64)).item() == 7
    with pytest.raises(ValueError, match="elements"):
        cuda(np.ones(3, np.float32)).item()


def test_cuda_array_interface_and_stats():
    a = np.arange(12, dtype=np.float64).reshape(3, 4)
    t = cuda(a)
    cai = t.__cuda_array_interface__
    assert cai["shape"] == (3, 4) and cai["typestr"] == "<f8" and cai["version"] == 3
    assert cai["data"][0] == t.data_ptr() and cai["strides"] is None
    assert cuda(a).T.__cuda_array_interface__["strides"] == (8, 32)
    with pytest.raises(AttributeError):
        framejit.tensor(a).__cuda_array_interface__
    framejit.reset()
    (cuda(a) * 7.25).cpu()
    s = framejit.stats()
    assert s["cuda_modules_loaded"] >= 1 and s["ptx_jit_ms"] > 0 and s["device_bytes_in_use"] >= 0
    framejit.cuda.synchronize()


# ---- reductions ----------------------------------------------------------------------------------

def finite_array(shape, dtype, seed=0):
    r = np.random.default_rng(seed)
    if np.dtype(dtype).kind == "f":
        return (r.standard_normal(shape) * 3).astype(dtype)
    return rng_array(shape, dtype, seed)


def close(got, want, dtype, exact):
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, want.dtype, got.shape, want.shape)
    if exact or got.dtype.kind != "f":
        same(got, want)
    else:
        np.testing.assert_allclose(got, want, rtol=2e-5 if dtype == "float32" else 1e-12, atol=1e-5 if dtype == "float32" else 1e-12)


AXES = [None, 0, 1, 2, -1, (0, 2)]


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64", "uint8", "bool"])
@pytest.mark.parametrize("name", ["sum", "prod", "max", "min", "mean", "var", "std", "argmax", "argmin"])
def test_reductions_match_the_cpu(dtype, name):
    # The same reductions as the x86 kernels: exact where the order of combination cannot matter.
    if name in ("mean", "var", "std") and dtype == "bool":
        pytest.skip("NumPy has no bool mean loop")
    for special in (False, True):
        a = rng_array((33, 70, 5), dtype, 5) if special else finite_array((33, 70, 5), dtype, 6)
        if name == "prod" and dtype.startswith("float"):
            a = (1 + a / 64).astype(dtype)
        for axis in AXES:
            if name.startswith("arg") and isinstance(axis, tuple):
                continue
            g, c = cuda(a), framejit.tensor(a)
            with np.errstate(all="ignore"):
                got = getattr(g, name)(axis=axis)
                want = getattr(c, name)(axis=axis)
            exact = name in ("max", "min", "argmax", "argmin")
            close(host(got) if isinstance(got, framejit.Tensor) else got, np.asarray(want), dtype, exact)


def test_reduction_layouts_and_sizes():
    # Views, keepdims, a split full reduction, long and short rows and columns.
    a = finite_array((512, 300), "float32", 1)
    t = cuda(a)
    for view, ref in ((t.T, a.T), (t[::3, 1::2], a[::3, 1::2]), (t[:, ::-1], a[:, ::-1])):
        close(host(view.sum(axis=1)), a.dtype.type(0) + ref.sum(axis=1, dtype=np.float64).astype(np.float32), "float32", False)
        same(host(view.max(axis=0, keepdims=True)), ref.max(axis=0, keepdims=True))
        same(host(view.argmin(axis=1)), ref.argmin(axis=1))
    big = finite_array((1 << 22) + 5, "float32", 2)
    got = cuda(big).sum()
    np.testing.assert_allclose(float(np.asarray(got.cpu())), big.astype(np.float64).sum(), rtol=1e-5)
    same(np.asarray(cuda(big).argmax().cpu()), np.asarray(big.argmax()))
    tall = finite_array((300000, 3), "float64", 3)
    np.testing.assert_allclose(host(cuda(tall).mean(axis=0)), tall.mean(axis=0), rtol=1e-12)
    ints = rng_array((1000, 1000), "int32", 4)
    same(host(cuda(ints).sum(axis=1)), ints.sum(axis=1))
    same(np.asarray(cuda(ints).sum().cpu()), np.asarray(ints.sum()))
    # Sums of nothing are the identity; NaN wins max and argmax.
    empty = np.zeros((4, 0), np.float32)
    same(host(cuda(empty).sum(axis=1)), empty.sum(axis=1))
    same(host(cuda(empty).prod(axis=1)), empty.prod(axis=1))
    n = np.arange(40, dtype=np.float32).reshape(4, 10)
    n[1, 3] = n[1, 7] = np.nan
    same(host(cuda(n).max(axis=1)), n.max(axis=1))
    same(host(cuda(n).argmax(axis=1)), n.argmax(axis=1))


def softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def layernorm(x, w, b):
    mu = x.mean(axis=-1, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=-1, keepdims=True)
    return (x - mu) / np.sqrt(var + 1e-5) * w + b


# (2, 16384): rows past what the row caches hold, so the chain's plain form runs (Note [Row caches
# that hold a computed value]).
@pytest.mark.parametrize("shape", [(3, 5), (64, 33), (1000, 1024), (7, 3000), (2, 8, 129), (2, 16384)])
def test_softmax_and_layernorm(shape):
    x = finite_array(shape, "float32", 8)
    w = finite_array(shape[-1:], "float32", 9)
    b = finite_array(shape[-1:], "float32", 10)
    sm, ln = framejit.compile(softmax), framejit.compile(layernorm)
    np.testing.assert_allclose(host(sm(cuda(x))), np.asarray(sm(framejit.tensor(x))), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(host(ln(cuda(x), cuda(w), cuda(b))),
                               np.asarray(ln(framejit.tensor(x), framejit.tensor(w), framejit.tensor(b))),
                               rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(host(sm(cuda(x))), softmax(x.astype(np.float64)), rtol=1e-5, atol=1e-7)
    x64 = x.astype(np.float64) * 3  # 8-byte values over the row cache
    np.testing.assert_allclose(host(sm(cuda(x64))), softmax(x64), rtol=1e-12, atol=0)


def test_chains_that_write_what_they_read():
    # Arrays a chain writes and reads again, views of reduction results, several outputs: the
    # fused row kernel gives what the CPU gives (row caches hold only arrays no part writes).
    def f(x, y):
        t = x * 2 + y
        s = t.sum(axis=-1, keepdims=True)
        m = t.max(axis=-1)
        return t, t / s, m, (t - m[:, None]) * 0.5

    cf = framejit.compile(f)
    for shape in ((5, 7), (64, 300), (300, 4096)):
        # Positive values: sums without cancellation, so t / s compares closely whatever the order.
        x, y = (np.abs(finite_array(shape, "float32", seed)) + 0.5 for seed in (11, 12))
        got = cf(cuda(x), cuda(y))
        want = f(framejit.tensor(x), framejit.tensor(y))
        for g, w in zip(got, want):
            np.testing.assert_allclose(host(g), np.asarray(w), rtol=1e-4, atol=1e-5)
