// test_cuda_launch.cpp — the CUDA launchers' host side, which CI runs without a GPU: division by
// run-time sizes, how a fused row chain's launch is planned from bound parts, and which product
// operands cuBLAS reads in place.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "runtime/cuda/gemm.h"
#include "runtime/cuda/launch.h"
#include "runtime/cuda/reduction.h"
#include "runtime/cuda/row_chain.h"

namespace framejit::rt::cuda {
namespace {

// Note [Division by a run-time size]: the multiply and shift give x / d for every dividend a
// kernel divides (below 2^31), at the edges and at random.
TEST(CudaLaunch, FastDivisionIsExactBelow2To31) {
  using framejit::rt::cuda::fast_div;
  std::mt19937 rng(3);
  std::uniform_int_distribution<uint32_t> any_x(0, 0x7FFFFFFFu);
  auto check = [](uint32_t d, uint32_t x) {
    const auto f = fast_div(d);
    const uint32_t q = static_cast<uint32_t>((uint64_t{x} * f.magic) >> f.shift);
    ASSERT_EQ(q, x / d) << x << " / " << d;
  };
  std::vector<uint32_t> divisors = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 12, 100, 127, 128, 129, 255, 256, 1000, 4095, 4096,
                                    65535, 65536, 65537, 1u << 30, (1u << 30) + 1, 0x7FFFFFFFu, 0x80000000u};
  for (int i = 0; i < 2000; ++i) divisors.push_back(1 + any_x(rng) % (i % 2 ? 1000 : 0x7FFFFFFF));
  for (uint32_t d : divisors) {
    for (uint32_t x : {0u, 1u, d - 1, d, d + 1, 2 * d - 1, 0x7FFFFFFFu, 0x7FFFFFFEu}) check(d, x & 0x7FFFFFFFu);
    for (int k = 0; k < 200; ++k) check(d, any_x(rng));
    const uint32_t top = 0x7FFFFFFFu / d * d;  // the largest multiple below 2^31 and its neighbour
    check(d, top);
    if (top) check(d, top - 1);
  }
}


// A bound part of a chain over (rows, n): operands with their byte strides over both dims.
struct Part {
  bool reduction = false;
  int64_t shape[2];
  std::vector<Operand> ops;
  std::vector<std::vector<int64_t>> strides;
  std::vector<bool> forwarded_v;
  std::vector<int> cached;
  bool fwd[kMaxKernelOperands] = {};
  int64_t out_strides[2] = {4, 0};
  char* out = reinterpret_cast<char*>(0x900000);
  int num_inputs = 0;

