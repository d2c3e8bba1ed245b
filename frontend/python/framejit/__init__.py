"""framejit: a runtime JIT for Python array programs.

framejit sits under Python as its frame evaluator (PEP 523). When a function runs, it executes
the function's bytecode symbolically, captures the array operations as a graph, records the
guards under which the graph is valid, compiles it, and caches it per guard set.

    import framejit

    @framejit.compile
    def f(x, a):
        return np.tanh(x * a + 1.0)

    framejit.explain(f)(x, 0.5)   # graphs, graph breaks and their reasons, guards
    framejit.stats()              # counters

framejit.Tensor is framejit's own array type: framejit.tensor(data) and
framejit.from_dlpack(obj) make one, sharing memory with NumPy, PyTorch and any buffer or
DLPack producer.
"""

import functools as _functools
import sys as _sys

from . import _C
from ._C import Unsupported
from ._explain import ExplainOutput
from ._dynamo import dynamo_backend
from ._tensor import Tensor, from_dlpack, tensor
from ._control import associative_scan, cond, fori_loop, map, scan, while_loop  # noqa: A004 - framejit.map
from . import cuda

__all__ = [
    "compile",
    "install",
    "uninstall",
    "disable",
    "explain",
    "stats",
    "reset",
    "supported_ops",
    "config",
    "Unsupported",
    "ExplainOutput",
    "Tensor",
    "tensor",
    "from_dlpack",
    "dynamo_backend",
    "cond",
    "while_loop",
    "fori_loop",
    "scan",
    "map",
    "associative_scan",
]


def compile(fn=None, *, backend="jit", fullgraph=False, dynamic=None, mode=None):
    """Compile `fn` with framejit; usable as @compile or @compile(backend=..., ...).

    backend: "jit" (default), "eager" (reference interpreter over the graph), or a callable
        backend(graph, example_inputs) -> callable taking the graph inputs and returning a
        tuple/list of outputs.
    fullgraph: raise framejit.Unsupported instead of running a frame in CPython when it cannot
        be captured as one graph.
    dynamic: None/True keep sizes other than 0 and 1 symbolic (a new batch size does not
        recompile); False specializes every size and every Python number.
    mode: None or "default"; "reduce-overhead" issues each run's GPU work as one CUDA graph
        launch, patched with the run's pointers (inputs are not copied, outputs are fresh
        arrays). No effect on the CPU.
    Functions called from inside `fn` are compiled too.
    """
    if fn is None:
        return lambda f: compile(f, backend=backend, fullgraph=fullgraph, dynamic=dynamic, mode=mode)
    if _is_torch_module(fn):
        return _compile_module(fn, backend=backend, fullgraph=fullgraph, dynamic=dynamic, mode=mode)
    wrapper = _C.compile(fn, backend, fullgraph, dynamic, mode)
    try:
        _functools.update_wrapper(wrapper, fn)
    except AttributeError:
        pass  # callables without __name__ etc.
    return wrapper


def _is_torch_module(obj):
    torch = _sys.modules.get("torch")  # a module object exists only once torch is imported
    return torch is not None and isinstance(obj, torch.nn.Module)


def _compile_module(module, **options):
    """compile(module): an nn.Module wrapping `module` (its parameters, buffers, train()/eval()
    and attributes are the original's) whose calls run `module(...)` compiled: the module's
    forward is traced as part of the call (Note [Torch modules])."""
    import torch

    def call(*args, **kwargs):
        return module(*args, **kwargs)

    compiled_call = compile(call, **options)

    hooks = torch.nn.modules.module
    global_hooks = [getattr(hooks, name, {}) for name in (
        "_global_forward_hooks", "_global_forward_pre_hooks", "_global_backward_hooks", "_global_backward_pre_hooks")]

    class CompiledModule(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self._orig_mod = module

        def forward(self, *args, **kwargs):
            return compiled_call(*args, **kwargs)

        def __call__(self, *args, **kwargs):
            # nn.Module.__call__ only adds this wrapper's own hooks and the global ones (the
            # wrapped module's run inside the compiled call); without any, its two Python frames
            # are a few microseconds of every call of a small model on a GPU.
            if (self._forward_hooks or self._forward_pre_hooks or self._backward_hooks or
                    getattr(self, "_backward_pre_hooks", None) or any(global_hooks)):
                return super().__call__(*args, **kwargs)
            return compiled_call(*args, **kwargs)

        def __getattr__(self, name):
            try:
                return super().__getattr__(name)
            except AttributeError:
                return getattr(self._orig_mod, name)

    CompiledModule.__name__ = CompiledModule.__qualname__ = "Compiled" + type(module).__name__
    return CompiledModule()


def install(backend="jit", *, fullgraph=False, dynamic=None, mode=None):
    """Make framejit the frame evaluator of this process. The standard library, site-packages
    and framejit itself are never traced. Options as compile()'s."""
    _C.install(backend, fullgraph, dynamic, mode)


def uninstall():
    """Undo install(); compiled code stays cached."""
    _C.uninstall()


def disable(fn):
    """Never trace `fn`: it (and what it calls) runs in CPython."""
    wrapper = _C.disable(fn)
    try:
        _functools.update_wrapper(wrapper, fn)
    except AttributeError:
        pass
    return wrapper


def explain(fn):
    """explain(fn)(*args, **kwargs) runs fn once under framejit and reports what it captured.
    fn may be an nn.Module: its call is explained, as compile(module) compiles it."""
    if _is_torch_module(fn):
        module = fn

        def fn(*args, **kwargs):
            return module(*args, **kwargs)

    def run(*args, **kwargs):
        raw = _C.explain(fn, args, kwargs)
        return ExplainOutput(raw)

    return run


def stats():
    """Counters: frames, captured, cache_hits, cache_misses, recompiles, graph_breaks,
    compile_ms (cumulative) and more."""
    return _C.stats()


def supported_ops():
    """What framejit captures into graphs, in the terms code uses: "numpy.tanh", "ndarray.sum",
    "operator +". Anything else runs in CPython at a graph break (see explain())."""
    return list(_C.supported_ops())


def reset():
    """Drop every cached graph and zero the counters."""
    _C.reset()


class _Config:
    """framejit.config: process-wide settings."""

    @property
    def recompile_limit(self):
        """Compiled versions kept per function (8); past it the function runs in CPython."""
        return _C.get_recompile_limit()

    @recompile_limit.setter
    def recompile_limit(self, n):
        _C.set_recompile_limit(int(n))

    def __setattr__(self, name, value):
        if not hasattr(type(self), name):
            raise AttributeError(f"framejit.config has no setting {name!r}")
        object.__setattr__(self, name, value)


config = _Config()

# Last: the C++ side imports what it needs from this package and NumPy, once, under the import
# lock (see Note [One-time initialization] in frontend/cpython/python_env.h).
_C._initialize()

# torch.compile(model, backend="framejit") when torch >= 2 is already loaded; otherwise
# backend=framejit.dynamo_backend, or framejit._dynamo.register() once torch is imported.
if "torch" in _sys.modules:
    try:
        from . import _dynamo

        _dynamo.register()
    except Exception as _exc:  # noqa: BLE001 — optional: framejit itself works without it
        import warnings as _warnings

        _warnings.warn(f"framejit: could not register the torch.compile backend: {_exc!r}")
