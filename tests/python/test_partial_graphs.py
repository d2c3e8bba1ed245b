"""Partial graphs (Note [Break entries]): at a graph break the graph before it still runs, CPython
runs the breaking statement, and a resume function for the rest of the frame is captured in turn.
Every case is compared with plain CPython on the cold call and on cache hits, inputs included.
Each test runs on NumPy arrays and on framejit.Tensors where the code allows, so interpreters
without NumPy (3.12, 3.13 here) check the rewritten bytecode of their own version."""

import copy
import traceback

import pytest

import framejit

try:
    import numpy as np
except ImportError:
    np = None

KINDS = (["numpy"] if np is not None else []) + ["tensor"]
needs_numpy = pytest.mark.skipif(np is None, reason="NumPy is not installed")


def make(kind, values):
    if kind == "numpy":
        return np.asarray(values, dtype=np.float64)
    return framejit.tensor(values, dtype="float64")


@pytest.fixture(params=KINDS)
def kind(request):
    return request.param


@pytest.fixture
def X(kind):
    return make(kind, [-1.0, -0.5, 0.25, 0.5, 2.0])


def values(v):
    """A comparable form of a result: arrays as nested lists, containers item by item."""
    if isinstance(v, (list, tuple)):
        return type(v)(values(x) for x in v)
    if isinstance(v, dict):
        return {k: values(x) for k, x in v.items()}
    if hasattr(v, "tolist"):
        return ("array", v.tolist())
    return v


def run_both(fn, *args, calls=3, **kwargs):
    """Runs fn eagerly and compiled (cold call, then hits) on copies; checks results and inputs."""
    eager_args = copy.deepcopy(args)
    want = fn(*eager_args, **kwargs)
    compiled = framejit.compile(fn)
    for _ in range(calls):
        got_args = copy.deepcopy(args)
        got = compiled(*got_args, **kwargs)
        assert values(got) == values(want)
        assert values(list(got_args)) == values(list(eager_args))  # inputs mutated alike
    return want


def f_log(x):
    y = x * 2.0 + 1.0
    print("between graphs", end="\r")  # BREAK
    return (y * 3.0).sum()


def test_graph_before_and_after_a_break(X):
    run_both(f_log, X)
    e = framejit.explain(f_log)(X)
    assert e.graph_count == 2, e
    (b,) = e.breaks
    assert b.resumed and b.no_resume == ""
    assert "print" in b.reason


def test_cache_hits_do_not_trace_again(X):
    f = framejit.compile(f_log)
    f(X)
    captured = framejit.stats()["captured"]
    hits = framejit.stats()["cache_hits"]
    for _ in range(3):
        f(X)
    s = framejit.stats()
    assert s["captured"] == captured
    assert s["cache_hits"] - hits >= 6  # the frame and its resume function, each call


def f_branch(x):
    s = x.sum()
    if s > 0:  # BRANCH
        return x * 2.0
    return x - 1.0


def test_data_dependent_branch_resumes_in_the_side_taken(kind):
    pos, neg = make(kind, [1.0, 2.0, 3.0]), make(kind, [-1.0, -2.0, 0.5])
    f = framejit.compile(f_branch)
    for x in (pos, neg, pos, neg):
        assert values(f(x)) == values(f_branch(x))
    for x in (pos, neg):
        e = framejit.explain(f_branch)(x)
        assert e.graph_count == 2 and [b.kind for b in e.breaks] == ["data_dependent"]
        assert e.breaks[0].resumed


def helper_with_print(x):
    print("in helper", end="\r")
    return x * 3.0


def f_inlined(x):
    y = x + 1.0
    z = helper_with_print(y)  # the break inside the helper stops the root at this call
    return z * 2.0


def test_break_inside_an_inlined_helper(X):
    run_both(f_inlined, X)
    e = framejit.explain(f_inlined)(X)
    # The root's break at the call, then the helper's own at its first statement (run by CPython
    # from the break code, it resumes after the print too).
    assert [b.resumed for b in e.breaks] == [True, True]
    assert e.breaks[0].reason.endswith("in helper_with_print)")
    assert e.graph_count >= 2  # before the call, after it (and the helper's own)


def f_signature(x, *args, scale=2.0, **kw):
    y = x * scale
    print(args, sorted(kw), end="\r")
    return y + float(len(args) + len(kw))


