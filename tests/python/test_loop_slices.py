"""Slices and whole-array statements inside compiled loops (Note [Slices in element loops] in
frontend/trace/element_loops.cpp): each function against CPython's own run of it, with the loop
compiled (framejit.stats()["loops"]), no graph break, and NumPy's errors where NumPy raises."""

import numpy as np
import pytest

import framejit

RNG = np.random.default_rng(150)


def copies(args):
    return [a.copy() if isinstance(a, np.ndarray) else a for a in args]


def compiled(fn, *args, loops=1, rtol=1e-12):
    """fn(*args) through framejit against CPython, with `loops` loops compiled; sums may add in
    another order than BLAS or NumPy's pairwise sum (rtol)."""
    want_args = copies(args)
    want = fn(*want_args)
    framejit.reset()
    cf = framejit.compile(fn)
    got_args = copies(args)
    got = cf(*got_args)
    s = framejit.stats()
    assert s["graph_breaks"] == 0, s
    assert s["loops"] == loops, s
    check(got, want, rtol)
    for g, w in zip(got_args, want_args):  # writes into the arguments too
        check(g, w, rtol)
    check(cf(*copies(args)), want, rtol)
    return cf


def check(got, want, rtol):
    if isinstance(want, tuple):
        assert isinstance(got, tuple) and len(got) == len(want)
        for g, w in zip(got, want):
            check(g, w, rtol)
        return
    assert type(got) is type(want), (type(got), type(want))
    if isinstance(want, np.ndarray):
        assert got.dtype == want.dtype and got.shape == want.shape
        if want.dtype.kind == "f":
            np.testing.assert_allclose(got, want, rtol=rtol, atol=0)
        else:
            np.testing.assert_array_equal(got, want)
    elif isinstance(want, (float, np.floating)):
        assert got == pytest.approx(want, rel=rtol, abs=0, nan_ok=True)
    else:
        assert got == want


def spd(n):
    m = RNG.random((n, n))
    return m @ m.T + n * np.eye(n)


# ---- kernels as NPBench writes them ---------------------------------------------------------------


def test_cholesky_with_dot_of_row_slices():
    def kernel(A):
        A[0, 0] = np.sqrt(A[0, 0])
        for i in range(1, A.shape[0]):
            for j in range(i):
                A[i, j] -= np.dot(A[i, :j], A[j, :j])
                A[i, j] /= A[j, j]
            A[i, i] -= np.dot(A[i, :i], A[i, :i])
            A[i, i] = np.sqrt(A[i, i])

    compiled(kernel, spd(20))


def test_lu_with_matmul_of_a_row_and_a_column():
    def kernel(A):
        for i in range(A.shape[0]):
            for j in range(i):
                A[i, j] -= A[i, :j] @ A[:j, j]
                A[i, j] /= A[j, j]
            for j in range(i, A.shape[0]):
                A[i, j] -= A[i, :i] @ A[:i, j]

    compiled(kernel, spd(20))


def test_trisolv_in_place():
    def kernel(L, x, b):
        for i in range(x.shape[0]):
            x[i] = (b[i] - L[i, :i] @ x[:i]) / L[i, i]

    compiled(kernel, np.tril(RNG.random((30, 30))) + 30 * np.eye(30), np.zeros(30), RNG.random(30))


def test_syrk_slice_updates_with_a_scalar_and_a_column():
    def kernel(alpha, beta, C, A):
        for i in range(A.shape[0]):
            C[i, : i + 1] *= beta
            for k in range(A.shape[1]):
                C[i, : i + 1] += alpha * A[i, k] * A[: i + 1, k]

    compiled(kernel, 1.5, 1.2, RNG.random((25, 25)), RNG.random((25, 12)))


def test_gramschmidt_columns():
    def kernel(A):
        Q = np.zeros_like(A)
        R = np.zeros((A.shape[1], A.shape[1]), dtype=A.dtype)
        for k in range(A.shape[1]):
            nrm = np.dot(A[:, k], A[:, k])
            R[k, k] = np.sqrt(nrm)
            Q[:, k] = A[:, k] / R[k, k]
            for j in range(k + 1, A.shape[1]):
                R[k, j] = np.dot(Q[:, k], A[:, j])
                A[:, j] -= Q[:, k] * R[k, j]
        return Q, R

    compiled(kernel, RNG.random((18, 12)), rtol=1e-9)


