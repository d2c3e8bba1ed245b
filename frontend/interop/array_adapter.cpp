// array_adapter.cpp — the adapter registry and the helpers every adapter shares.
#include "frontend/interop/array_adapter.h"

#include <algorithm>
#include <array>

namespace framejit::frontend {

const ArrayAdapter& numpy_adapter();  // numpy_array.cpp

namespace {

// Indexed by ArrayKind. Written at module init, under the GIL, before any program runs.
std::array<const ArrayAdapter*, kArrayKinds> g_adapters{nullptr, &numpy_adapter(), nullptr, nullptr, nullptr};

}  // namespace

const ArrayAdapter* array_adapter(ArrayKind kind) { return g_adapters[static_cast<size_t>(kind)]; }

void register_array_adapter(ArrayKind kind, const ArrayAdapter* adapter) {
  g_adapters[static_cast<size_t>(kind)] = adapter;
}

ArrayRunScope::ArrayRunScope() {
  for (const ArrayAdapter* a : g_adapters)
    if (a) a->enter_run();
}

ArrayRunScope::~ArrayRunScope() {
  for (const ArrayAdapter* a : g_adapters)
    if (a) a->exit_run();
}

ArrayFields array_fields(PyObject* o, const ArrayAdapter* first) {
  if (first)
    if (ArrayFields f = first->fields(o); f.ok) return f;
  for (const ArrayAdapter* a : g_adapters) {
    if (!a || a == first) continue;
    if (ArrayFields f = a->fields(o); f.ok) return f;
  }
  return {};
}

OwnedRef permutation_axes(const int* outer_first, int rank) {
  OwnedRef order = OwnedRef::steal(PyTuple_New(rank));
  if (!order) return order;
  for (int i = 0; i < rank; ++i) {
    PyObject* n = PyLong_FromLong(i);
    if (!n) return OwnedRef();
    PyTuple_SET_ITEM(order.get(), outer_first[i], n);  // steals n
  }
  return order;
}

const char* array_kind_name(ArrayKind kind) {
  switch (kind) {
    case ArrayKind::None: return "no arrays";
    case ArrayKind::NumPy: return "NumPy arrays";
    case ArrayKind::Tensor: return "framejit.Tensors";
    case ArrayKind::Torch: return "torch tensors";
    case ArrayKind::CuPy: return "CuPy arrays";
  }
  return "?";
}

bool fields_c_contiguous(const ArrayFields& a) {
  int64_t expected = rt::dtype_itemsize(a.dtype);
  for (int d = a.nd - 1; d >= 0; --d) {
    if (a.dims[d] == 0) return true;
    if (a.dims[d] != 1 && a.strides[d] != expected) return false;
    expected *= a.dims[d];
  }
  return true;
}

jit::StridedLayout layout_of(const ArrayFields& a) {
  jit::StridedLayout l;
  l.data = a.data;
  l.nd = a.nd;
  std::copy(a.dims, a.dims + a.nd, l.dims);
  std::copy(a.strides, a.strides + a.nd, l.strides);
  return l;
}

}  // namespace framejit::frontend
