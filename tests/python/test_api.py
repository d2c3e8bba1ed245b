"""The Python API: compile (function/decorator/methods), disable, install/uninstall, explain,
stats, reset, custom backends, backend validation."""

import importlib
import operator
import os
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest

import framejit
from conftest import BACKENDS, assert_same, check, randn

X = randn(3, 4, seed=1)
W = randn(4, 2, seed=2)


def user_fn(x):
    return np.tanh(x) * 2 + 1


# ---------------------------------------------------------------- compile forms

def test_compile_as_plain_decorator():
    @framejit.compile
    def f(x):
        """doc of f"""
        return x * 3 - 1

    assert f.__name__ == "f" and f.__doc__ == "doc of f"
    for _ in range(2):
        assert_same(X * 3 - 1, f(X), exact=False)
    s = framejit.stats()
    assert s["captured"] == 1 and s["cache_hits"] == 1, s


@pytest.mark.parametrize("backend", BACKENDS)
def test_compile_as_decorator_with_arguments(backend):
    @framejit.compile(backend=backend, fullgraph=True, dynamic=None)
    def f(x, w):
        return x @ w

    for _ in range(2):
        assert_same(X @ W, f(X, W), exact=backend == "eager")
    assert framejit.stats()["cache_hits"] == 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_compile_on_methods(backend):
    class Model:
        def __init__(self, w):
            self.w = w

        @framejit.compile(backend=backend, fullgraph=True)
        def forward(self, x):
            return np.maximum(x @ self.w, 0)

        @framejit.compile
        def plain(self, x):
            return self.forward(x) * 2

    a, b = Model(W), Model(W * -1)
    for _ in range(2):
        assert_same(np.maximum(X @ W, 0), a.forward(X), exact=backend == "eager")
        assert_same(np.maximum(X @ -W, 0), b.forward(X), exact=backend == "eager")
        assert_same(np.maximum(X @ W, 0) * 2, a.plain(X), exact=False)
    assert framejit.stats()["cache_hits"] >= 2
    # a bound method compiled from outside
    bound = framejit.compile(a.forward.__wrapped__.__get__(a), backend=backend, fullgraph=True)
    assert_same(np.maximum(X @ W, 0), bound(X), exact=backend == "eager")


