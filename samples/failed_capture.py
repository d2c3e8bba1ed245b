"""Cost per call of code whose capture failed (issue 12 item 9): a helper whose loop runs past the
trace budget, called with a new trip count every call, against plain CPython."""

import itertools

import numpy as np

import framejit
from harness import Contender, InvalidMeasurement, Row, at_most, check_close, interleave, progress, timing_rows

NAME = "failed_capture"
N = 20_000  # loop iterations: past the trace's instruction budget
CALLS = 1  # one call is ~10-20 ms
ROUNDS = 15
WARMUP = 3  # the first calls trace (and fail); the failure is remembered after the second
TARGET_RATIO = 1.3  # framejit / CPython per call once the failure is remembered


def body(i, v):
    return v * 0.999 + 0.001 * i


def run_loop(n, fn, val):
    for i in range(n):
        val = fn(i, val)
    return val


def caller(x, n):
    return run_loop(n, body, np.tanh(x))


def with_new_n(fn):
    """fn(x, n) with a new n on every call: each new n is a new trace for a specialized loop."""
    counter = itertools.count()
    return lambda x: fn(x, N + next(counter) % 1000)


def run() -> list[Row]:
    x = np.linspace(-1.0, 1.0, 8)
    framejit.reset()
    compiled = framejit.compile(caller)
    for k in range(3):
        check_close(f"{NAME} call {k}", compiled(x, N + k), caller(x, N + k), rtol=1e-12, atol=1e-12)
    stats = framejit.stats()
    if stats["graph_breaks"] > 4:
        raise InvalidMeasurement(f"{NAME}: the failed loop was traced again: {stats}")
    plain, jit = "CPython, new n each call", "framejit.compile, new n each call"
    contenders = [Contender(plain, with_new_n(caller), (x,)), Contender(jit, with_new_n(compiled), (x,))]
    progress(NAME, f"{len(contenders)} contenders × {ROUNDS} rounds × {CALLS} call(s)")
    samples = interleave(contenders, calls=CALLS, rounds=ROUNDS, warmup=WARMUP)
    rows = timing_rows(NAME, samples, plain, scale=1e6, unit="ms")
    rows[1].target, rows[1].met = at_most(rows[1].ratio, TARGET_RATIO, "×")
    rows[1].note = f"traces that failed: {framejit.stats()['graph_breaks']}"
    return rows


if __name__ == "__main__":
    for r in run():
        print(f"{r.contender}: {r.median:.2f} {r.unit}" + (f" ({r.ratio:.2f}×)" if r.ratio else "") + f" {r.note}")
