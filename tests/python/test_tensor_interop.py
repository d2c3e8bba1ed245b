"""framejit.Tensor: creation, properties, the buffer protocol, NumPy and DLPack interop (zero
copies both ways) and lifetimes. Parts that need NumPy or PyTorch skip when they are missing."""

import array
import gc
import hashlib
import subprocess
import sys
import weakref

import pytest

import framejit
from framejit import _C

try:
    import numpy as np
except ImportError:  # pyenv's 3.12/3.13 have no NumPy
    np = None
try:
    import torch
except ImportError:
    torch = None

needs_numpy = pytest.mark.skipif(np is None, reason="needs NumPy")
needs_torch = pytest.mark.skipif(torch is None or np is None, reason="needs PyTorch and NumPy")

DTYPES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
          "float16", "float32", "float64", "complex64", "complex128"]
FORMATS = {"bool": "?", "int8": "b", "int16": "h", "int32": "i", "int64": "l", "uint8": "B",
           "uint16": "H", "uint32": "I", "uint64": "L", "float16": "e", "float32": "f",
           "float64": "d", "complex64": "Zf", "complex128": "Zd"}
C_CONTIGUOUS, WRITEABLE, ALIGNED = 1, 2, 4


def sample(dtype, shape=(2, 3)):
    """A NumPy array of `dtype` with distinct small values."""
    n = 1
    for s in shape:
        n *= s
    a = np.arange(n).reshape(shape) % 7
    if dtype == "bool":
        return (a % 2).astype(bool)
    if dtype.startswith("complex"):
        return (a + 1j * a[::-1]).astype(dtype)
    return a.astype(dtype)


# ---- creation from Python data ---------------------------------------------------------------


@pytest.mark.parametrize("data, dtype", [
    ([True, False], "bool"),
    ([1, 2, 3], "int64"),
    ([1.0, 2], "float64"),
    ([True, 2], "int64"),
    ([1, 2.5, True], "float64"),
    ([1, 2j], "complex128"),
    ([2**63, 1], "uint64"),
    ([], "float64"),
    ((1, 2), "int64"),
    (range(4), "int64"),
])
def test_dtype_inference(data, dtype):
    t = framejit.tensor(data)
    assert isinstance(t, framejit.Tensor)
    assert t.dtype == dtype
    assert t.tolist() == list(data)


def test_nested_lists_and_scalars():
    t = framejit.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    assert (t.shape, t.ndim, t.size, t.itemsize, t.nbytes) == ((2, 3), 2, 6, 8, 48)
    assert t.strides == (24, 8)
    assert t.device == "cpu" and len(t) == 2
    assert t.tolist() == [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]
    assert t._flags == C_CONTIGUOUS | WRITEABLE | ALIGNED
    s = framejit.tensor(2.5)
    assert (s.shape, s.ndim, s.size, s.strides) == ((), 0, 1, ())
    assert s.item() == 2.5 and s.tolist() == 2.5
    assert framejit.tensor(True).item() is True and framejit.tensor(7).item() == 7
    with pytest.raises(TypeError, match="0-d"):
        len(s)
    e = framejit.tensor([[], []])
    assert e.shape == (2, 0) and e.size == 0 and e.tolist() == [[], []]
    assert framejit.tensor([[[1], [2]], [[3], [4]]]).shape == (2, 2, 1)


@pytest.mark.parametrize("data", [[[1, 2], [3]], [[1, 2], 3], [1, [2]], [[], [1]], [[[1]], [2]]])
def test_ragged_raises(data):
    with pytest.raises(ValueError, match="ragged"):
        framejit.tensor(data)


@pytest.mark.parametrize("data", ["abc", ["a", "b"], [1, None], None, {"a": 1}, [object()]])
def test_non_numeric_raises(data):
    with pytest.raises(TypeError):
        framejit.tensor(data)


def test_python_int_bounds():
    with pytest.raises(OverflowError):
        framejit.tensor([2**64])
    with pytest.raises(OverflowError):
        framejit.tensor([-1, 2**63])
    with pytest.raises(OverflowError, match="out of bounds for uint8"):
        framejit.tensor([300], dtype="uint8")
    with pytest.raises(OverflowError):
        framejit.tensor([-1], dtype="uint32")
    assert framejit.tensor([255, 0], dtype="uint8").tolist() == [255, 0]
    assert framejit.tensor([2**64 - 1], dtype="uint64").tolist() == [2**64 - 1]
    with pytest.raises(ValueError, match="NaN"):
        framejit.tensor([float("nan")], dtype="int32")