def test_every_kind_of_parameter(X):
    run_both(f_signature, X, 1, 2, scale=3.0, q=1)
    run_both(f_signature, X)
    e = framejit.explain(f_signature)(X, 1, scale=3.0)
    assert [b.resumed for b in e.breaks] == [True]


def f_cell(x):
    a = x * 2.0
    print("cell", end="\r")

    def inner():
        return a + 1.0

    return inner()


def test_cell_variable_stored_before_the_break(X):
    run_both(f_cell, X)
    e = framejit.explain(f_cell)(X)
    assert e.breaks[0].resumed


def f_shared_list(x):
    a = [x * 2.0]
    b = a
    print("list", end="\r")
    a.append(1.0)
    return b, len(a)


def test_one_list_in_two_locals_stays_one_list(X):
    run_both(f_shared_list, X)


def f_loop(x):
    t = x * 1.0
    for i in range(3):
        print(i, end="\r")
        t = t + x
    return t


def f_loop_first(x):
    t = x
    for i in range(3):
        print(i, end="\r")
        t = t + x
    return t * 2.0


def test_what_cannot_be_rebuilt_runs_in_cpython_and_says_why(X):
    run_both(f_loop_first, X)
    e = framejit.explain(f_loop_first)(X)
    assert not e.breaks[0].resumed
    assert "nothing before the" in e.breaks[0].no_resume
    assert "the whole frame ran in CPython" in str(e)


# Note [Breaks inside loops]: a break inside a `for` keeps the graph before the loop; the loop runs
# in CPython.
def test_a_break_inside_a_loop_keeps_the_graph_before_it(X):
    run_both(f_loop, X)
    e = framejit.explain(f_loop)(X)
    assert e.breaks[0].resumed
    assert "inside a loop" in e.breaks[0].reason
    assert e.graph_count == 1 and "mul" in e.graphs[0]


def f_loop_nested(x, n):
    t = x * 3.0
    u = t + 1.0
    acc = []
    for i in range(n):
        for j in range(2):
            if i == 1 and j == 1:
                continue
            print(i, j, end="\r")
            acc.append(float(t[0]) + i * j)
            if i == 3:
                break
        else:
            u = u + 1.0
        last = i
    else:
        last = -1
    return u * 2.0, acc, last


@pytest.mark.parametrize("n", [0, 1, 3, 5])
def test_nested_loops_with_break_continue_and_else(X, n):
    run_both(f_loop_nested, X, n)


def f_loop_over_list(x, items):
    y = x - 1.0
    total = 0.0
    for k, v in enumerate(items):
        print(k, end="\r")
        total = total + v
    return y * total, k


def test_loop_over_a_list_and_its_variables_after_it(X):
    run_both(f_loop_over_list, X, [1.0, 2.0, 4.0])
    with pytest.raises(UnboundLocalError):
        framejit.compile(f_loop_over_list)(X, [])


def _helper_prints(t, i):
    print(i, end="\r")
    return t + i


def f_loop_inlined_break(x):
    t = np.sqrt(x * x) if np is not None and isinstance(x, np.ndarray) else x * x
    for i in range(2):
        t = _helper_prints(t, i)
    return t


def test_a_break_in_a_helper_called_in_a_loop(X):
    run_both(f_loop_inlined_break, X)


def f_loop_raises(x):
    t = x * 2.0
    for i in range(3):
        print(i, end="\r")
        if i == 1:
            raise ValueError("stop at 1")
    return t


def test_an_exception_inside_the_loop(X):
    with pytest.raises(ValueError, match="stop at 1"):
        framejit.compile(f_loop_raises)(X)


def test_fullgraph_still_raises(X):
    with pytest.raises(framejit.Unsupported, match="print"):
        framejit.compile(f_log, fullgraph=True)(X)


def f_raise_after_break(x, y):
    z = x * 2.0
    print("raise", end="\r")
    return z + y  # RAISES


def test_an_exception_after_the_break_names_the_original_line(kind):
    x, y = make(kind, [1.0, 2.0, 3.0]), make(kind, [1.0, 2.0])
    with pytest.raises(Exception) as want:
        f_raise_after_break(x, y)
    f = framejit.compile(f_raise_after_break)
    for _ in range(2):
        with pytest.raises(want.type) as got:
            f(x, y)
        assert str(got.value) == str(want.value)
        frames = [t for t in traceback.extract_tb(got.tb) if t.name == "f_raise_after_break"]
        assert "# RAISES" in frames[-1].line


