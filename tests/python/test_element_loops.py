"""Python loops over array elements compiled as loops (Note [Element loops] in
frontend/trace/element_loops.cpp): each function against CPython's own run of it, with the loop
compiled (framejit.stats()["loops"]) and no graph break."""

import math
import sys
from pathlib import Path

import numpy as np
import pytest

import framejit


def compiled(fn, *args, loops=1):
    """fn(*args) through framejit, checked against CPython, with `loops` loops compiled."""
    want = fn(*[a.copy() if isinstance(a, np.ndarray) else a for a in args])
    framejit.reset()
    cf = framejit.compile(fn)
    got = cf(*[a.copy() if isinstance(a, np.ndarray) else a for a in args])
    s = framejit.stats()
    assert s["graph_breaks"] == 0, s
    assert s["loops"] == loops, s
    check(got, want)
    again = cf(*[a.copy() if isinstance(a, np.ndarray) else a for a in args])
    check(again, want)
    return cf


def check(got, want):
    if isinstance(want, tuple):
        assert isinstance(got, tuple) and len(got) == len(want)
        for g, w in zip(got, want):
            check(g, w)
        return
    assert type(got) is type(want), (type(got), type(want))
    if isinstance(want, np.ndarray):
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(got, want)
    else:
        assert got == want or (got != got and want != want), (got, want)


# ---- the kernels of samples/loops.py (its own functions, so the bench and the tests run one code) --

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "samples"))
from loops import (  # noqa: E402
    cholesky,
    crc16,
    edit_distance,
    floyd_warshall,
    lu,
    mandelbrot,
    newton_sqrt,
    spmv,
    trisolv,
)

RNG = np.random.default_rng(15)


def spd(n):
    m = RNG.random((n, n))
    return m @ m.T + n * np.eye(n)


def test_trisolv():
    compiled(trisolv, np.tril(RNG.random((12, 12))) + 12 * np.eye(12), RNG.random(12))


def test_cholesky():
    compiled(cholesky, spd(10))


def test_lu():
    compiled(lu, spd(9))


def test_floyd_warshall():
    compiled(floyd_warshall, RNG.random((9, 9)) * 10)


def test_spmv():
    rowptr = np.sort(RNG.integers(0, 60, 11))
    rowptr[0], rowptr[-1] = 0, 60
    compiled(spmv, rowptr, RNG.integers(0, 20, 60), RNG.random(60), RNG.random(20))


def test_crc16():
    compiled(crc16, RNG.integers(0, 256, 50).astype(np.uint8))


def test_edit_distance():
    compiled(edit_distance, RNG.integers(0, 4, 11), RNG.integers(0, 4, 13), loops=3)


def test_mandelbrot():
    compiled(mandelbrot, 6, 8, 20)


def test_newton_sqrt():
    compiled(newton_sqrt, RNG.random(40) * 100, 1e-12)


# ---- semantics -----------------------------------------------------------------------------------


NUMPY_2 = int(np.__version__.split(".")[0]) >= 2


def test_a_new_trip_count_does_not_recompile():
    def f(x, n):
        s = 0.0
        for i in range(n):
            s += x[i]
        return s

    x = RNG.random(50)
    framejit.reset()
    cf = framejit.compile(f)
    for n in (3, 10, 0, 50):
        assert cf(x, n) == f(x, n)
        assert type(cf(x, n)) is type(f(x, n))  # Python's float after no trip, NumPy's after one
    s = framejit.stats()
    assert s["captured"] == 1 and s["loops"] == 1, s


def test_new_sizes_do_not_recompile():
    framejit.reset()
    cf = framejit.compile(trisolv)
    for n in (5, 9, 17):
        L, b = np.tril(RNG.random((n, n))) + n * np.eye(n), RNG.random(n)
        check(cf(L, b), trisolv(L, b))
    assert framejit.stats()["captured"] == 1


