"""NPBench-style 3-layer MLP, batch 8, 10000→1000→2000→10 float32, relu hidden layers and a
softmax head: NumPy (OpenBLAS) vs framejit."""

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

NAME = "mlp"
BATCH = 8
SIZES = (10000, 1000, 2000, 10)
CALLS = 1
ROUNDS = 41
WARMUP = 3
TARGET_SPEEDUP = 1.3
COMPILE_TARGET_MS = 50.0  # a graph with GEMMs

# Weights scaled by 1/sqrt(fan_in) keep every layer's outputs O(1), so the head's probabilities
# are not saturated to 0/1 and the check sees every layer. Each logit carries the rounding of
# 10000-, 1000- and 2000-term dot products in some order: ≈ √K·ε relative per layer in practice
# (6e-6 for K = 10000), a few 1e-6 in the logits, which is the relative error of the
# probabilities. rtol 1e-4 is 10× that; atol covers probabilities too small for their relative
# error to matter.
RTOL = 1e-4
ATOL = 1e-7


def relu(x):
    return np.maximum(x, 0)


def softmax(x):
    tmp_max = np.max(x, axis=-1, keepdims=True)
    tmp_out = np.exp(x - tmp_max)
    tmp_sum = np.sum(tmp_out, axis=-1, keepdims=True)
    return tmp_out / tmp_sum


class MLP:
    """Weights as attributes; forward() is the function compiled."""

    def __init__(self, sizes, rng):
        self.w1, self.b1 = self._layer(sizes[0], sizes[1], rng)
        self.w2, self.b2 = self._layer(sizes[1], sizes[2], rng)
        self.w3, self.b3 = self._layer(sizes[2], sizes[3], rng)

    @staticmethod
    def _layer(fan_in, fan_out, rng):
        w = (rng.standard_normal((fan_in, fan_out), dtype=np.float32) * np.float32(fan_in**-0.5))
        b = rng.uniform(-0.1, 0.1, fan_out).astype(np.float32)
        return w, b

    def forward(self, x):
        x = relu(x @ self.w1 + self.b1)
        x = relu(x @ self.w2 + self.b2)
        return softmax(x @ self.w3 + self.b3)


def run() -> list[Row]:
    """Check framejit against NumPy, then time both interleaved."""
    rng = np.random.default_rng(5)
    model = MLP(SIZES, rng)
    x = rng.standard_normal((BATCH, SIZES[0]), dtype=np.float32)
    want = model.forward(x)

    compiled, (cold, hit) = compiled_and_checked(model.forward, (x,), NAME)
    check_close(f"{NAME} framejit cold call", cold, want, rtol=RTOL, atol=ATOL)
    note = check_close(f"{NAME} framejit cache hit", hit, want, rtol=RTOL, atol=ATOL)
    x3 = x[:3].copy()
    check_close(f"{NAME} framejit batch 3", compiled(x3), model.forward(x3), rtol=RTOL, atol=ATOL)

    contenders = [Contender("NumPy (OpenBLAS)", model.forward, (x,)), Contender("framejit", compiled, (x,))]

    def torch_forward(t, x, w1, b1, w2, b2, w3, b3):
        h = t.relu(x @ w1 + b1)
        h = t.relu(h @ w2 + b2)
        return t.softmax(h @ w3 + b3, dim=-1)

    torch_c, torch_na = torch_peer(NAME, torch_forward, (x, model.w1, model.b1, model.w2, model.b2, model.w3, model.b3),
                                   want, rtol=RTOL, atol=ATOL)
    if torch_c:
        contenders.append(torch_c)
    progress(NAME, f"{len(contenders)} contenders × {ROUNDS} rounds × {CALLS} calls, batch {BATCH}, {SIZES}")
    # OpenBLAS's threads spin ~0.1 s after each call; let them go idle before the next contender.
    samples = interleave(contenders, calls=CALLS, rounds=ROUNDS, warmup=WARMUP, settle_s=0.2)
    rows = timing_rows(NAME, samples, "NumPy (OpenBLAS)", scale=1e6, unit="ms")
    rows[1].note = note
    rows.append(speedup_row(NAME, samples, "framejit", "NumPy (OpenBLAS)", target=TARGET_SPEEDUP))
    rows.append(speedup_row(NAME, samples, "framejit", torch_c.name) if torch_c else torch_na)

    progress(NAME, "fresh compiles")
    rows.append(compile_row(NAME, "3-layer MLP", fresh_compile_ms(model.forward, (x,)), limit=COMPILE_TARGET_MS))
    return rows
