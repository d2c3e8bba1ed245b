"""Runs framejit's sample benchmarks (all, or those named on the command line) and writes the results."""

import sys
import time
import traceback

import framejit
import elementwise
import harness
import install_overhead
import overhead
import trace_time

CASES = {m.NAME: m for m in (overhead, install_overhead, trace_time, elementwise)}


def main(argv: list[str]) -> int:
    """Run the selected cases; 0 when every correctness check passed (targets met or not), else 1."""
    names = argv or list(CASES)
    unknown = [n for n in names if n not in CASES]
    if unknown:
        print(f"unknown case(s) {', '.join(unknown)}; choose from: {', '.join(CASES)}", file=sys.stderr)
        return 2

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
    print(f"\nwrote {md} and {js} ({seconds:.0f} s)")
    if failures:
        print("\n" + "\n".join(failures), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
