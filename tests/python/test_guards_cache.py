"""Guards and the per-code cache: hits, what must not recompile, what must, recompile_limit."""

import collections
import math
import warnings

import numpy as np
import pytest

import framejit
from conftest import BACKENDS, assert_same, randn


class Runner:
    """Compile `fn` once; each run(...) compares with eager on fresh copies and reports how the
    counters moved."""

    def __init__(self, fn, backend, **opts):
        self.fn = fn
        self.exact = backend == "eager"
        self.compiled = framejit.compile(fn, backend=backend, **opts)

    def run(self, *args):
        expected = self.fn(*[a.copy() if isinstance(a, np.ndarray) else a for a in args])
        before = framejit.stats()
        actual = self.compiled(*[a.copy() if isinstance(a, np.ndarray) else a for a in args])
        after = framejit.stats()
        assert_same(expected, actual, self.exact)
        return {k: after[k] - before[k] for k in ("captured", "cache_hits", "cache_misses", "recompiles")}


def f_affine(x, a):
    return np.tanh(x * a + 1.0).sum(axis=-1)


@pytest.mark.parametrize("backend", BACKENDS)
def test_second_call_is_cache_hit(backend):
    r = Runner(f_affine, backend, fullgraph=True)
    x = randn(4, 3)
    d = r.run(x, 0.5)
    assert d["captured"] == 1 and d["cache_misses"] == 1 and d["cache_hits"] == 0
    d = r.run(x, 0.5)
    assert d == {"captured": 0, "cache_hits": 1, "cache_misses": 0, "recompiles": 0}
    d = r.run(x + 1, 0.5)  # new values, same kinds
    assert d == {"captured": 0, "cache_hits": 1, "cache_misses": 0, "recompiles": 0}


@pytest.mark.parametrize("backend", BACKENDS)
def test_new_batch_size_does_not_recompile(backend):
    r = Runner(f_affine, backend, fullgraph=True)
    r.run(randn(4, 3), 0.5)
    for n in (7, 2, 16, 5):
        d = r.run(randn(n, 3, seed=n), 0.5)
        assert d["captured"] == 0 and d["recompiles"] == 0 and d["cache_hits"] == 1, (n, d)
    # the inner dimension too: it is not used by Python logic either
    d = r.run(randn(5, 9), 0.5)
    assert d["recompiles"] == 0 and d["cache_hits"] == 1, d


@pytest.mark.parametrize("backend", BACKENDS)
def test_new_batch_size_through_matmul_and_reshape_does_not_recompile(backend):
    w = randn(6, 4, seed=3)

    def f(x):
        h = x.reshape(x.shape[0], -1) @ w
        return h - h.mean(axis=0), h.shape

    r = Runner(f, backend, fullgraph=True)
    r.run(randn(3, 2, 3))
    for n in (5, 8):
        d = r.run(randn(n, 2, 3, seed=n))
        assert d["recompiles"] == 0 and d["captured"] == 0, (n, d)


@pytest.mark.parametrize("backend", BACKENDS)
def test_new_float_scalar_value_does_not_recompile(backend):
    r = Runner(f_affine, backend, fullgraph=True)
    x = randn(4, 3)
    r.run(x, 0.5)
    for a in (0.25, -3.0, 1e10, 0.0, float("inf")):
        d = r.run(x, a)
        assert d["captured"] == 0 and d["recompiles"] == 0 and d["cache_hits"] == 1, (a, d)


@pytest.mark.parametrize("backend", BACKENDS)
def test_new_int_scalar_on_float_array_does_not_recompile(backend):
    def f(x, n):
        return x * n + n

    r = Runner(f, backend, fullgraph=True)
    r.run(randn(3), 2)
    for n in (3, -7, 1000, 0):
        d = r.run(randn(3), n)
        assert d["captured"] == 0 and d["recompiles"] == 0, (n, d)


