"""Reductions of bool, int32, int64 and uint8 arrays in the "jit" backend (Note [Integer
reductions] in jit/x86/reduction_codegen.cpp), compared with eager NumPy 1.24 exactly: values,
dtypes (sum/prod of bool and signed ints give int64, of uint8 uint64; max/min keep the dtype;
mean/var/std give float64; argmax/argmin int64) and result types (a NumPy scalar for a full
reduction, an array otherwise). Each must run as a generated kernel (no extern call).

Exactness: integer sums, products (wrapping around), max/min and the arg forms do not depend on
the order of combination, and means of the integers used here have exact float64 sums. var/std
sum squared float64 deviations, which round like any float64 sum (test_jit_reductions.py's
tolerance)."""

import numpy as np
import pytest

import framejit

RNG = np.random.default_rng(5)
DTYPES = [np.bool_, np.int32, np.int64, np.uint8]
IDS = ["bool", "i32", "i64", "u8"]
REDUCTIONS = ["sum", "prod", "max", "min", "mean", "var", "std", "argmax", "argmin"]


def data(shape, dtype, order="C", name="sum"):
    if dtype == np.bool_:
        x = RNG.random(shape) > 0.5
    elif name.startswith("arg"):
        x = RNG.integers(0 if dtype == np.uint8 else -3, 4, shape).astype(dtype)  # few values: ties
    else:
        x = RNG.integers(0 if dtype == np.uint8 else -1000, 256 if dtype == np.uint8 else 1000, shape).astype(dtype)
    return np.asfortranarray(x) if order == "F" else x


def same(got, want, name="sum"):
    assert type(got) is type(want), (type(got), type(want))
    assert np.asarray(got).dtype == np.asarray(want).dtype, (np.asarray(got).dtype, np.asarray(want).dtype)
    assert np.shape(got) == np.shape(want)
    if name in ("var", "std"):
        np.testing.assert_allclose(got, want, rtol=1e-13, atol=1e-12)
    else:
        np.testing.assert_array_equal(got, want)


def run(fn, *args):
    """Cold call and cache hit; returns [(got, want)]."""
    want = fn(*args)
    compiled = framejit.compile(fn, backend="jit", fullgraph=True)
    return [(compiled(*args), want) for _ in range(2)]


def same_items(runs, name="sum"):
    """Each run's results (a tuple) element by element as `same` checks them."""
    for got, want in runs:
        assert len(got) == len(want)
        for g, w in zip(got, want):
            same(g, w, name)


def assert_compiled(min_reductions=1):
    s = framejit.stats()
    assert s["extern_calls"] == 0, s
    assert s["reductions"] >= min_reductions, s


CASES = [  # shape, axis
    ((1,), None),
    ((7,), 0),
    ((33,), -1),
    ((1000,), None),
    ((7, 33), 0),
    ((7, 33), -1),
    ((7, 33), None),
    ((7, 33), (0, 1)),
    ((4, 5, 9), 1),
    ((4, 5, 9), (0, 2)),
    ((4, 5, 9), None),
    ((1000, 3), 0),
    ((3, 1000), 1),
]


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize("shape,axis", CASES, ids=str)
@pytest.mark.parametrize("name", REDUCTIONS)
def test_function_and_method_forms(name, shape, axis, order, dtype):
    if name.startswith("arg") and isinstance(axis, tuple):
        pytest.skip("argmax takes one axis")
    x = data(shape, dtype, order, name)
    fn = getattr(np, name)

    def f(x):
        return fn(x, axis=axis), getattr(x, name)(axis)

    same_items(run(f, x), name)
    assert_compiled(2)


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
@pytest.mark.parametrize("axis", [None, 0, -1, (0, 2)], ids=str)
@pytest.mark.parametrize("name", ["sum", "prod", "max", "min", "mean", "var", "std"])
def test_keepdims(name, axis, dtype):
    x = data((3, 4, 17), dtype)

    def f(x):
        return getattr(np, name)(x, axis=axis, keepdims=True)

    for got, want in run(f, x):
        same(got, want, name)
    assert_compiled()


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
@pytest.mark.parametrize("name", ["argmax", "argmin"])
def test_arg_first_extreme_and_sliced_input(name, dtype):
    x = data((6, 40), dtype, name=name)[:, ::2]  # strided rows
    x[2, :] = x.max() if name == "argmax" else x.min()  # ties across the whole row

    def f(x):
        return getattr(np, name)(x), getattr(np, name)(x, -1), getattr(np, name)(x, 0)

    same_items(run(f, x))
    assert_compiled(3)


