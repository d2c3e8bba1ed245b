"""frontend/bytecode/break_code.h: the code object that replaces a frame at a graph break.

Each test breaks a function at one instruction by hand, the way the tracer will: a Python callable
stands in for the compiled graph, recipes say where the stack values and the changed locals come
from. The rewritten function (the graph call, the rebuilt stack, the instruction run in CPython,
then the resume function(s)) must return, raise and log exactly what the original does.
Needs no NumPy: runs on 3.11, 3.12 and 3.13.
"""

import dis
import sys
import types
import weakref

import pytest

from framejit import _C

PY313 = sys.version_info >= (3, 13)
LOG = []


def log_value(v):
    if isinstance(v, (int, float)) and v < 0:
        raise ValueError(f"negative {v}")
    LOG.append(v)
    return v


def _outcome(call):
    LOG.clear()
    try:
        result = ("returned", call())
    except Exception as e:  # noqa: BLE001 - the exception is the outcome compared
        result = ("raised", type(e), e.args)
    return result, list(LOG)


def _slot(fn, name):
    """localsplus index of `name` (varnames, then cells that are not arguments, then free vars)."""
    co = fn.__code__
    names = list(co.co_varnames)
    names += [c for c in co.co_cellvars if c not in names]
    names += list(co.co_freevars)
    return names.index(name)


def _offset(fn, opname, nth=0, argval=None):
    hits = [i.offset for i in dis.get_instructions(fn)
            if (i.opname == opname or (opname.endswith("*") and i.opname.startswith(opname[:-1])))
            and (argval is None or i.argval == argval)]
    return hits[nth]


def _callee(recipe):
    """A plain call's two stack slots, this version's layout."""
    return [recipe, ("null",)] if PY313 else [("null",), recipe]


def _break(fn, offset, graph, inputs, stack, stores, live):
    code, kind, why, offsets = _C._make_break_code(fn.__code__, offset, graph, inputs, stack,
                                                   [(_slot(fn, n), r) for n, r in stores],
                                                   [_slot(fn, n) for n in live])
    g = types.FunctionType(code, fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__)
    return g, kind, why, offsets


def _same(fn, g, *args):
    expected = _outcome(lambda: fn(*args))
    got = _outcome(lambda: g(*args))
    assert got == expected
    return got


# --- a call in the middle of a function ------------------------------------------------------------

def straight(a, b):
    y = a * 2 + b
    log_value(y)
    return y - 1


def test_break_at_a_call():
    off = _offset(straight, "CALL")
    g, kind, _, offsets = _break(straight, off, lambda a, b: (a * 2 + b,),
                                 [("local", 0), ("local", 1)],
                                 _callee(("global", "log_value")) + [("out", 0)],
                                 [("y", ("out", 0))], ["a", "b", "y"])
    assert kind == "copied" and len(offsets) == 1 and offsets[0] > off
    got = _same(straight, g, 3, 4)
    assert got == (("returned", 9), [10])
    # The instruction raises in CPython: the same exception, nothing after it ran.
    got = _same(straight, g, -5, 1)
    assert got[0][0] == "raised" and got[0][1] is ValueError


def test_the_graph_runs_once_and_its_outputs_feed_stack_and_locals():
    calls = []

    def graph(a, b):
        calls.append((a, b))
        return (a * 2 + b,)

    off = _offset(straight, "CALL")
    g, *_ = _break(straight, off, graph, [("local", 0), ("local", 1)],
                   _callee(("global", "log_value")) + [("out", 0)],
                   [("y", ("out", 0))], ["a", "b", "y"])
    assert _outcome(lambda: g(2, 1)) == (("returned", 4), [5])
    assert calls == [(2, 1)]


def test_a_wrong_graph_output_is_visible():
    # The stack slot comes from the graph, not from re-running the original: a graph that
    # disagrees shows in the log (the test can fail).
    off = _offset(straight, "CALL")
    g, *_ = _break(straight, off, lambda a, b: (100,), [("local", 0), ("local", 1)],
                   _callee(("global", "log_value")) + [("out", 0)],
                   [("y", ("out", 0))], ["a", "b", "y"])
    assert _outcome(lambda: g(3, 4)) == (("returned", 99), [100])


def log_kw(v, tag):
    LOG.append((tag, v))
    return v


def keyword_call(a):
    y = a + 1
    return log_kw(y, tag="t") * 2