@pytest.mark.parametrize("backend", BACKENDS)
def test_dtype_change_recompiles(backend):
    r = Runner(f_affine, backend, fullgraph=True)
    r.run(randn(4, 3), 0.5)
    d = r.run(randn(4, 3, dtype=np.float32), 0.5)
    assert d["captured"] == 1 and d["recompiles"] == 1, d
    d = r.run(np.arange(12, dtype=np.int32).reshape(4, 3), 0.5)
    assert d["captured"] == 1 and d["recompiles"] == 1, d
    # the old entries are still there
    d = r.run(randn(4, 3, dtype=np.float32), 0.5)
    assert d["cache_hits"] == 1 and d["captured"] == 0, d
    d = r.run(randn(4, 3), 0.5)
    assert d["cache_hits"] == 1 and d["captured"] == 0, d


@pytest.mark.parametrize("backend", BACKENDS)
def test_rank_change_recompiles(backend):
    r = Runner(f_affine, backend, fullgraph=True)
    r.run(randn(4, 3), 0.5)
    d = r.run(randn(2, 4, 3), 0.5)
    assert d["captured"] == 1 and d["recompiles"] == 1, d
    d = r.run(randn(3), 0.5)
    assert d["captured"] == 1 and d["recompiles"] == 1, d


@pytest.mark.parametrize("backend", BACKENDS)
def test_scalar_type_change(backend):
    # A 0-d array next to a float32 array makes the result dtype value-dependent under NumPy
    # 1.x casting, which may graph-break by design: only correctness is required here.
    r = Runner(f_affine, backend)
    x = randn(4, 3, dtype=np.float32)
    r.run(x, 0.5)
    r.run(x, 2)  # python int instead of float
    r.run(x, np.float64(0.5))  # numpy scalar
    r.run(x, np.array(0.5))  # 0-d array
    r.run(x, True)


@pytest.mark.parametrize("backend", BACKENDS)
def test_size_one_and_zero_dims_are_correct(backend):
    def f(x, y):
        return x + y, (x * y).sum(axis=0)

    r = Runner(f, backend, fullgraph=True)
    r.run(randn(3, 4), randn(3, 4, seed=1))
    r.run(randn(3, 4), randn(1, 4, seed=1))  # broadcast along dim 0 now
    r.run(randn(1, 4), randn(3, 4, seed=1))
    r.run(randn(3, 1), randn(3, 4, seed=1))
    r.run(randn(3, 4), randn(3, 4, seed=1))
    r.run(np.zeros((0, 4)), np.zeros((0, 4)))
    r.run(np.zeros((0, 4)), np.zeros((1, 4)))


@pytest.mark.parametrize("backend", BACKENDS)
def test_noncontiguous_after_contiguous(backend):
    def f(x):
        return x * 2 + 1, x.T @ x

    r = Runner(f, backend, fullgraph=True)
    r.run(randn(4, 4))
    base = randn(8, 8, seed=2)
    for v in (base[::2, ::2], base[:4, :4], base.T[1:5, 2:6], np.asfortranarray(randn(4, 4, seed=3))):
        expected = f(v)
        assert_same(expected, r.compiled(v), r.exact)


@pytest.mark.parametrize("backend", BACKENDS)
def test_shape_branch_guard_records_condition(backend):
    def f(x):
        if x.shape[0] > 4:
            return x[:4] * 2
        return x + 1

    r = Runner(f, backend, fullgraph=True)
    r.run(randn(6, 3))
    d = r.run(randn(9, 3))  # same side of the condition
    assert d["recompiles"] == 0 and d["cache_hits"] == 1, d
    d = r.run(randn(3, 3))  # other side: must not reuse the first graph
    assert d["captured"] == 1, d
    d = r.run(randn(2, 3))
    assert d["recompiles"] == 0 and d["cache_hits"] == 1, d
    d = r.run(randn(5, 3))
    assert d["cache_hits"] == 1 and d["captured"] == 0, d