def test_spmv_views_held_in_locals_and_a_gather():
    def spmv(A_row, A_col, A_val, x):
        y = np.empty(A_row.size - 1, A_val.dtype)
        for i in range(A_row.size - 1):
            cols = A_col[A_row[i] : A_row[i + 1]]
            vals = A_val[A_row[i] : A_row[i + 1]]
            y[i] = vals @ x[cols]
        return y

    rowptr = np.sort(RNG.integers(0, 300, 31))
    rowptr[0], rowptr[-1] = 0, 300
    compiled(spmv, rowptr, RNG.integers(0, 40, 300), RNG.random(300), RNG.random(40))


# ---- slice semantics -------------------------------------------------------------------------------


def test_slice_bounds_as_python_normalizes_them():
    def f(x, n):
        out = np.zeros((n, 9))
        for i in range(n):
            out[i, 0] = x[i - 3 : i + 2].sum()
            out[i, 1] = x[-i:].sum()
            out[i, 2] = x[: i - n].sum()
            out[i, 3] = x[i::2].sum()
            out[i, 4] = x[::-1][: i + 1].sum() if False else x[i::-1].sum()
            out[i, 5] = x[n - i : 1 : -2].sum()
            out[i, 6] = x[i + 100 :].sum()
            out[i, 7] = x[-100 : i].sum()
            out[i, 8] = np.flip(x[i : i + 4]) @ x[:4] if i + 4 <= x.shape[0] else 0.0
        return out

    compiled(f, RNG.integers(-9, 9, 10).astype(np.float64), 10)


def test_empty_slices_sum_to_numpy_zeros():
    def f(x, a):
        s = x[:0].sum()
        t = a[3:1] @ a[5:3]
        for i in range(x.shape[0]):
            s += x[i:i].sum()
            t += a[i:i] @ a[i:i]
        return s, t

    compiled(f, RNG.random(5), RNG.integers(0, 9, 6))


def test_int64_slices_compute_in_int64():
    def f(a, b):
        t = a[:0] @ b[:0]  # a numpy.int64 from the start (NumPy 2 promotes a Python 0 otherwise)
        for i in range(a.shape[0]):
            t += a[: i + 1] @ b[: i + 1]
            b[i:] -= a[i]
        return t

    compiled(f, RNG.integers(-2**40, 2**40, 12), RNG.integers(-2**40, 2**40, 12))


def test_length_one_operands_broadcast():
    def f(x, y):
        out = np.zeros(y.shape[0])
        for i in range(x.shape[0]):
            out[:] += x[i : i + 1] * y
            out[i : i + 1] = (y[:3] - y[i : i + 1]).sum()
        return out

    compiled(f, RNG.random(4), RNG.random(6))


def test_whole_arrays_and_rows_as_vectors():
    def f(A, x):
        y = np.zeros(A.shape[0])
        for i in range(A.shape[0]):
            y[i] = A[i] @ x + x.sum() - (-x).sum()
            A[i] = 2.0 * A[i] - x
        return y

    compiled(f, RNG.random((6, 5)), RNG.random(5))


def test_a_view_in_a_local_sees_later_writes():
    def f(x):
        s = x[:0].sum()  # a numpy.float64 throughout (NumPy 2 promotes a Python 0.0 otherwise)
        for i in range(x.shape[0] - 1):
            v = x[i : i + 2]
            x[i + 1] = 10.0 * i
            s += v.sum()
        return s

    compiled(f, RNG.random(6))


def test_float32_slices_are_copied_not_computed():
    def copies_only(a, out):
        for i in range(a.shape[0]):
            out[i, :] = a[i, :]

    compiled(copies_only, RNG.random((4, 5)).astype(np.float32), np.zeros((4, 5)))

    def computes(a):
        s = 0.0
        for i in range(a.shape[0]):
            s += a[i, :].sum()
        return s

    a = RNG.random((4, 5)).astype(np.float32)
    framejit.reset()
    assert framejit.compile(computes)(a) == computes(a)
    assert framejit.stats()["loops"] == 0


