"""Return values: identity of returned inputs, views of inputs, scalars, None, containers."""

import numpy as np
import pytest

import framejit
from conftest import BACKENDS, assert_same, check, randn

X = randn(3, 4, seed=1)


def compiled_twice(fn, backend, *args):
    """Cold call and cache-hit call on the SAME argument objects (identity matters here)."""
    c = framejit.compile(fn, backend=backend, fullgraph=True)
    return c(*args), c(*args)


@pytest.mark.parametrize("backend", BACKENDS)
def test_returned_input_is_same_object(backend):
    def f(x, y):
        return x

    def g(x, y):
        return y, x * 2, x

    x, y = X.copy(), X.copy()
    for r in compiled_twice(f, backend, x, y):
        assert r is x
    for r in compiled_twice(g, backend, x, y):
        assert r[0] is y and r[2] is x
        assert_same(g(x, y), r, exact=backend == "eager")


@pytest.mark.parametrize("backend", BACKENDS)
def test_returned_input_from_container_argument(backend):
    def f(xs, d):
        return xs[1], d["w"]

    a, b, w = X.copy(), X.copy() + 1, X.copy() + 2
    for r in compiled_twice(f, backend, [a, b], {"w": w}):
        assert r[0] is b and r[1] is w


@pytest.mark.parametrize("backend", BACKENDS)
def test_returned_attribute_array_is_same_object(backend):
    class M:
        def __init__(self):
            self.w = X.copy()

    m = M()

    def f(m, x):
        return m.w, x @ m.w.T

    for r in compiled_twice(f, backend, m, X):
        assert r[0] is m.w


VIEWS = {
    "slice": lambda x: x[1:],
    "step": lambda x: x[:, ::2],
    "T": lambda x: x.T,
    "transpose": lambda x: x.transpose(1, 0),
    "reshape": lambda x: x.reshape(2, 6),
    "reshape_flat": lambda x: x.reshape(-1),
    "row": lambda x: x[0],
    "newaxis": lambda x: x[None],
    "expand_dims": lambda x: np.expand_dims(x, 1),
    "swapaxes": lambda x: x.swapaxes(0, 1),
    "broadcast_to": lambda x: np.broadcast_to(x, (2, 3, 4)),
    "split": lambda x: np.split(x, 2, axis=1)[1],
    "ravel": lambda x: x.ravel(),
    "chain": lambda x: x.T[1:][:, ::2].swapaxes(0, 1)[None],
    # reshapes NumPy must copy, and explicit copies: no sharing, as in NumPy
    "reshape_copy": lambda x: x.T.reshape(-1),
    "reshape_copy_chain": lambda x: x.T[1:].reshape(-1)[::2],
    "flatten": lambda x: x.flatten(),
    "astype_same": lambda x: x.astype(x.dtype),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", list(VIEWS))
def test_returned_view_shares_memory_with_input(name, backend):
    fn = VIEWS[name]
    x = X.copy()
    expected = fn(x)
    shares = np.shares_memory(expected, x)
    assert shares == (name not in ("reshape_copy", "reshape_copy_chain", "flatten", "astype_same"))
    for r in compiled_twice(fn, backend, x):
        assert_same(expected, r, exact=True)
        assert np.shares_memory(r, x) == shares, name
        if shares:
            assert r.strides == expected.strides, (r.strides, expected.strides)
            assert r.flags.writeable == expected.flags.writeable
        assert r is not x


@pytest.mark.parametrize("backend", BACKENDS)
def test_writing_through_returned_view_changes_input(backend):
    def f(x):
        return x[1:, :2], x * 2

    x = X.copy()
    c = framejit.compile(f, backend=backend, fullgraph=True)
    c(x)
    v, _ = c(x)
    v[...] = 42.0
    assert (x[1:, :2] == 42.0).all()


@pytest.mark.parametrize("backend", BACKENDS)
def test_view_of_input_with_new_batch_size(backend):
    def f(x):
        return x[:, 1:], x.T

    c = framejit.compile(f, backend=backend, fullgraph=True)
    for n in (3, 5, 2):
        x = randn(n, 4, seed=n)
        r = c(x)
        assert_same(f(x), r, exact=True)
        assert np.shares_memory(r[0], x) and np.shares_memory(r[1], x)


@pytest.mark.parametrize("backend", BACKENDS)
def test_computed_result_does_not_alias_input(backend):
    def f(x):
        return x + 0, x.copy(), x * 1

    x = X.copy()
    for r in compiled_twice(f, backend, x):
        for a in r:
            assert not np.shares_memory(a, x)


@pytest.mark.parametrize("backend", BACKENDS)
def test_results_of_two_calls_are_independent(backend):
    def f(x):
        return x * 2

    c = framejit.compile(f, backend=backend, fullgraph=True)
    r1 = c(X)
    r1_copy = r1.copy()
    r2 = c(X + 1)
    assert not np.shares_memory(r1, r2)
    np.testing.assert_array_equal(r1, r1_copy)
    r2[...] = 0
    np.testing.assert_array_equal(r1, r1_copy)


@pytest.mark.parametrize("backend", BACKENDS)
def test_same_array_returned_twice(backend):
    def f(x):
        y = x * 2
        return y, y, [y], {"a": y}

    for r in compiled_twice(f, backend, X):
        assert r[0] is r[1] and r[2][0] is r[0] and r[3]["a"] is r[0]
    framejit.reset()
    check(f, X, backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_scalar_returns(backend):
    def f(x, s, n):
        return (
            x.sum(),  # numpy scalar
            x[0, 0],  # numpy scalar from indexing
            s * 2,  # python float
            n + 1,  # python int
            n > 1,  # python bool
            x.shape[0] * 2,  # python int from a shape
            x.ndim,
            True,
            "text",
            3.5,
        )

    r = check(f, X, 1.5, 3, backend=backend)
    assert type(r[0]) is np.float64 and type(r[2]) is float and type(r[3]) is int and type(r[4]) is bool


@pytest.mark.parametrize("backend", BACKENDS)
def test_none_returns(backend):
    def f(x):
        x * 2

    def g(x):
        return None

    def h(x):
        return x + 1, None

    check(f, X, backend=backend)
    check(g, X, backend=backend)
    check(h, X, backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_nested_containers(backend):
    def f(x):
        return {
            "a": (x, [x * 2, (x.sum(), None)]),
            "b": [{"c": x - 1, "d": ()}, []],
            3: {},
            ("t", 1): x.shape,
        }

    r = check(f, X, backend=backend)
    assert type(r["a"][1]) is list


@pytest.mark.parametrize("backend", BACKENDS)
def test_dtype_and_shape_returns(backend):
    def f(x):
        return x.dtype, x.shape, (x * 2).astype(np.float32).dtype, np.float32

    check(f, X, backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_zero_d_array_result_type(backend):
    def f(x):
        # np.array ops on 0-d arrays give numpy scalars, reductions with keepdims arrays
        return x.sum(keepdims=True), (x * 2).max(axis=(0, 1), keepdims=True), x[0, 0] * 2

    check(f, X, backend=backend)
