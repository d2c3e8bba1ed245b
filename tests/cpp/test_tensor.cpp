// test_tensor.cpp — framejit::Tensor ownership: views share the owner, and sole_owner() says when
// nothing else keeps the memory alive (what framejit.Tensor's output-buffer reuse relies on).
#include <gtest/gtest.h>

#include <memory>
#include <stdexcept>
#include <vector>

#include "framejit/tensor.h"

namespace framejit {
namespace {

TEST(Tensor, ViewSharesTheOwner) {
  int freed = 0;
  auto* data = new float[6]{0, 1, 2, 3, 4, 5};
  std::shared_ptr<void> owner(data, [&](void* p) {
    delete[] static_cast<float*>(p);
    ++freed;
  });
  Tensor t = Tensor::from_blob(data, {2, 3}, DType::Float32, {}, std::move(owner));
  EXPECT_TRUE(t.sole_owner());
  {
    Tensor v = t.view(data + 1, {2}, {12});  // column 1
    EXPECT_EQ(v.strides(), (std::vector<int64_t>{12}));
    EXPECT_EQ(v.data<float>()[0], 1.0f);
    EXPECT_FALSE(t.sole_owner());
    EXPECT_FALSE(v.sole_owner());
    t = Tensor();  // the view alone keeps the memory
    EXPECT_EQ(freed, 0);
    EXPECT_TRUE(v.sole_owner());
    Tensor copy = v;  // a copy shares the same tensor, so neither is alone
    EXPECT_FALSE(v.sole_owner());
  }
  EXPECT_EQ(freed, 1);
}

TEST(Tensor, BorrowedMemoryHasNoSoleOwner) {
  double x[4] = {};
  Tensor t = Tensor::from_blob(x, {4}, DType::Float64);
  EXPECT_FALSE(t.sole_owner());
  EXPECT_FALSE(t.view(x, {2}, {16}).sole_owner());
  EXPECT_THROW(t.view(x, {2, 2}, {8}), std::invalid_argument);
  EXPECT_FALSE(Tensor().sole_owner());
  EXPECT_THROW(Tensor().view(x, {1}, {8}), std::logic_error);
}

}  // namespace
}  // namespace framejit
