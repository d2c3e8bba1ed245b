"""A pre-norm transformer block in NumPy (layernorm, multi-head attention with softmax, tanh-GELU
MLP), batch 8 × 128 tokens × 256 features, 8 heads: NumPy vs framejit vs PyTorch's CPU eager mode.

The whole block is one graph for framejit: the qkv split and head reshapes are views folded into
the batched GEMMs, softmax and layernorm run row-blocked, bias/GELU epilogues fuse into GEMMs."""

import math

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

NAME = "transformer"
B, T, D, H = 8, 128, 256, 8
CALLS = 1
ROUNDS = 21
WARMUP = 2
COMPILE_TARGET_MS = 50.0  # a graph with GEMMs

# float32 through 6 GEMMs (k up to 1024), two layernorms and a softmax: a few hundred ulp of the
# O(1) outputs in the worst element.
RTOL = 1e-4
ATOL = 1e-4


def layernorm(x, g, b):
    mu = x.mean(-1, keepdims=True)
    var = x.var(-1, keepdims=True)
    return (x - mu) / np.sqrt(var + 1e-5) * g + b


def softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def gelu(x):
    return 0.5 * x * (1.0 + np.tanh(0.7978845608 * (x + 0.044715 * x * x * x)))


def block(x, wqkv, bqkv, wo, bo, w1, b1, w2, b2, g1, c1, g2, c2):
    n, t, d = x.shape
    hd = d // H
    h = layernorm(x, g1, c1)
    q, k, v = np.split(h @ wqkv + bqkv, 3, axis=-1)
    q = q.reshape(n, t, H, hd).transpose(0, 2, 1, 3)
    k = k.reshape(n, t, H, hd).transpose(0, 2, 1, 3)
    v = v.reshape(n, t, H, hd).transpose(0, 2, 1, 3)
    att = softmax(q @ k.transpose(0, 1, 3, 2) * (1.0 / math.sqrt(hd)))
    y = (att @ v).transpose(0, 2, 1, 3).reshape(n, t, d)
    x = x + (y @ wo + bo)
    return x + gelu(layernorm(x, g2, c2) @ w1 + b1) @ w2 + b2


def weights(rng):
    def w(i, o):
        return (rng.standard_normal((i, o), dtype=np.float32) * np.float32(i**-0.5)).astype(np.float32)

    def vec(n, lo, hi):
        return rng.uniform(lo, hi, n).astype(np.float32)

    return (w(D, 3 * D), vec(3 * D, -0.1, 0.1), w(D, D), vec(D, -0.1, 0.1), w(D, 4 * D), vec(4 * D, -0.1, 0.1),
            w(4 * D, D), vec(D, -0.1, 0.1), vec(D, 0.8, 1.2), vec(D, -0.1, 0.1), vec(D, 0.8, 1.2), vec(D, -0.1, 0.1))


def torch_block():
    """The same block in PyTorch's CPU eager mode, or None when PyTorch is not installed."""
    try:
        import torch
    except ImportError:
        return None
    use_all_cpus(torch)

    def run(*arrays):
        x, wqkv, bqkv, wo, bo, w1, b1, w2, b2, g1, c1, g2, c2 = (torch.from_numpy(a) for a in arrays)
        with torch.no_grad():
            n, t, d = x.shape
            hd = d // H
            h = torch.nn.functional.layer_norm(x, (d,), g1, c1, 1e-5)
            q, k, v = (h @ wqkv + bqkv).split(d, dim=-1)
            q, k, v = (z.reshape(n, t, H, hd).transpose(1, 2) for z in (q, k, v))
            att = torch.softmax(q @ k.transpose(-1, -2) * (1.0 / math.sqrt(hd)), dim=-1)
            y = (att @ v).transpose(1, 2).reshape(n, t, d)
            x = x + (y @ wo + bo)
            z = torch.nn.functional.layer_norm(x, (d,), g2, c2, 1e-5) @ w1 + b1
            z = 0.5 * z * (1.0 + torch.tanh(0.7978845608 * (z + 0.044715 * z * z * z)))
            return (x + z @ w2 + b2).numpy()

    return run


def run() -> list[Row]:
    """Check framejit (and PyTorch) against NumPy, then time them interleaved."""
    rng = np.random.default_rng(11)
    x = rng.standard_normal((B, T, D), dtype=np.float32)
    args = (x, *weights(rng))
    want = block(*args)

    compiled, (cold, hit) = compiled_and_checked(block, args, NAME)
    check_close(f"{NAME} framejit cold call", cold, want, rtol=RTOL, atol=ATOL)
    note = check_close(f"{NAME} framejit cache hit", hit, want, rtol=RTOL, atol=ATOL)
    small = (x[:3, :37].copy(), *args[1:])
    check_close(f"{NAME} framejit 3×37 tokens", compiled(*small), block(*small), rtol=RTOL, atol=ATOL)

    contenders = [Contender("NumPy", block, args), Contender("framejit", compiled, args)]
    torch_run = torch_block()
    if torch_run is not None:
        check_close(f"{NAME} PyTorch eager", torch_run(*args), want, rtol=RTOL, atol=ATOL)
        import torch

        torch_name = f"PyTorch CPU eager ({torch.get_num_threads()} thread{'s' if torch.get_num_threads() != 1 else ''})"
        contenders.append(Contender(torch_name, torch_run, args))
    progress(NAME, f"{len(contenders)} contenders × {ROUNDS} rounds × {CALLS} calls, float32 [{B}, {T}, {D}], {H} heads")
    samples = interleave(contenders, calls=CALLS, rounds=ROUNDS, warmup=WARMUP, settle_s=0.05)
    rows = timing_rows(NAME, samples, "NumPy", scale=1e6, unit="ms")
    rows[1].note = note
    rows.append(speedup_row(NAME, samples, "framejit", "NumPy"))
    if torch_run is not None:
        rows.append(speedup_row(NAME, samples, "framejit", torch_name))
    else:
        rows.append(Row(NAME, "PyTorch CPU eager", float("nan"), "", note="n/a: PyTorch is not installed"))

    progress(NAME, "fresh compiles")
    rows.append(compile_row(NAME, "transformer block", fresh_compile_ms(block, args), limit=COMPILE_TARGET_MS))
    return rows
