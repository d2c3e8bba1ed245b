// native.cpp — Tensor ops without the JIT or NumPy: float divmod, integer matmul.
#include "frontend/ops/tensor/native.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "frontend/ops/numpy/promotion.h"
#include "frontend/cpython/pyref.h"
#include "frontend/tensor/object.h"
#include "frontend/tensor/object_p.h"
#include "runtime/cuda/memory.h"

namespace framejit::frontend {

// Note [Float divmod without NumPy]
// The JIT has no float floor_divide or remainder: both need fmod's exact remainder, which has no
// vector instruction. Compiled programs run them through NumPy (an extern step), and so do Tensor
// ops where NumPy exists. Where it does not, this element loop computes them with the division
// algorithm NumPy and CPython share: the remainder is fmod's, moved to the divisor's sign, and the
// quotient is (a - remainder) / b snapped to the nearest integer; b == 0 gives a / b and NaN.
// The arithmetic is in the loop dtype (float32 in float32), as NumPy's loops do.

namespace {

template <typename T>
void divmod(T a, T b, T& floordiv, T& mod) {
  mod = std::fmod(a, b);
  if (b == 0) {
    floordiv = a / b;
    return;
  }
  T div = (a - mod) / b;
  if (mod != 0) {
    if ((b < 0) != (mod < 0)) {
      mod += b;
      div -= T(1);
    }
  } else {
    mod = std::copysign(T(0), b);
  }
  if (div != 0) {
    floordiv = std::floor(div);
    if (div - floordiv > T(0.5)) floordiv += T(1);
  } else {
    floordiv = std::copysign(T(0), a / b);
  }
}

// One operand: a tensor's layout, or a Python number as a 0-d value.
struct Operand {
  const char* data = nullptr;
  int nd = 0;
  const int64_t* shape = nullptr;
  const int64_t* strides = nullptr;
  rt::DType dtype = rt::DType::Float64;
  double number = 0;  // a Python number
};

// An element of dtype `t` at `p`, converted to T (integer tensors meet floats in a float64
// loop; integer products accumulate in 64 bits).
template <typename T>
T element_as(const char* p, rt::DType t) {
  switch (t) {
    case rt::DType::Float32: return static_cast<T>(*reinterpret_cast<const float*>(p));
    case rt::DType::Float64: return static_cast<T>(*reinterpret_cast<const double*>(p));
    case rt::DType::Bool: return static_cast<T>(*reinterpret_cast<const bool*>(p));
    case rt::DType::Int8: return static_cast<T>(*reinterpret_cast<const int8_t*>(p));
    case rt::DType::Int16: return static_cast<T>(*reinterpret_cast<const int16_t*>(p));
    case rt::DType::Int32: return static_cast<T>(*reinterpret_cast<const int32_t*>(p));
    case rt::DType::Int64: return static_cast<T>(*reinterpret_cast<const int64_t*>(p));
    case rt::DType::UInt8: return static_cast<T>(*reinterpret_cast<const uint8_t*>(p));
    case rt::DType::UInt16: return static_cast<T>(*reinterpret_cast<const uint16_t*>(p));
    case rt::DType::UInt32: return static_cast<T>(*reinterpret_cast<const uint32_t*>(p));
    case rt::DType::UInt64: return static_cast<T>(*reinterpret_cast<const uint64_t*>(p));
    default: return T(0);  // not reached: the promotion rules refuse float16 and complex
  }
}

template <typename T>
T load(const Operand& o, const char* p) {
  return o.data ? element_as<T>(p, o.dtype) : static_cast<T>(o.number);
}

template <typename T>
void run(const Operand& a, const Operand& b, TensorObject* out, bool floor) {
  const int nd = out->nd;
  std::vector<int64_t> index(nd, 0);
  auto stride = [&](const Operand& o, int d) {  // 0 where o is broadcast along out's dim d
    const int s = d - (nd - o.nd);
    return s < 0 || o.shape[s] == 1 ? int64_t{0} : o.strides[s];
  };
  int64_t total = 1;
  for (int d = 0; d < nd; ++d) total *= out->shape[d];
  T* dst = reinterpret_cast<T*>(out->data);
  for (int64_t e = 0; e < total; ++e) {
    const char* pa = a.data;
    const char* pb = b.data;
    for (int d = 0; d < nd; ++d) {
      if (pa) pa += index[d] * stride(a, d);
      if (pb) pb += index[d] * stride(b, d);
    }
    T q, r;
    divmod<T>(load<T>(a, pa), load<T>(b, pb), q, r);
    dst[e] = floor ? q : r;
    for (int d = nd - 1; d >= 0 && ++index[d] == out->shape[d]; --d) index[d] = 0;
  }
}

// These loops read and write host memory: a device Tensor gets an error, never a host read of a
// device pointer.
bool on_host(const TensorObject* t, const char* what) {
  if (t->device.type == rt::DeviceType::CPU) return true;
  PyErr_Format(PyExc_NotImplementedError, "framejit.Tensor: %s on cuda:%d is not compiled yet", what, t->device.index);
  return false;
}

bool operand_of(PyObject* x, Operand& o, ops::PromoOperand& p) {
  if (is_tensor(x)) {
    TensorObject* t = as_tensor(x);
    if (!on_host(t, "float // and %")) return false;
    o = {t->data, t->nd, t->shape, t->strides, t->dtype, 0};
    p = ops::PromoOperand::tensor(t->dtype);
    return true;
  }
  if (PyFloat_Check(x) || PyLong_Check(x)) {
    o.number = PyFloat_AsDouble(x);
    if (o.number == -1.0 && PyErr_Occurred()) return false;
    p = PyBool_Check(x) ? ops::PromoOperand::py_bool()
        : PyFloat_Check(x) ? ops::PromoOperand::py_float()
                           : ops::PromoOperand::py_int();
    return true;
  }
  PyErr_Format(PyExc_TypeError, "unsupported operand type for // or %%: '%s'", Py_TYPE(x)->tp_name);
  return false;
}

}  // namespace

PyObject* tensor_float_divmod(PyObject* a, PyObject* b, bool floor) {
  Operand oa, ob;
  ops::PromoOperand pa, pb;
  if (!operand_of(a, oa, pa) || !operand_of(b, ob, pb)) return nullptr;
  ops::PromoResult r = ops::elementwise_result(floor ? "floor_divide" : "remainder", {pa, pb});
  if (!r.ok() || (r.dtype != rt::DType::Float32 && r.dtype != rt::DType::Float64)) {
    PyErr_Format(PyExc_NotImplementedError, "framejit.Tensor: %s of these dtypes is not supported without NumPy",
                 floor ? "//" : "%");
    return nullptr;
  }
  // The broadcast shape, with NumPy's error.
  const int nd = std::max(oa.nd, ob.nd);
  std::vector<int64_t> shape(nd, 1);
  for (const Operand* o : {&oa, &ob})
    for (int d = 0; d < o->nd; ++d) {
      int64_t& s = shape[nd - o->nd + d];
      const int64_t n = o->shape[d];
      if (n != 1 && s != 1 && n != s) {
        PyErr_SetString(PyExc_ValueError, "operands could not be broadcast together");
        return nullptr;
      }
      if (n != 1) s = n;
    }
  OwnedRef out = OwnedRef::steal(tensor_empty(shape.data(), nd, r.dtype));
  if (!out) return nullptr;
  if (r.dtype == rt::DType::Float32) run<float>(oa, ob, as_tensor(out.get()), floor);
  else run<double>(oa, ob, as_tensor(out.get()), floor);
  return out.release();
}

namespace {

void store_int(char* p, rt::DType t, uint64_t v) {  // v: the exact sum modulo 2**64
  switch (t) {
    case rt::DType::Bool: *reinterpret_cast<bool*>(p) = v != 0; break;
    case rt::DType::Int8:
    case rt::DType::UInt8: *reinterpret_cast<uint8_t*>(p) = static_cast<uint8_t>(v); break;
    case rt::DType::Int16:
    case rt::DType::UInt16: *reinterpret_cast<uint16_t*>(p) = static_cast<uint16_t>(v); break;
    case rt::DType::Int32:
    case rt::DType::UInt32: *reinterpret_cast<uint32_t*>(p) = static_cast<uint32_t>(v); break;
    default: *reinterpret_cast<uint64_t*>(p) = v; break;
  }
}

}  // namespace

PyObject* tensor_int_matmul(PyObject* a, PyObject* b) {
  if (!is_tensor(a) || !is_tensor(b)) {
    PyErr_SetString(PyExc_TypeError, "matmul: both operands must be framejit.Tensors");
    return nullptr;
  }
  TensorObject* x = as_tensor(a);
  TensorObject* y = as_tensor(b);
  if (!on_host(x, "integer matmul") || !on_host(y, "integer matmul")) return nullptr;
  ops::PromoResult r = ops::matmul_result(x->dtype, y->dtype);
  if (!r.ok() || rt::dtype_is_float(r.dtype) || rt::dtype_is_complex(r.dtype) || x->nd < 1 || x->nd > 2 ||
      y->nd < 1 || y->nd > 2) {
    PyErr_SetString(PyExc_NotImplementedError,
                    "framejit.Tensor: this matmul is not supported without NumPy (integer operands of rank 1 or 2 are)");
    return nullptr;
  }
  // Vectors as matrices: a (k,) on the left is (1, k), on the right (k, 1); those dims drop out.
  const int64_t m = x->nd == 2 ? x->shape[0] : 1, k = x->shape[x->nd - 1];
  const int64_t kb = y->nd == 2 ? y->shape[0] : y->shape[0], n = y->nd == 2 ? y->shape[1] : 1;
  if (k != kb) {
    PyErr_Format(PyExc_ValueError, "matmul: Input operand 1 has a mismatch in its core dimension 0 (size %lld is "
                 "different from %lld)", static_cast<long long>(kb), static_cast<long long>(k));
    return nullptr;
  }
  const int64_t xs_m = x->nd == 2 ? x->strides[0] : 0, xs_k = x->strides[x->nd - 1];
  const int64_t ys_k = y->strides[0], ys_n = y->nd == 2 ? y->strides[1] : 0;
  int64_t shape[2];
  int nd = 0;
  if (x->nd == 2) shape[nd++] = m;
  if (y->nd == 2) shape[nd++] = n;
  OwnedRef out = OwnedRef::steal(tensor_empty(shape, nd, r.dtype));
  if (!out) return nullptr;
  char* dst = as_tensor(out.get())->data;
  const int64_t item = rt::dtype_itemsize(r.dtype);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      uint64_t acc = 0;  // unsigned: NumPy's integer products wrap around
      for (int64_t p = 0; p < k; ++p) {
        const uint64_t u = element_as<uint64_t>(x->data + i * xs_m + p * xs_k, x->dtype);
        const uint64_t v = element_as<uint64_t>(y->data + p * ys_k + j * ys_n, y->dtype);
        acc = r.dtype == rt::DType::Bool ? (acc | (u && v)) : acc + u * v;
      }
      store_int(dst + (i * n + j) * item, r.dtype, acc);
    }
  return out.release();
}

