// tensor.cpp — framejit::Tensor (include/framejit/tensor.h): shape bookkeeping over borrowed or
// owned memory.
#include "framejit/tensor.h"

#include <stdexcept>

#include "runtime/dtype.h"

namespace framejit {

struct Tensor::Impl {
  void* data = nullptr;
  std::vector<int64_t> shape;
  std::vector<int64_t> strides;  // bytes
  DType dtype = DType::Float32;
  Device device;
  std::shared_ptr<void> owner;  // keeps `data` alive (null: borrowed)
};

int element_size(DType dtype) { return rt::dtype_itemsize(dtype); }

std::string dtype_name(DType dtype) { return std::string(rt::dtype_name(dtype)); }

Tensor Tensor::from_blob(void* data, std::vector<int64_t> shape, DType dtype, std::vector<int64_t> strides,
                         std::shared_ptr<void> owner, Device device) {
  for (int64_t n : shape)
    if (n < 0) throw std::invalid_argument("framejit::Tensor::from_blob: negative size in the shape");
  if (strides.empty()) {
    strides.assign(shape.size(), 0);
    int64_t s = element_size(dtype);
    for (size_t d = shape.size(); d-- > 0;) {
      strides[d] = s;
      s *= shape[d];
    }
  } else if (strides.size() != shape.size()) {
    throw std::invalid_argument("framejit::Tensor::from_blob: " + std::to_string(strides.size()) + " strides for " +
                                std::to_string(shape.size()) + " dimensions");
  }
  auto impl = std::make_shared<Impl>();
  impl->data = data;
  impl->shape = std::move(shape);
  impl->strides = std::move(strides);
  impl->dtype = dtype;
  impl->device = device;
  impl->owner = std::move(owner);
  Tensor t;
  t.impl_ = std::move(impl);
  return t;
}

namespace {
[[noreturn]] void undefined() { throw std::logic_error("framejit::Tensor: use of an undefined tensor"); }
}  // namespace

void* Tensor::data_ptr() const { return impl_ ? impl_->data : (undefined(), nullptr); }
const std::vector<int64_t>& Tensor::shape() const {
  if (!impl_) undefined();
  return impl_->shape;
}
const std::vector<int64_t>& Tensor::strides() const {
  if (!impl_) undefined();
  return impl_->strides;
}
DType Tensor::dtype() const { return impl_ ? impl_->dtype : (undefined(), DType::Float32); }
Device Tensor::device() const { return impl_ ? impl_->device : (undefined(), Device{}); }

int64_t Tensor::numel() const {
  int64_t n = 1;
  for (int64_t d : shape()) n *= d;
  return n;
}

Tensor Tensor::view(void* data, std::vector<int64_t> shape, std::vector<int64_t> strides) const {
  if (!impl_) undefined();
  if (strides.size() != shape.size())
    throw std::invalid_argument("framejit::Tensor::view: " + std::to_string(strides.size()) + " strides for " +
                                std::to_string(shape.size()) + " dimensions");
  return from_blob(data, std::move(shape), impl_->dtype, std::move(strides), impl_->owner, impl_->device);
}

bool Tensor::sole_owner() const {
  return impl_ && impl_->owner && impl_.use_count() == 1 && impl_->owner.use_count() == 1;
}

bool Tensor::is_contiguous() const {
  int64_t expect = element_size(dtype());
  for (size_t d = shape().size(); d-- > 0;) {
    if (shape()[d] != 1 && strides()[d] != expect) return numel() == 0;
    expect *= shape()[d];
  }
  return true;
}

std::string Tensor::to_string() const {
  if (!impl_) return "undefined";
  std::string s = dtype_name(dtype()) + "[";
  for (size_t d = 0; d < shape().size(); ++d) s += (d ? ", " : "") + std::to_string(shape()[d]);
  return s + "]";
}

void Tensor::check_dtype(DType asked) const {
  if (dtype() != asked)
    throw std::invalid_argument("framejit::Tensor::data<" + dtype_name(asked) + ">() on a " + to_string() +
                                " tensor");
}

}  // namespace framejit
