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
