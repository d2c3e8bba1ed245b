"""x*a + b on 16M float32 (memory-bound): NumPy vs framejit, and framejit's bandwidth as a fraction
of the copy bandwidth measured in the same run."""

import statistics

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
)

NAME = "axpb"
SIZE = 16 * 2**20
CALLS = 1
ROUNDS = 21
WARMUP = 2
TARGET_SPEEDUP = 1.5
COMPILE_TARGET_MS = 10.0
BYTES_PER_ELEMENT = 8  # one float32 read, one float32 written: the least any implementation moves

# One multiply and one add: NumPy rounds twice, a fused kernel may round once (FMA), so results
# differ by at most an ulp of the result (1.2e-7 relative) plus, where x*a + b cancels, half an
# ulp of x*a (|x*a| < 8 here: 5e-7) absolute.
RTOL = 1e-6
ATOL = 1e-6


def model(x, a, b):
    return x * a + b


def run() -> list[Row]:
    """Check framejit against NumPy, then time NumPy, framejit and two copies of x interleaved."""
    x = np.random.default_rng(1).standard_normal(SIZE, dtype=np.float32)
    a, b = 0.7, 0.1
    want = model(x, a, b)

    compiled, (cold, hit) = compiled_and_checked(model, (x, a, b), NAME)
    check_close(f"{NAME} framejit cold call", cold, want, rtol=RTOL, atol=ATOL)
    note = check_close(f"{NAME} framejit cache hit", hit, want, rtol=RTOL, atol=ATOL)
    del cold, hit, want

    out = np.empty_like(x)
    np.copyto(out, x)  # fault its pages in once: this copy moves bytes, nothing else
    copy_name = "np.copyto(out, x), out preallocated"
    contenders = [
        Contender("NumPy", model, (x, a, b)),
        Contender("framejit", compiled, (x, a, b)),
        Contender(copy_name, np.copyto, (out, x)),
        # A new output each call, as NumPy and framejit return: also pays for its fresh pages.
        Contender("x.copy(), new output", np.copy, (x,)),
    ]
    progress(NAME, f"{len(contenders)} contenders × {ROUNDS} rounds × {CALLS} calls on float32[{SIZE}]")
    samples = interleave(contenders, calls=CALLS, rounds=ROUNDS, warmup=WARMUP)
    rows = timing_rows(NAME, samples, "NumPy", scale=1e6, unit="ms")
    rows[1].note = note
    rows.append(speedup_row(NAME, samples, "framejit", "NumPy", target=TARGET_SPEEDUP))

    nbytes = SIZE * BYTES_PER_ELEMENT
    gbps = {name: [nbytes / ns for ns in values] for name, values in samples.items()}  # bytes/ns = GB/s
    for name in ("framejit", copy_name, "x.copy(), new output", "NumPy"):
        rows.append(Row(NAME, f"effective bandwidth of {name} (8 bytes/element)", statistics.median(gbps[name]),
                        "GB/s", samples=[round(v, 3) for v in gbps[name]]))
    # Per round, framejit's bandwidth over the copy's measured in the same round.
    fractions = [f / c for f, c in zip(gbps["framejit"], gbps[copy_name])]
    fraction = Row(NAME, f"framejit bandwidth as a fraction of {copy_name}", statistics.median(fractions), "",
                   note="reported, no target", samples=[round(v, 3) for v in fractions])
    rows.append(fraction)

    progress(NAME, "fresh compiles")
    rows.append(compile_row(NAME, "x*a + b", fresh_compile_ms(model, (x, a, b)), limit=COMPILE_TARGET_MS))
    return rows