def test_floyd_warshall_on_int32_rows_with_minimum():
    # NPBench's Numba version: int32 row arithmetic (an int32 element + an int32 row) and
    # numpy.minimum of rows, the row read (row k) possibly the one written (i == k).
    def kernel(path):
        for k in range(path.shape[0]):
            for i in range(path.shape[0]):
                path[i, :] = np.minimum(path[i, :], path[i, k] + path[k, :])

    p = RNG.integers(1, 50, (30, 30)).astype(np.int32)
    p[RNG.random((30, 30)) < 0.3] = 999
    compiled(kernel, p)


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int16, np.int32, np.uint32])
def test_small_int_rows_wrap_at_their_width(dtype):
    def f(a, b, out):
        for i in range(a.shape[0]):
            out[i, :] = np.maximum(a[i, :] * b[i, :] + a[i, 0], b[i, :] - a[i, :])

    info = np.iinfo(dtype)
    a = RNG.integers(info.min, info.max, (6, 9), endpoint=True).astype(dtype)
    b = RNG.integers(info.min, info.max, (6, 9), endpoint=True).astype(dtype)
    with np.errstate(over="ignore"):
        compiled(f, a, b, np.zeros((6, 9), dtype))


def test_minimum_and_maximum_of_int64_rows_and_numbers():
    def f(a, out):
        for i in range(a.shape[0]):
            out[i, :] = np.minimum(a[i, :], 7) + np.maximum(-3, a[i, ::-1])

    compiled(f, RNG.integers(-20, 20, (5, 8)), np.zeros((5, 8), np.int64))


def test_what_small_int_rows_do_not_compile_still_runs():
    def mixed(a, b, out):  # int32 with int16: another type, not compiled
        for i in range(a.shape[0]):
            out[i, :] = a[i, :] + b[i, :]

    args = (RNG.integers(0, 9, (20, 4)).astype(np.int32), RNG.integers(0, 9, (20, 4)).astype(np.int16),
            np.zeros((20, 4), np.int32))
    want = copies(args)
    mixed(*want)
    framejit.reset()
    got = copies(args)
    framejit.compile(mixed)(*got)
    np.testing.assert_array_equal(got[-1], want[-1])
    assert framejit.stats()["loops"] == 0


def test_float_minimum_and_maximum_keep_nans_from_either_side():
    # NumPy's minimum and maximum return a NaN on either side (Python's min keeps only the first).
    def rows(x, y, out):
        for i in range(x.shape[0]):
            out[i, :] = np.minimum(x[i, :], y[i, :]) - np.maximum(0.5, x[i, ::-1])

    def numbers(x, y):
        s = 0.0
        for i in range(x.shape[0]):
            s += np.minimum(x[i], y[i]) + np.maximum(x[i], 0.25) * 2
        return s

    x, y = RNG.standard_normal((25, 9)), RNG.standard_normal((25, 9))
    x[1, 2] = y[4, 4] = x[6, 6] = y[6, 6] = np.nan
    x[2, :2], y[2, :2] = [0.0, -0.0], [-0.0, 0.0]  # equal: the first one, as NumPy
    compiled(rows, x, y, np.zeros((25, 9)))
    compiled(numbers, x[:, 0].copy(), y[:, 0].copy())
    x[3, 0] = np.nan
    compiled(numbers, x[:, 0].copy(), y[:, 0].copy())


def test_numpy_float_powers():
    # nbody's `inv_r3[i, j] **= -1.5`: an element (numpy.float64) to a float power is NumPy's
    # power (C's pow: NaN for a negative base, inf for 0 to a negative power, no exception).
    def f(x, e, k):
        s = 0.0
        for i in range(x.shape[0]):
            for j in range(x.shape[1]):
                if x[i, j] != 1.0:
                    x[i, j] **= -1.5
                s += x[i, j] ** e + k[i] ** 0.5  # numpy.int64 ** float: NumPy's too
        return s

    x = RNG.random((6, 7)) * 4 - 1
    x[0, 0], x[1, 1], x[2, 2] = 0.0, -0.0, 1.0
    with np.errstate(all="ignore"):
        want_x = x.copy()
        want = f(want_x, 0.25, np.arange(6))
        framejit.reset()
        got_x = x.copy()
        got = framejit.compile(f)(got_x, 0.25, np.arange(6))
    assert framejit.stats()["loops"] == 1 and framejit.stats()["graph_breaks"] == 0
    np.testing.assert_array_equal(got_x, want_x)
    assert type(got) is type(want)
    assert np.isnan(got) and np.isnan(want)  # a negative base to 0.25
    with np.errstate(all="ignore"):
        y, k = np.abs(x) + 1.5, np.arange(6)
        assert framejit.compile(f)(y.copy(), 3.0, k) == pytest.approx(f(y.copy(), 3.0, k), rel=1e-13)


