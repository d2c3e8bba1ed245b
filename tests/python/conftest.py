"""Shared helpers for the framejit pytest suite: run eagerly and compiled, compare exactly.

The suite runs on every interpreter framejit is built for (`make test`). Where NumPy is missing
(pyenv's 3.12 and 3.13), the test modules that need it are not collected; the header says which.
"""

import copy
import math
import re
import struct
import types
import warnings
from pathlib import Path

import pytest

import framejit

try:
    import numpy as np
except ImportError:
    np = None

BACKENDS = ["eager", "jit"]

# Modules that need NumPy without importing it themselves: they run NumPy programs in a
# subprocess (the fuzzer, `python -m framejit script.py`, the C++ host's models).
_NEEDS_NUMPY_INDIRECTLY = {"test_cli.py", "test_fuzz.py", "test_host_package.py"}


def _needs_numpy(path):
    if path.name in _NEEDS_NUMPY_INDIRECTLY:
        return True
    return re.search(r"^(import numpy|from numpy)\b", path.read_text(), re.MULTILINE) is not None


collect_ignore = []
if np is None:
    collect_ignore = sorted(p.name for p in Path(__file__).parent.glob("test_*.py") if _needs_numpy(p))


def pytest_report_header(config):
    if np is None:
        return f"framejit: NumPy is not installed; not collected: {' '.join(collect_ignore)}"
    return f"framejit: NumPy {np.__version__}"


@pytest.fixture(autouse=True)
def _fresh_framejit():
    """Every test starts and ends with empty caches, zero counters and the default config."""
    framejit.reset()
    limit = framejit.config.recompile_limit
    yield
    framejit.config.recompile_limit = limit
    framejit.reset()


def rng(seed=0):
    return np.random.default_rng(seed)


def randn(*shape, dtype="float64", seed=0):
    return rng(seed).standard_normal(shape).astype(dtype)


def _copy_args(args):
    """Fresh copies so a run that mutates its inputs cannot affect another run."""
    return copy.deepcopy(args)


def _float_bits(v):
    return struct.pack("<d", v)


def _tolerance(dtype):
    if dtype == np.float16:
        return 1e-3
    if dtype == np.float32 or dtype == np.complex64:
        return 1e-5
    return 1e-12


_NOT_DATA = (
    type,
    types.FunctionType,
    types.BuiltinFunctionType,
    types.MethodType,
    types.ModuleType,
) + ((np.ufunc,) if np is not None else ())


def assert_same(expected, actual, exact=True, path="result"):
    """Exact structural comparison: same Python type at every level, same dtype/shape, and
    (exact=True) bit-identical data; exact=False allows a tight tolerance for floats only."""
    assert type(actual) is type(expected), (
        f"{path}: type {type(actual).__name__} != expected {type(expected).__name__} "
        f"(actual={actual!r}, expected={expected!r})"
    )
    if expected is None:
        return
    if isinstance(expected, (tuple, list)):
        assert len(actual) == len(expected), f"{path}: length {len(actual)} != {len(expected)}"
        for i, (e, a) in enumerate(zip(expected, actual)):
            assert_same(e, a, exact, f"{path}[{i}]")
        return
    if isinstance(expected, dict):
        assert list(actual.keys()) == list(expected.keys()), (
            f"{path}: keys {list(actual.keys())} != {list(expected.keys())}"
        )
        for k in expected:
            assert_same(expected[k], actual[k], exact, f"{path}[{k!r}]")
        return
    if np is not None and isinstance(expected, np.ma.MaskedArray):
        assert_same(np.ma.getmaskarray(expected), np.ma.getmaskarray(actual), exact, f"{path}.mask")
    if np is not None and isinstance(expected, (np.ndarray, np.generic)):
        assert actual.dtype == expected.dtype, f"{path}: dtype {actual.dtype} != {expected.dtype}"
        assert actual.shape == expected.shape, f"{path}: shape {actual.shape} != {expected.shape}"
        e = np.ascontiguousarray(expected)
        a = np.ascontiguousarray(actual)
        if expected.dtype.kind == "O":
            assert e.tolist() == a.tolist(), f"{path}: {actual!r} != {expected!r}"
            return
        if exact or expected.dtype.kind not in "fc":
            assert e.tobytes() == a.tobytes(), (
                f"{path}: values differ (bitwise)\n actual={actual!r}\n expected={expected!r}"
            )
        else:
            tol = _tolerance(expected.dtype)
            np.testing.assert_allclose(a, e, rtol=tol, atol=tol, equal_nan=True, err_msg=path)
        return
    if isinstance(expected, framejit.Tensor):
        assert actual.dtype == expected.dtype, f"{path}: dtype {actual.dtype} != {expected.dtype}"
        assert actual.shape == expected.shape, f"{path}: shape {actual.shape} != {expected.shape}"
        e, a = expected.reshape(-1).tolist(), actual.reshape(-1).tolist()
        for i, (x, y) in enumerate(zip(e, a)):
            assert_same(x, y, exact, f"{path}.flat[{i}]")
        return
    if isinstance(expected, float):
        if exact:
            assert _float_bits(actual) == _float_bits(expected) or (
                math.isnan(actual) and math.isnan(expected)
            ), f"{path}: {actual!r} != {expected!r}"
        else:
            assert actual == pytest.approx(expected, rel=1e-12, abs=1e-12, nan_ok=True), path
        return
    if hasattr(expected, "__dict__") and not isinstance(expected, _NOT_DATA):
        assert_same(vars(expected), vars(actual), exact, f"{path}.__dict__")
        return
    assert actual == expected, f"{path}: {actual!r} != {expected!r}"


