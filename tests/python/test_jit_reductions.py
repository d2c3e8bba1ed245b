"""Reductions in the "jit" backend over any axes: sum, prod, mean, max/amax, min/amin, var, std,
argmax, argmin; axis int / negative / tuple / None, keepdims, ddof; method and function forms;
1-D, 2-D and 3-D arrays in C and F order and non-contiguous slices; NaN; fused prologues. Each is
compared with eager NumPy and must run as a generated kernel (not an extern call).

Tolerance policy: max, min, argmax and argmin are exact (bit for bit, NaN included). Sums are not:
NumPy adds contiguous runs pairwise and outer dims in sequence, the kernels keep 4 vector
accumulators per row and add outer dims in sequence (NumPy's order there), so the two differ by
rounding only, typically by about sqrt(count) * eps * sum|x|. The tests allow
4 * sqrt(count) * eps * count * max|x| absolute (divided by count for means; with (2 max|x|)^2
for var/std, whose deviations are at most that), 4 * count * eps relative for products, plus 4 ulp
relative. Means divide by the count converted to the array's type, as NumPy does."""

import numpy as np
import pytest

import framejit

RNG = np.random.default_rng(11)
EPS = {np.float32: np.finfo(np.float32).eps, np.float64: np.finfo(np.float64).eps}

SUMMING = {"sum", "mean", "var", "std"}
EXACT = {"max", "min", "amax", "amin", "argmax", "argmin"}


