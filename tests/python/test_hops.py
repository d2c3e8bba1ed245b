"""framejit's higher-order operators outside compiled code (issue 15): each against the plain
Python it stands for, on Python numbers, framejit.Tensors, NumPy arrays and torch tensors where
those exist; the structure checks' errors; and compiled functions that call them: framejit.cond is
captured as a node with its branches' graphs, and so are the loops, scans and associative_scan."""

import pytest

import framejit

try:
    import numpy as np
except ImportError:
    np = None
try:
    import torch
except ImportError:
    torch = None

needs_numpy = pytest.mark.skipif(np is None, reason="NumPy is not installed")
needs_torch = pytest.mark.skipif(torch is None, reason="torch is not installed")
T = framejit.tensor


def test_cond_runs_one_branch():
    seen = []
    t = lambda a, b: seen.append("t") or a + b  # noqa: E731
    f = lambda a, b: seen.append("f") or a - b  # noqa: E731
    assert framejit.cond(True, t, f, (5, 3)) == 8
    assert framejit.cond(0, t, f, [5, 3]) == 2
    assert framejit.cond(T([1.0]), t, f, (T([1.0]), 2.0)).tolist() == [3.0]
    assert seen == ["t", "f", "t"]
    with pytest.raises(TypeError, match="operands must be a tuple"):
        framejit.cond(True, t, f, 5)


def test_while_loop_and_its_structure_check():
    assert framejit.while_loop(lambda i, s: i < 5, lambda i, s: (i + 1, s + i), (0, 0)) == (5, 10)
    assert framejit.while_loop(lambda i: False, lambda i: (i,), (7,)) == (7,)  # zero trips
    x = T([1.0, 2.0])
    i, y = framejit.while_loop(lambda i, y: i < 3, lambda i, y: (i + 1, y * 2), (0, x))
    assert i == 3 and y.tolist() == [8.0, 16.0]
    with pytest.raises(TypeError, match="returned 1 values for 2 carried values"):
        framejit.while_loop(lambda i, s: i < 5, lambda i, s: (i + 1,), (0, 0))
    with pytest.raises(TypeError, match=r"carried value 1 changed from Tensor of float64 \(2,\) to Tensor of float64 \(1,\)"):
        framejit.while_loop(lambda i, y: i < 3, lambda i, y: (i + 1, y[:1]), (0, x))
    with pytest.raises(TypeError, match="carried_inputs must be a tuple"):
        framejit.while_loop(lambda i: i < 3, lambda i: (i + 1,), 0)


def test_fori_loop():
    assert framejit.fori_loop(0, 5, lambda i, v: v + i, 0) == 10
    assert framejit.fori_loop(3, 3, lambda i, v: v + i, 7) == 7  # zero trips
    assert framejit.fori_loop(0, 4, lambda i, v: (v[0] * 2, v[1] + i), (1, 0)) == (16, 6)
    with pytest.raises(TypeError, match="changed from int to float"):
        framejit.fori_loop(0, 2, lambda i, v: v / 2, 8)


