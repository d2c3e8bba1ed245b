"""Writes into arrays inside a graph (Note [Writes into arrays]): `x[index] = v` and in-place
operators on inputs and on arrays the function made. Every case runs eagerly and compiled (cold
call and cache hit, on both backends) and compares the results and the arguments afterwards."""

import numpy as np
import pytest

import framejit
from conftest import BACKENDS, check, check_sequence, randn

A = randn(4, 5, seed=1)
B = randn(4, 5, seed=2)
V = randn(5, seed=3)


def f_issue_f(A, B):
    y = np.tanh(A) * B + 1.0
    B[0] = 0.0
    return y * 2.0


def f_issue_g(C, A, B):
    C[:] = 1.5 * A @ B + 0.5 * C


def f_int_row(x, v):
    x[1] = v * 2.0
    return x.sum()


def f_slices(x):
    x[1:3, ::2] = -1.0
    x[-1, 1:] = 7
    x[..., 0] = 0.5
    return x


def f_none_and_ellipsis(x, v):
    x[None, 2] = v
    x[...] += 1.0
    return x.mean()


def f_inplace_input(x, y):
    x += y
    x *= 0.5
    x -= 1
    return x * 2.0


def f_made_array(x):
    y = x * 2.0
    y[0, :] = 3.0
    y[:, -1] = y[:, 0]
    return y + 1.0


def f_write_then_read(x):
    x[0] = 100.0
    return x.sum(), x[0, 0] * 1.0


def f_return_written(x):
    x[0, 0] = 5.0
    return x


def f_two_inputs(x, y):
    x[0] = y[1]
    y[1] = x[2]
    return x, y


def f_int_into_float_and_back(xi, xf):
    xi[0] = 2.7  # NumPy truncates
    xf[1] = 3
    return xi, xf


def f_numpy_scalar_value(x, s):
    x[0, 0] = s
    x[1] *= s
    return x


def f_unrolled_loop(a, b):
    for _ in range(3):
        b[1:-1] = 0.33 * (a[:-2] + a[1:-1] + a[2:])
        a[1:-1] = 0.33 * (b[:-2] + b[1:-1] + b[2:])
    return a, b


WRITING = [
    (f_issue_f, (A, B)),
    (f_issue_g, (np.zeros((4, 4)), A[:, :4].copy(), B[:4, :4].copy())),
    (f_int_row, (A, V)),
    (f_slices, (A,)),
    (f_none_and_ellipsis, (A, V)),
    (f_inplace_input, (A, V)),
    (f_made_array, (A,)),
    (f_write_then_read, (A,)),
    (f_return_written, (A,)),
    (f_two_inputs, (A, B)),
    (f_int_into_float_and_back, (np.arange(5), np.zeros(5))),
    (f_numpy_scalar_value, (A, np.float64(1.5))),
    (f_unrolled_loop, (np.linspace(0, 1, 12), np.zeros(12))),
]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn,args", WRITING, ids=[f.__name__ for f, _ in WRITING])
def test_write_is_captured_and_matches_cpython(fn, args, backend):
    check(fn, *args, backend=backend, fullgraph=True)


def test_returned_input_is_the_same_object():
    x = A.copy()
    assert framejit.compile(f_return_written)(x) is x


def test_issue_cases_compile_to_one_graph():
    assert framejit.explain(f_issue_f)(A.copy(), B.copy()).graph_count == 1
    assert framejit.explain(f_issue_g)(np.zeros((4, 4)), A[:, :4].copy(), B[:4, :4].copy()).graph_count == 1


def test_aliased_inputs_are_guarded():
    def f(x, y):
        x[0] = 1.0
        return y * 2.0

    base = np.arange(12.0).reshape(3, 4)
    compiled = framejit.compile(f)
    for make in (lambda: (base.copy(), base.copy()),   # disjoint: compiled
                 lambda: (lambda a: (a, a))(base.copy()),  # the same array twice
                 lambda: (lambda a: (a[1:], a))(base.copy()),  # a view and its base
                 lambda: (base.copy(), base.copy())):
        want_args, got_args = make(), make()
        want = f(*want_args)
        got = compiled(*got_args)
        np.testing.assert_array_equal(got, want)
        for w, g in zip(want_args, got_args):
            np.testing.assert_array_equal(g, w)