@pytest.mark.parametrize("backend", BACKENDS)
def test_compile_accepts_keyword_arguments_at_call(backend):
    def f(x, *, scale=1.0, bias=None):
        y = x * scale
        return y if bias is None else y + bias

    check(f, X, scale=2.0, backend=backend)
    framejit.reset()
    check(f, X, scale=2.0, bias=X, backend=backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_functions_called_from_compiled_function_are_compiled(backend):
    seen = []

    def recorder(graph, example_inputs):
        seen.append(graph.code)
        return interpreter(graph)

    def leaf(x):
        return np.exp(x)

    def outer(x):
        print("break", end="")  # forces outer to run in CPython; leaf must still be compiled
        return leaf(x)

    c = framejit.compile(outer, backend=recorder)
    assert_same(np.exp(X), c(X))
    assert any("exp" in code for code in seen), seen


@pytest.mark.filterwarnings("ignore:framejit.*recompile_limit:RuntimeWarning")
def test_recursive_function_is_correct():
    def rec(x, n):
        if n == 0:
            return x
        return rec(x * 2, n - 1) + 1

    for n in (3, 40):
        check(rec, X, n, fullgraph=False)
        framejit.reset()


def test_compiled_function_calling_compiled_function():
    inner = framejit.compile(lambda x: x * 2, backend="eager")

    def outer(x):
        return inner(x) + inner(x + 1)

    check(outer, X, fullgraph=False)


def test_invalid_backend_name_raises_value_error():
    with pytest.raises(ValueError):
        framejit.compile(user_fn, backend="no-such-backend")
    with pytest.raises(ValueError):
        framejit.compile(backend="no-such-backend")(user_fn)
    with pytest.raises(ValueError):
        framejit.install(backend="no-such-backend")
    framejit.uninstall()


def test_mode():
    # mode="reduce-overhead" replays CUDA graphs (tests/python/test_gpu_graphs.py); on the CPU it
    # changes nothing, and unknown modes are errors, as in torch.compile.
    f = framejit.compile(lambda x: np.tanh(x) * 2 + 1, mode="reduce-overhead", fullgraph=True)
    assert_same(np.tanh(X) * 2 + 1, f(X), exact=False)
    assert_same(np.tanh(X) * 2 + 1, framejit.compile(mode="default")(lambda x: np.tanh(x) * 2 + 1)(X), exact=False)
    with pytest.raises(ValueError, match="unknown mode 'max-autotune'"):
        framejit.compile(user_fn, mode="max-autotune")
    with pytest.raises(TypeError, match="mode must be"):
        framejit.compile(user_fn, mode=1)
    with pytest.raises(ValueError):
        framejit.install(mode="fast")
    framejit.uninstall()


# ---------------------------------------------------------------- disable

def test_disable_decorator_runs_in_cpython():
    codes = []

    def recorder(graph, example_inputs):
        codes.append(graph.code)
        return interpreter(graph)

    def secret(x):
        return np.sinh(x)

    @framejit.disable
    def skipped(x):
        return secret(x) + np.cosh(x)

    assert skipped.__name__ == "skipped"

    def f(x):
        return skipped(x) * 3

    c = framejit.compile(f, backend=recorder)
    for _ in range(2):
        assert_same(f(X), c(X))
    assert not any("sinh" in code or "cosh" in code for code in codes), codes
    # compiling a disabled function directly captures nothing either
    framejit.reset()
    codes.clear()
    assert_same(skipped(X), framejit.compile(skipped, backend=recorder)(X))
    assert codes == [] and framejit.stats()["captured"] == 0


# ---------------------------------------------------------------- install / uninstall

def test_install_uninstall_on_user_function():
    framejit.install(backend="eager")
    try:
        r1 = user_fn(X)
        r2 = user_fn(X)
        s = framejit.stats()
    finally:
        framejit.uninstall()
    expected = np.tanh(X) * 2 + 1
    assert_same(expected, r1)
    assert_same(expected, r2)
    assert s["captured"] >= 1 and s["cache_hits"] >= 1, s
    framejit.reset()
    assert_same(expected, user_fn(X))
    s = framejit.stats()
    assert s["captured"] == 0 and s["frames"] == 0, s


def test_install_with_custom_backend_and_graph_breaks(capsys):
    codes = []

    def recorder(graph, example_inputs):
        codes.append(graph.code)
        return interpreter(graph)

    def noisy(x):
        print("noisy")
        return user_fn(x) - 1

    framejit.install(backend=recorder)
    try:
        r = [noisy(X) for _ in range(2)]
    finally:
        framejit.uninstall()
    for v in r:
        assert_same(user_fn(X) - 1, v)
    assert capsys.readouterr().out == "noisy\nnoisy\n"
    assert any("tanh" in c for c in codes), codes


def test_install_is_idempotent_and_uninstall_safe():
    framejit.uninstall()  # not installed: harmless
    framejit.install()
    framejit.install()
    try:
        assert_same(np.tanh(X) * 2 + 1, user_fn(X), exact=False)
    finally:
        framejit.uninstall()
    framejit.uninstall()


# ---------------------------------------------------------------- explain

def f_explained(x, w):
    h = np.tanh(x @ w)
    return h * 2.0, h.sum()


def test_explain_attributes_full_graph():
    e = framejit.explain(f_explained)(X, W)
    assert e.graph_count == 1
    assert e.graph_break_count == 0
    assert e.break_reasons == []
    assert isinstance(e.guards, list) and e.guards and all(isinstance(g, str) for g in e.guards)
    assert any("x" in g for g in e.guards) and any("w" in g for g in e.guards)
    assert e.op_count >= 4  # matmul, tanh, mul, sum
    text = str(e)
    assert isinstance(text, str)
    for piece in ("tanh", "matmul", "sum"):
        assert piece in text, text
    assert_same(f_explained(X, W), e.result)


def test_explain_op_count_matches_graph_nodes():
    codes = []

    def recorder(graph, example_inputs):
        codes.append(sum(1 for n in graph.nodes if n.op == "call_function"))
        return interpreter(graph)

    def f(x):
        return np.exp(x) + np.log(np.abs(x) + 1) * 3

    e = framejit.explain(f)(X)
    framejit.compile(f, backend=recorder)(X)
    assert codes and e.op_count == codes[0], (e.op_count, codes)


def test_explain_with_breaks():
    def f(x):
        y = x * 2
        print("", end="")
        return y + 1

    e = framejit.explain(f)(X)
    assert e.graph_break_count >= 1
    assert len(e.break_reasons) == e.graph_break_count
    assert all(isinstance(r, str) and r for r in e.break_reasons)
    assert "print" in " ".join(e.break_reasons)
    assert "print" in str(e)
    assert_same(X * 2 + 1, e.result)


def test_explain_accepts_kwargs():
    def f(x, *, k=1.0):
        return x * k

    e = framejit.explain(f)(X, k=3.0)
    assert_same(X * 3.0, e.result)
    assert e.graph_count == 1


# ---------------------------------------------------------------- stats / reset

STATS_KEYS = ("frames", "captured", "cache_hits", "cache_misses", "recompiles", "graph_breaks", "compile_ms")


def test_stats_keys_and_counting():
    s = framejit.stats()
    assert isinstance(s, dict)
    for k in STATS_KEYS:
        assert k in s, k
        assert s[k] == 0, (k, s)
    c = framejit.compile(user_fn, backend="eager")
    c(X)
    s1 = framejit.stats()
    assert s1["frames"] >= 1 and s1["captured"] == 1 and s1["cache_misses"] == 1
    assert isinstance(s1["compile_ms"], float) and s1["compile_ms"] > 0
    c(X)
    s2 = framejit.stats()
    assert s2["cache_hits"] == 1 and s2["frames"] > s1["frames"]
    assert s2["compile_ms"] == s1["compile_ms"]  # no compile on a hit
    c(X.astype(np.float32))
    s3 = framejit.stats()
    assert s3["recompiles"] == 1 and s3["compile_ms"] >= s2["compile_ms"]
    # stats() returns a snapshot, not a live view
    s3["frames"] = -5
    assert framejit.stats()["frames"] != -5


def test_reset_zeroes_everything():
    c = framejit.compile(user_fn, backend="eager")
    c(X)
    c(X)
    framejit.reset()
    s = framejit.stats()
    for k in STATS_KEYS:
        assert s[k] == 0, (k, s)
    c(X)
    assert framejit.stats()["captured"] == 1  # cache dropped: compiles again


# ---------------------------------------------------------------- custom backends

def _resolve_target(target):
    """Resolve a node target such as 'numpy.tanh' or 'operator.add' to the callable."""
    if target == "getitem":
        return operator.getitem
    if target.startswith("method."):
        name = target[len("method."):]
        return lambda obj, *a, **k: getattr(obj, name)(*a, **k)
    if target == "sym_size":
        return lambda a, i: a.shape[i]
    module, _, attr = target.rpartition(".")
    obj = importlib.import_module(module)
    return getattr(obj, attr)


def interpreter(graph):
    """A tiny backend: evaluate graph.nodes in order with NumPy."""
    nodes = list(graph.nodes)
    placeholders = [n for n in nodes if n.op == "placeholder"]

    def run(*inputs):
        assert len(inputs) == len(placeholders), (len(inputs), len(placeholders))
        env = {}

        def load(v):
            if isinstance(v, type(nodes[0])):
                return env[id(v)]
            if isinstance(v, tuple):
                return tuple(load(a) for a in v)
            if isinstance(v, list):
                return [load(a) for a in v]
            if isinstance(v, dict):
                return {k: load(a) for k, a in v.items()}
            if isinstance(v, slice):
                return slice(load(v.start), load(v.stop), load(v.step))
            return v

        it = iter(inputs)
        for n in nodes:
            if n.op == "placeholder":
                env[id(n)] = next(it)
            elif n.op == "call_function":
                env[id(n)] = _resolve_target(n.target)(*load(n.args), **load(n.kwargs))
            elif n.op == "output":
                return load(n.args[0])
            else:
                raise AssertionError(f"unknown node op {n.op}")
        raise AssertionError("graph has no output node")

    return run


def test_custom_backend_receives_graph_and_example_inputs():
    calls = []

    def backend(graph, example_inputs):
        calls.append((graph, list(example_inputs)))
        return interpreter(graph)

    def f(x, w, s):
        return np.tanh(x @ w) * s, (x + 1).sum(axis=0)

    check(f, X, W, 0.5, backend=backend)
    assert len(calls) == 1, "backend must be called once per compile, not per call"
    graph, example_inputs = calls[0]
    assert isinstance(graph.code, str) and "tanh" in graph.code and "matmul" in graph.code
    ops = [n.op for n in graph.nodes]
    assert ops[0] == "placeholder" and ops[-1] == "output"
    assert set(ops) <= {"placeholder", "call_function", "output"}
    for n in graph.nodes:
        assert isinstance(n.args, tuple) and isinstance(n.kwargs, dict)
        if n.op == "call_function":
            assert n.target is not None and n.meta is not None
    arrays = [a for a in example_inputs if isinstance(a, np.ndarray)]
    assert len(arrays) == 2
    assert any(a.shape == X.shape and a.dtype == X.dtype for a in arrays)
    assert any(a.shape == W.shape for a in arrays)
    # placeholder metadata describes the inputs
    ph = [n for n in graph.nodes if n.op == "placeholder"]
    assert len(ph) == len(example_inputs)
    for n, a in zip(ph, example_inputs):
        if isinstance(a, np.ndarray):
            assert n.meta["dtype"] == str(a.dtype) and len(n.meta["shape"]) == a.ndim, n.meta


def test_custom_backend_callable_is_really_used():
    """A backend whose callable computes something else: its output must be what the
    compiled function returns (cold and on the cache hit)."""

    def wrong(graph, example_inputs):
        inner = interpreter(graph)

        def run(*inputs):
            return [o * 0 + 7 for o in inner(*inputs)]  # list form of the output

        return run

    c = framejit.compile(lambda x: x + 1, backend=wrong, fullgraph=True)
    for _ in range(2):
        np.testing.assert_array_equal(c(X), np.full_like(X, 7))


def test_custom_backend_sees_new_batch_size_without_recompiling():
    compiles = []

    def backend(graph, example_inputs):
        compiles.append(graph.code)
        return interpreter(graph)

    def f(x):
        return x * 2 - x.mean(axis=0)

    c = framejit.compile(f, backend=backend, fullgraph=True)
    for n in (3, 5, 8):
        x = randn(n, 4, seed=n)
        assert_same(f(x), c(x))
    assert len(compiles) == 1, compiles


def test_custom_backend_failure_falls_back_to_cpython():
    def broken(graph, example_inputs):
        raise RuntimeError("backend exploded")

    c = framejit.compile(user_fn, backend=broken)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for _ in range(2):
            assert_same(user_fn(X), c(X))


def test_graph_code_is_readable_text():
    seen = []

    def backend(graph, example_inputs):
        seen.append(graph)
        return interpreter(graph)

    framejit.compile(f_explained, backend=backend, fullgraph=True)(X, W)
    code = seen[0].code
    assert code == str(seen[0])
    assert "def " in code and "return" in code and "tanh" in code
    explained = str(framejit.explain(f_explained)(X, W))
    for line in code.strip().splitlines():
        assert line.strip() in explained, (line, explained)


# ---------------------------------------------------------------- processes, threads, logs

PYTHONPATH = os.path.dirname(os.path.dirname(framejit.__file__))


def run_python(code, timeout=20, env=None):
    e = dict(os.environ, PYTHONPATH=PYTHONPATH)
    e.update(env or {})
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=timeout, env=e
    )


