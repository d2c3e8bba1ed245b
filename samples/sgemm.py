"""1024×1024 by 1024×1024 float32 matmul: NumPy (OpenBLAS) vs framejit."""

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

NAME = "sgemm"
N = 1024
CALLS = 1
ROUNDS = 21
WARMUP = 2
TARGET_SPEEDUP = 1.0
COMPILE_TARGET_MS = 50.0  # a graph with a GEMM

# Each output is a 1024-term dot product; two correct GEMMs that block and accumulate in different
# orders differ by at most ~K·ε·(|a|·|b|) (the classical bound, 6e-5 relative to |a|·|b| for
# K = 1024), and in practice by ≈ √K·ε·(|a|·|b|) = 2e-6. The check allows 1e-5 · (|a|·|b|) per
# element: 5× the practical level, a sixth of the worst case.
RTOL_ABS_PRODUCT = 1e-5


def model(a, b):
    return a @ b


def run() -> list[Row]:
    """Check framejit against NumPy, then time both interleaved."""
    rng = np.random.default_rng(4)
    a = rng.standard_normal((N, N), dtype=np.float32)
    b = rng.standard_normal((N, N), dtype=np.float32)
    want = model(a, b)
    atol = RTOL_ABS_PRODUCT * (np.abs(a) @ np.abs(b))

    compiled, (cold, hit) = compiled_and_checked(model, (a, b), NAME)
    check_close(f"{NAME} framejit cold call", cold, want, rtol=0.0, atol=atol)
    note = check_close(f"{NAME} framejit cache hit", hit, want, rtol=0.0, atol=atol)
    # Awkward sizes through the same graph: no dimension a multiple of a register block.
    sa, sb = a[:17, :1023].copy(), b[:1023, :7].copy()
    check_close(f"{NAME} framejit 17×1023 @ 1023×7", compiled(sa, sb), model(sa, sb), rtol=0.0,
                atol=RTOL_ABS_PRODUCT * (np.abs(sa) @ np.abs(sb)))

    contenders = [Contender("NumPy (OpenBLAS)", model, (a, b)), Contender("framejit", compiled, (a, b))]
    progress(NAME, f"{len(contenders)} contenders × {ROUNDS} rounds × {CALLS} calls, float32 {N}³")
    # OpenBLAS's threads spin ~0.1 s after each call; let them go idle before the next contender.
    samples = interleave(contenders, calls=CALLS, rounds=ROUNDS, warmup=WARMUP, settle_s=0.2)
    rows = timing_rows(NAME, samples, "NumPy (OpenBLAS)", scale=1e6, unit="ms")
    rows[1].note = note
    for r in rows:  # GFLOP/s alongside: 2·N³ flops per call
        r.note = "; ".join(filter(None, [r.note, f"{2 * N**3 / (r.median * 1e6):.0f} GFLOP/s"]))
    rows.append(speedup_row(NAME, samples, "framejit", "NumPy (OpenBLAS)", target=TARGET_SPEEDUP))

    progress(NAME, "fresh compiles")
    rows.append(compile_row(NAME, "a @ b", fresh_compile_ms(model, (a, b)), limit=COMPILE_TARGET_MS))
    return rows
