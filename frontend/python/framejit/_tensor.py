"""framejit.Tensor, framejit.tensor and framejit.from_dlpack.

The storage, layout and interop live in C++ (frontend/tensor/object.cpp, the base class
framejit._C.TensorBase); this module holds the public class, which is where methods and
operators written in Python go. It must not add instance fields (see Note [framejit.Tensor]).
"""

import sys as _sys

from . import _C


# ---- operators and methods ---------------------------------------------------------------------
# Each op is a small function whose body is the op. Outside compiled code, _C.tensor_op traces it
# into a one-op graph, compiles it and caches it under guards (Note [Tensor ops outside compiled
# code] in frontend/ops/tensor/eager.cpp); inside a compiled function the tracer sees the same op on
# Tensor values directly. Views (reshape, transpose, indexing) are made natively (Note [Tensor
# views]): they only make new metadata over the same memory.

_run = _C.tensor_op


def _add(a, b): return a + b
def _sub(a, b): return a - b
def _mul(a, b): return a * b
def _truediv(a, b): return a / b
def _floordiv(a, b): return a // b
def _mod(a, b): return a % b
def _pow(a, b): return a ** b
def _matmul(a, b): return a @ b
def _and(a, b): return a & b
def _or(a, b): return a | b
def _xor(a, b): return a ^ b
def _lt(a, b): return a < b
def _le(a, b): return a <= b
def _eq(a, b): return a == b
def _ne(a, b): return a != b
def _gt(a, b): return a > b
def _ge(a, b): return a >= b
def _neg(a): return -a
def _pos(a): return +a
def _abs(a): return abs(a)
def _invert(a): return ~a
def _sum(a, axis, keepdims): return a.sum(axis=axis, keepdims=keepdims)
def _mean(a, axis, keepdims): return a.mean(axis=axis, keepdims=keepdims)
def _max(a, axis, keepdims): return a.max(axis=axis, keepdims=keepdims)
def _min(a, axis, keepdims): return a.min(axis=axis, keepdims=keepdims)
def _prod(a, axis, keepdims): return a.prod(axis=axis, keepdims=keepdims)
def _var(a, axis, ddof, keepdims): return a.var(axis=axis, ddof=ddof, keepdims=keepdims)
def _std(a, axis, ddof, keepdims): return a.std(axis=axis, ddof=ddof, keepdims=keepdims)
def _argmax(a, axis, keepdims): return a.argmax(axis=axis, keepdims=keepdims)
def _argmin(a, axis, keepdims): return a.argmin(axis=axis, keepdims=keepdims)
def _astype(a, dtype): return a.astype(dtype)

_NUMBERS = (bool, int, float)


def _operand(x):
    """x as an operand of a Tensor operator, or None when the operator does not apply."""
    if isinstance(x, Tensor) or type(x) in _NUMBERS:
        return x
    np = _sys.modules.get("numpy")
    if np is not None and isinstance(x, (np.ndarray, np.generic)):
        return tensor(x)  # a view of the same memory
    return None


def _inplace(forward, ufunc):
    def apply(self, other):
        try:
            result = forward(self, other)
        except ValueError:
            # NumPy checks the output's casting before the shapes: `int32 += float32` with
            # shapes that do not broadcast is a casting TypeError. Probe the dtypes on one element.
            if isinstance(other, Tensor) and other.ndim:
                probe = forward(self.reshape(-1)[:1], other.reshape(-1)[:1])
                if probe is not NotImplemented:
                    _C.tensor_store_inplace(self.reshape(-1)[:1].copy(), probe, ufunc)
            raise
        if result is NotImplemented:
            return NotImplemented
        return _C.tensor_store_inplace(self, result, ufunc)

    return apply


def _binary(fn, name, native=None):
    # native(a, b): the op as a plain native loop, for what neither the JIT nor NumPy (missing
    # here) computes: float // and % (Note [Float divmod without NumPy]), integer @.
    def apply(a, b):
        try:
            return _run(fn, a, b)
        except NotImplementedError:
            if native is None:
                raise
            return native(a, b)

    def forward(self, other):
        other = _operand(other)
        if other is None:
            return NotImplemented
        return apply(self, other)

    def reflected(self, other):
        other = _operand(other)
        if other is None:
            return NotImplemented
        return apply(other, self)

    forward.__name__ = f"__{name}__"
    reflected.__name__ = f"__r{name}__"
    return forward, reflected


def _shape_args(args):
    # reshape(2, 3) and reshape((2, 3)) mean the same
    if len(args) == 1 and not isinstance(args[0], int):
        return tuple(args[0])
    return args


_function_ops = {}


def _function_op(func):
    """A one-op function calling `func` (a NumPy ufunc or function) with traced arguments."""
    fn = _function_ops.get(func)
    if fn is None:
        def fn(args, kwargs):
            return func(*args, **kwargs)

        _function_ops[func] = fn
    return fn