@pytest.mark.parametrize("backend", BACKENDS)
def test_size_used_as_python_value_is_specialized(backend):
    def f(x):
        out = x[0]
        for i in range(1, x.shape[0]):
            out = out + x[i] * i
        return out / math.sqrt(x.shape[1])

    r = Runner(f, backend, fullgraph=True)
    r.run(randn(3, 4))
    r.run(randn(3, 4, seed=1))
    r.run(randn(5, 4))
    r.run(randn(3, 9))
    r.run(randn(3, 4, seed=2))


@pytest.mark.parametrize("backend", BACKENDS)
def test_number_steering_control_flow(backend):
    def f(x, s):
        if s > 0:
            return x * s
        return x - s

    r = Runner(f, backend, fullgraph=True)
    for s in (1.5, 2.5, -1.0, 0.0, 3.0, -2.0):
        r.run(randn(3), s)


@pytest.mark.parametrize("backend", BACKENDS)
def test_int_argument_used_as_shape(backend):
    def f(x, n):
        return x.reshape(n, -1) + np.arange(n).reshape(n, 1), np.zeros(n)

    r = Runner(f, backend, fullgraph=True)
    r.run(randn(12), 3)
    r.run(randn(12), 4)
    r.run(randn(12), 3)
    r.run(randn(8), 2)


@pytest.mark.parametrize("backend", BACKENDS)
def test_dynamic_false_specializes_sizes_and_numbers(backend):
    r = Runner(f_affine, backend, fullgraph=True, dynamic=False)
    r.run(randn(4, 3), 0.5)
    d = r.run(randn(5, 3), 0.5)
    assert d["captured"] == 1, d
    d = r.run(randn(5, 3), 0.75)
    assert d["captured"] == 1, d
    d = r.run(randn(4, 3), 0.5)
    assert d["cache_hits"] == 1 and d["captured"] == 0, d


GLOBAL_SCALE = 2.0
GLOBAL_W = randn(3, 3, seed=4)


def f_globals(x):
    return x @ GLOBAL_W * GLOBAL_SCALE


@pytest.mark.parametrize("backend", BACKENDS)
def test_global_changes_are_seen(backend):
    global GLOBAL_SCALE, GLOBAL_W
    old = GLOBAL_SCALE, GLOBAL_W
    try:
        r = Runner(f_globals, backend, fullgraph=True)
        x = randn(2, 3)
        r.run(x)
        GLOBAL_SCALE = -1.0
        r.run(x)
        GLOBAL_W = randn(3, 3, seed=5)
        r.run(x)
        GLOBAL_W[0, 0] = 50.0
        r.run(x)
        GLOBAL_W = randn(3, 3, seed=6).astype(np.float32)
        r.run(x)
    finally:
        GLOBAL_SCALE, GLOBAL_W = old


GRID = np.zeros((4, 4))


def f_life_step():
    N = np.zeros(GRID.shape)
    N[1:-1, 1:-1] = GRID[:-2, 1:-1] + GRID[2:, 1:-1] + GRID[1:-1, :-2] + GRID[1:-1, 2:]
    return N * 0.5 + GRID.sum()


class Holder:
    pass


def f_held_weight(h, x):
    return x @ h.w + 1.0


