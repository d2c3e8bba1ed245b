"""Time framejit takes to capture and compile a generated 200-op NumPy function (fresh code each time)."""

import json
import statistics
import subprocess
import sys
import time

import numpy as np

import framejit
from harness import InvalidMeasurement, Row, at_most, check_same, progress

NAME = "trace_time"
OPS = 200
COMPILES = 15  # fresh functions compiled; the median is reported
COLD_PROCESSES = 3  # fresh interpreters whose very first compile is measured
SIZE = 1000
TARGET_MS = 5.0

# Elementwise steps that keep float32 values bounded however long the chain is.
STEPS = ["x = x + 0.5", "x = x * 0.75", "x = np.tanh(x)", "x = np.exp(x)"]


def make_source(ops: int = OPS) -> str:
    """Source of `chain(x)`: `ops` elementwise statements on x, cycling through STEPS."""
    body = [f"    {STEPS[i % len(STEPS)]}" for i in range(ops)]
    return "\n".join(["def chain(x):", *body, "    return x", ""])


def fresh_function(source: str, tag: str):
    """A new function object with a new code object (so no cache entry can be reused)."""
    namespace = {"np": np}
    exec(compile(source, f"<{NAME} {tag}>", "exec"), namespace)
    return namespace["chain"]


def cold_process_stats() -> dict:
    """framejit.stats() after the first compile of this process (run in a fresh interpreter)."""
    x = np.linspace(-1.0, 1.0, SIZE, dtype=np.float32)
    framejit.compile(fresh_function(make_source(), "cold"))(x)
    return framejit.stats()


def cold_compile_ms() -> list[float]:
    """compile_ms of the first compile in each of COLD_PROCESSES fresh interpreters."""
    results = []
    for _ in range(COLD_PROCESSES):
        out = subprocess.run([sys.executable, __file__], check=True, capture_output=True, text=True).stdout
        results.append(json.loads(out)["compile_ms"])
    return results


def run() -> list[Row]:
    """Compile COMPILES fresh copies after framejit.reset() each; report the median stats()."""
    source = make_source()
    x = np.linspace(-1.0, 1.0, SIZE, dtype=np.float32)
    want = fresh_function(source, "reference")(x)

    # One untimed compile first: the first compile in a process pays one-time initialisation.
    framejit.reset()
    check_same(f"{NAME} warm-up", framejit.compile(fresh_function(source, "warm-up"))(x), want)

    progress(NAME, f"{COMPILES} fresh compiles of a {OPS}-op function on float32[{SIZE}]")
    compile_ms, trace_ms, first_call_ms = [], [], []
    for i in range(COMPILES):
        framejit.reset()
        fn = framejit.compile(fresh_function(source, str(i)))
        start = time.perf_counter_ns()
        got = fn(x)
        first_call_ms.append((time.perf_counter_ns() - start) / 1e6)
        stats = framejit.stats()
        if stats["captured"] != 1 or stats["graph_breaks"] or stats["ops"] != OPS:
            raise InvalidMeasurement(f"{NAME}: expected one {OPS}-op graph without breaks, got {stats}")
        check_same(f"{NAME} compile {i}", got, want)
        check_same(f"{NAME} compile {i}, cache hit", fn(x), want)
        compile_ms.append(stats["compile_ms"])
        trace_ms.append(stats["trace_ms"])

    progress(NAME, f"first compile in {COLD_PROCESSES} fresh processes")
    cold_ms = cold_compile_ms()

    median = statistics.median(compile_ms)
    target, met = at_most(median, TARGET_MS, "ms")
    return [
        Row(NAME, f"compile_ms, {OPS} ops", median, "ms", target=target, met=met, samples=compile_ms),
        Row(NAME, f"trace_ms, {OPS} ops", statistics.median(trace_ms), "ms", samples=trace_ms),
        Row(NAME, "first call wall time (compile + run)", statistics.median(first_call_ms), "ms",
            samples=first_call_ms),
        Row(NAME, "compile_ms, first compile in a fresh process", statistics.median(cold_ms), "ms",
            samples=cold_ms),
    ]


if __name__ == "__main__":
    print(json.dumps(cold_process_stats()))
