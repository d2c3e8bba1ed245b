"""Bad and unusual input (issue 6): each case gives exactly what eager NumPy gives — the same
values, dtype and type, or the same exception type — runs in CPython where the backend does not
support it, and never modifies an input."""

import threading

import numpy as np
import pytest

import framejit

RNG = np.random.default_rng(17)


def pointwise(x):
    return np.tanh(x * 0.5) + x


def reduce_rows(x):
    return (x * 2).sum(-1) if x.ndim else x * 2


def matmul(x):
    return x @ x.T if x.ndim == 2 else x * x


def view_chain(x):
    return (x.T[::-1] + 1) * 2 if x.ndim >= 1 else x + 1


FUNCS = [pointwise, reduce_rows, matmul, view_chain]


def misaligned(dtype, n):
    buf = np.zeros(n * np.dtype(dtype).itemsize + 1, np.uint8)[1:]
    a = buf.view(dtype)
    a[...] = np.arange(n)
    return a


def byte_strided(n):
    # float32 elements 5 bytes apart: strides that are not a multiple of the item size.
    buf = np.arange(5 * n + 4, dtype=np.uint8)
    return np.ndarray((n,), np.float32, buffer=buf, strides=(5,))


def read_only(a):
    a = a.copy()
    a.flags.writeable = False
    return a


CASES = {
    "object": lambda: np.array([1.0, 2.0, 3.0], dtype=object),
    "float16": lambda: RNG.standard_normal((4, 5)).astype(np.float16),
    "complex64": lambda: (RNG.standard_normal((3, 4)) + 1j).astype(np.complex64),
    "big-endian": lambda: RNG.standard_normal((4, 6)).astype(">f4"),
    "misaligned f32": lambda: misaligned(np.float32, 12).reshape(3, 4),
    "misaligned f64": lambda: misaligned(np.float64, 12).reshape(4, 3),
    "byte-strided": lambda: byte_strided(9),
    "read-only": lambda: read_only(RNG.standard_normal((3, 5))),
    "0-d": lambda: np.array(2.5),
    "0-size": lambda: np.zeros((0, 4), np.float32),
    "0-size rows": lambda: np.zeros((3, 0), np.float32),
    "rank 32": lambda: np.ones((1,) * 30 + (2, 3), np.float32),
    "negative strides": lambda: RNG.standard_normal((5, 7))[::-1, ::-2],
    "nan inf": lambda: np.array([[np.nan, np.inf, -np.inf, -0.0], [1.0, -1.0, 0.0, 5e-324]]),
    "int32 extremes": lambda: np.array([[2**31 - 1, -(2**31)], [0, -1]], np.int32),
    "uint8": lambda: np.array([[0, 255, 128], [1, 2, 3]], np.uint8),
    "bool": lambda: np.array([[True, False], [False, True]]),
}


def outcome(fn, x):
    try:
        r = fn(x)
    except Exception as e:  # noqa: BLE001 — the exception type is what is compared
        return ("raises", type(e))
    return ("value", r)


def same(got, want):
    if want[0] == "raises":
        assert got[0] == "raises" and got[1] is want[1], (got, want)
        return
    assert got[0] == "value", got
    g, w = got[1], want[1]
    assert type(g) is type(w)
    g, w = np.asarray(g), np.asarray(w)
    assert g.dtype == w.dtype and g.shape == w.shape
    if w.dtype.kind in "fc":
        tol = 1e-2 if w.dtype == np.float16 else 1e-5
        np.testing.assert_allclose(g, w, rtol=tol, atol=tol, equal_nan=True)
    else:
        np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("backend", ["jit", "eager"])
@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("fn", FUNCS, ids=lambda f: f.__name__)
def test_unusual_arrays(backend, case, fn):
    x = CASES[case]()
    before = x.copy()
    want = outcome(fn, x)
    compiled = framejit.compile(fn, backend=backend)
    for _ in range(2):
        same(outcome(compiled, x), want)
    np.testing.assert_array_equal(x, before)  # inputs never modified
    assert x.dtype == before.dtype


