// views.cpp — framejit.Tensor views and copies (Note [Tensor views]).
#include "frontend/tensor/views.h"
#include "runtime/cuda/memory.h"

#include <string>

#include "frontend/interop/array_adapter.h"
#include "frontend/cpython/pyref.h"
#include "frontend/tensor/object.h"
#include "jit/lower/views.h"

namespace framejit::frontend {

namespace {

PyObject* view_of(PyObject* t, const jit::ViewOp& op) {  // new ref, or null without an error set
  const ArrayFields src = array_fields(t);
  jit::StridedLayout out;
  auto values = [](int, int64_t&) { return false; };  // views here only hold constants
  if (!jit::apply_view(op, layout_of(src), rt::dtype_itemsize(src.dtype), values, out)) return nullptr;
  return tensor_view(t, out.data, out.nd, out.dims, out.strides);
}

jit::IntTerm const_term(int64_t v) { return {jit::IntTerm::Kind::Const, v}; }
jit::IntTerm none_term() { return {jit::IntTerm::Kind::None, 0}; }

bool check_tensor(PyObject* t) {
  if (is_tensor(t)) return true;
  PyErr_Format(PyExc_TypeError, "expected a framejit.Tensor, got %s", Py_TYPE(t)->tp_name);
  return false;
}

bool normalize_axis(int64_t& axis, int nd) {
  if (axis < -nd || axis >= nd) {
    PyErr_Format(PyExc_IndexError, "axis %lld is out of bounds for array of dimension %d",
                 static_cast<long long>(axis), nd);
    return false;
  }
  if (axis < 0) axis += nd;
  return true;
}

// One index item of t[key], or false with NumPy's error set.
bool index_item(PyObject* k, jit::IndexItem& it) {
  if (k == Py_None) {
    it.kind = jit::IndexItem::Kind::NewAxis;
    return true;
  }
  if (k == Py_Ellipsis) {
    it.kind = jit::IndexItem::Kind::Ellipsis;
    return true;
  }
  if (PySlice_Check(k)) {
    auto* s = reinterpret_cast<PySliceObject*>(k);
    it.kind = jit::IndexItem::Kind::Slice;
    jit::IntTerm* parts[3] = {&it.start, &it.stop, &it.step};
    PyObject* objs[3] = {s->start, s->stop, s->step};
    for (int i = 0; i < 3; ++i) {
      if (objs[i] == Py_None) {
        *parts[i] = none_term();
        continue;
      }
      Py_ssize_t v = PyNumber_AsSsize_t(objs[i], nullptr);  // clamped, as Python's slices are
      if (v == -1 && PyErr_Occurred()) {
        PyErr_Clear();
        PyErr_SetString(PyExc_IndexError,
                        "only integers, slices (`:`), ellipsis (`...`) and None are valid indices");
        return false;
      }
      *parts[i] = const_term(v);
    }
    if (it.step.kind == jit::IntTerm::Kind::Const && it.step.value == 0) {
      PyErr_SetString(PyExc_ValueError, "slice step cannot be zero");
      return false;
    }
    return true;
  }
  if (PyBool_Check(k) || !PyIndex_Check(k)) {
    PyErr_SetString(PyExc_IndexError,
                    "framejit.Tensor supports basic indexing only: integers, slices (`:`), ellipsis (`...`) "
                    "and None");
    return false;
  }
  Py_ssize_t v = PyNumber_AsSsize_t(k, PyExc_IndexError);
  if (v == -1 && PyErr_Occurred()) return false;
  it.kind = jit::IndexItem::Kind::Int;
  it.start = const_term(v);
  return true;
}

}  // namespace

PyObject* tensor_permute(PyObject* t, std::vector<int64_t> perm) {
  if (!check_tensor(t)) return nullptr;
  const int nd = as_tensor(t)->nd;
  if (perm.empty())
    for (int d = nd - 1; d >= 0; --d) perm.push_back(d);
  if (static_cast<int>(perm.size()) != nd) {
    PyErr_SetString(PyExc_ValueError, "axes don't match array");
    return nullptr;
  }
  jit::ViewOp op;
  op.kind = jit::ViewOp::Kind::Permute;
  std::vector<bool> seen(nd, false);
  for (int64_t a : perm) {
    if (!normalize_axis(a, nd)) return nullptr;
    if (seen[a]) {
      PyErr_SetString(PyExc_ValueError, "repeated axis in transpose");
      return nullptr;
    }
    seen[a] = true;
    op.perm.push_back(static_cast<int>(a));
  }
  return view_of(t, op);
}

PyObject* tensor_swapaxes(PyObject* t, int64_t a, int64_t b) {
  if (!check_tensor(t)) return nullptr;
  const int nd = as_tensor(t)->nd;
  if (!normalize_axis(a, nd) || !normalize_axis(b, nd)) return nullptr;
  std::vector<int64_t> perm;
  for (int d = 0; d < nd; ++d) perm.push_back(d);
  std::swap(perm[a], perm[b]);
  return tensor_permute(t, perm);
}

PyObject* tensor_copy(PyObject* t) {
  if (!check_tensor(t)) return nullptr;
  const TensorObject* tt = as_tensor(t);
  if (tt->device.type != rt::DeviceType::CPU) {
    // On a device: one device-to-device copy when C-ordered; else (a strided view, rare) through
    // a C-ordered host copy, never a host read of device memory.
    if (!(tt->flags & kTensorCContiguous)) {
      OwnedRef host = OwnedRef::steal(tensor_to_device(t, rt::Device{}));
      return host ? tensor_to_device(host.get(), tt->device) : nullptr;
    }
    OwnedRef out = OwnedRef::steal(tensor_empty(tt->shape, tt->nd, tt->dtype, tt->device));
    if (!out) return nullptr;
    int64_t bytes = rt::dtype_itemsize(tt->dtype);
    for (int d = 0; d < tt->nd; ++d) bytes *= tt->shape[d];
    Status s = rt::cuda::copy_on_device(tt->device.index, as_tensor(out.get())->data, tt->data, static_cast<size_t>(bytes));
    if (!s) {
      PyErr_Format(PyExc_RuntimeError, "framejit: %s", s.message().c_str());
      return nullptr;
    }
    return out.release();
  }
  const ArrayFields src = array_fields(t);
  OwnedRef out = OwnedRef::steal(tensor_empty(src.dims, src.nd, src.dtype));
  if (!out) return nullptr;
  rt::copy_to_c_order(layout_of(src), rt::dtype_itemsize(src.dtype), as_tensor(out.get())->data);
  return out.release();
}

PyObject* tensor_reshape(PyObject* t, const std::vector<int64_t>& shape) {
  if (!check_tensor(t)) return nullptr;
  TensorObject* src = as_tensor(t);
  int64_t total = 1, known = 1;
  int infer = 0;
  for (int d = 0; d < src->nd; ++d) total *= src->shape[d];
  for (int64_t n : shape) {
    if (n == -1) {
      ++infer;
    } else if (n < 0) {
      PyErr_SetString(PyExc_ValueError, "negative dimensions not allowed");
      return nullptr;
    } else {
      known *= n;
    }
  }
  auto shape_text = [&] {
    std::string s = "(";
    for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
    return s + (shape.size() == 1 ? ",)" : ")");
  };
  if (infer > 1) {
    PyErr_SetString(PyExc_ValueError, "can only specify one unknown dimension");
    return nullptr;
  }
  if (shape.size() > static_cast<size_t>(jit::kMaxViewRank) ||
      (infer ? known == 0 || total % known != 0 : known != total)) {
    PyErr_Format(PyExc_ValueError, "cannot reshape array of size %lld into shape %s", static_cast<long long>(total),
                 shape_text().c_str());
    return nullptr;
  }
  jit::ViewOp op;
  op.kind = jit::ViewOp::Kind::Reshape;
  for (int64_t n : shape) op.shape.push_back(const_term(n));
  if (PyObject* v = view_of(t, op)) return v;
  if (PyErr_Occurred()) return nullptr;
  // The strides cannot express it: reshape a C-ordered copy, as NumPy does.
  OwnedRef copy = OwnedRef::steal(tensor_copy(t));
  if (!copy) return nullptr;
  PyObject* v = view_of(copy.get(), op);
  if (!v && !PyErr_Occurred()) PyErr_SetString(PyExc_RuntimeError, "framejit: internal error in reshape");
  return v;
}

PyObject* tensor_getitem(PyObject* t, PyObject* key) {
  if (!check_tensor(t)) return nullptr;
  TensorObject* src = as_tensor(t);
  jit::ViewOp op;
  op.kind = jit::ViewOp::Kind::Index;
  const bool tuple = PyTuple_Check(key);
  const Py_ssize_t n = tuple ? PyTuple_GET_SIZE(key) : 1;
  int consumed = 0, ellipses = 0;
  for (Py_ssize_t i = 0; i < n; ++i) {
    jit::IndexItem it;
    if (!index_item(tuple ? PyTuple_GET_ITEM(key, i) : key, it)) return nullptr;
    if (it.kind == jit::IndexItem::Kind::Ellipsis && ++ellipses > 1) {
      PyErr_SetString(PyExc_IndexError, "an index can only have a single ellipsis ('...')");
      return nullptr;
    }
    if (it.kind == jit::IndexItem::Kind::Int || it.kind == jit::IndexItem::Kind::Slice) ++consumed;
    op.index.push_back(it);
  }
  if (consumed > src->nd) {
    PyErr_Format(PyExc_IndexError, "too many indices for array: array is %d-dimensional, but %d were indexed",
                 src->nd, consumed);
    return nullptr;
  }
  // Integer indices out of range: NumPy's message, naming the axis.
  int dim = 0;
  for (size_t i = 0; i < op.index.size(); ++i) {
    const jit::IndexItem& it = op.index[i];
    if (it.kind == jit::IndexItem::Kind::Ellipsis) {
      dim += src->nd - consumed;
      continue;
    }
    if (it.kind == jit::IndexItem::Kind::NewAxis) continue;
    if (it.kind == jit::IndexItem::Kind::Int) {
      const int64_t size = src->shape[dim], v = it.start.value;
      if (v < -size || v >= size) {
        PyErr_Format(PyExc_IndexError, "index %lld is out of bounds for axis %d with size %lld",
                     static_cast<long long>(v), dim, static_cast<long long>(size));
        return nullptr;
      }
    }
    ++dim;
  }
  PyObject* v = view_of(t, op);
  if (!v && !PyErr_Occurred()) PyErr_SetString(PyExc_IndexError, "framejit.Tensor: invalid index");
  return v;
}

}  // namespace framejit::frontend
