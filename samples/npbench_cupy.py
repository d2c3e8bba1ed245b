"""NPBench's CuPy kernels (`*_cupy.py`, preset S), run on the GPU machine: each kernel by CuPy
eagerly and by framejit.compile on the same cupy arrays (fresh copies per call, as NPBench does,
interleaved, medians), with the result checked against CuPy's. Issue 14's held-out measure of the
CuPy frontend: code framejit's authors did not write. Prints per kernel the times, the speedup,
graphs and breaks with their first reasons, and the geometric mean.

    NPBENCH_DIR=/path/to/npbench python3 samples/npbench_cupy.py [kernel short names...]

A float32 result that differs from CuPy's by more than rtol 1e-5 / atol 1e-8 but by at most 1e-5
of its largest magnitude is counted correct and marked "f32": both are float32 sums in another
order (resnet's batch norms divide such differences by small deviations)."""
import importlib
import json
import math
import statistics
import sys
import time

import numpy as np

import framejit
from npbench_suite import checkout

ROUNDS = 7


def main():
    try:
        import cupy as cp
    except ImportError:
        print("n/a: CuPy is not installed")
        return 0
    root = checkout()
    if root is None or not framejit.cuda.is_available():
        print("n/a: no NPBench checkout (NPBENCH_DIR) or no CUDA device")
        return 0
    sys.path.insert(0, str(root))
    sync = cp.cuda.Device().synchronize

    def fresh(args, arrays):
        return [a.copy() if n in arrays and isinstance(a, cp.ndarray) else a for n, a in args]

    def outputs(fn, args, arrays, outs):
        a = fresh(args, arrays)
        r = fn(*a)
        names = [n for n, _ in args]
        return host([r, [a[names.index(o)] for o in outs if o in names]])

    def host(v):
        if isinstance(v, (tuple, list)):
            return [host(x) for x in v]
        return cp.asnumpy(v) if isinstance(v, cp.ndarray) else v

    def compare(g, w):
        """'' when equal, 'f32' when within float32 rounding of a reordered sum, else 'wrong'."""
        if isinstance(w, (tuple, list)):
            if not isinstance(g, (tuple, list)) or len(g) != len(w):
                return "wrong"
            marks = [compare(a, b) for a, b in zip(g, w)]
            return "wrong" if "wrong" in marks else "f32" if "f32" in marks else ""
        if w is None or g is None:
            return "" if w is None and g is None else "wrong"
        g, w = np.asarray(g), np.asarray(w)
        if g.shape != w.shape or g.dtype != w.dtype:
            return "wrong"
        if w.dtype.kind not in "fc":
            return "" if np.array_equal(g, w) else "wrong"
        if np.allclose(g, w, rtol=1e-5, atol=1e-8, equal_nan=True):
            return ""
        scale = float(np.nanmax(np.abs(w))) if w.size else 0.0
        if w.dtype == np.float32 and float(np.nanmax(np.abs(g - w))) <= 1e-5 * scale:
            return "f32"
        return "wrong"

    def timed(fn, args, arrays):
        a = fresh(args, arrays)
        sync()
        t0 = time.perf_counter()
        fn(*a)
        sync()
        return time.perf_counter() - t0

    only = set(sys.argv[1:])
    speedups, wrong, raised = [], [], []
    for path in sorted((root / "bench_info").glob("*.json")):
        info = json.loads(path.read_text())["benchmark"]
        name = info["short_name"]
        if (only and name not in only) or "init" not in info:
            continue
        base = f"npbench.benchmarks.{info['relative_path'].replace('/', '.')}.{info['module_name']}"
        try:
            kernel = getattr(importlib.import_module(base + "_cupy"), info["func_name"])
        except Exception:  # no CuPy version of this one
            continue
        ctx = dict(info["parameters"]["S"])
        init = info["init"]
        made = getattr(importlib.import_module(base), init["func_name"])(*[ctx[a] for a in init["input_args"]])
        ctx.update(zip(init["output_args"], made if len(init["output_args"]) > 1 else (made,)))
        args = [(a, cp.asarray(ctx[a]) if isinstance(ctx[a], np.ndarray) else ctx[a]) for a in info["input_args"]]
        arrays, outs = set(info.get("array_args", [])), info.get("output_args", [])
        want = outputs(kernel, args, arrays, outs)
        framejit.reset()
        compiled = framejit.compile(kernel)
        try:
            got = outputs(compiled, args, arrays, outs)
        except Exception as e:  # noqa: BLE001 - reported, not hidden
            raised.append(name)
            print(f"{name:10} framejit raised {type(e).__name__}: {str(e)[:160]}")
            continue
        st = framejit.stats()
        mark = compare(got, want)
        if mark == "wrong":
            wrong.append(name)
            print(f"{name:10} WRONG RESULT")
            continue
        reasons = sorted({r.split(" (")[0][:60] for r in framejit.explain(kernel)(*fresh(args, arrays)).break_reasons})
        times = {"cupy": [], "framejit": []}
        for _ in range(ROUNDS):
            times["cupy"].append(timed(kernel, args, arrays))
            times["framejit"].append(timed(compiled, args, arrays))
        tc, tf = statistics.median(times["cupy"]), statistics.median(times["framejit"])
        speedups.append(tc / tf)
        print(f"{name:10} cupy {tc * 1e3:9.3f} ms  framejit {tf * 1e3:9.3f} ms  {tc / tf:6.2f}x  {mark:3} "
              f"graphs {st['captured']} breaks {st['graph_breaks']}  {'; '.join(reasons[:2])}")
    geo = math.exp(statistics.fmean(math.log(s) for s in speedups)) if speedups else float("nan")
    print(f"\n{len(speedups)} kernels correct; framejit over CuPy eager, geometric mean {geo:.2f}x; "
          f"wrong: {wrong or 'none'}; framejit raised: {raised or 'none'}")
    return 1 if wrong or raised else 0


if __name__ == "__main__":
    sys.exit(main())