@pytest.mark.parametrize("backend", ["jit", "eager"])
def test_integer_overflow_and_division_by_zero(backend):
    def f(a, b):
        return a * b + a, a // b, a % b, -a, np.abs(a)

    a = np.array([2**31 - 1, -(2**31), 7, -7, 0], np.int32)
    b = np.array([2, -1, 0, 3, 0], np.int32)
    with np.errstate(all="ignore"):
        want = f(a, b)
        got = framejit.compile(f, backend=backend)(a, b)
    for g, w in zip(got, want):
        assert g.dtype == w.dtype
        np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("backend", ["jit", "eager"])
def test_broadcast_errors_raise_numpys_exception(backend):
    def f(x, y):
        return np.exp(x) + y

    c = framejit.compile(f, backend=backend)
    x, y = np.ones((3, 4)), np.ones(4)
    np.testing.assert_allclose(c(x, y), f(x, y))
    with pytest.raises(ValueError):
        f(x, np.ones(5))
    with pytest.raises(ValueError):
        c(x, np.ones(5))


def test_four_threads_with_different_shapes_and_dtypes():
    def f(x, a):
        return np.tanh(x * a).sum(-1) + x.max(-1)

    c = framejit.compile(f)
    errors = []

    def worker(t):
        rng = np.random.default_rng(t)
        dtype = [np.float32, np.float64][t % 2]
        for i in range(200):
            x = rng.standard_normal((t + 1 + i % 3, 17 + t)).astype(dtype)
            try:
                got, want = c(x, 0.5 + t), f(x, 0.5 + t)
                if got.dtype != want.dtype or not np.allclose(got, want, rtol=1e-5, atol=1e-5):
                    errors.append((t, i))
            except Exception as e:  # noqa: BLE001
                errors.append((t, i, repr(e)))

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors, errors[:5]


def test_numpy_error_state_raise_is_honoured():
    # Note [NumPy error state]: kernels do not report floating-point events, so under
    # np.errstate(...="raise") the call runs in CPython and raises what NumPy raises.
    def f(x, y):
        return np.log(x) + x / y

    c = framejit.compile(f)
    x, y = np.array([0.0, 1.0, 2.0]), np.array([1.0, 0.0, 2.0])
    with np.errstate(all="ignore"):
        want = f(x, y)
        np.testing.assert_array_equal(c(x, y), want)
    hits = framejit.stats()["cache_hits"]
    with np.errstate(divide="raise"):
        with pytest.raises(FloatingPointError) as got:
            c(x, y)
        with pytest.raises(FloatingPointError) as expected:
            f(x, y)
        assert str(got.value) == str(expected.value)
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(c(x, y), want)
    assert framejit.stats()["cache_hits"] > hits  # the compiled program serves again


def test_numpy_error_state_is_read_per_call_in_every_context():
    # NumPy 2 keeps the error state in a context variable (NumPy 1 in the thread's dict); framejit
    # remembers its answer per state object, so states that come and go must each be seen afresh.
    import contextvars

    def f(x, y):
        return x / y

    c = framejit.compile(f)
    x, y = np.array([1.0, 2.0]), np.array([0.0, 2.0])

    def raises_now():
        try:
            c(x, y)
        except FloatingPointError:
            return True
        return False

    with np.errstate(all="ignore"):
        want = f(x, y)
    for _ in range(3):  # alternating blocks: each entry makes a new state object
        with np.errstate(divide="ignore"):
            np.testing.assert_array_equal(c(x, y), want)
        with np.errstate(divide="raise"):
            assert raises_now()
        calls = []
        with np.errstate(divide="call", call=lambda *a: calls.append(a)):
            np.testing.assert_array_equal(c(x, y), want)
        assert calls  # 'call' also runs in CPython: the callback is NumPy's to call
    with np.errstate(divide="ignore"):
        np.testing.assert_array_equal(c(x, y), want)

    def in_context():
        with np.errstate(divide="raise"):
            return raises_now()

    with np.errstate(divide="ignore"):
        assert contextvars.copy_context().run(in_context)
        np.testing.assert_array_equal(c(x, y), want)

    seen = []

    def worker():
        with np.errstate(divide="raise"):
            seen.append(raises_now())

    with np.errstate(divide="ignore"):
        t = threading.Thread(target=worker)
        t.start()
        t.join()
        np.testing.assert_array_equal(c(x, y), want)
    assert seen == [True]
