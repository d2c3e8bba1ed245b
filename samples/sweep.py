"""Issue 16's sweep: framejit against NumPy over op families x shapes x layouts x dtypes, NumPy and
framejit interleaved case by case, every result checked against NumPy's. Prints every case, the
worst ten and the count below 0.9x, and an accuracy section (float sums against math.fsum).

    PYTHONPATH=build/python python3 samples/sweep.py            # as part of `make bench`
    PYTHONPATH=build/python python3 samples/bench.py sweep
    PYTHONPATH=build/python python3 samples/sweep.py --held-out  # cases nobody tuned for

The held-out set (held_out_cases) uses shapes, layouts and ops that cases() does not: a check
that the tuning did not overfit the sweep. Nobody tunes against it; add cases, never tune.

Ratios are NumPy's time over framejit's (above 1: framejit faster): the median of per-round
ratios, each round timing both back to back. Targets (issue 16): no case below 0.9x, geometric
mean >= 2x, no wrong result; every float sum within 2x NumPy's error + 1 ulp."""

from __future__ import annotations

import argparse
import math
import re
import statistics
import time

import numpy as np

from harness import Contender, CorrectnessError, Row, at_least, at_most, calls_for, interleave, progress

NAME = "sweep"
ROUNDS = 7
BATCH_S = 0.004  # about this long per contender per round
MIN_RATIO = 0.9
GEOMEAN_TARGET = 2.0


# ---- layouts --------------------------------------------------------------------------------------


def layout(a: np.ndarray, kind: str) -> np.ndarray:
    """`a`'s values (or a view of some of them) in the named memory layout."""
    if kind == "C":
        return a
    if kind == "F":
        return np.asfortranarray(a)
    if kind == "T":  # a C array of the transposed shape, seen transposed
        return np.ascontiguousarray(a.T).T
    if kind == "strided":  # every other element along the last axis of a twice-as-wide array
        wide = np.repeat(a, 2, axis=-1)
        return wide[..., ::2]
    if kind == "neg":
        return a[..., ::-1]
    if kind == "cols3":  # every third column of a thrice-as-wide array: x[:, ::3]
        return np.repeat(a, 3, axis=-1)[..., ::3]
    if kind == "rows2":  # every other row of a twice-as-tall array: x[::2]
        return np.repeat(a, 2, axis=0)[::2]
    if kind == "negrow":  # a negative stride on the first axis, unlike "neg"'s last: x[::-1]
        return np.ascontiguousarray(a[::-1])[::-1]
    raise ValueError(kind)


def data(shape, dtype, seed=0):
    rng = np.random.default_rng(seed)
    if np.dtype(dtype).kind == "b":  # half True: any/all and masks then depend on every element
        return rng.random(shape) < 0.5
    if np.dtype(dtype).kind == "u":  # no wrap-around from negative values
        return rng.integers(0, 100, shape).astype(dtype)
    if np.dtype(dtype).kind == "f":
        return (rng.standard_normal(shape) * 2).astype(dtype)
    return rng.integers(-50, 50, shape).astype(dtype)


# ---- cases ---------------------------------------------------------------------------------------


class Case:
    def __init__(self, family, label, fn, args, rtol=2e-5, atol=1e-6):
        self.family, self.label, self.fn, self.args = family, label, fn, args
        self.rtol, self.atol = rtol, atol


def softmax(x, axis):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def layernorm(x, axis):
    mu = x.mean(axis=axis, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=axis, keepdims=True)
    return (x - mu) / np.sqrt(var + 1e-5)


