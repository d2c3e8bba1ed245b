"""The one cache-hit path (issue 11): outputs allocated through NumPy's C API agree with the Python
allocation path, large outputs still come from the pool, and the cached NumPy error-state answer
follows every way the state can change between two hits."""

import os
import subprocess
import sys
import textwrap
import threading
import warnings

import numpy as np
import pytest

import framejit

# Runs in a child process: FRAMEJIT_NUMPY_CAPI is read once, when framejit first imports NumPy.
CHILD = textwrap.dedent(
    """
    import numpy as np, framejit

    def small(x, y):
        return np.tanh(x * y + 1)

    def typed(a, b):
        return a * b + 3, a > b

    def wide(x):
        return x * 2.0 + 1.0

    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, 5), dtype=np.float32)
    y = rng.standard_normal((3, 5), dtype=np.float32)
    a = rng.integers(-9, 9, 17)
    b = rng.integers(-9, 9, 17)
    big = rng.standard_normal(1 << 19)  # 4 MiB of float64: a pooled output
    out = []
    for fn, args in ((small, (x, y)), (typed, (a, b)), (wide, (big,))):
        f = framejit.compile(fn)
        for _ in range(3):  # the compiling call, then cache hits
            got = f(*args)
        want = fn(*args)
        for g, w in zip(got if isinstance(got, tuple) else (got,), want if isinstance(want, tuple) else (want,)):
            assert type(g) is np.ndarray and g.dtype == w.dtype and g.shape == w.shape, (g, w)
            assert g.flags.c_contiguous and g.flags.writeable and g.flags.aligned
            np.testing.assert_allclose(g, w, rtol=1e-6)
            pooled = g.nbytes >= 1 << 20
            assert (type(g.base).__name__ == "PoolBlock") == pooled, type(g.base)
            assert g.flags.owndata != pooled
            g[...] = 0  # writable memory of its own: nothing else changes
            out.append(float(np.abs(w).sum()))
    assert framejit.stats()["cache_hits"] >= 6, framejit.stats()
    print(repr(out))
    """
)


def run_child(capi: bool) -> str:
    env = dict(os.environ)
    if capi:
        env.pop("FRAMEJIT_NUMPY_CAPI", None)
    else:
        env["FRAMEJIT_NUMPY_CAPI"] = "0"
    r = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_outputs_through_numpy_c_api_match_the_python_allocation_path():
    assert run_child(capi=True) == run_child(capi=False)


def divide(x):
    return 1.0 / x


def test_error_state_changed_in_place_between_hits_is_seen():
    # NumPy 1's np.seterr mutates the thread's error list in place and stores the same list again:
    # the cached answer must notice that, not just a new list.
    f = framejit.compile(divide)
    zero = np.zeros(4, np.float32)
    old = np.seterr(divide="ignore")
    try:
        for _ in range(3):
            assert np.isinf(f(zero)).all()
        np.seterr(divide="raise")
        with pytest.raises(FloatingPointError):
            f(zero)
        np.seterr(divide="ignore")
        assert np.isinf(f(zero)).all()
        with np.errstate(divide="call"):
            np.seterrcall(lambda *a: None)
            assert np.isinf(f(zero)).all()  # CPython ran it: NumPy called the callback
        np.seterr(divide="raise")
        with pytest.raises(FloatingPointError):
            f(zero)
    finally:
        np.seterr(**old)
    assert framejit.stats()["cache_hits"] >= 2


def test_error_state_of_another_thread_does_not_leak():
    f = framejit.compile(divide)
    zero = np.zeros(4, np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        f(zero)
        seen = []

        def other():
            with np.errstate(divide="raise"):
                try:
                    f(zero)
                    seen.append("no error")
                except FloatingPointError:
                    seen.append("raised")

        t = threading.Thread(target=other)
        t.start()
        t.join()
        assert seen == ["raised"]
        assert np.isinf(f(zero)).all()  # this thread still has the default state


# Globals and module attributes are looked up once per change of their dict, not once per hit
# (Note [Dict version tags] in frontend/guards/source.h): every change must still reach the guards.
def test_rebound_global_and_patched_module_attribute_are_seen_between_hits():
    ns = {"np": np, "k": 2.0}
    exec("def f(x):\n    return np.tanh(x) * k\n", ns)
    f = framejit.compile(ns["f"])
    x = np.linspace(-1, 1, 8, dtype=np.float32)
    for _ in range(3):
        np.testing.assert_allclose(f(x), np.tanh(x) * 2.0, rtol=1e-6)
    ns["k"] = 3.0  # a number: a new value of the same type (guarded or a run-time input)
    np.testing.assert_allclose(f(x), np.tanh(x) * 3.0, rtol=1e-6)

    class FakeNumPy:  # the global `np` rebound to another object
        tanh = staticmethod(np.sin)

    ns["np"] = FakeNumPy
    np.testing.assert_allclose(f(x), np.sin(x) * 3.0, rtol=1e-6)
    ns["np"] = np
    np.testing.assert_allclose(f(x), np.tanh(x) * 3.0, rtol=1e-6)
    saved = np.tanh
    try:
        np.tanh = np.sin  # the module attribute the guards read, patched in place
        np.testing.assert_allclose(f(x), np.sin(x) * 3.0, rtol=1e-6)
    finally:
        np.tanh = saved
    np.testing.assert_allclose(f(x), np.tanh(x) * 3.0, rtol=1e-6)
    del ns["k"]  # gone from globals and builtins: CPython raises NameError, as it would
    with pytest.raises(NameError):
        f(x)


def test_global_shadowing_a_builtin_is_seen_between_hits():
    ns = {"np": np}
    exec("def f(x):\n    return abs(x) + 1\n", ns)
    f = framejit.compile(ns["f"])
    x = np.linspace(-1, 1, 8, dtype=np.float32)
    for _ in range(3):
        np.testing.assert_allclose(f(x), np.abs(x) + 1)
    ns["abs"] = np.negative  # a global now shadows the builtin the guards read
    np.testing.assert_allclose(f(x), -x + 1)
    del ns["abs"]
    np.testing.assert_allclose(f(x), np.abs(x) + 1)
