"""Note [Numba dispatchers] (frontend/trace/calls.cpp): code written for Numba calls its own
@numba.jit helpers; framejit traces such a call as a call of the helper's Python source (py_func),
so the caller stays one graph, and its compiled loops too. Results as the Python source gives them
(what CPython runs with Numba's JIT disabled); a helper rebound to another dispatcher is seen."""

import numpy as np
import pytest

import framejit

numba = pytest.importorskip("numba")


@numba.njit
def relu(x):
    return np.maximum(x, 0)


@numba.njit
def scaled_sum(v, s):
    acc = 0.0
    for i in range(v.shape[0]):
        acc += v[i] * s
    return acc


@numba.njit
def halve(x):
    return x * 0.5


def model(x, w, b):
    return relu(x @ w + b), scaled_sum(b, 2.0)


def test_helpers_are_traced_as_their_python_source():
    rng = np.random.default_rng(3)
    x, w, b = rng.standard_normal((64, 32)), rng.standard_normal((32, 16)), rng.standard_normal(16)
    framejit.reset()
    compiled = framejit.compile(model, fullgraph=True)
    for _ in range(2):
        got = compiled(x, w, b)
        want = (relu.py_func(x @ w + b), scaled_sum.py_func(b, 2.0))
        np.testing.assert_allclose(got[0], want[0], rtol=1e-12, atol=1e-12)
        assert got[1] == pytest.approx(want[1], rel=1e-12)
    s = framejit.stats()
    assert s["graph_breaks"] == 0 and s["loops"] == 1 and s["gemms"] == 1, s


def test_a_rebound_helper_is_guarded():
    global relu
    rng = np.random.default_rng(4)
    x, w, b = rng.standard_normal((8, 4)), rng.standard_normal((4, 3)), rng.standard_normal(3)
    compiled = framejit.compile(model)
    first = compiled(x, w, b)[0]
    saved = relu
    try:
        relu = halve
        np.testing.assert_allclose(compiled(x, w, b)[0], (x @ w + b) * 0.5, rtol=1e-12)
    finally:
        relu = saved
    np.testing.assert_allclose(compiled(x, w, b)[0], first, rtol=0)


def test_other_callables_still_break():
    class Callable:
        def __init__(self):
            self.py_func = lambda x: x + 1  # not a Numba dispatcher: its __call__ runs in CPython

        def __call__(self, x):
            return x * 3

    c = Callable()
    x = np.arange(4.0)
    np.testing.assert_array_equal(framejit.compile(lambda x: c(x) + 1)(x), x * 3 + 1)


@numba.njit
def match(a, b):
    if a + b == 3:
        return 1
    return 0


def pairs(seq, table):
    n = 0
    for i in range(seq.shape[0] - 1):
        n += match(seq[i], seq[i + 1])
        table[i] = max(table[i], match(seq[i], seq[-1]))
    return n


def test_helpers_called_in_compiled_loops_are_inlined():
    seq = np.random.default_rng(5).integers(0, 4, 500)
    table, want_table = np.zeros(500, np.int64), np.zeros(500, np.int64)
    framejit.reset()
    got = framejit.compile(pairs, fullgraph=True)(seq, table)
    assert got == pairs(seq, want_table)
    np.testing.assert_array_equal(table, want_table)
    s = framejit.stats()
    assert s["loops"] == 1 and s["graph_breaks"] == 0, s
