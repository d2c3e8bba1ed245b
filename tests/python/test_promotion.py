"""Native dtype rules (frontend/ops/numpy/promotion.cpp) against the installed NumPy, case by case.

Every op x every operand pair (tensors of each dtype, Python bool/int/float) is run through NumPy
and through framejit._C._promotion_result; the answers must agree:
  ok          NumPy returns that dtype (and, for ufuncs, ufunc.resolve_dtypes gives the same loop)
  type_error  NumPy raises TypeError (UFuncTypeError included)
  overflow    NumPy raises OverflowError
  unsupported NumPy answers in float16/complex, or the case is one framejit refuses on purpose
              (out-of-range Python ints in comparisons/clip/where, mean/var/std with an int dtype=)

The rules are NumPy 2's (NEP 50, floor/ceil/trunc of ints as in NumPy >= 2.1). Cases with Python
scalars, and the few array-only cases NumPy 2 changed, are compared only on such a NumPy; the rest
holds for NumPy 1.24 too.

Script mode, for a machine with NumPy 2 (prints every mismatch, exit status 1 if any):
    PYTHONPATH=build/python python tests/python/test_promotion.py --dump
On NumPy 1.24-1.26, `--dump --weak-1x` also compares the Python-scalar cases against NumPy's
preview of NEP 50 (np._set_promotion_state("weak")), which is close to NumPy 2 but not equal.
"""

import itertools
import operator
import sys
import warnings

try:
    import numpy as np
except ImportError:  # the C++ test (tests/cpp/test_promotion.cpp) still covers the rules
    np = None

if __name__ != "__main__":
    import pytest

    if np is None:
        pytest.skip("NumPy is not installed", allow_module_level=True)

from framejit import _C

NUMPY_VERSION = tuple(int(p) for p in np.__version__.split(".")[:2]) if np is not None else (0, 0)
NEP50 = NUMPY_VERSION >= (2, 0)
NUMPY_2_1 = NUMPY_VERSION >= (2, 1)
WEAK_1X = False  # script mode --weak-1x: NumPy 1.x's NEP 50 preview stands in for NumPy 2

DTYPES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
          "float32", "float64", "float16", "complex64"]
SCALARS = ["py_bool", "py_int", "py_float"]  # Python scalars, as _promotion_result spells them
OPERANDS = [("t", d) for d in DTYPES] + [("s", s) for s in SCALARS]
UNCOMPUTABLE = {"float16", "complex64", "complex128"}

BINARY = ["add", "subtract", "multiply", "true_divide", "floor_divide", "remainder", "fmod", "power",
          "maximum", "minimum", "fmax", "fmin", "arctan2", "hypot", "copysign", "equal", "not_equal",
          "less", "less_equal", "greater", "greater_equal", "logical_and", "logical_or",
          "logical_xor", "bitwise_and", "bitwise_or", "bitwise_xor", "left_shift", "right_shift"]
UNARY = ["negative", "positive", "absolute", "fabs", "sign", "square", "reciprocal", "sqrt", "cbrt",
         "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sin", "cos", "tan", "arcsin",
         "arccos", "arctan", "sinh", "cosh", "tanh", "arcsinh", "arccosh", "arctanh", "floor",
         "ceil", "trunc", "rint", "deg2rad", "rad2deg", "isnan", "isinf", "isfinite", "signbit",
         "logical_not", "invert"]
COMPARISONS = ["equal", "not_equal", "less", "less_equal", "greater", "greater_equal"]
# Other names for the same ufuncs (some exist on NumPy 2 only); radians/degrees are ufuncs of their
# own with deg2rad/rad2deg's loops.
DISTINCT_TWINS = {"radians", "degrees"}
ALIASES = {"divide": "true_divide", "mod": "remainder", "abs": "absolute", "pow": "power",
           "bitwise_not": "invert", "bitwise_invert": "invert", "bitwise_left_shift": "left_shift",
           "bitwise_right_shift": "right_shift", "acos": "arccos", "asin": "arcsin",
           "atan": "arctan", "atan2": "arctan2", "acosh": "arccosh", "asinh": "arcsinh",
           "atanh": "arctanh", "radians": "deg2rad", "degrees": "rad2deg"}
REDUCTIONS = ["sum", "prod", "mean", "var", "std", "max", "min", "amax", "amin", "argmax", "argmin",
              "any", "all"]