def cases() -> list[Case]:
    out = []
    f32, f64 = np.float32, np.float64
    unary = {
        "exp": lambda x: np.exp(x),
        "tanh": lambda x: np.tanh(x),
        "sqrt": lambda x: np.sqrt(np.abs(x)),
        "sin": lambda x: np.sin(x),
    }
    # Unary math: every layout, sizes from 16 to 4 M elements.
    for name, fn in unary.items():
        for dt in (f32, f64):
            for shape in ((16,), (1000, 1000)):
                for lay in ("C", "F", "T", "strided", "neg") if len(shape) == 2 else ("C", "neg"):
                    out.append(Case("unary", f"{name} {np.dtype(dt).name}{list(shape)} {lay}", fn,
                                    (layout(data(shape, dt), lay),)))
        out.append(Case("unary", f"{name} float32[4194304] C", fn, (data((1 << 22,), f32),)))
    z = data((100000, 2), f64)
    out.append(Case("unary", "exp Z[:, 0] of (100000, 2)", lambda z: np.exp(z[:, 0]), (z,)))
    # Binary with broadcasting.
    for dt in (f32, f64):
        for lay in ("C", "F", "T"):
            x = layout(data((1000, 1000), dt), lay)
            row, col = data((1000,), dt, 1), data((1000, 1), dt, 2)
            tag = f"{np.dtype(dt).name}[1000, 1000] {lay}"
            out.append(Case("binary", f"x + row {tag}", lambda x, r: x + r, (x, row)))
            out.append(Case("binary", f"x * col {tag}", lambda x, c: x * c, (x, col)))
            out.append(Case("binary", f"x + x.T {tag}", lambda x: x + x.T, (x,)))
        for n in (16, 1000, 1 << 20):
            a, b = data((n,), dt), data((n,), dt, 1)
            out.append(Case("binary", f"a * b + 1 {np.dtype(dt).name}[{n}]", lambda a, b: a * b + 1, (a, b)))
    # where, casts, fused chains.
    for lay in ("C", "F", "T", "strided"):
        x = layout(data((1000, 1000), f32), lay)
        out.append(Case("where", f"where(x > 0, x, 0.1 x) float32 {lay}", lambda x: np.where(x > 0, x, 0.1 * x), (x,)))
        out.append(Case("cast", f"astype(float64) float32 {lay}", lambda x: x.astype(np.float64), (x,)))
        out.append(Case("cast", f"astype(int32) float32 {lay}", lambda x: x.astype(np.int32), (x,)))
        out.append(Case("chain", f"gelu-like float32 {lay}",
                        lambda x: 0.5 * x * (1 + np.tanh(0.79788456 * (x + 0.044715 * x * x * x))), (x,)))
    for dt in (np.int32, np.int64):
        i = data((1000, 1000), dt)
        out.append(Case("binary", f"i * 3 + 1 {np.dtype(dt).name}", lambda i: i * 3 + 1, (i,)))
    # Reductions over every axis, with keepdims, and arg-reductions.
    for dt in (f32, f64):
        for shape in ((1000, 1000), (100000, 2), (2, 100000), (100000, 8)):
            for lay in ("C", "F"):
                x = layout(data(shape, dt), lay)
                tag = f"{np.dtype(dt).name}{list(shape)} {lay}"
                for axis in (None, 0, 1):
                    out.append(Case("reduce", f"sum axis={axis} {tag}", lambda x, a=axis: x.sum(axis=a), (x,),
                                    rtol=1e-4, atol=1e-3))
                out.append(Case("reduce", f"mean axis=-1 keepdims {tag}",
                                lambda x: x.mean(axis=-1, keepdims=True), (x,), rtol=1e-4, atol=1e-4))
                out.append(Case("reduce", f"max axis=0 {tag}", lambda x: x.max(axis=0), (x,)))
                out.append(Case("argreduce", f"argmax axis=1 {tag}", lambda x: np.argmax(x, axis=1), (x,)))
    for shape in ((1000, 1000), (100000, 8)):
        i = data(shape, np.int64)
        out.append(Case("reduce", f"int64 sum axis=1 {list(shape)}", lambda i: i.sum(axis=1), (i,)))
    x1 = data((1 << 20,), f32)
    out.append(Case("argreduce", "argmax float32[1048576]", lambda x: np.argmax(x), (x1,)))
    out.append(Case("reduce", "var float32[1048576]", lambda x: x.var(), (x1,), rtol=1e-4))
    # Row-wise chains on both axes, C and Fortran order.
    for lay in ("C", "F"):
        x = layout(data((1000, 1000), f32), lay)
        for axis in (-1, 0):
            out.append(Case("rows", f"softmax axis={axis} float32 {lay}", lambda x, a=axis: softmax(x, a), (x,),
                            rtol=1e-4, atol=1e-6))
            out.append(Case("rows", f"layernorm axis={axis} float32 {lay}", lambda x, a=axis: layernorm(x, a), (x,),
                            rtol=1e-3, atol=1e-4))
    # Matrix products of awkward shapes.
    for dt in (f32, f64):
        tag = np.dtype(dt).name
        for (m, k, n) in ((256, 256, 256), (100000, 2, 3), (8, 4096, 8), (1000, 1000, 1), (4, 4, 4), (16, 512, 512)):
            a, b = data((m, k), dt), data((k, n), dt, 1)
            out.append(Case("matmul", f"({m}, {k}) @ ({k}, {n}) {tag}", lambda a, b: a @ b, (a, b),
                            rtol=1e-4, atol=1e-3 * math.sqrt(k)))
        A, v = data((1000, 1000), dt), data((1000,), dt, 1)
        out.append(Case("matmul", f"A @ v (1000, 1000) {tag}", lambda A, v: A @ v, (A, v), rtol=1e-4, atol=1e-2))
        out.append(Case("matmul", f"v @ A (1000, 1000) {tag}", lambda A, v: v @ A, (A, v), rtol=1e-4, atol=1e-2))
        out.append(Case("matmul", f"dot v . v (1000,) {tag}", lambda v: v @ v, (v,), rtol=1e-4, atol=1e-2))
        bA, bB = data((64, 8, 8), dt), data((64, 8, 8), dt, 1)
        out.append(Case("matmul", f"batched (64, 8, 8) @ (64, 8, 8) {tag}", lambda a, b: a @ b, (bA, bB),
                        rtol=1e-4, atol=1e-3))
    # Views read by kernels.
    x = data((1000, 1000), f32)
    out.append(Case("views", "x.T * 1 float32", lambda x: x.T * 1, (x,)))
    out.append(Case("views", "x[1:-1, ::2] + 1 float32", lambda x: x[1:-1, ::2] + 1, (x,)))
    out.append(Case("views", "x.reshape(500, 2000) * 2 float32", lambda x: x.reshape(500, 2000) * 2, (x,)))
    out.append(Case("views", "x[::-1] * 2 float32", lambda x: x[::-1] * 2, (x,)))
    return out