def _axis(axis):
    # a list of axes traces as a tuple (NumPy accepts both)
    return tuple(axis) if isinstance(axis, list) else axis


def _tensors_in(args):
    """NumPy arrays in a call's arguments as Tensor views (lists and tuples included)."""
    out = []
    for a in args:
        if isinstance(a, (list, tuple)):
            a = type(a)(_tensors_in(a))
        else:
            x = _operand(a)
            a = a if x is None else x
        out.append(a)
    return tuple(out)


class Tensor(_C.TensorBase):
    """An n-dimensional array of one dtype, in memory framejit owns or borrows.

    Create one with framejit.tensor(data) or framejit.from_dlpack(obj); the class cannot be
    instantiated directly.

    Attributes: shape, dtype ("float32"), device ("cpu"), ndim, size, itemsize, nbytes and
    strides (in bytes, as in NumPy). Conversions: tolist(), item(), numpy().

    Interop without copies: the buffer protocol (memoryview(t), numpy.asarray(t)),
    __array__, __array_interface__, and DLPack (__dlpack__ / __dlpack_device__:
    numpy.from_dlpack(t), torch.from_dlpack(t)). A tensor made from another object's memory
    keeps that object alive; a NumPy array or DLPack consumer viewing a tensor keeps the
    tensor alive.
    """

    __slots__ = ()
    __hash__ = None  # == is elementwise

    __array_priority__ = 1000  # ndarray op Tensor defers to the Tensor (__array_ufunc__)

    # -- operators: Python numbers, Tensors, and NumPy arrays (taken as Tensor views) --
    __add__, __radd__ = _binary(_add, "add")
    __sub__, __rsub__ = _binary(_sub, "sub")
    __mul__, __rmul__ = _binary(_mul, "mul")
    __truediv__, __rtruediv__ = _binary(_truediv, "truediv")
    __floordiv__, __rfloordiv__ = _binary(_floordiv, "floordiv", lambda a, b: _C.tensor_float_divmod(a, b, True))
    __mod__, __rmod__ = _binary(_mod, "mod", lambda a, b: _C.tensor_float_divmod(a, b, False))
    __pow__, __rpow__ = _binary(_pow, "pow")
    __matmul__, __rmatmul__ = _binary(_matmul, "matmul", _C.tensor_int_matmul)
    __and__, __rand__ = _binary(_and, "and")
    __or__, __ror__ = _binary(_or, "or")
    __xor__, __rxor__ = _binary(_xor, "xor")
    # In place, into the tensor's memory (Note [In-place Tensor operators] in ops/tensor/native.cpp).
    __iadd__ = _inplace(__add__, "add")
    __isub__ = _inplace(__sub__, "subtract")
    __imul__ = _inplace(__mul__, "multiply")
    __itruediv__ = _inplace(__truediv__, "divide")
    __ifloordiv__ = _inplace(__floordiv__, "floor_divide")
    __imod__ = _inplace(__mod__, "remainder")
    __ipow__ = _inplace(__pow__, "power")
    __imatmul__ = _inplace(__matmul__, "matmul")
    __iand__ = _inplace(__and__, "bitwise_and")
    __ior__ = _inplace(__or__, "bitwise_or")
    __ixor__ = _inplace(__xor__, "bitwise_xor")
    __lt__, _ = _binary(_lt, "lt")
    __le__, _ = _binary(_le, "le")
    __eq__, _ = _binary(_eq, "eq")
    __ne__, _ = _binary(_ne, "ne")
    __gt__, _ = _binary(_gt, "gt")
    __ge__, _ = _binary(_ge, "ge")
    del _

    def __neg__(self):
        return _run(_neg, self)

    def __pos__(self):
        return _run(_pos, self)

    def __abs__(self):
        return _run(_abs, self)

    def __invert__(self):
        return _run(_invert, self)

    # -- Python numbers from one-element tensors --
    def __float__(self):
        return float(self._one("float"))

    def __int__(self):
        return int(self._one("int"))

    def __index__(self):
        # TypeError, not ValueError: bytes(t) and friends try __index__ first and must fall
        # through to the buffer protocol (NumPy's rule: only 0-d integer arrays are indices).
        if self.ndim != 0 or not self.dtype.startswith(("int", "uint")):
            raise TypeError("only 0-d integer tensors can be converted to an index")
        return self.item()

    def __bool__(self):
        return bool(self._one("bool"))

    def _one(self, what):
        if self.size != 1:
            raise ValueError(
                f"the truth value of a tensor with more than one element is ambiguous"
                if what == "bool" else f"only tensors of one element can be converted to {what}")
        return self.reshape(-1)[0].item()

    def __iter__(self):
        if self.ndim == 0:
            raise TypeError("iteration over a 0-d tensor")
        return (self[i] for i in range(self.shape[0]))

    # -- reductions --
    def sum(self, axis=None, keepdims=False):
        return _run(_sum, self, _axis(axis), keepdims)

    def mean(self, axis=None, keepdims=False):
        return _run(_mean, self, _axis(axis), keepdims)

    def max(self, axis=None, keepdims=False):
        return _run(_max, self, _axis(axis), keepdims)

    def min(self, axis=None, keepdims=False):
        return _run(_min, self, _axis(axis), keepdims)

    def prod(self, axis=None, keepdims=False):
        return _run(_prod, self, _axis(axis), keepdims)

    def var(self, axis=None, ddof=0, keepdims=False):
        return _run(_var, self, _axis(axis), ddof, keepdims)

    def std(self, axis=None, ddof=0, keepdims=False):
        return _run(_std, self, _axis(axis), ddof, keepdims)

    def argmax(self, axis=None, keepdims=False):
        return _run(_argmax, self, axis, keepdims)

    def argmin(self, axis=None, keepdims=False):
        return _run(_argmin, self, axis, keepdims)

    # -- casts, views and copies --
    def astype(self, dtype):
        """A copy converted to `dtype` (a name such as "float32", or float/int/bool)."""
        return _run(_astype, self, dtype)

    def reshape(self, *shape):
        """The same data in `shape` (one -1 allowed): a view when the strides allow, else a copy."""
        return _C.tensor_reshape(self, _shape_args(shape))

    def transpose(self, *axes):
        """A view with the dims permuted (reversed when no axes are given)."""
        return _C.tensor_permute(self, _shape_args(axes) if axes else ())

    @property
    def T(self):
        return _C.tensor_permute(self, ())

    def swapaxes(self, axis1, axis2):
        return _C.tensor_swapaxes(self, axis1, axis2)

    def copy(self):
        """A C-contiguous copy."""
        return _C.tensor_copy(self)

    def __copy__(self):
        return _C.tensor_copy(self)

    def __deepcopy__(self, memo):
        return _C.tensor_copy(self)

    def __reduce__(self):
        # pickles as its values: a copy, like NumPy arrays
        return (tensor, (self.tolist(), self.dtype))

    def __getitem__(self, key):
        """Basic indexing (ints, slices, None, ...): a view of the same memory."""
        return _C.tensor_getitem(self, key)

    # -- NumPy's protocols: NumPy functions on Tensors return Tensors --
    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        if method != "__call__" or any(v is not None for k, v in kwargs.items() if k == "out"):
            return NotImplemented
        kwargs.pop("out", None)
        args = []
        for x in inputs:
            x = _operand(x)
            if x is None:
                return NotImplemented
            args.append(x)
        return _run(_function_op(ufunc), tuple(args), kwargs)

    def __array_function__(self, func, types, args, kwargs):
        if not _C._registered(func):
            return NotImplemented
        return _run(_function_op(func), _tensors_in(args), kwargs)


