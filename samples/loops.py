"""Issue 15's scalar-loop kernels, written the way people write them for Numba (element loops over
arrays, Python numbers, break, while), each run by CPython, numba.njit of the same function and
framejit.compile, interleaved. Reports per kernel the time of each, framejit's speed against
Numba's (target ≥ 0.7 each, geometric mean ≥ 1.0), its graph breaks (target: none) and both
compile times (framejit's target ≤ 20 ms; Numba takes 0.3–3 s). framejit compiles each loop nest
into one graph node (Note [Element loops] in frontend/trace/element_loops.cpp)."""

import math
import statistics
import time

import numpy as np

import framejit
from harness import (
    Contender,
    CorrectnessError,
    Row,
    at_least,
    at_most,
    calls_for,
    interleave,
    not_installed_row,
    progress,
    speedup_row,
    timing_rows,
)

NAME = "loops"
ROUNDS = 7
BATCH_S = 2e-3
WARMUP = 1
TARGET_EACH = 0.7
TARGET_GEOMEAN = 1.0
COMPILE_TARGET_MS = 20.0


# ---- the kernels -------------------------------------------------------------------------------


def trisolv(L, b):
    n = b.shape[0]
    x = np.zeros_like(b)
    for i in range(n):
        s = b[i]
        for j in range(i):
            s -= L[i, j] * x[j]
        x[i] = s / L[i, i]
    return x


def cholesky(A):
    n = A.shape[0]
    L = np.zeros_like(A)
    for i in range(n):
        for j in range(i + 1):
            s = A[i, j]
            for k in range(j):
                s -= L[i, k] * L[j, k]
            if i == j:
                L[i, i] = math.sqrt(s)
            else:
                L[i, j] = s / L[j, j]
    return L


def lu(A):
    A = A.copy()
    n = A.shape[0]
    for i in range(n):
        for j in range(i):
            for k in range(j):
                A[i, j] -= A[i, k] * A[k, j]
            A[i, j] /= A[j, j]
        for j in range(i, n):
            for k in range(i):
                A[i, j] -= A[i, k] * A[k, j]
    return A


def seidel_2d(A, tsteps):
    A = A.copy()
    n = A.shape[0]
    for _ in range(tsteps):
        for i in range(1, n - 1):
            for j in range(1, n - 1):
                A[i, j] = (A[i - 1, j - 1] + A[i - 1, j] + A[i - 1, j + 1] + A[i, j - 1] + A[i, j]
                           + A[i, j + 1] + A[i + 1, j - 1] + A[i + 1, j] + A[i + 1, j + 1]) / 9.0
    return A


def floyd_warshall(path):
    path = path.copy()
    n = path.shape[0]
    for k in range(n):
        for i in range(n):
            for j in range(n):
                d = path[i, k] + path[k, j]
                if d < path[i, j]:
                    path[i, j] = d
    return path


def spmv(rowptr, cols, vals, x):
    n = rowptr.shape[0] - 1
    y = np.zeros(n)
    for i in range(n):
        s = 0.0
        for jj in range(rowptr[i], rowptr[i + 1]):
            s += vals[jj] * x[cols[jj]]
        y[i] = s
    return y


def crc16(data):
    crc = 0xFFFF
    for i in range(data.shape[0]):
        crc ^= int(data[i]) << 8
        for _ in range(8):
            if crc & 0x8000:
                crc = ((crc << 1) ^ 0x1021) & 0xFFFF
            else:
                crc = (crc << 1) & 0xFFFF
    return crc


def edit_distance(a, b):
    m, n = a.shape[0], b.shape[0]
    D = np.zeros((m + 1, n + 1), np.int64)
    for i in range(m + 1):
        D[i, 0] = i
    for j in range(n + 1):
        D[0, j] = j
    for i in range(1, m + 1):
        for j in range(1, n + 1):
            cost = 0 if a[i - 1] == b[j - 1] else 1
            D[i, j] = min(D[i - 1, j] + 1, D[i, j - 1] + 1, D[i - 1, j - 1] + cost)
    return D[m, n]


def mandelbrot(h, w, maxiter):
    out = np.zeros((h, w), np.int64)
    for y in range(h):
        for x in range(w):
            cr = -2.0 + 3.0 * x / w
            ci = -1.5 + 3.0 * y / h
            zr = 0.0
            zi = 0.0
            it = 0
            for it in range(maxiter):
                if zr * zr + zi * zi > 4.0:
                    break
                zr, zi = zr * zr - zi * zi + cr, 2.0 * zr * zi + ci
            out[y, x] = it
    return out


def newton_sqrt(v, tol):
    out = np.empty_like(v)
    for i in range(v.shape[0]):
        g = v[i] if v[i] > 1.0 else 1.0
        while abs(g * g - v[i]) > tol * v[i]:
            g = 0.5 * (g + v[i] / g)
        out[i] = g
    return out