def data(shape, dtype, order="C", nan=False):
    x = RNG.standard_normal(shape).astype(dtype)
    if nan and x.size > 2:
        x.reshape(-1)[[x.size // 3, x.size // 2]] = np.nan
    return np.asfortranarray(x) if order == "F" else x


def reduced_count(x, axis):
    if axis is None:
        return x.size
    axes = axis if isinstance(axis, tuple) else (axis,)
    return int(np.prod([x.shape[a] for a in axes]))


def compare(name, got, want, x, axis, dtype):
    assert type(got) is type(want), (type(got), type(want))
    assert got.dtype == want.dtype and np.shape(got) == np.shape(want), (got.dtype, want.dtype)
    if name in EXACT:
        np.testing.assert_array_equal(got, want)
        return
    eps = EPS[dtype]
    n = max(reduced_count(x, axis), 1)
    finite = np.abs(x[np.isfinite(x)])
    scale = float(finite.max()) if finite.size else 1.0
    if name == "prod":
        atol = 4 * n * eps * np.abs(want).max(initial=0)
    elif name in ("var", "std"):
        atol = 4 * np.sqrt(n) * eps * (2 * scale) ** 2
    else:
        atol = 4 * np.sqrt(n) * eps * n * scale / (n if name == "mean" else 1)
    np.testing.assert_allclose(got, want, rtol=4 * eps, atol=atol)


def run(fn, *args, fullgraph=True):
    """Cold call and cache hit; returns [(got, want)] per output."""
    want = fn(*args)
    compiled = framejit.compile(fn, backend="jit", fullgraph=fullgraph)
    results = []
    for _ in range(2):
        got = compiled(*args)
        results.append((got, want))
    return results


def assert_compiled(min_reductions=1):
    s = framejit.stats()
    assert s["extern_calls"] == 0, s
    assert s["reductions"] >= min_reductions, s


REDUCTIONS = ["sum", "prod", "mean", "max", "min", "var", "std", "argmax", "argmin"]
CASES = [  # shape, axis
    ((33,), None),
    ((33,), 0),
    ((33,), -1),
    ((7, 33), 0),
    ((7, 33), 1),
    ((7, 33), -1),
    ((7, 33), None),
    ((7, 33), (0, 1)),
    ((4, 5, 9), 0),
    ((4, 5, 9), 1),
    ((4, 5, 9), -1),
    ((4, 5, 9), (0, 2)),
    ((4, 5, 9), (1, 2)),
    ((4, 5, 9), None),
    ((1000, 3), 0),
    ((3, 1000), 1),
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize("shape,axis", CASES, ids=str)
@pytest.mark.parametrize("name", REDUCTIONS)
def test_function_and_method_forms(name, shape, axis, order, dtype):
    if name.startswith("arg") and isinstance(axis, tuple):
        pytest.skip("argmax takes one axis")
    x = data(shape, dtype, order)
    if name == "prod":
        x = (1 + 0.1 * x).astype(dtype)
    fn = getattr(np, name)

    def f(x):
        return fn(x, axis=axis), getattr(x, name)(axis)

    for got, want in run(f, x):
        for g, w in zip(got, want):
            compare(name, g, w, x, axis, dtype)
    assert_compiled(2)


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("axis", [None, 0, 1, -1, (0, 2), (2, 0)], ids=str)
@pytest.mark.parametrize("name", ["sum", "prod", "mean", "max", "min", "var", "std"])
def test_keepdims(name, axis, dtype):
    x = data((3, 4, 17), dtype)

    def f(x):
        return getattr(np, name)(x, axis=axis, keepdims=True), getattr(x, name)(axis=axis, keepdims=True)

    for got, want in run(f, x):
        for g, w in zip(got, want):
            compare(name, g, w, x, axis, dtype)
    assert_compiled(2)


@pytest.mark.parametrize("name", ["argmax", "argmin"])
@pytest.mark.parametrize("axis", [None, 0, 1], ids=str)
def test_arg_keepdims(name, axis):
    x = data((6, 13), np.float32)

    def f(x):
        return getattr(np, name)(x, axis=axis, keepdims=True)

    for got, want in run(f, x):
        compare(name, got, want, x, axis, np.float32)
    assert_compiled()


SLICES = {
    "every_other_column": lambda x: x[:, ::2],
    "every_other_row": lambda x: x[::2],
    "reversed": lambda x: x[::-1, ::-1],
    "transposed": lambda x: x.T,
    "inner_block": lambda x: x[1:-1, 2:-3],
}


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("axis", [None, 0, 1], ids=str)
@pytest.mark.parametrize("view", list(SLICES))
@pytest.mark.parametrize("name", REDUCTIONS)
def test_non_contiguous_inputs(name, view, axis, dtype):
    base = data((12, 40), dtype)
    x = SLICES[view](base)
    if name == "prod":
        x = SLICES[view]((1 + 0.1 * base).astype(dtype))

    def f(x):
        return getattr(np, name)(x, axis=axis)

    for got, want in run(f, x):
        compare(name, got, want, x, axis, dtype)
    assert_compiled()


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("axis", [None, 0, 1, (0, 1)], ids=str)
@pytest.mark.parametrize("name", REDUCTIONS)
def test_nan_inputs(name, axis, dtype):
    if name.startswith("arg") and isinstance(axis, tuple):
        pytest.skip("argmax takes one axis")
    x = data((9, 21), dtype, nan=True)
    x[0, 0] = np.inf
    x[2, 3] = -np.inf

    def f(x):
        return getattr(np, name)(x, axis=axis)

    with np.errstate(all="ignore"):
        for got, want in run(f, x):
            if name in EXACT:
                np.testing.assert_array_equal(got, want)
            else:
                assert type(got) is type(want) and np.shape(got) == np.shape(want)
                np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    assert_compiled()


def test_argmax_first_nan_and_first_tie():
    x = np.array([[1.0, 3.0, 3.0, np.nan, 5.0, np.nan], [2.0, 2.0, -1.0, -1.0, 0.0, 2.0]], np.float32)

    def f(x, row):
        return np.argmax(x, axis=1), np.argmin(x, axis=1), np.argmax(x), np.argmin(row), x.argmax(0)

    for got, want in run(f, x, x[1].copy()):
        for g, w in zip(got, want):
            assert type(g) is type(w)
            np.testing.assert_array_equal(g, w)
    assert_compiled(5)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32], ids=["f32", "f64", "i32"])
def test_long_arg_rows_by_blocks(dtype):
    # Note [Long and strided arg rows]: a long contiguous row's blocks give their extremes first,
    # then the first block holding the best gives the index; ties and NaNs across blocks as NumPy.
    n, block = 100_003, 1 << 14
    base = np.random.default_rng(3).integers(-50, 50, n).astype(dtype)
    cases = {}
    places = {"first": [0], "last": [n - 1], "two blocks": [block + 5, 3 * block + 1], "edge": [block - 1, block]}
    for name, at in places.items():
        x = base.copy()
        x[at] = 99
        x[[a + 1 for a in at if a + 1 < n]] = -99
        cases[name] = x
    if np.dtype(dtype).kind == "f":
        for name, at in {"nan late": [2 * block + 7], "nan twice": [block + 3, 4 * block], "nan first": [0]}.items():
            x = base.copy()
            x[at] = np.nan
            cases[name] = x
        z = np.zeros(n, dtype)
        z[::3] = -0.0
        cases["zeros"] = z
    f = framejit.compile(lambda x: (np.argmax(x), np.argmin(x), np.argmax(x.reshape(1, -1), axis=1)))
    for name, x in cases.items():
        got, want = f(x), (np.argmax(x), np.argmin(x), np.argmax(x.reshape(1, -1), axis=1))
        assert got[0] == want[0] and got[1] == want[1] and got[2].tolist() == want[2].tolist(), name
        # Strided: gathered a block at a time (blocks of 2048), the same way round.
        both = np.empty((2, n), dtype, order="F")
        both[0], both[1] = x, x[::-1]
        got, want = f(both[0]), (np.argmax(both[0]), np.argmin(both[0]), np.argmax(both[:1], axis=1))
        assert got[0] == want[0] and got[1] == want[1] and got[2].tolist() == want[2].tolist(), name
        g = framejit.compile(lambda y: (np.argmax(y, axis=1), np.argmin(y, axis=1)))
        for a, b in zip(g(both), (np.argmax(both, axis=1), np.argmin(both, axis=1))):
            assert a.tolist() == b.tolist(), name


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int64], ids=["f32", "f64", "i32", "i64"])
def test_argmax_in_the_column_form(dtype):
    # Note [Column arg-reductions]: rows of 2 and 8 of a C array, and axis=1 of Fortran ones, are
    # reduced vectorized over the outputs. Few distinct values (ties), NaN in some outputs (first
    # NaN wins), outputs whose every value is the starting one (-inf / the lowest integer: index 0).
    low = np.iinfo(dtype).min if np.dtype(dtype).kind == "i" else -np.inf
    high = np.iinfo(dtype).max if np.dtype(dtype).kind == "i" else np.inf
    cases = []
    for shape, order in (((1000, 2), "C"), ((300, 8), "C"), ((333, 41), "F"), ((100, 2), "F")):
        x = np.round(RNG.standard_normal(shape) * 2).astype(dtype)
        x[5] = low
        x[6] = high
        if np.dtype(dtype).kind == "f":
            x[7, 1] = np.nan
            x[8, :] = np.nan
        cases.append(np.asfortranarray(x) if order == "F" else x)

    def f(x):
        return np.argmax(x, axis=1), np.argmin(x, axis=1), (x * 2).argmax(axis=-1), np.argmax(x[::-1], axis=1)

    for x in cases:
        for got, want in run(f, x):
            for g, w in zip(got, want):
                np.testing.assert_array_equal(g, w)
    assert_compiled(4)