@pytest.mark.parametrize("backend", BACKENDS)
def test_held_array_sizes_turn_symbolic_at_the_first_change(backend):
    # Note [Held array sizes]: a global grid that changes size costs one recompile, not one per
    # size (and never reaches the recompile limit).
    global GRID
    old = GRID
    try:
        r = Runner(f_life_step, backend, fullgraph=True)
        seen = []
        for n in (6, 9, 12, 15, 18, 21, 24, 27, 30, 33):
            GRID = randn(n, n, seed=n)
            seen.append(r.run())
        assert sum(d["recompiles"] for d in seen) == 1
        assert sum(d["cache_hits"] for d in seen) == 8
        GRID = randn(5, 7, seed=1)  # both dims were seen to change: still a hit
        assert r.run()["cache_hits"] == 1
    finally:
        GRID = old
    h = Holder()
    r = Runner(f_held_weight, backend, fullgraph=True)
    x = randn(3, 4)
    counts = []
    for k in (5, 6, 7, 8):
        h.w = randn(4, k, seed=k)
        counts.append(r.run(h, x))
    assert [d["recompiles"] for d in counts] == [0, 1, 0, 0]
    h.w = randn(4, 1, seed=2)  # sizes 0 and 1 stay specialized
    assert r.run(h, x)["recompiles"] == 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_closure_cell_changes_are_seen(backend):
    k = 2.0
    table = {"a": 1.0}

    def f(x):
        return x * k + table["a"]

    r = Runner(f, backend, fullgraph=True)
    x = randn(3)
    r.run(x)
    k = 5.0  # noqa: F841 (read through the cell)
    r.run(x)
    table["a"] = -4.0
    r.run(x)
    table["b"] = 1.0
    r.run(x)


@pytest.mark.parametrize("backend", BACKENDS)
def test_list_and_dict_argument_structure_changes(backend):
    def f(xs, opts):
        out = xs[0]
        for v in xs[1:]:
            out = out + v
        if "scale" in opts:
            out = out * opts["scale"]
        return out

    r = Runner(f, backend, fullgraph=True)
    a, b, c = randn(3), randn(3, seed=1), randn(3, seed=2)
    r.run([a, b], {"scale": 2.0})
    r.run([a, b, c], {"scale": 2.0})
    r.run([a], {})
    r.run((a, b), {"scale": 3.0})
    r.run([a, b], {"other": 1.0})


@pytest.mark.parametrize("backend", BACKENDS)
def test_recompile_limit(backend):
    framejit.config.recompile_limit = 3
    assert framejit.config.recompile_limit == 3

    def f(x):
        return x * 2 + 1

    r = Runner(f, backend)
    kinds = [np.float64, np.float32, np.int64, np.int32, np.int16, np.uint8, np.int8]
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        for dt in kinds:
            r.run(np.arange(6).astype(dt))
        for dt in kinds:  # again, and with new ranks
            r.run(np.arange(6).astype(dt))
            r.run(np.arange(6).astype(dt).reshape(2, 3))
    s = framejit.stats()
    assert s["captured"] <= 3, s
    limit_warnings = [x for x in w if issubclass(x.category, RuntimeWarning) and "recompile_limit" in str(x.message)]
    assert len(limit_warnings) == 1, [str(x.message) for x in w]
    frames = s["frames"]
    # still runs (in CPython), still correct
    r.run(np.arange(4, dtype=np.uint16))
    assert framejit.stats()["captured"] <= 3
    assert framejit.stats()["frames"] >= frames


def test_no_recompile_limit_warning_for_code_that_compiled_nothing():
    # A namedtuple's __new__ (made by exec: not library code by its file name) breaks on its first
    # instruction; called with new argument types each time it reaches the limit, but running it
    # in CPython loses nothing: no warning (the recompiles log still says so).
    point = collections.namedtuple("point", "x y")

    def f(x, v):
        p = point(v, x)
        return p.y * 2

    cf = framejit.compile(f)
    values = [1, 2.0, "a", b"b", (1,), [1], {1: 2}, None, 3j, frozenset(), range(2), object()]
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        for v in values:
            np.testing.assert_array_equal(cf(np.ones(3), v), f(np.ones(3), v))
    assert not [str(x.message) for x in w if "recompile_limit" in str(x.message)]


def test_recompile_limit_default_is_8():
    assert framejit.config.recompile_limit == 8


def test_config_rejects_unknown_setting():
    with pytest.raises(AttributeError):
        framejit.config.no_such_setting = 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_reset_drops_cache(backend):
    r = Runner(f_affine, backend, fullgraph=True)
    x = randn(2, 3)
    r.run(x, 1.0)
    framejit.reset()
    assert framejit.stats()["cache_hits"] == 0 and framejit.stats()["captured"] == 0
    d = r.run(x, 1.0)
    assert d["captured"] == 1 and d["cache_hits"] == 0, d


