"""The model the C++ host sample runs: a two-layer MLP with a GELU, written in plain NumPy.
framejit captures `forward` the first time it runs and compiles it (GEMMs with fused epilogues)."""

import numpy as np


def gelu(x):
    return 0.5 * x * (1.0 + np.tanh(0.7978845608 * (x + 0.044715 * x * x * x)))


def forward(x, w1, b1, w2, b2):
    return gelu(x @ w1 + b1) @ w2 + b2


def forward_with_hidden(x, w1, b1, w2, b2):
    h = gelu(x @ w1 + b1)
    return h @ w2 + b2, h


def scale_in_place(x, factor):
    x *= factor  # the host sees this: the array is its own buffer
    return x.sum()