def test_results_have_numpys_memory_order():
    # Note [Output memory order]: reductions allocate in the input's memory order over the kept
    # axes (keepdims' size-1 axes included), argmax in C order, as NumPy does; a Fortran-order
    # input's result is written along its adjacent axis.
    y = np.asfortranarray(RNG.standard_normal((10, 20, 3)))
    z = RNG.standard_normal((10, 20, 3)).transpose(1, 0, 2)

    def f(x, axis, keepdims):
        return (x.sum(axis=axis, keepdims=keepdims), x.max(axis=axis, keepdims=keepdims),
                x.mean(axis=axis, keepdims=keepdims), np.argmax(x, axis=axis), x.std(axis=(0, 2)))

    for x in (y, z):
        for axis in (0, 1, 2):
            for keepdims in (False, True):
                for got, want in run(lambda x: f(x, axis, keepdims), x):
                    for g, w in zip(got, want):
                        np.testing.assert_allclose(g, w, rtol=1e-12)
                        assert g.strides == w.strides, (axis, keepdims, g.strides, w.strides)


def test_max_min_signed_zero_and_infinities():
    x = np.array([[-0.0, 0.0, -np.inf], [0.0, -0.0, np.inf], [np.inf, -np.inf, 0.0]], np.float64)

    def f(x):
        return x.max(0), x.min(0), x.max(1), x.min(1), x.sum(0), x.max(), x.min()

    with np.errstate(invalid="ignore"):  # inf + -inf in the sums
        for got, want in run(f, x):
            for g, w in zip(got, want):
                np.testing.assert_array_equal(g, w)
    assert_compiled(7)


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
def test_full_reductions_return_numpy_scalars(dtype):
    x = data((5, 8), dtype)

    def f(x, v):
        return x.sum(), np.mean(x), x.max(), np.amin(x), x.var(), x.std(ddof=1), x.argmax(), v.sum(0), x.prod()

    for got, want in run(f, x, x[0].copy()):
        for name, g, w in zip(["sum", "mean", "max", "min", "var", "std", "argmax", "sum", "prod"], got, want):
            assert type(g) is type(w) and type(g) in (np.float32, np.float64, np.int64), (type(g), type(w))
            compare(name, g, w, x, None, dtype)
    assert_compiled(9)


