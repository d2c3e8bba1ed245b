"""Note [Scalar steps] and Note [Vector products]: element reads, NumPy-scalar arithmetic and 1-d dot
products run as kernel steps; values that leave the program are the library's own scalars."""
import numpy as np
import pytest

import framejit
from conftest import check, check_sequence


def types_of(value):
    return [type(v) for v in value] if isinstance(value, tuple) else type(value)


def run_both(fn, *args):
    """check() compares values; NumPy's scalars and 0-d arrays compare alike there, so the kinds
    of object handed back are compared here, on the cold call and the hit."""
    expected = check(fn, *args, backend="jit")
    compiled = framejit.compile(fn)
    for _ in range(2):
        got = compiled(*[a.copy() if isinstance(a, np.ndarray) else a for a in args])
        assert types_of(got) == types_of(expected)
    return expected


def lu(A):
    N = A.shape[0]
    for i in range(N):
        for j in range(i):
            A[i, j] -= A[i, :j] @ A[:j, j]
            A[i, j] /= A[j, j]
        for j in range(i, N):
            A[i, j] -= A[i, :i] @ A[:i, j]


def lu_of_six(A):
    # A constant trip count: the loops unroll (a size-dependent one compiles as a loop, Note
    # [Slices in element loops]).
    for i in range(6):
        for j in range(i):
            A[i, j] -= A[i, :j] @ A[:j, j]
            A[i, j] /= A[j, j]
        for j in range(i, 6):
            A[i, j] -= A[i, :i] @ A[:i, j]


def test_unrolled_lu_runs_as_kernels():
    rng = np.random.default_rng(0)
    A = rng.random((6, 6)) + 6 * np.eye(6)
    check(lu_of_six, A, backend="jit")
    framejit.reset()
    framejit.compile(lu_of_six)(A.copy())
    s = framejit.stats()
    # The dots of empty slices (j = 0, i = 0) are reductions too: a sum of nothing is 0.
    assert s["captured"] == 1 and s["extern_calls"] == 0 and s["reductions"] > 0
    check(lu, A, backend="jit")
    framejit.reset()
    framejit.compile(lu)(A.copy())
    assert framejit.stats()["loops"] == 1


def scalars_out(A, x):
    a = A[0, 1]
    b = a * 2.0 + A[1, 1]
    d = x @ x
    f = A.astype(np.float32)
    return a, b, d, d / a, f[1, 0] * f[0, 1] - 1.0


def test_scalars_leave_the_program_as_numpy_scalars():
    run_both(scalars_out, np.arange(4.0).reshape(2, 2) + 1, np.arange(3.0))


def element_is_a_copy(A):
    t = A[0, 0]
    A[0, 0] = 5.0
    u = A[0, 0]
    return t, u * t, A[0, 0] + t


def test_an_element_read_is_a_copy_of_the_element():
    run_both(element_is_a_copy, np.arange(4.0).reshape(2, 2) + 2)


def scalars_to_outside(A, log):
    s = A[1, 0] * 3.0
    log.append(s)  # a side effect: the list sees NumPy's scalar
    return np.round(s, 1) + A[0, 0]  # an extern call reads it


def test_scalars_given_to_library_calls_and_containers():
    A = np.arange(4.0).reshape(2, 2) / 3
    expected_log, got_log = [], []
    expected = scalars_to_outside(A, expected_log)
    got = framejit.compile(scalars_to_outside)(A, got_log)
    assert got == pytest.approx(expected) and type(got) is type(expected)
    assert [type(v) for v in got_log] == [np.float64] and got_log == pytest.approx(expected_log)


def empty_products(a, b, i):
    return a[i:] @ b[i:], np.dot(a[i:], b[i:]), a[i:].sum(), np.prod(a[i:] * 2.0), (a[i:] * b[i:]).sum()


def test_sums_and_products_of_nothing_are_their_identity():
    a, b = np.arange(1.0, 6.0), np.arange(5.0)
    for i in (0, 3, 5):
        framejit.reset()
        run_both(empty_products, a, b, i)
    framejit.reset()
    framejit.compile(empty_products)(a, b, 5)
    assert framejit.stats()["extern_calls"] == 0


def trace_sum(a):
    t = 0.0
    for i in range(a.shape[0]):
        t += np.tanh(a[i, i])
    return a + t


def test_a_long_chain_of_scalar_steps_splits_into_kernels():
    # 60 element reads: one kernel could not load them all (the backend's operand limit).
    check(trace_sum, np.random.default_rng(1).random((60, 60)), backend="jit")
    framejit.reset()
    framejit.compile(trace_sum)(np.ones((60, 60)))
    s = framejit.stats()
    assert s["extern_calls"] == 0 and s["kernels"] > 1


def fib(a):
    for i in range(2, a.shape[0]):
        a[i] = a[i - 1] + a[i - 2]
    return a


@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.float32])
def test_scalar_recurrences_in_every_dtype(dtype):
    a = np.zeros(20, dtype)
    a[1] = 1
    run_both(fib, a)


def dot(a, b):
    return a @ b


def test_dot_of_mismatched_vectors_raises_numpys_error():
    check_sequence(dot, [(np.ones(3), np.ones(3)), (np.ones(3), np.ones(4)), (np.ones(5), np.ones(5))], backend="jit")


def test_dot_stays_the_library_call_in_the_eager_backend():
    a = np.random.default_rng(2).random(1000)
    check(dot, a, a)  # bit for bit: BLAS's own dot


def test_python_number_recurrences_trace_in_linear_time():
    # z = z * z + c over run-time Python numbers: each value records the graph inputs it came from
    # as a set; a concatenated list doubled every iteration, and 20 iterations never finished.
    def escape(w, maxiter):
        c = 0.25 + 0.01 * w
        z, it = 0.0, 0
        for it in range(maxiter):
            if z * z > 4.0:
                break
            z = z * z + c
        return it, z

    compiled = framejit.compile(escape, fullgraph=False)
    for w in (1, 30):
        assert compiled(w, 24) == escape(w, 24)  # (2^24 list entries before the fix: a failure, not a hang)
    assert framejit.stats()["trace_ms"] < 2000


def size_arithmetic(a, k):
    n = a.shape[0]
    return n + k, n - k, n * k, n // k, n % k, -(n - k), a.sum()


@pytest.mark.parametrize("k", [3, -3, 7, -7, 1, 2**62, -(2**63)])
def test_size_arithmetic_on_python_ints(k):
    # Note [Integer steps without the library]: 64-bit results the host's own, Python's floor rules;
    # what needs more bits is the library's big int, as in CPython.
    for n in (7, 12, 0):
        framejit.reset()
        got = run_both(size_arithmetic, np.ones(n), k)
        assert all(type(v) is int for v in got[:6])


def test_size_arithmetic_past_64_bits():
    # A constant past 64 bits is not captured: those statements run in CPython.
    compiled = framejit.compile(size_arithmetic)
    for n in (7, 0):
        assert compiled(np.ones(n), 2**70) == size_arithmetic(np.ones(n), 2**70)


def test_size_arithmetic_zero_divisor():
    compiled = framejit.compile(size_arithmetic)
    compiled(np.ones(5), 3)
    with pytest.raises(ZeroDivisionError):
        compiled(np.ones(5), 0)
    assert compiled(np.ones(5), 2)[:6] == (7, 3, 10, 2, 1, -3)