def test_python_data_with_dtype():
    assert framejit.tensor([1.7, -1.7, 0.0], dtype="int32").tolist() == [1, -1, 0]
    assert framejit.tensor([0, 2, 0.5], dtype="bool").tolist() == [False, True, True]
    assert framejit.tensor([1, 2], dtype=float).dtype == "float64"
    assert framejit.tensor([1, 2], dtype=complex).tolist() == [1 + 0j, 2 + 0j]
    t = framejit.tensor([0.1, 1e30, 65504.0, 1e-8], dtype="float16")
    assert t.dtype == "float16" and t.tolist()[2] == 65504.0 and t.tolist()[1] == float("inf")
    with pytest.raises(TypeError):
        framejit.tensor([1j], dtype="float32")


def test_bad_dtype_and_device():
    with pytest.raises(TypeError, match="float32"):  # the accepted list is in the message
        framejit.tensor([1], dtype="float128")
    with pytest.raises(TypeError, match="unknown dtype"):
        framejit.tensor([1], dtype=3)
    if not framejit.cuda.is_available():
        with pytest.raises(RuntimeError, match="cuda"):
            framejit.tensor([1], device="cuda")
    with pytest.raises(RuntimeError, match="cuda"):
        framejit.tensor([1], device="cuda:63")
    with pytest.raises(ValueError, match="unknown device"):
        framejit.tensor([1], device="cuda:x")
    with pytest.raises(ValueError, match="unknown device"):
        framejit.tensor([1], device="tpu")
    assert framejit.tensor([1], device="cpu").device == "cpu"


def test_item_and_len_errors():
    with pytest.raises(ValueError, match="2 elements"):
        framejit.tensor([1, 2]).item()
    with pytest.raises(ValueError):
        framejit.tensor([]).item()
    assert framejit.tensor([[3]]).item() == 3


def test_not_instantiable_and_class():
    with pytest.raises(TypeError, match="framejit.tensor"):
        framejit.Tensor()
    t = framejit.tensor([1])
    assert type(t) is framejit.Tensor and isinstance(t, _C.TensorBase)
    assert framejit.Tensor.__module__ == "framejit" and framejit.Tensor.__slots__ == ()
    with pytest.raises(AttributeError):
        t.anything = 1  # no __dict__
    assert weakref.ref(t)() is t
    for name in ["Tensor", "tensor", "from_dlpack"]:
        assert name in framejit.__all__

    class WithFields(framejit.Tensor):
        pass  # gets a __dict__

    with pytest.raises(TypeError, match="__slots__"):
        _C._register_tensor_class(WithFields)


# ---- repr ------------------------------------------------------------------------------------


def test_repr():
    assert repr(framejit.tensor([[1.0, 2.0]], dtype="float32")) == \
        'framejit.tensor([[1.0, 2.0]], dtype="float32")'
    assert repr(framejit.tensor([[1, 2], [3, 4]])) == \
        'framejit.tensor([[1, 2],\n                 [3, 4]], dtype="int64")'
    assert repr(framejit.tensor(0.1, dtype="float32")) == 'framejit.tensor(0.1, dtype="float32")'
    assert repr(framejit.tensor([True])) == 'framejit.tensor([True], dtype="bool")'
    assert repr(framejit.tensor([10.0, 1e20, float("nan")], dtype="float32")) == \
        'framejit.tensor([10.0, 1e+20, nan], dtype="float32")'
    assert repr(framejit.tensor([1 + 2j])) == 'framejit.tensor([(1+2j)], dtype="complex128")'
    big = repr(framejit.tensor(list(range(5000))))
    assert big == 'framejit.tensor([0, 1, 2, ..., 4997, 4998, 4999], dtype="int64", shape=(5000,))'
    big2 = repr(framejit.tensor([[0.0] * 100] * 100))
    assert len(big2) < 600 and "..." in big2 and "shape=(100, 100)" in big2
    assert str(framejit.tensor([1])) == repr(framejit.tensor([1]))


# ---- buffer protocol -----------------------------------------------------------------------


