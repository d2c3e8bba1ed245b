"""Ordinary NumPy model code: classes holding weights, lists of layers, dict/tuple returns."""

import math

import numpy as np
import pytest

import framejit
from conftest import BACKENDS, assert_same, check, randn


def softmax(x, axis=-1):
    z = x - x.max(axis=axis, keepdims=True)
    e = np.exp(z)
    return e / e.sum(axis=axis, keepdims=True)


def layernorm(x, gamma, beta, eps=1e-5):
    mu = x.mean(axis=-1, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * gamma + beta


def gelu(x):
    return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def relu(x):
    return np.maximum(x, 0)


class Linear:
    def __init__(self, n_in, n_out, seed, bias=True):
        self.w = randn(n_in, n_out, seed=seed) / math.sqrt(n_in)
        self.b = randn(n_out, seed=seed + 100) if bias else None

    def __call__(self, x):
        y = x @ self.w
        if self.b is not None:
            y = y + self.b
        return y


class MLP:
    def __init__(self, sizes, act=relu):
        self.layers = [Linear(a, b, seed=i) for i, (a, b) in enumerate(zip(sizes, sizes[1:]))]
        self.act = act

    def __call__(self, x):
        for layer in self.layers[:-1]:
            x = self.act(layer(x))
        return self.layers[-1](x)


class LayerNorm:
    def __init__(self, d):
        self.gamma = np.ones(d) + randn(d, seed=7) * 0.1
        self.beta = randn(d, seed=8) * 0.1
        self.eps = 1e-5

    def __call__(self, x):
        return layernorm(x, self.gamma, self.beta, self.eps)


class Attention:
    def __init__(self, d, heads):
        self.heads = heads
        self.qkv = Linear(d, 3 * d, seed=20)
        self.proj = Linear(d, d, seed=21)

    def split_heads(self, t):
        b, n, d = t.shape
        return t.reshape(b, n, self.heads, d // self.heads).transpose(0, 2, 1, 3)

    def __call__(self, x, mask=None):
        b, n, d = x.shape
        q, k, v = np.split(self.qkv(x), 3, axis=-1)
        q, k, v = self.split_heads(q), self.split_heads(k), self.split_heads(v)
        scores = q @ k.swapaxes(-1, -2) / math.sqrt(d // self.heads)
        if mask is not None:
            scores = np.where(mask, scores, -1e9)
        p = softmax(scores)
        out = (p @ v).transpose(0, 2, 1, 3).reshape(b, n, d)
        return self.proj(out), p


class Block:
    def __init__(self, d, heads):
        self.ln1 = LayerNorm(d)
        self.attn = Attention(d, heads)
        self.ln2 = LayerNorm(d)
        self.mlp = MLP([d, 2 * d, d], act=gelu)

    def forward(self, x, mask=None):
        a, p = self.attn(self.ln1(x), mask)
        x = x + a
        x = x + self.mlp(self.ln2(x))
        return {"out": x, "probs": p}

    __call__ = forward


@pytest.mark.parametrize("backend", BACKENDS)
def test_mlp(backend):
    model = MLP([4, 8, 8, 3])

    def run(x):
        return model(x)

    check(run, randn(5, 4, seed=1), backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_model_object_as_argument(backend):
    model = MLP([4, 6, 2])

    def run(m, x):
        return m(x)

    check(run, model, randn(3, 4, seed=2), backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_compiled_bound_method(backend):
    model = MLP([4, 6, 2])
    x = randn(3, 4, seed=3)
    expected = model(x)
    fn = framejit.compile(model.__call__, backend=backend, fullgraph=True)
    assert_same(expected, fn(x), exact=backend == "eager")
    hits = framejit.stats()["cache_hits"]
    assert_same(expected, fn(x), exact=backend == "eager")
    assert framejit.stats()["cache_hits"] > hits


@pytest.mark.parametrize("backend", BACKENDS)
def test_compiled_callable_object(backend):
    model = MLP([4, 6, 2])
    x = randn(3, 4, seed=3)
    expected = model(x)
    fn = framejit.compile(model, backend=backend, fullgraph=True)
    assert_same(expected, fn(x), exact=backend == "eager")
    assert_same(expected, fn(x), exact=backend == "eager")
    assert framejit.stats()["captured"] >= 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_softmax_and_layernorm(backend):
    ln = LayerNorm(6)

    def f(x):
        return softmax(x), softmax(x, axis=0), ln(x), gelu(x)

    check(f, randn(4, 6, seed=4), backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("masked", [False, True])
def test_attention_block_dict_return(masked, backend):
    block = Block(8, heads=2)
    x = randn(2, 5, 8, seed=5)
    mask = np.tril(np.ones((5, 5), dtype=bool)) if masked else None

    def f(x, mask):
        return block(x, mask)

    check(f, x, mask, backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_block_forward_method_and_tuple_return(backend):
    block = Block(8, heads=4)

    def f(x):
        r = block.forward(x)
        return r["out"].sum(axis=-1), (r["probs"].max(), r["out"].shape)

    check(f, randn(1, 3, 8, seed=6), backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_list_of_layers_with_residual_and_dict_of_weights(backend):
    params = {f"w{i}": randn(6, 6, seed=30 + i) * 0.3 for i in range(3)}
    biases = [randn(6, seed=40 + i) for i in range(3)]

    def f(x):
        h = x
        stats = {}
        for i in range(3):
            h = h + np.tanh(h @ params[f"w{i}"] + biases[i])
            stats[f"norm{i}"] = np.sqrt((h * h).sum())
        return h, stats

    check(f, randn(2, 6, seed=9), backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_model_batch_size_change_does_not_recompile(backend):
    model = MLP([4, 8, 3])

    def run(x):
        return softmax(model(x))

    fn = framejit.compile(run, backend=backend, fullgraph=True)
    exact = backend == "eager"
    for n in (2, 5, 9, 3):
        x = randn(n, 4, seed=n)
        assert_same(run(x), fn(x), exact)
        assert_same(run(x), fn(x), exact)
    s = framejit.stats()
    assert s["captured"] == 1 and s["recompiles"] == 0, s


@pytest.mark.parametrize("backend", BACKENDS)
def test_weights_replaced_on_object(backend):
    """Weights read from object attributes are graph inputs: new arrays of the same kind
    must be used (not the first call's values baked in)."""
    layer = Linear(4, 3, seed=50)

    def f(x):
        return layer(x)

    fn = framejit.compile(f, backend=backend, fullgraph=True)
    x = randn(2, 4, seed=51)
    exact = backend == "eager"
    assert_same(f(x), fn(x), exact)
    layer.w = randn(4, 3, seed=52)
    assert_same(f(x), fn(x), exact)
    layer.w[0, 0] = 100.0  # in-place change of a weight array
    assert_same(f(x), fn(x), exact)
    layer.b = None  # a branch on `is None` changes
    assert_same(f(x), fn(x), exact)


@pytest.mark.parametrize("backend", BACKENDS)
def test_sgd_step_returns_new_params(backend):
    def step(w, b, x, y, lr):
        pred = x @ w + b
        err = pred - y
        gw = x.T @ err / x.shape[0]
        gb = err.mean(axis=0)
        return w - lr * gw, b - lr * gb, (err ** 2).mean()

    w, b = randn(4, 2, seed=60), randn(2, seed=61)
    check(step, w, b, randn(8, 4, seed=62), randn(8, 2, seed=63), 0.1, backend=backend)