@pytest.mark.parametrize("ddof", [0, 1, 2])
@pytest.mark.parametrize("axis", [None, 0, 1, (0, 1)], ids=str)
def test_var_std_ddof(axis, ddof):
    x = data((6, 11), np.float64) * 3 + 100  # a large mean: the two-pass algorithm matters

    def f(x):
        return x.var(axis=axis, ddof=ddof), np.std(x, axis=axis, ddof=ddof), np.var(x, axis, None, None, ddof)

    for got, want in run(f, x):
        for name, g, w in zip(["var", "std", "var"], got, want):
            compare(name, g, w, x - 100, axis, np.float64)
    if ddof >= 2 and axis in (0, 1):
        # A symbolic size is only known to be >= 2: count - ddof might be 0, where NumPy warns.
        assert framejit.stats()["extern_calls"] == 3
    else:
        assert_compiled(6)


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
def test_prologues_fuse_into_every_form(dtype):
    x = data((24, 37), dtype)
    w = data((24, 1), dtype)

    def f(x, w, a):
        y = np.exp(x * a) + w
        return y.sum(axis=0), y.max(axis=1), y.var(axis=0), np.argmax(y * 2.0, axis=0), (x * x).mean()

    # exp is framejit's own (within an ulp or two of NumPy's), so max compares with a tolerance too.
    tol = 1e-5 if dtype == np.float32 else 1e-12
    for got, want in run(f, x, w, 0.5):
        for name, g, v in zip(["sum", "max", "var", "argmax", "mean"], got, want):
            assert type(g) is type(v) and g.dtype == v.dtype and np.shape(g) == np.shape(v)
            if name == "argmax":
                np.testing.assert_array_equal(g, v)
            else:
                np.testing.assert_allclose(g, v, rtol=tol, atol=tol * 40)
    s = framejit.stats()
    assert s["extern_calls"] == 0 and s["kernels"] == 0, s  # every producer recomputed in a prologue


def test_keepdims_result_broadcasts_into_a_pointwise_kernel():
    x = data((16, 40), np.float32)

    def f(x):
        mu = x.mean(axis=0, keepdims=True)
        sd = x.std(axis=0, keepdims=True)
        return (x - mu) / (sd + 1e-5), np.exp(x - x.max(axis=1, keepdims=True))

    for got, want in run(f, x):
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)
    s = framejit.stats()
    assert s["extern_calls"] == 0 and s["kernels"] >= 1 and s["reductions"] >= 3, s


@pytest.mark.parametrize(
    "call",
    [lambda x: x.sum(axis=0, dtype=np.float64), lambda x: x.mean(axis=0, dtype=np.float64)],
    ids=["sum_dtype", "mean_dtype"],
)
def test_dtype_argument_runs_in_numpy(call):
    x = data((5, 6), np.float32)
    for got, want in run(call, x):
        np.testing.assert_array_equal(got, want)
    assert framejit.stats()["extern_calls"] >= 1


@pytest.mark.parametrize(
    "call",
    [
        lambda x: np.sum(x, axis=0, initial=1.0),
        lambda x: np.sum(x, axis=0, where=x > 0),
        lambda x: np.max(x, axis=1, initial=0.0),
    ],
    ids=["initial", "where", "max_initial"],
)
def test_initial_and_where_stay_with_numpy(call):
    x = data((5, 6), np.float32)
    for got, want in run(call, x, fullgraph=False):
        np.testing.assert_array_equal(got, want)


