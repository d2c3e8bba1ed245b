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


def check_close(what: str, got: Any, want: np.ndarray, *, rtol: float, atol: Any) -> str:
    """Raise CorrectnessError unless |got - want| <= atol + rtol * |want| element by element (NaN
    where NumPy has NaN, equal infinities). `atol` may be an array broadcasting against `want`
    (an error bound per element, e.g. for GEMM). Returns a note: the largest error and the
    largest fraction of the allowed error any element used."""
    if not isinstance(got, np.ndarray):
        raise CorrectnessError(f"{what}: expected ndarray, got {_short(got)}")
    if got.dtype != want.dtype or got.shape != want.shape:
        raise CorrectnessError(
            f"{what}: expected {want.dtype}{list(want.shape)}, got {got.dtype}{list(got.shape)}"
        )
    g = got.astype(np.float64)
    w = want.astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        err = np.abs(g - w)
        allowed = atol + rtol * np.abs(w)
        ok = (err <= allowed) | (g == w) | (np.isnan(g) & np.isnan(w))
        used = np.where(np.isfinite(err), err / np.maximum(allowed, np.finfo(np.float64).tiny), 0.0)
    worst_err = float(np.max(np.where(np.isfinite(err), err, 0.0), initial=0.0))
    worst_used = float(np.max(used, initial=0.0))
    if not ok.all():
        bad = np.flatnonzero(~ok.ravel())
        i = int(bad[0])
        raise CorrectnessError(
            f"{what}: {bad.size} of {want.size} elements outside rtol={rtol:g}, atol={_atol_text(atol)} "
            f"(max abs error {worst_err:.3g}, {worst_used:.3g}× the allowed error; first at flat index "
            f"{i}: got {g.ravel()[i]!r}, NumPy {w.ravel()[i]!r})"
        )
    return f"max abs err {worst_err:.2g} = {worst_used:.2f} of tol"


def _atol_text(atol: Any) -> str:
    if isinstance(atol, np.ndarray):
        return f"per element ({float(atol.min()):.2g}–{float(atol.max()):.2g})"
    return f"{atol:g}"


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


def interleave(
    contenders: list[Contender],
    *,
    calls: int | dict[str, int],
    rounds: int,
    warmup: int = 2,
    settle_s: float = 0.0,
) -> dict[str, list[float]]:
    """Time every contender once per round, in turn (A, B, A, B, ...): ns per call, one per round.

    calls may differ per contender (a dict by name, see calls_for): CPython at 10 ms a call and a
    compiled kernel at 10 µs a call each get a batch of about the same duration.
    settle_s pauses between contenders: a thread pool that keeps spinning after a call (OpenBLAS
    spins about 0.1 s) would otherwise hold a core while the next contender runs.
    """

    def n(c: Contender) -> int:
        return calls[c.name] if isinstance(calls, dict) else calls

    for _ in range(warmup):
        for c in contenders:
            time_batch(c, n(c))
    samples: dict[str, list[float]] = {c.name: [] for c in contenders}
    for _ in range(rounds):
        for c in contenders:
            if settle_s:
                time.sleep(settle_s)
            samples[c.name].append(time_batch(c, n(c)))
    return samples


def calls_for(contenders: list[Contender], batch_s: float) -> dict[str, int]:
    """Per contender, how many back-to-back calls take about batch_s (at least one), from one
    timed call after a warm one."""
    out = {}
    for c in contenders:
        time_batch(c, 1)
        per_call = time_batch(c, 1) * 1e-9
        out[c.name] = max(1, min(100_000, int(batch_s / max(per_call, 1e-9))))
    return out


def use_all_cpus(torch) -> None:
    """PyTorch on every CPU, as framejit and OpenBLAS are (Debian's build may default to one)."""
    torch.set_num_threads(os.cpu_count() or 1)