def check(fn, *args, backend="eager", fullgraph=True, expect_hit=None, dynamic=None, **kwargs):
    """Run `fn` eagerly (plain CPython) and compiled — the cold call and the cache-hit call — on
    fresh copies of the arguments; compare results and the arguments' state afterwards.

    fullgraph=True (default) also asserts the whole function was captured in one graph.
    expect_hit (default: fullgraph) asserts the second call was a cache hit without a miss.
    Returns the eager result."""
    if expect_hit is None:
        expect_hit = fullgraph
    exact = backend == "eager"

    eager_args = _copy_args((args, kwargs))
    expected = fn(*eager_args[0], **eager_args[1])

    compiled = framejit.compile(fn, backend=backend, fullgraph=fullgraph, dynamic=dynamic)
    for call in ("cold", "hit"):
        before = framejit.stats()
        run_args = _copy_args((args, kwargs))
        actual = compiled(*run_args[0], **run_args[1])
        after = framejit.stats()
        assert_same(expected, actual, exact, path=f"{call} call result")
        assert_same(eager_args, run_args, exact, path=f"{call} call arguments afterwards")
        if call == "cold" and fullgraph:
            assert after["captured"] > before["captured"], "cold call captured no graph"
        if call == "hit" and expect_hit:
            assert after["cache_hits"] > before["cache_hits"], f"second call was not a cache hit: {after}"
            assert after["cache_misses"] == before["cache_misses"], f"second call missed: {after}"
            assert after["recompiles"] == before["recompiles"], f"second call recompiled: {after}"
    return expected


def compile_count():
    """Graphs captured so far (cold compiles and recompiles)."""
    return framejit.stats()["captured"]


@pytest.fixture
def no_warnings():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        yield


def check_sequence(fn, calls, backend="eager", fullgraph=False, **opts):
    """Compile `fn` once and call it with each argument tuple in `calls` (each twice), comparing
    with eager CPython every time. If CPython raises, the compiled call must raise the same
    exception type with the same message."""
    exact = backend == "eager"
    compiled = framejit.compile(fn, backend=backend, fullgraph=fullgraph, **opts)
    for args in calls:
        eager_args = _copy_args(args)
        try:
            expected, expected_exc = fn(*eager_args), None
        except Exception as e:  # noqa: BLE001
            expected, expected_exc = None, e
        for call in ("first", "second"):
            run_args = _copy_args(args)
            if expected_exc is not None:
                with pytest.raises(type(expected_exc)) as info:
                    compiled(*run_args)
                assert str(info.value) == str(expected_exc)
                # What was written before the raise stays written, as in CPython.
                assert_same(eager_args, run_args, exact, path="arguments after the exception")
                continue
            actual = compiled(*run_args)
            assert_same(expected, actual, exact, path=f"{call} call with {args!r}")
            assert_same(eager_args, run_args, exact, path="arguments afterwards")
    return compiled
