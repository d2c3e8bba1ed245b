"""Layer normalization over the rows of a 2048×2048 float32 matrix (eps 1e-5, weight and bias
vectors), written the common NumPy way: NumPy vs framejit."""

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

NAME = "layernorm"
SHAPE = (2048, 2048)
CALLS = 1
ROUNDS = 31
WARMUP = 2
TARGET_SPEEDUP = 4.0
COMPILE_TARGET_MS = 10.0

# (x - mu) cancels where x is near the row mean, so relative error means nothing there: the
# error of mu (a 2048-term sum in another order than NumPy's, ≈ √n·ε·max|x| in practice) shows up
# as an absolute error of the output, scaled by |g|/σ (≤ 2 here). Elsewhere the rsqrt/division
# and the mean of squares add a few ulp of relative error. The outputs are O(1) (|out| ≲ 12):
# atol 1e-5 is ~80 ulp of 1, rtol 1e-5 is 84 ulp.
RTOL = 1e-5
ATOL = 1e-5


def model(x, g, b, eps=1e-5):
    mu = x.mean(-1, keepdims=True)
    var = ((x - mu) ** 2).mean(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * g + b


def inputs():
    rng = np.random.default_rng(3)
    # Rows with their own offset and scale, as activations have: the mean does not vanish.
    x = rng.standard_normal(SHAPE, dtype=np.float32) * rng.uniform(0.5, 2.0, (SHAPE[0], 1)).astype(np.float32)
    x += rng.uniform(-1.0, 1.0, (SHAPE[0], 1)).astype(np.float32)
    g = rng.uniform(0.5, 1.5, SHAPE[1]).astype(np.float32)
    b = rng.uniform(-0.5, 0.5, SHAPE[1]).astype(np.float32)
    return x, g, b


def run() -> list[Row]:
    """Check framejit against NumPy, then time both interleaved."""
    x, g, b = inputs()
    want = model(x, g, b)

    compiled, (cold, hit) = compiled_and_checked(model, (x, g, b), NAME)
    check_close(f"{NAME} framejit cold call", cold, want, rtol=RTOL, atol=ATOL)
    note = check_close(f"{NAME} framejit cache hit", hit, want, rtol=RTOL, atol=ATOL)
    small = (x[:37, :1001].copy(), g[:1001].copy(), b[:1001].copy())
    check_close(f"{NAME} framejit 37×1001", compiled(*small), model(*small), rtol=RTOL, atol=ATOL)

    contenders = [Contender("NumPy", model, (x, g, b)), Contender("framejit", compiled, (x, g, b))]
    torch_c, torch_na = torch_peer(
        NAME, lambda t, x, g, b: t.nn.functional.layer_norm(x, (x.shape[-1],), g, b, 1e-5), (x, g, b), want,
        rtol=RTOL, atol=ATOL)
    if torch_c:
        contenders.append(torch_c)
    progress(NAME, f"{len(contenders)} contenders × {ROUNDS} rounds × {CALLS} calls on float32{list(SHAPE)}")
    samples = interleave(contenders, calls=CALLS, rounds=ROUNDS, warmup=WARMUP)
    rows = timing_rows(NAME, samples, "NumPy", scale=1e6, unit="ms")
    rows[1].note = note
    rows.append(speedup_row(NAME, samples, "framejit", "NumPy", target=TARGET_SPEEDUP))
    rows.append(speedup_row(NAME, samples, "framejit", torch_c.name) if torch_c else torch_na)

    progress(NAME, "fresh compiles")
    rows.append(compile_row(NAME, "layernorm", fresh_compile_ms(model, (x, g, b)), limit=COMPILE_TARGET_MS))
    return rows
