"""Cache-hit overhead of framejit.compile on `lambda x: x + 1` with a 4-element float32 array."""

import operator

import numpy as np

import framejit
from harness import (
    Contender,
    CorrectnessError,
    InvalidMeasurement,
    Row,
    at_most,
    check_same,
    delta_row,
    interleave,
    paired_deltas,
    progress,
    timing_rows,
)

NAME = "overhead"
# Many short batches rather than few long ones: this machine's speed drifts by ±20% over seconds,
# and x + 1 alone costs ~2 µs, so the 0.3 µs target needs many paired rounds to stand out.
CALLS = 2_000  # calls per timed batch
ROUNDS = 400  # interleaved batches per contender
TARGET_US = 0.3  # framejit's added time per call


def run() -> list[Row]:
    """Time plain fn(x) against framejit.compile(fn)(x), plus reference calls that show where time goes."""
    x = np.arange(4, dtype=np.float32)
    fn = lambda x: x + 1  # noqa: E731 — the issue's function, as a lambda
    compiled = framejit.compile(fn)
    eager = framejit.compile(lambda x: x + 1, backend="eager")
    identity = lambda x: x  # noqa: E731
    compiled_identity = framejit.compile(lambda x: x)  # hook + guards + output, no op to run

    check_same(NAME + " cold call", compiled(x), fn(x))
    hits = framejit.stats()["cache_hits"]
    check_same(NAME + " cache hit", compiled(x), fn(x))
    check_same(NAME + " eager backend", eager(x), fn(x))
    check_same(NAME + " eager backend, cache hit", eager(x), fn(x))
    for _ in range(2):
        if compiled_identity(x) is not x:
            raise CorrectnessError(f"{NAME}: compiled `lambda x: x` did not return its input object")
    stats = framejit.stats()
    if stats["cache_hits"] <= hits or stats["graph_breaks"]:
        raise InvalidMeasurement(f"{NAME}: the second call was not a cache hit of a captured graph: {stats}")

    contenders = [
        Contender("fn(x), plain", fn, (x,)),
        Contender("framejit.compile(fn)(x)", compiled, (x,)),
        Contender('framejit.compile(fn, backend="eager")(x)', eager, (x,)),
        # Where the time goes: the same work as bare C calls, and calls that do no work.
        Contender("operator.add(x, 1) (C call)", operator.add, (x, 1)),
        Contender("np.add(x, 1) (C call)", np.add, (x, 1)),
        Contender("lambda x: x (empty Python call)", identity, (x,)),
        Contender("framejit.compile(lambda x: x)(x)", compiled_identity, (x,)),
        Contender("id(x) (empty C call)", id, (x,)),
    ]

    progress(NAME, f"{len(contenders)} contenders × {ROUNDS} rounds × {CALLS} calls")
    samples = interleave(contenders, calls=CALLS, rounds=ROUNDS)
    rows = timing_rows(NAME, samples, "fn(x), plain", scale=1000.0, unit="µs")

    deltas = paired_deltas(samples, "framejit.compile(fn)(x)", "fn(x), plain")
    added = delta_row(NAME, "framejit added per call (compiled − plain)", deltas, scale=1000.0, unit="µs")
    added.target, added.met = at_most(added.median, TARGET_US, "µs")
    rows.append(added)
    for label, name, baseline in [
        (
            "framejit added per call (compiled − operator.add C call)",
            "framejit.compile(fn)(x)",
            "operator.add(x, 1) (C call)",
        ),
        (
            "framejit added per call, no op (compiled identity − identity)",
            "framejit.compile(lambda x: x)(x)",
            "lambda x: x (empty Python call)",
        ),
    ]:
        rows.append(delta_row(NAME, label, paired_deltas(samples, name, baseline), scale=1000.0, unit="µs"))
    return rows