def logsumexp(x, axis):
    m = x.max(axis=axis, keepdims=True)
    return m + np.log(np.exp(x - m).sum(axis=axis, keepdims=True))


def sum_tol(n: int) -> dict:
    """Tolerances for a float sum of n terms: a summation order other than NumPy's pairwise one
    differs by a few ulps of the partial sums, which grow like sqrt(n) for our zero-mean data."""
    return {"rtol": 1e-4, "atol": 1e-3 * math.sqrt(n)}


def held_out_cases() -> list[Case]:
    """Cases nobody tuned framejit for: shapes, layouts, dtypes and ops that cases() does not use
    (odd sizes, one-row and one-column arrays, 3-D arrays, tiny and medium sizes, every-third-column
    and every-other-row views, negative first-axis strides, integer and bool data)."""
    out = []
    f32, f64, i32, i64, u8, b = np.float32, np.float64, np.int32, np.int64, np.uint8, np.bool_
    M, N = 777, 333  # neither a multiple of any vector width nor of a thread's block

    def tag(dt, shape, lay=""):
        return f"{np.dtype(dt).name}{list(shape)}{' ' + lay if lay else ''}"

    def add(family, label, fn, *args, **tol):
        out.append(Case(family, label, fn, args, **tol))

    # Unary math; np.log's inputs kept positive, so NaNs from negative inputs don't hide wrong values.
    unary = (
        ("log", lambda x: np.log(x), ((f32, (M, N), "C"), (f32, (M, N), "F"), (f64, (3, 50000), "C"),
                                      (f32, (300000,), "C"), (f64, (M, N), "negrow"))),
        ("cos", lambda x: np.cos(x), ((f32, (64, 64, 64), "C"), (f64, (M, N), "T"), (f32, (M, N), "cols3"),
                                      (f32, (5,), "C"))),
        ("expm1", lambda x: np.expm1(x), ((f32, (50000, 5), "C"), (f32, (50000, 5), "F"), (f64, (5,), "C"),
                                          (f64, (1, 4096), "C"))),
        ("abs", lambda x: np.abs(x), ((f32, (M, N), "negrow"), (i32, (M, N), "C"), (i64, (3, 50000), "F"),
                                      (f64, (4096, 1), "C"), (i32, (M, N), "rows2"))),
        ("floor", lambda x: np.floor(x), ((f32, (1, 4096), "C"), (f64, (M, N), "rows2"), (f32, (10, 10), "C"),
                                          (f32, (64, 64, 64), "F"))),
    )
    for name, fn, configs in unary:
        for dt, shape, lay in configs:
            a = np.abs(data(shape, dt)) + 0.1 if name == "log" else data(shape, dt)
            add("unary", f"{name} {tag(dt, shape, lay)}", fn, layout(a, lay))

    # Binary, with broadcasting and every dtype family.
    for dt in (f32, f64):
        col, row = data((M, 1), dt, 1), data((1, N), dt, 2)
        add("binary", f"maximum(col, row) {tag(dt, (M, 1))} x (1, {N})", lambda c, r: np.maximum(c, r), col, row)
        add("where", f"where(col > row, col - row, 0) {tag(dt, (M, 1))} x (1, {N})",
            lambda c, r: np.where(c > r, c - r, 0), col, row)
    x, y = data((M, N), f32), data((M, N), f32, 1)
    for lay in ("C", "F", "negrow"):
        xl, yl = layout(x, lay), layout(y, lay)
        add("binary", f"x / y {tag(f32, (M, N), lay)}", lambda x, y: x / y, xl, yl)
        add("binary", f"x > y {tag(f32, (M, N), lay)}", lambda x, y: x > y, xl, yl)
        add("where", f"where(x > y, x, y) {tag(f32, (M, N), lay)}", lambda x, y: np.where(x > y, x, y), xl, yl)
    add("binary", f"minimum(x, row) {tag(f64, (M, N), 'F')}", lambda x, r: np.minimum(x, r),
        layout(data((M, N), f64), "F"), data((N,), f64, 1))
    add("binary", f"x / col {tag(f64, (50000, 5))}", lambda x, c: x / c, data((50000, 5), f64),
        np.abs(data((50000, 1), f64, 1)) + 0.5)
    add("binary", f"x ** 2 {tag(f32, (64, 64, 64))}", lambda x: x ** 2, data((64, 64, 64), f32))
    add("binary", f"x ** 2 {tag(f64, (300000,))}", lambda x: x ** 2, data((300000,), f64))
    add("binary", f"x[::-1] + y {tag(f32, (M, N))}", lambda x, y: x[::-1] + y, x, y)
    add("binary", f"x * 2 {tag(f32, (5,))}", lambda x: x * 2, data((5,), f32))
    add("binary", f"x + 1 {tag(f64, (1, 4096))}", lambda x: x + 1, data((1, 4096), f64))
    add("binary", f"x + 1 {tag(f64, (4096, 1))}", lambda x: x + 1, data((4096, 1), f64))
    add("binary", f"x - y {tag(f32, (10, 10), 'T')}", lambda x, y: x - y, layout(data((10, 10), f32), "T"),
        data((10, 10), f32, 1))
    i, j = data((M, N), i32), data((M, N), i32, 1)
    add("binary", f"i < row {tag(i32, (M, N))}", lambda i, r: i < r, i, data((N,), i32, 2))
    add("binary", f"i / (j + 100) {tag(i32, (M, N))}", lambda i, j: i / (j + 100), i, j)  # true division: float64
    add("where", f"where(i < 0, 0, i) {tag(i32, (M, N), 'F')}", lambda i: np.where(i < 0, 0, i), layout(i, "F"))
    add("binary", f"i == j {tag(i64, (3, 50000))}", lambda i, j: i == j, data((3, 50000), i64),
        data((3, 50000), i64, 1))
    add("binary", f"maximum(i, j) * 3 {tag(i64, (50000, 5), 'F')}", lambda i, j: np.maximum(i, j) * 3,
        layout(data((50000, 5), i64), "F"), layout(data((50000, 5), i64, 1), "F"))
    u, v = data((M, N), u8), data((M, N), u8, 1)
    add("binary", f"u + v (wraps) {tag(u8, (M, N))}", lambda u, v: u + v, u, v)
    add("binary", f"minimum(u, v) {tag(u8, (M, N), 'T')}", lambda u, v: np.minimum(u, v), layout(u, "T"), v)
    p, q = data((M, N), b), data((M, N), b, 1)
    add("binary", f"p & q {tag(b, (M, N))}", lambda p, q: p & q, p, q)
    add("binary", f"p | ~q {tag(b, (M, N), 'F')}", lambda p, q: p | ~q, layout(p, "F"), layout(q, "F"))
    add("binary", f"logical_xor(p, q) {tag(b, (M, N), 'cols3')}", lambda p, q: np.logical_xor(p, q),
        layout(p, "cols3"), q)

    # Casts.
    for lay in ("C", "F", "negrow"):
        add("cast", f"int32 -> float32 {tag(i32, (M, N), lay)}", lambda i: i.astype(np.float32), layout(i, lay))
    for shape, lay in (((M, N), "C"), ((M, N), "T"), ((3, 50000), "C"), ((300000,), "C"), ((M, N), "cols3")):
        add("cast", f"float64 -> float32 {tag(f64, shape, lay)}", lambda x: x.astype(np.float32),
            layout(data(shape, f64), lay))
    for shape in ((M, N), (64, 64, 64)):
        add("cast", f"bool -> int64 {tag(b, shape)}", lambda p: p.astype(np.int64), data(shape, b))
    add("cast", f"uint8 -> float32 {tag(u8, (M, N))}", lambda u: u.astype(np.float32), u)
    add("cast", f"float32 -> bool {tag(f32, (M, N), 'F')}", lambda x: x.astype(bool), layout(x, "F"))
    add("cast", f"int64 -> int32 {tag(i64, (50000, 5))}", lambda i: i.astype(np.int32), data((50000, 5), i64))

    # Fused chains.
    for dt, shape, lay in ((f32, (M, N), "C"), (f32, (M, N), "F"), (f64, (50000, 5), "C")):
        add("chain", f"softplus log1p(exp(x)) {tag(dt, shape, lay)}", lambda x: np.log1p(np.exp(x)),
            layout(data(shape, dt), lay))
    for dt, shape, lay in ((f32, (M, N), "C"), (f32, (M, N), "T"), (f32, (M, N), "cols3"), (f64, (300000,), "C")):
        add("chain", f"sigmoid {tag(dt, shape, lay)}", lambda x: 1 / (1 + np.exp(-x)), layout(data(shape, dt), lay))
    for shape, lay in (((M, N), "C"), ((M, N), "F"), ((3, 50000), "C")):
        add("chain", f"x * x.sum(axis=1, keepdims) {tag(f32, shape, lay)}",
            lambda x: x * x.sum(axis=1, keepdims=True), layout(data(shape, f32), lay), rtol=1e-4, atol=1e-2)
    add("chain", f"clip(x, -1, 1) * 3 {tag(f32, (64, 64, 64))}", lambda x: np.clip(x, -1, 1) * 3,
        data((64, 64, 64), f32))
    add("chain", f"standardize columns {tag(f32, (50000, 5))}",
        lambda x: (x - x.mean(axis=0)) / (x.std(axis=0) + 1e-6), data((50000, 5), f32), rtol=1e-3, atol=1e-3)
    add("chain", f"relu(x @ w + b) {tag(f32, (3000, 4))}", lambda x, w, c: np.maximum(x @ w + c, 0),
        data((3000, 4), f32), data((4, 4), f32, 1), data((4,), f32, 2), rtol=1e-4, atol=1e-4)

    # Reductions.
    for lay in ("C", "F"):
        x = layout(data((M, N), f32), lay)
        t = tag(f32, (M, N), lay)
        for axis, n in ((None, M * N), (0, M), (1, N)):
            add("reduce", f"sum axis={axis} {t}", lambda x, a=axis: x.sum(axis=a), x, **sum_tol(n))
        add("reduce", f"mean axis=-1 keepdims {t}", lambda x: x.mean(axis=-1, keepdims=True), x, rtol=1e-4, atol=1e-4)
        add("reduce", f"min axis=1 {t}", lambda x: x.min(axis=1), x)
        add("reduce", f"max axis=None {t}", lambda x: x.max(), x)
        add("reduce", f"std axis=1 {t}", lambda x: x.std(axis=1), x, rtol=1e-4, atol=1e-4)
        add("reduce", f"var axis=0 {t}", lambda x: x.var(axis=0), x, rtol=1e-4, atol=1e-4)
    x = data((3, 50000), f64)
    add("reduce", f"sum axis=1 {tag(f64, x.shape)}", lambda x: x.sum(axis=1), x, **sum_tol(50000))
    add("reduce", f"mean axis=0 {tag(f64, x.shape)}", lambda x: x.mean(axis=0), x)
    add("reduce", f"min axis=None {tag(f64, x.shape, 'F')}", lambda x: x.min(), layout(x, "F"))
    x = data((50000, 5), f64)
    for lay in ("C", "F"):
        add("reduce", f"sum axis=0 {tag(f64, x.shape, lay)}", lambda x: x.sum(axis=0), layout(x, lay),
            **sum_tol(50000))
        add("reduce", f"max axis=1 {tag(f64, x.shape, lay)}", lambda x: x.max(axis=1), layout(x, lay))
    cube = data((64, 64, 64), f32)
    t = tag(f32, cube.shape)
    add("reduce", f"sum axis=(0, 2) {t}", lambda x: x.sum(axis=(0, 2)), cube, **sum_tol(4096))
    add("reduce", f"mean axis=(1, 2) {t}", lambda x: x.mean(axis=(1, 2)), cube, rtol=1e-4, atol=1e-5)
    add("reduce", f"max axis=(0, 1) {t}", lambda x: x.max(axis=(0, 1)), cube)
    add("reduce", f"sum axis=1 keepdims {t}", lambda x: x.sum(axis=1, keepdims=True), cube, **sum_tol(64))
    add("reduce", f"std axis=(0, 2) {t}", lambda x: x.std(axis=(0, 2)), cube, rtol=1e-4, atol=1e-5)
    add("reduce", f"sum axis=(0, 2) {tag(f32, cube.shape, 'F')}", lambda x: x.sum(axis=(0, 2)),
        layout(cube, "F"), **sum_tol(4096))
    add("reduce", f"min axis=-1 {tag(f32, cube.shape, 'F')}", lambda x: x.min(axis=-1), layout(cube, "F"))
    # Products of values near 1, so the products neither overflow nor underflow.
    add("reduce", f"prod axis=1 {tag(f64, (M, N))}", lambda x: x.prod(axis=1), 1 + 0.001 * data((M, N), f64),
        rtol=1e-10, atol=0)
    add("reduce", f"prod axis=0 {tag(f32, (10, 10))}", lambda x: x.prod(axis=0), 1 + 0.1 * data((10, 10), f32),
        rtol=1e-5, atol=1e-6)
    add("reduce", f"prod {tag(i64, (5,))}", lambda i: i.prod(), data((5,), i64))
    x = data((300000,), f32)
    add("reduce", f"sum {tag(f32, x.shape)}", lambda x: x.sum(), x, **sum_tol(x.size))
    add("reduce", f"mean {tag(f32, x.shape)}", lambda x: x.mean(), x, rtol=1e-4, atol=1e-5)
    add("reduce", f"max {tag(f32, x.shape)}", lambda x: x.max(), x)
    add("reduce", f"sum {tag(f32, (5,))}", lambda x: x.sum(), data((5,), f32))
    add("reduce", f"sum axis=1 {tag(f32, (1, 4096))}", lambda x: x.sum(axis=1), data((1, 4096), f32), **sum_tol(4096))
    add("reduce", f"sum axis=0 {tag(f32, (4096, 1))}", lambda x: x.sum(axis=0), data((4096, 1), f32), **sum_tol(4096))
    add("reduce", f"sum axis=1 {tag(f32, (M, N), 'negrow')}", lambda x: x.sum(axis=1),
        layout(data((M, N), f32), "negrow"), **sum_tol(N))
    add("reduce", f"max axis=0 {tag(f32, (M, N), 'cols3')}", lambda x: x.max(axis=0),
        layout(data((M, N), f32), "cols3"))
    # Integer and bool sums: NumPy accumulates in int64 / uint64, the result dtype must agree.
    add("reduce", f"int sum axis=0 {tag(i32, (M, N))}", lambda i: i.sum(axis=0), data((M, N), i32))
    add("reduce", f"int sum {tag(i64, (3, 50000))}", lambda i: i.sum(), data((3, 50000), i64))
    add("reduce", f"int sum axis=1 {tag(u8, (M, N))}", lambda u: u.sum(axis=1), data((M, N), u8))
    add("reduce", f"int max axis=1 {tag(i32, (M, N), 'F')}", lambda i: i.max(axis=1), layout(data((M, N), i32), "F"))
    add("reduce", f"count sum axis=0 {tag(b, (M, N))}", lambda p: p.sum(axis=0), data((M, N), b))
    add("reduce", f"any axis=1 {tag(b, (M, N))}", lambda p: p.any(axis=1), data((M, N), b))
    add("reduce", f"all axis=1 {tag(b, (3000, 4))}", lambda p: p.all(axis=1), data((3000, 4), b))
    add("reduce", f"any {tag(b, (M, N), 'F')}", lambda p: p.any(), layout(data((M, N), b), "F"))
    add("reduce", f"(x > 6).any(axis=0) {tag(f32, (M, N))}", lambda x: (x > 6).any(axis=0), data((M, N), f32))

    # Arg-reductions; int32 data has many ties, where the first index must win.
    for lay in ("C", "F"):
        x = layout(data((M, N), f32), lay)
        for axis in (0, 1):
            add("argreduce", f"argmin axis={axis} {tag(f32, (M, N), lay)}", lambda x, a=axis: np.argmin(x, axis=a), x)
    add("argreduce", f"argmin axis=1 {tag(f64, (50000, 5))}", lambda x: np.argmin(x, axis=1), data((50000, 5), f64))
    add("argreduce", f"argmin axis=1 {tag(i32, (3, 50000))}", lambda i: np.argmin(i, axis=1), data((3, 50000), i32))
    add("argreduce", f"argmin axis=0 {tag(f32, (M, N), 'negrow')}", lambda x: np.argmin(x, axis=0),
        layout(data((M, N), f32), "negrow"))
    add("argreduce", f"argmin {tag(f32, (300000,))}", lambda x: np.argmin(x), data((300000,), f32))

    # Row-wise chains over both axes.
    for lay in ("C", "F"):
        x = layout(data((M, N), f32), lay)
        for axis in (1, 0):
            add("rows", f"softmax axis={axis} {tag(f32, (M, N), lay)}", lambda x, a=axis: softmax(x, a), x,
                rtol=1e-4, atol=1e-6)
            add("rows", f"logsumexp axis={axis} {tag(f32, (M, N), lay)}", lambda x, a=axis: logsumexp(x, a), x,
                rtol=1e-4, atol=1e-5)
    add("rows", f"softmax axis=1 {tag(f64, (50000, 5))}", lambda x: softmax(x, 1), data((50000, 5), f64))

    # Matrix products of shapes cases() doesn't use.
    for dt in (f32, f64):
        nm = np.dtype(dt).name
        for (m, k, n) in ((7, 300, 5), (3000, 4, 4), (5, 5, 300), (333, 777, 3)):
            add("matmul", f"({m}, {k}) @ ({k}, {n}) {nm}", lambda a, b: a @ b, data((m, k), dt), data((k, n), dt, 1),
                rtol=1e-4, atol=1e-3 * math.sqrt(k))
        add("matmul", f"batched (32, 4, 16) @ (32, 16, 4) {nm}", lambda a, b: a @ b, data((32, 4, 16), dt),
            data((32, 16, 4), dt, 1), rtol=1e-4, atol=1e-3 * 4)
        add("matmul", f"dot v . w (100003,) {nm}", lambda v, w: v @ w, data((100003,), dt), data((100003,), dt, 1),
            rtol=1e-4, atol=1e-3 * math.sqrt(100003))
        A = data((N, M), dt)
        add("matmul", f"A.T @ v, A ({N}, {M}) {nm}", lambda A, v: A.T @ v, A, data((N,), dt, 1),
            rtol=1e-4, atol=1e-3 * math.sqrt(N))
    add("matmul", f"A @ v, A ({M}, {N}) F float32", lambda A, v: A @ v, layout(data((M, N), f32), "F"),
        data((N,), f32, 1), rtol=1e-4, atol=1e-3 * math.sqrt(N))

    # Views read by kernels.
    x = data((M, N), f32)
    add("views", f"x[::2, 1::3] * 2 {tag(f32, (M, N))}", lambda x: x[::2, 1::3] * 2, x)
    add("views", f"x.T[1:] + x[:, :-1].T {tag(f32, (M, N))}", lambda x: x.T[1:] + x[:, :-1].T, x)
    add("views", f"x.reshape(-1)[::7] + 1 {tag(f32, (M, N))}", lambda x: x.reshape(-1)[::7] + 1, x)
    add("views", f"x[::-1, ::-1] - 1 {tag(f32, (M, N))}", lambda x: x[::-1, ::-1] - 1, x)
    add("views", f"x[:, 100:200].sum(axis=1) {tag(f32, (M, N))}", lambda x: x[:, 100:200].sum(axis=1), x,
        **sum_tol(100))
    add("views", f"x[::3].T * 2 {tag(f64, (M, N))}", lambda x: x[::3].T * 2, data((M, N), f64))
    return out


