"""framejit.Tensor, framejit.tensor and framejit.from_dlpack.

The storage, layout and interop live in C++ (frontend/tensor_object.cpp, the base class
framejit._C.TensorBase); this module holds the public class, which is where methods and
operators written in Python go. It must not add instance fields (see Note [framejit.Tensor]).
"""

from . import _C


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
