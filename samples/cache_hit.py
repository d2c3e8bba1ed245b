"""Cache-hit cost of a small fused graph: `np.tanh(x*y + 1)` on 8 and on 1000 float32 (issue 11)."""

import numpy as np

import framejit
from harness import (
    Contender,
    InvalidMeasurement,
    Row,
    at_most,
    check_close,
    interleave,
    progress,
    speedup_row,
    timing_rows,
)

NAME = "cache_hit"
CALLS = 2_000  # calls per timed batch: one call is ~0.4-3 µs
ROUNDS = 400  # interleaved batches per contender (the machine drifts: many short batches)
TARGET_SMALL_US = 0.40  # framejit per call on 8 elements
TARGET_LARGE_SPEEDUP = 3.5  # over NumPy on 1000 elements


def model(x, y):
    return np.tanh(x * y + 1)


def _hit_checked(n: int):
    """framejit.compile(model) on n float32, after one compile and one cache hit checked against NumPy."""
    rng = np.random.default_rng(n)
    x = rng.standard_normal(n, dtype=np.float32)
    y = rng.standard_normal(n, dtype=np.float32)
    framejit.reset()
    compiled = framejit.compile(model)
    want = model(x, y)
    for what in ("cold call", "cache hit"):
        check_close(f"{NAME} {n} {what}", compiled(x, y), want, rtol=1e-5, atol=1e-6)
    stats = framejit.stats()
    if stats["captured"] != 1 or stats["graph_breaks"] or stats["cache_hits"] < 1:
        raise InvalidMeasurement(f"{NAME}: expected one graph, then a cache hit; got {stats}")
    return compiled, (x, y)


def run() -> list[Row]:
    """Per-call µs of framejit and NumPy on 8 elements, and the speedup over NumPy on 1000."""
    rows: list[Row] = []
    for n in (8, 1000):
        compiled, args = _hit_checked(n)
        contenders = [Contender(f"NumPy, {n} float32", model, args),
                      Contender(f"framejit, {n} float32", compiled, args)]
        progress(NAME, f"{n} elements: {len(contenders)} contenders × {ROUNDS} rounds × {CALLS} calls")
        samples = interleave(contenders, calls=CALLS, rounds=ROUNDS)
        timed = timing_rows(NAME, samples, f"NumPy, {n} float32", scale=1000.0, unit="µs")
        if n == 8:
            timed[1].target, timed[1].met = at_most(timed[1].median, TARGET_SMALL_US, "µs")
        rows += timed
        if n == 1000:
            rows.append(speedup_row(NAME, samples, f"framejit, {n} float32", f"NumPy, {n} float32",
                                    target=TARGET_LARGE_SPEEDUP))
    return rows