# ---- running -------------------------------------------------------------------------------------


def close(got, want, rtol, atol) -> bool:
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape or got.dtype != want.dtype:
        return False
    if want.dtype.kind in "fc":
        return bool(np.allclose(got, want, rtol=rtol, atol=atol, equal_nan=True))
    return bool(np.array_equal(got, want))


def run_case(c: Case) -> dict:
    import framejit

    framejit.reset()
    compiled = framejit.compile(c.fn)
    want = c.fn(*c.args)
    got = compiled(*c.args)
    st = framejit.stats()
    compiled_ok = st["captured"] >= 1 and not st["graph_breaks"]
    if not close(got, want, c.rtol, c.atol):
        raise CorrectnessError(f"sweep: {c.label}: framejit's result differs from NumPy's")
    contenders = [Contender("NumPy", c.fn, c.args), Contender("framejit", compiled, c.args)]
    samples = interleave(contenders, calls=calls_for(contenders, BATCH_S), rounds=ROUNDS, warmup=1)
    ratios = [n / f for n, f in zip(samples["NumPy"], samples["framejit"])]
    return {"family": c.family, "label": c.label, "ratio": statistics.median(ratios),
            "numpy_us": statistics.median(samples["NumPy"]) / 1e3,
            "framejit_us": statistics.median(samples["framejit"]) / 1e3, "compiled": compiled_ok}