def torch_peer(case: str, fn: Callable[..., Any], args: tuple, want: Any, *, rtol: float, atol: Any):
    """PyTorch's CPU eager mode as a peer: `fn(torch, *tensors)` computes the case from `args`
    (NumPy arrays become tensors sharing their memory). Returns (Contender, None), checked against
    `want`, or (None, an n/a Row) when PyTorch is not installed."""
    try:
        import torch
    except ImportError:
        return None, Row(case, "PyTorch CPU eager", float("nan"), "", note="n/a: PyTorch is not installed")
    use_all_cpus(torch)
    tensors = tuple(torch.from_numpy(a) if isinstance(a, np.ndarray) else a for a in args)

    def run():
        with torch.no_grad():
            return fn(torch, *tensors).numpy()

    n = torch.get_num_threads()
    name = f"PyTorch CPU eager ({n} thread{'s' if n != 1 else ''})"
    check_close(f"{case} {name}", run(), want, rtol=rtol, atol=atol)
    return Contender(name, run, ()), None


def not_installed_row(case: str, peer: str, package: str) -> Row:
    """The row of a peer whose package is missing: n/a, never a failure."""
    return Row(case, peer, float("nan"), "", note=f"n/a: {package} is not installed")


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


def at_least(value: float, limit: float, unit: str) -> tuple[str, bool]:
    """A target `value >= limit` as (table text, met)."""
    return f"≥ {_number(limit)}{_unit_suffix(unit)}", value >= limit


def speedup_row(
    case: str, samples: dict[str, list[float]], fast: str, slow: str, *, target: float | None = None
) -> Row:
    """How many times faster `fast` is than `slow`: the median of per-round ratios slow/fast (each
    round times both back to back, which cancels slow drifts), the IQR as a note."""
    ratios = [s / f for s, f in zip(samples[slow], samples[fast])]
    med = statistics.median(ratios)
    q1, _, q3 = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else (med, med, med)
    row = Row(case, f"speedup of {fast} over {slow}", med, "×", note=f"IQR {q1:.2f}–{q3:.2f}",
              samples=[round(r, 3) for r in ratios])
    if target is not None:
        row.target, row.met = at_least(med, target, "×")
    return row


# Contender name of the per-graph compile-time rows; bench.py gathers them into one table.
COMPILE_ROW = "framejit compile_ms"


def fresh_compile_ms(fn: Callable[..., Any], args: tuple, *, repeats: int = 3) -> list[float]:
    """stats()["compile_ms"] of `repeats` fresh compiles of fn (framejit.reset() before each, and a
    new function object with a new code object, so no cache entry can be reused). Each compile
    must capture one graph without graph breaks. A throwaway compile goes first: the process's
    first compile pays one-time initialisation (trace_time reports that one)."""
    import types

    import framejit

    framejit.reset()
    framejit.compile(lambda v: v * 2.0)(np.ones(4, np.float32))
    results = []
    for _ in range(repeats):
        framejit.reset()
        fresh = _fresh_copy(fn, types)
        framejit.compile(fresh, backend="jit")(*args)
        stats = framejit.stats()
        if stats["captured"] != 1 or stats["graph_breaks"]:
            raise InvalidMeasurement(f"fresh compile of {fn!r}: expected one graph, got {stats}")
        results.append(stats["compile_ms"])
    framejit.reset()
    return results


def _fresh_copy(fn: Callable[..., Any], types: Any) -> Callable[..., Any]:
    """A copy of a function (or bound method) with its own code object."""
    bound_to = getattr(fn, "__self__", None)
    func = getattr(fn, "__func__", fn)
    copy = types.FunctionType(func.__code__.replace(), func.__globals__, func.__name__, func.__defaults__,
                              func.__closure__)
    copy.__kwdefaults__ = func.__kwdefaults__
    return types.MethodType(copy, bound_to) if bound_to is not None else copy


def compile_row(case: str, graph: str, values: list[float], *, limit: float) -> Row:
    """The compile-time row of one graph: median compile_ms of fresh compiles, target ≤ limit."""
    med = statistics.median(values)
    target, met = at_most(med, limit, "ms")
    return Row(case, COMPILE_ROW, med, "ms", target=target, met=met,
               note=f"{graph}; median of {len(values)} fresh compiles", samples=[round(v, 3) for v in values])