# ---------------------------------------------------------------- what guards must notice

X3 = np.array([0.25, 0.5, 2.0])


def _same_twice(fn, compiled, *args, exact=True):
    """Compare a compiled call (twice: it may recompile, then hit) with CPython."""
    expected = fn(*args)
    for _ in range(2):
        assert_same(expected, compiled(*args), exact)


def test_instance_attribute_shadowing_a_method_is_seen():
    class Model:
        def act(self, v):
            return np.tanh(v)

    m = Model()

    def f(v):
        return m.act(v)

    c = framejit.compile(f, backend="eager")
    _same_twice(f, c, X3)
    m.act = lambda v: v * 100  # an instance attribute now shadows the class's method
    _same_twice(f, c, X3)


def test_removing_instance_attribute_that_shadowed_a_method_is_seen():
    class Model:
        def act(self, v):
            return np.tanh(v)

    m = Model()
    m.act = lambda v: v * 100

    def f(v):
        return m.act(v)

    c = framejit.compile(f, backend="eager")
    _same_twice(f, c, X3)
    del m.act
    _same_twice(f, c, X3)


def test_class_method_patched_and_instance_class_changes_are_seen():
    class A:
        def __init__(self):
            self.w = 2.0

        def act(self, v):
            return np.tanh(v)

        def __call__(self, v):
            return self.act(v) * self.w

    class B(A):
        def __init__(self):
            self.w = 3.0

        def act(self, v):
            return np.sin(v)

    holder = {"m": A()}

    def f(v):
        return holder["m"](v)

    c = framejit.compile(f, backend="eager")
    _same_twice(f, c, X3)
    A.act = lambda self, v: np.exp(v)
    _same_twice(f, c, X3)
    holder["m"] = B()
    _same_twice(f, c, X3)
    holder["m"].__class__ = A
    _same_twice(f, c, X3)


def helper_for_rebinding(v):
    return v * 2


def f_calls_global_helper(v):
    return helper_for_rebinding(v) + 1


def test_global_function_rebinding_is_seen():
    global helper_for_rebinding
    old = helper_for_rebinding
    try:
        c = framejit.compile(f_calls_global_helper, backend="eager")
        _same_twice(f_calls_global_helper, c, X3)
        helper_for_rebinding = lambda v: v * 3  # noqa: E731
        _same_twice(f_calls_global_helper, c, X3)
    finally:
        helper_for_rebinding = old


def test_defaults_kwdefaults_and_code_changes_are_seen():
    def g(v, a=2.0, *, b=1.0):
        return v * a + b

    c = framejit.compile(g, backend="eager")
    _same_twice(g, c, X3)
    g.__defaults__ = (5.0,)
    _same_twice(g, c, X3)
    g.__kwdefaults__ = {"b": -7.0}
    _same_twice(g, c, X3)

    def h(v):
        return v + 1

    c = framejit.compile(h, backend="eager")
    _same_twice(h, c, X3)
    h.__code__ = (lambda v: v - 1).__code__
    _same_twice(h, c, X3)


def test_property_and_getattr_values_are_seen():
    class P:
        def __init__(self):
            self._s = 2.0

        @property
        def s(self):
            return self._s

    class G:
        def __getattr__(self, name):
            return self.base * 3

    p, g = P(), G()
    g.base = 1.0

    def f(v):
        return v * p.s + g.anything

    c = framejit.compile(f, backend="eager")
    _same_twice(f, c, X3)
    p._s = 4.0
    g.base = -2.0
    _same_twice(f, c, X3)


def test_layer_list_changes_are_seen():
    layers = [np.eye(3), np.eye(3) * 2]

    def net(v):
        for w in layers:
            v = v @ w
        return v

    c = framejit.compile(net, backend="eager")
    _same_twice(net, c, X3)
    layers.append(np.eye(3) * 5)
    _same_twice(net, c, X3)
    layers[0] = np.eye(3, dtype=np.float32)
    _same_twice(net, c, X3)
    layers[1] = np.ones((3, 3), dtype=np.int32)
    _same_twice(net, c, X3)
    del layers[:2]
    _same_twice(net, c, X3)