def test_loop_variable_and_results_after_the_loop():
    def f(x):
        total = 0
        last = -1
        for i in range(x.shape[0]):
            if x[i] > 0.5:
                total += 1
                last = i
        return total, last

    compiled(f, RNG.random(30))


def test_a_local_the_loop_may_leave_unbound_is_not_compiled():
    # `i` after a loop that may not run: CPython raises UnboundLocalError for an empty x.
    def f(x):
        for i in range(x.shape[0]):
            x[i] = 1.0
        return i

    x = RNG.random(5)
    framejit.reset()
    assert framejit.compile(f)(x.copy()) == f(x.copy())
    assert framejit.stats()["loops"] == 0


def test_break_continue_and_else():
    def f(x):
        found = -1
        for i in range(x.shape[0]):
            if x[i] < 0.2:
                continue
            if x[i] > 0.9:
                found = i
                break
        return found

    compiled(f, RNG.random(40))


def test_an_int_total_that_becomes_a_float():
    # Note [Widened locals] and [Kind tags]: 0 before the loop, numpy.float64 after a trip.
    def f(x, n):
        total = 0
        count = 0
        for i in range(n):
            total += x[i]
            count += 1
        return total, count

    x = RNG.random(9)
    framejit.reset()
    cf = framejit.compile(f)
    for n in (0, 1, 9):
        got, want = cf(x, n), f(x, n)
        assert got == want and [type(g) for g in got] == [type(w) for w in want], (got, want)
    s = framejit.stats()
    assert s["loops"] == 1 and s["captured"] == 1, s


def test_an_int_from_outside_is_not_widened():
    def f(x, start):
        total = start
        for i in range(x.shape[0]):
            total += x[i]
        return total

    x = RNG.random(5)
    framejit.reset()
    assert framejit.compile(f)(x, 2**60 + 1) == f(x, 2**60 + 1)


def test_for_else():
    def f(x, limit):
        hits = 0
        for i in range(x.shape[0]):
            if x[i] > limit:
                break
            hits += 1
        else:
            hits = -hits
        return hits

    x = RNG.random(30)
    framejit.reset()
    cf = framejit.compile(f)
    for limit in (0.5, 2.0, 0.99):
        assert cf(x, limit) == f(x, limit)
    s = framejit.stats()
    assert s["loops"] == 1 and s["graph_breaks"] == 0, s


def test_nested_while_with_break_and_continue():
    def f(v):
        out = np.zeros_like(v)
        for i in range(v.shape[0]):
            k = 0
            x = v[i]
            while True:
                k += 1
                if k % 3 == 0:
                    continue
                x = x * 0.5
                if x < 1.0 or k > 50:
                    break
            out[i] = k
        return out

    compiled(f, RNG.random(20) * 1000)


def test_negative_step_and_negative_indices():
    def f(x):
        y = np.zeros_like(x)
        for i in range(x.shape[0] - 1, -1, -1):
            y[-i - 1] = x[i] * 2.0
        return y

    compiled(f, RNG.random(13))


def test_zero_trip_loop_keeps_values():
    def f(x, n):
        s = 1.5
        for i in range(n):
            s = s * x[i]
        return s

    x = RNG.random(5)
    compiled(f, x, 0)


def test_a_python_or_numpy_scalar_computed_with_after_the_loop():
    # A float or a numpy.float64, whichever the trips made it, times a float32 array: NumPy 2
    # gives float32 for the one and float64 for the other, so there the loop is not compiled
    # (Note [Kind tags]); results and dtypes as CPython's either way.
    def f(x, n):
        s = 0.0
        for i in range(n):
            s += x[i]
        return s * np.ones(3, np.float32)

    x = RNG.random(6)
    cf = framejit.compile(f)
    for n in (0, 4, 6):
        got, want = cf(x, n), f(x, n)
        assert got.dtype == want.dtype and got.tolist() == want.tolist()


def test_strided_and_transposed_arrays():
    def f(a):
        s = a[0, 0] * 0.0  # a numpy.float64 throughout
        for i in range(a.shape[0]):
            for j in range(a.shape[1]):
                s += a[i, j] * (i + 2 * j)
        return s

    base = RNG.random((7, 9))
    compiled(f, base.T)
    compiled(f, base[::2, ::-3])


