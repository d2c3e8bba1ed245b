"""Benchmark harness: correctness checks, interleaved timing of contenders, and the results table."""

from __future__ import annotations

import datetime
import gc
import json
import os
import platform
import statistics
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

RESULTS_DIR = Path(__file__).resolve().parent.parent / "build" / "bench"

# Tolerance for float results of compiled code that may legitimately round differently from NumPy
# (fused kernels, vectorized exp/tanh). The eager backend must match exactly: checks pass exact=True.
FLOAT_RTOL = 1e-5
FLOAT_ATOL = 1e-6


class CorrectnessError(AssertionError):
    """Compiled code returned something other than what plain Python/NumPy returns."""


class InvalidMeasurement(RuntimeError):
    """The measurement would not measure what it claims (e.g. the function was not captured)."""


# ---- correctness --------------------------------------------------------------------------------


def check_same(what: str, got: Any, want: Any, *, exact: bool = True) -> None:
    """Raise CorrectnessError unless `got` equals `want` (exactly, or for floats within tolerance)."""
    problem = _difference(got, want, exact)
    if problem:
        raise CorrectnessError(f"{what}: result differs from the plain (uncompiled) one: {problem}")


def _difference(got: Any, want: Any, exact: bool) -> str | None:
    """Describe how got differs from want, or return None when they match."""
    if isinstance(want, (tuple, list)):
        if type(got) is not type(want) or len(got) != len(want):
            return f"expected {type(want).__name__} of {len(want)}, got {_short(got)}"
        for i, (g, w) in enumerate(zip(got, want)):
            problem = _difference(g, w, exact)
            if problem:
                return f"[{i}]: {problem}"
        return None
    if isinstance(want, dict):
        if not isinstance(got, dict) or got.keys() != want.keys():
            return f"expected dict with keys {list(want)}, got {_short(got)}"
        for k in want:
            problem = _difference(got[k], want[k], exact)
            if problem:
                return f"[{k!r}]: {problem}"
        return None
    if isinstance(want, np.ndarray):
        if not isinstance(got, np.ndarray):
            return f"expected ndarray, got {_short(got)}"
        if got.dtype != want.dtype or got.shape != want.shape:
            return f"expected {want.dtype}{list(want.shape)}, got {got.dtype}{list(got.shape)}"
        if exact or want.dtype.kind not in "fc":
            ok = np.array_equal(got, want, equal_nan=want.dtype.kind in "fc")
        else:
            ok = np.allclose(got, want, rtol=FLOAT_RTOL, atol=FLOAT_ATOL, equal_nan=True)
        if ok:
            return None
        bad = int(np.count_nonzero(got != want))
        err = float(np.max(np.abs(got.astype(np.float64) - want.astype(np.float64))))
        return f"{bad} of {want.size} elements differ (max abs error {err:.3g})"
    if type(got) is not type(want) or got != want:
        return f"expected {_short(want)}, got {_short(got)}"
    return None


def _short(value: Any) -> str:
    """A one-line description of a value for error messages."""
    text = repr(value).replace("\n", " ")
    return text if len(text) <= 80 else text[:77] + "..."


# ---- timing -------------------------------------------------------------------------------------


@dataclass
class Contender:
    """One way of doing the work: `fn(*args)` is one call; setup/teardown run around each batch,
    outside the timed region (e.g. framejit.install / framejit.uninstall)."""

    name: str
    fn: Callable[..., Any]
    args: tuple = ()
    setup: Callable[[], Any] | None = None
    teardown: Callable[[], Any] | None = None


def time_batch(c: Contender, calls: int) -> float:
    """Nanoseconds per call of `calls` back-to-back calls of c.fn(*c.args), GC paused."""
    fn, args = c.fn, c.args
    gc_was_enabled = gc.isenabled()
    gc.disable()
    # setup() runs inside this frame on purpose: frames created after install() are intercepted,
    # this one (already running) is not, so only the workload's own frames see framejit.
    if c.setup:
        c.setup()
    try:
        if len(args) == 1:
            (a,) = args
            start = time.perf_counter_ns()
            for _ in range(calls):
                fn(a)
            stop = time.perf_counter_ns()
        elif len(args) == 2:
            a, b = args
            start = time.perf_counter_ns()
            for _ in range(calls):
                fn(a, b)
            stop = time.perf_counter_ns()
        else:
            start = time.perf_counter_ns()
            for _ in range(calls):
                fn(*args)
            stop = time.perf_counter_ns()
    finally:
        if c.teardown:
            c.teardown()
        if gc_was_enabled:
            gc.enable()
    return (stop - start) / calls