def test_break_at_a_keyword_call():
    # 3.11: KW_NAMES|PRECALL|CALL, 3.12: KW_NAMES|CALL (the offset of CALL names the group);
    # 3.13: CALL_KW with the names tuple on the stack.
    off = _offset(keyword_call, "CALL_KW" if PY313 else "CALL")
    stack = _callee(("global", "log_kw")) + [("out", 0), ("const", "t")]
    if PY313:
        stack.append(("const", ("tag",)))
    g, kind, *_ = _break(keyword_call, off, lambda a: (a + 1,), [("local", 0)], stack,
                         [("y", ("out", 0))], ["a", "y"])
    assert kind == "copied"
    assert _same(keyword_call, g, 4) == (("returned", 10), [("t", 5)])


class Big:
    pass


def drops(a):
    big = Big()
    log_value(a)
    ref = weakref.ref(big)
    del big
    return ref() is None


def test_the_replaced_frame_keeps_nothing_alive():
    # Neither the graph's result tuple nor the locals handed over stay referenced by the
    # replaced frame while the resume function runs.
    off = _offset(drops, "CALL", nth=1)
    g, kind, *_ = _break(drops, off, lambda: (Big(),), [],
                         _callee(("global", "log_value")) + [("local", 0)],
                         [("big", ("out", 0))], ["a", "big"])
    assert kind == "copied"
    assert _same(drops, g, 1) == (("returned", True), [1])


# --- values on the stack below the breaking call: a method call in progress ----------------------

class Sink:
    def __init__(self):
        self.seen = []

    def combine(self, x, y, z):
        self.seen.append((x, y, z))
        return x * 100 + y * 10 + z


def method_in_progress(a, b, sink):
    return sink.combine(a + 1, log_value(a * b), b) - len(sink.seen)


@pytest.mark.parametrize("layout", ["bound", "function_and_self"])
def test_break_inside_a_method_call_in_progress(layout):
    off = _offset(method_in_progress, "CALL", argval=None, nth=0)
    # The first CALL in code order is log_value's (combine's comes after its arguments).
    if layout == "bound":
        method = _callee(("attr", ("local", 2), "combine"))
    else:  # what LOAD_ATTR/LOAD_METHOD leaves when it finds a method: function, then self
        method = [("attr", ("const", Sink), "combine"), ("local", 2)]
    stack = method + [("out", 0)] + _callee(("global", "log_value")) + [("out", 1)]
    g, kind, *_ = _break(method_in_progress, off, lambda a, b: (a + 1, a * b),
                         [("local", 0), ("local", 1)], stack, [], ["a", "b", "sink"])
    assert kind == "copied"
    s1, s2 = Sink(), Sink()
    expected = _outcome(lambda: method_in_progress(2, 3, s1))
    got = _outcome(lambda: g(2, 3, s2))
    assert got == expected == (("returned", 363 - 1), [6])
    assert s1.seen == s2.seen


class Mod:
    @staticmethod
    def twice(v):
        LOG.append(("twice", v))
        return 2 * v


mod = Mod()


def attribute_call(a):
    y = a + 1
    return mod.twice(y) * 3


def global_call(a):
    y = a + 1
    return log_value(y) * 3


def test_break_at_a_method_load_and_at_a_global_load():
    # The copy loads a bound method / the plain global; the NULL slot becomes a flag.
    op = "LOAD_METHOD" if sys.version_info < (3, 12) else "LOAD_ATTR"
    off = _offset(attribute_call, op, argval="twice")
    g, kind, *_ = _break(attribute_call, off, lambda a: (a + 1,), [("local", 0)],
                         [("global", "mod")], [("y", ("out", 0))], ["a", "y"])
    assert kind == "copied"
    assert _same(attribute_call, g, 4) == (("returned", 30), [("twice", 5)])

    off = _offset(global_call, "LOAD_GLOBAL", argval="log_value")
    g, kind, *_ = _break(global_call, off, lambda a: (a + 1,), [("local", 0)], [],
                         [("y", ("out", 0))], ["a", "y"])
    assert kind == "copied"
    assert _same(global_call, g, 4) == (("returned", 15), [5])


# --- loops ---------------------------------------------------------------------------------------

def loop(xs, scale):
    total = 0
    for x in xs:
        v = x * scale
        total = total + log_value(v)
    return total


