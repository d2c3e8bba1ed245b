"""Bytecode that differs between CPython 3.11, 3.12 and 3.13: every program here must be captured
in one graph (fullgraph=True, explain() with no graph break) on every interpreter framejit is built
for, and compute what CPython computes.

Each program takes "numbers" x, y, z and Python control values. It runs with Python floats as the
numbers (pure Python work), with framejit.Tensors (array programs that need no NumPy: these run
captured on pyenv's 3.12 and 3.13 too) and, where NumPy exists, with NumPy arrays.
"""

import sys

import pytest

import framejit
from conftest import BACKENDS, assert_same, check, np

# ---- the programs -------------------------------------------------------------------------------


def comprehensions(x, y, n):
    # 3.12+ inline comprehensions (LOAD_FAST_AND_CLEAR, SWAP, END_FOR); 3.11 calls a nested
    # function for each.
    scaled = [x * i for i in range(n) if i != 1]
    keyed = {f"k{i}": y + i for i in range(n)}
    parity = {i % 2 for i in range(n)}
    nested = [[x + i + j for j in range(2)] for i in range(n)]
    return scaled, keyed, len(parity), sorted(parity), 1 in parity, nested


def shadowing_comprehension(x, xs):
    # The comprehension's x is its own: the argument x is saved and restored around it (3.12+).
    ys = [x * 2 for x in xs]
    return x, ys


class Base:
    def __init__(self, k):
        self.k = k

    def scale(self, v):
        return v * self.k

    def offset(self, v, *, by=1.0):
        return v + by


class Child(Base):
    def scale(self, v):
        return super().scale(v) + 1.0

    def offset(self, v, *, by=2.0):
        return super(Child, self).offset(v, by=by) * 2.0


class GrandChild(Child):
    def scale(self, v):
        return super().scale(v) - self.k


def uses_super(obj, x):
    # 3.11: super() is a call of the builtin with a __class__ cell; 3.12+: LOAD_SUPER_ATTR.
    return obj.scale(x), obj.offset(x), obj.offset(x, by=3.0)


def slices(x, y, z, i):
    xs = [x, y, z, x + y]
    return xs[1:i], xs[:-1], xs[::2], xs[i:], (x, y, z)[-2:]  # BINARY_SLICE on 3.12+


def walrus(x, y, xs):
    if (n := len(xs)) > 2:
        total = x * n
    else:
        total = y
    return total, n, [w for v in xs if (w := v + 1.0) is not None]


def kw_target(a, b=2.0, *, c=3.0, **rest):
    return a * b + c, sorted(rest)


def keyword_calls(x, y):
    extra = {"d": 1, "e": 2}
    return (
        kw_target(x),
        kw_target(x, c=y),  # KW_NAMES (3.11, 3.12) / CALL_KW (3.13)
        kw_target(b=y, a=x),
        kw_target(x, y, c=x, d=4),
        kw_target(x, **extra),  # CALL_FUNCTION_EX with a dict
        kw_target(*(x, y), **{"c": y}),
    )


def try_no_raise(x, y):
    try:
        r = x + y
    except ValueError:
        r = x
    finally:
        s = y * 2.0
    try:
        t = x - y
    except (TypeError, KeyError):
        t = y
    else:
        t = t + 1.0
    return r, s, t


def loops(x, y, n):
    total = x
    for i, (a, b) in enumerate(zip([x, y, x], [y, y, x]), start=1):
        total = total + a * i - b
    for j in range(n):
        if j == 2:
            continue
        if j == 4:
            break
        total = total + y
    k = 0
    while k < 3:
        total = total * 0.5
        k += 1
    return total, i, j, k


def fstrings(x, n, name):
    label = f"{name}:{n}|{n!r:>4}|{name!s}|{n:03d}|{n / 3:.2f}|{name!a}"
    width = 6
    return label, f"{n:{width}}", f"{'' if n else 'zero'}", x * len(label)


def none_branches(x, y=None, z=None):
    if y is None:
        y = x
    if z is not None:
        y = y + z
    w = None if z is None else y
    return y, w is None


def conditionals(x, y, n, flag):
    a = x if n > 2 else y
    b = y if not flag else -x
    c = (x if flag and n else y) if n or flag else x
    return a, +b, c, n > 1 and flag, n < 0 or flag


def closures(x, y, n):
    def add(v, w=1.0):
        return v + x * w + n

    def twice(f, v):
        return f(f(v))

    scale = lambda v, k=2.0: v * k  # noqa: E731
    return add(y), add(y, w=2.0), twice(add, y), scale(x), scale(x, k=3.0)


def default_args(x, y, k=2.0, *, m=1.0, mode="add"):
    if mode == "add":
        return x * k + y * m
    return x - y


def unpacking(x, y, z):
    head, *rest = [x, y, z]
    a, (b, c) = x, (y, z)
    return (*rest, head), a + b + c, [*rest, *rest]


def methods_and_builtins(x, y, n):
    xs = [x, y]
    xs.append(x + y)
    xs.extend([y])
    d = {"a": x}
    d["b"] = y
    return xs, list(d.items()), len(xs), max(n, 3), isinstance(n, int), "ab".upper()