def test_first_calls_from_two_threads_do_not_deadlock():
    """Threads making the first compiled call of a fresh process at the same time."""
    code = """
        import threading, numpy as np, framejit
        c = framejit.compile(lambda x: x * 2, backend="eager")
        out = [None] * 4
        def work(i):
            out[i] = c(np.ones(3))
        ts = [threading.Thread(target=work, args=(i,)) for i in range(4)]
        [t.start() for t in ts]; [t.join() for t in ts]
        assert all((o == 2).all() for o in out), out
        print("ok")
    """
    # The hang is timing dependent (about 6 runs in 10 hung when this test was written), so
    # several fresh processes are tried; a fixed framejit passes all of them in ~0.3 s each.
    for _ in range(8):
        try:
            r = run_python(code, timeout=5)
        except subprocess.TimeoutExpired:
            pytest.fail("deadlock: threads calling a compiled function for the first time hung")
        assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr


def test_many_threads_after_warmup_are_correct():
    import threading

    def f(x, s):
        return np.tanh(x * s) + x.sum(axis=-1, keepdims=True)

    c = framejit.compile(f, backend="eager")
    c(np.ones((2, 3)), 1.0)  # warm up (see the deadlock test for cold first calls)
    errors = []

    def worker(k):
        r = np.random.default_rng(k)
        for i in range(60):
            dt = [np.float32, np.float64, np.int16][(i + k) % 3]
            x = (r.standard_normal((1 + i % 5, 3)) * 10).astype(dt)
            s = float(i % 7) - 3
            e, a = f(x, s), c(x, s)
            if a.dtype != e.dtype or a.shape != e.shape or a.tobytes() != e.tobytes():
                errors.append((k, i))

    ts = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(timeout=30)
    assert not any(t.is_alive() for t in ts), "threads hung"
    assert errors == []


