#!/usr/bin/env python3
"""Differential fuzzer: random NumPy functions, run by CPython and by framejit, compared.

    PYTHONPATH=build/python /usr/bin/python3 tests/fuzz/run.py --seed 1 --count 2000
    ... --backend eager            # the reference interpreter instead of the JIT
    ... --time-budget 30           # stop generating after 30 s
    ... --replay 17                # only program 17 of the seed (what a failure report names)
    ... --device cuda              # the compiled side on framejit.Tensors on the GPU (or cpu)
    ... --device cuda --mode reduce-overhead   # the same, each run replayed as a CUDA graph

How a program is made
---------------------
A program is a list of statements in SSA form (`v3 = np.exp(v1)`), plus helper functions, a
shape-dependent `if`, and loops over constant ranges. The generator keeps the *concrete values*
of every variable for the first input set: a candidate statement is executed with NumPy right
away and kept only if it runs, so shapes and dtypes are always known exactly (NumPy is the
shape/dtype checker; nothing is re-implemented). A few candidates that raise are kept on purpose
as the last statement: then the compiled function must raise the same exception type.

Every program runs on three calls: the input set A (cold), A again (cache hit), and B, which has
the same dtypes and layouts but other sizes for the symbolic dimensions (and other values), to
exercise symbolic shapes, guards and recompiles.

Writes, aliases and graph breaks (Note [Writes and aliases])
-----------------------------------------------------------
Statements also write into arrays: `x[basic index] = value` on inputs, made arrays and views
(ints also negative, slices with steps also negative, Ellipsis, None), in-place operators
(`x += y`, `x[1:3] *= 2`), and a basic-index view made and written through (or its base written
and the view read later) in one statement. Some arguments alias: the same array passed twice,
or an array and a view of it. Candidates run with NumPy on the real (aliasing) inputs, so every
view sees every write; a candidate that fails half-way has its writes undone. Calls of module-
level helpers framejit does not capture (`_s_print`, `_s_float`, `_s_bump`: they print to an
io.StringIO) sit between array statements, in loops and in `if`s, to force graph breaks with
resume functions; `_s_bump` writes into its argument from CPython. After each of the three
calls the *arguments* are compared too (CPython's against the compiled function's), also when
both raised: whatever CPython wrote before raising must be there.

For the tolerance, variables that may share memory form classes (a view joins its operand's,
aliasing arguments start in one); a write makes the whole class as inexact as the value written.
Int and bool targets only take exact values, constants within the target's range.

Devices (--device)
------------------
By default both sides take NumPy arrays. With `--device cpu` or `--device cuda` the compiled
function takes framejit.Tensors on that device instead (made from the same arrays; an aliasing
argument is the same view of its base's Tensor) and its results and arguments come back as NumPy
values for the comparison. A program the device does not run yet (NotImplementedError, a
NumPy function the Tensor protocols decline, or what a device Tensor refuses to do in host memory
such as numpy()) is counted as unsupported, not as a failure: the summary says how many programs
each device ran. The reference stays CPython with NumPy arrays; a compiled result that differs
from it but matches CPython running the program on CPU framejit.Tensors is framejit.Tensor's own
semantics (NEP 50 dtypes, 0-d Tensors where NumPy 1.24 has scalars), counted apart and not a
failure (Note [Tensor semantics in the fuzzer]).

Tolerance policy (Note [Exactness])
-----------------------------------
Each variable carries an *inexact* flag. Ops that round once correctly in IEEE arithmetic
(+ - * / sqrt abs neg, max/min, where, comparisons, casts, // and %, int arithmetic) keep the
flag of their operands; transcendental functions, float reductions (order of summation), float
matmul and float ** set it. Then:

* ints and bools are compared exactly (values, dtype, shape, Python type);
* floats whose flag is clear are compared exactly (NaN == NaN, -0.0 == 0.0);
* floats whose flag is set are compared with |a - e| <= rtol*|e| + atol, rtol = 64 eps of the
  result dtype and atol = eps * scale * (32 + 4 sqrt(n)) (32 + n if the program has a product,
  whose rounding errors add up linearly), where `scale` is the largest finite magnitude of any
  intermediate value of the program on that input (measured by running an instrumented copy of
  the program), n the largest input size, and eps the epsilon of the coarsest float dtype any
  value of the program had (an inexact float32 value cast to float64 still carries float32's
  error). This is relative to the magnitudes the computation went through, so cancellation
  (exp(a) - exp(b)) is covered;
* discontinuous ops (comparisons, //, %, argmax/argmin, casts to int or bool, int(), helper
  calls) only take exact operands, so a last-ulp difference can never flip a branch of the
  result. The grammar never compares transcendental results;
* so do ill-conditioned ones, where a value that cancelled to about 0 would blow a small error
  up: divisors, x ** -1 and x ** 0.5, sin and cos (large arguments); log and sqrt of inexact
  values are generated as log(|x| + 1) and sqrt(|x|).
"""

import argparse
import math
import os
import random
import sys
import time
import traceback
import warnings

import numpy as np

FLOAT_DTYPES = ("float32", "float64")
INT_DTYPES = ("int32", "int64", "uint8")
INPUT_DTYPES = FLOAT_DTYPES * 3 + INT_DTYPES + ("bool",)
ASTYPE_DTYPES = ("float32", "float64", "int32", "int64", "uint8", "bool", "float16")
DIM_VALUES = (0, 1, 1, 2, 2, 3, 3, 4, 5, 5, 6, 7, 8, 9, 12, 16, 31)
MAX_ELEMS = 2048
RESET_EVERY = 50


# ---------------------------------------------------------------------------------------------
# Inputs


class ArgSpec:
    """One argument: an array (dtype, dims as labels or 1, layout, special values), a Python
    scalar, or an alias: the argument `base` (an earlier array) or a basic-index view of it,
    `view` (so the function gets two parameters that share memory)."""

    def __init__(self, kind, dtype=None, dims=(), layout="C", special=False, full_range=False,
                 value=None, base=None, view=""):
        self.kind, self.dtype, self.dims, self.layout = kind, dtype, tuple(dims), layout
        self.special, self.full_range, self.value = special, full_range, value
        self.base, self.view = base, view

    def describe(self, dimvals):
        if self.kind == "alias":
            return f"x{self.base}{self.view} (shares x{self.base}'s memory)"
        if self.kind != "array":
            return f"{self.kind} {self.value!r}"
        shape = tuple(dimvals[d] if isinstance(d, str) else d for d in self.dims)
        extra = (" +nan/inf/-0" if self.special else "")
        extra += " full-range" if self.full_range else ""
        return f"{self.dtype}{list(shape)} layout={self.layout}{extra}"


def draw_dims(r, labels, old=None):
    for _ in range(100):
        vals = {}
        for d in labels:
            if old is not None and r.random() < 0.3:
                vals[d] = old[d]
            else:
                vals[d] = r.choice(DIM_VALUES)
        yield vals