def test_memoryview_of_tensor():
    t = framejit.tensor([[1, 2, 3], [4, 5, 6]], dtype="int32")
    m = memoryview(t)
    assert (m.format, m.shape, m.strides, m.readonly, m.itemsize) == ("i", (2, 3), (12, 4), False, 4)
    assert m.tolist() == [[1, 2, 3], [4, 5, 6]]
    m[1, 2] = 60
    assert t.tolist()[1][2] == 60
    assert not _C._tensor_is_private(t)  # exported
    m.release()
    assert _C._tensor_is_private(t)


@pytest.mark.parametrize("dtype", DTYPES)
def test_buffer_formats(dtype):
    t = framejit.tensor([0, 1], dtype=dtype)
    m = memoryview(t)
    assert m.format == FORMATS[dtype] and m.itemsize == t.itemsize and m.nbytes == t.nbytes


def test_buffer_contiguity_requests():
    t = framejit.tensor([[1, 2, 3], [4, 5, 6]], dtype="int16")
    v = _C._tensor_view(t, 0, (3, 2), (2, 6))  # the transpose: Fortran order
    assert v.tolist() == [[1, 4], [2, 5], [3, 6]]
    assert not v._flags & C_CONTIGUOUS
    assert memoryview(v).strides == (2, 6)  # strided requests work
    assert memoryview(v).f_contiguous and not memoryview(v).c_contiguous
    every_other = _C._tensor_view(t, 0, (3,), (4,))
    assert every_other.tolist() == [1, 3, 5]
    with pytest.raises(BufferError, match="C-contiguous"):  # hashlib asks for PyBUF_SIMPLE
        hashlib.sha256(every_other)
    row = framejit.tensor([1, 3, 5], dtype="int16")
    assert hashlib.sha256(row).digest() == hashlib.sha256(bytes(row)).digest()
    assert bytes(t) == b"\x01\x00\x02\x00\x03\x00\x04\x00\x05\x00\x06\x00"
    assert bytes(v) == b"\x01\x00\x04\x00\x02\x00\x05\x00\x03\x00\x06\x00"  # copied in C order


def test_readonly_buffer_source():
    t = framejit.tensor(b"\x01\x02\x03")
    assert t.dtype == "uint8" and t.tolist() == [1, 2, 3]
    assert not t._flags & WRITEABLE
    assert memoryview(t).readonly
    with pytest.raises(TypeError):
        memoryview(t)[0] = 5
    with pytest.raises(TypeError):  # ctypes asks for a writable buffer: refused
        import ctypes
        (ctypes.c_char * 3).from_buffer(t)


def test_bytearray_and_array_array_share_memory():
    buf = bytearray(b"\x00" * 8)
    t = framejit.tensor(buf)
    assert t._flags & WRITEABLE and t.shape == (8,)
    memoryview(t)[0] = 7
    assert buf[0] == 7
    with pytest.raises(BufferError):
        buf.append(1)  # the exporter stays locked while the tensor lives
    del t
    gc.collect()
    buf.append(1)
    arr = array.array("d", [1.0, 2.0, 3.0])
    a = framejit.tensor(arr)
    assert a.dtype == "float64" and a.tolist() == [1.0, 2.0, 3.0]
    arr[1] = 20.0
    assert a.tolist() == [1.0, 20.0, 3.0]
    with pytest.raises(TypeError, match="format"):
        framejit.tensor(array.array("u", "ab"))


def test_strided_memoryview_source():
    base = framejit.tensor(list(range(12)), dtype="int32")
    m = memoryview(base)[::-3]
    t = framejit.tensor(m)
    assert t.tolist() == [11, 8, 5, 2]
    assert t.strides == (-12,) and t._flags == WRITEABLE | ALIGNED
    memoryview(t)[0] = -1
    assert base.tolist()[11] == -1


# ---- NumPy -----------------------------------------------------------------------------------