def test_framejit_logs_environment_variable():
    code = """
        import numpy as np, framejit
        f = framejit.compile(lambda x: np.tanh(x) * 2, backend="eager")
        f(np.ones(2)); f(np.ones(2, np.float32))
        def g(x):
            y = x * 2
            print("", end="")
            return y + 1
        framejit.compile(g)(np.ones(2))
        print("done")
    """
    r = run_python(code, env={"FRAMEJIT_LOGS": "graph,guards,recompiles,breaks"})
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "done"
    logs = r.stderr + r.stdout
    for kind in ("graph", "guards", "recompiles", "breaks"):
        assert f"framejit:{kind}" in logs or kind in logs.lower(), (kind, logs)
    assert "tanh" in logs and "print" in logs
    r = run_python(code)  # no logs when the variable is not set
    assert r.returncode == 0 and "tanh" not in r.stderr, r.stderr


def test_profile_log_times_each_step_of_a_compiled_call():
    code = """
        import numpy as np, framejit
        f = framejit.compile(lambda a, b: np.tanh(a @ b).sum(axis=1) + 1)
        a, b = np.ones((8, 16)), np.ones((16, 4))
        f(a, b)
        f(a, b)
    """
    r = run_python(code, env={"FRAMEJIT_LOGS": "profile"})
    assert r.returncode == 0, r.stderr
    lines = [l for l in r.stderr.splitlines() if l.startswith("[framejit:profile] run ")]
    assert len(lines) == 2, r.stderr
    assert ":gemm[8,4]=" in lines[1], lines[1]  # the product's step, its result shape and time