# ---- accuracy ------------------------------------------------------------------------------------


def ulp_rel(dtype) -> float:
    return float(np.finfo(dtype).eps)


def accuracy_rows() -> list[Row]:
    """Float sums of adversarial inputs against math.fsum: framejit's relative error within 2x
    NumPy's + 1 ulp."""
    import framejit

    rows = []
    rng = np.random.default_rng(7)
    huge_then_ones = np.concatenate([np.array([1e8], np.float32), np.ones(1_000_000, np.float32)])
    offset_1000 = (1000 + rng.standard_normal(1_000_000)).astype(np.float32)
    inputs = {
        "float32 sum of 4e6 x 0.1": (np.full(4_000_000, 0.1, np.float32), lambda x: x.sum()),
        "float32 mean of 1e6 x 0.1": (np.full(1_000_000, 0.1, np.float32), lambda x: x.mean()),
        "float64 sum of 1e7 x 0.1": (np.full(10_000_000, 0.1, np.float64), lambda x: x.sum()),
        "float32 sum, 1e8 then 1e6 ones": (huge_then_ones, lambda x: x.sum()),
        "float32 sum offset 1000 (1e6)": (offset_1000, lambda x: x.sum()),
        "float32 var offset 100 (4e6)": ((100 + rng.standard_normal(4_000_000)).astype(np.float32), lambda x: x.var()),
    }
    for label, (x, fn) in inputs.items():
        framejit.reset()
        got = float(framejit.compile(fn)(x))
        want_np = float(fn(x))
        x64 = x.astype(np.float64)
        if "var" in label:
            mean = math.fsum(x64.tolist()) / x.size
            exact = math.fsum(((x64 - mean) ** 2).tolist()) / x.size
        elif "mean" in label:
            exact = math.fsum(x64.tolist()) / x.size
        else:
            exact = math.fsum(x64.tolist())
        err_fj, err_np = abs(got - exact) / abs(exact), abs(want_np - exact) / abs(exact)
        limit = 2 * err_np + ulp_rel(x.dtype)
        row = Row(NAME, f"accuracy: {label}", err_fj, "rel", note=f"NumPy {err_np:.2g}")
        row.target, row.met = at_most(err_fj, limit, "")
        rows.append(row)
    return rows