def test_zero_size_reductions_stay_with_numpy():
    x = np.zeros((0, 4), np.float32)

    def sums(x):
        return x.sum(axis=0), x.prod(axis=0), x.sum(axis=1), x.max(axis=1)

    for got, want in run(sums, x):
        for g, w in zip(got, want):
            assert g.shape == w.shape and g.dtype == w.dtype
            np.testing.assert_array_equal(g, w)
    compiled = framejit.compile(lambda x: x.max(axis=0), backend="jit")
    with pytest.raises(ValueError, match="zero-size array"):
        compiled(x)


def test_new_sizes_do_not_recompile():
    def f(x):
        return x.sum(axis=0), x.argmax(axis=1), x.var()

    compiled = framejit.compile(f, backend="jit")
    for shape in [(5, 7), (9, 130), (64, 3), (2, 2)]:
        x = data(shape, np.float32)
        for g, w, name in zip(compiled(x), f(x), ["sum", "argmax", "var"]):
            compare(name, g, w, x, None if name == "var" else 0, np.float32)
    assert framejit.stats()["recompiles"] == 0


@pytest.mark.parametrize("shape", [(4096, 4096), (1 << 20, 3), (3, 1 << 20), (1 << 21,)], ids=str)
def test_large_arrays(shape):
    x = data(shape, np.float32)

    def f(x):
        return x.sum(axis=0), x.max(axis=-1), x.argmin(axis=0), x.mean(axis=None)

    for got, want in run(f, x):
        for name, g, w, axis in zip(["sum", "max", "argmin", "mean"], got, want, [0, -1, 0, None]):
            compare(name, g, w, x, axis, np.float32)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", ["sum", "mean", "max", "min", "prod", "std", "var"])
@pytest.mark.parametrize("row", [1, 2, 3, 7, 8, 16, 17])
def test_short_rows_in_the_column_form(name, row, dtype):
    # Note [Short rows]: rows within a cache line under many outputs run as columns; results as
    # NumPy's (NaN included), for C, strided and reduced-outer layouts and keepdims.
    x = data((300, row), dtype, nan=name in ("max", "min"))
    wide = data((300, 2 * row), dtype)
    cube = data((3, 300, row), dtype)
    fn = getattr(np, name)

    def f(x, wide, cube):
        return fn(x, axis=1), fn(wide[:, ::2], axis=-1, keepdims=True), fn(cube, axis=(0, 2))

    for got, want in run(f, x, wide, cube):
        for g, w, a, axis in zip(got, want, (x, wide[:, ::2], cube), (1, -1, (0, 2))):
            compare(name, g, w, a, axis, dtype)


def test_short_integer_rows_are_exact():
    i = RNG.integers(-1000, 1000, (5000, 8))
    for got, want in run(lambda i: (i.sum(axis=1), i.max(axis=1), (i * 3).sum(axis=-1, keepdims=True)), i):
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g, w)
            assert g.dtype == w.dtype


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", ["sum", "mean", "max", "min", "prod", "std"])
def test_strided_columns_through_buffers(name, dtype):
    # Note [Buffered strided columns]: adjacent outputs over strided inputs (every third column,
    # reversed columns, a strided operand beside a contiguous one) copy blocks of rows into a
    # buffer for the vector loop; several blocks per call (777 rows), rows in order as NumPy's.
    x = data((777, 333), dtype, nan=name in ("max", "min"))
    y = data((777, 111), dtype)
    cube = data((3, 60, 90), dtype)
    fn = getattr(np, name)

    def f(x, y, cube):
        return (fn(x[:, ::3], axis=0), fn(x[:, ::-3], axis=0, keepdims=True), fn(x[:, ::3] * 0.5 + y, axis=0),
                fn(cube[:, :, ::2], axis=(0, 1)))

    views = (x[:, ::3], x[:, ::-3], x[:, ::3] * 0.5 + y, cube[:, :, ::2])
    for got, want in run(f, x, y, cube):
        for g, w, a, axis in zip(got, want, views, (0, 0, 0, (0, 1))):
            compare(name, g, w, a, axis, dtype)
    assert_compiled(4)
