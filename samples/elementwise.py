"""tanh(x*a + b) * exp(-x*x) on 1M float32: NumPy vs framejit (and numexpr as a reference)."""

import functools
import inspect

import numpy as np

import framejit
from harness import Contender, InvalidMeasurement, Row, check_same, interleave, progress, timing_rows

NAME = "elementwise"
SIZE = 1_000_000
CALLS = 2  # calls per timed batch
ROUNDS = 20


def model(x, a, b):
    return np.tanh(x * a + b) * np.exp(-x * x)


def run() -> list[Row]:
    """Check framejit against NumPy, then time NumPy, framejit (backend jit) and numexpr."""
    x = np.random.default_rng(0).standard_normal(SIZE, dtype=np.float32)
    a, b = 0.7, 0.1  # Python floats: run-time inputs of the graph, not constants
    want = model(x, a, b)

    # An untimed compile of another function first, so compile_ms below does not depend on whether
    # this is the process's first compile (trace_time reports that one).
    framejit.compile(lambda v: v * 2.0)(x[:4])
    framejit.reset()
    compiled = framejit.compile(model, backend="jit")
    # Float tolerance, not exact: the jit backend may fuse and vectorize exp/tanh.
    check_same(f"{NAME} cold call", compiled(x, a, b), want, exact=False)
    stats = framejit.stats()
    check_same(f"{NAME} cache hit", compiled(x, a, b), want, exact=False)
    check_same(f"{NAME} cache hit, new a and b", compiled(x, 0.3, -0.2), model(x, 0.3, -0.2), exact=False)
    after = framejit.stats()
    if stats["captured"] != 1 or stats["graph_breaks"] or after["cache_hits"] < 2 or after["recompiles"]:
        raise InvalidMeasurement(f"{NAME}: expected one graph reused for new a, b; got {after}")

    contenders = [Contender("NumPy", model, (x, a, b)), Contender("framejit (backend jit)", compiled, (x, a, b))]
    try:
        import numexpr

        expr = "tanh(x * a + b) * exp(-x * x)"
        # float32 scalars so numexpr stays in float32, as NumPy does with Python floats.
        ne = functools.partial(numexpr.evaluate, local_dict={"x": x, "a": np.float32(a), "b": np.float32(b)})
        check_same(f"{NAME} numexpr", ne(expr), want, exact=False)
        contenders.append(Contender(f"numexpr ({numexpr.detect_number_of_cores()} threads)", ne, (expr,)))
    except ImportError:
        pass

    progress(NAME, f"{len(contenders)} contenders × {ROUNDS} rounds × {CALLS} calls on float32[{SIZE}]")
    samples = interleave(contenders, calls=CALLS, rounds=ROUNDS)
    rows = timing_rows(NAME, samples, "NumPy", scale=1e6, unit="ms")
    rows.append(Row(NAME, "framejit compile_ms, first compile", stats["compile_ms"], "ms"))
    rows.append(Row(NAME, "framejit compile_ms, again after reset()", recompile_ms(x, a, b), "ms"))
    return rows


def recompile_ms(x, a, b) -> float:
    """compile_ms of the same model after reset(), from a fresh code object (NumPy dtype probes cached)."""
    namespace = {"np": np}
    exec(compile(inspect.getsource(model), f"<{NAME} recompile>", "exec"), namespace)
    framejit.reset()
    framejit.compile(namespace["model"])(x, a, b)
    return framejit.stats()["compile_ms"]
