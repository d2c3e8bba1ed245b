"""frontend/bytecode/resume.h: resume functions on this interpreter (3.11, 3.12 or 3.13).

Each function is run split in two at every offset a resume function may start from: a copy of
it stops there (_C._bytecode_snapshot_at: the value stack and cell objects are stored in locals,
then it raises past every handler), and the resume function is called with that stack and those
locals, which is what happens at a graph break. The pair must return, raise and log exactly what
one plain call does. Stacks come out of the real frame: loop iterators, `with` exits, method-call
pieces and NULL slots included. Needs no NumPy: runs on every interpreter.
"""

import sys
import traceback
import types

import pytest

from framejit import _C


class _Stop(Exception):
    pass


def _localsplus(co):
    names = list(co.co_varnames) + [c for c in co.co_cellvars if c not in co.co_varnames]
    return names, set(co.co_cellvars)


def _outcome(call):
    try:
        return ("returned", call())
    except Exception as e:  # noqa: BLE001 - the exception is the outcome compared
        return ("raised", type(e), e.args)


def _snapshot(fn, args, offset, depth):
    """Runs fn up to offset; (stack, null flags, live slots, their values) or None if not reached."""
    snap = _C._bytecode_snapshot_at(fn.__code__, offset, _Stop)
    g = types.FunctionType(snap, fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__)
    g.__kwdefaults__ = fn.__kwdefaults__
    try:
        g(*args)
        return None
    except _Stop as e:
        tb = e.__traceback__
        while tb.tb_next:
            tb = tb.tb_next
        assert tb.tb_frame.f_code is snap
        loc = dict(tb.tb_frame.f_locals)
    except Exception:  # noqa: BLE001 - raised before reaching the offset
        return None
    stack, nulls = [], []
    for i in range(depth):
        name = f"___snap{i}"
        nulls.append(name not in loc)
        if name in loc:
            stack.append(loc[name])
    names, cells = _localsplus(fn.__code__)
    live, values = [], []
    for i, name in enumerate(names):
        if name in cells:
            live.append(i)
            values.append(loc["___cell_" + name])
        elif name in loc:
            live.append(i)
            values.append(loc[name])
    return stack, nulls, live, values


def _resume_fn(fn, offset, nulls, live, **kw):
    code = _C._make_resume(fn.__code__, offset, nulls, live, **kw)
    return types.FunctionType(code, fn.__globals__, fn.__name__, None, fn.__closure__)


def _check_every_offset(fn, make_args, min_points=1):
    """Split fn at every resume point its run reaches; each split run must match a plain run."""
    args = make_args()
    expected = _outcome(lambda: fn(*args))
    expected_args = repr(args)
    checked = 0
    for offset, depth in _C._resume_points(fn.__code__):
        args = make_args()
        state = _snapshot(fn, args, offset, depth)
        if state is None:
            continue
        stack, nulls, live, values = state
        r = _resume_fn(fn, offset, nulls, live)
        got = _outcome(lambda: r(*stack, *values))
        assert got == expected, f"{fn.__name__} resumed at {offset} (stack {nulls}): {got} != {expected}"
        assert repr(args) == expected_args, f"{fn.__name__} at {offset}: side effects differ"
        checked += 1
    assert checked >= min_points, f"{fn.__name__}: only {checked} resume points were reached"
    return checked


# --- the functions -------------------------------------------------------------------------------

def straight(a, b, log):
    c = a * b + 1
    log.append(c)
    d = (c - a) / (b or 1)
    log.append(d)
    return c + d * 2 - len(log)


def loop(n, log):
    total = 0
    for i in range(n):
        if i % 3 == 0:
            continue
        total += i * i
        log.append(total)
        if total > 40:
            break
    else:
        log.append("no break")
    return total


def nested_loops(rows, log):
    acc = []
    for r in rows:
        s = 0
        for v in r:
            if v < 0:
                break
            s += v
        acc.append(s)
        log.append((r, s))
    while acc and acc[-1] == 0:
        acc.pop()
    return acc


