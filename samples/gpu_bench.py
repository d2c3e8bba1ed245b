"""GPU benchmarks of issue 14, run on the GPU machine (tools/device_build.sh, then
`python3 samples/gpu_bench.py`): framejit beside torch eager and torch.compile on the same data,
interleaved rounds, medians. Prints the device, absolute figures and the ratios the issue names;
workloads framejit cannot run on a GPU yet are listed as such, not left out."""
import math
import statistics
import sys
import time

import numpy as np

import framejit

ROUNDS = 7


def timed(fn, sync, iters):
    """Median seconds per call over ROUNDS rounds of `iters` calls, each round ended by `sync`."""
    fn()
    sync()
    out = []
    for _ in range(ROUNDS):
        t0 = time.perf_counter()
        for _ in range(iters):
            fn()
        sync()
        out.append((time.perf_counter() - t0) / iters)
    return statistics.median(out)


def interleaved(cases, iters):
    """{name: median seconds}: every case once per round, rounds interleaved."""
    times = {name: [] for name in cases}
    for name, (fn, sync) in cases.items():
        fn()
        sync()
    for _ in range(ROUNDS):
        for name, (fn, sync) in cases.items():
            t0 = time.perf_counter()
            for _ in range(iters):
                fn()
            sync()
            times[name].append((time.perf_counter() - t0) / iters)
    return {name: statistics.median(v) for name, v in times.items()}


def fj_chain(x, a, b):
    y = x * a + b
    return 0.5 * y * (1 + np.tanh(0.7978845608028654 * (y + 0.044715 * y * y * y))) * (1 / (1 + np.exp(-x)))


def fj_softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def fj_layernorm(x, w, b):
    mu = x.mean(axis=-1, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=-1, keepdims=True)
    return (x - mu) / np.sqrt(var + 1e-5) * w + b