def test_writes_into_an_input_array_show_to_the_caller():
    def f(x):
        for i in range(1, x.shape[0]):
            x[i] = x[i] + x[i - 1]

    x = RNG.random(20)
    want = x.copy()
    f(want)
    framejit.reset()
    cf = framejit.compile(f)
    got = x.copy()
    assert cf(got) is None
    np.testing.assert_array_equal(got, want)
    assert framejit.stats()["loops"] == 1


def test_other_dtypes():
    def f(a, b, out):
        for i in range(a.shape[0]):
            out[i] = a[i] * 2 + b[i]
        return out

    a = RNG.integers(-50, 50, 16).astype(np.int64)
    b = RNG.integers(-50, 50, 16).astype(np.int64)
    compiled(f, a, b, np.zeros(16, np.int32))
    compiled(f, RNG.random(16), RNG.random(16), np.zeros(16, np.float32))


def test_index_error_as_numpy():
    def f(x, n):
        s = 0.0
        for i in range(n):
            s += x[i]
        return s

    framejit.reset()
    cf = framejit.compile(f)
    x = RNG.random(4)
    with pytest.raises(IndexError, match="index 4 is out of bounds for axis 0 with size 4"):
        cf(x, 6)
    assert cf(x, 4) == f(x, 4)


def test_python_float_division_by_zero_raises():
    def f(x):
        s = 0.0
        for i in range(x.shape[0]):
            s += 1.0 / float(x[i])
        return s

    framejit.reset()
    cf = framejit.compile(f)
    with pytest.raises(ZeroDivisionError):
        cf(np.array([1.0, 0.0]))
    assert cf(np.array([1.0, 2.0])) == 1.5


def test_numpy_float_division_by_zero_gives_inf():
    def f(x):
        y = np.zeros_like(x)
        for i in range(x.shape[0]):
            y[i] = 1.0 / x[i]
        return y

    with np.errstate(divide="ignore"):
        compiled(f, np.array([1.0, 0.0, -0.0, 4.0]))


def test_math_domain_error():
    def f(x):
        s = 0.0
        for i in range(x.shape[0]):
            s += math.sqrt(x[i])
        return s

    framejit.reset()
    cf = framejit.compile(f)
    with pytest.raises(ValueError, match="math domain error"):
        cf(np.array([1.0, -1.0]))


def test_python_int_overflow_is_a_clear_error():
    def f(n):
        x = np.zeros(1)
        p = 1
        for i in range(n):
            p = p * 3
        x[0] = 1.0
        return p, x

    framejit.reset()
    cf = framejit.compile(f)
    assert cf(10)[0] == 3**10
    with pytest.raises(OverflowError, match="64 bits"):
        cf(50)


def test_python_and_numpy_kinds_meet():
    def f(v):
        out = np.empty_like(v)
        for i in range(v.shape[0]):
            g = v[i] if v[i] > 1.0 else 1.0
            out[i] = g * 2
        return out

    compiled(f, RNG.random(20) * 3)


def test_code_after_the_loop_stays_in_the_graph():
    def f(x):
        y = x * 2.0
        for i in range(1, y.shape[0]):
            y[i] += y[i - 1]
        return np.sqrt(y) + 1.0

    compiled(f, RNG.random(25))


def test_unsupported_loops_still_run():
    # A 2-d slice in the body: the loop is not compiled, the function still gives CPython's result.
    def f(x):
        s = 0.0
        for i in range(x.shape[0]):
            s += x[: i + 1, :].sum()
        return s

    x = RNG.random((6, 3))
    framejit.reset()
    assert framejit.compile(f)(x) == pytest.approx(f(x), rel=1e-12)
    assert framejit.stats()["loops"] == 0