def try_except(a, log):
    out = 0
    for x in range(a):
        try:
            log.append(("try", x))
            y = 10 // (x - 2)  # raises after the earlier statements' resume points, caught below
            out += y
        except ZeroDivisionError as e:
            log.append(("caught", str(e)))
            out -= 100
        except (KeyError, ValueError):
            log.append("never")
        else:
            log.append("else")
    return out


def try_finally(a, log):
    try:
        log.append("body")
        if a > 1:
            return a * 2
        try:
            log.append("inner")
            raise ValueError(a)
        finally:
            log.append("inner finally")
    finally:
        log.append("finally")


class Recorder:
    def __init__(self, log, swallow=False):
        self.log = log
        self.swallow = swallow

    def __enter__(self):
        self.log.append("enter")
        return self

    def __exit__(self, et, ev, tb):
        self.log.append(("exit", et.__name__ if et else None))
        return self.swallow

    def add(self, a, b):
        self.log.append(("add", a, b))
        return a + b

    def __repr__(self):
        return "Recorder"


def with_block(n, log):
    with Recorder(log) as r:
        t = r.add(n, 1)
        log.append(t)
    with Recorder(log, swallow=True):
        log.append("in second")
        raise KeyError(n)
    with Recorder(log) as r2, Recorder(log):
        log.append(r2.add(t, 2))
    return t


def with_raises(n, log):
    with Recorder(log):
        log.append(n)
        raise IndexError(n)  # the exit sees it, does not swallow it: the caller gets it


def method_calls(xs, log):
    r = Recorder(log)
    # Calls whose callee and arguments are being pushed: NULL / method / self slots on the stack.
    a = r.add(len(xs), r.add(xs[0], xs[-1]))
    b = str(a).join(["<", ">"]).upper()
    log.append(b)
    return r.add(a, max(xs, key=lambda v: -v))


def closures(n, log):
    count = 0
    scale = n

    def bump(v):
        nonlocal count
        count += v * scale
        return count

    for i in range(n):
        bump(i)
        log.append(count)
    scale = -1
    bump(2)
    return count, bump(0)


def comprehensions(xs, log):
    ys = [x * 2 for x in xs if x % 2]
    log.append(ys)
    d = {x: [y for y in range(x)] for x in xs}
    return ys, d, sum(len(v) for v in d.values())


def kwargs_and_defaults(a, b=3, *rest, c=4, **kw):
    out = [a, b, rest, c, sorted(kw.items())]
    out.append(max(a, b, key=lambda v: -v))
    out.append(dict(x=a, y=b))
    return out


_CASES = [
    (straight, lambda: (3, 4, [])),
    (straight, lambda: (3, 0, [])),
    (loop, lambda: (9, [])),
    (loop, lambda: (4, [])),
    (nested_loops, lambda: ([[1, 2, -1, 3], [4, 5], [], [-2]], [])),
    (try_except, lambda: (5, [])),
    (try_finally, lambda: (1, [])),
    (try_finally, lambda: (3, [])),
    (with_block, lambda: (5, [])),
    (with_raises, lambda: (5, [])),
    (method_calls, lambda: ([3, 1, 4, 1, 5], [])),
    (closures, lambda: (4, [])),
    (comprehensions, lambda: ([1, 2, 3, 4], [])),
    (kwargs_and_defaults, lambda: (1, 2, 3, 4)),
]


@pytest.mark.parametrize("fn,make_args", _CASES, ids=lambda v: getattr(v, "__name__", ""))
def test_every_resume_point_continues_the_function(fn, make_args):
    _check_every_offset(fn, make_args, min_points=5)


