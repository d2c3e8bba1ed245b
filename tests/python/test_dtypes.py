"""Dtype results must be exactly the installed NumPy's (1.24: value-based casting of scalars;
2.x: NEP 50, where a Python number takes the array's dtype and an int that does not fit raises)."""

import itertools

import numpy as np
import pytest

import framejit
from conftest import BACKENDS, assert_same, check, check_sequence

# NumPy 2 (NEP 50) has no value-based casting: where 1.x widened the result for a large Python int,
# 2.x raises OverflowError. Tests whose expectations differ branch on this.
NUMPY2 = int(np.__version__.split(".")[0]) >= 2

DTYPES = [np.bool_, np.int8, np.uint8, np.int16, np.int32, np.int64, np.uint64, np.float32, np.float64]


def arr(dtype, n=4):
    if dtype == np.bool_:
        return np.array([True, False, True, True][:n])
    return (np.arange(n) * 3 + 1).astype(dtype)


def add_mul(a, b):
    return a + b, a * b, a - b if a.dtype != np.bool_ or b.dtype != np.bool_ else a ^ b


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(
    "da,db",
    [
        (np.int32, np.int64),
        (np.uint8, np.int8),
        (np.uint8, np.uint16),
        (np.bool_, np.bool_),
        (np.bool_, np.int8),
        (np.int64, np.float32),
        (np.int16, np.float32),
        (np.float32, np.float64),
        (np.uint64, np.int64),
        (np.uint8, np.float32),
        (np.bool_, np.float32),
    ],
    ids=lambda d: np.dtype(d).name,
)
def test_array_array_promotion(da, db, backend):
    check(add_mul, arr(da), arr(db), backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_true_and_floor_division_and_comparisons(dtype, backend):
    def f(a, b):
        if a.dtype == np.bool_:  # NumPy has no floor division / remainder for bool
            return a / b, a < b, a == b, np.maximum(a, b)
        return a / b, a // b, a % b, a < b, a == b, np.maximum(a, b)

    b = arr(dtype) if dtype != np.bool_ else np.array([True, True, True, True])
    check(f, arr(dtype), b, backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("scalar", [2, -3, 2.5, True, 300, 70000], ids=repr)
def test_python_scalar_with_array(dtype, scalar, backend):
    def f(a, s):
        return a + s, s * a, a * 2, a + 1.5

    dt = np.dtype(dtype)
    if NUMPY2 and type(scalar) is int and dt.kind in "iu" and not np.iinfo(dt).min <= scalar <= np.iinfo(dt).max:
        # NumPy 2: the int does not fit the array's dtype, so CPython raises OverflowError; the
        # compiled function must raise the same.
        check_sequence(f, [(arr(dtype), scalar)], backend=backend)
        return
    check(f, arr(dtype), scalar, backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_value_based_casting_int8_plus_300(backend):
    def f(x, n):
        return x + n

    x = np.array([1, 2, 100], dtype=np.int8)
    if NUMPY2:  # NEP 50: 300 becomes an int8 and does not fit
        with pytest.raises(OverflowError):
            f(x, 300)
        check(f, x, 100, backend=backend)
    else:
        assert f(x, 300).dtype == np.int16  # NumPy 1.x value-based casting
        check(f, x, 300, backend=backend)
    framejit.reset()
    # one compiled function, values moving between casting classes in both directions
    check_sequence(f, [(x, 300), (x, 5), (x, 100000), (x, -1), (x, 200), (x, 2**40), (x, -129), (x, 7), (x, 300)],
                   backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_value_based_casting_constant_in_code(backend):
    def f(x):
        return x + 300, x * 2, x - 1000, x + 1.5

    if NUMPY2:
        # NEP 50: 300 and -1000 do not fit int8/uint8, so CPython raises OverflowError and so must
        # the compiled function; int16 holds them.
        check_sequence(f, [(np.array([1, 2, 3], dtype=np.int8),), (np.array([1, 2, 3], dtype=np.uint8),)],
                       backend=backend)
        check(f, np.array([1, 2, 3], dtype=np.int16), backend=backend)
        return
    check(f, np.array([1, 2, 3], dtype=np.int8), backend=backend)
    check(f, np.array([1, 2, 3], dtype=np.uint8), backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_value_based_casting_float32_times_1e300(backend):
    def f(x, s):
        return x * s

    x = np.array([1.0, 2.0, -3.0], dtype=np.float32)
    # NumPy 1.x widens to float64 for a value float32 cannot hold; NumPy 2 stays float32 (inf).
    assert f(x, 1e300).dtype == (np.float32 if NUMPY2 else np.float64)
    check(f, x, 1e300, backend=backend)
    framejit.reset()
    check_sequence(f, [(x, 1e300), (x, 2.0), (x, 1e39), (x, 0.5), (x, -1e300), (x, float("inf")), (x, 1e300)],
                   backend=backend)
    framejit.reset()
    check_sequence(f, [(x, 2.0), (x, 1e300), (x, 3.0)], backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_uint8_with_negative_and_large_scalars(backend):
    def f(x, n):
        return x + n, x * n

    x = np.array([0, 1, 200, 255], dtype=np.uint8)
    check_sequence(f, [(x, 255), (x, -1), (x, 256), (x, 1), (x, -300), (x, 2.5), (x, 1)], backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_int64_with_huge_python_ints(backend):
    def f(x, n):
        return x + n

    x = np.arange(3, dtype=np.int64)
    # 2**63 promotes to float64 in NumPy 1.24, 2**64 to object; both must match CPython
    check_sequence(f, [(x, 1), (x, 2**63), (x, 5), (x, 2**64), (x, -(2**63) - 1), (x, 2)], backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_numpy_scalars_are_value_based_too(backend):
    def f(x, s):
        return x * s, s * 2, s + x.sum()

    x = np.array([1.0, 2.0], dtype=np.float32)
    check_sequence(
        f,
        [(x, np.float64(2.0)), (x, np.float64(1e300)), (x, np.int64(3)), (x, np.float32(1.5)), (x, np.float64(0.5))],
        backend=backend,
    )


@pytest.mark.parametrize("backend", BACKENDS)
def test_mixed_int_float_chain(backend):
    def f(i8, u8, f32, b, n, s):
        a = i8 * n + u8  # int8*int -> int8/16, + uint8 -> int16
        c = a / 3 + f32  # float64 + float32 -> float64
        d = (b + 1) * s  # bool+int -> int64, * float -> float64
        e = f32 * s + i8  # float32
        return a, c, d, e, (u8 > 100) & b, np.where(b, i8, u8), np.where(b, f32, 0)

    check(
        f,
        np.array([1, -2, 3, 120], dtype=np.int8),
        np.array([0, 255, 7, 128], dtype=np.uint8),
        np.array([0.5, 1.5, -2.0, 3.0], dtype=np.float32),
        np.array([True, False, True, False]),
        2,
        0.25,
        backend=backend,
    )


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_reduction_dtypes(dtype, backend):
    def f(x):
        return x.sum(), x.sum(axis=0), x.prod(), x.mean(), x.max(), x.min(axis=0, keepdims=True), np.argmax(x)

    check(f, arr(dtype, 4).reshape(2, 2), backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int32, np.bool_, np.float32], ids=lambda d: np.dtype(d).name)
def test_ufunc_dtypes_on_ints_and_bools(dtype, backend):
    def f(x):
        return np.sqrt(x), np.exp(x), np.abs(x), np.square(x), np.negative(x) if x.dtype != np.bool_ else ~x

    check(f, arr(dtype), backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_overflow_wraps_like_numpy(backend):
    def f(x, y):
        return x + y, x * y, x - y

    a = np.array([100, 127, -128], dtype=np.int8)
    check(f, a, a, backend=backend)
    u = np.array([200, 255, 0], dtype=np.uint8)
    check(f, u, u, backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_matmul_dtypes(backend):
    def f(a, b, c):
        return a @ b, a @ c, c @ c.T

    check(f, np.arange(6, dtype=np.int8).reshape(2, 3), np.arange(6, dtype=np.int32).reshape(3, 2),
          np.ones((3, 2), np.float32), backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_clip_and_where_dtypes(backend):
    def f(i, f32):
        return np.clip(i, 1, 5), np.clip(i, 0.5, 3.5), np.clip(f32, 0, 1), np.where(i > 2, i, 0.5), np.where(i > 2, f32, 2)

    check(f, np.arange(6, dtype=np.int16), np.linspace(-1, 2, 6).astype(np.float32), backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_creation_default_dtypes(backend):
    def f(x):
        return (
            np.zeros(2) + x,
            np.ones(2, dtype=x.dtype),
            np.arange(3) * x[0],
            np.full(2, 7) + x,
            np.full(2, 7.0, dtype=np.float32),
            np.zeros_like(x) + 1,
        )

    check(f, np.array([1, 2], dtype=np.int16), backend=backend)
    check(f, np.array([1, 2], dtype=np.float32), backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_python_int_and_float_results(backend):
    def f(x, n, s):
        m = n * 2 + x.shape[0]
        return m, s * n, n / 2, n // 2, -n, m > 3, x * m

    check(f, np.ones(3, np.float32), 5, 0.5, backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_scalar_kinds_in_sequence(backend):
    """One compiled function, scalar argument changing between int, float, bool, numpy
    scalar and 0-d array: every call must match CPython."""

    def f(x, s):
        return x * s + s

    for x in (np.array([1, 2], dtype=np.int8), np.array([1.5, 2.5], dtype=np.float32)):
        framejit.reset()
        check_sequence(
            f,
            [(x, 2), (x, 2.5), (x, True), (x, 1000), (x, np.int16(3)), (x, np.float64(1e300)),
             (x, np.array(3, dtype=np.int64)), (x, 2)],
            backend=backend,
        )


def test_all_pairs_quick():
    """Every pair of dtypes through one compiled function (eager backend, exact), each pair
    compiled (not run in CPython past the recompile limit)."""

    def f(a, b):
        return a + b, a * b, a > b

    framejit.config.recompile_limit = 100  # restored by the autouse fixture
    c = framejit.compile(f, backend="eager")
    for da, db in itertools.product(DTYPES, DTYPES):
        a, b = arr(da), arr(db)
        for _ in range(2):
            assert_same(f(a, b), c(a, b), exact=True, path=f"{np.dtype(da).name},{np.dtype(db).name}")
    assert framejit.stats()["captured"] == len(DTYPES) ** 2