def test_closure_cell_changing_kind_is_seen():
    def make():
        k = 2.0

        def f(v):
            return v * k

        def set_k(n):
            nonlocal k
            k = n

        return f, set_k

    f, set_k = make()
    c = framejit.compile(f, backend="eager")
    _same_twice(f, c, X3)
    for value in (np.ones(3) * 4, np.ones((2, 3)), 3, np.float32(0.5), True):
        set_k(value)
        _same_twice(f, c, X3)


def test_same_code_different_closures():
    def make(k):
        return lambda v: (v * k, k)

    for k in (2.0, 3.0, 1, True, np.float32(4.0), np.ones(3) * 5, np.arange(3, dtype=np.int8)):
        f = make(k)
        _same_twice(f, framejit.compile(f, backend="eager"), X3.astype(np.float32))


SCALARS_OF_EVERY_KIND = [
    1, 1.0, True, 0.0, -0.0, 0, False, 2, -1,
    np.int8(1), np.float64(1), np.float32(1), np.float32(-0.0), np.float32(0.0), np.float64(-0.0),
]


@pytest.mark.parametrize(
    "dynamic",
    [
        pytest.param(None, id="dynamic_none"),
        pytest.param(False, id="dynamic_false"),
    ],
)
def test_specialized_numbers_keep_type_and_sign(dynamic):
    """Numbers that are specialized (dynamic=False specializes all of them) must not be
    confused with an equal number of another type or sign: 1 == 1.0 == True, 0.0 == -0.0."""

    def f(x, s):
        return x * s, s

    framejit.config.recompile_limit = 64
    c = framejit.compile(f, backend="eager", dynamic=dynamic)
    for x in (np.array([1, 2], dtype=np.int8), np.array([1.5, 2.5])):
        for s in SCALARS_OF_EVERY_KIND:
            _same_twice(f, c, x, s)


@pytest.mark.parametrize(
    "dynamic",
    [
        pytest.param(None, id="dynamic_none"),
        pytest.param(False, id="dynamic_false"),
    ],
)
def test_number_steering_a_branch_keeps_type_and_sign(dynamic):
    def f(x, s):
        if s == 0:
            return x * s, s
        if s > 0:
            return x + s, s * 2
        return x, s

    framejit.config.recompile_limit = 64
    c = framejit.compile(f, backend="eager", dynamic=dynamic)
    for x in (np.array([1, 2], dtype=np.int8), np.array([1.5, 2.5])):
        for s in SCALARS_OF_EVERY_KIND:
            _same_twice(f, c, x, s)


def test_nan_scalar_with_dynamic_false():
    def f(x, s):
        return x * s, s != s

    c = framejit.compile(f, backend="eager", dynamic=False)
    for s in (float("nan"), float("nan"), 1.0, float("nan")):
        _same_twice(f, c, X3, s)


def test_dict_order_is_part_of_the_guard():
    def f(d):
        return np.concatenate(list(d.values())), [k for k in d]

    c = framejit.compile(f, backend="eager")
    _same_twice(f, c, {"a": np.ones(2), "b": np.zeros(2)})
    _same_twice(f, c, {"b": np.zeros(2), "a": np.ones(2)})


def test_default_argument_arrays_mutated_or_replaced_are_seen():
    w_default = np.ones(3)

    def f(x, w=w_default, *, b=np.zeros(3)):
        return x * w + b

    c = framejit.compile(f, backend="eager")
    x = np.arange(3.0)
    _same_twice(f, c, x)
    w_default[...] = 5.0
    f.__kwdefaults__["b"][...] = 1.0
    _same_twice(f, c, x)
    f.__kwdefaults__["b"] = np.zeros(3, np.float32) + 2
    _same_twice(f, c, x)