def make_array(spec, shape, rng):
    dt = np.dtype(spec.dtype)
    n = int(np.prod(shape)) if shape else 1
    if dt.kind == "f":
        scale = rng.choice([1.0, 1.0, 10.0, 1e-3, 100.0])
        data = rng.standard_normal(n) * scale
        if spec.special and n:
            k = max(1, n // 10)
            idx = rng.integers(0, n, k)
            data[idx] = rng.choice([np.nan, np.inf, -np.inf, -0.0, 0.0], k)
        data = data.astype(dt)
    elif dt.kind == "b":
        data = rng.integers(0, 2, n).astype(bool)
    else:
        info = np.iinfo(dt)
        if spec.full_range:
            data = rng.integers(info.min, info.max, n, dtype=dt, endpoint=True)
            if n:
                k = max(1, n // 8)
                edges = [info.min, info.max, 0, 1, info.max if info.min == 0 else -1]
                data[rng.integers(0, n, k)] = np.array(edges, dtype=dt)[rng.integers(0, 5, k)]
        else:
            lo = 0 if info.min == 0 else -9
            data = rng.integers(lo, 10, n).astype(dt)
    return data.reshape(shape)


def make_input(spec, dimvals, rng):
    if spec.kind != "array":
        return spec.value
    shape = tuple(dimvals[d] if isinstance(d, str) else d for d in spec.dims)
    lay = spec.layout if len(shape) >= 1 else "C"
    if lay == "F":
        return np.asfortranarray(make_array(spec, shape, rng))
    if lay == "T":  # a transposed view of a C array
        return make_array(spec, shape[::-1], rng).T
    if lay == "strided":  # every other element of the last axis
        big = make_array(spec, shape[:-1] + (shape[-1] * 2,), rng)
        return big[..., ::2]
    if lay == "neg":  # negative stride on the first axis
        return make_array(spec, shape, rng)[::-1]
    return make_array(spec, shape, rng)


def make_inputs(specs, dimvals, seed):
    rng = np.random.default_rng(seed)
    out = []
    for s in specs:
        if s.kind == "alias":
            out.append(eval(f"_x{s.view}", {"_x": out[s.base]}))  # noqa: S307 - our own text
        else:
            out.append(make_input(s, dimvals, rng))
    return out


# Views an aliasing argument may be of its base, by the base's rank ("" is the base itself).
ALIAS_VIEWS = {0: ("", "", "[...]"),
               1: ("", "", "[::-1]", "[1:]", "[:-1]", "[::2]", "[:]"),
               2: ("", "", "[::-1]", "[1:]", ".T", "[:, ::2]", "[..., 1:]", "[::-1, 1:]")}


# ---------------------------------------------------------------------------------------------
# Programs


class Stmt:
    """`tmpl` is one or more lines with {t} for the target and {a0}, {a1}... for operands.

    `mode` says what {t} is: "assign" binds a new variable; "write" names an existing array
    that the statement writes into (item assignment, in-place operators), so every variable
    that may share its memory changes too; "effect" binds nothing ({t} is unused). `view` marks
    an assignment whose result may share memory with its operands (a basic-index view, a helper
    that returns its argument), `writes` extra variables an assignment writes into (a view made
    and written through in one statement). Note [Writes and aliases]."""

    def __init__(self, tmpl, target, args, exact_slots=(), op_inexact=False, helper=None,
                 mode="assign", view=False, writes=()):
        self.tmpl, self.target, self.args = tmpl, target, list(args)
        self.exact_slots, self.op_inexact, self.helper = tuple(exact_slots), op_inexact, helper
        self.mode, self.view, self.writes = mode, view, tuple(writes)

    def written(self):
        return ((self.target,) if self.mode == "write" else ()) + self.writes

    def lines(self):
        kw = {f"a{i}": a for i, a in enumerate(self.args)}
        return self.tmpl.format(t=self.target, **kw).split("\n")

    def copy(self):
        return Stmt(self.tmpl, self.target, self.args, self.exact_slots, self.op_inexact,
                    self.helper, self.mode, self.view, self.writes)


def apply_stmt(s, taint, group):
    """Note [Writes and aliases]: updates the inexact flags `taint` and the may-share-memory
    classes `group` (name -> set of names, shared) for statement `s`.

    A write makes every variable that may share memory with its target as inexact as the value
    written (a partial write leaves the rest as it was, so the flags only grow). Classes are
    conservative: a view joins its operands' class, arguments that alias start in one class;
    a variable that merely *may* alias only gets a looser tolerance, never a wrong one."""
    val = s.op_inexact or any(taint.get(a, False) for a in s.args)
    if s.mode == "assign":
        taint[s.target] = val
        g = {s.target}
        if s.view:
            for a in s.args:
                g |= group.get(a, {a})
        for n in g:
            group[n] = g
    for w in s.written():
        for n in group.get(w, {w}):
            taint[n] = taint.get(n, False) or val


class Helper:
    def __init__(self, name, params, body, ret):
        self.name, self.params, self.body, self.ret = name, params, body, ret

    def inexact(self):
        taint = {p: False for p in self.params}
        for s in self.body:
            taint[s.target] = s.op_inexact or any(taint.get(a, False) for a in s.args)
        return taint.get(self.ret, False)


class Program:
    def __init__(self, params, specs, stmts, helpers, ret, ret_tuple, dims_a, dims_b, seed):
        self.params, self.specs, self.stmts, self.helpers = params, specs, stmts, helpers
        self.ret, self.ret_tuple = ret, ret_tuple
        self.dims_a, self.dims_b, self.seed = dims_a, dims_b, seed

    def copy(self, **kw):
        p = Program(self.params, list(self.specs), [s.copy() for s in self.stmts],
                    self.helpers, list(self.ret), self.ret_tuple, self.dims_a, self.dims_b,
                    self.seed)
        for k, v in kw.items():
            setattr(p, k, v)
        return p

    def taints(self):
        taint = {p: False for p in self.params}
        group = initial_groups(self.params, self.specs)
        for s in self.stmts:
            apply_stmt(s, taint, group)
        return taint

    def source(self, instrument=False):
        out = ["import numpy as np", ""]
        if any("framejit." in s.tmpl for s in self.stmts):
            out.insert(1, "import framejit")
        if any("_s_" in s.tmpl for s in self.stmts):
            out += SINK_SRC.strip().split("\n") + [""]
        used = {s.helper for s in self.stmts if s.helper}
        for h in self.helpers:
            if h.name not in used:
                continue
            out.append(f"def {h.name}({', '.join(h.params)}):")
            for s in h.body:
                out += ["    " + ln for ln in s.lines()]
                if instrument:
                    out.append(f"    _m({s.target})")
            out += [f"    return {h.ret}", ""]
        out.append(f"def f({', '.join(self.params)}):")
        for s in self.stmts:
            out += ["    " + ln for ln in s.lines()]
            if instrument and s.mode != "effect":
                out.append(f"    _m({s.target})")
        if self.ret_tuple:
            out.append(f"    return ({', '.join(self.ret)}{',' if len(self.ret) == 1 else ''})")
        else:
            out.append(f"    return {self.ret[0]}")
        return "\n".join(out) + "\n"


def initial_groups(params, specs):
    group = {p: {p} for p in params}
    for p, spec in zip(params, specs):
        if spec.kind == "alias":
            g = group[params[spec.base]]
            g.add(p)
            group[p] = g
    return group


# Module-level helpers framejit does not capture (print to a file object breaks the trace), so
# a call is a graph break with a resume function after it (Note [Break entries]). They run in
# CPython under both the reference and the compiled function.
SINK_SRC = """
import io

def _s_print(x):
    print("sink", file=io.StringIO())
    return x

def _s_float(x):
    print("sink", file=io.StringIO())
    return float(np.sum(x))

def _s_bump(x):
    print("sink", file=io.StringIO())
    x += 1
"""
SINKS = {"np": np}
exec(SINK_SRC, SINKS)  # noqa: S102 - our own text
try:  # the higher-order operators' plain meaning, for the generator's own runs (cand_hop)
    import framejit as _framejit
    SINKS["framejit"] = _framejit
except ImportError:
    _framejit = None


def is_array(v):
    return isinstance(v, (np.ndarray, np.generic))


def kind_of(v):
    if isinstance(v, bool):
        return "b"
    if isinstance(v, int):
        return "i"
    if isinstance(v, float):
        return "f"
    return np.asarray(v).dtype.kind


def ndim(v):
    return np.ndim(v)


def fmt_const(c):
    if isinstance(c, float):
        if math.isnan(c):
            return "np.nan"
        if math.isinf(c):
            return "np.inf" if c > 0 else "-np.inf"
        return repr(c)
    return repr(c)


INT_CONSTS = (0, 1, 2, 3, -1, -2, 7, -5, 100, 300, 2**31, 2**40, -(2**33))
FLOAT_CONSTS = (0.5, 2.0, -1.5, 0.0, -0.0, 1e-3, 3.25, 1e10, -7.0, math.inf, math.nan)


class Generator:
    """Builds one program; `env` holds the concrete value of every variable on input set A and
    `inexact` its Note [Exactness] flag."""

    def __init__(self, r, allow_errors=True):
        self.r = r
        self.allow_errors = allow_errors
        self.helpers = []
        self.counter = 0
        self.group = {}  # may-share-memory classes, Note [Writes and aliases]

    # -- environment -----------------------------------------------------------------------

    def fresh(self, prefix="v"):
        self.counter += 1
        return f"{prefix}{self.counter}"

    def pick(self, env, inexact, pred=lambda v: True, exact=False, arrays=True):
        c = [n for n, v in env.items()
             if (not arrays or is_array(v)) and pred(v) and not (exact and inexact[n])]
        if not c:
            return None
        # Prefer recent values: chains of dependent ops are what fusion works on.
        if self.r.random() < 0.5:
            return c[-1 - min(len(c) - 1, int(self.r.expovariate(1.0)))]
        return self.r.choice(c)

    def const_for(self, v):
        k = kind_of(v)
        if k == "f" or self.r.random() < 0.3:
            return fmt_const(self.r.choice(FLOAT_CONSTS + (1.0, 0.5)))
        if k == "b":
            return self.r.choice(["True", "False", "1", "2"])
        return fmt_const(self.r.choice(INT_CONSTS))

    # -- candidate statements -------------------------------------------------------------
    # Each returns a Stmt with operand names filled in, or None.

    def cand_unary(self, env, inex, t):
        r = self.r
        a = self.pick(env, inex)
        if a is None:
            return None
        k = kind_of(env[a])
        if k == "b" and r.random() < 0.7:
            return Stmt("{t} = ~{a0}", t, [a])
        fn, op_inexact = r.choice([
            ("np.exp", True), ("np.log", True), ("np.tanh", True), ("np.sin", True),
            ("np.cos", True), ("np.sqrt", False), ("np.abs", False), ("-", False),
            ("np.negative", False), ("np.square", False), ("~", False), ("abs", False),
            ("np.exp", True), ("np.tanh", True), ("np.sqrt", False), ("np.abs", False)])
        if fn in ("np.exp",) and r.random() < 0.5:
            return Stmt("{t} = np.exp(np.minimum({a0}, 30.0))", t, [a], op_inexact=True)
        # Ill-conditioned on inexact operands (Note [Exactness]): log and sqrt near 0 (a value
        # that cancelled to +-1e-17 gives NaN or -39), sin and cos of large arguments. Inexact
        # operands get well-conditioned forms; exact ones the plain function.
        if fn == "np.log" and (inex[a] or r.random() < 0.3):
            return Stmt("{t} = np.log(np.abs({a0}) + 1.0)", t, [a], op_inexact=True)
        if fn == "np.sqrt" and (inex[a] or r.random() < 0.3):
            return Stmt("{t} = np.sqrt(np.abs({a0}))", t, [a])
        if fn in ("np.sin", "np.cos"):
            return Stmt(f"{{t}} = {fn}({{a0}})", t, [a], exact_slots=(0,), op_inexact=True)
        if fn in ("-", "~"):
            return Stmt(f"{{t}} = {fn}{{a0}}", t, [a])
        return Stmt(f"{{t}} = {fn}({{a0}})", t, [a], op_inexact=op_inexact)

    def compatible_partner(self, env, inex, a, exact=False):
        sa = np.shape(env[a])
        c = []
        for n, v in env.items():
            if not is_array(v) or (exact and inex[n]):
                continue
            try:
                np.broadcast_shapes(sa, np.shape(v))
                c.append(n)
            except ValueError:
                pass
        return self.r.choice(c) if c else None

    def cand_binary(self, env, inex, t):
        r = self.r
        op = r.choice(["+", "-", "*", "/", "//", "%", "**", "np.maximum", "np.minimum",
                       "<", "<=", ">", ">=", "==", "!=", "&", "|", "^",
                       "+", "*", "-", "np.add", "np.multiply"])
        discont = op in ("//", "%", "<", "<=", ">", ">=", "==", "!=")
        bitwise = op in ("&", "|", "^")
        pred = (lambda v: kind_of(v) in "biu") if bitwise else (lambda v: True)
        a = self.pick(env, inex, pred, exact=discont)
        if a is None:
            return None
        if op == "**":
            va = env[a]
            if kind_of(va) == "f":
                e = r.choice(["2", "3", "0.5", "-1", "0", "2.0", "1"])
            else:
                e = r.choice(["0", "1", "2", "3"])
            if r.random() < 0.1:  # array ** array: ints may raise for negative exponents
                b = self.compatible_partner(env, inex, a)
                if b is not None:
                    return Stmt("{t} = {a0} ** {a1}", t, [a, b], exact_slots=(0, 1),
                                op_inexact=True)
            # x ** -1 and x ** 0.5 are ill-conditioned near 0: exact bases only.
            slots = (0,) if e in ("-1", "0.5") else ()
            return Stmt(f"{{t}} = {{a0}} ** {e}", t, [a], exact_slots=slots,
                        op_inexact=kind_of(va) == "f")
        # Second operand: an array (usually broadcast-compatible), a constant, or a scalar var.
        x = r.random()
        if x < 0.6:
            b = self.compatible_partner(env, inex, a, exact=discont)
            if b is not None and bitwise and kind_of(env[b]) not in "biu":
                b = None
        elif x < 0.65 or (x < 0.7 and self.allow_errors):
            b = self.pick(env, inex, pred, exact=discont)  # may not broadcast
        elif x < 0.75:
            b = self.pick(env, inex, lambda v: not is_array(v), exact=discont, arrays=False)
        else:
            b = None
        if op.startswith("np."):
            if b is None:
                return Stmt(f"{{t}} = {op}({{a0}}, {self.const_for(env[a])})", t, [a])
            return Stmt(f"{{t}} = {op}({{a0}}, {{a1}})", t, [a, b],
                        exact_slots=(0, 1) if discont else ())
        # A divisor that cancelled to near 0 makes any quotient error unbounded: exact divisors.
        slots = (0, 1) if discont else (1,) if op == "/" else ()
        if b is None:
            c = self.const_for(env[a])
            if r.random() < 0.3:
                return Stmt(f"{{t}} = {c} {op} {{a0}}", t, [a],
                            exact_slots=(0,) if discont or op == "/" else ())
            return Stmt(f"{{t}} = {{a0}} {op} {c}", t, [a], exact_slots=(0,) if discont else ())
        return Stmt(f"{{t}} = {{a0}} {op} {{a1}}", t, [a, b], exact_slots=slots)

    def cand_where(self, env, inex, t):
        c = self.pick(env, inex, lambda v: kind_of(v) == "b" and ndim(v) > 0, exact=True)
        if c is None:
            a = self.pick(env, inex, lambda v: kind_of(v) in "fiu", exact=True)
            if a is None:
                return None
            cond = self.r.choice(["{a0} > 0", "{a0} != {a0}", "{a0} <= 1"])
            b = self.compatible_partner(env, inex, a)
            other = self.r.choice(["0.0", "0", "-1.5", "np.nan", "{a1}"])
            if other == "{a1}" and b is None:
                other = "0"
            args = [a] + ([b] if other == "{a1}" else [])
            return Stmt(f"{{t}} = np.where({cond}, {{a0}}, {other})", t, args,
                        exact_slots=(0,))
        a = self.compatible_partner(env, inex, c)
        b = self.compatible_partner(env, inex, c)
        if self.r.random() < 0.3 or b is None:
            return Stmt(f"{{t}} = np.where({{a0}}, {{a1}}, {self.const_for(env[a])})", t,
                        [c, a], exact_slots=(0,))
        return Stmt("{t} = np.where({a0}, {a1}, {a2})", t, [c, a, b], exact_slots=(0,))

    def axis_arg(self, nd, allow_tuple=True):
        r = self.r
        x = r.random()
        if nd == 0 or x < 0.25:
            return "None"
        if x < 0.7 or not allow_tuple or nd == 1:
            ax = r.randrange(-nd, nd)
            if self.allow_errors and r.random() < 0.03:
                ax = nd  # AxisError
            return str(ax)
        k = r.randint(1, nd)
        axes = sorted(r.sample(range(nd), k))
        if r.random() < 0.3:
            axes = [ax - nd for ax in axes]
        return "(" + ", ".join(map(str, axes)) + ("," if k == 1 else "") + ")"

    def cand_reduce(self, env, inex, t):
        r = self.r
        name = r.choice(["sum", "mean", "max", "min", "prod", "var", "std", "argmax", "argmin",
                         "sum", "max", "mean"])
        arg = name.startswith("arg")
        a = self.pick(env, inex, lambda v: ndim(v) >= 1, exact=arg)
        if a is None:
            return None
        v = env[a]
        k = kind_of(v)
        nd = ndim(v)
        ax = self.axis_arg(nd, allow_tuple=not arg)
        keep = r.random() < 0.3
        kw = f"axis={ax}" if r.random() < 0.7 else ax
        if keep:
            kw += ", keepdims=True"
        if r.random() < 0.5:
            expr = f"{{a0}}.{name}({kw})"
        else:
            expr = f"np.{name}({{a0}}, {kw})"
        if name == "prod" and k == "f":
            expr = expr.replace("{a0}", "({a0} * 0.01 + 1.0)", 1)
        inexact = (k == "f" and name in ("sum", "mean", "prod", "var", "std")) or \
            name in ("mean", "var", "std")
        return Stmt("{t} = " + expr, t, [a], exact_slots=(0,) if arg else (), op_inexact=inexact)

    def cand_view(self, env, inex, t):
        r = self.r
        a = self.pick(env, inex, lambda v: ndim(v) >= 1)
        if a is None:
            return None
        nd = ndim(env[a])
        shape = np.shape(env[a])
        opts = ["{a0}.T", "{a0}[::2]", "{a0}[1:-1]", "{a0}[None]", "{a0}[::-1]",
                "np.expand_dims({a0}, %d)" % r.randrange(-nd - 1, nd + 1),
                "{a0}.reshape(-1)", "{a0}[..., ::-2]", "{a0}[0]", "{a0}[-1]",
                "np.transpose({a0})", "{a0}[:, None]" if nd >= 1 else "{a0}[None]",
                "{a0}.reshape({a0}.shape[0], -1)", "{a0}[1:]", "{a0}[:2]"]
        if nd >= 2:
            perm = list(range(nd))
            r.shuffle(perm)
            i, j = r.sample(range(nd), 2)
            opts += ["np.swapaxes({a0}, %d, %d)" % (i, j),
                     "np.transpose({a0}, (%s))" % ", ".join(map(str, perm)),
                     "{a0}[:, 1:]", "{a0}[::-1, ::2]", "{a0}.reshape(-1, %d)" % shape[-1],
                     "{a0}.reshape(%s)" % ", ".join(map(str, shape[::-1]))]
        if shape and shape[-1] % 2 == 0 and shape[-1] > 0:
            opts.append("{a0}.reshape(%s-1, 2)" % ("" if nd == 1 else "%d, " % shape[0]))
        if self.allow_errors:
            opts.append("{a0}[%d]" % (shape[0] + r.randint(0, 2)))  # IndexError
        return Stmt("{t} = " + r.choice(opts), t, [a], view=True)

    def cand_astype(self, env, inex, t):
        r = self.r
        a = self.pick(env, inex)
        if a is None:
            return None
        to = r.choice(ASTYPE_DTYPES)
        k = kind_of(env[a])
        if k == "f" and to in ("int32", "int64"):
            # Out-of-range float -> int casts are undefined behaviour in C; keep to range.
            return Stmt("{t} = np.where(np.abs({a0}) < 1e6, {a0}, 0).astype(np.%s)" % to, t,
                        [a], exact_slots=(0,))
        if k == "f" and to == "uint8":
            return Stmt("{t} = np.where(({a0} >= 0) & ({a0} < 250), {a0}, 0).astype(np.uint8)",
                        t, [a], exact_slots=(0,))
        slots = (0,) if to == "bool" else ()
        if r.random() < 0.2:
            return Stmt(f"{{t}} = np.asarray({{a0}}, dtype=np.{to})", t, [a], exact_slots=slots,
                        view=True)
        return Stmt(f"{{t}} = {{a0}}.astype(np.{to})", t, [a], exact_slots=slots)

    def cand_matmul(self, env, inex, t):
        r = self.r
        arrs = [n for n, v in env.items() if is_array(v) and ndim(v) >= 1
                and kind_of(v) in "fiu"]
        if not arrs:
            return None
        a = r.choice(arrs)
        sa = np.shape(env[a])
        partners = [n for n in arrs if np.shape(env[n])[-2 if ndim(env[n]) >= 2 else 0] == sa[-1]]
        tpart = [n for n in arrs if ndim(env[n]) == 2 and np.shape(env[n])[-1] == sa[-1]]
        if tpart and r.random() < 0.3:
            b = r.choice(tpart)
            return Stmt("{t} = {a0} @ {a1}.T", t, [a, b],
                        op_inexact=kind_of(env[a]) == "f" or kind_of(env[b]) == "f")
        if partners:
            b = r.choice(partners)
        elif self.allow_errors and r.random() < 0.2:
            b = r.choice(arrs)
        else:
            return None
        fn = r.choice(["{a0} @ {a1}", "np.matmul({a0}, {a1})", "np.dot({a0}, {a1})"])
        return Stmt("{t} = " + fn, t, [a, b],
                    op_inexact=kind_of(env[a]) == "f" or kind_of(env[b]) == "f")

    def cand_scalar(self, env, inex, t):
        r = self.r
        a = self.pick(env, inex, lambda v: ndim(v) >= 1)
        if a is None:
            return None
        nd = ndim(env[a])
        x = r.random()
        if x < 0.4:
            return Stmt("{t} = {a0}.shape[%d]" % r.randrange(-nd, nd), t, [a])
        if x < 0.55:
            return Stmt("{t} = len({a0})", t, [a])
        if x < 0.7:
            return Stmt("{t} = {a0}.size", t, [a])
        if x < 0.85:
            return Stmt("{t} = float({a0}.sum())", t, [a],
                        op_inexact=kind_of(env[a]) == "f")
        return Stmt("{t} = int({a0}.max())", t, [a], exact_slots=(0,))

    def cand_helper(self, env, inex, t):
        r = self.r
        a = self.pick(env, inex, exact=True)
        if a is None:
            return None
        b = self.compatible_partner(env, inex, a, exact=True) if r.random() < 0.6 else None
        args = [a] + ([b] if b else [])
        params = [f"p{i}" for i in range(len(args))]
        henv = {p: env[n] for p, n in zip(params, args)}
        hinex = {p: False for p in params}
        sub = Generator(r, allow_errors=False)
        sub.counter = 0
        body = sub.gen_body(henv, hinex, r.randint(1, 3), prefix="u",
                            kinds=("unary", "binary", "reduce", "view", "where", "astype"))
        if not body:
            return None
        name = f"h{len(self.helpers)}"
        h = Helper(name, params, body, body[-1].target)
        self.helpers.append(h)
        _bind_helpers([h])
        return Stmt(f"{{t}} = {name}({', '.join('{a%d}' % i for i in range(len(args)))})", t,
                    args, exact_slots=tuple(range(len(args))), op_inexact=h.inexact(),
                    helper=name, view=True)

    def cand_branch(self, env, inex, t):
        r = self.r
        a = self.pick(env, inex, lambda v: ndim(v) >= 1 and kind_of(v) in "fiu")
        if a is None:
            return None
        nd = ndim(env[a])
        ax = r.randrange(nd)
        c = r.choice([0, 1, 2, 3, 4, 6])
        op = r.choice([">", "<=", "=="])
        e1, e2 = r.sample(["{a0} * 2", "{a0} + 1", "np.abs({a0})", "-{a0}", "{a0} - {a0}.min()",
                           "np.maximum({a0}, 0)", "{a0}[::-1]"], 2)
        tmpl = (f"if {{a0}}.shape[{ax}] {op} {c}:\n    {{t}} = {e1}\nelse:\n    {{t}} = {e2}")
        return Stmt(tmpl, t, [a], view=True)

    def cand_loop(self, env, inex, t):
        r = self.r
        a = self.pick(env, inex, lambda v: kind_of(v) in "fiu")
        if a is None:
            return None
        b = self.compatible_partner(env, inex, a)
        if b is None or kind_of(env[b]) == "b":
            b = a
        n = r.randint(1, 4)
        body = r.choice(["{t} = {t} + {a1}", "{t} = {t} * 0.5 + {a1}", "{t} = {t} + {a1} * i",
                         "{t} = np.maximum({t}, {a1} - i)", "{t} = {t} - {a1}.sum() * 0.25"])
        tmpl = f"{{t}} = {{a0}}\nfor i in range({n}):\n    {body}"
        inexact = "sum" in body and kind_of(env[b]) == "f"
        return Stmt(tmpl, t, [a, b], op_inexact=inexact)

    def cand_eloop(self, env, inex, t):
        """A Numba-style loop over elements (Note [Element loops] in
        frontend/trace/element_loops.cpp): reads and writes of single elements, Python and NumPy
        numbers, a branch on an element, a break. The same operations in the same order as
        CPython, so exact where the operands are."""
        r = self.r
        a = self.pick(env, inex, lambda v: ndim(v) in (1, 2) and kind_of(v) in "fi" and np.size(v) > 0)
        if a is None:
            return None
        v = env[a]
        if ndim(v) == 1:
            body = r.choice([
                "{t} = 0.0\nfor i in range({a0}.shape[0]):\n    {t} += {a0}[i] * 0.5",
                "{t} = 0\nfor i in range({a0}.shape[0]):\n    if {a0}[i] > 0:\n        {t} += 1",
                "{t} = np.zeros({a0}.shape[0])\nfor i in range({a0}.shape[0]):\n    {t}[i] = {a0}[i] * 2.0 + i",
                "{t} = {a0}.copy()\nfor i in range(1, {t}.shape[0]):\n    {t}[i] = {t}[i - 1] + {t}[i]",
                "{t} = -1\nfor i in range({a0}.shape[0] - 1, -1, -1):\n    if {a0}[i] < 1:\n        {t} = i\n"
                "        break",
                "{t} = np.zeros({a0}.shape[0])\nfor i in range({a0}.shape[0]):\n    {t}[-i - 1] = max({a0}[i], 0.0)",
                # Note [Slices in element loops]
                "{t} = 0.0\nfor i in range({a0}.shape[0]):\n    {t} += {a0}[: i + 1].sum() * 0.5",
                "{t} = 0.0\nfor i in range({a0}.shape[0]):\n    {t} += np.dot({a0}[i::2], {a0}[i::2])",
                "{t} = np.zeros({a0}.shape[0])\nfor i in range({a0}.shape[0]):\n    {t}[: i + 1] += {a0}[-i - 1 :] * 2.0",
                "{t} = {a0} * 1.0\nfor i in range({t}.shape[0] - 2):\n    {t}[i + 1 : -1] = 0.5 * ({t}[i + 2 :] + {t}[i + 1 : -1])",
                "{t} = {a0} * 1.0\nfor i in range(1, {t}.shape[0]):\n    {t}[i:] += {t}[i - 1] * 0.25",
                # Note [While loops], Note [Arrays made in loops], Note [Short loops that branch]
                "{t} = 0\nwhile {t} < {a0}.shape[0] and {a0}[{t}] < 1.0:\n    {t} += 1",
                "{t} = {a0} * 1.0\nk = 0\nwhile k < 3:\n    u = {t}.copy()\n    {t}[1:] = 0.5 * (u[1:] + u[:-1])\n"
                "    k += 1",
                "{t} = 0.0\nfor i in range(3):\n    if {a0}[i % {a0}.shape[0]] > 0.5:\n"
                "        {t} += {a0}[i % {a0}.shape[0]]",
                "{t} = np.zeros({a0}.shape[0])\nfor i in range({a0}.shape[0]):\n"
                "    {t}[i:] = np.maximum({t}[i:], {a0}[i:]) - np.minimum({a0}[i], 0.5)",
            ])
        else:
            body = r.choice([
                "{t} = {a0}.copy()\nfor i in range(1, {t}.shape[0]):\n    for j in range({t}.shape[1]):\n"
                "        {t}[i, j] = {t}[i - 1, j] + {t}[i, j]",
                "{t} = 0.0\nfor i in range({a0}.shape[0]):\n    for j in range(i % ({a0}.shape[1] + 1)):\n"
                "        {t} += {a0}[i, j] * (i - j)",
                "{t} = np.zeros(({a0}.shape[1], {a0}.shape[0]))\nfor i in range({a0}.shape[0]):\n"
                "    for j in range({a0}.shape[1]):\n        {t}[j, i] = {a0}[i, j]",
                "{t} = 0.0\nfor i in range({a0}.shape[0]):\n    {t} += {a0}[i, :] @ {a0}[i, ::-1]",
                "{t} = {a0} * 1.0\nfor i in range(1, {t}.shape[0]):\n    {t}[i, :] = {t}[i - 1, :] * 0.5 + {t}[i, :]",
                "{t} = {a0} * 1.0\nfor j in range(1, {t}.shape[1]):\n    {t}[:, j] -= {t}[:, j - 1]",
                "{t} = np.zeros({a0}.shape[1])\nfor i in range({a0}.shape[0]):\n    {t} += {a0}[i] * {a0}[i, 0]",
            ])
        # Sums of floats are made in CPython's order; int elements as int64 may wrap where Python
        # would not, which the statement's own range keeps far away. Sums and dot products of
        # slices add in another order than NumPy's pairwise sum or BLAS.
        reduces = ".sum()" in body or "np.dot" in body or " @ " in body
        return Stmt(body, t, [a], exact_slots=(0,) if kind_of(v) == "i" else (), op_inexact=reduces)

    # -- writes into arrays (Note [Writes and aliases]) ---------------------------------------

    def write_target(self, env, pred=lambda v: True):
        """A writable array variable: an input (or an input's alias) a third of the time, else
        preferably a recent one (often a view just made)."""
        c = [n for n, v in env.items()
             if isinstance(v, np.ndarray) and v.flags.writeable and pred(v)]
        if not c:
            return None
        if self.r.random() < 0.35:
            inputs = [n for n in c if n.startswith("x")]
            if inputs:
                return self.r.choice(inputs)
        return c[-1 - min(len(c) - 1, int(self.r.expovariate(0.7)))]

    def basic_index(self, shape):
        """A basic index for an array of `shape`: ints (also negative), slices with steps (also
        negative), Ellipsis and None. Usually valid; an out-of-range int now and then is fine
        (the candidate is then dropped, or kept as the raising last statement)."""
        r = self.r
        nd = len(shape)
        parts = []
        for ax in range(r.randint(0, nd)):
            n = shape[ax]
            if r.random() < 0.3 and n > 0:
                parts.append(str(r.randrange(-n, n)))
            else:
                parts.append(r.choice([":", "1:", ":-1", "::2", "::-1", "1::2", "-2:", "::-2",
                                       "1:3", ":2", "3::-1", "-1::-2"]))
        if r.random() < 0.15:
            parts.insert(r.randint(0, len(parts)), "None")
        if r.random() < 0.25 or not parts:
            parts.insert(r.randint(0, len(parts)), "...")
        return ", ".join(parts)

    def write_value(self, env, inex, target_value, shape):
        """(text, args, exact_slots) of a value to store into an array of `target_value`'s dtype
        over `shape`: a constant or an expression of a variable that broadcasts to `shape`.
        Int and bool targets only take exact int/bool values (a float -> int cast of a value one
        ulp off can differ by one, and out of range it is undefined in C); constants are within
        the target's range."""
        r = self.r
        tk = np.asarray(target_value).dtype.kind
        if r.random() < 0.4:
            if tk == "f":
                return fmt_const(r.choice(FLOAT_CONSTS + (1.0, 2.0, -3.0))), [], ()
            if tk == "b":
                return r.choice(["True", "False", "0", "1"]), [], ()
            info = np.iinfo(np.asarray(target_value).dtype)
            c = r.choice([c for c in INT_CONSTS if info.min <= c <= info.max])
            return fmt_const(c), [], ()
        ok_kinds = {"f": "fiub", "i": "iub", "u": "iub", "b": "b"}[tk]
        c = []
        for n, v in env.items():
            if not is_array(v) or kind_of(v) not in ok_kinds or (tk != "f" and inex[n]):
                continue
            try:
                if np.broadcast_shapes(shape, np.shape(v)) == tuple(shape):
                    c.append(n)
            except ValueError:
                pass
        if not c:
            return "1" if tk != "b" else "True", [], ()
        b = r.choice(c)
        slots = (0,) if tk != "f" else ()
        if kind_of(env[b]) != "b" and r.random() < 0.4:
            return r.choice(["{a0} * 2", "-{a0}", "({a0} + 1)", "{a0}[...]"]), [b], slots
        return "{a0}", [b], slots

    def _sel_shape(self, v, idx):
        try:
            return np.shape(eval(f"_x[{idx}]", {"_x": v}))  # noqa: S307 - our own text
        except Exception:  # noqa: BLE001
            return None

    def cand_setitem(self, env, inex, t):
        """`x[index] = value` on an input, a made array or a view."""
        tgt = self.write_target(env)
        if tgt is None:
            return None
        idx = self.basic_index(np.shape(env[tgt]))
        shape = self._sel_shape(env[tgt], idx)
        if shape is None:
            return None
        val, args, slots = self.write_value(env, inex, env[tgt], shape)
        return Stmt(f"{{t}}[{idx}] = {val}", tgt, args, exact_slots=slots, mode="write")

    def inplace_op(self, v):
        k = kind_of(v)
        if k == "b":
            return self.r.choice(["|=", "&=", "^="])
        ops = ["+=", "-=", "*=", "+=", "*="]
        if k == "f":
            ops.append("/=")
        return self.r.choice(ops)

    def cand_inplace(self, env, inex, t):
        """`x op= value` and `x[index] op= value` (augmented item assignment)."""
        r = self.r
        tgt = self.write_target(env)
        if tgt is None:
            return None
        v = env[tgt]
        op = self.inplace_op(v)
        if r.random() < 0.5:
            idx = self.basic_index(np.shape(v))
            shape = self._sel_shape(v, idx)
            if shape is None:
                return None
            lhs = f"{{t}}[{idx}]"
        else:
            lhs, shape = "{t}", np.shape(v)
        val, args, slots = self.write_value(env, inex, v, shape)
        if op == "/=" and args:
            slots = (0,)  # exact divisors (Note [Exactness])
        return Stmt(f"{lhs} {op} {val}", tgt, args, exact_slots=slots, mode="write")

    def cand_wview(self, env, inex, t):
        """A basic-index view and a write in one statement: through the view (then the base is
        read later), or into the base (then the view is read later)."""
        r = self.r
        a = self.write_target(env, lambda v: v.ndim >= 1)
        if a is None:
            return None
        v = env[a]
        idx = self.basic_index(v.shape)
        view = self._sel_shape(v, idx)
        if view is None:
            return None
        vv = eval(f"_x[{idx}]", {"_x": v})  # noqa: S307 - our own text
        if r.random() < 0.6:  # write through the view
            if r.random() < 0.5:
                idx2 = self.basic_index(np.shape(vv))
                sub = self._sel_shape(vv, idx2)
                if sub is None:
                    return None
                val, args, slots = self.write_value(env, inex, vv, sub)
                line = f"{{t}}[{idx2}] = " + val.replace("{a0}", "{a1}")
            else:
                val, args, slots = self.write_value(env, inex, vv, np.shape(vv))
                line = f"{{t}} {self.inplace_op(vv)} " + val.replace("{a0}", "{a1}")
        else:  # write into the base
            idx2 = self.basic_index(v.shape)
            sub = self._sel_shape(v, idx2)
            if sub is None:
                return None
            val, args, slots = self.write_value(env, inex, v, sub)
            line = f"{{a0}}[{idx2}] = " + val.replace("{a0}", "{a1}")
        return Stmt(f"{{t}} = {{a0}}[{idx}]\n" + line, t, [a] + args,
                    exact_slots=tuple(i + 1 for i in slots), view=True, writes=(t,))

    # -- graph breaks (Note [Break entries]) --------------------------------------------------

    def cand_brk(self, env, inex, t):
        """Calls of module-level helpers framejit cannot capture, between array statements,
        inside a loop over a constant range and inside an `if` (on a shape or on a value only
        CPython can compute), with values flowing across the break."""
        r = self.r
        a = self.pick(env, inex)
        if a is None:
            return None
        va = env[a]
        x = r.random()
        if x < 0.2:
            return Stmt("{t} = _s_print({a0})", t, [a], view=True)
        if x < 0.35:
            return Stmt("{t} = _s_float({a0})", t, [a], op_inexact=kind_of(va) == "f")
        if x < 0.45:
            return Stmt("_s_print({a0})", t, [a], mode="effect")
        if x < 0.55:
            tgt = self.write_target(env, lambda v: v.dtype.kind in "iuf")
            if tgt is None:
                return None
            return Stmt("_s_bump({t})", tgt, [], mode="write")
        b = self.compatible_partner(env, inex, a)
        if b is None or kind_of(env[b]) == "b":
            b = a
        if x < 0.8:  # a loop whose body breaks
            n = r.randint(1, 3)
            step = r.choice(["{t} = {t} * 0.5 + {a1}", "{t} = {t} + {a1} * i",
                             "{t} = np.maximum({t}, {a1} - i)", "{t} += {a1}",
                             "{t}[...] = {t} - {a1}", "{t} = {t} + _s_float({a1})"])
            sink = r.choice(["_s_print({t})", "_s_print({a1})", "{t} = _s_print({t})",
                             "_s_bump({t})"])
            body = [step, sink] if r.random() < 0.5 else [sink, step]
            tmpl = f"{{t}} = {{a0}}.copy()\nfor i in range({n}):\n" + \
                "\n".join("    " + ln for ln in body)
            inexact = "_s_float" in step and kind_of(env[b]) == "f"
            return Stmt(tmpl, t, [a, b], op_inexact=inexact, view="_s_print({t})" in sink)
        # An if whose taken branch breaks.
        if r.random() < 0.5 and ndim(va) >= 1:
            cond, cargs, slots = f"{{a0}}.shape[{r.randrange(ndim(va))}] > {r.choice([1, 2, 4])}", \
                [], ()
        else:
            cond, cargs, slots = "_s_float({a2}) > 0", [a], (2,)
        e1, e2 = r.sample(["{a0} * 2", "{a0} + 1", "np.abs({a0})", "-{a0}", "{a0} - {a1}",
                           "np.maximum({a0}, {a1})", "{a0}[::-1]"], 2)
        brk = r.choice(["_s_print({a1})", "{t} = _s_print({t})", "_s_bump({t})"])
        tmpl = f"if {cond}:\n    {{t}} = {e1}\n    {brk}\nelse:\n    {{t}} = {e2}"
        return Stmt(tmpl, t, [a, b] + cargs, exact_slots=slots, view=True,
                    writes=(t,) if "_s_bump" in brk else ())

    def cand_hop(self, env, inex, t):
        """framejit.cond, scan, map, fori_loop and while_loop (issue 15): captured as nodes whose bodies are
        graphs. Bodies that return another dtype or shape than they take are breaks (or, for the
        loops, the plain meaning's TypeError): both paths are fuzzed."""
        r = self.r
        if _framejit is None:
            return None
        a = self.pick(env, inex)
        if a is None:
            return None
        b = self.compatible_partner(env, inex, a) or a
        x = r.random()
        if x < 0.45:
            e1, e2 = r.sample(["p * 2", "p + 1", "np.abs(p)", "-p", "p - q", "np.maximum(p, q)", "np.tanh(p)",
                               "p * q", "p.astype(np.float32)", "p[::-1]", "p", "q + p.sum()"], 2)
            pred = r.choice(["{a0}.sum() > 0", "np.all({a0} > -1)", "{a0}.size > 3", "True"])
            tmpl = f"{{t}} = framejit.cond({pred}, lambda p, q: {e1}, lambda p, q: {e2}, ({{a0}}, {{a1}}))"
            return Stmt(tmpl, t, [a, b], exact_slots=(0,), op_inexact="tanh" in e1 + e2 or "sum" in e1 + e2,
                        view=True)
        if x < 0.6 and ndim(env[a]) >= 1:  # scan, map and associative_scan over a dim of a0
            if r.random() < 0.3:
                # Parallel when elementwise (Note [Parallel scans]); a reduction is a break.
                body = r.choice(["p + q2", "np.maximum(p, q2)", "np.minimum(q2, p)", "p * q2",
                                 "np.where(q2 > 0, q2, p)", "p", "q2", "p + q2.sum()"])
                dim = r.randrange(-ndim(env[a]), ndim(env[a]))
                rev = r.choice(["", ", reverse=True"])
                tmpl = f"{{t}} = framejit.associative_scan(lambda p, q2: {body}, {{a0}}, {dim}{rev})"
                return Stmt(tmpl, t, [a, b], op_inexact=True)
            if r.random() < 0.5:
                body = r.choice(["r * 2 + q", "np.abs(r) - q", "r * q"])
                tmpl = f"{{t}} = framejit.map(lambda r, q: {body}, {{a0}}, {{a1}})"
            else:
                step = r.choice(["(c + r, c * r)", "(c * 0.5 + r, c - r)", "(np.maximum(c, r), r + 1)"])
                tmpl = f"{{t}} = framejit.scan(lambda c, r: {step}, {{a0}}[0] * 1.0, {{a0}})[1]"
            return Stmt(tmpl, t, [a, b], op_inexact=True)
        if x < 0.8:
            n = r.randint(0, 4)
            step = r.choice(["v * 0.5 + q", "v + q * i", "np.maximum(v, q - i)", "v - q", "v * i"])
            tmpl = f"{{t}} = framejit.fori_loop(0, {n}, lambda i, v: {step}, {{a0}} * 1.0)".replace("q", "{a1}")
            return Stmt(tmpl, t, [a, b], op_inexact=True)
        tmpl = ("{t} = framejit.while_loop(lambda v, k: (np.abs(v).max() > 1.0) & (k < 6), "
                "lambda v, k: (v * 0.5 + {a1} * 0.0, k + 1), ({a0} * 1.0, 0))[0]")
        return Stmt(tmpl, t, [a, b], exact_slots=(0,), op_inexact=True)

    KINDS = {"unary": 4, "binary": 8, "where": 2, "reduce": 4, "view": 4, "astype": 2,
             "matmul": 1, "scalar": 1, "helper": 1, "branch": 1, "loop": 1,
             "setitem": 2, "inplace": 2, "wview": 1, "brk": 2, "hop": 1, "eloop": 2}

    def gen_body(self, env, inex, n, prefix="v", kinds=None):
        """Appends up to `n` statements; returns them. The last one may raise on purpose."""
        r = self.r
        kinds = kinds or list(self.KINDS)
        weights = [self.KINDS[k] for k in kinds]
        stmts = []
        attempts = 0
        while len(stmts) < n and attempts < n * 8:
            attempts += 1
            kind = r.choices(kinds, weights)[0]
            t = self.fresh(prefix)
            s = getattr(self, "cand_" + kind)(env, inex, t)
            if s is None or any(inex.get(s.args[i], False) for i in s.exact_slots):
                continue
            src = "\n".join(s.lines())
            loc = dict(env)
            glb = dict(SINKS)
            for h in self.helpers:
                glb[h.name] = h.fn
            # A statement that writes may fail half-way (a loop, an out-of-range index after a
            # write): keep the memory of every array to put back what a dropped candidate wrote.
            saved = _snapshot(env) if s.written() or "_s_bump" in s.tmpl or \
                "[...] =" in s.tmpl or "+=" in s.tmpl else None
            try:
                with np.errstate(all="ignore"):
                    exec(src, glb, loc)
                v = loc[t] if s.mode == "assign" else None
                if is_array(v) and (np.size(v) > MAX_ELEMS * 4
                                    or np.asarray(v).dtype.kind not in "biuf"):
                    raise ValueError("too big or not a number")
            except Exception:  # noqa: BLE001 - any NumPy error
                if self.allow_errors and r.random() < 0.15:
                    stmts.append(s)
                    return stmts
                if saved is not None:
                    _restore(saved)
                if s.helper:
                    self.helpers.pop()
                continue
            if s.mode == "assign":
                env[t] = v
                # A view the statement kinds did not announce (asarray of the same dtype...).
                if isinstance(v, np.ndarray) and not s.view and any(
                        isinstance(env.get(a), np.ndarray) and np.may_share_memory(v, env[a])
                        for a in s.args):
                    s.view = True
            apply_stmt(s, inex, self.group)
            stmts.append(s)
        return stmts


def _snapshot(env):
    """The memory of every array in `env`: (owner, copy) per base that owns its data."""
    roots = {}
    for v in env.values():
        if isinstance(v, np.ndarray):
            b = v
            while isinstance(b.base, np.ndarray):
                b = b.base
            if b.flags.writeable:
                roots[id(b)] = (b, b.copy())
    return list(roots.values())


def _restore(saved):
    for b, c in saved:
        np.copyto(b, c)


def _bind_helpers(helpers):
    """Helper functions as Python objects, for executing candidates during generation."""
    glb = {"np": np}
    for h in helpers:
        src = f"def {h.name}({', '.join(h.params)}):\n"
        for s in h.body:
            src += "".join("    " + ln + "\n" for ln in s.lines())
        src += f"    return {h.ret}\n"
        exec(src, glb)
        h.fn = glb[h.name]




def gen_program(seed, index):
    r = random.Random(seed * 1_000_003 + index)
    labels = ["d0", "d1", "d2"]
    nargs = r.choice([1, 2, 2, 3, 3])
    specs = []
    for i in range(nargs):
        if i > 0 and r.random() < 0.08:
            specs.append(ArgSpec("scalar", value=r.choice([0.5, -2.0, 3, 7, 1e-3, -0.0, 2**35])))
            continue
        bases = [j for j, s in enumerate(specs) if s.kind == "array"]
        if bases and r.random() < 0.12:  # the same array twice, or an array and a view of it
            j = r.choice(bases)
            views = ALIAS_VIEWS[min(len(specs[j].dims), 2)]
            specs.append(ArgSpec("alias", base=j, view=r.choice(views)))
            continue
        rank = r.choice([0, 1, 1, 2, 2, 2, 3, 3])
        dims = []
        for _ in range(rank):
            dims.append(1 if r.random() < 0.12 else r.choice(labels))
        dt = r.choice(INPUT_DTYPES)
        lay = r.choice(["C", "C", "C", "F", "T", "strided", "neg"])
        specs.append(ArgSpec("array", dt, dims, lay, special=r.random() < 0.25,
                             full_range=r.random() < 0.2))
    # Sizes of set A and set B, each at most MAX_ELEMS elements per input.
    def fits(vals):
        for s in specs:
            if s.kind == "array":
                n = 1
                for d in s.dims:
                    n *= vals[d] if isinstance(d, str) else d
                if n > MAX_ELEMS // 2:
                    return False
        return True

    dims_a = next((v for v in draw_dims(r, labels) if fits(v)), {d: 2 for d in labels})
    dims_b = next((v for v in draw_dims(r, labels, dims_a) if fits(v)), dims_a)
    params = [f"x{i}" for i in range(nargs)]
    inputs = make_inputs(specs, dims_a, seed * 7 + index)
    env = dict(zip(params, inputs))
    inex = {p: False for p in params}
    g = Generator(r, allow_errors=r.random() < 0.5)
    g.group = initial_groups(params, specs)
    stmts = g.gen_body(env, inex, r.randint(1, 9))
    # Return 1-3 values; prefer ones no later statement uses.
    names = list(dict.fromkeys(s.target for s in stmts if s.target in env)) or params[:1]
    used = {a for s in stmts for a in s.args}
    sinks = [n for n in names if n not in used] or names
    k = min(len(sinks), r.choice([1, 1, 2, 3]))
    ret = r.sample(sinks, k)
    if names[-1] not in ret and r.random() < 0.7:
        ret[0] = names[-1]
    ret_tuple = len(ret) > 1 or r.random() < 0.3
    return Program(params, specs, stmts, g.helpers, ret, ret_tuple, dims_a, dims_b,
                   seed * 7 + index)


# ---------------------------------------------------------------------------------------------
# Running and comparing


class Scale:
    value = 0.0  # largest finite magnitude seen
    eps = 0.0  # epsilon of the coarsest float dtype seen


def _measure(v):
    try:
        a = np.asarray(v)
        if a.dtype.kind == "f":
            Scale.eps = max(Scale.eps, float(np.finfo(a.dtype).eps))
        if a.dtype.kind in "fiub" and a.size:
            f = np.abs(a.astype(np.float64)).ravel()
            f = f[np.isfinite(f)]
            if f.size:
                Scale.value = max(Scale.value, float(f.max()))
    except Exception:  # noqa: BLE001
        pass


def load(prog, instrument=False):
    glb = {"_m": _measure, "__name__": "fuzzprog"}
    exec(compile(prog.source(instrument), f"<fuzz {prog.seed}>", "exec"), glb)
    return glb["f"]


def call(fn, args):
    try:
        with np.errstate(all="ignore"):
            return fn(*args), None
    except Exception as e:  # noqa: BLE001
        return None, e


def _eq_bytes(a, b):
    return (type(a) is type(b) and np.shape(a) == np.shape(b)
            and np.asarray(a).dtype == np.asarray(b).dtype
            and np.ascontiguousarray(a).tobytes() == np.ascontiguousarray(b).tobytes())


def compare(exp, act, inexact, tol, path="result"):
    """None if `act` matches `exp` under Note [Exactness], else a message."""
    if type(act) is not type(exp):
        return f"{path}: type {type(act).__name__} != expected {type(exp).__name__}"
    if isinstance(exp, tuple):
        if len(act) != len(exp):
            return f"{path}: length {len(act)} != {len(exp)}"
        for i, (e, a) in enumerate(zip(exp, act)):
            m = compare(e, a, inexact[i], tol, f"{path}[{i}]")
            if m:
                return m
        return None
    if isinstance(exp, (int, bool)) or exp is None:
        return None if exp == act else f"{path}: {act!r} != {exp!r}"
    e, a = np.asarray(exp), np.asarray(act)
    if e.dtype != a.dtype:
        return f"{path}: dtype {a.dtype} != {e.dtype}"
    if e.shape != a.shape:
        return f"{path}: shape {a.shape} != {e.shape}"
    if e.dtype.kind not in "fc":
        if not np.array_equal(e, a):
            return f"{path}: values differ\n actual={a!r}\n expected={e!r}"
        return None
    e64, a64 = e.astype(np.float64), a.astype(np.float64)
    en, an = np.isnan(e64), np.isnan(a64)
    if not np.array_equal(en, an):
        return f"{path}: NaN positions differ\n actual={a!r}\n expected={e!r}"
    if not inexact:
        ok = (e64 == a64) | en
        if not ok.all():
            return f"{path}: values differ (exact)\n actual={a!r}\n expected={e!r}"
        return None
    # An inexact float32 value cast to float64 carries float32's error: use the coarsest eps.
    scale, eps_seen, n, linear = tol
    eps = max(float(np.finfo(e.dtype).eps), eps_seen)
    atol = eps * scale * (32 + (n if linear else 4 * math.sqrt(n)))
    rtol = 64 * eps
    with np.errstate(all="ignore"):
        fin = np.isfinite(e64) & np.isfinite(a64)
        inf_ok = (e64 == a64) | fin | en
        diff = np.abs(a64 - e64)
        ok = inf_ok & (~fin | (diff <= atol + rtol * np.abs(e64)))
    if not ok.all():
        i = np.argmin(ok.ravel())
        return (f"{path}: values differ beyond tolerance (atol={atol:.3g}, rtol={rtol:.3g}; first "
                f"at flat index {i}: {a64.ravel()[i]!r} vs {e64.ravel()[i]!r})\n"
                f" actual={a!r}\n expected={e!r}")
    return None


class Unsupported(str):
    """run_program's answer for a program the device does not run yet (not a mismatch)."""


def to_device(args, specs, framejit, device):
    """`args` for the compiled side: arrays as framejit.Tensors on `device` (None: as they are).
    An aliasing argument is the same view of its base's Tensor, so writes through one show in the
    other on the device too."""
    if device is None:
        return args
    out = []
    for x, s in zip(args, specs):
        if s.kind == "alias" and isinstance(out[s.base], framejit.Tensor):
            out.append(eval(f"_x{s.view}", {"_x": out[s.base]}))  # noqa: S307 - our own text
        else:
            out.append(framejit.tensor(x, device=device) if isinstance(x, np.ndarray) else x)
    return out


def from_device(v, framejit, like):
    """A compiled result or argument as NumPy would hold it: Tensors as arrays, and a 0-d array
    as a NumPy scalar where NumPy gave one (`like`)."""
    if isinstance(v, tuple):
        return tuple(from_device(x, framejit, like[i] if isinstance(like, tuple) and i < len(like) else None)
                     for i, x in enumerate(v))
    if isinstance(v, framejit.Tensor):
        v = np.asarray(v.cpu())
        if isinstance(like, np.generic) and v.ndim == 0:
            v = v[()]
    return v


def device_declined(exc):
    """Whether the compiled side's exception says the device does not run this yet."""
    if isinstance(exc, NotImplementedError):
        return True
    # The Tensor type lacks the method, the write or the NumPy function (its protocols declined).
    text = str(exc)
    if isinstance(exc, (TypeError, AttributeError)) and any(
            k in text for k in ("__array_function__", "__array_ufunc__", "framejit.Tensor", "'Tensor' object")):
        return True
    # A device Tensor refuses what only host memory can do (numpy(), the buffer protocol), as
    # torch's CUDA tensors do.
    return isinstance(exc, (RuntimeError, BufferError)) and "needs a cpu tensor" in text or (
        isinstance(exc, BufferError) and "only cpu tensors" in text)


class TensorSemantics(str):
    """run_program's answer for a device program whose compiled result is framejit.Tensor's own
    eager one where that differs from NumPy's (Note [Tensor semantics in the fuzzer])."""


# Note [Tensor semantics in the fuzzer]
# framejit.Tensor is not an ndarray in two ways a NumPy program can see: its dtype rules are
# NumPy 2's (NEP 50), and an integer index or a full reduction gives a 0-d Tensor (a view that a
# later write shows through, that `+=` updates in place) where NumPy 1.24 gives an immutable
# scalar. With --device, a program whose compiled result differs from NumPy's is run once more
# in CPython on CPU Tensors: if the compiled result matches that eager Tensor run, the difference
# is the Tensor type's, counted apart in the summary, not a failure. On cuda the eager run is
# another backend (x86 one-op graphs), so a device bug does not hide behind it.


def check_call(where, want, want_exc, got, got_exc, ref_args, args, prog, inexact, tol, device):
    """None when the compiled call (got, got_exc, args after it) matches the reference's."""
    taint = prog.taints()
    if want_exc is not None:
        if got_exc is None:
            return f"{where}: CPython raised {type(want_exc).__name__}: {want_exc}, " \
                   f"compiled returned {got!r}"
        # framejit.Tensor raises the builtin base of NumPy's own exception classes
        # (TypeError for NumPy's UFuncTypeError): it works without NumPy.
        same = type(got_exc) is type(want_exc) or (
            device is not None and type(got_exc).__module__ == "builtins" and isinstance(want_exc, type(got_exc)))
        if not same:
            return f"{where}: CPython raised {type(want_exc).__name__}: {want_exc}, " \
                   f"compiled raised {type(got_exc).__name__}: {got_exc}"
    elif got_exc is not None:
        tb = "".join(traceback.format_exception(got_exc)[-6:])
        return f"{where}: compiled raised {type(got_exc).__name__}: {got_exc}\n{tb}"
    else:
        msg = compare(want, got, inexact, tol)
        if msg:
            return f"{where}: {msg}"
    # The arguments after the call, also after an exception: programs write into inputs
    # (and through aliases), and whatever CPython wrote before raising must be there too.
    for i, (x0, x1) in enumerate(zip(ref_args, args)):
        if is_array(x0):
            msg = compare(x0, x1, taint.get(prog.params[i], False), tol, f"argument {prog.params[i]} after the call")
            if msg:
                return f"{where}: {msg}"
    return None


def run_program(prog, framejit, backend, ref=None, device=None, mode=None):
    """Runs `prog` on its three calls; returns None, a mismatch message, Unsupported or
    TensorSemantics."""
    taint = prog.taints()
    inexact = [taint.get(n, False) for n in prog.ret]
    if not prog.ret_tuple:
        inexact = inexact[0]
    # A product's rounding errors add up linearly in its length, a sum's like a random walk.
    linear = "prod" in prog.source()
    ref_fn = load(prog, instrument=True)
    fn = load(prog)
    cf = framejit.compile(fn, backend=backend, **({"mode": mode} if mode else {}))
    for label, dims in (("A cold", prog.dims_a), ("A hit", prog.dims_a), ("B", prog.dims_b)):
        seed = prog.seed if label != "B" else prog.seed + 1
        Scale.value = Scale.eps = 0.0
        ref_args = make_inputs(prog.specs, dims, seed)
        for x in ref_args:
            _measure(x)
        n = max([np.size(x) for x in ref_args] + [1])
        want, want_exc = call(ref_fn, ref_args)
        tol = (Scale.value, Scale.eps, n, linear)  # after the reference run measured its values
        args = to_device(make_inputs(prog.specs, dims, seed), prog.specs, framejit, device)
        got, got_exc = call(cf, args)
        where = f"call {label} (sizes {dims})"
        if device is not None:
            if got_exc is not None and device_declined(got_exc):
                return Unsupported(f"{where}: {type(got_exc).__name__}: {got_exc}")
            got = from_device(got, framejit, want)
            args = [from_device(x, framejit, x0) for x, x0 in zip(args, ref_args)]
        msg = check_call(where, want, want_exc, got, got_exc, ref_args, args, prog, inexact, tol, device)
        if msg and device is not None:
            # Note [Tensor semantics in the fuzzer]
            t_args = to_device(make_inputs(prog.specs, dims, seed), prog.specs, framejit, "cpu")
            t_want, t_exc = call(fn, t_args)
            t_want = from_device(t_want, framejit, want)
            t_args = [from_device(x, framejit, x0) for x, x0 in zip(t_args, ref_args)]
            if not check_call(where, t_want, t_exc, got, got_exc, t_args, args, prog, inexact, tol, device):
                return TensorSemantics(f"{msg}\n(the compiled result is framejit.Tensor's eager one)")
        if msg:
            return msg
    return None


# ---------------------------------------------------------------------------------------------
# Reduction (delta debugging)


def reduce_program(prog, fails):
    """Greedy delta debugging: drop statements, return values and helper calls; replace
    operands by inputs or earlier values; make inputs plain; repeat while anything helps."""
    best = prog
    changed = True
    while changed:
        changed = False
        # Drop statements, last first (later ones depend on earlier ones).
        i = len(best.stmts) - 1
        while i >= 0:
            cand = best.copy()
            del cand.stmts[i]
            if fails(cand):
                best, changed = cand, True
            i -= 1
        # Drop return values.
        for j in range(len(best.ret) - 1, -1, -1):
            if len(best.ret) > 1:
                cand = best.copy(ret=best.ret[:j] + best.ret[j + 1:])
                if fails(cand):
                    best, changed = cand, True
        if best.ret_tuple and len(best.ret) == 1:
            cand = best.copy(ret_tuple=False)
            if fails(cand):
                best, changed = cand, True
        # Replace operands by inputs (or earlier values).
        for si in range(len(best.stmts)):
            for slot in range(len(best.stmts[si].args)):
                earlier = list(best.params) + [s.target for s in best.stmts[:si]]
                for name in earlier:
                    if name == best.stmts[si].args[slot]:
                        break
                    cand = best.copy()
                    cand.stmts[si].args[slot] = name
                    if slot in cand.stmts[si].exact_slots and cand.taints().get(name):
                        continue
                    if fails(cand):
                        best, changed = cand, True
                        break
        # Plain inputs: C order, no special values.
        for k, s in enumerate(best.specs):
            if s.kind == "array" and (s.layout != "C" or s.special or s.full_range):
                for attr, val in (("layout", "C"), ("special", False), ("full_range", False)):
                    if getattr(s, attr) == val:
                        continue
                    ns = ArgSpec(s.kind, s.dtype, s.dims, s.layout, s.special, s.full_range,
                                 s.value)
                    setattr(ns, attr, val)
                    specs = list(best.specs)
                    specs[k] = ns
                    cand = best.copy(specs=specs)
                    if fails(cand):
                        best, changed, s = cand, True, ns
    return best


def _ref_broken(prog):
    """Whether a reduction candidate is no program any more: it reads a variable whose
    statement was dropped (even where CPython raises something else before it gets there)."""
    defined = set(prog.params)
    for s in prog.stmts:
        if any(a not in defined for a in s.args) or (s.mode == "write" and s.target not in defined):
            return True
        if s.mode == "assign":
            defined.add(s.target)
    return any(n not in defined for n in prog.ret)


def report(prog, msg, seed, index, backend):
    lines = [f"=== MISMATCH: seed {seed} program {index} backend {backend}",
             f"replay: tests/fuzz/run.py --seed {seed} --replay {index} --backend {backend}",
             prog.source().rstrip(),
             "# inputs, set A: " + "; ".join(
                 f"{p}: {s.describe(prog.dims_a)}" for p, s in zip(prog.params, prog.specs)),
             "# inputs, set B: " + "; ".join(
                 f"{p}: {s.describe(prog.dims_b)}" for p, s in zip(prog.params, prog.specs)),
             f"# input value seed {prog.seed} (set B: {prog.seed + 1})"]
    small = make_inputs(prog.specs, prog.dims_a, prog.seed)
    if all(np.size(x) <= 32 for x in small):
        with np.printoptions(threshold=64, floatmode="unique"):
            for p, x in zip(prog.params, small):
                lines.append(f"# {p} = {x!r}")
    lines.append(msg.rstrip())
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--count", type=int, default=1000)
    ap.add_argument("--backend", default="jit", choices=["jit", "eager"])
    ap.add_argument("--time-budget", type=float, default=None)
    ap.add_argument("--replay", type=int, default=None, help="run only this program index")
    ap.add_argument("--max-failures", type=int, default=1)
    ap.add_argument("--skip", default="", help="comma-separated program indices not to run "
                    "(known framejit bugs a fixed-seed run must step over; see test_fuzz.py)")
    ap.add_argument("--no-reduce", action="store_true")
    ap.add_argument("-v", "--verbose", action="store_true", help="print every program")
    ap.add_argument("--device", default="numpy", choices=["numpy", "cpu", "cuda"],
                    help="what the compiled side takes: NumPy arrays, or framejit.Tensors on a device")
    ap.add_argument("--mode", default=None, choices=["default", "reduce-overhead"],
                    help="framejit.compile's mode (reduce-overhead: device runs replay CUDA graphs)")
    opt = ap.parse_args(argv)

    import framejit

    device = None if opt.device == "numpy" else opt.device
    if device == "cuda" and not framejit.cuda.is_available():
        print(f"fuzz: no CUDA device: {framejit.cuda.why_unavailable()}", flush=True)
        return 2

    warnings.simplefilter("ignore")
    start = time.monotonic()
    skip = {int(i) for i in opt.skip.split(",") if i.strip()}
    indices = [opt.replay] if opt.replay is not None else \
        [i for i in range(opt.count) if i not in skip]
    failures = ran = raising = unsupported = tensor_semantics = 0
    stats = {"graph_breaks": 0, "extern_calls": 0, "captured": 0, "loops": 0}
    for index in indices:
        if opt.time_budget is not None and time.monotonic() - start > opt.time_budget:
            break
        if ran % RESET_EVERY == 0:
            st = framejit.stats()
            for k in stats:
                stats[k] += st.get(k, 0)
            framejit.reset()
        prog = gen_program(opt.seed, index)
        if opt.verbose:
            print(f"--- program {index}\n{prog.source()}", flush=True)
        ran += 1
        msg = run_program(prog, framejit, opt.backend, device=device, mode=opt.mode)
        if msg is None:
            continue
        if isinstance(msg, Unsupported):
            unsupported += 1
            if opt.verbose:
                print(f"    unsupported on {device}: {msg}", flush=True)
            continue
        if isinstance(msg, TensorSemantics):
            tensor_semantics += 1
            if opt.verbose:
                print(f"    framejit.Tensor's semantics, not NumPy's: {msg}", flush=True)
            continue
        failures += 1
        if not opt.no_reduce:
            def fails(p):
                try:
                    if _ref_broken(p):
                        return False
                    m = run_program(p, framejit, opt.backend, device=device, mode=opt.mode)
                    return m is not None and not isinstance(m, (Unsupported, TensorSemantics))
                except Exception:  # noqa: BLE001 - a broken reduction candidate
                    return False
            small = reduce_program(prog, fails)
            msg = run_program(small, framejit, opt.backend, device=device, mode=opt.mode) or msg
            prog = small
        print(report(prog, msg, opt.seed, index, opt.backend), flush=True)
        if failures >= opt.max_failures:
            break
    st = framejit.stats()
    for k in stats:
        stats[k] += st.get(k, 0)
    elapsed = time.monotonic() - start
    rate = ran / elapsed * 60 if elapsed > 0 else 0.0
    on = "" if device is None else (f" device {device} ({unsupported} of them unsupported there, "
                                    f"{tensor_semantics} framejit.Tensor's semantics)")
    print(f"fuzz: seed {opt.seed} backend {opt.backend}{on}: {ran} programs in {elapsed:.1f} s "
          f"({rate:.0f}/min), {failures} failure(s); graphs {stats['captured']}, "
          f"graph breaks {stats['graph_breaks']}, extern calls {stats['extern_calls']}, "
          f"compiled loops {stats['loops']}",
          flush=True)
    if opt.mode == "reduce-overhead":  # Note [Replayed launches]: how many runs were graph replays
        print("fuzz: CUDA graphs " + ", ".join(f"{k[5:]} {v}" for k, v in st.items() if k.startswith("cuda_graph")),
              flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