def test_read_only_input_raises_like_numpy():
    def f(x):
        y = x * 2.0
        x[0] = 1.0
        return y

    ro = A.copy()
    ro.flags.writeable = False
    check_sequence(f, [(A,), (ro,), (A,)])


def test_shape_mismatch_raises_like_numpy():
    def f(x, v):
        x[0] = v
        return x

    check_sequence(f, [(A, V), (A, np.ones(3))])


def f_view_sees_write(x):
    v = x[1]
    x[1, 0] = 9.0  # v shows this
    return v * 1.0


def f_write_through_view(x):
    v = x[1]
    v[0] = 9.0  # x shows this
    w = v[2:]
    w += 1.0  # and this, through a view of a view
    return x.sum(), v * 1.0


def f_augmented_item(C, beta):
    for i in range(3):
        C[i, : i + 1] *= beta
    return C


def f_made_array_view(x):
    y = x * 2.0
    r = y[0]
    y[0, 1] = -5.0
    r[2] = 4.0
    return y, r.sum()


VIEWS = [
    (f_view_sees_write, (A,)),
    (f_write_through_view, (A,)),
    (f_augmented_item, (A, 0.5)),
    (f_made_array_view, (A,)),
]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn,args", VIEWS, ids=[f.__name__ for f, _ in VIEWS])
def test_views_show_writes_both_ways(fn, args, backend):
    check(fn, *args, backend=backend, fullgraph=True)


def test_returned_view_of_written_input_shares_its_memory():
    def f(x):
        x[0] = 1.0
        return x[1:]

    x = A.copy()
    r = framejit.compile(f)(x)
    assert np.shares_memory(r, x)
    r[0, 0] = 123.0
    assert x[1, 0] == 123.0


def test_write_through_a_transpose_breaks_and_stays_correct():
    def f(x):
        t = x.T
        t[0] = 3.0
        return x * 1.0

    check(f, A, fullgraph=False)
    e = framejit.explain(f)(A.copy())
    assert "through a view" in e.breaks[0].reason


def f_element_copies(a, b):
    for i in range(100):
        a[i] = b[99 - i]
    return a


def f_short_element_copies(a, b):
    for i in range(16):  # short enough to unroll (Note [Element loops]: longer loops compile whole)
        a[i] = b[15 - i]
    return a


def test_element_copies_compile_to_one_loop():
    # Note [Element loops]: the loop of 100 element copies is one compiled loop, int16 as float64
    # (whose copy back into the input is a library call: kernels do not compute int16).
    for a in (np.arange(100, dtype=np.int16), np.arange(100.0)):
        check(f_element_copies, a, a * 2, backend="jit")
        framejit.reset()
        framejit.compile(f_element_copies)(a.copy(), a.copy())
        s = framejit.stats()
        assert s["captured"] == 1 and s["graph_breaks"] == 0 and s["loops"] == 1, s
        assert s["extern_calls"] == (a.dtype == np.int16), s


def test_unrolled_element_copies_compile_to_store_kernels():
    # Note [Scalar steps]: of float64, each read is a folded view and each write a store kernel.
    check(f_short_element_copies, np.arange(16.0), np.arange(16.0) * 2, backend="jit")
    framejit.reset()
    framejit.compile(f_short_element_copies)(np.arange(16.0), np.arange(16.0))
    s = framejit.stats()
    assert s["captured"] == 1 and s["extern_calls"] == 0 and s["kernels"] == 17 and s["loops"] == 0, s


def f_outer_flip(a, b, m):
    o = np.outer(a, b) + 1.0
    return o, np.flip(m), np.flip(m, axis=1), np.flip(m, (0,)) * 2.0, np.flip(a)


@pytest.mark.parametrize("backend", BACKENDS)
def test_outer_and_flip_are_their_ops(backend):
    # Used by NPBench's gemver and durbin: traced as ravel/indexing/multiply and a reversed view.
    check(f_outer_flip, V, randn(3, seed=4), A, backend=backend, fullgraph=True)


# Found by the fuzzer (tests/fuzz/run.py with writes): each once gave a result CPython does not.
def f_inplace_zero_d(x):
    x *= 2.0
    x[...] += 1.0
    return x


