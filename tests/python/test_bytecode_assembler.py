"""frontend/bytecode: disassemble -> (edit) -> assemble on this interpreter (3.11, 3.12 or 3.13).

Round trips over a sample of the standard library must reproduce co_code, co_exceptiontable,
co_linetable and co_stacksize byte for byte; edited functions (instructions inserted at the
start, in the middle, before jump targets and handlers, past EXTENDED_ARG distances) must
return and raise exactly what the originals do. Needs no NumPy: runs on every interpreter.
"""

import dis
import importlib.util
import opcode
import sys
import types

import pytest

from framejit import _C

STDLIB_SAMPLE = [
    "json", "json.decoder", "json.encoder", "json.scanner",
    "email.message", "email.parser", "email.feedparser", "email._header_value_parser", "email.utils",
    "asyncio.base_events", "asyncio.tasks", "asyncio.streams", "asyncio.locks",
    "collections", "dataclasses", "inspect", "re._parser", "re._compiler", "functools", "typing",
    "enum", "argparse", "ast", "textwrap", "contextlib", "string", "pathlib", "difflib",
    "statistics", "fractions", "_pydecimal", "tokenize", "pprint", "shlex", "heapq",
]


def _walk(co):
    yield co
    for c in co.co_consts:
        if isinstance(c, types.CodeType):
            yield from _walk(c)


def _sample_codes():
    out = []
    for name in STDLIB_SAMPLE:
        spec = importlib.util.find_spec(name)
        with open(spec.origin, encoding="utf-8") as f:
            out.extend(_walk(compile(f.read(), spec.origin, "exec")))
    return out


@pytest.fixture(scope="module")
def stdlib_codes():
    return _sample_codes()


def test_cache_sizes_match_the_interpreter():
    ours = _C._bytecode_cache_entries()
    theirs = opcode._inline_cache_entries
    for name, op in opcode.opmap.items():
        if op >= 256:
            continue  # pseudo-instructions never reach co_code
        expected = theirs.get(name, 0) if isinstance(theirs, dict) else theirs[op]
        assert ours[op] == expected, f"{name}: {ours[op]} cache units, CPython says {expected}"


def test_stdlib_round_trip_is_exact(stdlib_codes):
    assert len(stdlib_codes) > 2000
    mismatches = []
    for co in stdlib_codes:
        new = _C._bytecode_roundtrip(co)
        for field in ("co_code", "co_exceptiontable", "co_linetable", "co_stacksize"):
            if getattr(new, field) != getattr(co, field):
                mismatches.append(f"{co.co_filename}:{co.co_firstlineno} {co.co_qualname}: {field}")
        if new.co_consts != co.co_consts or new.co_names != co.co_names:
            mismatches.append(f"{co.co_qualname}: consts/names")
    assert not mismatches, f"{len(mismatches)} of {len(stdlib_codes)} differ:\n" + "\n".join(mismatches[:20])


def _dis_jump_target(ins):
    if hasattr(ins, "jump_target"):  # 3.13
        return ins.jump_target
    return ins.argval if ins.opcode in opcode.hasjrel else None


def test_listing_agrees_with_dis(stdlib_codes):
    # Every 7th code object keeps this quick; each is checked instruction by instruction.
    for co in stdlib_codes[::7]:
        ours = _C._bytecode_listing(co)
        theirs = [i for i in dis.get_instructions(co) if i.opname != "EXTENDED_ARG"]
        assert len(ours) == len(theirs), co.co_qualname
        positions = list(co.co_positions())
        for (op, arg, unit, target, pos, _handler), ins in zip(ours, theirs):
            assert (op, arg) == (ins.opcode, ins.arg or 0), (co.co_qualname, ins)
            assert unit * 2 <= ins.offset < unit * 2 + 8
            expected_target = _dis_jump_target(ins)
            if expected_target is not None:
                assert target * 2 == expected_target, (co.co_qualname, ins)
            else:
                assert target == -1
            assert pos == positions[unit], (co.co_qualname, ins)


