"""Row softmax of a 2048×2048 float32 matrix: NumPy vs framejit."""

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
    torch_peer,
)

NAME = "softmax"
SHAPE = (2048, 2048)
CALLS = 1
ROUNDS = 31
WARMUP = 2
TARGET_SPEEDUP = 3.0
COMPILE_TARGET_MS = 10.0  # reductions with pointwise prologue/epilogue

# Every output is positive, so the check is relative: exp (≤ 4 ulp) and the division (½ ulp) are
# pointwise; the row sum of 2048 positive terms, summed in another order than NumPy's pairwise
# sum, has a relative error of a few ulp in practice (≈ √n·ε for a blocked sum, bounded by n·ε).
# 1e-5 is 84 ulp; atol only covers outputs so small that their relative error means nothing.
RTOL = 1e-5
ATOL = 1e-9


def model(x):
    m = x.max(-1, keepdims=True)
    e = np.exp(x - m)
    return e / e.sum(-1, keepdims=True)


def run() -> list[Row]:
    """Check framejit against NumPy, then time both interleaved."""
    x = np.random.default_rng(2).standard_normal(SHAPE, dtype=np.float32) * np.float32(3.0)
    want = model(x)

    compiled, (cold, hit) = compiled_and_checked(model, (x,), NAME)
    check_close(f"{NAME} framejit cold call", cold, want, rtol=RTOL, atol=ATOL)
    note = check_close(f"{NAME} framejit cache hit", hit, want, rtol=RTOL, atol=ATOL)
    # A different shape through the same (symbolic-size) graph, with a row tail that is not a
    # multiple of any vector width.
    small = x[:37, :1001].copy()
    check_close(f"{NAME} framejit 37×1001", compiled(small), model(small), rtol=RTOL, atol=ATOL)

    contenders = [Contender("NumPy", model, (x,)), Contender("framejit", compiled, (x,))]
    torch_c, torch_na = torch_peer(NAME, lambda t, x: t.softmax(x, dim=-1), (x,), want, rtol=RTOL, atol=ATOL)
    if torch_c:
        contenders.append(torch_c)
    progress(NAME, f"{len(contenders)} contenders × {ROUNDS} rounds × {CALLS} calls on float32{list(SHAPE)}")
    samples = interleave(contenders, calls=CALLS, rounds=ROUNDS, warmup=WARMUP)
    rows = timing_rows(NAME, samples, "NumPy", scale=1e6, unit="ms")
    rows[1].note = note
    rows.append(speedup_row(NAME, samples, "framejit", "NumPy", target=TARGET_SPEEDUP))
    rows.append(speedup_row(NAME, samples, "framejit", torch_c.name) if torch_c else torch_na)

    progress(NAME, "fresh compiles")
    rows.append(compile_row(NAME, "row softmax", fresh_compile_ms(model, (x,)), limit=COMPILE_TARGET_MS))
    return rows
