"""Minimal programs found by the differential fuzzer (tests/fuzz/run.py), one test per bug."""

import numpy as np
import pytest

from conftest import BACKENDS, check_sequence


@pytest.mark.parametrize("backend", BACKENDS)
def test_unused_integer_power_still_raises(backend):
    # fuzz seed 6 program 159: DCE dropped `x ** x`, whose value nothing used, so the compiled
    # function returned where NumPy raises "Integers to negative integer powers are not allowed".
    def f(x):
        unused = x ** x  # noqa: F841
        return x[None]

    ok = np.arange(6, dtype=np.int64).reshape(3, 2)
    check_sequence(f, [(ok,), (ok - 3,)], backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_unused_min_of_slice_that_becomes_empty_still_raises(backend):
    # fuzz seed 20 program 1799: x[1:-1] of a symbolic length is empty for len(x) == 2; DCE
    # dropped the unused np.min, so no "zero-size array to reduction operation" ValueError.
    def f(x, y):
        unused = np.min(x[1:-1], axis=None)  # noqa: F841
        return y.argmin(0)

    y = np.arange(25, dtype=np.int32).reshape(5, 5) % 7
    check_sequence(f, [(np.ones(16, np.float32), y), (np.ones(2, np.float32), y)],
                   backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_unused_reshape_minus_one_of_empty_slice_still_raises(backend):
    # fuzz seed 1 program 2453: x[1:-1] is empty for len(x) == 2 and reshape(0, -1) raises;
    # DCE dropped the unused reshape.
    def f(x):
        v = x[1:-1]
        unused = v.reshape(v.shape[0], -1)  # noqa: F841
        return x + 1

    check_sequence(f, [(np.arange(5, dtype=np.int32),), (np.arange(2, dtype=np.int32),)],
                   backend=backend)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("backend", BACKENDS)
def test_maximum_minimum_of_signed_zeros_return_the_second_operand(backend, dtype):
    # fuzz seed 71 program 4855: np.minimum(np.abs(x), x) at x = -0.0 is -0.0 in NumPy (a tie
    # returns the second operand) but the JIT returned +0.0, so a later v // that flipped +-inf.
    def f(a, b, x):
        return (np.maximum(a, b), np.minimum(a, b), x // np.minimum(np.abs(b), b),
                np.maximum(a, np.nan), np.minimum(np.nan, b))

    a = np.array([0.0, -0.0, 0.0, -0.0, 1.0, np.nan] * 3, dtype=dtype)
    b = np.array([-0.0, 0.0, 0.0, -0.0, np.nan, 2.0] * 3, dtype=dtype)
    x = np.array([1.5, -2.0, 3.0, -4.0, 5.0, 6.0] * 3, dtype=dtype)
    with np.errstate(all="ignore"):
        check_sequence(f, [(a, b, x)], backend=backend)
