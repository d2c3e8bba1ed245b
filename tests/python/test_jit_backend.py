"""The "jit" backend's generated code: fused pointwise kernels, row reductions and GEMM, compared
with NumPy over dtypes, sizes (empty, one element, odd tails), layouts (strided, transposed,
broadcast) and every ISA level (forced in a subprocess with FRAMEJIT_ISA)."""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import framejit

RNG = np.random.default_rng(7)
SHAPES = [(0,), (1,), (7,), (33,), (3, 5), (4, 37), (2, 3, 9)]


def close(got, want, dtype):
    assert type(got) is type(want)
    assert got.dtype == want.dtype and got.shape == want.shape
    rtol = 2e-6 if dtype == np.float32 else 1e-13
    np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol)


def run_both(fn, *args):
    compiled = framejit.compile(fn)
    want = fn(*args)
    for _ in range(2):  # cold call, then the cache hit
        got = compiled(*args)
        yield got, want


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", SHAPES)
def test_fused_chain(dtype, shape):
    x = RNG.standard_normal(shape).astype(dtype)

    def f(x, a, b):
        return np.tanh(x * a + b) * np.exp(-x * x) + np.maximum(x, 0.25) / (1.0 + np.abs(x))

    for got, want in run_both(f, x, 0.5, -0.25):
        close(got, want, dtype)
    s = framejit.stats()
    assert s["kernels"] == 1 and s["extern_calls"] == 0, s


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_strided_transposed_and_broadcast_operands(dtype):
    x = RNG.standard_normal((6, 10)).astype(dtype)
    col = RNG.standard_normal((6, 1)).astype(dtype)
    row = RNG.standard_normal(10).astype(dtype)

    def f(x, col, row):
        return np.sqrt(np.abs(x.T[::2] * 2.0)) + col.T + row[::2][:, None]

    for got, want in run_both(f, x, col, row):
        close(got, want, dtype)


def permuted(x, layout):
    if layout == "F":
        return np.asfortranarray(x)
    if layout == "T":  # a C array seen transposed: its axes reversed
        return np.ascontiguousarray(x.transpose()).transpose()
    if layout == "P":  # axes (1, 2, 0) in memory
        return np.ascontiguousarray(x.transpose(1, 2, 0)).transpose(2, 0, 1)
    return x


@pytest.mark.parametrize("layout", ["F", "T", "P"])
def test_memory_order_of_axes(layout):
    # Note [Memory order of axes]: launches iterate as the operands' memory runs; results keep
    # NumPy's values and its memory order (order='K'). (The executor's order is the same at every
    # ISA level; the kernels' contiguous and strided rows are tested at each above.)
    x = permuted(RNG.standard_normal((5, 33, 70)).astype(np.float32), layout)
    y = RNG.standard_normal((5, 33, 70)).astype(np.float32)  # C order: disagrees with x
    b = RNG.standard_normal(70).astype(np.float32)

    def f(x, b):
        return np.tanh(x) * 2 + b, (x > 0).astype(np.float64), x[:, ::2, 1:] - 1

    framejit.reset()
    for got, want in run_both(f, x, b):
        for g, w in zip(got, want):
            close(g, w, w.dtype.type)
            assert g.flags.c_contiguous == w.flags.c_contiguous and g.flags.f_contiguous == w.flags.f_contiguous
    # Operands of two orders: C order wins, as NumPy's iterator decides.
    for got, want in run_both(lambda x, y: x * 3 + y, x, y):
        close(got, want, np.float32)
        assert got.flags.c_contiguous == want.flags.c_contiguous
    # Writes through a permuted view, and in place into a permuted input.
    def g(x, y):
        x += 1
        x[1:3] = y[1:3] * 2
        return x

    a, c = x.copy(order="K"), x.copy(order="K")
    for _ in range(2):
        got, want = framejit.compile(g)(a, y), g(c, y)
        np.testing.assert_array_equal(a, c)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(1, 1), (3, 7), (5, 64), (2, 3, 129)])
def test_row_reductions_with_prologue(dtype, shape):
    x = RNG.standard_normal(shape).astype(dtype)

    def f(x):
        m = x.max(axis=-1, keepdims=True)
        e = np.exp(x - m)
        s = e.sum(axis=-1, keepdims=True)
        mu = x.mean(axis=-1)
        return e / s, mu, np.min(x * 2.0, axis=-1)

    for got, want in run_both(f, x):
        for g, w in zip(got, want):
            close(g, w, dtype)
    assert framejit.stats()["reductions"] >= 3