INSTALL_WORKLOAD = """
import asyncio, contextlib, dataclasses, functools, itertools
import numpy as np

@dataclasses.dataclass
class Pt:
    x: float
    y: float
    def norm(self):
        return (self.x ** 2 + self.y ** 2) ** 0.5

def gen(n):
    for i in range(n):
        yield i * i
    return "done"

def deleg(n):
    r = yield from gen(n)
    yield r

async def co(n):
    await asyncio.sleep(0)
    return n * 2

@contextlib.contextmanager
def ctx(log):
    log.append("enter")
    yield 5
    log.append("exit")

class K:
    def __init__(self, v):
        self.v = v
    @property
    def double(self):
        return self.v * 2
    def __add__(self, o):
        return K(self.v + o.v)

def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)

@functools.lru_cache(None)
def fibc(n):
    return n if n < 2 else fibc(n - 1) + fibc(n - 2)

def raiser(k):
    try:
        if k % 3 == 0:
            raise ValueError(k)
        return k
    except ValueError as e:
        return -int(str(e))
    finally:
        pass

def arr_fn(x, k):
    if x.sum() > 0:
        x = x * k
    return (np.tanh(x) + x.mean()).tolist()

def arr_clean(x, w):
    return np.maximum(x @ w, 0) / 2

def main():
    out = [[Pt(i, i + 1).norm() for i in range(5)], list(gen(5)), list(deleg(3)), asyncio.run(co(21))]
    log = []
    with ctx(log) as v:
        out.append(v)
    out += [log, (K(1) + K(2)).double, fib(12), fibc(40), [raiser(k) for k in range(7)]]
    out.append(sorted([3, 1, 2], key=lambda v: -v))
    out.append(dict(itertools.zip_longest("ab", [1])))
    g = (i for i in range(3))
    out += [next(g), list(g)]
    try:
        def deep(n):
            return deep(n + 1)
        deep(0)
    except RecursionError:
        out.append("recursion")
    x = np.arange(6.0).reshape(2, 3)
    for k in (0.5, 2.0):
        out += [arr_fn(x, k), arr_fn(-x, k), arr_clean(x, np.ones((3, 2)) * k).tolist()]
    return out
"""