def test_break_inside_a_for_loop_keeps_the_iterator():
    xs = [1, 2, 3]
    it = iter(xs)
    next(it)  # the first iteration took xs[0]; the break is in its body
    off = _offset(loop, "CALL")
    stack = [("const", it), ("const", 0)] + _callee(("global", "log_value")) + [("out", 0)]
    g, kind, *_ = _break(loop, off, lambda x, s: (x * s,), [("item", ("local", 0), 0),
                                                             ("local", 1)],
                         stack, [("x", ("item", ("local", 0), 0)), ("v", ("out", 0)),
                                 ("total", ("const", 0))],
                         ["xs", "scale", "total", "x", "v"])
    assert kind == "copied"
    assert _same(loop, g, xs, 10) == (("returned", 60), [10, 20, 30])


@pytest.mark.parametrize("remaining", [[], [5, 6]])
def test_break_on_for_iter_takes_either_exit(remaining):
    # FOR_ITER is data dependent: exhausted or not, each way has its own resume function.
    off = _offset(loop, "FOR_ITER")
    it = iter(remaining)
    g, kind, _, offsets = _break(loop, off, None, [], [("const", it)],
                                 [("total", ("const", 7))], ["xs", "scale", "total"])
    assert kind == "copied" and len(offsets) == 2 and offsets[0] != offsets[1]
    expected = 7 + sum(v * 2 for v in remaining)
    assert _outcome(lambda: g(None, 2)) == (("returned", expected), [v * 2 for v in remaining])


# --- a conditional jump on a value the graph computed --------------------------------------------

def branch(a):
    g = a * 2
    if g > 0:
        log_value("pos")
        return g + 1
    log_value("neg")
    return g - 1


class Truthy:
    def __init__(self, v):
        self.v = v

    def __bool__(self):
        return self.v


@pytest.mark.parametrize("a", [3, -3])
@pytest.mark.parametrize("as_object", [False, True])
def test_break_on_a_data_dependent_branch(a, as_object):
    off = _offset(branch, "POP_JUMP_*")

    def graph(a):
        t = a * 2 > 0
        return (a * 2, Truthy(t) if as_object else t)

    g, kind, _, offsets = _break(branch, off, graph, [("local", 0)], [("out", 1)],
                                 [("g", ("out", 0))], ["a", "g"])
    assert kind == "copied" and len(offsets) == 2 and offsets[0] != offsets[1]
    got = _same(branch, g, a)
    assert got[1] == (["pos"] if a > 0 else ["neg"])


# --- try/except ----------------------------------------------------------------------------------

def guarded(a, catch):
    y = a + 1
    try:
        r = log_value(y - 10)
        log_value("after")
    except ValueError as e:
        if not catch:
            raise
        log_value(("caught", str(e)))
        r = -1
    return r + y


def guarded_in_loop(xs):
    out = []
    for x in xs:
        try:
            out.append(log_value(x - 2))
        except ValueError:
            out.append("bad")
    return out


@pytest.mark.parametrize("a", [20, 3])
@pytest.mark.parametrize("catch", [True, False])
def test_break_inside_try_the_original_handler_catches(a, catch):
    off = _offset(guarded, "CALL")
    g, kind, _, offsets = _break(guarded, off, lambda a: (a + 1, a + 1 - 10),
                                 [("local", 0)],
                                 _callee(("global", "log_value")) + [("out", 1)],
                                 [("y", ("out", 0))], ["a", "catch", "y"])
    assert kind == "copied" and len(offsets) == 2  # fall-through and the handler's entry
    _same(guarded, g, a, catch)


def test_break_inside_try_inside_a_loop():
    xs = [5, 1, 7]
    it = iter(xs)
    next(it)
    off = _offset(guarded_in_loop, "CALL", nth=0)  # log_value(x - 2)
    # Stack: iterator, then out.append in progress, then log_value in progress.
    # `out` was created before the break: a constant here (recipes read the frame's entry state).
    out = []
    stack = [("const", it)] + _callee(("attr", ("const", out), "append")) + \
        _callee(("global", "log_value")) + [("out", 0)]
    g, kind, *_ = _break(guarded_in_loop, off, lambda x: (x - 2,),
                         [("item", ("local", 0), 0)], stack,
                         [("out", ("const", out)), ("x", ("item", ("local", 0), 0))],
                         ["xs", "out", "x"])
    assert kind == "copied"
    assert _same(guarded_in_loop, g, xs) == (("returned", [3, "bad", 5]), [3, 5])


# --- with blocks: the instruction runs in the resume function -------------------------------------