OPERATORS = ["add", "sub", "mul", "truediv", "floordiv", "mod", "pow", "lt", "le", "eq", "ne", "gt",
             "ge", "and_", "or_", "xor", "lshift", "rshift"]
UNARY_OPERATORS = ["neg", "pos", "invert", "abs"]
INPLACE = ["iadd", "isub", "imul", "itruediv", "ifloordiv", "imod", "ipow", "iand", "ior", "ixor",
           "ilshift", "irshift"]
# Python ints around every integer dtype's bounds, for NumPy 2's OverflowError.
INT_VALUES = [0, 1, -1, 127, 128, -128, -129, 255, 256, 32767, 32768, -32769, 65535, 65536,
              2**31 - 1, 2**31, -(2**31) - 1, 2**32 - 1, 2**32, 2**63 - 1, 2**63, -(2**63),
              -(2**63) - 1, 2**64 - 1, 2**64, -(2**64) - 5, 10**30]


# ---------------------------------------------------------------------------------------------
# NumPy's answers

def _value(operand):
    kind, what = operand
    if kind == "t":
        return np.ones((2, 2), dtype=what)
    if kind == "v":  # a Python int with this value
        return what
    return {"py_bool": True, "py_int": 3, "py_float": 2.5}[what]


def _spec(operand):
    kind, what = operand
    return ("py_int", what) if kind == "v" else what


def _numpy(fn):
    """('ok', dtype name) or ('type_error'|'overflow'|'other', exception text)."""
    try:
        with warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            r = fn()
    except TypeError as e:
        return ("type_error", f"{type(e).__name__}: {e}")
    except OverflowError as e:
        return ("overflow", f"{type(e).__name__}: {e}")
    except Exception as e:  # ValueError for int ** negative int and the like: not a dtype answer
        return ("other", f"{type(e).__name__}: {e}")
    return ("ok", np.asarray(r).dtype.name if not hasattr(r, "dtype") else r.dtype.name)


def _ufunc(op):
    if op == "clip":  # the ufunc behind np.clip (np.clip itself is a Python function)
        try:
            from numpy._core import umath
        except ImportError:
            from numpy.core import umath
        return umath.clip
    return getattr(np, op, None)


def _numpy_loop(op, operands):
    """The loop dtypes NumPy picks (ufunc.resolve_dtypes), or None where it cannot say."""
    uf = _ufunc(op)
    if uf is None or not hasattr(uf, "resolve_dtypes"):
        return None
    dts = []
    for kind, what in operands:
        if kind == "t":
            dts.append(np.dtype(what))
        elif what == "py_bool":
            dts.append(np.dtype(bool))  # a Python bool is not weak
        else:
            dts.append({"py_int": int, "py_float": float}[what] if kind == "s" else int)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res = uf.resolve_dtypes(tuple(dts) + (None,) * uf.nout)
    except Exception:
        return None
    return [d.name for d in res[:uf.nin]]


# ---------------------------------------------------------------------------------------------
# comparison

class Tally:
    def __init__(self):
        self.checked = 0
        self.skipped = 0
        self.refused = 0  # unsupported on purpose where NumPy answers (value-dependent cases)
        self.uncomputable = 0  # unsupported because float16/complex is involved
        self.mismatches = []

    def add(self, what, mine, theirs, loop_theirs=None, refuse_ok=False):
        status, dtype, loop_mine, why = mine
        if theirs[0] == "other":  # a ValueError on the value (int ** -1): not a dtype answer
            self.skipped += 1
            return
        self.checked += 1
        bad = None
        if status == "ok":
            if theirs[0] != "ok" or theirs[1] != dtype:
                bad = f"framejit {dtype}, NumPy {theirs}"
            elif loop_theirs is not None and loop_theirs != loop_mine:
                bad = f"framejit loop {loop_mine}, NumPy loop {loop_theirs}"
        elif status == "unsupported":
            if (theirs[0] == "ok" and theirs[1] in UNCOMPUTABLE) or refuse_ok == "uncomputable":
                self.uncomputable += 1
            elif refuse_ok:
                self.refused += 1
            else:
                bad = f"framejit unsupported ({why}), NumPy {theirs}"
        elif theirs[0] != status:
            bad = f"framejit {status} ({why}), NumPy {theirs}"
        if bad:
            self.mismatches.append(f"{what}: {bad}")

    def report(self, limit=40):
        lines = self.mismatches[:limit]
        if len(self.mismatches) > limit:
            lines.append(f"... {len(self.mismatches) - limit} more")
        return "\n".join(lines)


