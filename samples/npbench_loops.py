"""Held-out loop kernels: NPBench's Numba versions (`*_numba_n.py`, nopython), written by its
authors for Numba, so loops over array elements the way people write them for it. Each function's
own Python source (`.py_func`, the function under Numba's decorator) is compiled by framejit and
run on NPBench's preset S inputs: issue 15's held-out target is every result correct and at least
90% of the kernels compiled without a graph break. Their times beside Numba's on the same source
are reported too (no target: Numba's versions use its parallel loops and fastmath in places).

Correctness: against NPBench's NumPy version (its own validation), or against Numba's result on
the same source where the two versions compute differently (Numba's fastmath and uninitialized
np.empty memory make some of its results differ from NumPy's: adi's by 6800). Tuning framejit to
these kernels would defeat their purpose: nobody does (they are read here, never copied)."""

import json
import math
import statistics
import sys
import time


import framejit
from harness import CorrectnessError, Row, at_least, progress
from npbench_suite import PRESET, checkout, close, interleaved, load, outputs

NAME = "npbench-loops"
ROUNDS = 3
BUDGET_S = 2.0


def py_source_of(numba_kernel):
    """The plain Python function under a Numba decorator (None for another kind of object)."""
    return getattr(numba_kernel, "py_func", None)


def run() -> list[Row]:
    root = checkout()
    if root is None:
        return [Row(NAME, "framejit on Numba's sources", float("nan"), "",
                    note="n/a: no NPBench checkout (set NPBENCH_DIR; tools/fetch_npbench.sh)")]
    sys.path.insert(0, str(root))
    try:
        import numba  # noqa: F401
    except ImportError:
        return [Row(NAME, "framejit on Numba's sources", float("nan"), "", note="n/a: Numba is not installed")]
    rows, wrong, unbroken, kernels, speedups = [], [], 0, 0, []
    for path in sorted((root / "bench_info").glob("*.json")):
        info = json.loads(path.read_text())["benchmark"]
        case = f"{NAME}/{info['short_name']}"
        if "init" not in info:
            continue
        try:
            kernel, numba_kernel, args, arrays, out_names = load(root, info)
        except Exception:  # noqa: BLE001 — NPBench itself cannot set it up here
            continue
        source = py_source_of(numba_kernel) if numba_kernel is not None else None
        if source is None:
            continue
        want = outputs(kernel, args, arrays, out_names)
        try:
            by_numba = outputs(numba_kernel, args, arrays, out_names)
        except Exception as e:  # noqa: BLE001 — a version Numba cannot compile here
            rows.append(Row(case, "Numba", float("nan"), "", note=f"n/a: {type(e).__name__}"[:80]))
            continue
        framejit.reset()
        compiled = framejit.compile(source)
        t0 = time.perf_counter()
        try:
            got = outputs(compiled, args, arrays, out_names)
        except Exception as e:  # noqa: BLE001 — reported as a wrong result
            got = e
        first_ms = (time.perf_counter() - t0) * 1e3
        stats = framejit.stats()
        kernels += 1
        # The return value and the written arrays, each like NumPy's version's or like Numba's (a
        # version may return what the other writes, or nothing: adi).
        numpys = not isinstance(got, Exception) and close(got, want)
        right = numpys or (not isinstance(got, Exception) and all(
            close(g, w) or close(g, n) for g, w, n in zip(got, want, by_numba)))
        if not right:
            wrong.append(info["short_name"])
            rows.append(Row(case, "framejit", float("nan"), "", note=f"WRONG: {got!r}"[:100]))
            continue
        breaks = stats["graph_breaks"]
        unbroken += breaks == 0
        progress(case, f"{breaks} break(s), {stats['loops']} loop(s)")
        times = interleaved({"Numba": numba_kernel, "framejit": compiled}, args, arrays, ROUNDS, BUDGET_S)
        med = {n: statistics.median(v) for n, v in times.items()}
        speedups.append(med["Numba"] / med["framejit"])
        rows.append(Row(case, "framejit", med["framejit"] * 1e3, "ms", ratio=med["framejit"] / med["Numba"],
                        samples=[round(t * 1e3, 4) for t in times["framejit"]]))
        rows.append(Row(case, "Numba", med["Numba"] * 1e3, "ms", ratio=1.0))
        rows.append(Row(case, "framejit graph breaks", breaks, "",
                        note=f"{stats['loops']} loop(s), first call {first_ms:.1f} ms"
                        + ("" if numpys else "; matches Numba's result, not NumPy's version's")))
    if kernels:
        share = unbroken / kernels
        target, met = at_least(share * 100, 90.0, "%")
        rows.append(Row(NAME, "kernels compiled without a graph break", share * 100, "%", target=target, met=met,
                        note=f"{unbroken} of {kernels}, preset {PRESET}"))
        rows.append(Row(NAME, "kernels correct", (kernels - len(wrong)) / kernels * 100, "%", target="100%",
                        met=not wrong, note=", ".join(wrong) if wrong else f"{kernels} kernels"))
    if speedups:
        geo = math.exp(statistics.fmean(math.log(x) for x in speedups))
        rows.append(Row(NAME, "framejit over Numba on Numba's sources, geometric mean", geo, "×",
                        note=f"{len(speedups)} kernels (no target)"))
    if wrong:
        raise CorrectnessError(f"framejit's result differs on {', '.join(wrong)}")
    return rows