def test_bool_argmax_is_the_first_true_and_argmin_the_first_false():
    def f(m):
        return m.argmax(), m.argmin(), m.argmax(-1), m.argmin(0)

    for m in [np.zeros((5, 9), bool), np.ones((5, 9), bool), np.eye(5, 9, 3, dtype=bool)]:
        framejit.reset()
        same_items(run(f, m))
        assert_compiled(4)


def test_common_forms():
    x = RNG.standard_normal((64, 50)).astype(np.float32)
    labels = RNG.integers(0, 10, (64, 50)).astype(np.int64)
    counts = RNG.integers(0, 100, (64, 50)).astype(np.int32)
    mask = x > 0.3

    def f(x, labels, counts, mask):
        return (
            (x > 0).sum(),
            mask.sum(-1),
            labels.max(),
            counts.mean(0),
            np.argmax(counts, -1),
            x.astype(np.int64).sum(),
            np.prod(counts[:3, :4] % 5 + 1),
            (labels == 3).sum(axis=0),
            mask.mean(),
        )

    same_items(run(f, x, labels, counts, mask))
    assert_compiled(9)


def test_overflow_wraps_as_in_numpy():
    big = np.full(100, 2**62, np.int64)
    i32 = np.full(1000, 2**31 - 1, np.int32)
    u8 = np.full(1000, 200, np.uint8)
    i32p = np.full(70, 3, np.int32)

    def f(big, i32, u8, i32p):
        return big.sum(), i32.sum(), u8.sum(), u8.prod(), i32p.prod(), big.prod(), np.sum(u8.reshape(10, 100), 1)

    same_items(run(f, big, i32, u8, i32p))
    assert_compiled(7)


def test_extremes_of_each_type():
    vals = {
        np.int32: [np.iinfo(np.int32).min, np.iinfo(np.int32).max, 0, -1],
        np.int64: [np.iinfo(np.int64).min, np.iinfo(np.int64).max, 0, -1],
        np.uint8: [0, 255, 128, 127],
    }
    for dt, v in vals.items():
        x = np.array(v * 9, dt)
        for k in range(1, len(x) + 1):
            framejit.reset()
            y = x[:k].copy()

            def f(y):
                return y.max(), y.min(), y.argmax(), y.argmin()

            same_items(run(f, y))
            assert_compiled(4)


def test_int_mean_is_summed_in_float64():
    # Values whose int64 sum would differ from the float64 one: NumPy converts each element first.
    x = np.array([2**53 + 1, 1, -(2**53), 7, 2**40], np.int64)

    def f(x):
        return x.mean(), np.mean(x, keepdims=True)

    same_items(run(f, x))
    assert_compiled(2)


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
def test_var_std_ddof(dtype):
    x = data((9, 31), dtype)

    def f(x):
        return x.var(0, ddof=1), np.std(x, -1, ddof=1), x.var()

    same_items(run(f, x), "var")
    assert_compiled(3)


def test_prologues_of_several_dtypes_fuse():
    x = RNG.integers(-50, 50, (16, 33)).astype(np.int32)
    y = RNG.standard_normal((16, 33))

    def f(x, y):
        return ((x > 0) & (y < 0.5)).sum(-1), (x * 2 + 1).max(0), np.argmin(x - 3, -1), (y > 0).mean(), (x % 7).prod(0)

    same_items(run(f, x, y))
    s = framejit.stats()
    assert s["extern_calls"] == 0 and s["reductions"] == 5, s


