"""NPBench's pairwise arc distance (sin, cos, arctan2, sqrt) on 1M float64 points: NumPy vs framejit."""

import numpy as np

from harness import (
    Contender,
    Row,
    check_close,
    compile_row,
    compiled_and_checked,
    fresh_compile_ms,
    interleave,
    progress,
    speedup_row,
    timing_rows,
)

NAME = "arc_distance"
SIZE = 1_000_000
CALLS = 1
ROUNDS = 21
WARMUP = 2
TARGET_SPEEDUP = 3.0
COMPILE_TARGET_MS = 10.0

# Pointwise float64: ≤ 4-ulp sin/cos/arctan2/sqrt and a dozen roundings, ~20 ulp (4e-15) at most.
# With NPBench's inputs in [0, 1) temp ≤ 0.46, so 1 - temp does not cancel and the formula is
# well conditioned: distances in [0, 1.5] change by a few ulp of their size. rtol 1e-12 is 4500
# ulp; atol 1e-12 covers distances near 0 (whose relative error follows sin of a difference).
RTOL = 1e-12
ATOL = 1e-12


def arc_distance(theta_1, phi_1, theta_2, phi_2):
    """NPBench's arc_distance, as written there."""
    temp = np.sin((theta_2 - theta_1) / 2) ** 2 + np.cos(theta_1) * np.cos(theta_2) * np.sin((phi_2 - phi_1) / 2) ** 2
    distance_matrix = 2 * (np.arctan2(np.sqrt(temp), np.sqrt(1 - temp)))
    return distance_matrix


def run() -> list[Row]:
    """Check framejit against NumPy, then time both interleaved."""
    rng = np.random.default_rng(42)
    args = tuple(rng.random(SIZE) for _ in range(4))  # NPBench's initialization: uniform [0, 1)
    want = arc_distance(*args)

    compiled, (cold, hit) = compiled_and_checked(arc_distance, args, NAME)
    check_close(f"{NAME} framejit cold call", cold, want, rtol=RTOL, atol=ATOL)
    note = check_close(f"{NAME} framejit cache hit", hit, want, rtol=RTOL, atol=ATOL)

    contenders = [Contender("NumPy", arc_distance, args), Contender("framejit", compiled, args)]
    progress(NAME, f"{len(contenders)} contenders × {ROUNDS} rounds × {CALLS} calls on 4 × float64[{SIZE}]")
    samples = interleave(contenders, calls=CALLS, rounds=ROUNDS, warmup=WARMUP)
    rows = timing_rows(NAME, samples, "NumPy", scale=1e6, unit="ms")
    rows[1].note = note
    rows.append(speedup_row(NAME, samples, "framejit", "NumPy", target=TARGET_SPEEDUP))

    progress(NAME, "fresh compiles")
    rows.append(compile_row(NAME, "arc distance", fresh_compile_ms(arc_distance, args), limit=COMPILE_TARGET_MS))
    return rows
