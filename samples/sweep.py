"""Issue 16's sweep: framejit against NumPy over op families x shapes x layouts x dtypes, NumPy and
framejit interleaved case by case, every result checked against NumPy's. Prints every case, the
worst ten and the count below 0.9x, and an accuracy section (float sums against math.fsum).

    PYTHONPATH=build/python python3 samples/sweep.py            # as part of `make bench`
    PYTHONPATH=build/python python3 samples/bench.py sweep

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
    raise ValueError(kind)


def data(shape, dtype, seed=0):
    rng = np.random.default_rng(seed)
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


def run(only: str | None = None) -> list[Row]:
    """Every case, or with `only` (a regular expression) the cases whose label it matches, then
    no accuracy section: for looking at a few cases while working on them."""
    all_cases = [c for c in cases() if only is None or re.search(only, c.label)]
    progress(NAME, f"{len(all_cases)} cases, NumPy and framejit interleaved, {ROUNDS} rounds each")
    results = []
    start = time.perf_counter()
    for k, c in enumerate(all_cases):
        results.append(run_case(c))
        if (k + 1) % 25 == 0:
            progress(NAME, f"{k + 1} cases in {time.perf_counter() - start:.0f} s")
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
    row = Row(NAME, f"geometric mean speedup over NumPy ({len(results)} cases)", geomean, "×",
              note=f"worst {worst[0]['ratio']:.2f} ({worst[0]['label']})")
    row.target, row.met = at_least(geomean, GEOMEAN_TARGET, "×")
    rows.append(row)
    row = Row(NAME, f"cases below {MIN_RATIO}x NumPy", len(below), "cases",
              note="; ".join(f"{r['label']} {r['ratio']:.2f}" for r in worst[:3]))
    row.target, row.met = at_most(len(below), 0, "")
    rows.append(row)
    for r in worst:
        rows.append(Row(NAME, f"worst: {r['label']}", r["ratio"], "×"))
    if only is None:
        progress(NAME, "accuracy of float sums against math.fsum")
        rows += accuracy_rows()
    return rows


if __name__ == "__main__":
    import harness

    ap = argparse.ArgumentParser(description="framejit vs NumPy over shapes, layouts and dtypes")
    ap.add_argument("--only", help="run only the cases whose label matches this regular expression")
    out = run(ap.parse_args().only)
    print()
    print(harness.markdown_table(out))
