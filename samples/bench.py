"""Runs framejit's sample benchmarks (all, or those named on the command line) and writes the results."""

import os
import sys
import time
import traceback

import framejit
import arc_distance
import axpb
import cache_hit
import elementwise
import gelu_mlp
import host_model
import harness
import install_overhead
import layernorm
import loops
import mlp
import npbench_loops
import npbench_suite
import overhead
import peak_memory
import sgemm
import softmax
import sweep
import trace_time
import torch_models
import transformer

# In the order of issue 3's Benchmarks table after the capture issue's cases; compile times of every
# case's graph are also gathered into one table at the end.
CASES = {
    m.NAME: m
    for m in (
        overhead,
        cache_hit,
        install_overhead,
        trace_time,
        elementwise,
        axpb,
        softmax,
        layernorm,
        sgemm,
        mlp,
        arc_distance,
        gelu_mlp,
        transformer,
        torch_models,
        host_model,
        peak_memory,
        loops,
        npbench_suite,
        npbench_loops,
        sweep,
    )
}


def main(argv: list[str]) -> int:
    """Run the selected cases; 0 when every correctness check passed (targets met or not), else 1."""
    names = argv or list(CASES)
    unknown = [n for n in names if n not in CASES]
    if unknown:
        print(f"unknown case(s) {', '.join(unknown)}; choose from: {', '.join(CASES)}", file=sys.stderr)
        return 2

    load = os.getloadavg()[0]
    if load > 0.5:
        print(f"[bench] note: 1-minute load average {load:.2f} before the run: other work on this "
              f"{os.cpu_count()}-CPU machine will skew the figures", flush=True)
    start = time.perf_counter()
    rows, failures = [], []
    for name in names:
        framejit.reset()
        case_start = time.perf_counter()
        try:
            rows += CASES[name].run()
        except Exception as exc:  # noqa: BLE001 — any failure of a case is reported, the rest still run
            traceback.print_exc()
            kind = "CORRECTNESS FAILURE" if isinstance(exc, harness.CorrectnessError) else "FAILED"
            failures.append(f"{name}: {kind}: {exc}")
            harness.progress(name, f"{kind}: {exc}")
        finally:
            framejit.uninstall()  # whatever a failing case left behind
        harness.progress(name, f"done in {time.perf_counter() - case_start:.1f} s")

    seconds = time.perf_counter() - start
    md, js = harness.write_results(rows, failures, seconds)
    print()
    print(harness.markdown_table(rows))
    compile_times = harness.compile_table(rows)
    if compile_times:
        print("\nCompile time per graph:\n")
        print(compile_times)
    png = harness.draw_speedups(rows)
    print(f"\nwrote {md}, {js}{f' and {png}' if png else ''} ({seconds:.0f} s)")
    if failures:
        print("\n" + "\n".join(failures), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