def test_install_runs_ordinary_python_unchanged():
    ns = {"__name__": "workload_under_test"}
    exec(compile(INSTALL_WORKLOAD, os.path.join(os.path.dirname(__file__), "_workload.py"), "exec"), ns)
    plain = ns["main"]()
    framejit.install(backend="eager")
    try:
        first = ns["main"]()
        second = ns["main"]()
    finally:
        framejit.uninstall()
    assert first == plain
    assert second == plain
    s = framejit.stats()
    assert s["captured"] >= 1, s  # arr_clean (and arr_fn's callees) were captured


def test_explain_on_a_decorated_function():
    """The natural workflow: decorate with @framejit.compile, then explain it."""

    @framejit.compile(backend="eager")
    def g(a):
        return np.tanh(a) * 3

    e = framejit.explain(g)(X)
    assert_same(np.tanh(X) * 3, e.result)
    assert e.graph_count == 1, str(e)
    assert e.op_count >= 2 and e.guards, str(e)


def test_install_gives_up_on_code_without_arrays_and_frees_it():
    """Code that touches no arrays is left to CPython after its first trace (the 'never' tag on
    its co_extra), survives reset(), and its state is freed with the code object."""
    import gc

    src = "def count(n):\n    return n if n < 2 else count(n - 1) + count(n - 2)\n"
    ns = {}
    exec(compile(src, "<no-arrays>", "exec"), ns)
    framejit.install()
    try:
        assert ns["count"](15) == 610
        before = framejit.stats()["skipped_codes"]
        assert before >= 1
        for _ in range(3):
            assert ns["count"](12) == 144
        assert framejit.stats()["skipped_codes"] == before  # not traced again
        framejit.reset()
        assert ns["count"](10) == 55  # traced once more after reset, then left alone again
    finally:
        framejit.uninstall()
    del ns
    gc.collect()  # frees the code object and framejit's tagged state with it
    x = np.arange(4.0)
    assert np.array_equal(framejit.compile(lambda v: v * 2)(x), x * 2)