class Recorder:
    def __enter__(self):
        LOG.append("enter")
        return self

    def __exit__(self, et, ev, tb):
        LOG.append(("exit", et.__name__ if et else None))
        return False


def in_with(a):
    with Recorder():
        y = a * 2
        log_value(y)
    return y


@pytest.mark.parametrize("a", [2, -2])
def test_break_inside_with_copies_the_instruction_under_its_handler(a):
    off = _offset(in_with, "CALL", nth=1)  # log_value(y); the first CALL is Recorder()
    names = dis.get_instructions(in_with)
    assert any(i.opname == "BEFORE_WITH" for i in names)
    # Entering the `with` happened before the break: the test enters it the way the replaced
    # frame would have, then hands __exit__ over on the stack.
    rec = Recorder()

    def graph(a):
        LOG.append("enter")
        return (a * 2,)

    depth = dict(_C._resume_points(in_with.__code__)).get(off)
    if depth is None:  # 3.11: the group starts at PRECALL
        depth = dict(_C._resume_points(in_with.__code__))[_offset(in_with, "PRECALL", nth=1)]
    assert depth == 4 + (0 if PY313 else 0)
    stack = [("const", rec.__exit__)] + _callee(("global", "log_value")) + [("out", 0)]
    g, kind, why, offsets = _break(in_with, off, graph, [("local", 0)], stack,
                                   [("y", ("out", 0))], ["a", "y"])
    # The call is copied under the block's handler, whose entry wants a lasti below the exception:
    # the handler's resume code pushes one. a = -2 raises inside the call and reaches __exit__.
    assert kind == "copied", why
    assert len(offsets) == 2  # after the call; the handler's entry
    _same(in_with, g, a)


# --- closures ------------------------------------------------------------------------------------

def make_closure(k):
    def f(a):
        c = a * k
        log_value(c)
        c = c + 1

        def inner():
            return c + k

        return inner()

    return f


def test_break_with_cells_and_free_variables():
    f2, f5 = make_closure(2), make_closure(5)
    assert f2.__code__ is f5.__code__
    off = _offset(f2, "CALL")
    k = _slot(f2, "k")
    code, kind, *_ = _C._make_break_code(
        f2.__code__, off, lambda a, k: (a * k,), [("local", _slot(f2, "a")), ("local", k)],
        _callee(("global", "log_value")) + [("out", 0)], [(_slot(f2, "c"), ("out", 0))],
        [_slot(f2, "a"), _slot(f2, "c")])
    assert kind == "copied"
    # One rewritten code object serves every closure of the same code (different `k` cells).
    for f in (f2, f5):
        g = types.FunctionType(code, f.__globals__, f.__name__, None, f.__closure__)
        assert _same(f, g, 3)[0][0] == "returned"


# --- errors --------------------------------------------------------------------------------------

def gen(a):
    yield log_value(a)


def test_bad_input_is_a_clear_error():
    off = _offset(straight, "CALL")
    ok_stack = _callee(("global", "log_value")) + [("out", 0)]
    cases = [
        ((off + 1, lambda: 0, [], ok_stack, [], []), "not the start of an instruction"),
        ((off, lambda: 0, [], ok_stack[:2], [], []), "holds 3 values, 2 recipes given"),
        ((off, None, [], ok_stack, [], []), "a graph output without a graph"),
        ((off, lambda: 0, [("null",)], ok_stack, [], []), "NULL is only a stack slot"),
        ((off, lambda: 0, [("local", 99)], ok_stack, [], []), "out of range"),
        ((off, 5, [], ok_stack, [], []), "not callable"),
        ((off, lambda: 0, [], ok_stack, [(2, ("out", 0)), (2, ("out", 0))], []), "stored twice"),
        ((off, lambda: 0, [], ok_stack, [], [42]), "out of range"),
        ((_offset(straight, "RETURN_VALUE"), lambda: 0, [], [("out", 0)], [], []), "a return"),
        ((0, lambda: 0, [], [], [], []), "prologue"),
    ]
    for args, msg in cases:
        with pytest.raises(ValueError, match=msg):
            _C._make_break_code(straight.__code__, *args)
    with pytest.raises(ValueError, match="recipe"):
        _C._make_break_code(straight.__code__, off, None, [], [("bogus", 1)], [], [])
    with pytest.raises(ValueError, match="generators"):
        _C._make_break_code(gen.__code__, _offset(gen, "CALL"), None, [], [], [], [])
    with pytest.raises(ValueError):
        _C._make_break_code("not code", 0, None, [], [], [], [])