def _has_scalar(operands):
    return any(kind != "t" for kind, _ in operands)


def _involves(operands, names):
    return any(kind == "t" and what in names for kind, what in operands)


def _needs_numpy_2_1(op, operands):
    # NumPy 2.1 gave floor/ceil/trunc integer and bool loops (2.0 and 1.x computed in floats).
    return op in ("floor", "ceil", "trunc") and any(
        kind != "t" or what not in ("float16", "float32", "float64") for kind, what in operands)


def _comparable(op, operands):
    """Whether the installed NumPy speaks for this case."""
    if _has_scalar(operands) and not NEP50:
        return False
    if _needs_numpy_2_1(op, operands) and not NUMPY_2_1:
        return False
    if WEAK_1X and op in ("where", "clip") and _has_scalar(operands):
        # 1.x's preview left np.where's scalars strong, and promoted several dtypes with Python
        # scalars in an order-dependent way (np.result_type(f32, i8, 2.5) is float64 there).
        return False
    if op == "positive" and operands[0] == ("t", "bool") and NUMPY_VERSION < (2, 0):
        return False  # +bool_array was a deprecated copy before NumPy 2 (TypeError since)
    return True


def _check_elementwise(tally, op, operands, call=None, loop_check=True):
    if not _comparable(op, operands):
        tally.skipped += 1
        return
    mine = _C._promotion_result("elementwise", op, [_spec(o) for o in operands])
    if call is None:
        fn = _ufunc(op)
        call = lambda: fn(*[_value(o) for o in operands])  # noqa: E731
    theirs = _numpy(call)
    loop = None
    # Logical ops: framejit reads inputs as truth values whatever loop NumPy picks. signbit of ints
    # runs in NumPy's float16 loop; framejit reads the sign off the integer. where is not a ufunc.
    # Comparisons of signed ints with uint64 got an exact loop in NumPy 1.25 (float64 before).
    # Comparisons of two Python ints run in NumPy 2.5's object loop (exact for unbounded ints);
    # framejit compares them as the int64 values its guards admit, with the same bool result.
    if (loop_check and mine[0] == "ok" and theirs[0] == "ok" and op not in ("where", "signbit")
            and not op.startswith("logical_")
            and not (op in COMPARISONS and NUMPY_VERSION < (1, 25))
            and not (op in COMPARISONS and all(o == ("s", "py_int") for o in operands))):
        loop = _numpy_loop(op, operands)
    refuse_ok = ("uncomputable" if _involves(operands, UNCOMPUTABLE)
                 else "value" if any(kind == "v" for kind, _ in operands) else None)
    what = f"{op}({', '.join(_spec(o) if isinstance(_spec(o), str) else repr(_spec(o)) for o in operands)})"
    tally.add(what, mine, theirs, loop, refuse_ok)


# ---------------------------------------------------------------------------------------------
# the suites (each returns a Tally)

def suite_elementwise():
    t = Tally()
    for op in BINARY:
        for a, b in itertools.product(OPERANDS, OPERANDS):
            _check_elementwise(t, op, [a, b])
    for op in UNARY:
        for a in OPERANDS:
            _check_elementwise(t, op, [a])
    return t


def suite_ternary():
    t = Tally()
    for ops in itertools.product(OPERANDS, OPERANDS, OPERANDS):
        if ops[0][0] != "t":
            continue  # clip is a method of the array in framejit's use
        _check_elementwise(t, "clip", list(ops), call=lambda o=ops: np.clip(*[_value(x) for x in o]))
    conds = [("t", "bool"), ("t", "int8"), ("t", "float32"), ("t", "uint64"), ("s", "py_bool"),
             ("s", "py_int"), ("s", "py_float")]
    for c, x, y in itertools.product(conds, OPERANDS, OPERANDS):
        _check_elementwise(t, "where", [c, x, y],
                           call=lambda o=(c, x, y): np.where(*[_value(v) for v in o]))
    return t


