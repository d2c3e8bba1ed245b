"""Side effects (Note [Side effects]): stores to attributes of outside objects, globals, closure cells
and outside lists/dicts are logged while tracing and replayed after the graph, in program order;
compiled and eager runs must leave the same state and return the same values, call after call."""

import copy

import numpy as np
import pytest

import framejit


def fresh_stats():
    framejit.reset()
    return framejit.stats()


def check_runs(fn, make_state, args_per_call, *, expect_hits=True):
    """Runs fn eagerly and compiled on twin states, comparing results and states after each call."""
    eager_state, jit_state = make_state(), make_state()
    compiled = framejit.compile(fn)
    framejit.reset()
    for args in args_per_call:
        expected = fn(eager_state, *copy.deepcopy(args))
        got = compiled(jit_state, *copy.deepcopy(args))
        np.testing.assert_allclose(got, expected)
        assert vars(jit_state).keys() == vars(eager_state).keys()
        for k, v in vars(eager_state).items():
            w = getattr(jit_state, k)
            assert type(w) is type(v), k
            np.testing.assert_allclose(w, v, err_msg=k)
    stats = framejit.stats()
    if expect_hits:
        assert stats["cache_hits"] >= len(args_per_call) - 2, stats
        assert stats["graph_breaks"] == 0, stats
    return stats


# -- optimizers: arrays and counters in attributes --------------------------------------------


class Momentum:
    def __init__(self, n=6, beta=0.9):
        self.m = np.zeros(n)
        self.beta = beta
        self.count = 0

    def step(self, g):
        self.m = self.beta * self.m + (1 - self.beta) * g
        self.count += 1
        return self.m * 0.5


class Adam:
    def __init__(self, n=6):
        self.m = np.zeros(n)
        self.v = np.zeros(n)
        self.t = 0
        self.lr, self.b1, self.b2, self.eps = 0.01, 0.9, 0.999, 1e-8

    def step(self, w, g):
        self.t += 1
        self.m = self.b1 * self.m + (1 - self.b1) * g
        self.v = self.b2 * self.v + (1 - self.b2) * g * g
        mhat = self.m / (1 - self.b1**self.t)
        vhat = self.v / (1 - self.b2**self.t)
        return w - self.lr * mhat / (np.sqrt(vhat) + self.eps)


def momentum_step(opt, g):
    return opt.step(g)


def adam_step(opt, w, g):
    return opt.step(w, g)


def grads(n, calls=5):
    rng = np.random.default_rng(0)
    return [(rng.standard_normal(n),) for _ in range(calls)]


def test_momentum_state_and_result_across_calls():
    stats = check_runs(momentum_step, Momentum, grads(6))
    assert stats["captured"] == 1


def test_adam_step_counter_and_moments():
    rng = np.random.default_rng(1)
    calls = [(rng.standard_normal(6), rng.standard_normal(6)) for _ in range(5)]
    check_runs(adam_step, Adam, calls, expect_hits=False)  # t ** power specializes t: recompiles
    # ...but never a break, and the state matches (checked above).
    assert framejit.stats()["graph_breaks"] == 0


def test_explain_shows_no_break_for_attribute_stores():
    e = framejit.explain(momentum_step)(Momentum(), np.ones(6))
    assert e.breaks == [] and e.graph_count == 1


# -- read after write, identity, rebuilt containers ---------------------------------------------


class Box:
    def __init__(self):
        self.a = np.arange(4.0)
        self.n = 3


def read_after_write(box, x):
    box.a = x * 2.0
    box.n = box.n + 1
    return box.a + box.n  # reads the stored values, not the old ones


def test_read_after_write():
    check_runs(read_after_write, Box, [(np.arange(4.0) + i,) for i in range(4)])


def store_and_return(box, x):
    y = x + 1.0
    box.a = y
    return y


def test_stored_array_is_the_returned_object():
    box = Box()
    f = framejit.compile(store_and_return)
    for i in range(3):
        r = f(box, np.full(4, float(i)))
        assert r is box.a
        np.testing.assert_allclose(r, i + 1.0)


def store_new_containers(box, x):
    box.hist = [x, x * 2.0]
    box.meta = {"scale": 2.0, "t": (x + 1.0, 3)}
    return x