def test_python_float_powers_are_not_compiled():
    def f(x):
        s = 0.0
        for i in range(x.shape[0]):
            s += float(x[i]) ** 0.5  # a Python float: a complex result for a negative one
        return s

    x = RNG.random(30) - 0.5
    framejit.reset()
    assert framejit.compile(f)(x) == f(x)
    assert framejit.stats()["loops"] == 0


# ---- arrays made in loops (Note [Arrays made in loops]) ------------------------------------------


@pytest.mark.parametrize("nit", [0, 1, 7, 40])
def test_a_copy_each_trip_compiles_and_a_new_trip_count_does_not_recompile(nit):
    def jacobi(u, nit):
        for q in range(nit):
            un = u.copy()
            u[1:-1] = 0.5 * (un[:-2] + un[2:])
        return u

    cf = compiled(jacobi, RNG.random(50), nit)
    for other in (3, 11):  # other trip counts: the same compiled code
        u = RNG.random(50)
        np.testing.assert_array_equal(cf(u.copy(), other), jacobi(u.copy(), other))
    assert framejit.stats()["recompiles"] == 0


def test_two_d_copies_zeros_and_empty_arrays_in_loops():
    def poisson(p, b, nit):
        for q in range(nit):
            pn = np.copy(p)
            r = np.zeros_like(p)
            t = np.empty_like(b)
            for i in range(1, p.shape[0] - 1):
                for j in range(1, p.shape[1] - 1):
                    t[i, j] = pn[i - 1, j] + pn[i + 1, j] + pn[i, j - 1] + pn[i, j + 1]
                    r[i, j] = 0.25 * (t[i, j] - b[i, j]) - pn[i, j]
                    p[i, j] = pn[i, j] + r[i, j]
            p[0, :] = p[1, :]
        return p

    compiled(poisson, RNG.random((9, 12)), RNG.random((9, 12)), 5)


def test_integer_and_bool_copies():
    def f(a, m, n):
        s = 0
        for q in range(n):
            c = a.copy()
            mm = m.copy()
            for i in range(c.shape[0]):
                if mm[i]:
                    c[i] += q
                a[i] = c[i] * 2 - a[i]
                s += c[i]
        return s

    args = (RNG.integers(-5, 5, 20).astype(np.int32), RNG.random(20) < 0.5, 6)
    if np.lib.NumpyVersion(np.__version__) < "2.0.0":
        compiled(f, *args)
    else:  # NumPy 2 keeps int32 + int an int32 (s wraps at 32 bits): the loop is CPython's
        a1, a2 = args[0].copy(), args[0].copy()
        assert framejit.compile(f)(a1, *args[1:]) == f(a2, *args[1:])
        np.testing.assert_array_equal(a1, a2)


def test_what_sees_an_earlier_copy_is_not_compiled():
    def earlier(x, n):  # b is the copy made the trip before: NumPy's array, not the one refilled
        s = 0.0
        for i in range(n):
            a = x.copy()
            a[0] = i
            if i > 0:
                s += b[0]  # noqa: F821 (bound on the first trip)
            b = a
        return s

    def after(x, n):  # the last copy read after the loop
        a = x
        for i in range(n):
            a = x.copy()
            a[0] = i
        return a

    def row(x, n):  # a copy of a row: another shape
        s = 0.0
        for i in range(n):
            r = x[i % 3].copy()
            s += r[0]
        return s

    for fn, args in ((earlier, (RNG.random(5), 30)), (after, (RNG.random(5), 30)), (row, (RNG.random((3, 4)), 30))):
        want = fn(*copies(args))
        framejit.reset()
        got = framejit.compile(fn)(*copies(args))
        np.testing.assert_array_equal(got, want)
        assert framejit.stats()["loops"] == 0, fn.__name__


# ---- NumPy's errors ----------------------------------------------------------------------------------


def raises_as_numpy(fn, *args):
    """fn raises in CPython; the compiled loop raises the same type with the same message."""
    with pytest.raises(Exception) as want:
        fn(*copies(args))
    framejit.reset()
    with pytest.raises(type(want.value)) as got:
        framejit.compile(fn)(*copies(args))
    assert str(got.value) == str(want.value)