def test_handlers_agree_with_dis():
    def f(x):
        try:
            return 1 / x
        except ZeroDivisionError:
            return -1
        finally:
            x = None

    entries = dis._parse_exception_table(f.__code__)
    covered = {}
    for e in entries:
        for off in range(e.start, e.end, 2):
            covered[off] = (e.target // 2, e.depth, e.lasti)
    listing = _C._bytecode_listing(f.__code__)
    assert any(h is not None for *_, h in listing)
    for _op, _arg, unit, _t, _pos, handler in listing:
        assert handler == covered.get(unit * 2), unit


# ---- edits that must not change behaviour ----------------------------------------------------------


def loops(n):
    total = 0
    for i in range(n):
        if i % 3 == 0:
            continue
        j = 0
        while j < i:
            total += j
            j += 2
            if total > 500:
                break
    return total


def exceptions(x):
    log = []
    try:
        try:
            log.append(10 // x)
        except ZeroDivisionError as e:
            log.append(str(e))
            raise ValueError("inner") from e
        finally:
            log.append("finally")
    except ValueError as e:
        log.append(repr(e))
    if x < 0:
        raise KeyError(x)
    return log


class Ctx:
    def __init__(self, log, swallow):
        self.log, self.swallow = log, swallow

    def __enter__(self):
        self.log.append("enter")
        return self

    def __exit__(self, *exc):
        self.log.append(("exit", exc[0].__name__ if exc[0] else None))
        return self.swallow


def with_blocks(x):
    log = []
    with Ctx(log, True):
        log.append(1 / x)
    with Ctx(log, False) as c:
        log.append(c.swallow)
        if x == 2:
            raise RuntimeError("two")
    return log


def comprehensions(n):
    sq = [i * i for i in range(n) if i % 2]
    d = {i: [j for j in range(i)] for i in range(n)}
    s = {i % 3 for i in range(n)}
    g = sum(i for i in range(n))
    return sq, d, sorted(s), g, [x for x in sq if x > n]  # x shadows nothing


def closures(n):
    acc = []

    def add(v):
        acc.append(v + n)
        return len(acc)

    return [add(i) for i in range(n)], acc, (lambda: n * 2)()


def inner_gen(log):
    try:
        v = yield 1
        log.append(v)
        yield 2
    except ValueError as e:
        log.append(("caught", str(e)))
        yield 3
    finally:
        log.append("inner done")


def delegating(log):
    r = yield from inner_gen(log)
    log.append(r)
    yield 4


def run_generators(mode):
    log = []
    g = delegating(log)
    out = [next(g), g.send("sent")]
    if mode == 1:
        out.append(g.throw(ValueError("boom")))
    out.extend(g)
    return out, log


def match_and_calls(v):
    def kw(a, b=2, *args, c=3, **kwargs):
        return (a, b, args, c, sorted(kwargs.items()))

    match v:
        case [a, b]:
            r = kw(a, b, c=v)
        case {"k": k}:
            r = kw(k, *[1, 2], d=4)
        case int() if v > 2:
            r = kw(v, **{"c": 9, "z": 1})
        case _:
            r = None
    return r, f"{v!r:>12}", str(v).upper()


def _long_source(body_lines, name="long_jumps"):
    lines = [f"def {name}(x):", "    y = 0", "    for i in range(x):", "        if i % 2:"]
    lines += [f"            y = y + {k} * i" for k in range(body_lines)]
    lines += ["        else:", "            y -= 1", "    return y"]
    ns = {}
    exec(compile("\n".join(lines), "<long_jumps>", "exec"), ns)
    return ns[name]


long_jumps = _long_source(120)  # ~720 instructions between the test and its target
# ~28 * 8 code units of body: under 256 as compiled, over it once every instruction gets a NOP.
medium_jumps = _long_source(28, "medium_jumps")

CASES = [
    (loops, [(0,), (7,), (40,)]),
    (exceptions, [(2,), (0,), (-1,)]),
    (with_blocks, [(1,), (0,), (2,)]),
    (comprehensions, [(0,), (6,)]),
    (closures, [(4,)]),
    (run_generators, [(0,), (1,)]),
    (match_and_calls, [([1, 2],), ({"k": 5},), (7,), ("s",)]),
    (long_jumps, [(0,), (5,)]),
    (medium_jumps, [(0,), (5,)]),
]


def _outcome(fn, args):
    try:
        return ("ok", fn(*args))
    except Exception as e:  # noqa: BLE001
        return ("raised", type(e), str(e))


def _rewrite_function(fn, transform):
    """fn with transform applied to its code and every nested code object (comprehensions,
    closures, generators): the edit is exercised everywhere."""

    def rewrite(co):
        consts = tuple(rewrite(c) if isinstance(c, types.CodeType) else c for c in co.co_consts)
        return transform(co.replace(co_consts=consts))

    new = types.FunctionType(rewrite(fn.__code__), fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__)
    return new


SENTINEL = object()

EDITS = {
    "roundtrip": lambda co: _C._bytecode_roundtrip(co),
    "nop_every_instruction": lambda co: _C._bytecode_insert_nops(co, 1),
    "nop_every_3rd_labels_moved": lambda co: _C._bytecode_insert_nops(co, 3, move_labels=True),
    "const_pop_every_2nd": lambda co: _C._bytecode_insert_nops(co, 2, SENTINEL),
    "const_pop_every_instruction_labels_moved": lambda co: _C._bytecode_insert_nops(co, 1, 2.5, move_labels=True),
}


@pytest.mark.parametrize("edit", list(EDITS))
@pytest.mark.parametrize("fn,calls", CASES, ids=[c[0].__name__ for c in CASES])
def test_edited_function_behaves_the_same(fn, calls, edit):
    new = _rewrite_function(fn, EDITS[edit])
    if edit != "roundtrip":
        assert len(new.__code__.co_code) > len(fn.__code__.co_code), "nothing was inserted"
    for args in calls:
        assert _outcome(new, args) == _outcome(fn, args), (edit, args)


@pytest.mark.parametrize("edit", ["nop_every_instruction", "const_pop_every_2nd"])
def test_generators_edited_too(edit, monkeypatch):
    # run_generators reaches its generators through module globals: edit those as well, so
    # YIELD_VALUE/RESUME, SEND and gen.throw() delegation run on assembled code.
    mod = sys.modules[__name__]
    expected = [_outcome(run_generators, (m,)) for m in (0, 1)]
    monkeypatch.setattr(mod, "inner_gen", _rewrite_function(inner_gen, EDITS[edit]))
    monkeypatch.setattr(mod, "delegating", _rewrite_function(delegating, EDITS[edit]))
    new = _rewrite_function(run_generators, EDITS[edit])
    assert [_outcome(new, (m,)) for m in (0, 1)] == expected


def test_long_jumps_need_extended_arg():
    assert "EXTENDED_ARG" in [i.opname for i in dis.get_instructions(long_jumps)]
    new = _rewrite_function(medium_jumps, EDITS["nop_every_instruction"])
    ops = [i.opname for i in dis.get_instructions(new)]
    assert "EXTENDED_ARG" not in [i.opname for i in dis.get_instructions(medium_jumps)]
    assert "EXTENDED_ARG" in ops
    for x in (0, 3, 9):
        assert new(x) == medium_jumps(x)
    # And the round trip of the edited code is exact: EXTENDED_ARG folds and unfolds.
    again = _C._bytecode_roundtrip(new.__code__)
    assert again.co_code == new.__code__.co_code
    assert again.co_exceptiontable == new.__code__.co_exceptiontable
    assert again.co_linetable == new.__code__.co_linetable


def test_new_const_is_added_once():
    co = _C._bytecode_insert_nops(exceptions.__code__, 2, SENTINEL)
    assert sum(c is SENTINEL for c in co.co_consts) == 1
    assert co.co_consts[: len(exceptions.__code__.co_consts)] == exceptions.__code__.co_consts


def test_generated_body_returns_value_from_new_const():
    def base(x):
        return x

    value = 1234.25
    assert value not in base.__code__.co_consts
    co = _C._bytecode_return_arg_plus(base.__code__, value)
    fn = types.FunctionType(co, globals())
    assert fn(0.75) == 1235.0
    assert fn(-1234.25) == 0.0
    assert co.co_stacksize == 2


def _raising_line(fn, *args):
    try:
        fn(*args)
    except Exception as e:  # noqa: BLE001
        tb = e.__traceback__
        while tb.tb_next:
            tb = tb.tb_next
        return tb.tb_lineno, tb.tb_lasti >= 0
    raise AssertionError("did not raise")


def test_positions_survive_an_edit():
    new = _C._bytecode_insert_nops(exceptions.__code__, 1)
    lines = {p[0] for p in new.co_positions()} - {None}
    assert lines == {p[0] for p in exceptions.__code__.co_positions()} - {None}
    edited = types.FunctionType(new, globals())
    assert _raising_line(edited, -1) == _raising_line(exceptions, -1)


def with_cells(x, y=2):
    z = x + y

    def inner():
        return z * x  # x: an argument that is also a cell; z: a plain cell

    return inner() + x


def test_insert_local_as_first_argument():
    co = _C._bytecode_insert_local(with_cells.__code__, 0, "extra", as_arg=True)
    assert co.co_varnames[0] == "extra" and co.co_argcount == 3
    g = types.FunctionType(co, globals(), "g", with_cells.__defaults__)
    assert g("ignored", 3) == with_cells(3)
    assert g(None, 3, 5) == with_cells(3, 5)


def test_insert_local_after_the_others():
    n = len(with_cells.__code__.co_varnames)
    co = _C._bytecode_insert_local(with_cells.__code__, n, "spare")
    assert co.co_varnames[-1] == "spare"
    g = types.FunctionType(co, globals(), "g", with_cells.__defaults__)
    assert g(4) == with_cells(4)


def test_insert_local_renumbers_paired_loads():
    # 16 arguments: 3.13 loads a14, a15 with one LOAD_FAST_LOAD_FAST (4-bit indices), which must
    # split once a15 becomes local 16.
    args = ", ".join(f"a{i}" for i in range(16))
    ns = {}
    exec(f"def h({args}):\n    b = a14 - a15\n    return a0 * b + a15", ns)
    h = ns["h"]
    co = _C._bytecode_insert_local(h.__code__, 0, "extra", as_arg=True)
    g = types.FunctionType(co, globals())
    vals = list(range(3, 19))
    assert g(None, *vals) == h(*vals)
    with pytest.raises(ValueError, match="already has a local"):
        _C._bytecode_insert_local(h.__code__, 0, "a3")


# ---- strange input: a clear error, never a crash -----------------------------------------------------


def _victim(x):
    try:
        return x + 1
    except TypeError:
        return None


@pytest.mark.parametrize(
    "field,value",
    [
        ("co_exceptiontable", b"\x7f\x01"),          # entry without a start marker
        ("co_exceptiontable", b"\x80\x01\x7f\x00"),  # target far outside co_code
        ("co_linetable", b"\x01\x02\x03"),           # entry without a header bit
        ("co_linetable", b"\xf8" * 4000),            # more units than co_code has
        ("co_code", b"\x90\x01"),                    # ends with EXTENDED_ARG
        ("co_code", b"\x00\x00" * 3),                # CACHE as an instruction
    ],
    ids=["no-start-marker", "handler-outside", "no-header-bit", "too-many-units", "trailing-extended-arg", "cache-opcode"],
)
def test_malformed_code_is_a_clean_error(field, value):
    try:
        bad = _victim.__code__.replace(**{field: value})
    except (ValueError, TypeError):
        pytest.skip("CPython itself refuses this code object")
    with pytest.raises(ValueError, match="bytecode"):
        _C._bytecode_roundtrip(bad)


def test_not_a_code_object():
    with pytest.raises(ValueError, match="not a code object"):
        _C._bytecode_roundtrip(42)


def test_jump_out_of_range_is_a_clean_error():
    jump = opcode.opmap["JUMP_FORWARD"]
    code = bytes([opcode.opmap["RESUME"], 0, jump, 200, opcode.opmap["RETURN_VALUE"], 0])
    bad = _victim.__code__.replace(co_code=code, co_exceptiontable=b"", co_linetable=b"")
    with pytest.raises(ValueError, match="does not land"):
        _C._bytecode_roundtrip(bad)
