"""Structured graph breaks: each break says what kind it is, which exception CPython raises there,
the root frame's instruction it stops at, and the root frame's stack and bound locals at the start
of that instruction (what a resume function rebuilds). explain() shows them as GraphBreakInfo.
Each test runs on NumPy arrays and on framejit.Tensors, so interpreters without NumPy (3.12, 3.13
here) check the offsets and snapshots against their own bytecode."""

import dis
import gc
import inspect
import subprocess
import sys
import weakref

import pytest

import framejit

try:
    import numpy as np
except ImportError:
    np = None

KINDS = (["numpy"] if np is not None else []) + ["tensor"]


def make(kind, values):
    if kind == "numpy":
        return np.asarray(values, dtype=np.float32)
    return framejit.tensor(values, dtype="float32")


def as_list(v):
    return v.tolist()


@pytest.fixture(params=KINDS)
def kind(request):
    return request.param


@pytest.fixture
def X(kind):
    return make(kind, [-1.0, -0.6, -0.2, 0.2, 0.6, 1.0])


@pytest.fixture
def W(kind):
    return make(kind, [0.5] * 6)


def line_of(fn, marker):
    lines, start = inspect.getsourcelines(fn)
    hits = [start + i for i, text in enumerate(lines) if marker in text]
    assert len(hits) == 1, (marker, hits)
    return hits[0]


def instructions_at(fn, marker):
    """The instructions of `fn` on the source line holding `marker` (dis offsets, bytes)."""
    line = line_of(fn, marker)
    out, current = [], None
    for ins in dis.get_instructions(fn):
        if ins.starts_line is not None and ins.starts_line is not False:
            # 3.13 reports starts_line as a bool and the line in line_number
            current = getattr(ins, "line_number", None) or ins.starts_line
        if current == line:
            out.append(ins)
    assert out, marker
    return out


def only_break(e):
    assert len(e.breaks) == 1, e.breaks
    assert e.break_reasons == [e.breaks[0].reason]
    return e.breaks[0]


def helper(v):
    return v * v + 1


def f_print(x, w, unused):
    a = x * 2
    b = helper(a) + w
    print("value", a.shape[0], 1, end="\r")  # BREAK
    return a + b


def test_break_at_print_records_offset_stack_and_locals(capsys, X, W):
    b = only_break(framejit.explain(f_print)(X, W, "not read"))
    assert b.kind == "unsupported" and b.exc_type is None
    assert b.reason.startswith("calling builtin print")
    assert (b.filename, b.lineno) == (__file__, line_of(f_print, "# BREAK"))
    # The offset is the CALL that runs print, on its line.
    (call,) = [i for i in instructions_at(f_print, "# BREAK") if i.opname in ("CALL", "CALL_KW")]
    assert b.offset == call.offset
    # The stack at the start of that CALL: print and its NULL (in either order: 3.13 swapped
    # them), then the positional arguments; the keyword value and, from 3.13, the names tuple.
    assert sorted(b.stack[:2]) == ["builtin <built-in function print>", "null"]
    args = b.stack[2:]
    assert args[:3] == ["const 'value'", "number 6", "const 1"]
    assert args[3] == "const '\\r'"
    assert args[4:] in ([], ["const ('end',)"])
    # Every bound local: the arrays made so far, the arguments read, and the one never read.
    assert b.locals == {"x": "tensor f32[s0]", "w": "tensor f32[s1]", "unused": "argument",
                        "a": "tensor f32[s0]", "b": "tensor f32[s0]"}
    capsys.readouterr()


def f_inlined_break(x):
    y = x + 1
    z = inner_break(y)  # ROOT CALL
    return z


def inner_break(v):
    t = v * 3
    return float(t.sum())  # INNER


def test_break_inside_an_inlined_call_stops_at_the_roots_call(X):
    # explain() traces every frame: inner_break, called by CPython after the break, breaks again.
    b = framejit.explain(f_inlined_break)(X).breaks[0]
    assert b.kind == "data_dependent"
    calls = [i for i in instructions_at(f_inlined_break, "# ROOT CALL") if i.opname == "CALL"]
    assert b.offset == calls[0].offset
    # file:line is the innermost instruction's; the snapshot is the root frame's.
    assert b.lineno == line_of(inner_break, "# INNER")
    assert b.reason.endswith(f"({__file__}:{b.lineno} in inner_break)")
    assert sorted(b.stack) == sorted(["null", "function inner_break", "tensor f32[s0]"])
    assert b.locals == {"x": "tensor f32[s0]", "y": "tensor f32[s0]"}


def f_data_dependent(x):
    s = x.sum()
    if s > 0:  # BRANCH
        return x - 1
    return x + 1


def test_data_dependent_branch(X):
    b = only_break(framejit.explain(f_data_dependent)(X + 1))
    assert b.kind == "data_dependent" and b.exc_type is None
    ins = {i.offset: i.opname for i in instructions_at(f_data_dependent, "# BRANCH")}
    assert ins[b.offset].startswith(("POP_JUMP", "TO_BOOL"))
    assert b.stack == ["tensor b8[]"]
    assert b.locals == {"x": "tensor f32[s0]", "s": "tensor f32[]"}


def f_broadcast_error(x, y):
    z = x * 2
    try:
        return z + y  # EAGER
    except ValueError:
        return None


