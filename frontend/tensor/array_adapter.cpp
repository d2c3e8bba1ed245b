// array_adapter.cpp — framejit.Tensor's array adapter (Note [Array adapters]).
#include "frontend/interop/array_adapter.h"
#include "frontend/tensor/object.h"
#include "runtime/faults.h"
#include "runtime/views.h"

namespace framejit::frontend {

namespace {

class TensorAdapter final : public ArrayAdapter {
public:
  ArrayFields fields(PyObject* o) const override {
    ArrayFields f;
    if (!is_tensor(o)) return f;
    TensorObject* t = as_tensor(o);
    f.data = t->data;
    f.nd = t->nd;
    f.dims = t->shape;
    f.strides = t->strides;
    f.dtype = t->dtype;
    f.device = t->device;
    f.ok = true;
    return f;
  }

  PyObject* empty(const int64_t* shape, int rank, rt::DType dtype) const override {  // new ref
    if (rt::fault_active(rt::Fault::Alloc)) return PyErr_NoMemory();
    return tensor_empty(shape, rank, dtype);
  }

  PyObject* empty_on(const int64_t* shape, int rank, rt::DType dtype, rt::Device device) const override {  // new ref
    if (rt::fault_active(rt::Fault::Alloc)) return PyErr_NoMemory();
    return tensor_empty(shape, rank, dtype, device);
  }

  PyObject* permuted_view(PyObject* base, const int* outer_first, int rank) const override {  // new ref
    TensorObject* t = as_tensor(base);
    int64_t shape[rt::kMaxRank], strides[rt::kMaxRank];
    for (int i = 0; i < rank; ++i) {
      shape[outer_first[i]] = t->shape[i];
      strides[outer_first[i]] = t->strides[i];
    }
    return tensor_view(base, t->data, rank, shape, strides);
  }

  bool is_private(PyObject* o) const override {
    return is_tensor(o) && tensor_is_private(o) && (as_tensor(o)->flags & kTensorCContiguous);
  }
};

}  // namespace

void register_tensor_adapter() {
  static const TensorAdapter adapter;
  register_array_adapter(ArrayKind::Tensor, &adapter);
}

}  // namespace framejit::frontend