@needs_numpy
@pytest.mark.parametrize("dtype", DTYPES)
def test_numpy_round_trip_zero_copy(dtype):
    a = sample(dtype)
    t = framejit.tensor(a)
    assert (t.dtype, t.shape, t.strides) == (dtype, a.shape, a.strides)
    assert t._base is a
    b = t.numpy()
    assert b.dtype == a.dtype and b.shape == a.shape and np.shares_memory(a, b)
    np.testing.assert_array_equal(b, a)
    assert t.tolist() == a.tolist()
    # Writes are visible both ways.
    one = np.ones((), dtype)
    a[1, 2] = one
    assert t.tolist()[1][2] == one.item()
    b[0, 0] = one
    assert a[0, 0] == one
    c = np.asarray(t)  # the buffer protocol
    assert c.dtype == a.dtype and np.shares_memory(c, a)


@needs_numpy
def test_numpy_strided_and_negative_views():
    x = np.arange(24, dtype=np.float32).reshape(4, 6)
    for view in [x[::-1], x[:, ::-2], x.T, x[1:3, 2:5], x[::2, ::3].T, x[:, 0]]:
        t = framejit.tensor(view)
        assert t.strides == view.strides and t.shape == view.shape
        assert t.tolist() == view.tolist()
        assert bool(t._flags & C_CONTIGUOUS) == view.flags.c_contiguous
        back = t.numpy()
        assert back.strides == view.strides and np.shares_memory(back, x)
        np.testing.assert_array_equal(back, view)
    t = framejit.tensor(x[::-1, ::-1])
    t.numpy()[0, 0] = -1.0
    assert x[3, 5] == -1.0


@needs_numpy
def test_numpy_readonly_and_unaligned():
    a = np.arange(4.0)
    a.flags.writeable = False
    t = framejit.tensor(a)
    assert not t._flags & WRITEABLE
    assert not t.numpy().flags.writeable
    raw = np.zeros(17, np.uint8)
    u = framejit.tensor(raw[1:].view(np.float64))
    assert not u._flags & ALIGNED and u.tolist() == [0.0, 0.0]


@needs_numpy
def test_numpy_unsupported_dtypes():
    for a in [np.array(["a"]), np.array([1], dtype=object), np.array([1], dtype=">f4"),
              np.zeros(2, dtype="M8[s]")]:
        with pytest.raises(TypeError):
            framejit.tensor(a)


@needs_numpy
def test_numpy_scalar_and_0d():
    s = framejit.tensor(np.float32(1.5))
    assert s.dtype == "float32" and s.shape == () and s.item() == 1.5
    assert s._flags & WRITEABLE  # a copy: NumPy scalars are values
    z = np.array(3, dtype=np.int16)
    t = framejit.tensor(z)
    assert t.dtype == "int16" and t.shape == () and t._base is z
    assert t.numpy().shape == () and np.shares_memory(t.numpy(), z)
    assert framejit.tensor([np.float32(1), np.int64(2), np.bool_(True)]).dtype == "float64"
    assert framejit.tensor([np.int8(1), np.uint64(2)]).dtype == "int64"
    assert framejit.tensor([np.arange(2), np.arange(2)]).tolist() == [[0, 1], [0, 1]]
    assert framejit.tensor([np.array(1.5), np.array(2.5)]).tolist() == [1.5, 2.5]


@needs_numpy
def test_array_protocols():
    t = framejit.tensor([[1, 2], [3, 4]], dtype="int32")
    a = t.__array__()
    assert a.dtype == np.int32 and np.shares_memory(a, t.numpy())
    f = t.__array__(np.float64)
    assert f.dtype == np.float64 and not np.shares_memory(f, a)
    c = t.__array__(copy=True)
    assert not np.shares_memory(c, a)
    assert np.shares_memory(t.__array__(dtype="int32", copy=False), a)
    with pytest.raises(ValueError, match="copy"):
        t.__array__(dtype=np.float64, copy=False)
    iface = t.__array_interface__
    assert iface["typestr"] == "<i4" and iface["shape"] == (2, 2) and iface["version"] == 3
    assert iface["data"] == (t.data_ptr(), False) and iface["strides"] is None
    assert np.array(t, dtype=np.float64).tolist() == [[1.0, 2.0], [3.0, 4.0]]


@needs_numpy
def test_array_interface_source():
    class Exporter:
        def __init__(self, arr):
            self.arr = arr
            self.__array_interface__ = arr.__array_interface__

    x = np.arange(6, dtype=np.int16).reshape(2, 3)[:, ::2]
    e = Exporter(x)
    t = framejit.tensor(e)
    assert t._base is e and t.strides == x.strides and t.tolist() == x.tolist()
    assert np.shares_memory(t.numpy(), x)


