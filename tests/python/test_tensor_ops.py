"""framejit.Tensor operators and methods: outside compiled code each op is a cached one-op graph;
inside a compiled function the same ops are captured into one graph with Tensor results. Runs
without NumPy (pyenv's 3.12/3.13); NumPy cross-checks run where NumPy exists."""

import math

import pytest

import framejit

try:
    import numpy as np
except ImportError:  # the interpreters without NumPy run everything but the cross-checks
    np = None

needs_numpy = pytest.mark.skipif(np is None, reason="NumPy is not installed")

T = framejit.tensor


@pytest.fixture(autouse=True)
def _fresh():
    framejit.reset()
    yield
    framejit.reset()


def rows(n, m, start=0.0, scale=0.25):
    return [[start + scale * (i * m + j) - 1.0 for j in range(m)] for i in range(n)]


def same(a, b):
    """Exactly equal: type, dtype, shape and every element bit for bit (NaN equals NaN)."""
    assert type(a) is type(b), (type(a), type(b))
    if isinstance(a, framejit.Tensor):
        assert a.dtype == b.dtype and a.shape == b.shape, (a.dtype, a.shape, b.dtype, b.shape)
        flat = lambda t: t.reshape(-1).tolist()  # noqa: E731
        for x, y in zip(flat(a), flat(b)):
            assert x == y or (x != x and y != y), (a.tolist(), b.tolist())
    elif isinstance(a, (tuple, list)):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            same(x, y)
    else:
        assert a == b or (a != a and b != b), (a, b)


# ---------------------------------------------------------------- eager ops (one-op graphs)

