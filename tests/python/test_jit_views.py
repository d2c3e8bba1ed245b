"""Views on the "jit" backend (Note [Folded views] in jit/schedule/fusion.cpp): transposes,
slices, expand_dims, squeeze, reshape, ravel and broadcast_to read by kernels, reductions and
GEMMs are applied as index remaps of their source and never made; when a remap cannot apply (a
reshape NumPy must copy, an index out of range for a new size), the view runs as NumPy's own call
with NumPy's result or exception."""

import numpy as np
import pytest

import framejit

RNG = np.random.default_rng(5)


def views(x, b, i):
    return (
        x.T * 1,
        np.transpose(x, (1, 0)) + 0,
        x[1:, ::2] * 2,
        x[None, ..., 0] - 1,
        b[:, None] * 2.0,
        x.reshape(-1, 2) * 3,
        np.expand_dims(b, 0) * 1,
        x.swapaxes(0, 1) + b[:, None],
        x[: x.shape[0] - i] * 1,
        np.broadcast_to(b, (3, b.shape[0])) * 1,
        x[2] * 1,
        x[::-1, ::-3] * 1,
        x[-1, 1:-1] * 1,
        x.ravel() * 1,
        x.T.reshape(-1) * 2,  # NumPy copies: the remap gives way to NumPy's reshape
    )


@pytest.mark.parametrize("backend", ["jit", "eager"])
def test_views_match_numpy(backend):
    c = framejit.compile(views, backend=backend)
    for shape in [(4, 6), (4, 6), (6, 8), (3, 10)]:
        x = RNG.standard_normal(shape).astype(np.float32)
        b = RNG.standard_normal(shape[1]).astype(np.float32)
        for got, want in zip(c(x, b, 1), views(x, b, 1)):
            assert got.shape == want.shape and got.dtype == want.dtype
            np.testing.assert_array_equal(got, want)
    if backend == "jit":
        s = framejit.stats()
        # Every view is folded: the calls left are the size arithmetic (x.shape[0] - i, and
        # b.shape[0] for broadcast_to).
        assert s["extern_calls"] == 3 * s["captured"], s


def test_transposed_weight_feeds_the_gemm():
    def layer(x, w, b):
        return np.maximum(x @ w.T + b, 0)

    x = RNG.standard_normal((16, 40)).astype(np.float32)
    w = RNG.standard_normal((24, 40)).astype(np.float32)
    b = RNG.standard_normal(24).astype(np.float32)
    got = framejit.compile(layer, backend="jit")(x, w, b)
    np.testing.assert_allclose(got, layer(x, w, b), rtol=1e-5, atol=1e-5)
    s = framejit.stats()
    assert s["gemms"] == 1 and s["extern_calls"] == 0, s


def test_sliced_rows_feed_a_reduction():
    def f(x):
        return x[:, 1::2].sum(-1, keepdims=True) + x[::2].max(-1, keepdims=True).T

    x = RNG.standard_normal((6, 9)).astype(np.float64)
    np.testing.assert_allclose(framejit.compile(f, backend="jit")(x), f(x), rtol=1e-12)


def test_view_that_is_returned_is_a_real_view():
    def f(x):
        t = x.T
        return t, t * 2

    x = RNG.standard_normal((3, 5))
    t, y = framejit.compile(f, backend="jit")(x)
    assert np.shares_memory(t, x) and t.shape == (5, 3)
    np.testing.assert_array_equal(y, x.T * 2)


def test_index_out_of_range_for_a_new_size_raises_numpys_error():
    def f(x, i):
        return x[i] * 2

    c = framejit.compile(f, backend="jit")
    x = np.arange(12.0).reshape(4, 3)
    np.testing.assert_array_equal(c(x, 3), x[3] * 2)
    with pytest.raises(IndexError) as got:
        c(x, 7)
    with pytest.raises(IndexError) as want:
        f(x, 7)
    assert str(got.value) == str(want.value)


def test_inputs_read_through_views_are_not_overwritten():
    # x dies at the kernel that reads x and x.T: its buffer must not take the output.
    def f(a):
        x = a * 1.0
        return x + x.T

    a = RNG.standard_normal((64, 64))
    np.testing.assert_array_equal(framejit.compile(f, backend="jit")(a), f(a))


def test_outputs_keep_numpys_memory_order():
    """Kernel outputs are laid out as NumPy's ufuncs lay them out (order='K', Note [Output memory
    order]): F-ordered inputs give F-ordered results, permuted inputs permuted results, and inputs
    that disagree C order."""

    def f(x, y):
        return np.exp(x) + y * 2

    c = framejit.compile(f, backend="jit")
    base = RNG.standard_normal((4, 5, 6))
    moved = np.ascontiguousarray(base.transpose(2, 0, 1)).transpose(1, 2, 0)
    cases = [
        (base, base),
        (np.asfortranarray(base), np.asfortranarray(base)),
        (np.asfortranarray(base), base),
        (base, np.asfortranarray(base)),
        (base.transpose(1, 2, 0), base.transpose(1, 2, 0).copy()),
        (moved, base),
        (moved, moved),
        (np.asfortranarray(base), base[0:1]),
        (base[::-1, :, ::-1], np.asfortranarray(base)),
        (np.asfortranarray(base[0]), 1.0),
    ]
    for x, y in cases:
        want, got = f(x, y), c(x, y)
        assert got.strides == want.strides, (x.strides, getattr(y, "strides", None))
        np.testing.assert_allclose(got, want, rtol=1e-13, atol=0)


def test_attention_heads_split_without_copies():
    # Slices of the fused qkv product reshaped into heads: NumPy makes these views (Note [Reshape
    # without copying]); so does the remap, and the whole block stays one graph.
    def heads(x, w, nh):
        b, t, d = x.shape
        qkv = x @ w
        q, k, v = np.split(qkv, 3, axis=-1)
        q = q.reshape(b, t, nh, d // nh).transpose(0, 2, 1, 3)
        k = k.reshape(b, t, nh, d // nh).transpose(0, 2, 1, 3)
        v = v.reshape(b, t, nh, d // nh).transpose(0, 2, 1, 3)
        s = q @ k.transpose(0, 1, 3, 2) * 0.125
        p = np.exp(s - s.max(-1, keepdims=True))
        p = p / p.sum(-1, keepdims=True)
        return (p @ v).transpose(0, 2, 1, 3).reshape(b, t, d)

    x = RNG.standard_normal((2, 16, 64)).astype(np.float32)
    w = (RNG.standard_normal((64, 192)) / 8).astype(np.float32)
    got = framejit.compile(heads, backend="jit")(x, w, 4)
    np.testing.assert_allclose(got, heads(x, w, 4), rtol=1e-5, atol=1e-6)
    s = framejit.stats()
    assert s["graph_breaks"] == 0 and s["gemms"] == 3, s