def test_method_call_in_progress_has_null_or_self_slots():
    # Somewhere inside `r.add(len(xs), r.add(...))` the stack holds the call's layout pieces; on
    # every version at least one reached point has a NULL slot (a plain function call's NULL).
    seen_null = seen_deep = False
    for offset, depth in _C._resume_points(method_calls.__code__):
        state = _snapshot(method_calls, ([3, 1, 4], []), offset, depth)
        if state is None:
            continue
        seen_null |= any(state[1])
        seen_deep |= depth >= 4
    assert seen_null and seen_deep


def test_hand_built_stack_inside_an_expression():
    # `return a + f(b)`: resume right after `a` was pushed, with the stack we know is there.
    def g(a, b):
        return a + abs(b)

    points = dict(_C._resume_points(g.__code__))
    names, _ = _localsplus(g.__code__)
    # The first point with exactly `a` on the stack: the code after LOAD_FAST a.
    offset = min(o for o, d in points.items() if d == 1)
    r = _resume_fn(g, offset, [False], [names.index("b")])
    assert r(10, -5) == 15  # a=10 came in on the stack, b from the live locals
    assert r(100, 2) == 102


def test_exception_after_the_resume_point_is_caught_by_the_enclosing_handler():
    def f(x, log):
        try:
            log.append("a")
            log.append("b")
            return 1 / x
        except ZeroDivisionError:
            log.append("handled")
            return "h"

    names, _ = _localsplus(f.__code__)
    live = [names.index("x"), names.index("log")]
    reached = 0
    for offset, depth in _C._resume_points(f.__code__):
        if depth:
            continue
        r = _resume_fn(f, offset, [], live)
        log = []
        out = r(0, log)
        # Every depth-0 point up to the division lies inside the try: the handler runs.
        if "handled" in log:
            assert out == "h"
            reached += 1
    assert reached >= 3


def test_tracebacks_name_the_original_lines():
    def f(x):
        y = x + 1
        z = y * 2
        return z / (x - x)  # line 3 of the body

    bad_line = f.__code__.co_firstlineno + 3
    points = _C._resume_points(f.__code__)
    names, _ = _localsplus(f.__code__)
    offset = min(o for o, line in __import__("dis").findlinestarts(f.__code__) if line == bad_line)
    assert (offset, 0) in points
    r = _resume_fn(f, offset, [], [names.index("x"), names.index("z")])
    with pytest.raises(ZeroDivisionError) as info:
        r(3, 8)
    frame_lines = [fs.lineno for fs in traceback.extract_tb(info.value.__traceback__)]
    assert frame_lines[-1] == bad_line
    assert r.__code__.co_name == "f"
    assert "resume at" in r.__code__.co_qualname


def test_cells_shared_with_closures_made_before_the_break():
    def f(n):
        count = 0

        def bump():
            nonlocal count
            count += 1

        bump()
        bump()  # resume here: bump already holds the frame's cell
        count += n
        bump()
        return count

    names, _ = _localsplus(f.__code__)
    bump_slot = names.index("bump")
    for offset in [o for o, d in _C._resume_points(f.__code__) if d == 0]:
        state = _snapshot(f, (10,), offset, 0)
        if state and bump_slot in state[2]:
            cell = state[3][state[2].index(names.index("count"))]
            if cell.cell_contents == 1:  # after the first bump()
                break
    stack, nulls, live, values = state
    cell = values[live.index(names.index("count"))]
    assert isinstance(cell, types.CellType) and cell.cell_contents == 1
    r = _resume_fn(f, offset, nulls, live)
    assert r(*stack, *values) == f(10)
    assert cell.cell_contents == f(10)  # the closure and the resume frame wrote the same cell


def test_cells_as_values_fill_a_fresh_cell():
    def f(n):
        count = n
        count += 1  # resume here, count passed by value

        def get():
            return count

        count *= 3
        return get()

    names, _ = _localsplus(f.__code__)
    offset = [o for o, d in _C._resume_points(f.__code__) if d == 0][1]
    r = _resume_fn(f, offset, [], [names.index("count")], cells_as_values=True)
    assert r(5) == 18


