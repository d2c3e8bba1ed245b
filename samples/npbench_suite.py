"""NPBench (github.com/spcl/npbench) preset S, run from a checkout of it: every kernel's NumPy
version run by NumPy, by framejit.compile, and its Numba version (`*_numba_n.py`, nopython), each
call on fresh copies of the inputs as NPBench does, interleaved. Issue 15's target: framejit's
geometric-mean speedup over NumPy at least Numba's, in the same run.

NPBench's code is not part of this repository: point NPBENCH_DIR at a checkout (its `npbench/`
and `bench_info/` folders; tools/fetch_npbench.sh clones one where there is a network). Without
one the benchmark reports n/a."""

import importlib
import json
import math
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

import framejit
from harness import CorrectnessError, Row, at_least, progress

NAME = "npbench"
PRESET = "S"
ROUNDS = 7
BUDGET_S = 3.0  # per contender and kernel: fewer rounds for the slow ones
RTOL, ATOL = 1e-5, 1e-8  # NPBench's own validation is looser (its default rtol is 1e-5 too)


def checkout() -> Path | None:
    for p in (os.environ.get("NPBENCH_DIR"), Path(__file__).resolve().parents[1] / "build" / "npbench"):
        if p and (Path(p) / "bench_info").is_dir() and (Path(p) / "npbench").is_dir():
            return Path(p)
    return None


def fresh(args, arrays):
    return [a.copy() if name in arrays and isinstance(a, np.ndarray) else a for name, a in args]


def outputs(fn, args, arrays, out_names):
    """fn's return value and the arrays it writes (NPBench's output_args), on fresh copies."""
    a = fresh(args, arrays)
    r = fn(*a)
    names = [n for n, _ in args]
    return r, [a[names.index(o)] for o in out_names if o in names]


def close(got, want) -> bool:
    if isinstance(want, (tuple, list)):
        return isinstance(got, (tuple, list)) and len(got) == len(want) and all(map(close, got, want))
    if want is None or got is None:
        return want is None and got is None
    g, w = np.asarray(got), np.asarray(want)
    if g.shape != w.shape:
        return False
    if g.dtype.kind in "fc" or w.dtype.kind in "fc":
        return bool(np.allclose(g, w, rtol=RTOL, atol=ATOL, equal_nan=True))
    return bool(np.array_equal(g, w))


def load(root: Path, info: dict):
    """(init module, NumPy kernel, Numba kernel or None, args, array names, output names)."""
    rel = info["relative_path"].replace("/", ".")
    mod = info["module_name"]
    base = f"npbench.benchmarks.{rel}.{mod}"
    init_mod = importlib.import_module(base)
    kernel = getattr(importlib.import_module(base + "_numpy"), info["func_name"])
    try:
        numba_kernel = getattr(importlib.import_module(base + "_numba_n"), info["func_name"])
    except Exception:  # Numba missing, or no such version
        numba_kernel = None
    ctx = dict(info["parameters"][PRESET])
    init = info["init"]
    made = getattr(init_mod, init["func_name"])(*[ctx[a] for a in init["input_args"]])
    if len(init["output_args"]) == 1:
        made = (made,)
    ctx.update(zip(init["output_args"], made))
    args = [(a, ctx[a]) for a in info["input_args"]]
    return kernel, numba_kernel, args, set(info.get("array_args", [])), info.get("output_args", [])


def timed(fn, args, arrays) -> float:
    a = fresh(args, arrays)
    t0 = time.perf_counter()
    fn(*a)
    return time.perf_counter() - t0


def interleaved(contenders, args, arrays, rounds=ROUNDS, budget_s=BUDGET_S):
    """Each contender's call times (s), contenders interleaved per round; one past `budget_s` of
    total time stops (after at least one call)."""
    times = {n: [] for n in contenders}
    spent = {n: 0.0 for n in contenders}
    for _ in range(rounds):
        for n, fn in contenders.items():
            if spent[n] < budget_s or not times[n]:
                t = timed(fn, args, arrays)
                times[n].append(t)
                spent[n] += t
    return times


def run() -> list[Row]:
    root = checkout()
    if root is None:
        return [Row(NAME, "framejit and Numba over NumPy", float("nan"), "",
                    note="n/a: no NPBench checkout (set NPBENCH_DIR; tools/fetch_npbench.sh)")]
    sys.path.insert(0, str(root))
    try:
        import numba  # noqa: F401
    except ImportError:
        numba = None
    rows, fj_speedups, nb_speedups, wrong = [], [], [], []
    for path in sorted((root / "bench_info").glob("*.json")):
        info = json.loads(path.read_text())["benchmark"]
        case = f"{NAME}/{info['short_name']}"
        if "init" not in info:  # (mandelbrot1/2 take plain numbers)
            continue
        try:
            kernel, numba_kernel, args, arrays, out_names = load(root, info)
        except Exception as e:  # a kernel NPBench itself cannot set up here
            rows.append(Row(case, "setup", float("nan"), "", note=f"n/a: {type(e).__name__}: {e}"[:120]))
            continue
        want = outputs(kernel, args, arrays, out_names)
        framejit.reset()
        compiled = framejit.compile(kernel)
        got = outputs(compiled, args, arrays, out_names)
        stats = framejit.stats()
        if not close(got, want):
            wrong.append(info["short_name"])
            continue
        contenders = {"NumPy": kernel, "framejit": compiled}
        if numba is not None and numba_kernel is not None:
            try:
                ok = close(outputs(numba_kernel, args, arrays, out_names), want)
            except Exception:
                ok = False
            # Numba's version is its own source (fastmath, other algorithms): a wrong result is
            # reported, its time still counts as NPBench counts it.
            contenders["Numba"] = numba_kernel
        progress(case, f"{len(contenders)} contenders")
        times = interleaved(contenders, args, arrays)
        med = {n: statistics.median(v) for n, v in times.items()}
        for n in contenders:
            rows.append(Row(case, n, med[n] * 1e3, "ms", ratio=med[n] / med["NumPy"],
                            samples=[round(t * 1e3, 4) for t in times[n]]))
        rows.append(Row(case, "framejit graph breaks / loops compiled", stats["graph_breaks"], "",
                        note=f"{stats['loops']} loop(s), compile {stats['compile_ms']:.1f} ms"))
        if "Numba" in contenders:
            fj_speedups.append(med["NumPy"] / med["framejit"])
            nb_speedups.append(med["NumPy"] / med["Numba"])
            if not ok:
                rows[-1].note += "; Numba's result differs from NumPy's"
    if fj_speedups:
        geo = lambda v: math.exp(statistics.fmean(math.log(x) for x in v))  # noqa: E731
        fj, nb = geo(fj_speedups), geo(nb_speedups)
        rows.append(Row(NAME, "Numba over NumPy, geometric mean", nb, "×", note=f"{len(nb_speedups)} kernels"))
        target, met = at_least(fj, nb, "×")
        rows.append(Row(NAME, "framejit over NumPy, geometric mean", fj, "×", target=f"{target} (Numba's)", met=met,
                        note=f"{len(fj_speedups)} kernels, preset {PRESET}"))
    if wrong:
        raise CorrectnessError(f"framejit's result differs from NumPy's on {', '.join(wrong)}")
    return rows