def inputs():
    """Each kernel's arguments: sizes where CPython takes milliseconds, not seconds."""
    rng = np.random.default_rng(15)
    n = 48
    m = rng.random((n, n))
    spd = m @ m.T + n * np.eye(n)
    rowptr = np.sort(rng.integers(0, 4000, 401))
    rowptr[0], rowptr[-1] = 0, 4000
    return {
        "trisolv": (trisolv, (np.tril(rng.random((n, n))) + n * np.eye(n), rng.random(n))),
        "cholesky": (cholesky, (spd,)),
        "lu": (lu, (spd,)),
        "seidel_2d": (seidel_2d, (rng.random((40, 40)), 4)),
        "floyd_warshall": (floyd_warshall, (rng.random((40, 40)) * 10,)),
        "spmv": (spmv, (rowptr, rng.integers(0, 500, 4000), rng.random(4000), rng.random(500))),
        "crc16": (crc16, (rng.integers(0, 256, 2000).astype(np.uint8),)),
        "edit_distance": (edit_distance, (rng.integers(0, 4, 80), rng.integers(0, 4, 90))),
        "mandelbrot": (mandelbrot, (24, 32, 60)),
        "newton_sqrt": (newton_sqrt, (rng.random(2000) * 100, 1e-12)),
    }


def check(what, got, want):
    # Same operations in the same order as CPython: equal to the last bit but for the odd fused
    # multiply-add; 1e-12 relative is far below any real mistake.
    if not np.allclose(np.asarray(got, dtype=np.float64), np.asarray(want, dtype=np.float64), rtol=1e-12, atol=0):
        raise CorrectnessError(f"{what}: result differs from CPython's")


def first_call_ms(fn, args):
    t0 = time.perf_counter()
    out = fn(*args)
    return out, (time.perf_counter() - t0) * 1e3


def run() -> list[Row]:
    try:
        import numba
    except ImportError:
        numba = None
    rows, ratios, cold_ratios = [], [], []
    for name, (fn, args) in inputs().items():
        case = f"{NAME}/{name}"
        want = fn(*args)
        framejit.reset()
        compiled = framejit.compile(fn, fullgraph=False)
        got, fj_first = first_call_ms(compiled, args)
        stats = framejit.stats()
        check(f"{case} framejit", got, want)
        check(f"{case} framejit cache hit", compiled(*args), want)
        contenders = [Contender("CPython", fn, args), Contender("framejit", compiled, args)]
        nb_first = None
        if numba is not None:
            jitted = numba.njit(fn)
            got, nb_first = first_call_ms(jitted, args)
            check(f"{case} numba", got, want)
            contenders.append(Contender("Numba", jitted, args))
        progress(case, f"{len(contenders)} contenders × {ROUNDS} rounds")
        # Back-to-back calls, ~BATCH_S of them per contender and round (as timeit, NPBench and the
        # other samples time): the per-call time of a function called in a loop.
        samples = interleave(contenders, calls=calls_for(contenders, BATCH_S), rounds=ROUNDS, warmup=WARMUP)
        # One call right after CPython's run of the same kernel: caches and predictors cold (on
        # the 2-core VM even a 4-element np.add then takes 25× its warm time). Reported beside.
        cold = interleave(contenders, calls=1, rounds=ROUNDS, warmup=WARMUP)
        rows += timing_rows(case, samples, "CPython", scale=1e6, unit="ms")
        breaks = stats["graph_breaks"]
        target, met = at_most(breaks, 0, "")
        rows.append(Row(case, "framejit graph breaks", breaks, "", target=target, met=met,
                        note=f"{stats['captured']} graph(s), {stats['extern_calls']} extern call(s)"))
        target, met = at_most(stats["compile_ms"], COMPILE_TARGET_MS, "ms")
        note = f"first call {fj_first:.1f} ms" + (f"; Numba's first call {nb_first:.0f} ms" if nb_first else "")
        rows.append(Row(case, "framejit compile", stats["compile_ms"], "ms", target=target, met=met, note=note))
        if numba is None:
            rows.append(not_installed_row(case, "Numba", "numba"))
            continue
        row = speedup_row(case, samples, "framejit", "Numba", target=TARGET_EACH)
        ratios.append(row.median)
        rows.append(row)
        row = speedup_row(case, cold, "framejit", "Numba")
        row.contender = "speedup of framejit over Numba, one cold call after CPython's"
        cold_ratios.append(row.median)
        rows.append(row)
    if ratios:
        geo = math.exp(statistics.fmean(math.log(r) for r in ratios))
        target, met = at_least(geo, TARGET_GEOMEAN, "×")
        rows.append(Row(NAME, "framejit over Numba, geometric mean", geo, "×", target=target, met=met,
                        note=f"{len(ratios)} kernels"))
        geo = math.exp(statistics.fmean(math.log(r) for r in cold_ratios))
        rows.append(Row(NAME, "framejit over Numba, geometric mean of one cold call", geo, "×",
                        note=f"{len(cold_ratios)} kernels"))
    return rows