def test_arithmetic_matches_python():
    a = T([1.0, 2.0, -3.5, 4.25])
    b = T([0.5, -2.0, 2.0, 8.0])
    assert (a + b).tolist() == [1.5, 0.0, -1.5, 12.25]
    assert (a - b).tolist() == [0.5, 4.0, -5.5, -3.75]
    assert (a * b).tolist() == [0.5, -4.0, -7.0, 34.0]
    assert (a / b).tolist() == [2.0, -1.0, -1.75, 0.53125]
    assert (a // b).tolist() == [2.0, -1.0, -2.0, 0.0]
    assert (a % b).tolist() == [x % y for x, y in zip(a.tolist(), b.tolist())]
    assert (-a).tolist() == [-1.0, -2.0, 3.5, -4.25]
    assert abs(a).tolist() == [1.0, 2.0, 3.5, 4.25]
    assert (a ** 2).tolist() == [1.0, 4.0, 12.25, 18.0625]
    assert (2.0 * a + 1).tolist() == [3.0, 5.0, -6.0, 9.5]
    assert (1 - a).tolist() == [0.0, -1.0, 4.5, -3.25]
    assert (a > b).tolist() == [True, True, False, False]
    assert (a == 2.0).tolist() == [False, True, False, False]
    assert (a != b).dtype == "bool"


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # NumPy warns on x // 0.0 where it computes
def test_float_floor_divide_and_remainder():
    # Python's float // and % follow the same division algorithm as NumPy's (nonzero divisors).
    xs = [7.5, -7.5, 7.5, -7.5, 0.0, -0.0, 1e300, 3.0, 2.0 ** -1070]
    ys = [2.0, 2.0, -2.0, -2.0, 3.0, -3.0, 7.0, 0.1, 3.0]
    a, b = T(xs), T(ys)
    for got, want in zip((a // b).tolist(), [x // y for x, y in zip(xs, ys)]):
        assert got == want and math.copysign(1, got) == math.copysign(1, want)
    for got, want in zip((a % b).tolist(), [x % y for x, y in zip(xs, ys)]):
        assert got == want and math.copysign(1, got) == math.copysign(1, want)
    assert (a // 2.0).tolist() == [x // 2.0 for x in xs]
    assert (10.0 % b).tolist() == [10.0 % y for y in ys]
    z = (T([1.0, -1.0, 0.0]) // T([0.0, 0.0, 0.0])).tolist()
    assert z[0] == math.inf and z[1] == -math.inf and z[2] != z[2]
    assert all(v != v for v in (T([1.0, 0.0]) % 0.0).tolist())
    f = T([7.5, -7.5], dtype="float32")
    assert (f // 2.0).dtype == "float32" and (f // 2.0).tolist() == [3.0, -4.0]
    assert (T([7, -7]) // 2.0).tolist() == [3.0, -4.0]
    if np is not None:
        np.testing.assert_array_equal(np.asarray(a // b), np.floor_divide(np.asarray(xs), np.asarray(ys)))
        np.testing.assert_array_equal(np.asarray(a % b), np.remainder(np.asarray(xs), np.asarray(ys)))


@needs_numpy
def test_library_steps_take_the_graphs_dtype():
    # Note [Extern results take the graph's dtype]: float32 // an int64 0-d Tensor is float64 by
    # NEP 50; NumPy 1.24 answers the extern step in float32, and the kernel after it reads float64.
    def f(idx, x):
        return (x // np.argmax(idx, 0)).astype(np.float32)

    idx = T(np.array([2.0, 1.0, 0.0, -1.0]))
    x = np.array([-0.25, 0.06, 1.2, 2.1, -1.39, 0.27, -0.3, 0.5], np.float32)
    with np.errstate(all="ignore"):
        got = framejit.compile(f)(idx, T(x))
        want = x // np.float32(0.0)
    np.testing.assert_array_equal(np.asarray(got), want)


def test_integer_and_bool_ops():
    i = T([7, -7, 3, 0])
    j = T([2, 2, -2, 5])
    assert i.dtype == "int64"
    assert (i // j).tolist() == [3, -4, -2, 0]
    assert (i % j).tolist() == [1, 1, -1, 0]
    assert (i * 3).dtype == "int64"
    assert (i / j).dtype == "float64"
    assert (i & j).tolist() == [7 & 2, -7 & 2, 3 & -2, 0]
    assert (i | j).tolist() == [7 | 2, -7 | 2, 3 | -2, 5]
    p = T([True, False, True])
    q = T([True, True, False])
    assert (p & q).tolist() == [True, False, False]
    assert (p | q).tolist() == [True, True, True]
    assert (p ^ q).tolist() == [False, True, True]
    assert (~p).tolist() == [False, True, False]


def test_weak_python_scalars_keep_the_tensor_dtype():
    # NEP 50 (framejit.Tensor's rule): a Python number never widens a tensor's dtype.
    f = T([1.0, 2.0], dtype="float32")
    assert (f * 2.5).dtype == "float32"
    assert (f + 1).dtype == "float32"
    i = T([1, 2], dtype="int32")
    assert (i + 1).dtype == "int32"
    assert (i * 1.5).dtype == "float64"
    b = T([True, False])
    assert (b + 1).dtype == "int64"


def test_broadcasting_and_shapes():
    a = T(rows(3, 4))
    row = T([1.0, 2.0, 3.0, 4.0])
    col = T([[10.0], [20.0], [30.0]])
    r = a + row + col
    assert r.shape == (3, 4)
    expect = [[a.tolist()[i][j] + row.tolist()[j] + col.tolist()[i][0] for j in range(4)] for i in range(3)]
    assert r.tolist() == expect
    with pytest.raises(ValueError):
        a + T([1.0, 2.0])


def test_reductions():
    data = rows(3, 4)
    a = T(data)
    assert a.sum().item() == sum(sum(r) for r in data)
    assert a.sum().shape == ()
    assert a.sum(axis=1).tolist() == [sum(r) for r in data]
    assert a.sum(axis=0, keepdims=True).shape == (1, 4)
    assert a.max(axis=1).tolist() == [max(r) for r in data]
    assert a.min().item() == min(min(r) for r in data)
    assert a.argmax(axis=1).tolist() == [r.index(max(r)) for r in data]
    assert a.argmin().item() == 0
    assert a.argmax(axis=1).dtype == "int64"
    flat = [x for r in data for x in r]
    mean = sum(flat) / len(flat)
    assert math.isclose(a.mean().item(), mean, rel_tol=1e-15)
    var = sum((x - mean) ** 2 for x in flat) / len(flat)
    assert math.isclose(a.var().item(), var, rel_tol=1e-12)
    assert math.isclose(a.std(ddof=1).item(), math.sqrt(var * len(flat) / (len(flat) - 1)), rel_tol=1e-12)
    assert T([1, 2, 3, 4]).prod().item() == 24
    assert T([1, 2, 3], dtype="int32").sum().dtype == "int64"


def test_matmul():
    a = T(rows(2, 3))
    b = T(rows(3, 2, start=0.5))
    r = a @ b
    al, bl = a.tolist(), b.tolist()
    expect = [[sum(al[i][k] * bl[k][j] for k in range(3)) for j in range(2)] for i in range(2)]
    assert r.shape == (2, 2)
    for x, y in zip(sum(r.tolist(), []), sum(expect, [])):
        assert math.isclose(x, y, rel_tol=1e-12, abs_tol=1e-12)


def test_views_share_memory():
    a = T(rows(2, 3))
    assert a.T.shape == (3, 2)
    assert a.T.tolist() == [list(c) for c in zip(*a.tolist())]
    assert a.transpose(1, 0).tolist() == a.T.tolist()
    assert a.reshape(3, 2).tolist() == [[-1.0, -0.75], [-0.5, -0.25], [0.0, 0.25]]
    assert a.reshape((6,)).shape == (6,)
    assert a.reshape(-1, 2).shape == (3, 2)
    assert a.swapaxes(0, 1).shape == (3, 2)
    assert a[1].tolist() == a.tolist()[1]
    assert a[:, 1].tolist() == [r[1] for r in a.tolist()]
    assert a[..., ::-1].tolist() == [r[::-1] for r in a.tolist()]
    assert a[None, 1:, :2].shape == (1, 1, 2)
    assert a[1, 2].item() == a.tolist()[1][2]
    # A reshape of a transposed tensor cannot be a view: a copy in C order, as NumPy does.
    assert a.T.reshape(6).tolist() == [x for r in zip(*a.tolist()) for x in r]
    with pytest.raises(IndexError):
        a[2]
    with pytest.raises(ValueError):
        a.reshape(4, 2)


def test_in_place_operators_write_into_the_tensor():
    # Note [In-place Tensor operators]: every view sees the result, as with an ndarray.
    t = T(rows(3, 4))
    alias, col = t[1:], t[:, 1]
    before = id(t)
    t += 1
    assert id(t) == before
    same(alias, T(rows(3, 4, start=1.0))[1:])
    t *= T([2.0, 1.0, 1.0, 1.0])
    assert col.tolist() == t[:, 1].tolist() and t[0, 0].item() == rows(1, 1)[0][0] * 2 + 2
    col -= 100            # a strided target
    assert t[:, 1].tolist() == [c - 100 for c in rows(3, 4, start=1.0)[0][1:2] + [r[1] for r in rows(3, 4, start=1.0)[1:]]]
    i = T([1, 2, 3])
    i //= 2
    i *= i
    i |= 4
    assert i.tolist() == [4, 5, 5]
    with pytest.raises(TypeError, match="same_kind"):
        i += 0.5          # float64 result into int64
    with pytest.raises(TypeError, match="same_kind"):
        i /= 2
    with pytest.raises(ValueError, match="broadcast"):
        i += T([[1], [2]])
    with pytest.raises(TypeError, match="same_kind"):
        i += T([[0.5], [1.5]])  # as NumPy: the casting is refused before the shapes
    assert i.tolist() == [4, 5, 5]  # a refused operator leaves the tensor as it was
    f = T([1.0, 2.0], dtype="float32")
    f += T([0.5, 0.5])    # float64 into float32: same kind
    assert f.dtype == "float32" and f.tolist() == [1.5, 2.5]
    m = T([[1.0, 2.0], [3.0, 4.0]])
    m @= T([[0.0, 1.0], [1.0, 0.0]])
    assert m.tolist() == [[2.0, 1.0], [4.0, 3.0]]


@needs_numpy
def test_in_place_operators_match_numpy():
    a = np.arange(12, dtype=np.float64).reshape(3, 4)
    t = T(a.copy())
    for op in ("__iadd__", "__isub__", "__imul__", "__itruediv__", "__ifloordiv__", "__imod__", "__ipow__"):
        want = getattr(a[:, ::2], op)(1.5)
        got = getattr(t[:, ::2], op)(1.5)
        # The same values where they were written (pow within its ulp: Note [One math library]).
        np.testing.assert_allclose(np.array(got.tolist()), want, rtol=1e-15, err_msg=op)
        np.testing.assert_allclose(np.array(t.tolist()), a, rtol=1e-15, err_msg=op)


def test_astype():
    a = T([1.7, -1.7, 2.5])
    assert a.astype("int32").tolist() == [1, -1, 2]
    assert a.astype("int32").dtype == "int32"
    assert a.astype(float).dtype == "float64"
    assert a.astype("float32").dtype == "float32"
    assert T([0, 2]).astype(bool).tolist() == [False, True]


def test_scalar_conversions():
    t = T([2.5])
    assert float(t) == 2.5
    assert int(T([3])) == 3
    assert bool(T([1]))
    with pytest.raises((ValueError, TypeError)):
        bool(T([1, 2]))


def test_unsupported_operands():
    a = T([1.0])
    with pytest.raises(TypeError):
        a + "x"
    with pytest.raises(TypeError):
        a + [1.0]


def test_ops_are_cached_kernels():
    a = T(rows(4, 8))
    a + a
    before = framejit.stats()["captured"]
    for _ in range(5):
        a + a
        (a * 2.0) + 1.0  # a new scalar value reuses the kernel
        a * 3.0
    assert framejit.stats()["captured"] == before + 2  # `* scalar` and `+ scalar` compiled once


# ---------------------------------------------------------------- compiled functions

def _model(x, w, b):
    h = x @ w + b
    h = h * (h > 0)
    m = h.max(axis=-1, keepdims=True)
    e = (h - m) * 0.5
    return e.sum(axis=-1), e.T


@pytest.mark.parametrize("backend", ["jit", "eager"])
def test_compiled_tensor_function_is_one_graph_with_tensor_results(backend):
    x, w, b = T(rows(4, 3)), T(rows(3, 5, start=0.1)), T([0.5, -0.5, 0.0, 1.0, 2.0])
    expected = _model(x, w, b)
    out = framejit.explain(_model)(x, w, b)
    assert out.graph_count == 1 and out.graph_break_count == 0, out
    f = framejit.compile(_model, backend=backend, fullgraph=True)
    for _ in range(2):
        got = f(x, w, b)
        same(expected, got)
    assert isinstance(got[0], framejit.Tensor)


def test_compiled_new_sizes_do_not_recompile():
    def f(x):
        return (x * 2.0 + 1.0).sum(axis=0)

    g = framejit.compile(f, fullgraph=True)
    for n in (3, 5, 9):
        x = T(rows(n, 4))
        same(f(x), g(x))
    assert framejit.stats()["recompiles"] == 0


def test_tensor_and_numpy_meet_in_cpython():
    if np is None:
        pytest.skip("NumPy is not installed")

    def f(t, a):
        return t + a

    t = T([1.0, 2.0])
    a = np.array([10.0, 20.0])
    out = framejit.explain(f)(t, a)
    assert out.graph_break_count == 1
    r = framejit.compile(f)(t, a)
    assert isinstance(r, framejit.Tensor) and r.tolist() == [11.0, 22.0]


# ---------------------------------------------------------------- NumPy interplay

@needs_numpy
def test_numpy_ufuncs_and_functions_return_tensors():
    t = T([[0.5, 1.0], [2.0, 4.0]])
    r = np.exp(t)
    assert isinstance(r, framejit.Tensor)
    np.testing.assert_allclose(np.asarray(r), np.exp(np.asarray(t)), rtol=1e-15)
    s = np.sum(t, axis=0)
    assert isinstance(s, framejit.Tensor) and s.tolist() == [2.5, 5.0]
    m = np.maximum(t, 1.5)
    assert isinstance(m, framejit.Tensor) and m.tolist() == [[1.5, 1.5], [2.0, 4.0]]
    # An ndarray operand is taken as a Tensor view: the result is a Tensor.
    r = np.asarray([1.0, 1.0]) + t
    assert isinstance(r, framejit.Tensor) and r.tolist() == [[1.5, 2.0], [3.0, 5.0]]


@needs_numpy
@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64"])
def test_array_array_ops_match_numpy(dtype):
    rng = np.random.default_rng(0)
    a = (rng.standard_normal((5, 7)) * 10).astype(dtype)
    b = (rng.standard_normal((5, 7)) * 10).astype(dtype)
    if dtype.startswith("int"):
        b[b == 0] = 3
    ta, tb = T(a), T(b)
    for name, op in [("add", lambda x, y: x + y), ("mul", lambda x, y: x * y), ("sub", lambda x, y: x - y),
                     ("gt", lambda x, y: x > y), ("floordiv", lambda x, y: x // y), ("max", lambda x, y: np.maximum(x, y))]:
        r = op(ta, tb)
        e = op(a, b)
        assert r.dtype == e.dtype.name, name
        np.testing.assert_array_equal(np.asarray(r), e, err_msg=name)
    np.testing.assert_array_equal(np.asarray(ta.sum(axis=1)), a.sum(axis=1))
    np.testing.assert_array_equal(np.asarray(ta.T), a.T)
    if dtype.startswith("float"):
        np.testing.assert_allclose(np.asarray(ta @ tb.T), a @ b.T, rtol=1e-5 if dtype == "float32" else 1e-12)


def test_ops_from_many_threads():
    import threading

    errors = []

    def work(k):
        try:
            dtype = ["float64", "float32", "int64", "int32"][k]
            big = T([float(i % 7) for i in range(1 << 17)]).astype(dtype)  # large: kernels drop the GIL
            for i in range(30):
                r = (big * 2 + i).sum()
                want = sum(2 * (j % 7) + i for j in range(1 << 17)) if i == 0 else None
                if want is not None and r.item() != want:
                    errors.append((dtype, r.item(), want))
                small = T([[1, 2], [3, 4]]).astype(dtype)
                if (small @ small).tolist() != [[7, 10], [15, 22]]:
                    errors.append((dtype, "matmul"))
        except Exception as e:  # noqa: BLE001
            errors.append(repr(e))

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