@needs_numpy
@pytest.mark.parametrize("src", DTYPES[:12])
@pytest.mark.parametrize("dst", DTYPES)
def test_dtype_conversion_matches_numpy(src, dst):
    values = np.array([0, 1, 2, 3, 100, 127, 5, 0], dtype=np.float64)
    if src.startswith("int"):
        values = np.array([0, 1, -1, 3, -100, 127, -128, 5], dtype=np.float64)
    a = values.astype(src).reshape(2, 4)[:, ::-1]  # strided source
    t = framejit.tensor(a, dtype=dst)
    assert t.dtype == dst
    if src == dst:
        assert t._base is a  # no conversion: shared
    else:
        assert t._base is None and t._flags & C_CONTIGUOUS
    np.testing.assert_array_equal(t.numpy(), a.astype(dst))


@needs_numpy
def test_dtype_conversion_edges():
    f = np.array([1.5, -1.5, 1e10, 65519.0, 65520.0, 6e-8, 2.9e-8, -0.0, np.inf, np.nan])
    with np.errstate(all="ignore"):
        check_conversion_edges(f)


def check_conversion_edges(f):
    np.testing.assert_array_equal(framejit.tensor(f, dtype="float16").numpy(), f.astype(np.float16))
    np.testing.assert_array_equal(framejit.tensor(f[:3], dtype="int64").numpy(), f[:3].astype(np.int64))
    np.testing.assert_array_equal(framejit.tensor(f[:3], dtype="uint8").numpy(), f[:3].astype(np.uint8))
    c = np.array([1 + 2j, 0j, 1j], dtype=np.complex64)
    assert framejit.tensor(c, dtype="bool").tolist() == [True, False, True]
    assert framejit.tensor(c, dtype="complex128").tolist() == [1 + 2j, 0j, 1j]
    h = np.array([0.1, 65504, -2.0, 6e-8], dtype=np.float16)
    np.testing.assert_array_equal(framejit.tensor(h, dtype="float64").numpy(), h.astype(np.float64))
    np.testing.assert_array_equal(framejit.tensor(h, dtype="int32").numpy(), h.astype(np.int32))


def test_same_dtype_shares_other_dtype_copies():
    t = framejit.tensor([1.0, 2.0])
    assert framejit.tensor(t) is t
    assert framejit.tensor(t, dtype="float64") is t
    u = framejit.tensor(t, dtype="float32")
    assert u is not t and u.dtype == "float32" and u.tolist() == [1.0, 2.0]
    assert u.data_ptr() != t.data_ptr()


# ---- DLPack ------------------------------------------------------------------------------------


def test_dlpack_device_and_capsules():
    t = framejit.tensor([[1, 2], [3, 4]], dtype="int32")
    assert t.__dlpack_device__() == (1, 0)
    base = sys.getrefcount(t)
    cap = t.__dlpack__()
    assert "dltensor" in repr(cap) and sys.getrefcount(t) == base + 1
    del cap  # never consumed: the capsule's destructor runs the deleter
    assert sys.getrefcount(t) == base
    capv = t.__dlpack__(max_version=(1, 0))
    assert "dltensor_versioned" in repr(capv)
    u = framejit.from_dlpack(capv)
    assert u.tolist() == [[1, 2], [3, 4]] and u.data_ptr() == t.data_ptr()
    assert "used_dltensor_versioned" in repr(capv)
    with pytest.raises(TypeError, match="consumed only once"):
        framejit.from_dlpack(capv)
    del capv
    assert sys.getrefcount(t) == base + 1  # u holds the export
    del u
    gc.collect()
    assert sys.getrefcount(t) == base  # the deleter ran exactly once
    with pytest.raises(ValueError, match="stream"):
        t.__dlpack__(stream=1)
    with pytest.raises(BufferError):
        t.__dlpack__(dl_device=(2, 0))
    assert framejit.from_dlpack(t.__dlpack__(dl_device=(1, 0))).tolist() == [[1, 2], [3, 4]]