def test_nan_propagates_through_max_and_min():
    x = np.array([[1.0, np.nan, 3.0], [np.inf, -np.inf, 0.0]], np.float32)

    def f(x):
        return x.max(axis=-1), np.maximum(x, 2.0), np.minimum(x, np.float32(-1.0) * x)

    for got, want in run_both(f, x):
        for g, w in zip(got, want):
            np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("mnk", [(1, 1, 1), (7, 17, 5), (64, 33, 130), (3, 1023, 17)])
def test_gemm(dtype, mnk):
    m, n, k = mnk
    a = RNG.standard_normal((m, k)).astype(dtype)
    b = RNG.standard_normal((k, n)).astype(dtype)
    bias = RNG.standard_normal(n).astype(dtype)

    def f(a, b, bias):
        return np.maximum(a @ b + bias, 0.0), a.T.T @ b, np.stack([a, a]) @ b

    tol = (1e-4 if dtype == np.float32 else 1e-11) * np.sqrt(k)
    for got, want in run_both(f, a, b, bias):
        for g, w in zip(got, want):
            assert g.shape == w.shape and g.dtype == w.dtype
            np.testing.assert_allclose(g, w, rtol=tol, atol=tol)
    assert framejit.stats()["gemms"] >= 3


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("mnk", [(1000, 1, 300), (1, 700, 300), (100000, 1, 2), (1, 3000, 9), (1, 1, 50)])
def test_products_with_one_row_or_column(dtype, mnk):
    # Note [Matrix-vector products]: one pass over the matrix in any layout, epilogue fused.
    m, n, k = mnk
    a = RNG.standard_normal((m, k)).astype(dtype)
    b = RNG.standard_normal((k, n)).astype(dtype)
    bias = RNG.standard_normal(n).astype(dtype)

    def f(a, b, bias):
        return (np.maximum(a @ b + bias, 0.0), np.asfortranarray(a) @ np.asfortranarray(b), a[:, ::-1] @ b[::-1],
                np.tile(a, (1, 2))[:, ::2] @ b)

    tol = (1e-4 if dtype == np.float32 else 1e-11) * np.sqrt(k)
    for got, want in run_both(f, a, b, bias):
        for g, w in zip(got, want):
            assert g.shape == w.shape and g.dtype == w.dtype
            np.testing.assert_allclose(g, w, rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("mk", [(1, 1), (777, 333), (5, 4000), (3000, 3)])
def test_matrix_vector_products_run_on_the_gemm(dtype, mk):
    # Note [Vector products]: A @ v, v @ A, np.dot of a matrix and a vector, any layout and stride
    # (Fortran order, reversed, every other element), then used by a kernel; shapes and dtypes as
    # NumPy's, all GEMM steps. Products of int arrays, of two vectors and of 3-d with 1-d stay as
    # they were.
    m, k = mk
    a = RNG.standard_normal((m, k)).astype(dtype)
    v = RNG.standard_normal(2 * k).astype(dtype)
    w = RNG.standard_normal(m).astype(dtype)

    def f(a, af, v, w):
        x = v[::2]
        return (a @ x, w @ a, np.dot(a, v[:k]), np.dot(w[::-1], a), af @ x[::-1], a.T @ w * 2 + 1, x @ af.T)

    framejit.reset()
    tol = (1e-4 if dtype == np.float32 else 1e-11) * np.sqrt(max(m, k))
    for got, want in run_both(f, a, np.asfortranarray(a), v, w):
        for g, w_ in zip(got, want):
            assert g.shape == w_.shape and g.dtype == w_.dtype
            np.testing.assert_allclose(g, w_, rtol=tol, atol=tol)
    s = framejit.stats()
    assert s["gemms"] >= 7 and s["extern_calls"] == 0, s

    i = np.arange(m * k).reshape(m, k)
    cube = np.stack([a, a])

    def g(i, a, v):
        return i @ np.arange(k), v[:k] @ v[:k], cube @ v[:k], a @ v[:k]

    for got, want in run_both(g, i, a, v):
        for g_, w_ in zip(got, want):
            assert np.shape(g_) == np.shape(w_) and g_.dtype == w_.dtype
            np.testing.assert_allclose(g_, w_, rtol=tol, atol=tol)
    with pytest.raises(ValueError):
        framejit.compile(lambda a, v: a @ v)(a, v)  # 2k elements: NumPy's mismatch error


def test_products_of_two_dtypes_cast_first():
    # NumPy casts both operands to the product's type; so does the graph, and the GEMM runs it.
    a = RNG.standard_normal((30, 40)).astype(np.float32)
    b = RNG.standard_normal((40, 20))
    i = np.arange(40 * 20).reshape(40, 20)
    framejit.reset()
    f = framejit.compile(lambda a, b, i: (a @ b, np.dot(a, i), b.T @ a.T), fullgraph=True)
    for got, want in zip(f(a, b, i), (a @ b, np.dot(a, i), b.T @ a.T)):
        assert got.dtype == want.dtype == np.float64
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    assert framejit.stats()["gemms"] == 3 and framejit.stats()["extern_calls"] == 0


def test_copies_of_c_contiguous_arrays_are_kernels():
    x = RNG.standard_normal((30, 40))
    framejit.reset()
    f = framejit.compile(lambda x: (x.copy(), np.copy(x) * 2, x.T.copy(), np.copy(x.T)), fullgraph=True)
    want = (x.copy(), np.copy(x) * 2, x.T.copy(), np.copy(x.T))
    for got, w in zip(f(x), want):
        np.testing.assert_array_equal(got, w)
        # x.copy() is C-ordered, numpy.copy keeps the order: the library copies the transposes
        assert got.flags.c_contiguous == w.flags.c_contiguous and got.flags.f_contiguous == w.flags.f_contiguous
        assert not np.shares_memory(got, x)
    assert framejit.stats()["kernels"] >= 1


def test_no_temporaries_in_a_fused_chain():
    import tracemalloc

    x = RNG.standard_normal(1 << 20).astype(np.float32)
    f = framejit.compile(lambda x: np.tanh(x * 0.5 + 0.25) * np.exp(-x * x))
    f(x)
    tracemalloc.start()
    tracemalloc.reset_peak()
    out = f(x)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert peak <= out.nbytes * 1.05 + 64 * 1024, (peak, out.nbytes)


@pytest.mark.parametrize("isa", ["scalar", "avx2"])
def test_forced_isa_levels(isa):
    """Every ISA level the code generator has gives NumPy's results (run in a fresh process:
    the level is read from FRAMEJIT_ISA once)."""
    code = textwrap.dedent(
        """
        import numpy as np, framejit
        rng = np.random.default_rng(3)
        for dt in (np.float32, np.float64):
            for n in (1, 5, 8, 13, 100):
                x = rng.standard_normal((3, n)).astype(dt)
                def f(x):
                    e = np.exp(x - x.max(axis=-1, keepdims=True))
                    return np.tanh(x) * np.sqrt(np.abs(x)) + e / e.sum(axis=-1, keepdims=True)
                got = framejit.compile(f)(x)
                want = f(x)
                tol = 2e-6 if dt == np.float32 else 1e-13
                np.testing.assert_allclose(got, want, rtol=tol, atol=tol)
        assert framejit.stats()["kernels"] > 0
        print("ok")
        """
    )
    env = dict(os.environ, FRAMEJIT_ISA=isa)
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr


# ---- integer, uint8 and bool kernels ----

INT_EDGES = {
    np.int32: [0, 1, -1, 7, -7, 2**31 - 1, -(2**31), 123456789, -987654321],
    np.int64: [0, 1, -1, 7, -7, 2**63 - 1, -(2**63), 2**40 + 3, -(2**33) - 5],
    np.uint8: [0, 1, 2, 7, 127, 128, 200, 254, 255],
}
INT_SIZES = [0, 1, 7, 31, 33, 1000]


def int_array(dtype, n, seed=0):
    r = np.random.default_rng(seed)
    info = np.iinfo(dtype)
    a = r.integers(info.min, info.max, n, dtype=dtype, endpoint=True)
    edges = np.array(INT_EDGES[dtype], dtype=dtype)
    a[: min(n, len(edges))] = edges[: min(n, len(edges))]
    return a


def equal(got, want):
    got = got if isinstance(got, tuple) else (got,)
    want = want if isinstance(want, tuple) else (want,)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert type(g) is type(w) and g.dtype == w.dtype and g.shape == w.shape, (g.dtype, w.dtype)
        np.testing.assert_array_equal(g, w)


def assert_fused():
    """Everything ran in generated kernels (operands of different symbolic lengths may still make
    more than one kernel)."""
    s = framejit.stats()
    assert s["kernels"] >= 1 and s["extern_calls"] == 0, s


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int64])
@pytest.mark.parametrize("n", INT_SIZES)
def test_relu_with_where(dtype, n):
    x = int_array(dtype, n) if dtype in INT_EDGES else RNG.standard_normal(n).astype(dtype)

    def f(x):
        return np.where(x > 0, x, 0)

    for got, want in run_both(f, x):
        equal(got, want)
    assert_fused()