def test_containers_made_in_the_trace_are_rebuilt():
    box = Box()
    f = framejit.compile(store_new_containers)
    x = np.ones(3)
    f(box, x)
    e = framejit.explain(store_new_containers)(Box(), x)
    assert e.breaks == []
    assert type(box.hist) is list and box.hist[0] is x
    np.testing.assert_allclose(box.hist[1], 2.0)
    assert box.meta["scale"] == 2.0 and box.meta["t"][1] == 3
    np.testing.assert_allclose(box.meta["t"][0], 2.0)


def store_list_twice(box, x):
    xs = [x + 1.0]
    box.p = xs
    box.q = xs
    return x


def test_one_list_in_two_places_stays_one_object():
    box = Box()
    framejit.compile(store_list_twice)(box, np.ones(2))
    assert box.p is box.q


class Counter:
    total = 0


def bump_class(x):
    Counter.total += 1
    return x * Counter.total


def test_class_attribute_store():
    Counter.total = 0
    f = framejit.compile(bump_class)
    for i in range(1, 4):
        np.testing.assert_allclose(f(np.ones(2)), float(i))
    assert Counter.total == 3


# -- globals and closures ---------------------------------------------------------------------

counter = 0


def count_calls(x):
    global counter
    counter += 1
    return x + counter


def test_global_counter():
    global counter
    counter = 0
    fresh_stats()
    f = framejit.compile(count_calls)
    for i in range(1, 5):
        np.testing.assert_allclose(f(np.zeros(3)), float(i))
        assert counter == i
    s = framejit.stats()
    assert s["graph_breaks"] == 0 and s["cache_hits"] >= 2, s


def make_accumulator():
    total = np.zeros(3)
    calls = 0

    def add(x):
        nonlocal total, calls
        total = total + x
        calls += 1
        return total * calls

    return add, lambda: (total, calls)


def test_nonlocal_stores():
    add_e, get_e = make_accumulator()
    add_j, get_j = make_accumulator()
    f = framejit.compile(add_j)
    fresh_stats()
    for i in range(4):
        x = np.full(3, float(i))
        np.testing.assert_allclose(f(x), add_e(x))
        (te, ce), (tj, cj) = get_e(), get_j()
        np.testing.assert_allclose(tj, te)
        assert cj == ce
    assert framejit.stats()["graph_breaks"] == 0


def test_closures_of_one_code_object_keep_their_own_cells():
    add1, get1 = make_accumulator()
    add2, get2 = make_accumulator()
    f1, f2 = framejit.compile(add1), framejit.compile(add2)
    f1(np.ones(3))
    f1(np.ones(3))
    f2(np.ones(3))
    assert get1()[1] == 2 and get2()[1] == 1
    np.testing.assert_allclose(get1()[0], 2.0)


# -- outside lists and dicts ------------------------------------------------------------------


def append_arrays(xs, x):
    y = np.tanh(x)
    xs.append(y)
    xs.append(y * 2.0)
    return y


def test_list_append_of_arrays():
    eager, jit = [], []
    f = framejit.compile(append_arrays)
    for i in range(3):
        x = np.full(4, 0.1 * i)
        r = f(jit, x)
        append_arrays(eager, x)
        assert r is jit[-2]
    assert len(jit) == len(eager) == 6
    for a, b in zip(jit, eager):
        np.testing.assert_allclose(a, b)
    e = framejit.explain(append_arrays)([], np.ones(4))
    assert e.breaks == []


def set_items(d, xs, x):
    d["y"] = x * 3.0
    d["n"] = d["n"] + 1
    xs[0] = x + 1.0
    xs[-1] = d["y"]  # reads the dict's new value
    return xs[0]


def test_dict_and_list_item_stores():
    d_e, d_j = {"n": 0, "y": None}, {"n": 0, "y": None}
    l_e, l_j = [None, None], [None, None]
    f = framejit.compile(set_items)
    for i in range(3):
        x = np.full(2, float(i))
        np.testing.assert_allclose(f(d_j, l_j, x), set_items(d_e, l_e, x))
        assert d_j["n"] == d_e["n"]
        np.testing.assert_allclose(d_j["y"], d_e["y"])
        np.testing.assert_allclose(l_j[0], l_e[0])
        assert l_j[-1] is d_j["y"]
    assert framejit.explain(set_items)({"n": 0, "y": None}, [None, None], np.ones(2)).breaks == []


# -- graph breaks and exceptions --------------------------------------------------------------

seen_at_break = []