def test_dlpack_strided_readonly_and_copy():
    t = framejit.tensor(list(range(12)), dtype="int64")
    v = _C._tensor_view(t, 8 * 11, (3, 2), (-32, -8))  # reversed and strided
    u = framejit.from_dlpack(v)
    assert u.tolist() == v.tolist() == [[11, 10], [7, 6], [3, 2]]
    assert u.strides == v.strides and u.data_ptr() == v.data_ptr()
    ro = framejit.tensor(bytes(4))
    with pytest.raises(BufferError, match="read-only"):
        ro.__dlpack__()
    r = framejit.from_dlpack(ro.__dlpack__(max_version=(1, 0)))
    assert not r._flags & WRITEABLE  # the READ_ONLY flag travels
    c = framejit.from_dlpack(ro.__dlpack__(max_version=(1, 0), copy=True))
    assert c._flags & WRITEABLE and c.data_ptr() != ro.data_ptr()
    d = framejit.from_dlpack(t, copy=True)
    assert d.data_ptr() != t.data_ptr() and d.tolist() == t.tolist()
    odd = _C._tensor_view(framejit.tensor([0] * 4, dtype="int16"), 0, (2,), (3,))
    assert not odd._flags & ALIGNED
    with pytest.raises(BufferError, match="multiple"):
        odd.__dlpack__()


def test_from_dlpack_errors():
    with pytest.raises(TypeError, match="__dlpack__"):
        framejit.from_dlpack([1, 2])

    class OnGpu:
        def __dlpack_device__(self):
            return (2, 0)

        def __dlpack__(self, **kwargs):
            raise AssertionError("must not be exported")

    with pytest.raises(BufferError, match="cpu"):
        framejit.from_dlpack(OnGpu())


def test_dlpack_producer_lifetime():
    """A producer whose only reference is the capsule's: the tensor keeps its memory alive, and
    releasing the tensor runs the producer's deleter once."""
    inner = framejit.tensor([1.5, 2.5, 3.5])
    alive = weakref.ref(inner)

    class Producer:
        def __init__(self, t):
            self.t = t

        def __dlpack_device__(self):
            return self.t.__dlpack_device__()

        def __dlpack__(self, stream=None):  # an old producer: no max_version
            return self.t.__dlpack__()

    u = framejit.tensor(Producer(inner))  # tensor() takes DLPack producers too
    del inner
    gc.collect()
    assert alive() is not None and u.tolist() == [1.5, 2.5, 3.5]
    v = _C._tensor_view(u, 8, (2,), (8,))  # a view shares the import
    del u
    gc.collect()
    assert alive() is not None and v.tolist() == [2.5, 3.5]
    del v
    gc.collect()
    assert alive() is None


@needs_numpy
@pytest.mark.parametrize("dtype", DTYPES)
def test_numpy_from_dlpack(dtype):
    t = framejit.tensor(sample(dtype))
    try:
        a = np.from_dlpack(t)
    except (RuntimeError, BufferError, TypeError):
        assert dtype == "bool"  # DLPack's kDLBool is newer than NumPy 1.24
        return
    assert a.dtype == dtype and np.shares_memory(a, t.numpy())
    back = framejit.from_dlpack(sample(dtype)) if dtype != "bool" else None
    if back is not None:
        assert back.dtype == dtype


@needs_numpy
def test_from_dlpack_numpy_zero_copy_and_lifetime():
    a = np.arange(6, dtype=np.float32).reshape(2, 3)[:, ::2]
    base = sys.getrefcount(a)
    t = framejit.from_dlpack(a)
    assert t.strides == a.strides and np.shares_memory(t.numpy(), a)
    a[0, 0] = 9.0
    assert t.tolist()[0][0] == 9.0
    ref = weakref.ref(a)
    keep = a.tolist()
    del a
    gc.collect()
    assert ref() is not None and t.tolist() == keep  # the tensor keeps the array alive
    arr = ref()
    del t
    gc.collect()
    assert sys.getrefcount(arr) == base  # NumPy's deleter ran once


@needs_torch
@pytest.mark.parametrize("dtype", ["int8", "int16", "int32", "int64", "uint8", "float16", "float32",
                                   "float64", "complex64", "complex128"])
def test_torch_from_dlpack_sees_the_same_memory(dtype):
    t = framejit.tensor(sample(dtype))
    base = sys.getrefcount(t)
    tt = torch.from_dlpack(t)
    assert str(tt.dtype) == "torch." + dtype and tt.data_ptr() == t.data_ptr()
    assert tuple(tt.shape) == t.shape
    tt[1, 2] = 1
    assert t.tolist()[1][2] == 1
    del tt
    gc.collect()
    assert sys.getrefcount(t) == base


