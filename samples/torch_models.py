"""PyTorch programs under framejit against PyTorch's own CPU eager mode (issue 13's bench rows):
an MLP (nn.Sequential of Linear/GELU/Linear), a GPT block (layer norms, causal attention, a tanh-GELU
MLP), nn.LayerNorm and a row softmax, all in inference (torch.no_grad, eval mode), float32. The
geometric mean of the four speedups is the issue's target (>= 1.5x with Debian's torch 1.13).
With torch >= 2, torch.compile (Inductor's C++ backend on the CPU) is a peer too: framejit's time
against it (target >= 1.0x) and both cold compiles (framejit's at most 1/50 of Inductor's)."""

import math
import statistics
import time

from harness import Contender, Row, at_least, check_close, interleave, progress, speedup_row, timing_rows, use_all_cpus

NAME = "torch_models"
CALLS = 3
ROUNDS = 21
WARMUP = 2
TARGET_GEOMEAN = 1.5
TARGET_VS_INDUCTOR = 1.0
TARGET_COMPILE_RATIO = 50.0
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
    inductor = int(torch.__version__.split(".")[0]) >= 2 and hasattr(torch, "compile")
    rows, speedups, vs_inductor = [], [], []
    for case, model, x in _cases(torch):
        model = model.eval()
        with torch.no_grad():
            want = model(x)
            framejit.reset()
            t0 = time.perf_counter()
            compiled = framejit.compile(model)
            cold = compiled(x)
            framejit_cold_ms = (time.perf_counter() - t0) * 1e3
            for what, got in (("cold call", cold), ("cache hit", compiled(x))):
                check_close(f"{case} framejit {what}", got.numpy(), want.numpy(), rtol=RTOL, atol=ATOL)
            contenders_extra = []
            if inductor:
                t0 = time.perf_counter()
                ind = torch.compile(model)
                try:
                    ind_out = ind(x)
                except Exception as exc:  # noqa: BLE001 — Inductor needs a C++ toolchain: a peer, not a failure
                    rows.append(Row(case, "torch.compile (Inductor CPU)", float("nan"), "", note=f"n/a: {exc!r}"[:200]))
                    inductor = False
            if inductor:
                inductor_cold_ms = (time.perf_counter() - t0) * 1e3
                check_close(f"{case} torch.compile", ind_out.numpy(), want.numpy(), rtol=RTOL, atol=ATOL)

                def by_inductor(x, ind=ind):
                    with torch.no_grad():
                        return ind(x)

                contenders_extra.append(Contender("torch.compile (Inductor CPU)", by_inductor, (x,)))
            e = framejit.explain(lambda x: model(x))(x)
            note = f"{e.graph_count} graph(s), {len(e.breaks)} break(s)"

            def eager(x, model=model):
                with torch.no_grad():
                    return model(x)

            def jit(x, compiled=compiled):
                with torch.no_grad():
                    return compiled(x)

            progress(NAME, f"{case}: {note}; {ROUNDS} rounds x {CALLS} calls")
            samples = interleave([Contender("PyTorch eager", eager, (x,)), Contender("framejit", jit, (x,))]
                                 + contenders_extra, calls=CALLS, rounds=ROUNDS, warmup=WARMUP)
        case_rows = timing_rows(case, samples, "PyTorch eager", scale=1e3, unit="us")
        case_rows[1].note = note
        speed = speedup_row(case, samples, "framejit", "PyTorch eager")
        speedups.append(speed.median)
        rows += case_rows + [speed]
        if inductor:
            vs = speedup_row(case, samples, "framejit", "torch.compile (Inductor CPU)", target=TARGET_VS_INDUCTOR)
            vs_inductor.append(vs.median)
            ratio = inductor_cold_ms / framejit_cold_ms
            cold_row = Row(case, "cold compile: torch.compile / framejit", ratio, "×",
                           note=f"torch.compile {inductor_cold_ms:.0f} ms, framejit {framejit_cold_ms:.1f} ms (first call each)")
            cold_row.target, cold_row.met = at_least(ratio, TARGET_COMPILE_RATIO, "×")
            rows += [vs, cold_row]
    geomean = math.exp(statistics.fmean(math.log(s) for s in speedups))
    total = Row(NAME, "geomean speedup of framejit over PyTorch eager", geomean, "×",
                note=", ".join(f"{s:.2f}" for s in speedups))
    total.target, total.met = at_least(geomean, TARGET_GEOMEAN, "×")
    rows.append(total)
    if vs_inductor:
        g = math.exp(statistics.fmean(math.log(s) for s in vs_inductor))
        r = Row(NAME, "geomean speedup of framejit over torch.compile (Inductor CPU)", g, "×",
                note=", ".join(f"{s:.2f}" for s in vs_inductor))
        r.target, r.met = at_least(g, TARGET_VS_INDUCTOR, "×")
        rows.append(r)
    return rows