def test_dot_of_different_lengths_raises_numpys_value_error():
    def f(x, n):
        s = 0.0
        for i in range(n):
            s += np.dot(x[:i], x[: i + 1])
        return s

    raises_as_numpy(f, RNG.random(5), 3)


def test_matmul_of_different_lengths():
    def f(x, n):
        s = 0.0
        for i in range(n):
            s += x[:i] @ x[: i + 2]
        return s

    raises_as_numpy(f, RNG.random(5), 3)


def test_elementwise_of_different_lengths():
    def f(x, n):
        s = 0.0
        for i in range(n):
            s += (x[:i] + x[: i + 2]).sum()
        return s

    raises_as_numpy(f, RNG.random(5), 3)


def test_slice_assignment_of_another_length():
    def f(x, y):
        for i in range(3):
            x[i:] = y[:2]
        return x

    raises_as_numpy(f, RNG.random(5), RNG.random(4))


def test_a_fixed_index_out_of_bounds_raises_even_for_an_empty_slice():
    def f(A, n):
        s = 0.0
        for i in range(n):
            s += A[i, :0].sum()
        return s

    raises_as_numpy(f, RNG.random((3, 4)), 5)


def test_a_gathered_index_out_of_bounds():
    def f(x, idx):
        s = 0.0
        for i in range(idx.shape[0]):
            s += x[idx[: i + 1]].sum()
        return s

    raises_as_numpy(f, RNG.random(4), np.array([0, 3, 4, 1]))


# ---- what is not compiled still runs ----------------------------------------------------------------


def test_an_overlapping_slice_assignment_goes_through_a_scratch_array():
    # NumPy reads x[:-1] whole before writing x[1:]; the loop computes the value into a scratch
    # array first, then copies it.
    def f(x, n):
        for _ in range(n):
            x[1:] = x[:-1] * 0.5
        return x

    compiled(f, RNG.random(6), 3)


def test_durbin_flips_what_it_updates():
    def kernel(r):
        y = np.empty_like(r)
        alpha = -r[0]
        beta = 1.0
        y[0] = -r[0]
        for k in range(1, r.shape[0]):
            beta *= 1.0 - alpha * alpha
            alpha = -(r[k] + np.dot(np.flip(r[:k]), y[:k])) / beta
            y[:k] += alpha * np.flip(y[:k])
            y[k] = alpha
        return y

    compiled(kernel, RNG.random(30), rtol=1e-9)


def test_a_computed_array_in_a_local_is_not_compiled():
    def f(x):
        s = 0.0
        for i in range(x.shape[0]):
            t = x[: i + 1] * 2.0
            x[0] = 5.0
            s += t.sum()
        return s

    x = RNG.random(20)  # more trips than a loop over constants unrolls
    framejit.reset()
    assert framejit.compile(f)(x.copy()) == pytest.approx(f(x.copy()), rel=1e-12)
    assert framejit.stats()["loops"] == 0


# ---- which slice assignments read what they write (Note [Slices in element loops]) ----------------


def test_stencil_rows_read_other_rows_and_the_same_row_ahead():
    # seidel_2d as NPBench writes it: rows i - 1 and i + 1 are other rows; row i is read at and
    # after each element the store writes, which an in-order store reads before writing.
    def kernel(TSTEPS, N, A):
        for t in range(0, TSTEPS - 1):
            for i in range(1, N - 1):
                A[i, 1:-1] += (A[i - 1, :-2] + A[i - 1, 1:-1] + A[i - 1, 2:] + A[i, 2:] + A[i + 1, :-2]
                               + A[i + 1, 1:-1] + A[i + 1, 2:])
                for j in range(1, N - 1):
                    A[i, j] += A[i, j - 1]
                    A[i, j] /= 9.0

    compiled(kernel, 4, 12, RNG.random((12, 12)))


def test_columns_next_to_each_other_forward_and_backward():
    # adi's and deriche's recurrences: column j from columns j - 1, j - 2 (or j + 1, j + 2 counting
    # down to 0): each a different column.
    def kernel(y, x):
        for j in range(2, y.shape[1]):
            y[:, j] = 0.5 * x[:, j] + 0.25 * y[:, j - 1] - 0.125 * y[:, j - 2]
        for j in range(y.shape[1] - 3, -1, -1):
            y[:, j] += 0.5 * y[:, j + 1] + 0.25 * y[:, j + 2]
        return y

    compiled(kernel, RNG.random((7, 20)), RNG.random((7, 20)), loops=2)