@needs_torch
def test_framejit_from_torch_zero_copy():
    x = torch.arange(12, dtype=torch.float32).reshape(3, 4).t()
    t = framejit.from_dlpack(x)
    assert t.data_ptr() == x.data_ptr() and t.shape == (4, 3)
    assert t.strides == tuple(s * 4 for s in x.stride())
    x[0, 0] = 42.0
    assert t.tolist()[0][0] == 42.0
    expected = x.tolist()
    del x
    gc.collect()
    assert t.tolist() == expected  # torch's memory lives as long as the tensor
    u = framejit.tensor(torch.ones(3, dtype=torch.int32))  # tensor() takes torch tensors too
    assert u.dtype == "int32" and u.tolist() == [1, 1, 1]
    # torch refuses to export it: RuntimeError in torch 1.x, BufferError in torch 2.x
    with pytest.raises((RuntimeError, BufferError)):
        framejit.tensor(torch.ones(2, requires_grad=True))


# ---- lifetimes and ownership ---------------------------------------------------------------


def test_views_share_storage_and_privacy():
    t = framejit.tensor(list(range(6)), dtype="float32")
    assert _C._tensor_is_private(t) and t._base is None
    v = _C._tensor_view(t, 4, (2, 2), (12, 4))
    assert v.tolist() == [[1.0, 2.0], [4.0, 5.0]] and v._base is None
    assert not _C._tensor_is_private(t) and not _C._tensor_is_private(v)
    memoryview(v)[0, 0] = -1.0
    assert t.tolist()[1] == -1.0
    ref = weakref.ref(t)
    del t
    gc.collect()
    assert ref() is None  # the view holds the storage, not the parent object
    assert v.tolist() == [[-1.0, 2.0], [4.0, 5.0]]
    assert _C._tensor_is_private(v)
    with pytest.raises(ValueError, match="outside"):
        _C._tensor_view(v, 0, (6,), (4,))


@needs_numpy
def test_numpy_source_outlives_nothing():
    a = np.arange(1000, dtype=np.float64)
    t = framejit.tensor(a)
    assert not _C._tensor_is_private(t)
    del a
    gc.collect()
    assert t.tolist()[-1] == 999.0
    arr = t.numpy()
    ref = weakref.ref(t)
    del t
    gc.collect()
    assert ref() is not None  # the NumPy view keeps the tensor alive
    assert arr[-1] == 999.0
    del arr
    gc.collect()
    assert ref() is None


def test_tensor_dies_releasing_its_buffer():
    data = bytearray(16)
    base = sys.getrefcount(data)
    t = framejit.tensor(data)
    assert sys.getrefcount(data) > base
    ref = weakref.ref(t)
    del t
    gc.collect()
    assert ref() is None and sys.getrefcount(data) == base


def test_pool_memory_is_reused():
    before = framejit.stats()["pool_bytes_in_use"]
    t = _C._tensor_empty((1 << 20,), "float32")
    assert t.shape == (1 << 20,) and t._flags & ALIGNED and t.data_ptr() % 64 == 0
    assert framejit.stats()["pool_bytes_in_use"] >= before + (4 << 20)
    del t
    assert framejit.stats()["pool_bytes_in_use"] == before


# ---- without NumPy -----------------------------------------------------------------------------


def test_import_and_use_without_numpy():
    code = "\n".join([
        "import sys",
        "sys.modules['numpy'] = None",
        "import framejit",
        "t = framejit.tensor([[1, 2], [3, 4]], dtype='float32')",
        "print(repr(t))",
        "assert t.tolist() == [[1.0, 2.0], [3.0, 4.0]]",
        "assert memoryview(t).tolist() == t.tolist()",
        "assert framejit.from_dlpack(t).tolist() == t.tolist()",
        "assert framejit.tensor(b'ab').tolist() == [97, 98]",
        "try:",
        "    t.numpy()",
        "except ImportError as e:",
        "    print('no numpy:', e)",
        "else:",
        "    raise AssertionError('numpy() without NumPy')",
    ])
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert 'framejit.tensor([[1.0, 2.0],' in r.stdout and "no numpy:" in r.stdout