def f_try(x, y):
    z = x * 2.0
    try:
        w = z + y
    except ValueError:
        w = z
    return w * 2.0


@needs_numpy
def test_an_exception_at_the_break_reaches_the_except_clause():
    x = np.arange(3.0)
    run_both(f_try, x, np.ones(3))
    run_both(f_try, x, np.ones(4))
    e = framejit.explain(f_try)(x, np.ones(4))
    assert [b.kind for b in e.breaks] == ["eager_error"] and e.breaks[0].resumed


def f_view_write(a):
    v = a[1:]
    print("view", end="\r")
    v[0] = 100.0
    return a * 1.0


@needs_numpy
def test_a_view_made_before_the_break_still_writes_its_base():
    run_both(f_view_write, np.arange(4.0))


def f_write_after_break(A, B):
    y = np.tanh(A) * B + 1.0
    print("write", end="\r")
    B[0] = 0.0
    B += y
    return y * 2.0, B


@needs_numpy
def test_writes_into_inputs_on_both_sides_of_a_break():
    run_both(f_write_after_break, np.linspace(-1, 1, 5), np.linspace(0, 2, 5))
    e = framejit.explain(f_write_after_break)(np.ones(5), np.ones(5))
    assert e.graph_count == 2 and [b.resumed for b in e.breaks] == [True]


def f_inplace_then_break(x, d):
    d["x"] += 1.0  # the graph writes d["x"]; storing it back into d breaks
    return x * 2.0


@needs_numpy
def test_a_write_before_the_break_reaches_the_input():
    run_both(f_inplace_then_break, np.arange(3.0), {"x": np.ones(3)})


# Note [Breaks inside loops]: a break inside an inlined call keeps only the graph before the call,
# which CPython then runs whole: the callee's write must not happen twice.
def _writes_then_breaks(x):
    x[2] += 1.0
    print("in the helper", end="\r")
    return x


def f_helper_writes(a):
    b = a * 2.0
    return _writes_then_breaks(a) + b


@needs_numpy
def test_a_write_in_a_helper_that_breaks_happens_once():
    run_both(f_helper_writes, make("numpy", [1.0, 2.0, 3.0, 4.0]))


def f_while_branch(a):
    n = 0
    i = 0
    while i < a.shape[0]:
        if a[i] > 0.5:
            n += 1
        i += 1
    return n


@needs_numpy
def test_a_break_in_every_iteration_of_a_while_loop_does_not_nest_frames():
    # Each iteration's resume function used to be called from inside the last one's.
    a = np.linspace(0.0, 1.0, 1200)
    run_both(f_while_branch, a)
    assert framejit.explain(f_while_branch)(a).graph_count <= 1


def f_breaks_first(x):
    print("first", end="\r")  # nothing before it, no array seen yet
    return x * 2.0 + 1.0


def test_a_break_at_the_first_statement_still_resumes(X):
    run_both(f_breaks_first, X)
    e = framejit.explain(f_breaks_first)(X)
    assert e.breaks[0].resumed and e.graph_count == 1


# ---- with blocks (Note [With blocks]) and ops that raise under a handler -------------------------

class Recorder:
    """A context manager that logs its calls; `suppress` swallows exceptions from the block."""

    def __init__(self, log, suppress=False):
        self.log, self.suppress = log, suppress

    def __enter__(self):
        self.log.append("enter")
        return 3.0

    def __exit__(self, et, ev, tb):
        self.log.append(("exit", et.__name__ if et else None))
        return self.suppress


def f_with(x, log):
    y = x * 2.0
    with Recorder(log) as c:
        z = y + c
        print("inside", end="\r")  # a break inside the block
        w = z * z
    return w - 1.0


def f_with_raises(x, log, suppress):
    y = x * 2.0
    with Recorder(log, suppress):
        z = y + 1.0
        print("inside", end="\r")
        z = z + len(log[5])  # IndexError on the first calls: the block's exit sees it
    return z


def f_nested_with_try(x, log, probe):
    try:
        with Recorder(log):
            y = x + 1.0
            with Recorder(log) as c:
                y = y * c
                print("deep", end="\r")
                y = y - probe[0]  # IndexError through both exits to the except
    except IndexError:
        y = x - 5.0
    return y * 2.0