def test_a_number_computed_from_a_size_without_a_symbol_is_guarded():
    # Found by the fuzzer: `i % (s1 + 1)` has no symbolic form; unrolling the loop over it pinned
    # nothing, and a new s1 reused the graph (float32 elements: the loop itself is not compiled).
    def f(x0):
        v3 = 0.0
        for i in range(x0.shape[0]):
            for j in range(i % (x0.shape[1] + 1)):
                v3 += x0[i, j] * (i - j)
        return v3

    framejit.reset()
    cf = framejit.compile(f)
    for shape in ((5, 2), (5, 8)):
        x = RNG.random(shape).astype(np.float32)
        assert cf(x) == f(x)


def test_creation_without_numpys_python_functions():
    # Note [Creation without the library]: zeros/empty(_like) of C-ordered arrays are the host's
    # own allocations; a Fortran-ordered input still gets NumPy's (Fortran-ordered) zeros_like.
    def f(x, n):
        a = np.zeros_like(x)
        b = np.zeros((n, x.shape[0]), np.int64)
        c = np.empty_like(x, dtype=np.float32)
        d = np.zeros(n + 1, np.float32)  # a positional dtype is the host's allocation too
        return a, b, c.shape, c.dtype, c.flags.c_contiguous, d

    framejit.reset()
    cf = framejit.compile(f)
    for x in (RNG.random((3, 4)), np.asfortranarray(RNG.random((3, 4))), RNG.random(5)):
        got, want = cf(x, 2), f(x, 2)
        for g, w in zip(got[:2], want[:2]):
            assert g.dtype == w.dtype and g.shape == w.shape and g.flags.c_contiguous == w.flags.c_contiguous
            np.testing.assert_array_equal(g, w)
        assert got[2:5] == want[2:5]
        assert got[5].dtype == np.float32 and got[5].tolist() == want[5].tolist()


def test_a_step_known_positive_and_rows_indexed_twice():
    def sieve(n):
        is_p = np.ones(n + 1, np.bool_)
        is_p[0] = False
        is_p[1] = False
        for i in range(2, n + 1):
            if is_p[i]:
                for j in range(i * i, n + 1, i):  # i >= 2: a positive step
                    is_p[j] = False
        return is_p

    def rows(A):
        s = A[0, 0] * 0.0  # a numpy.float64 throughout (NumPy 2: Note [Kind tags])
        for i in range(A.shape[0]):
            for j in range(A.shape[1]):
                A[i][j] = A[i][j] * 2.0
                s += A[i][j]
        return s

    compiled(sieve, 200)
    compiled(rows, RNG.random((5, 6)))


def test_a_step_of_unknown_sign_is_not_compiled():
    def f(x, k):
        s = 0.0
        for i in range(x.shape[0]):
            for j in range(0, x.shape[0], k):  # k < 0 counts down: not compiled, still right
                s += x[j] * i
        return s

    x = RNG.random(7)
    framejit.reset()
    cf = framejit.compile(f)
    for k in (2, 3):
        assert cf(x, k) == f(x, k)


def test_two_loops_alike_but_for_their_results_stay_two():
    # Found by the fuzzer: CSE took two loops of the same bytecode for one, though only the second
    # hands back its count (the first's is never read): the merged loop had no result to take.
    def f(x0):
        v1 = np.std(x0, axis=0)
        v4 = 0
        for i in range(v1.shape[0]):
            if v1[i] > 0:
                v4 += 1
        v6 = 0
        for i in range(v1.shape[0]):
            if v1[i] > 0:
                v6 += 1
        return v6

    framejit.reset()
    x = RNG.random((4, 3))
    assert framejit.compile(f)(x) == f(x)


def test_python_logic_after_the_loop_on_its_results():
    # Found by the fuzzer: abs() of a loop's result kept the loop's mark, so `v4 > 0` is decided at
    # run time, not on a trace-time value the loop never had.
    def f(x0):
        v2 = 0.0
        for i in range(x0.shape[0]):
            for j in range(i % (x0.shape[1] + 1)):
                v2 += x0[i, j] * (i - j)
        v4 = abs(v2)
        return np.where(v4 > 0, v4, x0)

    x = np.array([[3, 6], [-2, -8], [9, -4], [8, 7]])
    framejit.reset()
    np.testing.assert_array_equal(framejit.compile(f)(x), f(x))