// Note [In-place Tensor operators]
// `t += x` on a framejit.Tensor writes into t's memory, as on an ndarray: every view of t sees the
// new values (a Tensor without __iadd__ would rebind the name and leave them stale, which the
// fuzzer's --device modes found). The result is computed by the ordinary operator (a one-op graph
// on the JIT, into fresh memory, so operands overlapping t are read before anything is written),
// then stored here under NumPy's rules: cast to t's dtype if 'same_kind' allows it, same shape as
// t, t writeable (checked in that order, as NumPy does). Inside compiled code the tracer handles
// `op=` itself (a write into the array).
PyObject* tensor_store_inplace(PyObject* dst, PyObject* result, const char* ufunc) {
  if (!is_tensor(dst) || !is_tensor(result)) {
    PyErr_SetString(PyExc_TypeError, "in-place operator: both operands must be framejit.Tensors");
    return nullptr;
  }
  TensorObject* d = as_tensor(dst);
  TensorObject* r = as_tensor(result);
  auto shape_text = [](const TensorObject* t) {
    std::string s = "(";
    for (int i = 0; i < t->nd; ++i) s += (i ? "," : "") + std::to_string(t->shape[i]);
    return s + (t->nd == 1 ? ",)" : ")");
  };
  // NumPy resolves the output's casting before it broadcasts: the dtype error comes first.
  if (!ops::can_cast_same_kind(r->dtype, d->dtype)) {
    PyErr_Format(PyExc_TypeError, "Cannot cast ufunc '%s' output from dtype('%s') to dtype('%s') with casting rule 'same_kind'",
                 ufunc, std::string(rt::dtype_name(r->dtype)).c_str(), std::string(rt::dtype_name(d->dtype)).c_str());
    return nullptr;
  }
  if (r->nd != d->nd || !std::equal(d->shape, d->shape + d->nd, r->shape)) {
    PyErr_Format(PyExc_ValueError, "non-broadcastable output operand with shape %s doesn't match the broadcast shape %s",
                 shape_text(d).c_str(), shape_text(r).c_str());
    return nullptr;
  }
  if (!(d->flags & kTensorWriteable)) {
    PyErr_SetString(PyExc_ValueError, "output array is read-only");
    return nullptr;
  }
  int64_t n = 1;
  for (int i = 0; i < d->nd; ++i) n *= d->shape[i];
  const int64_t item = rt::dtype_itemsize(d->dtype);
  if (d->device.type != rt::DeviceType::CPU) {
    if (!(d->flags & kTensorCContiguous) || d->dtype != r->dtype || !(r->flags & kTensorCContiguous)) {
      PyErr_Format(PyExc_NotImplementedError,
                   "framejit.Tensor: in-place %s into a strided or differently typed tensor on cuda:%d is not compiled yet",
                   ufunc, d->device.index);
      return nullptr;
    }
    Status s = rt::cuda::copy_on_device(d->device.index, d->data, r->data, static_cast<size_t>(n * item));
    if (!s) {
      PyErr_Format(PyExc_RuntimeError, "framejit: %s", s.message().c_str());
      return nullptr;
    }
    return Py_NewRef(dst);
  }
  if (d->flags & kTensorCContiguous) {
    tensor_detail::copy_convert(r->data, r->dtype, r->nd, r->shape, r->strides, d->data, d->dtype);
    return Py_NewRef(dst);
  }
  // A strided target: the result converted into C order, then stored element by element.
  std::vector<char> converted(static_cast<size_t>(n * item));
  tensor_detail::copy_convert(r->data, r->dtype, r->nd, r->shape, r->strides, converted.data(), d->dtype);
  std::vector<int64_t> index(static_cast<size_t>(d->nd), 0);
  for (int64_t e = 0; e < n; ++e) {
    char* at = d->data;
    for (int i = 0; i < d->nd; ++i) at += index[static_cast<size_t>(i)] * d->strides[i];
    std::memcpy(at, converted.data() + e * item, static_cast<size_t>(item));
    for (int i = d->nd - 1; i >= 0 && ++index[static_cast<size_t>(i)] == d->shape[i]; --i) index[static_cast<size_t>(i)] = 0;
  }
  return Py_NewRef(dst);
}

}  // namespace framejit::frontend
