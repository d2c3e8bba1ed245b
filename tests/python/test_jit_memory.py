"""Memory on the "jit" backend: large results come from framejit's pool (Note [Pooled arrays]) and
are ordinary arrays that tracemalloc sees; freed results are reused without new page faults;
reset() gives back executable kernels and cached blocks."""

import gc
import pickle
import tracemalloc

import numpy as np

import framejit

RNG = np.random.default_rng(3)


def chain(x):
    return np.tanh(x * 0.5) + 1.0


def test_large_results_are_pooled_ndarrays():
    x = RNG.standard_normal((512, 1024)).astype(np.float32)  # 2 MiB
    f = framejit.compile(chain, backend="jit")
    a, b = f(x), f(x)
    assert type(a) is np.ndarray and type(a.base).__name__ == "PoolBlock"
    assert a.flags.c_contiguous and a.flags.writeable and a.flags.aligned
    assert not np.shares_memory(a, b)
    np.testing.assert_allclose(a, chain(x), rtol=1e-6, atol=1e-6)
    a[0, 0] = 7.0  # an ordinary writable array
    assert pickle.loads(pickle.dumps(a))[0, 0] == 7.0
    v = a[1:]
    del a
    np.testing.assert_allclose(v, chain(x)[1:], rtol=1e-6, atol=1e-6)  # a view keeps the block alive


def test_freed_results_are_reused():
    x = RNG.standard_normal((512, 1024)).astype(np.float32)
    f = framejit.compile(chain, backend="jit")
    f(x)
    before = framejit.stats()
    for _ in range(10):
        f(x)
    after = framejit.stats()
    # Every call's result died before the next call: the same block serves them all.
    assert after["pool_bytes_in_use"] == before["pool_bytes_in_use"]
    assert after["pool_bytes_cached"] >= x.nbytes


def test_small_results_are_numpys_own():
    x = RNG.standard_normal(100).astype(np.float32)
    r = framejit.compile(chain, backend="jit")(x)
    assert r.base is None and r.flags.owndata


def test_tracemalloc_sees_pooled_results():
    x = RNG.standard_normal((512, 1024)).astype(np.float32)
    f = framejit.compile(chain, backend="jit")
    f(x)
    tracemalloc.start()
    out = f(x)
    current, _ = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert current >= out.nbytes


def test_reset_releases_kernels_and_cached_blocks():
    x = RNG.standard_normal((512, 1024)).astype(np.float32)
    f = framejit.compile(lambda x: np.exp(x - x.max(-1, keepdims=True)) * 2.0, backend="jit")
    f(x)
    assert framejit.stats()["live_kernels"] > 0
    assert framejit.stats()["pool_bytes_cached"] > 0
    gc.collect()  # results of earlier tests kept alive by reference cycles return their blocks now
    framejit.reset()
    s = framejit.stats()
    assert s["live_kernels"] == 0 and s["pool_bytes_cached"] == 0, s
    np.testing.assert_allclose(f(x), np.exp(x - x.max(-1, keepdims=True)) * 2.0, rtol=1e-6)  # recompiles
