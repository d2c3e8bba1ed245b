"""Faults (issue 6): code generation that fails leaves the function running in CPython with
correct results and one warning; an allocation failure surfaces as MemoryError and corrupts
nothing; an exception raised in a traced helper surfaces as itself with a traceback through the
user's code."""

import traceback
import warnings

import numpy as np
import pytest

import framejit
from framejit import _C


@pytest.fixture()
def fault():
    yield _C._set_faults
    _C._set_faults("")


def fresh(source, name="f"):
    ns = {"np": np}
    exec(source, ns)
    return ns[name]


def test_failing_code_generation_runs_in_cpython_with_one_warning(fault):
    fault("codegen")
    f = fresh("def f(x):\n    return np.tanh(x) * 2.0 + x.sum()\n")
    c = framejit.compile(f)
    x = np.linspace(-1, 1, 50)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        results = [c(x) for _ in range(5)]
    messages = [str(w.message) for w in caught if "framejit" in str(w.message)]
    assert len(messages) == 1 and "code generation failed on purpose" in messages[0], messages
    for r in results:
        np.testing.assert_array_equal(r, f(x))
    assert framejit.stats()["captured"] == 0


def test_allocation_failure_is_a_memory_error_and_corrupts_nothing(fault):
    f = fresh("def f(x, y):\n    return np.exp(x) * y, (x * y).sum(-1)\n")
    c = framejit.compile(f)
    x, y = np.linspace(0, 1, 60).reshape(6, 10), np.full(10, 2.0)
    xs, ys = x.copy(), y.copy()
    want = f(x, y)
    c(x, y)  # compiled
    fault("alloc")
    for _ in range(3):
        with pytest.raises(MemoryError):
            c(x, y)
    fault("")
    got = c(x, y)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-12)
    np.testing.assert_array_equal(x, xs)
    np.testing.assert_array_equal(y, ys)
    assert framejit.stats()["captured"] == 1  # the same compiled program kept serving


def helper(x, i):
    return x[i] * 2.0


def model(x, i):
    y = np.exp(x)
    return helper(y, i) + 1.0


def test_exceptions_in_traced_helpers_carry_the_users_traceback():
    c = framejit.compile(model)
    x = np.ones((4, 3))
    np.testing.assert_allclose(c(x, 1), model(x, 1))
    with pytest.raises(IndexError) as got:
        c(x, 9)
    with pytest.raises(IndexError) as want:
        model(x, 9)
    assert str(got.value) == str(want.value)
    tb = traceback.extract_tb(got.value.__traceback__)
    assert [f.name for f in tb][-2:] == ["model", "helper"], tb
    # Note [Tracebacks of run-time errors]: the compiled program raised (i is a run-time index,
    # Note [Run-time indices]), and the frames point at the user's lines.
    assert framejit.stats()["captured"] == 1
    assert tb[-1].line == "return x[i] * 2.0" and tb[-2].line == "return helper(y, i) + 1.0", tb