def test_dtypes_left_to_numpy_stay_correct():
    # int16 / uint16 / int8 / uint32 / uint64 reductions, and dtype= arguments, run through NumPy.
    xs = [np.arange(-20, 20, dtype=t) for t in (np.int16, np.int8)] + [
        np.arange(40, dtype=t) for t in (np.uint16, np.uint32, np.uint64)
    ]

    def f(x):
        return x.sum(), x.max(), x.mean(), x.argmax(), x.sum(dtype=np.int32)

    for x in xs:
        same_items(run(f, x))


@pytest.mark.parametrize("shape", [(8, 33), (512, 300)], ids=str)
def test_row_blocked_chains_with_integer_reductions(shape):
    # Large enough for the chain to run row block by row block (runtime/program.cpp).
    x = RNG.integers(-100, 100, shape).astype(np.int32)

    def f(x):
        m = x.max(-1, keepdims=True)
        c = (x > 0).sum(-1, keepdims=True)
        return (x - m).sum(-1), x * 2 - c, (x == m).argmax(-1), (x - m).mean(-1)

    same_items(run(f, x))
    s = framejit.stats()
    assert s["extern_calls"] == 0 and s["reductions"] >= 4, s


@pytest.mark.parametrize("dtype", [np.bool_, np.int32, np.uint8, np.float32, np.float64], ids=str)
@pytest.mark.parametrize("layout", ["C", "F", "cols3"])
@pytest.mark.parametrize("axis", [None, 0, 1, -1], ids=str)
def test_any_all_are_max_min_of_truth_values(dtype, layout, axis):
    # any/all are bool max/min reductions of x != 0: NaN is true, -0.0 false, as in NumPy.
    x = RNG.integers(0, 3, (300, 70)).astype(dtype)
    if np.dtype(dtype).kind == "f":
        x[x == 2] = np.nan
        x[0, :] = -0.0
    x[:, 5] = 1  # a column of all-true, and one of all-false
    x[:, 6] = 0
    x = np.asfortranarray(x) if layout == "F" else x[:, ::3] if layout == "cols3" else x

    def f(x):
        return x.any(axis=axis), np.all(x, axis=axis), (x > 0).any(axis=axis, keepdims=True), np.all(x < 2, axis)

    framejit.reset()
    same_items(run(f, x))
    assert_compiled(4)


def test_any_all_of_nothing_and_with_out_stay_with_numpy():
    def f(x, out):
        return x.any(), x.all(axis=0), np.any(x, axis=0, out=out)

    compiled = framejit.compile(f, backend="jit")
    for x in [np.zeros((0, 3)), np.ones((0, 3), np.uint8)]:
        want_out, got_out = np.zeros(3, bool), np.zeros(3, bool)
        want = f(x, want_out)
        for _ in range(2):
            got = compiled(x, got_out)
            for g, w in zip(got[:2], want[:2]):
                same(g, w)
            assert got[2] is got_out and np.array_equal(got_out, want_out)


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
@pytest.mark.parametrize("order", ["C", "F"])
def test_column_rows_split_into_parts_are_exact(dtype, order):
    # Note [Split column rows]: a few outputs over thousands of rows join partial results per part
    # (integer sums and products wrap as one pass does, max/min/any/all exactly).
    x = data((3000, 40), dtype, order)
    axis = 0 if order == "C" else 1
    x = x if order == "C" else np.asfortranarray(x.T)

    def f(x):
        return x.sum(axis=axis), x.prod(axis=axis), x.max(axis=axis), x.min(axis=axis), x.any(axis=axis), \
            np.all(x, axis=axis), x.mean(axis=axis)

    for got, want in run(f, x):
        for name, g, w in zip(["sum", "prod", "max", "min", "any", "all", "mean"], got, want):
            if name == "mean":
                np.testing.assert_allclose(g, w, rtol=1e-13)
                assert g.dtype == w.dtype
            else:
                same(g, w)
    assert_compiled(7)
