// test_views.cpp — view remaps (jit/lower/views): slices with Python's clamping rules, negative
// steps and indexes, new axes and Ellipsis, reshape only of contiguous data, broadcast_to, and
// the cases that must give way to NumPy (false).
#include <gtest/gtest.h>

#include <vector>

#include "jit/lower/views.h"

namespace framejit::jit {
namespace {

IntTerm c(int64_t v) { return {IntTerm::Kind::Const, v}; }
IntTerm none() { return {}; }
IndexItem slice(IntTerm a, IntTerm b, IntTerm s) { return {IndexItem::Kind::Slice, a, b, s}; }
IndexItem at(int64_t i) { return {IndexItem::Kind::Int, c(i), {}, {}}; }

// A C-contiguous float32 array of `dims` at address 0x1000.
StridedLayout array(std::vector<int64_t> dims) {
  StridedLayout l;
  l.data = reinterpret_cast<char*>(0x1000);
  l.nd = static_cast<int>(dims.size());
  int64_t s = 4;
  for (int d = l.nd - 1; d >= 0; --d) {
    l.dims[d] = dims[d];
    l.strides[d] = s;
    s *= dims[d];
  }
  return l;
}

bool no_values(int, int64_t&) { return false; }

bool apply(const ViewOp& op, const StridedLayout& in, StridedLayout& out) { return apply_view(op, in, 4, no_values, out); }

TEST(Views, SlicesFollowPythonsRules) {
  // (start, stop, step) on a length-10 axis -> (first element, count), as list(range(10))[s].
  struct Case {
    IntTerm a, b, s;
    int64_t first, count;
  } cases[] = {
      {none(), none(), none(), 0, 10}, {c(2), c(5), none(), 2, 3},  {c(-3), none(), none(), 7, 3},
      {none(), none(), c(-1), 9, 10},  {c(8), c(2), c(-2), 8, 3},   {c(20), c(-20), c(-3), 9, 4},
      {c(-20), c(20), c(4), 0, 3},     {c(5), c(5), none(), 0, 0},  {c(7), c(3), none(), 0, 0},
  };
  for (const Case& k : cases) {
    ViewOp op;
    op.kind = ViewOp::Kind::Index;
    op.index = {slice(k.a, k.b, k.s)};
    StridedLayout out;
    ASSERT_TRUE(apply(op, array({10}), out));
    EXPECT_EQ(out.dims[0], k.count);
    if (k.count) {
      EXPECT_EQ(out.data - reinterpret_cast<char*>(0x1000), 4 * k.first);
    }
    int64_t step = k.s.kind == IntTerm::Kind::None ? 1 : k.s.value;
    EXPECT_EQ(out.strides[0], 4 * step);
  }
  ViewOp zero_step;
  zero_step.kind = ViewOp::Kind::Index;
  zero_step.index = {slice(none(), none(), c(0))};
  StridedLayout out;
  EXPECT_FALSE(apply(zero_step, array({10}), out)) << "ValueError is NumPy's to raise";
}

TEST(Views, IntsNewAxesAndEllipsis) {
  ViewOp op;
  op.kind = ViewOp::Kind::Index;
  op.index = {{IndexItem::Kind::NewAxis, {}, {}, {}}, {IndexItem::Kind::Ellipsis, {}, {}, {}}, at(-1)};
  StridedLayout out;
  ASSERT_TRUE(apply(op, array({3, 4, 5}), out));  // x[None, ..., -1]
  ASSERT_EQ(out.nd, 3);
  EXPECT_EQ(out.dims[0], 1);
  EXPECT_EQ(out.strides[0], 0);
  EXPECT_EQ(out.dims[1], 3);
  EXPECT_EQ(out.dims[2], 4);
  EXPECT_EQ(out.strides[2], 20);
  EXPECT_EQ(out.data - reinterpret_cast<char*>(0x1000), 16);
  op.index = {at(3)};
  EXPECT_FALSE(apply(op, array({3, 4}), out)) << "IndexError is NumPy's to raise";
  op.index = {at(0), at(0), at(0)};
  EXPECT_FALSE(apply(op, array({3, 4}), out)) << "too many indices";
}

TEST(Views, RunTimeValues) {
  ViewOp op;
  op.kind = ViewOp::Kind::Index;
  op.index = {slice(none(), {IntTerm::Kind::Node, 7}, none())};
  StridedLayout out;
  auto value = [](int node, int64_t& v) {
    v = node == 7 ? 4 : 0;
    return node == 7;
  };
  ASSERT_TRUE(apply_view(op, array({9, 2}), 4, value, out));
  EXPECT_EQ(out.dims[0], 4);
}

TEST(Views, ReshapeOnlyOfContiguousData) {
  ViewOp op;
  op.kind = ViewOp::Kind::Reshape;
  op.shape = {c(-1), c(2)};
  StridedLayout out;
  ASSERT_TRUE(apply(op, array({3, 4}), out));
  EXPECT_EQ(out.dims[0], 6);
  EXPECT_EQ(out.strides[0], 8);
  ViewOp t;
  t.kind = ViewOp::Kind::Permute;
  t.perm = {1, 0};
  StridedLayout transposed;
  ASSERT_TRUE(apply(t, array({3, 4}), transposed));
  EXPECT_FALSE(apply(op, transposed, out)) << "NumPy copies a transposed array to reshape it";
  op.shape = {c(5), c(-1)};
  EXPECT_FALSE(apply(op, array({3, 4}), out)) << "12 is not a multiple of 5";
  op.shape = {c(-1), c(-1)};
  EXPECT_FALSE(apply(op, array({3, 4}), out));
}

// Note [Reshape without copying]: a sliced last dim splits without a copy, as in NumPy.
TEST(Views, ReshapeOfAStridedArrayWhereNumPyNeedsNoCopy) {
  ViewOp slice_op;
  slice_op.kind = ViewOp::Kind::Index;
  slice_op.index = {slice(none(), none(), none()), slice(c(256), c(512), none())};
  StridedLayout sliced, out;
  ASSERT_TRUE(apply(slice_op, array({4, 768}), sliced));
  ViewOp op;
  op.kind = ViewOp::Kind::Reshape;
  op.shape = {c(4), c(1), c(8), c(32)};
  ASSERT_TRUE(apply(op, sliced, out));
  EXPECT_EQ(out.data, sliced.data);
  EXPECT_EQ(out.strides[0], 3072);
  EXPECT_EQ(out.strides[2], 128);
  EXPECT_EQ(out.strides[3], 4);
  op.shape = {c(2), c(512)};
  EXPECT_FALSE(apply(op, sliced, out)) << "rows of the slice are not one chain: NumPy copies";
}

TEST(Views, BroadcastTo) {
  ViewOp op;
  op.kind = ViewOp::Kind::BroadcastTo;
  op.shape = {c(2), c(3), c(4)};
  StridedLayout out;
  ASSERT_TRUE(apply(op, array({3, 1}), out));
  EXPECT_EQ(out.strides[0], 0);
  EXPECT_EQ(out.strides[1], 4);
  EXPECT_EQ(out.strides[2], 0);
  EXPECT_FALSE(apply(op, array({2, 4}), out)) << "2 does not broadcast to 3";
}

}  // namespace
}  // namespace framejit::jit