@pytest.mark.parametrize("n", INT_SIZES)
def test_masks_and_bool_outputs(n):
    x = RNG.standard_normal(n)
    y = RNG.standard_normal(n).astype(np.float32)
    if n > 3:
        x[:3] = [np.nan, 0.0, np.inf]
        y[:3] = [0.5, np.nan, 2.0]

    def f(x, y):
        m = (x > 0) & (y < 1)
        return m, ~m | (x == y), np.logical_xor(m, x != x), np.where(m, x, y)

    for got, want in run_both(f, x, y):
        equal(got, want)
    assert_fused()


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.uint8])
@pytest.mark.parametrize("n", INT_SIZES)
def test_integer_arithmetic_wraps(dtype, n):
    x, y = int_array(dtype, n, 1), int_array(dtype, n, 2)

    def f(x, y):
        return x * y + x - y * 3, -x, abs(x), np.maximum(x, y), np.minimum(x, 5), x & y | ~x ^ y

    with np.errstate(over="ignore"):
        for got, want in run_both(f, x, y):
            equal(got, want)
    assert_fused()


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.uint8])
def test_integer_floor_divide_and_mod(dtype):
    x = int_array(dtype, 200, 3)
    y = int_array(dtype, 200, 4)
    y[::5] = 0  # NumPy: x // 0 == x % 0 == 0
    if dtype != np.uint8:
        y[1::7] = -1  # MIN // -1 wraps
        y[2::7] = -3

    def f(x, y):
        return x // y, x % y, np.floor_divide(x, 7), np.remainder(x, 3)

    with np.errstate(divide="ignore", over="ignore"):
        for got, want in run_both(f, x, y):
            equal(got, want)
    assert_fused()