def test_a_break_inside_a_with_block_keeps_the_rest(X):
    log_e, log_c = [], []
    want = f_with(copy.deepcopy(X), log_e)
    f = framejit.compile(f_with)
    for _ in range(3):
        assert values(f(copy.deepcopy(X), log_c)) == values(want)
    assert log_c == log_e * 3
    e = framejit.explain(f_with)(X, [])
    # Before the block, inside it on both sides of the print, and after it: all captured.
    assert e.graph_count >= 3, e
    assert any(b.reason.startswith("entering a with block") and b.resumed for b in e.breaks), e
    assert all(b.resumed for b in e.breaks if "print" in b.reason), e


@pytest.mark.parametrize("suppress", [False, True])
def test_an_exception_in_a_with_block_reaches_exit(X, suppress):
    f = framejit.compile(f_with_raises)
    for _ in range(3):
        outcomes = []
        for fn in (f_with_raises, f):
            log = []
            try:
                r = ("ok", values(fn(copy.deepcopy(X), log, suppress)))
            except IndexError:
                r = ("raised",)
            outcomes.append((r, log))
        assert outcomes[0] == outcomes[1]
        assert outcomes[0][1] == ["enter", ("exit", "IndexError")]
    # The failing statement itself is copied under the block's handler: nothing runs whole in CPython.
    e = framejit.explain(f_with_raises)(X, [], True)
    assert all(b.resumed for b in e.breaks) and any(b.kind == "eager_error" for b in e.breaks), e


def test_nested_with_blocks_inside_a_try(X):
    log_e, log_c = [], []
    want = f_nested_with_try(copy.deepcopy(X), log_e, [])
    f = framejit.compile(f_nested_with_try)
    for _ in range(3):
        assert values(f(copy.deepcopy(X), log_c, [])) == values(want)
    assert log_c == log_e * 3


def f_inv_in_try(a):
    b = a * 2.0
    try:
        c = np.linalg.inv(b)  # raises LinAlgError at run time for a singular matrix
        c = c + 1.0
    except np.linalg.LinAlgError:
        c = b - 1.0
    return c * 3.0


def f_index_in_with(a, i, log):
    b = a + 1.0
    with Recorder(log):
        c = b[i]  # a run-time index: IndexError at run time for a large one
    return c * 2.0


@needs_numpy
def test_an_op_that_raises_at_run_time_reaches_the_handler():
    f = framejit.compile(f_inv_in_try)
    for a in (np.eye(3), np.ones((3, 3)), np.eye(3), np.ones((3, 3))):
        np.testing.assert_array_equal(f(a.copy()), f_inv_in_try(a.copy()))
    e = framejit.explain(f_inv_in_try)(np.ones((3, 3)))
    assert any("numpy.linalg.inv may raise inside a try or with block" in b.reason for b in e.breaks), e
    g = framejit.compile(f_index_in_with)
    x = np.arange(4.0)
    for i in (1, 2, 9, 3, 9):
        outcomes = []
        for fn in (f_index_in_with, g):
            log = []
            try:
                r = fn(x.copy(), i, log).tolist()
            except IndexError:
                r = "IndexError"
            outcomes.append((r, log))
        assert outcomes[0] == outcomes[1]


def f_errstate(x):
    with np.errstate(divide="ignore", invalid="ignore"):
        y = np.log(x) / x
    return y * 2.0


@needs_numpy
def test_a_body_under_errstate_is_captured():
    # log's last ulp differs between NumPy's SIMD loops and framejit's kernels: compared closely,
    # not bit for bit.
    x = np.arange(4.0)
    np.testing.assert_allclose(framejit.compile(f_errstate)(x.copy()), f_errstate(x.copy()), rtol=1e-14)
    e = framejit.explain(f_errstate)(np.arange(4.0))
    assert e.graph_count >= 1 and all(b.resumed for b in e.breaks), e
    assert e.op_count >= 3, e  # log, divide, multiply


def f_index_in_comprehension(x, i):
    return [x[i] * k for k in range(3)]


def test_a_comprehension_is_no_handler_for_ops_that_may_raise(X):
    # 3.12+ inline comprehensions under an exception-table entry that only restores the loop
    # variable and re-raises: a run-time index inside one is captured, not a break.
    run_both(f_index_in_comprehension, X, 2)
    e = framejit.explain(f_index_in_comprehension)(X, 2)
    assert e.graph_count == 1 and not e.breaks, e
