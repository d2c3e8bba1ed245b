"""GEMM epilogues on the "jit" backend (Note [GEMM epilogues] in jit/schedule/fusion.h): bias
and activation kernels that read a matrix product run inside the GEMM on each finished block of
C. Compared with NumPy over sizes that take the GEMM's small, packed and batched paths, and the
cases where fusing would be wrong (the product is also a result, or the kernel needs a value the
graph computes after the product)."""

import numpy as np
import pytest

import framejit

RNG = np.random.default_rng(21)


def tol(dtype, k):
    return (2e-5 if dtype == np.float32 else 1e-12) * max(1, k) ** 0.5


def operands(m, k, n, dtype, batch=()):
    x = RNG.standard_normal((*batch, m, k)).astype(dtype)
    w = (RNG.standard_normal((k, n)) / max(1, k) ** 0.5).astype(dtype)
    b = RNG.standard_normal(n).astype(dtype)
    return x, w, b


def check(fn, args, dtype, k):
    compiled = framejit.compile(fn, backend="jit")
    want = fn(*args)
    for _ in range(2):  # cold call, then the cache hit
        got = compiled(*args)
        if isinstance(want, tuple):
            for g, w in zip(got, want):
                np.testing.assert_allclose(g, w, rtol=tol(dtype, k), atol=tol(dtype, k))
        else:
            np.testing.assert_allclose(got, want, rtol=tol(dtype, k), atol=tol(dtype, k))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("mkn", [(1, 1, 1), (8, 300, 100), (7, 17, 5), (257, 129, 65), (200, 300, 400), (4, 0, 6)])
def test_bias_relu(dtype, mkn):
    m, k, n = mkn

    def layer(x, w, b):
        return np.maximum(x @ w + b, 0)

    check(layer, operands(m, k, n, dtype), dtype, k)
    s = framejit.stats()
    assert s["gemms"] == 1 and s["kernels"] == 1 and s["extern_calls"] == 0, s


def test_batched_product_with_scalar_parameter():
    def layer(x, w, b, scale):
        return np.tanh((x @ w) * scale + b)

    x, w, b = operands(33, 70, 40, np.float32, batch=(4,))
    check(layer, (x, w, b, 0.75), np.float32, 70)


def test_product_also_returned_is_not_overwritten():
    def layer(x, w, b):
        y = x @ w
        return np.tanh(y + b), y

    check(layer, operands(64, 48, 80, np.float64), np.float64, 48)


def test_input_computed_after_the_product():
    # exp(b) is computed after x @ w in graph order, so the bias kernel cannot run inside the GEMM.
    def layer(x, w, b):
        y = x @ w
        z = np.exp(b)
        return y + z

    check(layer, operands(16, 32, 24, np.float32), np.float32, 32)


def test_mlp_layers():
    def mlp(x, w1, b1, w2, b2):
        h = np.maximum(x @ w1 + b1, 0)
        return np.maximum(h @ w2 + b2, 0)

    x, w1, b1 = operands(8, 500, 300, np.float32)
    _, w2, b2 = operands(8, 300, 20, np.float32)
    check(mlp, (x, w1, b1, w2, b2), np.float32, 500)
    s = framejit.stats()
    assert s["gemms"] == 2 and s["kernels"] == 2 and s["extern_calls"] == 0, s


def test_residual_add_joins_the_epilogue():
    # x's last dim is a symbol, the product's is w's constant: the trace proves them equal (Note
    # [Equal sizes]), so the residual add and the bias add are one kernel inside the GEMM.
    def block(x, w, b):
        return x + (x @ w + b)

    x, w, b = operands(48, 32, 32, np.float32)
    check(block, (x, w, b), np.float32, 32)
    s = framejit.stats()
    assert s["gemms"] == 1 and s["kernels"] == 1 and s["extern_calls"] == 0, s
    # Another width fails the equality's guard: a new graph, still right.
    x2, w2, b2 = operands(48, 40, 40, np.float32)
    compiled = framejit.compile(block, backend="jit")
    np.testing.assert_allclose(compiled(x2, w2, b2), block(x2, w2, b2), rtol=tol(np.float32, 40), atol=tol(np.float32, 40))


@pytest.mark.parametrize(
    "sa,sb",
    [((4, 5, 6), (4, 6, 3)), ((2, 1, 5, 6), (3, 6, 7)), ((5, 6), (2, 6, 4)), ((3, 8, 16), (16, 8))],
)
def test_batched_matmul_broadcasts_batch_dims(sa, sb):
    def f(a, b):
        return np.matmul(a, b) * 2.0

    a = RNG.standard_normal(sa)
    b = RNG.standard_normal(sb)
    check(f, (a, b), np.float64, sa[-1])
    assert framejit.stats()["gemms"] == 1


def test_attention_scores_read_a_transposed_view():
    def attention(q, k, v):
        s = q @ k.transpose(0, 2, 1) * (1.0 / 8.0)
        p = np.exp(s - s.max(-1, keepdims=True))
        p = p / p.sum(-1, keepdims=True)
        return p @ v

    q, k, v = (RNG.standard_normal((4, 64, 32)).astype(np.float32) for _ in range(3))
    check(attention, (q, k, v), np.float32, 64)
    s = framejit.stats()
    assert s["gemms"] == 2 and s["extern_calls"] == 0, s


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n", [1, 3, 4, 7])
def test_narrow_products_run_the_epilogue_in_tiles(n, dtype):
    # Fewer than 8 columns under many rows: the epilogue runs tiles of rows per call (Note [Short
    # rows as tiles]); its operands: the bias (copied per tile), a full residual of C's shape, a
    # column of C's height, a transposed one (strided rows), and a scalar.
    m, k = 3001, 5
    x, w, b = operands(m, k, n, dtype)
    r = RNG.standard_normal((m, n)).astype(dtype)
    col = RNG.standard_normal((m, 1)).astype(dtype)
    rt = np.asfortranarray(RNG.standard_normal((m, n)).astype(dtype))

    def layer(x, w, b, r, col, rt):
        return np.maximum(x @ w + b, 0) * 0.5 + r - col * rt

    check(layer, (x, w, b, r, col, rt), dtype, k)
    s = framejit.stats()
    assert s["gemms"] == 1 and s["kernels"] == 1 and s["extern_calls"] == 0, s