def test_mixed_integer_and_float_operands():
    i32 = int_array(np.int32, 100, 5)
    i64 = int_array(np.int64, 100, 6)
    u8 = int_array(np.uint8, 100, 7)
    f32 = RNG.standard_normal(100).astype(np.float32)
    f64 = RNG.standard_normal(100)

    def f(i32, i64, u8, f32, f64):
        return i32 + f64, u8 * f32, i32 / i32, i64 - i32, u8 + i32, f32 * i32, i64 > f64, u8 < i32, i32 * 0.5

    with np.errstate(divide="ignore", invalid="ignore"):
        for got, want in run_both(f, i32, i64, u8, f32, f64):
            for g, w in zip(got, want):
                assert g.dtype == w.dtype
                np.testing.assert_allclose(g, w, rtol=1e-15, atol=0)
    assert_fused()


def test_astype_chains():
    x = RNG.standard_normal(1000) * 1e3
    x[:10] = [np.nan, np.inf, -np.inf, -0.0, 2.0**31, -(2.0**31) - 1, 300.5, -3.7, 255.9, 1e19]

    def f(x):
        a = x.astype(np.int32)
        b = x.astype(np.float32).astype(np.uint8)
        c = x.astype(np.int64).astype(np.float32)
        d = a.astype(bool) ^ x.astype(bool)
        return a + 1, b, c, d, (a.astype(np.float64) * 2).astype(np.int64)

    with np.errstate(invalid="ignore"):
        for got, want in run_both(f, x):
            equal(got, want)
    assert_fused()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_comparisons_with_nan(dtype):
    x = np.array([np.nan, 1.0, np.nan, -np.inf, 0.0, -0.0, 2.0, np.inf, 3.0], dtype=dtype)
    y = np.array([np.nan, np.nan, 1.0, -np.inf, -0.0, 0.0, 1.0, np.inf, 4.0], dtype=dtype)

    def f(x, y):
        return x < y, x <= y, x == y, x != y, x > y, x >= y, np.maximum(x, y) > 1

    for got, want in run_both(f, x, y):
        equal(got, want)
    assert_fused()