@framejit.disable
def look(box):
    """Runs in CPython at the break: records what it sees of the object."""
    seen_at_break.append((box.a.copy(), box.n))
    return box.n


def store_break_store(box, x):
    box.a = x * 2.0
    box.n += 1
    k = look(box)  # graph break: CPython must see both stores
    box.a = box.a + k
    box.n += 10
    return box.a


def test_stores_then_break_then_stores():
    seen_at_break.clear()
    eager, jit = Box(), Box()
    f = framejit.compile(store_break_store)
    for i in range(3):
        x = np.full(4, float(i))
        expected = store_break_store(eager, x)
        got = f(jit, x)
        np.testing.assert_allclose(got, expected)
        np.testing.assert_allclose(jit.a, eager.a)
        assert jit.n == eager.n
    # What CPython saw at each break, eager and compiled in turns: the same.
    for k in range(0, len(seen_at_break), 2):
        np.testing.assert_allclose(seen_at_break[k][0], seen_at_break[k + 1][0])
        assert seen_at_break[k][1] == seen_at_break[k + 1][1]
    e = framejit.explain(store_break_store)(Box(), np.ones(4))
    assert e.breaks and {b.reason.split(" (")[0] for b in e.breaks} == {"calling a @framejit.disable function"}


def bump(box):
    box.n += 1
    look(box)  # breaks inside the inlined call
    return box.n


def store_in_breaking_helper(box, x):
    y = x + 1.0
    box.a = y
    return bump(box) * y


def test_stores_inside_the_breaking_call_are_not_done_twice():
    eager, jit = Box(), Box()
    f = framejit.compile(store_in_breaking_helper)
    for i in range(3):
        x = np.full(4, float(i))
        np.testing.assert_allclose(f(jit, x), store_in_breaking_helper(eager, x))
        assert jit.n == eager.n
        np.testing.assert_allclose(jit.a, eager.a)


def store_then_raise(box, x):
    box.a = x + 1.0
    box.n = 7
    if x.shape[0] > 2:
        raise ValueError("too long")
    return x


def test_stores_before_an_exception_are_visible():
    f = framejit.compile(store_then_raise)
    for i in range(2):
        eager, jit = Box(), Box()
        x = np.full(5, float(i))
        with pytest.raises(ValueError):
            store_then_raise(eager, x)
        with pytest.raises(ValueError):
            f(jit, x)
        np.testing.assert_allclose(jit.a, eager.a)
        assert jit.n == eager.n == 7


# -- stores that keep eager semantics by breaking ---------------------------------------------


class Logged:
    def __init__(self):
        object.__setattr__(self, "log", [])
        object.__setattr__(self, "a", None)

    def __setattr__(self, name, value):
        self.log.append(name)
        object.__setattr__(self, name, value)


class WithProperty:
    def __init__(self):
        self._a = None
        self.sets = 0

    @property
    def a(self):
        return self._a

    @a.setter
    def a(self, v):
        self.sets += 1
        self._a = v


class Slotted:
    __slots__ = ("a",)


def set_a(obj, x):
    obj.a = x * 2.0
    return x + 1.0


@pytest.mark.parametrize(
    "make, reason",
    [(Logged, "__setattr__"), (WithProperty, "property or slot"), (Slotted, "property or slot")],
)
def test_stores_that_run_code_break_with_a_reason(make, reason):
    e = framejit.explain(set_a)(make(), np.ones(3))
    # The first break is the store; __setattr__ itself may then be traced when CPython calls it.
    assert e.breaks[0].kind == "side_effect"
    assert reason in e.breaks[0].reason
    eager, jit = make(), make()
    f = framejit.compile(set_a)
    for _ in range(2):
        np.testing.assert_allclose(f(jit, np.ones(3)), set_a(eager, np.ones(3)))
    np.testing.assert_allclose(jit.a, eager.a)
    if make is Logged:
        assert jit.log == eager.log
    if make is WithProperty:
        assert jit.sets == eager.sets


def store_function(box, x):
    box.fn = lambda: 1
    return x * 2.0


def test_storing_a_function_made_in_the_trace_breaks():
    e = framejit.explain(store_function)(Box(), np.ones(2))
    assert [b.kind for b in e.breaks] == ["side_effect"]
    assert "made inside the function" in e.breaks[0].reason
    box = Box()
    framejit.compile(store_function)(box, np.ones(2))
    assert box.fn() == 1
