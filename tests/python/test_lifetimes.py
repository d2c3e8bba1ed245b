"""Leaks and lifetimes: cache-hit calls keep resident memory and reference counts flat, and
compiled code — graphs, kernels, executable memory — goes away when the compiled function is
garbage collected or framejit.reset() runs (Note [Kernel lifetime])."""

import gc
import os
import sys

import numpy as np

import framejit


# Under AddressSanitizer (make test-asan) freed memory sits in ASan's quarantine by design, so
# resident memory grows with every allocation and says nothing about leaks there.
UNDER_ASAN = "libasan" in os.environ.get("LD_PRELOAD", "")


def rss_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def fresh(source, name="f", **env):
    ns = {"np": np, **env}
    exec(source, ns)
    return ns[name]


def test_300k_cache_hits_keep_memory_and_refcounts_flat():
    x = np.ones(64, np.float32)
    y = np.full(64, 2.0, np.float32)
    f = framejit.compile(fresh("def f(x, y, a):\n    return np.tanh(x * a + y), x.sum()\n"))
    for _ in range(2000):  # warm: compile, caches, allocator pools
        f(x, y, 0.5)
    refs = (sys.getrefcount(x), sys.getrefcount(y))
    before = rss_bytes()
    for _ in range(300_000):
        f(x, y, 0.5)
    grew = rss_bytes() - before
    assert (sys.getrefcount(x), sys.getrefcount(y)) == refs
    if not UNDER_ASAN:
        assert grew <= 2 * 1024 * 1024, f"resident memory grew by {grew} bytes over 300k calls"


def test_returned_inputs_and_views_hold_exactly_one_reference_each():
    x = np.arange(12.0).reshape(3, 4).copy()  # owns its memory: views of it refer to it
    f = framejit.compile(fresh("def f(x):\n    return x, x.T, x[1:] * 2\n"))
    r0 = sys.getrefcount(x)
    out = [f(x) for _ in range(100)]
    assert sys.getrefcount(x) == r0 + 200  # each call returns x and a view of it
    del out
    assert sys.getrefcount(x) == r0


def test_garbage_collected_functions_release_their_kernels():
    gc.collect()
    base = framejit.stats()["live_kernels"]
    x = np.linspace(-1, 1, 1000, dtype=np.float32)
    for k in range(30):  # distinct constants: distinct kernels
        c = framejit.compile(fresh(f"def f(x):\n    return np.tanh(x * {k}.25 + 1.0) + x.max(-1, keepdims=True)\n"))
        c(x)
        c(x)
        assert framejit.stats()["live_kernels"] > base
        del c
    gc.collect()
    s = framejit.stats()
    assert s["live_kernels"] == base, s
    assert s["cache_entries"] == 0, s


def test_functions_calling_helpers_are_released_too():
    gc.collect()
    base = framejit.stats()["live_kernels"]
    x = np.ones(100)

    def helper(v):
        return v * 3.0

    for k in range(10):
        c = framejit.compile(fresh(f"def g(x):\n    return helper(x) + {k}.0\n", "g", helper=helper))
        c(x)
        del c
    gc.collect()
    assert framejit.stats()["live_kernels"] == base


def test_a_kernel_shared_by_two_functions_outlives_one_of_them():
    x = np.ones(100, np.float32)
    src = "def f(x):\n    return np.exp(x) * 0.125\n"
    a, b = framejit.compile(fresh(src)), framejit.compile(fresh(src))
    a(x)
    b(x)
    live = framejit.stats()["live_kernels"]
    del a
    gc.collect()
    assert framejit.stats()["live_kernels"] == live  # b still uses the shared kernel
    np.testing.assert_allclose(b(x), np.exp(x) * 0.125, rtol=1e-6)