def run(only: str | None = None, held_out: bool = False) -> list[Row]:
    """Every case, or with `only` (a regular expression) the cases whose label it matches, then
    no accuracy section: for looking at a few cases while working on them. With `held_out`, the
    held-out cases instead of the tuned ones, without the accuracy section (it has no held-out
    counterpart), its summary rows named so that they can't be mistaken for the sweep's."""
    source = held_out_cases() if held_out else cases()
    all_cases = [c for c in source if only is None or re.search(only, c.label)]
    prefix = "held-out: " if held_out else ""
    progress(NAME, f"{prefix}{len(all_cases)} cases, NumPy and framejit interleaved, {ROUNDS} rounds each")
    results = []
    start = time.perf_counter()
    for k, c in enumerate(all_cases):
        results.append(run_case(c))
        if (k + 1) % 25 == 0:
            progress(NAME, f"{k + 1} cases in {time.perf_counter() - start:.0f} s")
    progress(NAME, f"{prefix}{len(results)} cases in {time.perf_counter() - start:.1f} s")
    print(f"\n{'case':58s} {'NumPy µs':>10s} {'framejit µs':>12s} {'ratio':>7s}")
    for r in results:
        flag = "" if r["compiled"] else "  (graph break: CPython)"
        print(f"{r['label']:58s} {r['numpy_us']:10.1f} {r['framejit_us']:12.1f} {r['ratio']:7.2f}{flag}")
    worst = sorted(results, key=lambda r: r["ratio"])[:10]
    print("\nworst ten:")
    for r in worst:
        print(f"  {r['ratio']:5.2f}  {r['label']}")
    below = [r for r in results if r["ratio"] < MIN_RATIO]
    geomean = math.exp(statistics.fmean(math.log(r["ratio"]) for r in results))
    families = sorted({r["family"] for r in results})
    for fam in families:
        rs = [r["ratio"] for r in results if r["family"] == fam]
        print(f"  {fam:10s} {len(rs):4d} cases, geometric mean {math.exp(statistics.fmean(map(math.log, rs))):.2f}, "
              f"below {MIN_RATIO}: {sum(x < MIN_RATIO for x in rs)}")

    rows = []
    row = Row(NAME, f"{prefix}geometric mean speedup over NumPy ({len(results)} cases)", geomean, "×",
              note=f"worst {worst[0]['ratio']:.2f} ({worst[0]['label']})")
    row.target, row.met = at_least(geomean, GEOMEAN_TARGET, "×")
    rows.append(row)
    row = Row(NAME, f"{prefix}cases below {MIN_RATIO}x NumPy", len(below), "cases",
              note="; ".join(f"{r['label']} {r['ratio']:.2f}" for r in worst[:3]))
    row.target, row.met = at_most(len(below), 0, "")
    rows.append(row)
    for r in worst:
        rows.append(Row(NAME, f"{prefix}worst: {r['label']}", r["ratio"], "×"))
    if only is None and not held_out:
        progress(NAME, "accuracy of float sums against math.fsum")
        rows += accuracy_rows()
    return rows


if __name__ == "__main__":
    import harness

    ap = argparse.ArgumentParser(description="framejit vs NumPy over shapes, layouts and dtypes")
    ap.add_argument("--only", help="run only the cases whose label matches this regular expression")
    ap.add_argument("--held-out", action="store_true", help="run the held-out cases (none tuned for) instead")
    args = ap.parse_args()
    out = run(args.only, held_out=args.held_out)
    print()
    print(harness.markdown_table(out))