def f_inplace_zero_d_twice(x):
    x += 1.0
    x += 1.0
    return x * 1.0


def f_reshape_copy_then_write(x):
    v = x.reshape(-1)  # a copy: x is not contiguous
    x[0, 0] = 9.0
    return v + 0.0


def f_write_then_reshape_copy(x):
    x[0, 0] = 9.0
    return x.reshape(-1)


def f_write_then_empty_max(x):
    x[:] = 0.0
    return np.max(x[1:-1])


@pytest.mark.parametrize("fn,x", [
    (f_inplace_zero_d, np.array(3.0)),
    (f_inplace_zero_d_twice, np.array(3.0)),
    (f_reshape_copy_then_write, np.arange(6.0).reshape(2, 3).T),
    (f_write_then_reshape_copy, np.arange(6.0).reshape(2, 3).T),
    (f_write_then_empty_max, np.array([1.0, 2.0])),
    (f_write_then_empty_max, np.array([1.0, 2.0, 3.0])),
], ids=["zero_d", "zero_d_twice", "reshape_copy_then_write", "write_then_reshape_copy", "empty_max", "max"])
def test_fuzzer_findings(fn, x):
    check_sequence(fn, [(x,)])


# Lowered writes (Note [Lowered writes] in jit/schedule/program.cpp): the jit backend runs
# index_put as a store kernel, in place where the old contents are dead, and copy_into writes
# nothing when the chain of writes already ran in the input's memory.
def f_lw_in_place(x, a):
    x[1] = a + 1.0
    x[2, ::-1] = 7.5
    return x.sum()


def f_lw_read_after(x):
    old = x * 1.0
    x[0] = 5.0
    return old + x


def f_lw_view_of_written_returned(x):
    x[1] = 2.0
    x[2:, 1] *= 3.0
    return x[1:]


def f_lw_strided(x, v):
    x[::-2, 1::2] = v[..., ::-1]
    x[-1, ::-3] += 1.0
    return x


def f_lw_broadcast(x, row, col):
    x[1:, :] = row  # (5,) over (3, 5)
    x[0] = row[None, :] * 2.0  # a leading size-1 dim NumPy drops
    x[:, 2:3] = col  # (4, 1)
    return x


def f_lw_casts(xi, xf, xb):
    xi[0] = xf[0] * 3.0  # float into int32: truncates
    xf[1, :] = xi[1]  # int32 into float
    xf[2] = xb[2]  # bool into float
    xi[3, 1:] = -7
    return xi, xf


def f_lw_shift(x):
    x[1:] = x[:-1]  # overlapping: NumPy reads the old values
    y = x * 2.0
    y[:, 1:] = y[:, :-1] + 1.0
    return y


def f_lw_made_chain(x):
    y = np.exp(x)
    for i in range(3):
        y[i] = y[i] * float(i)
    return y


def f_lw_trisolv(L, x, b):
    for i in range(x.shape[0]):
        x[i] = (b[i] - L[i, :i] @ x[:i]) / L[i, i]


LW_CASES = [
    (f_lw_in_place, (randn(4, 3, seed=5), randn(3, seed=6))),
    (f_lw_read_after, (randn(4, 5, seed=7),)),
    (f_lw_view_of_written_returned, (randn(4, 5, seed=8),)),
    (f_lw_strided, (randn(4, 5, seed=9), randn(2, 2, seed=10))),
    (f_lw_broadcast, (randn(4, 5, seed=11), randn(5, seed=12), randn(4, 1, seed=13))),
    (f_lw_casts, ((randn(4, 5, seed=14) * 10).astype(np.int32), randn(4, 5, seed=15), randn(4, 5, seed=16) > 0)),
    (f_lw_shift, (randn(4, 5, seed=17),)),
    (f_lw_made_chain, (randn(4, 5, seed=18),)),
    (f_lw_trisolv, (np.tril(randn(6, 6, seed=19)) + 6 * np.eye(6), np.zeros(6), randn(6, seed=20))),
]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("fn,args", LW_CASES, ids=[c[0].__name__ for c in LW_CASES])
def test_lowered_writes_match_numpy(backend, fn, args):
    check(fn, *args, backend=backend, fullgraph=True)