def suite_values():
    """Python ints of every magnitude against every tensor dtype: NumPy 2's OverflowError."""
    t = Tally()
    tensors = [("t", d) for d in DTYPES]
    for v in INT_VALUES:
        val = ("v", v)
        for op in BINARY:
            for a in tensors:
                _check_elementwise(t, op, [a, val])
                _check_elementwise(t, op, [val, a])
        for a in tensors:
            _check_elementwise(t, "clip", [a, val, ("s", "py_int")],
                               call=lambda a=a: np.clip(_value(a), v, 3))
            _check_elementwise(t, "clip", [a, ("t", "int8"), val],
                               call=lambda a=a: np.clip(_value(a), _value(("t", "int8")), v))
            _check_elementwise(t, "where", [("t", "bool"), a, val],
                               call=lambda a=a: np.where(_value(("t", "bool")), _value(a), v))
    return t


def suite_reductions():
    t = Tally()
    for op, dt, kw in itertools.product(REDUCTIONS, DTYPES, [None] + DTYPES):
        mine = _C._promotion_result("reduction", op, [dt], kw)
        fn = getattr(np, op)
        kwargs = {} if kw is None else {"dtype": kw}
        refuse_ok = ("uncomputable" if dt in UNCOMPUTABLE or kw in UNCOMPUTABLE
                     else "int dtype=" if op in ("mean", "var", "std") and kw is not None else None)
        for axis in (None, 0):
            theirs = _numpy(lambda: fn(_value(("t", dt)), axis=axis, **kwargs))
            t.add(f"{op}({dt}, axis={axis}, dtype={kw})", mine, theirs, None, refuse_ok)
    return t


def suite_matmul():
    t = Tally()
    for a, b in itertools.product(DTYPES, DTYPES):
        mine = _C._promotion_result("matmul", "matmul", [a, b])
        refuse_ok = "uncomputable" if a in UNCOMPUTABLE or b in UNCOMPUTABLE else None
        for name, fn in (("matmul", np.matmul), ("dot", np.dot), ("@", operator.matmul)):
            theirs = _numpy(lambda: fn(_value(("t", a)), _value(("t", b))))
            t.add(f"{name}({a}, {b})", mine, theirs, None, refuse_ok)
    return t


def suite_operators():
    """Python operators: the ufunc named by _ufunc_for_operator, in-place forms included."""
    t = Tally()
    for name in OPERATORS + UNARY_OPERATORS:
        uf = _C._ufunc_for_operator(name)
        arity = 1 if name in UNARY_OPERATORS else 2
        for operands in itertools.product(OPERANDS, repeat=arity):
            if operands[0][0] != "t" or not _comparable(uf, operands):
                continue
            opfn = getattr(operator, name)
            _check_elementwise(t, uf, list(operands),
                               call=lambda o=operands, f=opfn: f(*[_value(x) for x in o]),
                               loop_check=False)
    for name in INPLACE:
        uf = _C._ufunc_for_operator(name)
        for a, b in itertools.product(OPERANDS, OPERANDS):
            if a[0] != "t" or not _comparable(uf, [a, b]):
                t.skipped += 1
                continue
            mine = _C._promotion_result("inplace", uf, [_spec(a), _spec(b)])

            def call(a=a, b=b, f=getattr(operator, name)):
                x = _value(a)
                r = f(x, _value(b))
                assert r is x
                return r

            refuse_ok = "uncomputable" if _involves([a, b], UNCOMPUTABLE) else None
            t.add(f"{name}({a[1]}, {b[1]})", mine, _numpy(call), None, refuse_ok)
    if _C._ufunc_for_operator("getitem") is not None:
        t.mismatches.append("getitem: not an array operator, yet mapped")
    return t


def suite_aliases():
    t = Tally()
    for alias, canonical in ALIASES.items():
        t.checked += 1
        if (alias not in DISTINCT_TWINS and hasattr(np, alias)
                and getattr(np, alias) is not getattr(np, canonical)):
            t.mismatches.append(f"np.{alias} is not np.{canonical}")
        for a in [("t", "int8"), ("t", "float32"), ("t", "bool")]:
            nin = 2 if canonical in BINARY else 1
            specs = [_spec(a)] * nin
            x = _C._promotion_result("elementwise", alias, specs)
            y = _C._promotion_result("elementwise", canonical, specs)
            if x != y:
                t.mismatches.append(f"{alias} answers {x}, {canonical} answers {y}")
    return t


