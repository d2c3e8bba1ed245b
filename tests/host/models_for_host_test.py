"""Functions the C++ host tests (test_host.cpp) call."""

import numpy as np


def affine(x, w, b):
    return np.tanh(x @ w + b)


def pair(x):
    return x * 2.0, x.sum(-1)


def add_one_in_place(x):
    x += 1
    return x.shape[0]


def describe(x):
    # What NumPy sees of a strided tensor: its strides and its values in order.
    return np.array(list(x.strides) + list(x.ravel()), dtype=np.float64)


def fail(x):
    return helper_that_raises(x)


def helper_that_raises(x):
    raise ValueError(f"bad input of shape {x.shape}")


def captured_graphs():
    import framejit

    return framejit.stats()["captured"]