  Part(bool red, int64_t rows, int64_t n) : reduction(red), shape{rows, n} {}
  // An input: the row array at `base` (4-byte elements, rows of `n`), or a per-row value.
  Part& input(uint64_t base, bool per_row, bool forwarded, int cache) {
    strides.push_back(per_row ? std::vector<int64_t>{4, 0} : std::vector<int64_t>{shape[1] * 4, 4});
    fwd[ops.size()] = forwarded;
    ops.push_back(Operand{reinterpret_cast<char*>(base), nullptr, 4});
    cached.push_back(cache);
    ++num_inputs;
    return *this;
  }
  Part& output(uint64_t base) {
    strides.push_back({shape[1] * 4, 4});
    ops.push_back(Operand{reinterpret_cast<char*>(base), nullptr, 4});
    return *this;
  }
  RowChainPart bound() {
    for (size_t k = 0; k < ops.size(); ++k) ops[k].strides = strides[k].data();
    RowChainPart p;
    p.reduction = reduction;
    p.rank = 2;
    p.shape = shape;
    p.num_inputs = num_inputs;
    p.num_operands = static_cast<int>(ops.size());
    p.operands = ops.data();
    p.out = out;
    p.out_strides = out_strides;
    p.divisor = shape[1];
    p.forwarded = fwd;
    p.cached = cached.data();
    return p;
  }
};

// softmax over rows of n: max(x); sum(exp(x - m)); exp(x - m) / s.
std::vector<Part> softmax(int64_t rows, int64_t n, uint64_t x) {
  std::vector<Part> p;
  p.emplace_back(true, rows, n);
  p.back().input(x, false, false, 0);
  p.emplace_back(true, rows, n);
  p.back().input(x, false, false, 0).input(0x900000, true, true, -1);
  p.emplace_back(false, rows, n);
  p.back().input(x, false, false, 0).input(0x900000, true, true, -1).input(0xA00000, true, true, -1).output(0xB00000);
  return p;
}

Status plan(std::vector<Part>& parts, RowChainLaunch& l) {
  std::vector<RowChainPart> bound;
  for (Part& p : parts) bound.push_back(p.bound());
  return plan_row_chain(bound.data(), static_cast<int>(bound.size()), l);
}

TEST(CudaRowChain, SoftmaxRowsAreVectorizedAndCached) {
  std::vector<Part> parts = softmax(64, 8192, 0x100000);
  RowChainLaunch l;
  ASSERT_TRUE(plan(parts, l));
  EXPECT_EQ(l.args.rows, 64u);
  EXPECT_EQ(l.args.lanes_log2, 8u) << "a block per row of 8192";
  EXPECT_EQ(l.tiles, 64);
  for (int j = 0; j < 3; ++j) {
    EXPECT_EQ(l.args.n[j], 8192u);
    EXPECT_EQ(l.args.nvec[j], 2048u) << j;
  }
  EXPECT_EQ(l.args.cache_on, 1u);
  EXPECT_EQ(l.args.cache_n[0], 8192u);
  EXPECT_EQ(l.args.cache_chunks[0], 2048u);
  EXPECT_EQ(l.shared, 8192u * 4);
  // Slots part by part: inputs, then a reduction's result or a kernel's outputs.
  const uint64_t want[] = {0x100000, 0x900000, 0x100000, 0x900000, 0x900000, 0x100000, 0x900000, 0xA00000, 0xB00000};
  for (int s = 0; s < 9; ++s) EXPECT_EQ(l.args.ptr[s], want[s]) << s;
  EXPECT_EQ(l.args.inner[0], 4);
  EXPECT_EQ(l.args.lead_stride[0][0], 8192 * 4);
  EXPECT_EQ(l.args.inner[6], 0) << "a forwarded input is broadcast along the row";
}

TEST(CudaRowChain, LongUnalignedAndShortRows) {
  RowChainLaunch l;
  // 16384 floats a row: 64 KiB of cache per block is more than a launch asks for as is.
  std::vector<Part> long_rows = softmax(8, 16384, 0x100000);
  ASSERT_TRUE(plan(long_rows, l));
  EXPECT_EQ(l.args.cache_on, 0u);
  EXPECT_EQ(l.shared, 0u);
  EXPECT_EQ(l.args.nvec[0], 4096u);
  // Rows not 16-byte aligned: element accesses, and the cache copies elements one by one.
  std::vector<Part> unaligned = softmax(8, 1000, 0x100004);
  ASSERT_TRUE(plan(unaligned, l));
  EXPECT_EQ(l.args.nvec[0], 0u);
  EXPECT_EQ(l.args.nvec[2], 0u);
  EXPECT_EQ(l.args.cache_on, 1u);
  EXPECT_EQ(l.args.cache_chunks[0], 0u);
  EXPECT_EQ(l.args.lanes_log2, 5u) << "a warp per row of 1000";
  // Attention's rows of 512: a warp each, 8 rows a block, no barrier.
  std::vector<Part> attention = softmax(65536, 512, 0x100000);
  ASSERT_TRUE(plan(attention, l));
  EXPECT_EQ(l.args.lanes_log2, 5u);
  EXPECT_EQ(l.tiles, 65536 / 8);
  EXPECT_EQ(l.shared, 8u * 512 * 4);
  // Rows of 7: one lane per row, 256 rows a block.
  std::vector<Part> short_rows = softmax(1000, 7, 0x100000);
  ASSERT_TRUE(plan(short_rows, l));
  EXPECT_EQ(l.args.lanes_log2, 0u);
  EXPECT_EQ(l.tiles, 4);
  EXPECT_EQ(l.shared, 256u * 32) << "7 floats rounded to 32 bytes per group";
}

TEST(CudaRowChain, LayoutsTheKernelCannotTakeAreDeclined) {
  RowChainLaunch l;
  // A forwarded input that varies along the row.
  std::vector<Part> varies = softmax(8, 64, 0x100000);
  varies[1].strides[1] = {256, 4};
  EXPECT_EQ(plan(varies, l).code(), StatusCode::Unsupported);
  // Parts over different rows.
  std::vector<Part> rows = softmax(8, 64, 0x100000);
  rows[2].shape[0] = 9;
  EXPECT_EQ(plan(rows, l).code(), StatusCode::Unsupported);
  // No rows: nothing to launch.
  std::vector<Part> none = softmax(0, 64, 0x100000);
  ASSERT_TRUE(plan(none, l));
  EXPECT_EQ(l.tiles, 0);
}

// Note [CUDA reduction kernel ABI]: lanes by row length, splits only when outputs are too few to
// fill the device (132 SMs here), partials combined by enough lanes.
TEST(CudaReduction, LanesAndSplitsFollowTheShape) {
  EXPECT_EQ(reduce_shape(300, 7, true, 132).lanes, 1);
  EXPECT_EQ(reduce_shape(130, 100, true, 132).lanes, 16);
  EXPECT_EQ(reduce_shape(40, 5000, true, 132).lanes, kReduceBlock);
  EXPECT_EQ(reduce_shape(8192, 8192, true, 132).splits, 1) << "rows enough to fill the device";
  // One row of 2^20: a block per slice of 8192, 128 slices, combined by 16 lanes.
  const ReduceShape all = reduce_shape(1, 1 << 20, true, 132);
  EXPECT_EQ(all.lanes, kReduceBlock);
  EXPECT_EQ(all.splits, 128);
  EXPECT_EQ(all.chunk, 8192);
  EXPECT_EQ(all.combine_lanes, 16);
  EXPECT_EQ(all.splits * all.chunk, 1 << 20);
  // Columns: a thread per output; three tall columns are split into slices of 32 rows.
  EXPECT_EQ(reduce_shape(2000, 300, false, 132).lanes, 1);
  const ReduceShape tall = reduce_shape(3, 200000, false, 132);
  EXPECT_EQ(tall.lanes, 1);
  EXPECT_EQ(tall.chunk, 32);
  EXPECT_EQ(tall.splits, 6250);
  EXPECT_EQ(tall.combine_lanes, kReduceBlock);
  // Nothing to reduce: one slice, and each output gets the identity.
  const ReduceShape none = reduce_shape(4, 0, true, 132);
  EXPECT_EQ(none.splits, 1);
  EXPECT_EQ(none.chunk, 1);
  // Every element in exactly one slice, whatever the split.
  for (int64_t count : {1, 63, 64, 65, 4095, 100003, 1 << 22})
    for (int64_t outputs : {1, 3, 1000}) {
      const ReduceShape sh = reduce_shape(outputs, count, outputs == 3, 132);
      EXPECT_GE(sh.splits * sh.chunk, count);
      EXPECT_LT((sh.splits - 1) * sh.chunk, count);
    }
}

}  // namespace
}  // namespace framejit::rt::cuda