def main():
    if not framejit.cuda.is_available():
        print("no CUDA device:", framejit.cuda.why_unavailable())
        return 1
    import torch

    dev = torch.device("cuda")
    tsync = torch.cuda.synchronize
    fsync = framejit.cuda.synchronize
    print(f"device: {framejit.cuda.get_device_name(0)}; torch {torch.__version__}")

    def t_chain(x, a: float, b: float):
        y = x * a + b
        return 0.5 * y * (1 + torch.tanh(0.7978845608028654 * (y + 0.044715 * y * y * y))) * torch.sigmoid(x)

    rows = []
    # ---- gelu chain, 64M float32 -------------------------------------------------------------
    n = 64 << 20
    host = np.random.default_rng(0).standard_normal(n).astype(np.float32)
    tx = torch.from_numpy(host).to(dev)
    ty = torch.empty_like(tx)
    fx = framejit.tensor(host, device="cuda")
    fchain = framejit.compile(fj_chain)
    t0 = time.perf_counter()
    fchain(fx, 1.5, 0.25)
    fsync()
    fj_cold = time.perf_counter() - t0
    tc_chain = torch.compile(t_chain)
    t0 = time.perf_counter()
    tc_chain(tx, 1.5, 0.25)
    tsync()
    tc_cold = time.perf_counter() - t0
    # Correctness against torch (same formula; tanh/exp routines differ by ulps).
    got = np.asarray(fchain(fx, 1.5, 0.25).cpu())
    want = t_chain(tx, 1.5, 0.25).cpu().numpy()
    err = float(np.max(np.abs(got - want) / (np.abs(want) + 1e-6)))
    times = interleaved({
        "copy": (lambda: ty.copy_(tx), tsync),
        "framejit": (lambda: fchain(fx, 1.5, 0.25), fsync),
        "eager": (lambda: t_chain(tx, 1.5, 0.25), tsync),
        "torch.compile": (lambda: tc_chain(tx, 1.5, 0.25), tsync),
    }, 20)
    gbs = {k: 2 * 4 * n / v / 1e9 for k, v in times.items()}
    print(f"\ngelu chain, {n} float32 (max rel. diff vs torch {err:.1e}); GB/s read+write:")
    for k, v in gbs.items():
        print(f"  {k:14} {v:8.0f} GB/s   {times[k] * 1e6:8.1f} us")
    ratio = gbs["framejit"] / gbs["copy"]
    print(f"  framejit / copy bandwidth: {ratio:.3f} (target >= 0.95); vs torch.compile {gbs['framejit'] / gbs['torch.compile']:.2f}x")
    print(f"  cold compile: framejit {fj_cold * 1e3:.1f} ms (PTX JIT {framejit.stats()['ptx_jit_ms']:.1f} ms total so far), "
          f"torch.compile {tc_cold * 1e3:.0f} ms")

    # ---- x + 1 on 4 elements, with a sync ---------------------------------------------------
    small = np.arange(4, dtype=np.float32)
    ts = torch.from_numpy(small).to(dev)
    fs = framejit.tensor(small, device="cuda")
    fadd = framejit.compile(lambda x: x + 1)
    tadd = torch.compile(lambda x: x + 1)
    times = interleaved({
        "framejit": (lambda: fadd(fs), fsync),
        "eager": (lambda: ts + 1, tsync),
        "torch.compile": (lambda: tadd(ts), tsync),
    }, 1)
    print("\nx + 1, 4 float32, one call and a sync each:")
    for k, v in times.items():
        print(f"  {k:14} {v * 1e6:8.1f} us")
    print(f"  framejit / torch.compile: {times['framejit'] / times['torch.compile']:.2f} (target <= 0.5); "
          f"framejit / eager {times['framejit'] / times['eager']:.2f} (target <= 1)")

    # ---- row softmax and layernorm, 8192 x 8192 float32 ------------------------------------------
    rows = 8192
    host2 = np.random.default_rng(1).standard_normal((rows, rows)).astype(np.float32)
    hw = np.random.default_rng(2).standard_normal(rows).astype(np.float32)
    hb = np.random.default_rng(3).standard_normal(rows).astype(np.float32)
    tx2, tw, tb = (torch.from_numpy(a).to(dev) for a in (host2, hw, hb))
    ty2 = torch.empty_like(tx2)
    fx2, fw, fb = (framejit.tensor(a, device="cuda") for a in (host2, hw, hb))

    def t_softmax(x):
        return torch.softmax(x, dim=-1)

    def t_layernorm(x, w, b):
        return torch.nn.functional.layer_norm(x, (x.shape[-1],), w, b, 1e-5)

    for name, fj_fn, t_fn, fargs, targs in (
            ("softmax", fj_softmax, t_softmax, (fx2,), (tx2,)),
            ("layernorm", fj_layernorm, t_layernorm, (fx2, fw, fb), (tx2, tw, tb))):
        f = framejit.compile(fj_fn)
        t0 = time.perf_counter()
        f(*fargs)
        fsync()
        fj_cold = time.perf_counter() - t0
        tc = torch.compile(t_fn)
        t0 = time.perf_counter()
        tc(*targs)
        tsync()
        tc_cold = time.perf_counter() - t0
        got = np.asarray(f(*fargs).cpu())
        want = t_fn(*targs).cpu().numpy()
        err = float(np.max(np.abs(got - want)))
        times = interleaved({
            "copy": (lambda: ty2.copy_(tx2), tsync),
            "framejit": (lambda: f(*fargs), fsync),
            "eager": (lambda: t_fn(*targs), tsync),
            "torch.compile": (lambda: tc(*targs), tsync),
        }, 10)
        gbs = {k: 2 * 4 * rows * rows / v / 1e9 for k, v in times.items()}
        print(f"\n{name} {rows}x{rows} float32 (max abs. diff vs torch {err:.1e}); GB/s (one read + one write):")
        for k, v in gbs.items():
            print(f"  {k:14} {v:8.0f} GB/s   {times[k] * 1e6:8.1f} us")
        print(f"  framejit / copy bandwidth: {gbs['framejit'] / gbs['copy']:.3f} (target >= 0.90); "
              f"vs torch.compile {gbs['framejit'] / gbs['torch.compile']:.2f}x")
        print(f"  cold compile: framejit {fj_cold * 1e3:.1f} ms, torch.compile {tc_cold * 1e3:.0f} ms")

    print("\nnot run on the GPU by framejit yet (GEMMs): MLP batch 8, transformer block bf16")
    return 0


if __name__ == "__main__":
    sys.exit(main())
