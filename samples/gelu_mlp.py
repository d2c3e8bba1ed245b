"""A GELU MLP block, batch 256 × 1024 → 4096 → 1024 float32 (tanh-approximated GELU, biases):
NumPy (OpenBLAS) vs framejit vs PyTorch's CPU eager mode. framejit runs both GEMMs with the bias
and GELU fused as epilogues."""

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
    use_all_cpus,
)

NAME = "gelu_mlp"
BATCH, DIM, HIDDEN = 256, 1024, 4096
CALLS = 1
ROUNDS = 21
WARMUP = 2
COMPILE_TARGET_MS = 50.0

# Two float32 GEMMs with k = 1024 and 4096 around a GELU: outputs O(1), differences of a few
# hundred ulp from the summation order.
RTOL = 1e-4
ATOL = 1e-4


def model(x, w1, b1, w2, b2):
    h = x @ w1 + b1
    h = 0.5 * h * (1.0 + np.tanh(0.7978845608 * (h + 0.044715 * h * h * h)))
    return h @ w2 + b2


def torch_model():
    """The same block in PyTorch's CPU eager mode, or None when PyTorch is not installed."""
    try:
        import torch
    except ImportError:
        return None
    use_all_cpus(torch)

    def run(x, w1, b1, w2, b2):
        x, w1, b1, w2, b2 = (torch.from_numpy(a) for a in (x, w1, b1, w2, b2))
        with torch.no_grad():
            h = x @ w1 + b1
            h = 0.5 * h * (1.0 + torch.tanh(0.7978845608 * (h + 0.044715 * h * h * h)))
            return (h @ w2 + b2).numpy()

    return run


def run() -> list[Row]:
    rng = np.random.default_rng(21)
    x = rng.standard_normal((BATCH, DIM), dtype=np.float32)
    w1 = rng.standard_normal((DIM, HIDDEN), dtype=np.float32) * np.float32(DIM**-0.5)
    w2 = rng.standard_normal((HIDDEN, DIM), dtype=np.float32) * np.float32(HIDDEN**-0.5)
    b1 = rng.uniform(-0.1, 0.1, HIDDEN).astype(np.float32)
    b2 = rng.uniform(-0.1, 0.1, DIM).astype(np.float32)
    args = (x, w1, b1, w2, b2)
    want = model(*args)

    compiled, (cold, hit) = compiled_and_checked(model, args, NAME)
    check_close(f"{NAME} framejit cold call", cold, want, rtol=RTOL, atol=ATOL)
    note = check_close(f"{NAME} framejit cache hit", hit, want, rtol=RTOL, atol=ATOL)
    check_close(f"{NAME} framejit batch 7", compiled(x[:7].copy(), *args[1:]), model(x[:7].copy(), *args[1:]),
                rtol=RTOL, atol=ATOL)

    contenders = [Contender("NumPy (OpenBLAS)", model, args), Contender("framejit", compiled, args)]
    torch_run = torch_model()
    if torch_run is not None:
        import torch

        name = f"PyTorch CPU eager ({torch.get_num_threads()} thread{'s' if torch.get_num_threads() != 1 else ''})"
        check_close(f"{NAME} PyTorch", torch_run(*args), want, rtol=RTOL, atol=ATOL)
        contenders.append(Contender(name, torch_run, args))
    progress(NAME, f"{len(contenders)} contenders × {ROUNDS} rounds × {CALLS} calls, batch {BATCH}, {DIM}→{HIDDEN}→{DIM}")
    # OpenBLAS's threads spin after each call; let them go idle before the next contender.
    samples = interleave(contenders, calls=CALLS, rounds=ROUNDS, warmup=WARMUP, settle_s=0.2)
    rows = timing_rows(NAME, samples, "NumPy (OpenBLAS)", scale=1e6, unit="ms")
    rows[1].note = note
    for c in contenders:
        if c.name != "framejit":
            rows.append(speedup_row(NAME, samples, "framejit", c.name))
    if torch_run is None:
        rows.append(Row(NAME, "PyTorch CPU eager", float("nan"), "", note="n/a: PyTorch is not installed"))

    progress(NAME, "fresh compiles")
    rows.append(compile_row(NAME, "GELU MLP", fresh_compile_ms(model, args), limit=COMPILE_TARGET_MS))
    return rows