def test_bool_arithmetic_is_logical():
    a = RNG.integers(0, 2, 50).astype(bool)
    b = RNG.integers(0, 2, 50).astype(bool)

    def f(a, b):
        return a + b, a * b, np.maximum(a, b), np.minimum(a, b), abs(a), ~a, np.logical_not(b)

    for got, want in run_both(f, a, b):
        equal(got, want)
    assert_fused()


def test_run_time_ints_with_integer_arrays():
    """NumPy 1.24 picks the result type of uint8 + n from n's value: not fused. NumPy 2's n is
    weak (NEP 50): uint8 whatever its value, so it fuses, guarded to uint8's range (NumPy 2 raises
    OverflowError outside it)."""
    x = np.arange(10, dtype=np.uint8)

    def f(x, n):
        return x + n

    for got, want in run_both(f, x, 3):
        equal(got, want)
    numpy2 = int(np.__version__.split(".")[0]) >= 2
    assert framejit.stats()["extern_calls"] == (0 if numpy2 else 1)
    if numpy2:
        g = framejit.compile(f)
        equal(g(x, 250), f(x, 250))
        with pytest.raises(OverflowError):
            g(x, 300)


def test_integer_kernels_at_every_isa():
    code = textwrap.dedent(
        """
        import numpy as np, framejit
        rng = np.random.default_rng(3)
        for dt in (np.int32, np.int64, np.uint8):
            for n in (1, 5, 8, 13, 100):
                info = np.iinfo(dt)
                x = rng.integers(info.min, info.max, (3, n), dtype=dt, endpoint=True)
                y = rng.integers(info.min, info.max, (3, n), dtype=dt, endpoint=True)
                def f(x, y):
                    with_zero = np.where(y == 3, 0, y)
                    return x * y - x // with_zero, np.where(x > y, x, y) % 7, (x < 5) & (y > 2), x.astype(np.float32)
                with np.errstate(all="ignore"):
                    got = framejit.compile(f)(x, y)
                    want = f(x, y)
                for g, w in zip(got, want):
                    assert g.dtype == w.dtype
                    np.testing.assert_array_equal(g, w)
        assert framejit.stats()["extern_calls"] == 0, framejit.stats()
        print("ok")
        """
    )
    for isa in ("scalar", "avx2"):
        env = dict(os.environ, FRAMEJIT_ISA=isa)
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
        assert r.returncode == 0 and r.stdout.strip() == "ok", (isa, r.stderr)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_short_rows_and_strided_views(dtype):
    # Note [Short rows as tiles] and Note [Buffered strided rows]: rows of a few elements under many
    # (a per-row column broadcast, a write into a 3-wide slice of each row), and strided or reversed
    # operands and outputs, each against NumPy.
    x = RNG.standard_normal((3001, 5)).astype(dtype)
    col = (np.abs(RNG.standard_normal((3001, 1))) + 0.5).astype(dtype)
    wide = RNG.standard_normal((300, 400)).astype(dtype)

    def f(x, col, wide):
        y = x.copy()
        y[:, 1:4] /= col
        w = wide.copy()
        w[::2, ::3] = np.sin(wide[1::2, ::-3])
        return x / col, np.exp(x[::-1, ::2]) * col[::-1], y, w, np.tanh(wide.T[::3])

    for got, want in run_both(f, x, col, wide):
        for g, w in zip(got, want):
            close(g, w, dtype)


@pytest.mark.parametrize("row", [9, 111, 333, 1024, 1025])
def test_strided_rows_as_tiles(row):
    # Strided rows of up to kTileBytes / 2 bytes (every operand's elements) run tiles of rows through
    # one buffer (longer ones a row at a time): strided and reversed inputs beside contiguous ones and broadcast
    # columns, writes through strided views in place (read before written), int and float dtypes.
    x = RNG.standard_normal((301, 3 * row)).astype(np.float32)
    col = RNG.standard_normal((301, 1)).astype(np.float32)
    i = RNG.integers(-100, 100, (301, 2 * row))

    def f(x, col, i):
        y = x.copy()
        y[:, ::3] = y[:, 1::3] * 2 + y[:, ::3]
        j = i.copy()
        j[::-1, ::2] += i[:, 1::2] * 3
        return x[::2, 1::3] * 2 + col[::2], x[::-1, ::-3] - 1, y, j, np.maximum(x[:, ::3], col)

    for got, want in run_both(f, x, col, i):
        for g, w in zip(got, want):
            assert g.dtype == w.dtype
            np.testing.assert_array_equal(g, w)