def test_free_variables_come_from_the_closure():
    k = 7

    def f(x):
        y = x * k
        return y + k

    names, _ = _localsplus(f.__code__)
    offset = [o for o, d in _C._resume_points(f.__code__) if d == 0][1]
    r = _resume_fn(f, offset, [], [names.index("y")])
    assert r(5) == 12
    with pytest.raises(ValueError, match="free variable"):
        _C._make_resume(f.__code__, offset, [], [len(names)])  # k's slot


def test_missing_live_local_raises_instead_of_crashing():
    def f(a, b):
        c = a + b
        return c * a

    names, _ = _localsplus(f.__code__)
    offset = [o for o, d in _C._resume_points(f.__code__) if d == 0][1]
    r = _resume_fn(f, offset, [], [names.index("c")])  # a left out, though it is read
    with pytest.raises(UnboundLocalError):
        r(5)


def test_argument_names_never_clash():
    def f(___stack0, ___live0):
        x = ___stack0 + 1
        return x * ___live0

    names, _ = _localsplus(f.__code__)
    offset = [o for o, d in _C._resume_points(f.__code__) if d == 1][0]  # `___stack0` pushed
    r = _resume_fn(f, offset, [False], [names.index("___live0")])
    assert r(4, 3) == 15


def test_errors():
    def gen(n):
        yield n

    def f(x):
        for i in range(x):
            x += i
        return x

    with pytest.raises(ValueError, match="generators"):
        _C._make_resume(gen.__code__, 2, [], [])
    with pytest.raises(ValueError, match="prologue"):
        _C._make_resume(f.__code__, 0, [], [])
    with pytest.raises(ValueError, match="not the start of an instruction"):
        _C._make_resume(f.__code__, 3, [], [])
    with pytest.raises(ValueError, match="not the start of an instruction"):
        _C._make_resume(f.__code__, 100000, [], [])
    offset, depth = [(o, d) for o, d in _C._resume_points(f.__code__) if d == 1][0]
    with pytest.raises(ValueError, match="holds 1 values, 0 given"):
        _C._make_resume(f.__code__, offset, [], [])
    with pytest.raises(ValueError, match="out of range"):
        _C._make_resume(f.__code__, offset, [False], [99])
    with pytest.raises(ValueError, match="given twice"):
        _C._make_resume(f.__code__, offset, [False], [0, 0])


def test_exception_cleanup_code_is_not_a_resume_point():
    def f(log):
        with Recorder(log):
            log.append(1)
        return log

    points = {o for o, _ in _C._resume_points(f.__code__)}
    import dis

    offsets = [i.offset for i in dis.get_instructions(f.__code__)]
    cleanup = [i.offset for i in dis.get_instructions(f.__code__) if i.opname == "WITH_EXCEPT_START"]
    assert cleanup and not (set(cleanup) & points)
    assert len(points) < len(offsets)


def test_cache_returns_the_same_code():
    def f(a):
        b = a + 1
        return b

    names, _ = _localsplus(f.__code__)
    offset = [o for o, d in _C._resume_points(f.__code__) if d == 0][1]
    n = _C._resume_cache_size()
    c1 = _C._make_resume(f.__code__, offset, [], [names.index("b")])
    c2 = _C._make_resume(f.__code__, offset, [], [names.index("b")])
    c3 = _C._make_resume(f.__code__, offset, [], [names.index("a"), names.index("b")])
    assert c1 is c2 and c1 is not c3
    assert _C._resume_cache_size() == n + 2
    _C._resume_cache_clear()
    assert _C._resume_cache_size() == 0
    assert _C._make_resume(f.__code__, offset, [], [names.index("b")]) is not c1


def test_resume_points_cover_the_function():
    # Nearly every instruction of ordinary code may be resumed at; the refused ones are the
    # prologue, instruction pairs and exception cleanup.
    n_instr = sum(1 for _ in __import__("dis").get_instructions(loop.__code__))
    assert len(_C._resume_points(loop.__code__)) >= n_instr * 3 // 4
    assert sys.version_info >= (3, 11)
