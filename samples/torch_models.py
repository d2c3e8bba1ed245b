"""PyTorch programs under framejit against PyTorch's own CPU eager mode (issue 13's bench rows):
an MLP (nn.Sequential of Linear/GELU/Linear), a GPT block (layer norms, causal attention, a tanh-GELU
MLP), nn.LayerNorm and a row softmax, all in inference (torch.no_grad, eval mode), float32. The
geometric mean of the four speedups is the issue's target (>= 1.5x with Debian's torch 1.13)."""

import math
import statistics

from harness import Contender, Row, at_least, check_close, interleave, progress, speedup_row, timing_rows, use_all_cpus

NAME = "torch_models"
CALLS = 3
ROUNDS = 21
WARMUP = 2
TARGET_GEOMEAN = 1.5
RTOL = 1e-4  # float32 products of 256- to 1024-term sums, then softmax/layer norm: a few 1e-6 in practice
ATOL = 1e-5


def _cases(torch):
    nn = torch.nn

    class Block(nn.Module):
        def __init__(self, d, heads, t):
            super().__init__()
            self.heads = heads
            self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.q, self.k, self.v, self.proj = (nn.Linear(d, d) for _ in range(4))
            self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(approximate="tanh"), nn.Linear(4 * d, d))
            self.register_buffer("mask", torch.triu(torch.full((t, t), float("-inf")), diagonal=1))

        def split(self, x, b, t, d):
            return x.reshape(b, t, self.heads, d // self.heads).transpose(1, 2)

        def forward(self, x):
            b, t, d = x.shape
            a = self.ln1(x)
            q, k, v = [self.split(p(a), b, t, d) for p in (self.q, self.k, self.v)]
            att = (q @ k.transpose(-2, -1)) * (1.0 / (d // self.heads) ** 0.5) + self.mask
            y = torch.softmax(att, dim=-1) @ v
            x = x + self.proj(y.transpose(1, 2).reshape(b, t, d))
            return x + self.mlp(self.ln2(x))

    class Softmax(nn.Module):
        def forward(self, x):
            return torch.softmax(x, dim=-1)

    g = torch.Generator().manual_seed(0)
    torch.manual_seed(0)
    return [
        ("torch MLP 64x256-1024-256", nn.Sequential(nn.Linear(256, 1024), nn.GELU(), nn.Linear(1024, 256)),
         torch.randn(64, 256, generator=g)),
        ("GPT block b4 t128 d256", Block(256, 4, 128), torch.randn(4, 128, 256, generator=g)),
        ("nn.LayerNorm 512x1024", nn.LayerNorm(1024), torch.randn(512, 1024, generator=g)),
        ("torch.softmax 1024x1024", Softmax(), torch.randn(1024, 1024, generator=g) * 3),
    ]


def run() -> list[Row]:
    try:
        import torch
    except ImportError:
        return [Row(NAME, "framejit over PyTorch eager", float("nan"), "", note="n/a: PyTorch is not installed")]
    import framejit

    use_all_cpus(torch)
    rows, speedups = [], []
    for case, model, x in _cases(torch):
        model = model.eval()
        with torch.no_grad():
            want = model(x)
            compiled = framejit.compile(model)
            for what in ("cold call", "cache hit"):
                check_close(f"{case} framejit {what}", compiled(x).numpy(), want.numpy(), rtol=RTOL, atol=ATOL)
            e = framejit.explain(lambda x: model(x))(x)
            note = f"{e.graph_count} graph(s), {len(e.breaks)} break(s)"

            def eager(x, model=model):
                with torch.no_grad():
                    return model(x)

            def jit(x, compiled=compiled):
                with torch.no_grad():
                    return compiled(x)

            progress(NAME, f"{case}: {note}; {ROUNDS} rounds x {CALLS} calls")
            samples = interleave([Contender("PyTorch eager", eager, (x,)), Contender("framejit", jit, (x,))],
                                 calls=CALLS, rounds=ROUNDS, warmup=WARMUP)
        case_rows = timing_rows(case, samples, "PyTorch eager", scale=1e3, unit="us")
        case_rows[-1].note = note
        speed = speedup_row(case, samples, "framejit", "PyTorch eager")
        speedups.append(speed.median)
        rows += case_rows + [speed]
    geomean = math.exp(statistics.fmean(math.log(s) for s in speedups))
    total = Row(NAME, "geomean speedup of framejit over PyTorch eager", geomean, "×",
                note=", ".join(f"{s:.2f}" for s in speedups))
    total.target, total.met = at_least(geomean, TARGET_GEOMEAN, "×")
    rows.append(total)
    return rows
