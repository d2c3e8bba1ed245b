"""The comparison helper itself must be strict, or every other test could pass vacuously."""

import numpy as np
import pytest

from conftest import assert_same

MISMATCHES = [
    (np.array([1.0]), np.array([1.0], dtype=np.float32)),  # dtype
    (np.array([1.0]), np.array([[1.0]])),  # shape
    (np.array([0.0]), np.array([-0.0])),  # sign of zero (exact)
    (np.array([1.0]), np.array([1.0 + 1e-16 * 2])),  # one ulp
    (np.float64(1.0), 1.0),  # numpy scalar vs Python float
    (np.float64(1.0), np.array(1.0)),  # numpy scalar vs 0-d array
    (1, True),  # int vs bool
    (1, 1.0),  # int vs float
    (0.0, -0.0),
    ((1, 2), [1, 2]),  # tuple vs list
    ({"a": 1, "b": 2}, {"b": 2, "a": 1}),  # dict key order
    ((np.ones(2),), (np.ones(2), None)),  # length
    (None, 0),
    (np.ma.masked_array([1.0, 2.0], mask=[0, 1]), np.ma.masked_array([1.0, 2.0], mask=[0, 0])),
]


@pytest.mark.parametrize("expected,actual", MISMATCHES, ids=range(len(MISMATCHES)))
def test_assert_same_rejects(expected, actual):
    with pytest.raises(AssertionError):
        assert_same(expected, actual, exact=True)


def test_assert_same_accepts_equal_structures():
    v = {"a": (np.arange(3), [np.float32(2.5), None, "s"]), "b": np.array([np.nan, -0.0])}
    assert_same(v, {"a": (np.arange(3), [np.float32(2.5), None, "s"]), "b": np.array([np.nan, -0.0])})


def test_tolerant_mode_is_tight_and_only_for_floats():
    assert_same(np.array([1.0]), np.array([1.0 + 1e-15]), exact=False)
    with pytest.raises(AssertionError):
        assert_same(np.array([1.0]), np.array([1.0 + 1e-9]), exact=False)
    with pytest.raises(AssertionError):
        assert_same(np.array([1]), np.array([2]), exact=False)
    with pytest.raises(AssertionError):
        assert_same(np.array([1.0], np.float32), np.array([1.0]), exact=False)