# ---- `for x in array` and small NumPy ints (Note [Small NumPy ints]) ------------------------------


def test_for_over_an_array_and_its_rows():
    def crc(data, poly=0x8408):
        # NPBench's crc16, as written there: uint8 elements with Python ints.
        crc = 0xFFFF
        for b in data:
            cur_byte = 0xFF & b
            for _ in range(0, 8):
                if (crc & 0x0001) ^ (cur_byte & 0x0001):
                    crc = (crc >> 1) ^ poly
                else:
                    crc >>= 1
                cur_byte >>= 1
        crc = ~crc & 0xFFFF
        crc = (crc << 8) | ((crc >> 8) & 0xFF)
        return crc & 0xFFFF

    compiled(crc, RNG.integers(0, 256, 300).astype(np.uint8))

    def rows(A):
        s = np.float64(0.0)  # a NumPy float throughout (NumPy 2 promotes a Python 0.0 otherwise)
        for row in A:
            for x in row:
                s += x * x
        return s

    compiled(rows, RNG.random((20, 7)))


@pytest.mark.skipif(np.lib.NumpyVersion(np.__version__) >= "2.0.0", reason="NumPy 2 keeps a small int's own type")
def test_small_ints_with_python_ints_compute_in_int64():
    def f(table, seq):
        best = 0
        for i in range(table.shape[0]):
            for j in range(i + 1, table.shape[1]):
                v = max(table[i, j], table[i, j - 1])
                table[i, j] = v + (seq[i] + seq[j] == 3)
                best = max(best, int(table[i, j]))
        return best

    compiled(f, np.zeros((20, 20), np.int32), (np.arange(20) % 4).astype(np.int32))