def interleave(contenders: list[Contender], *, calls: int, rounds: int, warmup: int = 2) -> dict[str, list[float]]:
    """Time every contender once per round, in turn (A, B, A, B, ...): ns per call, one per round."""
    for _ in range(warmup):
        for c in contenders:
            time_batch(c, calls)
    samples: dict[str, list[float]] = {c.name: [] for c in contenders}
    for _ in range(rounds):
        for c in contenders:
            samples[c.name].append(time_batch(c, calls))
    return samples


def paired_deltas(samples: dict[str, list[float]], name: str, baseline: str) -> list[float]:
    """Per round, name minus baseline measured in the same round: cancels slow drifts of the machine."""
    return [a - b for a, b in zip(samples[name], samples[baseline])]


# ---- results ------------------------------------------------------------------------------------


@dataclass
class Row:
    """One line of the results table. `met` is None when the row has no target."""

    case: str
    contender: str
    median: float
    unit: str
    ratio: float | None = None
    target: str = ""
    met: bool | None = None
    note: str = ""
    samples: list[float] = field(default_factory=list)


def at_most(value: float, limit: float, unit: str) -> tuple[str, bool]:
    """A target `value <= limit` as (table text, met)."""
    return f"≤ {_number(limit)}{_unit_suffix(unit)}", value <= limit


def timing_rows(
    case: str, samples: dict[str, list[float]], baseline: str, *, scale: float, unit: str
) -> list[Row]:
    """Rows for timed contenders: median per call (ns / scale, in `unit`) and ratio vs baseline."""
    base = statistics.median(samples[baseline])
    rows = []
    for name, values in samples.items():
        med = statistics.median(values)
        rows.append(
            Row(case, name, med / scale, unit, ratio=med / base, samples=[round(v / scale, 4) for v in values])
        )
    return rows


def delta_row(case: str, label: str, deltas: list[float], *, scale: float, unit: str) -> Row:
    """A row for the median of paired differences (ns / scale), its interquartile range as a note."""
    values = [d / scale for d in deltas]
    q1, med, q3 = statistics.quantiles(values, n=4)
    note = f"IQR {_number(q1)}–{_number(q3)}"
    return Row(case, label, med, unit, note=note, samples=[round(v, 4) for v in values])


def progress(case: str, message: str) -> None:
    """One progress line, flushed at once."""
    print(f"[bench] {case}: {message}", flush=True)


def _number(v: float) -> str:
    """Three significant digits without exponents for the sizes we report."""
    if v != v:
        return "nan"
    if abs(v) >= 100:
        return f"{v:.0f}"
    if abs(v) >= 10:
        return f"{v:.1f}"
    return f"{v:.3g}"


def _unit_suffix(unit: str) -> str:
    return unit if unit in ("×", "") else f" {unit}"


def markdown_table(rows: list[Row]) -> str:
    """The results as a markdown table."""
    lines = [
        "| case | contender | median | ratio vs baseline | target | met? |",
        "|---|---|---:|---:|---|---|",
    ]
    for r in rows:
        ratio = "—" if r.ratio is None else f"{r.ratio:.2f}×"
        met = "—" if r.met is None else ("yes" if r.met else "**no**")
        contender = r.contender + (f" ({r.note})" if r.note else "")
        median = _number(r.median) + _unit_suffix(r.unit)
        lines.append(f"| {r.case} | {contender} | {median} | {ratio} | {r.target or '—'} | {met} |")
    return "\n".join(lines)


def environment() -> dict[str, Any]:
    """What the numbers were measured on."""
    import framejit

    return {
        "date": datetime.datetime.now().isoformat(timespec="seconds"),
        "python": sys.version.split()[0],
        "numpy": np.__version__,
        "framejit": getattr(framejit, "__file__", "?"),
        "machine": platform.machine(),
        "processor": platform.processor() or platform.machine(),
        "cpus": os.cpu_count(),
    }


def write_results(rows: list[Row], failures: list[str], seconds: float) -> tuple[Path, Path]:
    """Write build/bench/results.md and results.json; return their paths."""
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    env = environment()
    md = RESULTS_DIR / "results.md"
    js = RESULTS_DIR / "results.json"
    header = [
        "# framejit sample benchmarks",
        "",
        f"{env['date']} · Python {env['python']} · NumPy {env['numpy']} · {env['cpus']} CPUs · "
        f"{seconds:.0f} s",
        "",
    ]
    footer = ["", "Failures:", *[f"- {f}" for f in failures]] if failures else []
    md.write_text("\n".join([*header, markdown_table(rows), *footer]) + "\n")
    payload = {
        "environment": env,
        "seconds": round(seconds, 2),
        "failures": failures,
        "rows": [asdict(r) for r in rows],
    }
    js.write_text(json.dumps(payload, indent=2, ensure_ascii=False) + "\n")
    return md, js
