"""Unusual inputs: layouts, byte orders, subclasses, other dtypes, non-arrays. Whatever framejit
does with them (capture or run in CPython), the result must be CPython's."""

import numpy as np
import pytest

import framejit
from conftest import BACKENDS, assert_same, check, check_sequence


@pytest.mark.parametrize("backend", BACKENDS)
def test_layouts_through_one_function(backend):
    def f(x):
        return x * 2 + 1, x.reshape(-1), x.ravel(), x.T.reshape(-1), x.sum(axis=0), x[:, ::-1]

    base = np.arange(24.0).reshape(4, 6)
    check_sequence(
        f,
        [
            (base[:2, :3].copy(),),
            (np.asfortranarray(base[:2, :3]),),
            (base[::2, ::2],),
            (base[::-1, ::-1][:2, :3],),
            (np.broadcast_to(np.arange(3.0), (2, 3)),),
            (base[:2, :3].copy(),),
        ],
        backend=backend,
    )


@pytest.mark.parametrize("backend", BACKENDS)
def test_readonly_and_broadcast_inputs(backend):
    def f(x):
        return x[1:], x + 1

    b = np.broadcast_to(np.arange(3.0), (4, 3))
    compiled = framejit.compile(f, backend=backend)
    expected = f(b)
    for _ in range(2):
        r = compiled(b)
        assert_same(expected, r)
        assert r[0].flags.writeable == expected[0].flags.writeable
        assert r[0].strides == expected[0].strides
        assert np.shares_memory(r[0], b)
    ro = np.arange(4.0)
    ro.flags.writeable = False
    check(f, ro, backend=backend, fullgraph=False)


@pytest.mark.parametrize("backend", BACKENDS)
def test_non_native_byte_order(backend):
    def f(x, y):
        return x * 2 + x.sum(), x + y

    big = np.arange(3.0).astype(">f8")
    check_sequence(
        f,
        [
            (big, np.arange(3.0)),
            (np.arange(3.0), np.arange(3.0)),
            (big, big),
            (np.arange(3).astype(">i4"), np.arange(3)),
            (np.arange(3, dtype=np.int32), np.arange(3)),
        ],
        backend=backend,
    )


@pytest.mark.filterwarnings("ignore:the matrix subclass:PendingDeprecationWarning")
@pytest.mark.parametrize("backend", BACKENDS)
def test_ndarray_subclasses_are_not_treated_as_ndarray(backend):
    def f(x, y):
        return x * y, x + 1

    m = np.matrix([[1.0, 2.0], [3.0, 4.0]])
    ma = np.ma.masked_array([1.0, 2.0, 3.0], mask=[0, 1, 0])
    check_sequence(
        f,
        [
            (np.ones((2, 2)), np.ones((2, 2)) * 2),
            (m, m),  # matrix: * is a matrix product
            (ma, ma),
            (np.ones((2, 2)), np.ones((2, 2)) * 3),
        ],
        backend=backend,
    )


@pytest.mark.parametrize("backend", BACKENDS)
def test_other_dtypes(backend):
    def f(x):
        return x * 2 + x[:1], x.sum(), x.reshape(-1)

    check_sequence(
        f,
        [
            (np.ones(3, np.float16),),
            (np.array([1 + 2j, 3 - 1j]),),
            (np.array([1, 2], dtype=np.complex64),),
            (np.array([1, 2], dtype=object),),
            (np.array([1.5, 2.5]),),
            (np.array([1, 2], dtype=np.uint16),),
        ],
        backend=backend,
    )

    def g(x):
        return x + np.timedelta64(1, "D"), x[1:] - x[:-1]

    check_sequence(g, [(np.array(["2020-01-01", "2021-03-04"], dtype="datetime64[D]"),)], backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_ranks_zero_to_six(backend):
    def f(x):
        return x * 2 + x.sum(), x.ndim, x.shape

    check_sequence(
        f,
        [(np.array(1.5),), (np.array(2.5),), (np.ones(2),), (np.ones((2, 1, 2, 1, 2, 3)),), (np.ones((2, 2, 2, 2, 2, 3)),)],
        backend=backend,
    )


@pytest.mark.parametrize("backend", BACKENDS)
def test_python_sequences_where_arrays_go(backend):
    def f(x):
        return np.sum(x), np.tanh(x), np.asarray(x) * 2

    check_sequence(f, [([1.0, 2.0],), ((1, 2),), (np.ones(2),), ([[1, 2], [3, 4]],), (3.0,)], backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_same_array_passed_twice(backend):
    a = np.arange(3.0)

    def f(x, y):
        return x, y, x - y, x * y

    check_sequence(f, [(a, a), (a, a.copy()), (a, a)], backend=backend)
    compiled = framejit.compile(f, backend=backend)
    for _ in range(2):
        r = compiled(a, a)
        assert r[0] is a and r[1] is a


@pytest.mark.parametrize("backend", BACKENDS)
def test_overlapping_views_as_inputs(backend):
    base = np.arange(8.0)

    def f(x, y):
        return x + y, x.shape, (x * 2)[:2]

    check_sequence(f, [(base[:5], base[3:]), (base[:5].copy(), base[3:].copy()), (base[:5], base[3:])], backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_numpy_scalar_constructors_in_code(backend):
    def f(x):
        eps = np.float32(1e-5)
        return x / (x.std() + eps), np.int8(3) * x, np.float64(0.5) + x

    check(f, np.arange(4, dtype=np.float32), backend=backend, fullgraph=False)