LW_NATIVE = [c for c in LW_CASES[:7] if c[0] is not f_lw_view_of_written_returned]  # it returns a view


@pytest.mark.parametrize("fn,args", LW_NATIVE, ids=[c[0].__name__ for c in LW_NATIVE])
def test_lowered_writes_run_no_library_call(fn, args):
    # Every write here is a store kernel: nothing runs as an extern step.
    framejit.reset()
    check(fn, *args, backend="jit", fullgraph=True)
    s = framejit.stats()
    assert s["extern_calls"] == 0 and s["kernels"] > 0, s


def f_lw_index_from_arg(x, i):
    x[i] = 1.0
    return x


def test_lowered_write_out_of_range_raises_as_numpy():
    # The index is a run-time int: past the end, the store falls back to NumPy's own IndexError
    # and the input is left as it was.
    f = framejit.compile(f_lw_index_from_arg)
    x = randn(4, seed=21)
    f(x.copy(), 2)
    before = x.copy()
    with pytest.raises(IndexError):
        f(x, 7)
    np.testing.assert_array_equal(x, before)


def test_lowered_write_into_input_in_place_keeps_other_views():
    # A view the caller holds of a written input sees the writes (the same memory is written).
    f = framejit.compile(f_lw_in_place)
    x = randn(4, 3, seed=22)
    a = randn(3, seed=23)
    row = x[1]
    want = x.copy()
    want[1] = a + 1.0
    want[2, ::-1] = 7.5
    f(x, a)
    np.testing.assert_array_equal(x, want)
    np.testing.assert_array_equal(row, want[1])


def f_lw_number_arg(x, xi, n):
    x[0] = n
    xi[1] = n
    return x, xi


def test_lowered_write_of_a_python_int_argument():
    # A Python int past 64 bits: NumPy stores it into a float array as a float, and raises
    # OverflowError for an int64 one; a small one is a run-time parameter of the store.
    f = framejit.compile(f_lw_number_arg)
    for n in (5, -(2**40)):
        got = f(np.zeros(3), np.zeros(3, dtype=np.int64), n)
        want = f_lw_number_arg(np.zeros(3), np.zeros(3, dtype=np.int64), n)
        np.testing.assert_array_equal(got[0], want[0])
        np.testing.assert_array_equal(got[1], want[1])
    with pytest.raises(OverflowError):
        f(np.zeros(3), np.zeros(3, dtype=np.int64), 2**70)
    got = framejit.compile(lambda x, n: f_lw_number_arg(x, np.zeros(3), n)[0])(np.zeros(3), 2**70)
    np.testing.assert_array_equal(got, [2.0**70, 0, 0])


# Note [Stores through a view]: a store that reads other rows or columns of the array it writes
# in place (a recurrence, as deriche's) needs no copy; one whose reads meet the written elements
# does, and both match NumPy.
def _column_recurrence(img, b):
    y = np.empty_like(img)
    y[:, 0] = img[:, 0]
    y[:, 1] = img[:, 1] + b * y[:, 0]
    for j in range(2, img.shape[1]):
        y[:, j] = img[:, j] + b * y[:, j - 1] - 0.5 * y[:, j - 2]
    for i in range(1, img.shape[0]):
        y[i, :] = y[i, :] + 0.25 * y[i - 1, :]
    y[1:, 0] = y[:-1, 0] * 2.0  # the read meets the written elements: a copy
    y[:, 1] = y[::-1, 1] + 1.0
    return y


@pytest.mark.parametrize("backend", BACKENDS)
def test_recurrences_over_rows_and_columns_write_in_place_correctly(backend):
    img = randn(7, 6, seed=3)
    check_sequence(_column_recurrence, [(img, 0.3), (randn(5, 9, seed=4), -1.5)], backend=backend)
    check_sequence(_column_recurrence, [(np.asfortranarray(img), 0.3)], backend=backend)