# (program, arguments given the numbers x, y, z). Control values are Python ints, bools, strs.
CASES = [
    ("comprehensions", comprehensions, lambda x, y, z: (x, y, 4)),
    ("shadowing_comprehension", shadowing_comprehension, lambda x, y, z: (x, [y, z])),
    ("super", uses_super, lambda x, y, z: (Child(2.0), x)),
    ("super_two_levels", uses_super, lambda x, y, z: (GrandChild(3.0), x)),
    ("slices", slices, lambda x, y, z: (x, y, z, 2)),
    ("walrus", walrus, lambda x, y, z: (x, y, [x, y, z])),
    ("walrus_short", walrus, lambda x, y, z: (x, y, [x])),
    ("keyword_calls", keyword_calls, lambda x, y, z: (x, y)),
    ("try_no_raise", try_no_raise, lambda x, y, z: (x, y)),
    ("loops", loops, lambda x, y, z: (x, y, 6)),
    ("fstrings", fstrings, lambda x, y, z: (x, 7, "ab")),
    ("none_branches", none_branches, lambda x, y, z: (x,)),
    ("none_branches_given", none_branches, lambda x, y, z: (x, y, z)),
    ("conditionals", conditionals, lambda x, y, z: (x, y, 3, True)),
    ("conditionals_other", conditionals, lambda x, y, z: (x, y, 0, False)),
    ("closures", closures, lambda x, y, z: (x, y, 2)),
    ("default_args", default_args, lambda x, y, z: (x, y)),
    ("default_args_given", default_args, lambda x, y, z: (x, y, 3.0)),
    ("unpacking", unpacking, lambda x, y, z: (x, y, z)),
    ("methods_and_builtins", methods_and_builtins, lambda x, y, z: (x, y, 5)),
]
IDS = [c[0] for c in CASES]


def _python_numbers():
    return 1.5, -0.25, 4.0


def _array_numbers():
    return (np.asarray([1.5, 2.0, -3.0]), np.asarray([-0.25, 0.5, 1.0]), np.asarray([4.0, 0.0, 2.5]))


def _tensor_numbers():
    t = framejit.tensor
    return (t([1.5, 2.0, -3.0]), t([-0.25, 0.5, 1.0]), t([4.0, 0.0, 2.5]))


NUMBER_MAKERS = [pytest.param(_python_numbers, id="python"), pytest.param(_tensor_numbers, id="tensor")]
if np is not None:
    NUMBER_MAKERS.append(pytest.param(_array_numbers, id="numpy"))


@pytest.mark.parametrize("numbers", NUMBER_MAKERS)
@pytest.mark.parametrize("name,fn,make_args", CASES, ids=IDS)
def test_explain_sees_one_graph(name, fn, make_args, numbers):
    args = make_args(*numbers())
    expected = fn(*args)
    out = framejit.explain(fn)(*args)
    assert out.graph_break_count == 0, f"{name} on Python {sys.version_info[:2]}: {out.break_reasons}"
    # A graph with no operations (the arguments handed back) is not counted.
    assert out.graph_count == (1 if out.op_count else 0)
    assert_same(expected, out.result)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("numbers", NUMBER_MAKERS)
@pytest.mark.parametrize("name,fn,make_args", CASES, ids=IDS)
def test_fullgraph_matches_cpython(name, fn, make_args, numbers, backend):
    check(fn, *make_args(*numbers()), backend=backend, fullgraph=True)


def test_graph_break_names_the_opcode():
    # Something every version still runs in CPython: the message names CPython's opcode.
    def defines_a_class(x):
        class Inner:
            pass

        return x

    with pytest.raises(framejit.Unsupported, match="unsupported opcode LOAD_BUILD_CLASS"):
        framejit.compile(defines_a_class, fullgraph=True)(1.0)


def test_super_follows_a_changed_base_method():
    # The guard re-runs super()'s lookup: replacing the base method recompiles.
    class A:
        def f(self, v):
            return v + 1.0

    class B(A):
        def f(self, v):
            return super().f(v) * 2.0

    def call(obj, v):
        return obj.f(v)

    compiled = framejit.compile(call, backend="eager", fullgraph=True)
    b = B()
    assert compiled(b, 1.0) == 4.0
    A.f = lambda self, v: v - 1.0
    assert compiled(b, 1.0) == 0.0


class _Holder:
    def __init__(self, v):
        self.v = v


def test_answered_frames_are_released():
    # A hit with a keyword argument goes through the frame CPython pushed, which framejit answers
    # without running: 3.12+ leave clearing and popping it to the evaluator. Calls from many stack
    # depths also answer frames that opened a new chunk of the thread's frame stack.
    def f(obj, k=1.0):
        return obj.v * k

    compiled = framejit.compile(f, backend="eager", fullgraph=True)
    obj = _Holder(1.5)
    assert compiled(obj, k=2.0) == 3.0
    refs = sys.getrefcount(obj)
    hits = framejit.stats()["cache_hits"]

    def recurse(depth):
        return recurse(depth - 1) + compiled(obj, k=2.0) if depth else 0.0

    for depth in range(0, 400, 3):
        assert recurse(depth) == 3.0 * depth
    assert framejit.stats()["cache_hits"] - hits == sum(range(0, 400, 3))
    assert sys.getrefcount(obj) == refs