def test_scan_map_and_associative_scan_on_tensors():
    xs = T([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    carry, ys = framejit.scan(lambda c, x: (c + x, c * x), T([0.0, 1.0]), xs)
    assert carry.tolist() == [9.0, 13.0] and ys.tolist() == [[0.0, 2.0], [3.0, 12.0], [20.0, 42.0]]
    carry, ys = framejit.scan(lambda c, x: (c + x, c), T([0.0, 0.0]), xs, reverse=True)
    assert carry.tolist() == [9.0, 12.0] and ys.tolist() == [[8.0, 10.0], [5.0, 6.0], [0.0, 0.0]]
    carry, ys = framejit.scan(lambda c, x: (c + x, c + x), T([0.0, 0.0, 0.0]), xs, dim=1)
    assert ys.shape == (3, 2) and ys.tolist() == [[1.0, 3.0], [3.0, 7.0], [5.0, 11.0]]
    assert framejit.map(lambda x, k: x * k, xs, 10.0).tolist() == [[10.0, 20.0], [30.0, 40.0], [50.0, 60.0]]
    assert framejit.associative_scan(lambda a, b: a + b, xs, 0).tolist() == [[1.0, 2.0], [4.0, 6.0], [9.0, 12.0]]
    assert framejit.associative_scan(lambda a, b: a + b, xs, 1).tolist() == [[1.0, 3.0], [3.0, 7.0], [5.0, 11.0]]
    # reverse: over xs flipped along dim (jax.lax's and torch's meaning), here a non-commutative op.
    assert framejit.associative_scan(lambda a, b: a - b, xs, 0, reverse=True).tolist() == [
        [1.0, 0.0], [2.0, 2.0], [5.0, 6.0]]
    with pytest.raises(TypeError, match=r"must return \(carry, y\)"):
        framejit.scan(lambda c, x: c + x, T([0.0, 0.0]), xs)
    with pytest.raises(ValueError, match="no elements"):
        framejit.map(lambda x: x, xs[:0])
    with pytest.raises(ValueError, match="dim 2 is out of range"):
        framejit.associative_scan(lambda a, b: a + b, xs, 2)


@needs_numpy
def test_numpy_operands_and_a_compiled_caller():
    xs = np.arange(12.0).reshape(4, 3)
    carry, ys = framejit.scan(lambda c, x: (c + x, np.tanh(c)), np.zeros(3), xs)
    np.testing.assert_array_equal(carry, xs.sum(0))
    np.testing.assert_array_equal(ys, np.tanh(np.cumsum(xs, 0) - xs))
    np.testing.assert_array_equal(framejit.associative_scan(np.maximum, xs[::-1], 0), np.maximum.accumulate(xs[::-1]))

    def f(x, n):
        y = framejit.fori_loop(0, n, lambda i, v: v * 0.5 + x, np.zeros_like(x))
        return framejit.cond(y.sum() > 0, lambda a: a + 1, lambda a: a - 1, (y,))

    x = np.linspace(-1, 2, 7)
    np.testing.assert_allclose(framejit.compile(f)(x, 6), f(x, 6), rtol=1e-15)


@needs_torch
def test_torch_operands():
    xs = torch.arange(6.0).reshape(3, 2)
    carry, ys = framejit.scan(lambda c, x: (c * x + 1, c), torch.ones(2), xs)
    assert torch.equal(ys, torch.tensor([[1.0, 1.0], [1.0, 2.0], [3.0, 7.0]])) and torch.equal(carry, torch.tensor([13.0, 36.0]))
    assert torch.equal(framejit.map(torch.sum, xs), torch.tensor([1.0, 5.0, 9.0]))


# ---- framejit.cond inside compiled code (Note [Tracing bodies]) ----------------------------------

W = np.arange(4.0) if np is not None else None


def _cond_cases(x, y, n):
    """The branches read operands, a global array and a closure, and return tuples."""
    z = x * 2
    k = np.float64(n) if np is not None else n

    def on_true(a, b):
        return a + W, b * k

    r = framejit.cond(z.sum() > 0, on_true, lambda a, b: (a - 1, b + W), (z, y))
    return r[0] + r[1]


@needs_numpy
def test_cond_is_captured_whole_and_runs_the_picked_branch():
    x, y = np.linspace(-1, 2, 4), np.full(4, 3.0)
    framejit.reset()
    cf = framejit.compile(_cond_cases, fullgraph=True)
    for s in (1, -1, 1, -1, 2):
        np.testing.assert_array_equal(cf(s * x, y, 3), _cond_cases(s * x, y, 3))
    st = framejit.stats()
    # One trace: the predicate's value is read when the program runs, not guarded.
    assert st["captured"] == 1 and st["recompiles"] == 0 and st["graph_breaks"] == 0
    text = str(framejit.explain(_cond_cases)(x, y, 3))
    assert "framejit.cond(" in text and "# cond body 0:" in text and "# cond body 1:" in text


@needs_numpy
def test_cond_outputs_predicates_and_nesting():
    x = np.array([-1.0, 5.0, 5.0, 5.0])

    def nested(x):
        def inner(a):
            return framejit.cond(a[0] > 0, lambda b: b * 3, lambda b: b + W, (a,))
        return framejit.cond(x.sum() > 0, inner, lambda a: a - W, (x,))

    def one_output(x, flag):
        # A one-element array, a 0-d bool and a trace-time constant as predicates; one array out,
        # an operand returned unchanged.
        a = framejit.cond(x[:1] > 0, lambda v: v * 2, lambda v: v, (x,))
        b = framejit.cond(np.all(x > -2), lambda v: [v + 1, v], lambda v: [v - 1, v * v], (a,))
        return framejit.cond(flag, lambda u, v: u + v, lambda u, v: u - v, (b[0], b[1]))

    def sized(x):
        # Both branches compute the same size expression: each body makes its own nodes for it.
        return framejit.cond(x.sum() > 0, lambda a: a[: a.shape[0] - 1] * 2, lambda a: a[: a.shape[0] - 1] - 1, (x,))

    for fn, args in ((nested, (x,)), (nested, (-x,)), (nested, (-x[::-1],)), (sized, (x,)), (sized, (-x,)),
                     (sized, (np.arange(7.0),)),
                     (one_output, (x, True)), (one_output, (-x, False)), (one_output, (x * 0 - 3, True))):
        framejit.reset()
        got = framejit.compile(fn, fullgraph=True)(*args)
        # One frame, captured: not an internal error's fallback (which runs the branches as frames).
        assert framejit.stats()["frames"] == 1 and framejit.stats()["captured"] == 1, framejit.stats()
        np.testing.assert_array_equal(got, fn(*args))
    framejit.reset()
    cf = framejit.compile(one_output, fullgraph=True)
    assert cf(x, True) is not None and framejit.stats()["graph_breaks"] == 0


@needs_numpy
def test_cond_branches_that_cannot_be_captured_run_in_cpython():
    x = np.linspace(-1, 2, 4)
    seen = []

    def appends(x):
        def on_true(a):
            seen.append(1)  # a side effect: refused
            return a + 1
        return framejit.cond(x.sum() > 0, on_true, lambda a: a - 1, (x,))

    def mismatched(x):
        return framejit.cond(x.sum() > 0, lambda a: a + 1, lambda a: a.astype(np.float32), (x,))

    def writes(x):
        def on_true(a):
            a[0] = 7.0  # writes an array made outside the branch
            return a
        return framejit.cond(x.sum() > 0, on_true, lambda a: a, (x.copy(),))

    for fn, reason in ((appends, "may not have side effects.*list"),
                       (mismatched, "output 0 differs: f64.*true_fn, f32.*false_fn"),
                       (writes, "may not have side effects.*made outside")):
        framejit.reset()
        want = fn(x.copy())
        np.testing.assert_array_equal(framejit.compile(fn)(x.copy()), want)
        framejit.reset()
        with pytest.raises(framejit.Unsupported, match=reason):
            framejit.compile(fn, fullgraph=True)(x.copy())
    assert len(seen) == 2  # appends' eager and compiled calls each ran its branch once, in CPython


@needs_numpy
def test_cond_branch_logic_on_a_number_operand_is_guarded():
    x = np.arange(4.0)

    def f(x, n):
        def on_true(a, k):
            return a * 2 if k > 2 else a * 3  # Python logic on the operand: specialized, guarded
        return framejit.cond(x.sum() > 0, on_true, lambda a, k: a - k, (x, n))

    framejit.reset()
    cf = framejit.compile(f)
    for n in (5, 1, 5, 0):
        np.testing.assert_array_equal(cf(x, n), f(x, n))


@needs_numpy
def test_cond_branch_that_would_raise_is_not_run():
    x = np.arange(3.0)

    def f(x, i):
        # Tracing the untaken branch finds an IndexError; CPython never runs it.
        return framejit.cond(i < 3, lambda a: a[2] * a, lambda a: a[5] * a, (x,))

    framejit.reset()
    np.testing.assert_array_equal(framejit.compile(f)(x, 1), f(x, 1))


@needs_torch
def test_cond_on_torch_tensors():
    def f(x):
        return framejit.cond(x.sum() > 0, lambda a: torch.tanh(a) * 2, lambda a: a.abs() + 1, (x,))

    x = torch.linspace(-1, 2, 6)
    framejit.reset()
    cf = framejit.compile(f, fullgraph=True)
    for v in (x, -x):
        torch.testing.assert_close(cf(v), f(v))
    assert framejit.stats()["recompiles"] == 0


# ---- while_loop and fori_loop inside compiled code (Note [Loop-carried numbers]) -----------------


def _captured_once(fn, calls):
    """fn compiled whole: every call's result equals the plain run's, one trace, no recompile."""
    framejit.reset()
    cf = framejit.compile(fn, fullgraph=True)
    for args in calls:
        got, want = cf(*args), fn(*args)
        if isinstance(want, tuple):
            assert type(got) is tuple and len(got) == len(want)
            for g, w in zip(got, want):
                np.testing.assert_array_equal(g, w)
        else:
            np.testing.assert_array_equal(got, want)
    st = framejit.stats()
    assert st["cache_misses"] == 1 and st["captured"] == 1 and st["recompiles"] == 0, st


@needs_numpy
def test_while_loop_carries_arrays_and_numbers():
    def newton(x, tol):
        def test(y, i):
            return (np.abs(y * y - x).max() > tol) & (i < 50)

        def step(y, i):
            return 0.5 * (y + x / y), i + 1
        return framejit.while_loop(test, step, (x + 1, 0))

    x = np.array([2.0, 9.0, 16.0, 0.25])
    # Trip counts differ from call to call (and are zero once): one trace.
    _captured_once(newton, [(x, 1e-12), (x * 7, 1e-3), (x, 1e9), (x[:2], 1e-12)])
    text = str(framejit.explain(newton)(x, 1e-12))
    assert "framejit.while_loop(" in text and "# while_loop body 1:" in text


@needs_numpy
def test_fori_loop_trip_counts_are_run_time_values():
    def f(x, n):
        return framejit.fori_loop(0, n, lambda i, v: v * 0.5 + x * i, np.zeros_like(x))

    def pair(x, lo, hi):
        # A tuple value, a loop inside a cond branch.
        def run(a):
            s, p = framejit.fori_loop(lo, hi, lambda i, v: (v[0] + a, v[1] * 1.5), (a * 0, a + 1))
            return s - p
        return framejit.cond(x.sum() > 0, run, lambda a: a * 2, (x,))

    def closes_over_its_init(x, n):
        # The initial value is carried and read as a closure (the closure keeps the first value);
        # a cond operand that a branch also closes over.
        y = x * 2
        z = framejit.fori_loop(0, n, lambda i, u: u + y * i, y)
        return framejit.cond(z.sum() > 0, lambda a: a + y, lambda a: a - y * 2, (y,))

    x = np.linspace(-1, 3, 5)
    _captured_once(f, [(x, 0), (x, 3), (x, 11), (x, -2)])
    _captured_once(closes_over_its_init, [(x, 0), (x, 4), (-x, 3)])
    _captured_once(pair, [(x, 0, 4), (x, 2, 9), (-x, 0, 4), (x, 5, 5)])


@needs_numpy
def test_loop_numbers_meet_arrays_in_kernels():
    # `i < 2` and `i > 3` are bool graph numbers of the loop: kernel parameters, fused with the
    # array work around them (Note [Loop-carried numbers]).
    def f(x, n):
        return framejit.fori_loop(0, n, lambda i, v: np.where((v > 0) & (i < 2), v - 1, v * (i > 3)), x)

    x = np.linspace(-3, 3, 7)
    _captured_once(f, [(x, 0), (x, 3), (x, 6)])
    assert framejit.stats()["kernels"] == 1


@needs_numpy
def test_loops_that_cannot_be_captured_run_in_cpython():
    x = np.arange(4.0)

    def changes_dtype(x):
        return framejit.while_loop(lambda v: v.sum() < 10, lambda v: (v.astype(np.float32) + 1,), (x,))

    def branches_on_the_counter(x, n):
        def step(i, v):
            return v * 2 if i % 2 else v + 1  # Python logic on the carried counter
        return framejit.fori_loop(0, n, step, x)

    def appends(x):
        seen = []

        def step(v):
            seen.append(v)
            return (v + 1,)
        return framejit.while_loop(lambda v: v.sum() < 10, step, (x,))[0]

    for fn, args, reason in ((changes_dtype, (x,), "carried value 0 enters as f64.* and leaves the body as f32"),
                             (branches_on_the_counter, (x, 5), "Python logic on a number the loop carries"),
                             (appends, (x,), "may not have side effects")):
        framejit.reset()
        with pytest.raises(framejit.Unsupported, match=reason):
            framejit.compile(fn, fullgraph=True)(*args)
        framejit.reset()
        if fn is changes_dtype:
            with pytest.raises(TypeError, match="carried value 0 changed"):  # the plain meaning's check
                framejit.compile(fn)(*args)
        else:
            np.testing.assert_array_equal(framejit.compile(fn)(*args), fn(*args))


@needs_torch
def test_while_loop_on_torch_tensors():
    def f(x):
        return framejit.while_loop(lambda v, k: (v.norm() > 1) & (k < 100), lambda v, k: (v * 0.5, k + 1), (x, 0))

    framejit.reset()
    cf = framejit.compile(f, fullgraph=True)
    for scale in (1.0, 40.0, 0.01):
        x = torch.linspace(-1, 2, 6) * scale
        got, want = cf(x), f(x)
        torch.testing.assert_close(got[0], want[0])
        assert got[1] == want[1]
    assert framejit.stats()["recompiles"] == 0


# ---- scan and map inside compiled code (Note [Running scan]) -------------------------------------


@needs_numpy
def test_scan_and_map_are_captured():
    w = np.array([1.0, 2.0, 3.0])

    def rnn(xs):
        return framejit.scan(lambda c, x: (np.tanh(c * 0.5 + x * w), c.sum() + x), np.zeros(3), xs)

    def pair_carry(xs):
        # A tuple carry, the other dim, from the end.
        n = xs.shape[0]
        (s, p), ys = framejit.scan(lambda c, x: ((c[0] + x, c[1] * 2), x[::-1] - c[0]), (np.zeros(n), np.ones(n)), xs,
                                   dim=1, reverse=True)
        return s, p, ys

    def mapped(xs, a):
        return framejit.map(lambda x, k: x * k + 1, xs, a)

    xs = np.arange(12.0).reshape(4, 3)
    for fn, calls in ((rnn, [(xs,), (xs[:2],), (-xs,)]), (pair_carry, [(xs,), (xs[:3].copy(),), (np.arange(10.0).reshape(2, 5),)]),
                      (mapped, [(xs, w), (xs[1:], w * 2)])):
        framejit.reset()
        cf = framejit.compile(fn, fullgraph=True)
        for args in calls:
            got, want = cf(*args), fn(*args)
            for g, e in zip(got if isinstance(want, tuple) else (got,), want if isinstance(want, tuple) else (want,)):
                np.testing.assert_allclose(g, e, rtol=1e-14)
                assert np.shape(g) == np.shape(e)
        st = framejit.stats()
        assert st["cache_misses"] == 1 and st["captured"] == 1 and st["recompiles"] == 0, (fn.__name__, st)
    assert "framejit.scan(" in str(framejit.explain(rnn)(xs))


@needs_numpy
def test_scans_that_cannot_be_captured_run_in_cpython():
    xs = np.arange(6.0).reshape(3, 2)

    def number_y(xs):  # y is a Python number: stacked by NumPy, not captured yet
        return framejit.scan(lambda c, x: (c + x, 1.0), np.zeros(2), xs)

    def changes_carry(xs):  # the plain meaning raises TypeError
        return framejit.scan(lambda c, x: (c.astype(np.float32), x), np.zeros(2), xs)

    framejit.reset()
    c, ys = framejit.compile(number_y)(xs)
    np.testing.assert_array_equal(ys, np.ones(3))
    with pytest.raises(TypeError, match="carried value 0 changed"):
        framejit.compile(changes_carry)(xs)
    framejit.reset()
    with pytest.raises(framejit.Unsupported, match="carried value 0 enters as f64.* leaves the body as f32"):
        framejit.compile(changes_carry, fullgraph=True)(xs)


@needs_torch
def test_scan_on_torch_tensors():
    def f(xs):
        return framejit.scan(lambda c, x: (c * 0.9 + x, torch.relu(c - x)), torch.zeros(5), xs)

    framejit.reset()
    cf = framejit.compile(f, fullgraph=True)
    xs = torch.linspace(-2, 2, 20).reshape(4, 5)
    for a in (xs, xs[:3] * 2):
        got, want = cf(a), f(a)
        torch.testing.assert_close(got[0], want[0])
        torch.testing.assert_close(got[1], want[1])
    assert framejit.stats()["recompiles"] == 0


def test_captured_operators_on_framejit_tensors():
    # Without NumPy too (the 3.12/3.13 runs): cond and fori_loop over framejit.Tensors.
    def f(x, n):
        y = framejit.cond(x.sum() > 0, lambda a: a * 2, lambda a: a - 1, (x,))
        return framejit.fori_loop(0, n, lambda i, v: v + y * i, y)

    x = T([1.0, 2.0, 3.0])
    framejit.reset()
    cf = framejit.compile(f, fullgraph=True)
    for v, n in ((x, 3), (-x, 2), (x, 0)):
        assert cf(v, n).tolist() == f(v, n).tolist()


@needs_numpy
def test_a_write_into_a_cond_result_that_is_an_operand_shows_in_it():
    # Found by the fuzzer (seed 2, program 1873): the true branch hands back its operand itself, so
    # in CPython the write goes into x; the write breaks and CPython makes it through the result.
    def f(x):
        v = framejit.cond(x.sum() > 0, lambda p, q: p, lambda p, q: np.maximum(p, q), (x, x))
        v[...] -= x * 2
        return np.log(x + 10.0)

    for sign in (1, -1):
        x = np.array([4, 2, 2, 2, 7], dtype=np.uint8) if sign > 0 else np.array([-4.0, 2.0])
        want_x = x.copy()
        want = f(want_x)
        framejit.reset()
        got_x = x.copy()
        got = framejit.compile(f)(got_x)
        np.testing.assert_array_equal(got_x, want_x)
        np.testing.assert_allclose(got, want, rtol=1e-6)


@needs_numpy
def test_a_write_into_an_operand_shows_through_a_cond_result_that_views_it():
    # Found by the fuzzer (seed 24, program 777): a branch returns a view of its operand; a later
    # write into the operand must show through the result, as in CPython.
    def f(x0, x1):
        v2 = np.minimum(np.abs(x1), x0)
        v3 = framejit.cond(v2.sum() > 0, lambda p, q: p[::-1], lambda p, q: p - q, (v2, x0))
        v2[...] *= x1
        return np.transpose(v3)

    x1 = np.array([-3.5, 2.25, 1.0], dtype=np.float32)
    for x0 in (np.array(True), np.array(False)):
        framejit.reset()
        np.testing.assert_array_equal(framejit.compile(f)(x0, x1.copy()), f(x0, x1.copy()))


@needs_numpy
def test_a_loop_that_runs_no_step_hands_back_its_init_itself():
    # CPython's while_loop/fori_loop/scan return the init object itself after no step: a write into
    # the result shows in the init, and one into the init shows in the result.
    def f(x, n):
        (k, y) = framejit.while_loop(lambda k, y: k < n, lambda k, y: (k + 1, y * 2.0), (0, x))
        y[0] = -1.0
        return y

    for n in (0, 2):
        x = np.arange(3.0)
        want_x = x.copy()
        want = f(want_x, n)
        framejit.reset()
        got_x = x.copy()
        got = framejit.compile(f)(got_x, n)
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(got_x, want_x)


@needs_numpy
def test_cond_results_after_a_write_into_the_operand_are_the_array_itself():
    # Found by the fuzzer (seed 304 program 1054, seed 308 program 2326): the operand is an input
    # written earlier in the graph, whose new contents the graph holds apart from the caller's array
    # until it ends; a branch handing it back must hand back the array itself (the statement breaks).
    def write_then_cond(x0):
        x0 += x0
        v = framejit.cond(x0.sum() > 0, lambda p, q: p, lambda p, q: p - q, (x0, x0))
        v[..., -1] = 1
        return np.where(x0 > 0, x0, x0)

    def write_through_a_view(x0, x1):
        v1 = x1[:]
        v1[...] = 2.0
        v2 = framejit.cond(np.all(x1 > -1), lambda p, q: p, lambda p, q: np.tanh(p), (x1, x0))
        v2 += x1 * 2
        return v2

    def zero_trips(x, n):
        x[0] = 5.0
        (k, y) = framejit.while_loop(lambda k, y: k < n, lambda k, y: (k + 1, y * 2.0), (0, x))
        y[1] = -1.0
        return y

    cases = [(write_then_cond, lambda: (np.array([3, 0, 5, 3], dtype=np.uint8),)),
             (write_through_a_view, lambda: (np.zeros(3), np.ones(4, np.float32))),
             (zero_trips, lambda: (np.arange(3.0), 0)), (zero_trips, lambda: (np.arange(3.0), 2))]
    for fn, make in cases:
        want_args, got_args = make(), make()
        want = fn(*want_args)
        framejit.reset()
        got = framejit.compile(fn)(*got_args)
        np.testing.assert_array_equal(got, want)
        for g, w in zip(got_args, want_args):
            np.testing.assert_array_equal(g, w)


@needs_numpy
def test_cond_branches_returning_a_scalar_and_a_0d_array_are_not_merged():
    # Found by the fuzzer (seed 306 program 533): p is a 0-d array, p * 2 a NumPy scalar, and what
    # follows differs (astype keeps a 0-d array; += writes into it, which NumPy refuses here).
    def f(x0):
        v = framejit.cond(x0.sum() > 0, lambda p, q: p, lambda p, q: p * 2, (x0, x0))
        return v.astype(np.float32)

    for x in (np.array(3), np.array(-3)):
        framejit.reset()
        got, want = framejit.compile(f)(x), f(x)
        assert type(got) is type(want) and got == want
    framejit.reset()
    with pytest.raises(framejit.Unsupported, match="output 0 differs: i64.* a NumPy scalar of i64"):
        framejit.compile(f, fullgraph=True)(np.array(3))


# ---- associative_scan inside compiled code (Note [Parallel scans]) -------------------------------


@needs_numpy
def test_associative_scan_is_captured_as_a_parallel_scan():
    def cumsum(xs):
        return framejit.associative_scan(lambda a, b: a + b, xs, 0)

    def running_max_from_the_end(xs):
        return framejit.associative_scan(np.maximum, xs, -1, reverse=True)

    def last_positive(xs, floor):
        # Associative but not commutative: the later slice wins where it is positive.
        return framejit.associative_scan(lambda a, b: np.where(b > floor, b, a), xs, 1) * 2

    def first(xs):
        return framejit.associative_scan(lambda a, b: a, xs, 0)

    rng = np.random.default_rng(5)
    cases = [
        (cumsum, [(np.arange(n, dtype=np.int64) * 3,) for n in (2, 3, 17, 64, 1000)]),
        (cumsum, [(rng.integers(-9, 9, (n, 3, 2)).astype(np.int32),) for n in (5, 8, 33)]),
        (running_max_from_the_end, [(rng.standard_normal((4, n)),) for n in (2, 9, 100)]),
        (last_positive, [(rng.standard_normal((3, n, 2)), 0.5) for n in (7, 2, 40)]),
        (first, [(rng.standard_normal((n, 2)),) for n in (3, 16)]),
    ]
    for fn, calls in cases:
        framejit.reset()
        cf = framejit.compile(fn, fullgraph=True)
        for args in calls:
            got, want = cf(*args), fn(*args)
            assert got.dtype == want.dtype and got.shape == want.shape
            np.testing.assert_array_equal(got, want)
            assert got.flags.c_contiguous and not np.shares_memory(got, args[0])
        st = framejit.stats()
        # A new length is a run-time value: one trace for every call.
        assert st["captured"] == 1 and st["recompiles"] == 0 and st["graph_breaks"] == 0, (fn.__name__, st)
    # Float sums combine in another order than the plain meaning's fold: equal up to rounding.
    xs = rng.standard_normal((999, 5))
    framejit.reset()
    np.testing.assert_allclose(framejit.compile(cumsum, fullgraph=True)(xs), np.cumsum(xs, 0), rtol=1e-12, atol=1e-12)
    text = str(framejit.explain(cumsum)(xs))
    assert "framejit.associative_scan(" in text and "# associative_scan body 0:" in text
    # One element along dim: the copy; none: the plain meaning's ValueError.
    np.testing.assert_array_equal(framejit.compile(cumsum)(np.ones((1, 3))), np.ones((1, 3)))
    with pytest.raises(ValueError, match="no elements"):
        framejit.compile(cumsum)(np.ones((0, 3)))


@needs_numpy
def test_associative_scans_that_are_not_elementwise_run_in_cpython():
    w = np.ones(3)

    def matmul(xs):
        return framejit.associative_scan(lambda a, b: a @ b, xs, 0)

    def reduces(xs):
        return framejit.associative_scan(lambda a, b: a + b.sum(), xs, 0)

    def reads_an_array(xs):
        return framejit.associative_scan(lambda a, b: np.maximum(a, b * w), xs, 0)

    def promotes(xs):
        # NumPy 1: a float32 scalar times a Python float is float64 (an array stays float32); NumPy 2
        # keeps float32 both ways, and captures it.
        return framejit.associative_scan(lambda a, b: np.maximum(a, b) * 1.0, xs, 0)

    rng = np.random.default_rng(2)
    for fn, xs, why in ((matmul, rng.standard_normal((5, 3, 3)), "calls operator.matmul"),
                        (reduces, rng.standard_normal((4, 3)), "calls method.sum"),
                        (reads_an_array, rng.standard_normal((4, 3)), r"reads an array from outside \(w\)"),
                        (promotes, rng.standard_normal(6).astype(np.float32), None)):
        framejit.reset()
        got, want = framejit.compile(fn)(xs), fn(xs)
        assert got.dtype == want.dtype
        np.testing.assert_allclose(got, want, rtol=1e-12)
        if why:
            framejit.reset()
            with pytest.raises(framejit.Unsupported, match=why):
                framejit.compile(fn, fullgraph=True)(xs)


@needs_torch
def test_associative_scan_on_torch_tensors():
    def f(xs):
        return framejit.associative_scan(torch.maximum, xs, 0), framejit.associative_scan(lambda a, b: a + b, xs, 1,
                                                                                           reverse=True)

    framejit.reset()
    cf = framejit.compile(f, fullgraph=True)
    for n in (6, 31):
        xs = torch.arange(n * 4, dtype=torch.int64).reshape(n, 4) % 7 - 3
        got, want = cf(xs), f(xs)
        assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])
    assert framejit.stats()["recompiles"] == 0


def test_associative_scan_on_framejit_tensors_runs_in_cpython():
    def f(xs):
        return framejit.associative_scan(lambda a, b: a + b, xs, 0)

    xs = T([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    framejit.reset()
    assert framejit.compile(f)(xs).tolist() == [[1.0, 2.0], [4.0, 6.0], [9.0, 12.0]]
    framejit.reset()
    with pytest.raises(framejit.Unsupported, match="captured on NumPy arrays and torch tensors"):
        framejit.compile(f, fullgraph=True)(xs)