namespace framejit::rt::cuda {
namespace {

// Note [Device GEMMs]: which operands cuBLAS reads in place (one unit stride, the other at least
// the extent along it; a size-1 dim's stride is free) and which are packed first.
TEST(CudaGemm, OperandsWithAUnitStrideAreReadInPlace) {
  EXPECT_TRUE(blas_layout(33, 70, 70, 1));     // C order
  EXPECT_TRUE(blas_layout(33, 70, 1, 33));     // Fortran order: a transposed view
  EXPECT_TRUE(blas_layout(33, 70, 128, 1));    // rows of a wider array
  EXPECT_TRUE(blas_layout(33, 70, 1, 40));     // columns of a taller one
  EXPECT_TRUE(blas_layout(1, 70, 0, 1));       // one row: its stride is free
  EXPECT_TRUE(blas_layout(1, 70, 5, 3));       // one strided row: read transposed, ld 3
  EXPECT_TRUE(blas_layout(33, 1, 2, 9));       // one strided column
  EXPECT_TRUE(blas_layout(1, 1, 0, 0));        // one element
  EXPECT_FALSE(blas_layout(33, 70, 140, 2));   // every other column
  EXPECT_FALSE(blas_layout(33, 70, 69, 1));    // rows overlapping
  EXPECT_FALSE(blas_layout(33, 70, 1, 32));    // columns overlapping
  EXPECT_FALSE(blas_layout(33, 70, -70, 1));   // reversed rows
  EXPECT_FALSE(blas_layout(33, 70, 0, 1));     // one row broadcast
  EXPECT_FALSE(blas_layout(33, 1, 0, 1));      // one element broadcast down a column
  EXPECT_FALSE(blas_layout(1, 70, 0, -1));     // a reversed row
}

}  // namespace
}  // namespace framejit::rt::cuda