SUITES = {
    "elementwise": suite_elementwise,
    "ternary": suite_ternary,
    "values": suite_values,
    "reductions": suite_reductions,
    "matmul": suite_matmul,
    "operators": suite_operators,
    "aliases": suite_aliases,
}


# ---------------------------------------------------------------------------------------------
# pytest

if __name__ != "__main__":

    @pytest.mark.parametrize("suite", list(SUITES))
    def test_matches_numpy(suite):
        if suite == "values" and not NEP50:
            pytest.skip("Python int range checks are NumPy 2 behaviour")
        t = SUITES[suite]()
        assert not t.mismatches, f"{len(t.mismatches)} of {t.checked} differ:\n{t.report()}"
        assert t.checked > 0

    def test_known_answers():
        """Facts from NEP 50 and NumPy's loop tables, spelled out (independent of the installed NumPy)."""
        r = _C._promotion_result
        assert r("elementwise", "add", ["int8", "py_int"])[:2] == ("ok", "int8")
        assert r("elementwise", "add", ["bool", "py_int"])[:2] == ("ok", "int64")
        assert r("elementwise", "add", ["int8", "py_float"])[:2] == ("ok", "float64")
        assert r("elementwise", "add", ["float32", "py_float"])[:2] == ("ok", "float32")
        assert r("elementwise", "add", ["float32", "py_int"])[:2] == ("ok", "float32")
        assert r("elementwise", "add", ["int8", ("py_int", 1000)])[0] == "overflow"
        assert r("elementwise", "add", ["uint8", ("py_int", -1)])[0] == "overflow"
        assert r("elementwise", "add", ["uint64", ("py_int", 2**64 - 1)])[:2] == ("ok", "uint64")
        assert r("elementwise", "less", ["int8", ("py_int", 1000)])[0] == "unsupported"
        assert r("elementwise", "true_divide", ["int8", "int8"])[:2] == ("ok", "float64")
        assert r("elementwise", "exp", ["int8"])[0] == "unsupported"  # float16 in NumPy
        assert r("elementwise", "exp", ["int16"])[:2] == ("ok", "float32")
        assert r("elementwise", "floor", ["int8"])[:2] == ("ok", "int8")
        assert r("elementwise", "negative", ["bool"])[0] == "type_error"
        assert r("elementwise", "subtract", ["bool", "bool"])[0] == "type_error"
        assert r("elementwise", "bitwise_and", ["float32", "int8"])[0] == "type_error"
        assert r("elementwise", "power", ["bool", "bool"])[:2] == ("ok", "int8")
        assert r("reduction", "sum", ["uint8"])[:2] == ("ok", "uint64")
        assert r("reduction", "mean", ["float32"])[:2] == ("ok", "float32")
        assert r("matmul", "matmul", ["bool", "bool"])[:2] == ("ok", "bool")
        assert _C._ufunc_for_operator("and_") == "bitwise_and"
        assert _C._ufunc_for_operator("itruediv") == "true_divide"


# ---------------------------------------------------------------------------------------------
# script

def main(argv):
    global NEP50, WEAK_1X
    if np is None:
        print("NumPy is not installed: nothing to compare with")
        return 0
    if "--dump" not in argv:
        print(__doc__)
        return 2
    if "--weak-1x" in argv and not NEP50 and hasattr(np, "_set_promotion_state"):
        # NumPy 1.24-1.26's preview of NEP 50: close to NumPy 2, not equal to it (no exact
        # comparisons with out-of-range Python ints, floor of ints still float, + on bool arrays).
        np._set_promotion_state("weak")
        NEP50 = WEAK_1X = True
    print(f"NumPy {np.__version__} (NEP 50 cases {'compared' if NEP50 else 'skipped'})")
    total = 0
    for name, suite in SUITES.items():
        if name == "values" and not NEP50:
            print(f"{name}: skipped (NumPy 2 behaviour)")
            continue
        t = suite()
        total += len(t.mismatches)
        print(f"{name}: {t.checked} compared ({t.uncomputable} float16/complex, {t.refused} "
              f"refused on purpose), {t.skipped} skipped, {len(t.mismatches)} mismatches")
        for line in t.mismatches:
            print("  " + line)
    return 1 if total else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