def compiled_and_checked(fn: Callable[..., Any], args: tuple, what: str) -> tuple[Callable[..., Any], list]:
    """framejit.compile(fn) after framejit.reset(), called twice on args: the first call must
    capture one graph without graph breaks, the second must be a cache hit (so timing it times
    the compiled program, not CPython). Returns the compiled function and both results, for the
    caller to check against NumPy."""
    import framejit

    framejit.reset()
    compiled = framejit.compile(fn, backend="jit")
    results = [compiled(*args), compiled(*args)]
    stats = framejit.stats()
    if stats["captured"] != 1 or stats["graph_breaks"] or stats["cache_hits"] < 1 or stats["recompiles"]:
        raise InvalidMeasurement(f"{what}: expected one graph, then a cache hit; got {stats}")
    return compiled, results


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
    if v != v:  # no measurement: a peer that is not installed
        return "n/a"
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


def compile_table(rows: list[Row]) -> str:
    """The per-graph compile-time rows of every case gathered in one table ("" when there are none)."""
    mine = [r for r in rows if r.contender == COMPILE_ROW]
    if not mine:
        return ""
    lines = [
        "| case | graph | compile_ms (median of fresh compiles) | target | met? |",
        "|---|---|---:|---|---|",
    ]
    for r in mine:
        met = "—" if r.met is None else ("yes" if r.met else "**no**")
        graph = r.note.split(";")[0]
        lines.append(f"| {r.case} | {graph} | {_number(r.median)} ms | {r.target or '—'} | {met} |")
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
        # Other work on the machine (e.g. a build) skews every figure: 1-, 5- and 15-minute load.
        "loadavg": [round(v, 2) for v in os.getloadavg()],
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
        f"{seconds:.0f} s · load average at the end {' / '.join(map(str, env['loadavg']))}",
        "",
    ]
    footer = ["", "Failures:", *[f"- {f}" for f in failures]] if failures else []
    compile_times = compile_table(rows)
    compile_section = ["", "## Compile time per graph", "", compile_times] if compile_times else []
    md.write_text("\n".join([*header, markdown_table(rows), *compile_section, *footer]) + "\n")
    payload = {
        "environment": env,
        "seconds": round(seconds, 2),
        "failures": failures,
        "rows": [asdict(r) for r in rows],
    }
    js.write_text(json.dumps(payload, indent=2, ensure_ascii=False) + "\n")
    return md, js


def draw_speedups(rows: list[Row]) -> Path | None:
    """build/bench/speedup.png: one bar per "speedup of framejit over <peer>" row, on a log scale,
    with each row's target as a tick; None (and a note) when matplotlib is not installed."""
    bars = [r for r in rows if r.contender.startswith("speedup of framejit over ") and r.median == r.median]
    if not bars:
        return None
    try:
        import matplotlib

        matplotlib.use("Agg")  # files only, no display
        import matplotlib.pyplot as plt
    except ImportError:
        print("[bench] matplotlib is not installed: no speedup.png", flush=True)
        return None
    labels = [f"{r.case}\nvs {r.contender.removeprefix('speedup of framejit over ')}" for r in bars]
    values = [r.median for r in bars]
    fig, ax = plt.subplots(figsize=(max(8.0, 0.9 * len(bars)), 5.0))
    colors = ["tab:green" if r.met in (True, None) and v >= 1 else "tab:red" for r, v in zip(bars, values)]
    ax.bar(range(len(bars)), values, color=colors)
    for i, r in enumerate(bars):
        ax.text(i, values[i], f"{values[i]:.2f}×", ha="center", va="bottom", fontsize=8)
        if r.target:
            target = float(r.target.removeprefix("≥ ").rstrip("×"))
            ax.hlines(target, i - 0.4, i + 0.4, colors="black", linestyles="dashed", linewidth=1)
    ax.axhline(1.0, color="gray", linewidth=0.8)
    ax.set_yscale("log")
    ax.set_ylabel("speedup of framejit (×, log scale; dashed: target)")
    ax.set_xticks(range(len(bars)), labels, rotation=60, ha="right", fontsize=7)
    ax.set_title("framejit vs peers, measured side by side (medians of per-round ratios)")
    fig.tight_layout()
    path = RESULTS_DIR / "speedup.png"
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