Tensor.__module__ = "framejit"
_C._register_tensor_class(Tensor)


def tensor(data, dtype=None, device="cpu"):
    """A framejit.Tensor from `data`, sharing its memory when it can (like numpy.asarray and
    torch.as_tensor).

    data:
        - a framejit.Tensor: returned as it is;
        - a NumPy array, an object with the buffer protocol (bytes, bytearray, memoryview,
          array.array, ...), a DLPack producer (an object with __dlpack__, e.g. a torch
          tensor) or an object with __array_interface__: a tensor over the same memory, which
          keeps the source alive; it is writeable iff the source is;
        - Python numbers and nested lists/tuples of them: a new tensor. The dtype is inferred
          as NumPy 2 does for Python data: bool -> "bool", int -> "int64", float -> "float64",
          complex -> "complex128", mixed -> the widest; ragged nesting raises ValueError.
    dtype:
        None keeps the source's dtype. A different dtype makes a converted copy (so it never
        shares memory). A name ("float32"), a Python type (float, int, bool, complex), a
        NumPy dtype or a torch dtype. Unknown names raise TypeError listing the accepted ones.
    device:
        "cpu". "cuda" raises RuntimeError until framejit has a CUDA backend.
    """
    return _C.tensor(data, dtype, device)


def from_dlpack(x, *, device=None, copy=None):
    """A framejit.Tensor over the memory of a DLPack producer (an object with __dlpack__, such
    as a torch tensor or NumPy array, or a DLPack capsule), without copying.

    The producer's memory stays alive until the tensor and every view of it are gone; then
    the producer's deleter runs, once. copy=True makes an owned copy instead. Only CPU data
    is supported yet.
    """
    return _C.from_dlpack(x, device=device, copy=copy)