def test_jacobi_between_two_arrays():
    def kernel(TSTEPS, A, B):
        for t in range(1, TSTEPS):
            B[1:-1] = 0.33333 * (A[:-2] + A[1:-1] + A[2:])
            A[1:-1] = 0.33333 * (B[:-2] + B[1:-1] + B[2:])

    compiled(kernel, 20, RNG.random(30), RNG.random(30))


def test_reading_behind_what_is_written():
    def f(x, n):
        for _ in range(n):
            x[1:] += x[:-1]
        return x

    compiled(f, RNG.random(8), 20)


def test_a_broadcast_element_of_what_is_written():
    # x[1:2] has one element, read for every k: the store of x[0:4] writes it at k = 1 first.
    def f(x, y, n):
        for _ in range(n):
            x[0:4] = x[1:2] * y
        return x

    compiled(f, RNG.random(6), RNG.random(4), 20)


def test_a_column_that_may_wrap_to_the_one_written():
    # j - 1 is -1 for j = 0: the last column, which NumPy reads whole before the store.
    def f(A, n):
        for j in range(n):
            A[:, j] = A[:, j - 1] + 1.0
        return A

    compiled(f, RNG.random((3, 20)), 20)


# ---- vectorized inner loops (Note [Vectorized inner loops], jit/x86/element_loop_codegen.cpp) ----
# Lengths around the vector widths (4 and 8 doubles): no vector, a remainder, several; exact results.


@pytest.mark.parametrize("n", list(range(2, 30)) + [203])
def test_jacobi_1d_whole_rows(n):
    def kernel(TSTEPS, A, B):
        for t in range(1, TSTEPS):
            B[1:-1] = 0.33333 * (A[:-2] + A[1:-1] + A[2:])
            A[1:-1] = 0.33333 * (B[:-2] + B[1:-1] + B[2:])

    compiled(kernel, 4, RNG.random(n), RNG.random(n), rtol=0)


def test_rows_of_2d_arrays_with_every_float_operation():
    def slices(A, B, c):
        for i in range(A.shape[0]):
            B[i, 1:-1] = (A[i, :-2] - c) / (A[i, 2:] * A[i, 1:-1] + 1.5) - A[i, 1:-1]

    def elements(A, B, c):
        for i in range(A.shape[0]):
            for j in range(1, A.shape[1] - 1):
                B[i, j] = max(A[i, j - 1] - c, -A[i, j + 1]) / (abs(A[i, j]) + 1.5) - min(A[i, j], c)

    a = RNG.random((5, 37)) - 0.5
    a[2, 7] = np.nan
    a[3, 9] = -0.0
    a[4, 3] = -1.5
    for kernel in (slices, elements):
        compiled(kernel, a, np.zeros((5, 37)), 0.25, rtol=0)


def test_in_place_slice_reading_ahead():
    def kernel(A, T):
        for t in range(T):
            A[:-1] = A[1:] * 0.5 + A[:-1]

    for n in (1, 2, 5, 9, 18, 41):
        compiled(kernel, RNG.random(n), 3, rtol=0)


@pytest.mark.parametrize("n", [1, 2, 3, 5, 8, 9, 17, 40])
def test_seidel_like_carried_elements_stay_sequential(n):
    # A[i] reads A[i - 1] as this loop just wrote it: a vector of A[i - 1]s read at once would
    # read the old values.
    def kernel(A, B, T):
        for t in range(T):
            for i in range(1, A.shape[0]):
                A[i] = A[i - 1] * 0.5 + B[i]

    compiled(kernel, RNG.random(n), RNG.random(n), 3, rtol=0)


@pytest.mark.parametrize("n", [3, 9, 17, 40])
def test_seidel_2d_rows(n):
    def kernel(TSTEPS, N, A):
        for t in range(0, TSTEPS - 1):
            for i in range(1, N - 1):
                A[i, 1:-1] += (A[i - 1, :-2] + A[i - 1, 1:-1] + A[i - 1, 2:] + A[i, 2:] + A[i + 1, :-2] +
                               A[i + 1, 1:-1] + A[i + 1, 2:])
                for j in range(1, N - 1):
                    A[i, j] += A[i, j - 1]
                    A[i, j] /= 9.0

    compiled(kernel, 3, n, RNG.random((n, n)), rtol=0)