def test_a_stored_value_read_from_a_product_with_an_epilogue():
    # Found by the fuzzer (seed 31, program 1782): exp(c) ran in place over the product c as its
    # epilogue while the store x[...] = c * 2 still read c.
    def f(x0):
        v3 = np.dot(x0, x0)
        v4 = np.exp(v3)
        v6 = x0[::-1, ::-1]
        v6[...] = v3 * 2
        return v4[0]

    for n in (1, 6):
        a = np.arange(n * n, dtype=np.float64).reshape(n, n) / (n * n) + 0.3
        got_a, want_a = a.copy(), a.copy()
        framejit.reset()
        got = framejit.compile(f)(got_a)
        want = f(want_a)
        np.testing.assert_allclose(got, want, rtol=1e-14)
        np.testing.assert_allclose(got_a, want_a, rtol=1e-14)


def test_a_write_is_seen_when_a_later_integer_power_raises():
    # Note [Raising after a write] (found by the fuzzer): the copy-back into x ran after the power,
    # which raised first, so the caller's x kept its old contents.
    def g(x, e):
        x += 5
        return x ** e

    for e in (np.array([1, 2], np.int32), np.array([-1, 2], np.int32)):
        want_x, got_x = np.array([2, 3], np.int32), np.array([2, 3], np.int32)
        try:
            want = g(want_x, e)
        except ValueError as err:
            want = err
        framejit.reset()
        try:
            got = framejit.compile(g)(got_x, e)
        except ValueError as err:
            got = err
        assert type(got) is type(want)
        if isinstance(want, np.ndarray):
            np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(got_x, want_x)


def test_run_time_indices_do_not_recompile():
    # Note [Run-time indices]: x[i] and x[i, j] = v with i, j run-time ints are views and stores
    # whose offsets the run computes; negative ones count from the end.
    def read(x, i, j):
        return x[j, i] + x[i] * 2

    def write(x, i, j):
        x[i, j] = x[j, i] * 2
        return x

    x = np.random.default_rng(3).standard_normal((20, 20))
    for fn in (read, write):
        framejit.reset()
        f = framejit.compile(fn)
        for i, j in ((1, 2), (5, 3), (7, 8), (-1, -20), (19, 0)):
            a, b = x.copy(), x.copy()
            got, want = f(a, i, j), fn(b, i, j)
            np.testing.assert_array_equal(got, want)
            np.testing.assert_array_equal(a, b)
        assert framejit.stats()["captured"] == 1 and framejit.stats()["recompiles"] == 0
        # Out of range: NumPy's IndexError and message, nothing written.
        for i, j in ((20, 0), (0, -21)):
            a = x.copy()
            with pytest.raises(IndexError) as got:
                f(a, i, j)
            with pytest.raises(IndexError) as want:
                fn(x.copy(), i, j)
            assert str(got.value) == str(want.value)
            np.testing.assert_array_equal(a, x)


def test_of_several_run_time_indices_out_of_range_the_first_raises():
    # Eager code raises at the first index it evaluates; so does the program, whatever step
    # (kernel or reduction) reads which view first.
    def fn(x, i):
        return x[..., i] + x[i - 1, ...].sum()

    f = framejit.compile(fn)
    x = np.arange(16.0).reshape(4, 4)
    for i in (1, 3, -4, -5, 4, 7):
        try:
            want, werr = fn(x, i), None
        except IndexError as e:
            want, werr = None, str(e)
        try:
            got, gerr = f(x, i), None
        except IndexError as e:
            got, gerr = None, str(e)
        assert gerr == werr, (i, gerr, werr)
        if werr is None:
            np.testing.assert_array_equal(got, want)
    assert framejit.stats()["recompiles"] == 0


def test_run_time_index_after_a_write_keeps_the_write_when_it_raises():
    # Note [Raising after a write]: the index may raise, so it runs in CPython after the graph
    # that wrote x[0]; the caller sees x[0] == 1, as eagerly.
    def fn(x, i):
        t = x * 2
        x[0] = 1.0
        x[i] = 5.0
        return t + 1

    f = framejit.compile(fn)
    a, b = np.zeros(5), np.zeros(5)
    with pytest.raises(IndexError):
        f(a, 9)
    with pytest.raises(IndexError):
        fn(b, 9)
    np.testing.assert_array_equal(a, b)
    a, b = np.zeros(5), np.zeros(5)
    np.testing.assert_array_equal(f(a, 3), fn(b, 3))
    np.testing.assert_array_equal(a, b)