def test_eager_error_carries_the_exception_type(kind, X):
    e = framejit.explain(f_broadcast_error)(X, make(kind, [1.0] * 4))
    assert e.result is None  # CPython ran the frame and raised, as without framejit
    b = only_break(e)
    assert b.kind == "eager_error" and b.exc_type is ValueError
    assert b.reason.startswith("operands could not be broadcast together")
    ins = {i.offset: i.opname for i in instructions_at(f_broadcast_error, "# EAGER")}
    assert ins[b.offset] in ("BINARY_OP", "BINARY_ADD")
    assert b.stack == ["tensor f32[s0]", "tensor f32[s1]"]


class Holder:
    pass


class Dynamic:
    def __getattr__(self, name):
        return 1.5


def f_getattr_missing(x, obj):
    try:
        return x * getattr(obj, "scale")
    except AttributeError:
        return None


def f_hasattr_dynamic(x, obj):
    return x * 2 if hasattr(obj, "scale") else x


def f_hasattr_missing(x, obj):
    return x * 2 if hasattr(obj, "scale") else x


def test_missing_attribute(X):
    e = framejit.explain(f_getattr_missing)(X, Holder())
    assert e.result is None
    b = only_break(e)
    assert b.kind == "missing_attribute" and b.exc_type is AttributeError
    assert b.reason.startswith("'Holder' object has no attribute 'scale'")
    # hasattr decides on the kind: a missing attribute is a fact, so no break...
    e = framejit.explain(f_hasattr_missing)(X, Holder())
    assert e.breaks == [] and e.graph_count == 0  # it returns x: no operations, no graph
    assert as_list(e.result) == as_list(X)
    # ...but a __getattr__ could answer, so it is not missing: hasattr breaks, CPython answers.
    e = framejit.explain(f_hasattr_dynamic)(X, Dynamic())
    assert [b.kind for b in e.breaks] == ["unsupported"]
    assert as_list(e.result) == as_list(X * 2)


def f_side_effect(x, obj):
    y = x + 1
    obj.last = y  # STORE
    return y


class Slotted:
    __slots__ = ("last",)


def test_side_effect_break(X):
    # Stores into ordinary objects are replayed (test_side_effects.py); a slot's is not yet.
    h = Slotted()
    b = only_break(framejit.explain(f_side_effect)(X, h))
    assert b.kind == "side_effect"
    ins = {i.offset: i.opname for i in instructions_at(f_side_effect, "# STORE")}
    assert ins[b.offset] == "STORE_ATTR"
    assert b.stack == ["tensor f32[s0]", "object Slotted"]
    assert as_list(h.last) == as_list(X + 1)


def f_recursive(x, n):
    return x if n == 0 else f_recursive(x + 1, n - 1)


def test_inline_depth_is_a_limit(X):
    e = framejit.explain(f_recursive)(X, 40)
    assert "limit" in [b.kind for b in e.breaks]
    assert as_list(e.result) == as_list(X + 40)


def f_returns_lambda(x):
    y = x * 2
    return lambda: y  # RETURN


def test_break_while_building_outputs_points_at_the_return(X):
    b = only_break(framejit.explain(f_returns_lambda)(X))
    ins = {i.offset: i.opname for i in instructions_at(f_returns_lambda, "# RETURN")}
    assert ins[b.offset] in ("RETURN_VALUE", "RETURN_CONST")
    assert b.lineno == line_of(f_returns_lambda, "# RETURN")
    assert "(" + __file__ not in b.reason  # the message is as it always was: no location
    assert b.stack == ["function f_returns_lambda.<locals>.<lambda>"]


# Compiled here, not in this module: pytest rewrites the asserts of test modules.
ASSERTS = compile("""
def f_assert(x):
    assert x.ndim == 2, "2-d only"
    return x

def f_assert_caught(x):
    try:
        assert x.ndim == 2, "2-d only"
    except AssertionError:
        return None
    return x
""", "asserts.py", "exec")
ASSERT_NS = {}
exec(ASSERTS, ASSERT_NS)


def test_failing_assert_is_an_eager_assertion_error(X):
    with pytest.raises(AssertionError):
        framejit.compile(ASSERT_NS["f_assert"])(X)
    e = framejit.explain(ASSERT_NS["f_assert_caught"])(X)
    assert e.result is None
    b = only_break(e)
    assert (b.kind, b.exc_type) == ("eager_error", AssertionError)
    assert b.stack == []


def test_cache_entries_do_not_keep_the_snapshot_alive(X):
    # The snapshot holds the frame's objects; a break entry keeps the break without it.
    f = framejit.compile(f_side_effect)
    h = Holder()
    ref = weakref.ref(h)
    for _ in range(3):
        f(X, h)
    del h
    gc.collect()
    assert ref() is None


def test_tensor_errors_without_numpy_take_the_breaks_exception_type():
    code = "\n".join([
        "import sys",
        "sys.modules['numpy'] = None",
        "import framejit",
        "a = framejit.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])",
        "def expect(exc, fn):",
        "    try:",
        "        fn()",
        "    except exc as e:",
        "        print(type(e).__name__, e)",
        "    else:",
        "        raise AssertionError(f'no {exc.__name__}')",
        "expect(ValueError, lambda: a + framejit.tensor([1.0, 2.0]))",
        "expect(ValueError, lambda: a.sum(axis=5))",
        "expect(ValueError, lambda: a.sum(axis=(1, 1)))",
        "expect(ValueError, lambda: a @ a)",
        "print(a.sum(axis=1).tolist())",
    ])
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].startswith("ValueError operands could not be broadcast together")
    assert lines[1].startswith("ValueError axis 5 is out of bounds for array of dimension 2")
    assert lines[2].startswith("ValueError repeated axis")
    assert lines[3].startswith("ValueError")
    assert lines[4] == "[6.0, 15.0]"
