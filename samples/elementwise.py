"""tanh(x*a + b) * exp(-x*x) on 16M float32: NumPy, NumExpr, Numba parallel=True and framejit."""

import functools
import time

import numpy as np

try:
    from numba import prange
except ImportError:  # Numba is optional: run() then leaves it out
    prange = range

from harness import (
    Contender,
    Row,
    check_close,
    compile_row,
    compiled_and_checked,
    fresh_compile_ms,
    interleave,
    not_installed_row,
    progress,
    speedup_row,
    timing_rows,
    torch_peer,
)

NAME = "elementwise"
SIZE = 16 * 2**20
CALLS = 1  # calls per timed batch (one NumPy call is a few hundred ms)
ROUNDS = 9
WARMUP = 1
TARGET_SPEEDUP = 3.0  # over each of NumPy, NumExpr and Numba
COMPILE_TARGET_MS = 10.0  # a pointwise graph

# Each result is one value per element from two ≤ 4-ulp functions (the jit's exp and tanh, as
# NumPy's) and two roundings: about 10 ulp of relative error at most, well inside 1e-5 (84 ulp).
# The jit may contract x*a + b into one FMA: where x*a + b nearly cancels, that changes the result
# by up to half an ulp of x*a (|x*a| < 8 here: 5e-7) as an absolute error, which atol covers.
RTOL = 1e-5
ATOL = 1e-6
EXPR = "tanh(x * a + b) * exp(-x * x)"


def model(x, a, b):
    return np.tanh(x * a + b) * np.exp(-x * x)


def numba_chain(x, a, b):
    """The same chain as an explicit loop for Numba (compiled with parallel=True in run())."""
    out = np.empty_like(x)
    for i in prange(x.shape[0]):
        v = x[i]
        out[i] = np.tanh(v * a + b) * np.exp(-v * v)
    return out


def inputs():
    """x ~ N(0, 1) float32, a and b Python floats (run-time inputs of the graph, not constants)."""
    return np.random.default_rng(0).standard_normal(SIZE, dtype=np.float32), 0.7, 0.1


def run() -> list[Row]:
    """Check every contender against NumPy, then time them interleaved."""
    x, a, b = inputs()
    want = model(x, a, b)

    compiled, (cold, hit) = compiled_and_checked(model, (x, a, b), NAME)
    check_close(f"{NAME} framejit cold call", cold, want, rtol=RTOL, atol=ATOL)
    note = check_close(f"{NAME} framejit cache hit", hit, want, rtol=RTOL, atol=ATOL)
    check_close(f"{NAME} framejit, new a and b", compiled(x, 0.3, -0.2), model(x, 0.3, -0.2), rtol=RTOL, atol=ATOL)
    del cold, hit
    contenders = [Contender("NumPy", model, (x, a, b)), Contender("framejit", compiled, (x, a, b))]
    notes = {"framejit": note}
    extra_rows = []

    try:
        import numexpr

        # float32 scalars keep numexpr in float32, as NumPy stays with Python floats.
        ne = functools.partial(numexpr.evaluate, local_dict={"x": x, "a": np.float32(a), "b": np.float32(b)})
        name = f"NumExpr ({numexpr.detect_number_of_cores()} threads)"
        notes[name] = check_close(f"{NAME} NumExpr", ne(EXPR), want, rtol=RTOL, atol=ATOL)
        contenders.append(Contender(name, ne, (EXPR,)))
    except ImportError:
        extra_rows.append(not_installed_row(NAME, "NumExpr", "numexpr"))

    try:
        import numba

        start = time.perf_counter()
        # Explicit signature: compiled here, not on the first timed call. float32 a and b, so the
        # loop stays in float32 as NumPy does.
        nb = numba.njit("float32[::1](float32[::1], float32, float32)", parallel=True)(numba_chain)
        numba_compile_ms = (time.perf_counter() - start) * 1e3
        nb_args = (x, np.float32(a), np.float32(b))
        name = f"Numba parallel=True ({numba.config.NUMBA_NUM_THREADS} threads)"
        notes[name] = check_close(f"{NAME} Numba", nb(*nb_args), want, rtol=RTOL, atol=ATOL)
        contenders.append(Contender(name, nb, nb_args))
        extra_rows.append(Row(NAME, "Numba compile time (njit parallel=True, one signature)", numba_compile_ms, "ms"))
    except ImportError:
        extra_rows.append(not_installed_row(NAME, "Numba parallel=True", "numba"))
    torch_c, torch_na = torch_peer(NAME, lambda t, x, a, b: t.tanh(x * a + b) * t.exp(-x * x), (x, a, b), want,
                                   rtol=RTOL, atol=ATOL)
    if torch_c:
        contenders.append(torch_c)
    else:
        extra_rows.append(torch_na)
    del want

    progress(NAME, f"{len(contenders)} contenders × {ROUNDS} rounds × {CALLS} calls on float32[{SIZE}]")
    samples = interleave(contenders, calls=CALLS, rounds=ROUNDS, warmup=WARMUP)
    rows = timing_rows(NAME, samples, "NumPy", scale=1e6, unit="ms")
    for r in rows:
        r.note = notes.get(r.contender, "")
    for c in contenders:
        if c.name != "framejit":
            # The targets are against NumPy, NumExpr and Numba; PyTorch is reported.
            target = None if c.name.startswith("PyTorch") else TARGET_SPEEDUP
            rows.append(speedup_row(NAME, samples, "framejit", c.name, target=target))
    rows += extra_rows

    progress(NAME, "fresh compiles")
    rows.append(compile_row(NAME, "pointwise chain", fresh_compile_ms(model, (x, a, b)), limit=COMPILE_TARGET_MS))
    return rows