def test_two_small_ints_of_one_type_wrap_at_its_width():
    # int32 + int32 is an int32 in NumPy 1 and 2, wrapping at 32 bits (NumPy warns; the loop does not).
    def f(a, b, n):
        s = 0
        for i in range(n):
            s += int(a[i] + a[i]) + int(b[i] * b[i]) + int(b[i] - a[i] % 7 if False else b[i] ^ b[-i])
        return s

    a = np.array([2**30, -2**31, 5, -7] * 5, np.int32)
    b = np.array([200, 255, 3, 17] * 5, np.uint8)
    with np.errstate(over="ignore"):
        compiled(f, a, b, 20)

    def g(a, n):
        s = 0
        for i in range(n):
            s += int(a[i] // a[i])  # floor division of two int32: not compiled, still right
        return s

    a = np.arange(1, 21, dtype=np.int32)
    framejit.reset()
    assert framejit.compile(g)(a, 20) == g(a, 20)
    assert framejit.stats()["loops"] == 0


# ---- calls of Python functions in loops (Note [Calls in element loops]) --------------------------


def match(b1, b2):
    if b1 + b2 == 3:
        return 1
    else:
        return 0


def clamp(x, lo=0.0, hi=1.0):
    if x < lo:
        return lo
    return hi if x > hi else x


def smooth(x, y):
    return 0.5 * clamp(x) + 0.5 * clamp(y, -1.0)


def test_nussinov_calls_a_helper():
    def kernel(N, seq):
        table = np.zeros((N, N), np.int32)
        for i in range(N - 1, -1, -1):
            for j in range(i + 1, N):
                if j - 1 >= 0:
                    table[i, j] = max(table[i, j], table[i, j - 1])
                if i + 1 < N:
                    table[i, j] = max(table[i, j], table[i + 1, j])
                if j - 1 >= 0 and i + 1 < N:
                    if i < j - 1:
                        table[i, j] = max(table[i, j], table[i + 1, j - 1] + match(seq[i], seq[j]))
                    else:
                        table[i, j] = max(table[i, j], table[i + 1, j - 1])
                for k in range(i + 1, j):
                    table[i, j] = max(table[i, j], table[i, k] + table[k + 1, j])
        return table

    compiled(kernel, 30, ((np.arange(30) + 1) % 4).astype(np.int32))


def test_helpers_with_defaults_and_nested_calls():
    def f(x, y):
        out = np.empty(x.shape[0])
        for i in range(x.shape[0]):
            out[i] = smooth(x[i], y[i]) + clamp(x[i] - y[i], hi=0.5) if False else smooth(x[i], y[i])
        return out

    compiled(f, RNG.random(40) * 3 - 1, RNG.random(40) * 3 - 1)


def with_loop(x):
    s = 0.0
    for v in x:
        s += v
    return s


def mixed(x):
    return 1 if x > 0.5 else 0.5


def test_helpers_the_loop_compiler_refuses_still_run():
    def f(a, n):
        s = 0.0
        for i in range(n):
            s += with_loop(a[i])
        return s

    def g(a, n):
        s = 0.0
        for i in range(n):
            s += mixed(a[i, 0])
        return s

    # f's loop is not compiled (with_loop has a loop of its own; the trace then runs f's loop
    # over, and with_loop's loop, over a row of run-time length, compiles each time); g's neither
    # (mixed returns an int or a float).
    a = RNG.random((20, 3))
    for fn in (f, g):
        framejit.reset()
        assert framejit.compile(fn)(a, 20) == pytest.approx(fn(a, 20), rel=1e-12)
    assert framejit.stats()["loops"] == 0


def _running(a, x, start):
    # a[j] from a[j - 1]: the element the iteration before stored (Note [Carried elements]).
    for j in range(start, x.shape[0]):
        a[j] = a[j - 1] * 0.5 + x[j]
    return a


def _running_rows(D, x):
    for i in range(1, D.shape[0]):
        for j in range(1, D.shape[1]):
            D[i, j] = min(D[i - 1, j], D[i, j - 1] + x[j], D[i - 1, j - 1]) + 1
    return D


def test_an_element_stored_one_iteration_back_is_carried():
    x = RNG.random(40)
    compiled(_running, np.zeros(40), x, 1)
    compiled(_running, np.ones(40), x, 0)  # a[-1] first: the last element, wrapped
    compiled(_running, np.ones(40), x, 39)
    compiled(_running, np.ones(40), x, 40)  # no iteration
    compiled(_running_rows, RNG.integers(0, 9, (7, 11)), RNG.integers(0, 3, 11))
    # Out of range midway: the elements stored before the IndexError stay, as in CPython.
    f = framejit.compile(_running)
    got, want = np.zeros(10), np.zeros(10)
    for a in (got, want):
        with pytest.raises(IndexError):
            (f if a is got else _running)(a, np.arange(12.0), 1)
    np.testing.assert_array_equal(got, want)


# ---- short loops that branch (Note [Short loops that branch]) ------------------------------------


def test_a_short_constant_loop_that_branches_on_elements_compiles():
    # range(10) is unrolled when its body does not branch; an `if` on an element would then be a
    # branch on data and send the whole function to CPython.
    def f(x):
        s = 0.0
        for i in range(10):
            if x[i] > 0.5:
                s += x[i]
        return s

    def g(x):
        n = 0
        for v in x:  # a 4-element array (its size a constant: 0/1 sizes and fixed lengths)
            if v < 0.2 or v > 0.8:
                n += 1
        return n

    compiled(f, RNG.random(12))
    compiled(g, np.array([0.1, 0.5, 0.9, 0.3]))


def test_edit_distance_of_one_element_each():
    # Sizes of 1 are constants: range(1, m + 1) is one trip, unrolled before this.
    compiled(edit_distance, np.array([1]), np.array([2]))
    compiled(edit_distance, np.array([3]), np.array([3]))


def test_a_short_loop_without_branches_still_unrolls():
    def f(x, y):
        for k in range(3):
            y = y * 0.5 + x
        return y

    framejit.reset()
    x = RNG.random(8)
    np.testing.assert_array_equal(framejit.compile(f)(x, x), f(x, x))
    s = framejit.stats()
    assert s["loops"] == 0 and s["graph_breaks"] == 0 and s["kernels"] == 1, s


# ---- while loops (Note [While loops]) ------------------------------------------------------------


@pytest.mark.parametrize("tol", [1e-3, 1e-6, 10.0])
def test_a_while_loop_until_the_data_converges(tol):
    # Runs until a value computed from the arrays says so: unrolled, a branch on data every trip.
    def relax(u, tol):
        udiff = 1
        trips = 0
        while udiff > tol:
            un = u.copy()
            u[1:-1] = 0.5 * (un[:-2] + un[2:]) + 0.01
            udiff = (np.sum(u) - np.sum(un)) / np.sum(u)
            trips += 1
        return trips

    cf = compiled(relax, RNG.random(40), tol)
    for n in (10, 77):  # other sizes: the same compiled code
        u = RNG.random(n)
        want_u, got_u = u.copy(), u.copy()
        assert cf(got_u, tol) == relax(want_u, tol)
        np.testing.assert_array_equal(got_u, want_u)
    assert framejit.stats()["recompiles"] == 0


def test_while_not_with_break_and_else():
    def f(x, limit):
        i = 0
        found = -1
        while not i >= x.shape[0]:
            if x[i] > limit:
                found = i
                break
            i += 1
        else:
            found = -2
        return found, i

    compiled(f, RNG.random(30), 0.9)
    compiled(f, RNG.random(30), 2.0)  # no break: the else block


def test_a_while_loop_the_compiler_refuses_still_runs():
    def halve(x):  # rebinds an array each trip: traced as before (a break on its data)
        while x.max() > 1.0:
            x = x * 0.5
        return x

    x = RNG.random(10) * 40
    framejit.reset()
    np.testing.assert_array_equal(framejit.compile(halve)(x), halve(x))
    assert framejit.stats()["loops"] == 0


def test_a_loop_whose_results_nothing_reads_still_raises():
    # Dead code to the graph (nothing reads what it computes), but CPython raises in it.
    def reads_past_the_end(x):
        for i in range(x.shape[0] + 1):
            y = x[i] * 2.0  # noqa: F841
        return 1

    def then_breaks(x, axis):  # the error in the loop comes before the graph break's
        v = 0.0
        for i in range(3):
            if x[i % x.shape[0]] > 0.5:
                v += x[i % x.shape[0]]
        return np.max(x, axis=axis)

    for fn, args in ((reads_past_the_end, (RNG.random(20),)), (then_breaks, (np.zeros(0), -3))):
        with pytest.raises(Exception) as want:
            fn(*args)
        framejit.reset()
        with pytest.raises(type(want.value)):
            framejit.compile(fn)(*args)


@pytest.mark.parametrize("which", range(6))
def test_division_by_zero_gives_cpythons_message(which):
    def f(x, d, fd, which):
        s = 0.0
        for i in range(x.shape[0]):
            k = int(x[i])
            if which == 0:
                s += k // d  # integer division or modulo by zero
            elif which == 1:
                s += k % d  # integer modulo by zero
            elif which == 2:
                s += k / d  # division by zero
            elif which == 3:
                s += float(x[i]) // fd  # float floor division by zero
            elif which == 4:
                s += float(x[i]) % fd  # float modulo (3.13: float modulo by zero)
            else:
                s += float(x[i]) / fd  # float division by zero
        return s

    x = np.arange(1.0, 31.0)
    with pytest.raises(ZeroDivisionError) as want:
        f(x, 0, 0.0, which)
    framejit.reset()
    with pytest.raises(ZeroDivisionError) as got:
        framejit.compile(f)(x, 0, 0.0, which)
    assert str(got.value) == str(want.value)
    assert framejit.stats()["loops"] == 1


def _invariant_element(a, b, i, n):
    s = 0.0
    for j in range(n):
        s += a[i] * b[j]
        b[j] = s
    return s


def test_an_element_the_loop_cannot_change_is_loaded_once():
    # Loaded before the loop only where its index passed the preheader's test: an index out of
    # range still raises where the loop reads it, and not at all when the loop never runs.
    a, b = RNG.random(5), RNG.random(9)
    compiled(_invariant_element, a, b, 3, 9)
    compiled(_invariant_element, a, b, -1, 9)
    compiled(_invariant_element, a, b, 7, 0)
    f = framejit.compile(_invariant_element)
    for fn in (f, _invariant_element):
        with pytest.raises(IndexError):
            fn(a, b.copy(), 5, 3)


def _crc(data):
    crc = 0xFFFF
    for i in range(data.shape[0]):
        crc ^= int(data[i]) << 8
        for _ in range(8):
            crc = ((crc << 1) ^ 0x1021) & 0xFFFF if crc & 0x8000 else (crc << 1) & 0xFFFF
    return crc


def _packed(data):
    s = 0
    for i in range(data.shape[0]):
        s = (s << 9) | int(data[i])
    return s


def test_bit_widths_drop_overflow_checks_only_where_nothing_overflows():
    # A CRC's values stay in 16 bits: its shifts need no check. Nine bits per byte pass 64 bits
    # after seven bytes: still checked, framejit's error where CPython would grow a big int.
    data = RNG.integers(0, 256, 300).astype(np.uint8)
    compiled(_crc, data)
    compiled(_packed, data[:6])
    with pytest.raises(OverflowError, match="outgrew 64 bits"):
        framejit.compile(_packed)(data[:40])


def _lcs(a, b):
    D = np.zeros((a.shape[0] + 1, b.shape[0] + 1), np.int64)
    for i in range(1, a.shape[0] + 1):
        for j in range(1, b.shape[0] + 1):
            D[i, j] = max(D[i - 1, j] - 1, D[i, j - 1] - 1, D[i - 1, j - 1] + (2 if a[i - 1] == b[j - 1] else -3))
    return D


def test_carried_integer_extremes_reassociated():
    # Note [Reassociated extremes]: min/max of ints taken in another order, the same values (the
    # scores go negative, with many ties).
    compiled(_lcs, RNG.integers(0, 3, 40), RNG.integers(0, 3, 55))
    compiled(edit_distance, RNG.integers(0, 4, 30), RNG.integers(0, 4, 20), loops=3)


def _doubled(x, out):
    for i in range(x.shape[0]):
        out[i, 0] = 2.0 * x[i]
        out[i, 1] = x[i] * 2.0 * 0.5
    return out


def test_doubling_is_an_add_to_the_bit():
    # 2.0 * x runs as x + x: the same bits for infinities, NaNs, -0.0, subnormals and overflow.
    x = np.array([1.5, -0.0, 0.0, np.inf, -np.inf, np.nan, 5e-324, -1e-310, 1.7e308, -1e308, 3.0])
    with np.errstate(over="ignore"):
        want = _doubled(x, np.zeros((11, 2)))
        got = compiled(_doubled, x, np.zeros((11, 2)))(x, np.zeros((11, 2)))
    assert got.view(np.int64).tolist() == want.view(np.int64).tolist()


def _masks(x):
    n = 0
    for i in range(x.shape[0]):
        v = x[i]
        if v & 0x8000:
            n += 1
        if (v & -8) < 0:
            n += 10
        if (v & 3) == 0:
            n += 100
        if (v & 0x7FFFFFFF) > 5:
            n += 1000
    return n


def test_masked_compares_test_the_operand():
    # `if v & m:` compares `test v, m` (plan_tests): the same answers for every sign and mask.
    compiled(_masks, RNG.integers(-2**40, 2**40, 300))
    compiled(_masks, np.array([0, -1, 1, 0x8000, -0x8000, 2**31, -(2**63), 2**63 - 1, 3, 4, -4]))
