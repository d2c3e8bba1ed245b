// test_graph.cpp — Note [Replayed launches] on a GPU: a run's launches and memsets recorded and
// issued as one graph launch; later runs patch pointers, grids and values into the same graph;
// unrecordable work flushes what was recorded first, in order; frees wait for the replay.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "jit/cuda/backend.h"
#include "runtime/cuda/graph.h"
#include "runtime/cuda/launch.h"
#include "runtime/cuda/memory.h"
#include "runtime/executor.h"
#include "tests/gpu/gpu_test_util.h"

namespace framejit::rt::cuda {
namespace {

using jit::PointwiseKernelIR;
using jit::ScalarOp;

// out = a + b, float32.
KernelPtr add_kernel() {
  PointwiseKernelIR ir;
  ir.input_dtypes = {DType::Float32, DType::Float32};
  ir.body = {{ScalarOp::Load, DType::Float32, -1, -1, 0, 0},
             {ScalarOp::Load, DType::Float32, -1, -1, 1, 0},
             {ScalarOp::Add, DType::Float32, 0, 1, -1, 0}};
  ir.outputs = {2};
  ir.output_dtypes = {DType::Float32};
  auto k = jit::cuda::backend(0).compile(ir);
  EXPECT_TRUE(k) << k.error().message();
  return k ? std::move(*k) : nullptr;
}

struct Block {
  void* p = nullptr;
  explicit Block(size_t bytes) {
    auto b = device_alloc(0, bytes);
    EXPECT_TRUE(b) << b.error().message();
    if (b) p = *b;
  }
  ~Block() { device_free(p); }
  char* data() const { return static_cast<char*>(p); }
};

std::vector<float> download(const Block& b, int64_t n) {
  std::vector<float> v(n);
  EXPECT_TRUE(copy_to_host(0, v.data(), b.p, n * sizeof(float)));
  return v;
}

// Runs out = a + b over n elements, and fills `mark` with `value`, inside one recorded run.
Status add_and_mark(GraphCache& cache, const Kernel& k, const Block& a, const Block& b, const Block& out,
                    const Block& mark, int64_t n, float value, bool* active) {
  auto st = stream(0);
  if (!st) return st.error();
  GraphRun run(cache, 0, *st);
  *active = run.active();
  uint32_t bits;
  std::memcpy(&bits, &value, 4);
  FJ_PROPAGATE(fill_on_device(0, mark.p, bits, 4, 16));
  const int64_t stride[1] = {4};
  Operand ops[3] = {{a.data(), stride, 4}, {b.data(), stride, 4}, {out.data(), stride, 4}};
  FJ_PROPAGATE(cuda::run_pointwise(k, 1, &n, 3, ops, nullptr, 0));
  return run.finish();
}

TEST(CudaGraphs, LaterRunsPatchPointersGridsAndValues) {
  REQUIRE_GPU();
  KernelPtr k = add_kernel();
  ASSERT_TRUE(k);
  GraphCache cache;
  const GraphStats before = graph_stats();
  std::vector<std::unique_ptr<Block>> held;  // every run's buffers stay: each run's pointers are new
  auto fresh = [&](size_t bytes) -> const Block& { return *held.emplace_back(std::make_unique<Block>(bytes)); };
  for (int r = 0; r < 6; ++r) {
    const int64_t n = r < 3 ? 1000 : 70000;  // a new size: a new grid in the same node
    std::vector<float> ha(n), hb(n);
    for (int64_t i = 0; i < n; ++i) ha[i] = float(i) * 0.5f + r, hb[i] = float(r) - float(i);
    const Block &a = fresh(n * 4), &b = fresh(n * 4), &out = fresh(n * 4), &mark = fresh(64);
    ASSERT_TRUE(copy_to_device(0, a.p, ha.data(), n * 4));
    ASSERT_TRUE(copy_to_device(0, b.p, hb.data(), n * 4));
    bool active = false;
    Status s = add_and_mark(cache, *k, a, b, out, mark, n, 1.5f * r, &active);
    ASSERT_TRUE(s) << s.message();
    EXPECT_TRUE(active);
    const std::vector<float> got = download(out, n), m = download(mark, 16);
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(got[i], ha[i] + hb[i]) << "run " << r << " at " << i;
    for (float v : m) ASSERT_EQ(v, 1.5f * r) << "run " << r;
  }
  const GraphStats after = graph_stats();
  EXPECT_EQ(after.built - before.built, 1);  // one shape of work: one graph, patched five times
  EXPECT_EQ(after.replays - before.replays, 6);
  EXPECT_GE(after.patched_nodes - before.patched_nodes, 10);  // the kernel and the memset, each run
}

TEST(CudaGraphs, UnrecordedWorkFlushesInOrder) {
  REQUIRE_GPU();
  KernelPtr k = add_kernel();
  ASSERT_TRUE(k);
  GraphCache cache;
  auto st = stream(0);
  ASSERT_TRUE(st);
  constexpr int64_t n = 4096;
  std::vector<float> ha(n, 2.0f), hb(n, 3.0f);
  Block a(n * 4), b(n * 4), out(n * 4), out2(n * 4);
  ASSERT_TRUE(copy_to_device(0, a.p, ha.data(), n * 4));
  ASSERT_TRUE(copy_to_device(0, b.p, hb.data(), n * 4));
  const GraphStats before = graph_stats();
  const int64_t stride[1] = {4};
  {
    GraphRun run(cache, 0, *st);
    ASSERT_TRUE(run.active());
    EXPECT_TRUE(recording());
    Operand ops[3] = {{a.data(), stride, 4}, {b.data(), stride, 4}, {out.data(), stride, 4}};
    ASSERT_TRUE(cuda::run_pointwise(*k, 1, &n, 3, ops, nullptr, 0));
    // The host reads what the recorded kernel writes: it is issued first.
    std::vector<float> mid(n);
    ASSERT_TRUE(copy_to_host(0, mid.data(), out.p, n * 4));
    for (float v : mid) ASSERT_EQ(v, 5.0f);
    EXPECT_FALSE(recording());  // the rest of the run issues directly
    Operand ops2[3] = {{out.data(), stride, 4}, {b.data(), stride, 4}, {out2.data(), stride, 4}};
    ASSERT_TRUE(cuda::run_pointwise(*k, 1, &n, 3, ops2, nullptr, 0));
    ASSERT_TRUE(run.finish());
  }
  for (float v : download(out2, n)) ASSERT_EQ(v, 8.0f);
  // A run that nests inside a recording one: the outer one's work is flushed, the inner one
  // records nothing.
  {
    GraphRun outer(cache, 0, *st);
    ASSERT_TRUE(outer.active());
    GraphCache other;
    GraphRun inner(other, 0, *st);
    EXPECT_FALSE(inner.active());
    EXPECT_FALSE(recording());
    ASSERT_TRUE(inner.finish());
    ASSERT_TRUE(outer.finish());
  }
  const GraphStats after = graph_stats();
  EXPECT_EQ(after.flushed - before.flushed, 2);
  EXPECT_EQ(after.replays - before.replays, 0);
}

TEST(CudaGraphs, FreesWaitForTheReplay) {
  REQUIRE_GPU();
  GraphCache cache;
  auto st = stream(0);
  ASSERT_TRUE(st);
  GraphRun run(cache, 0, *st);
  ASSERT_TRUE(run.active());
  auto first = device_alloc(0, 1 << 16);
  ASSERT_TRUE(first);
  ASSERT_TRUE(fill_on_device(0, *first, 0, 1, 1 << 16));  // a recorded node writes it
  device_free(*first);
  auto second = device_alloc(0, 1 << 16);  // the same size class: not the block the node writes
  ASSERT_TRUE(second);
  EXPECT_NE(*first, *second);
  ASSERT_TRUE(run.finish());
  device_free(*second);
  auto third = device_alloc(0, 1 << 16);  // both are back in the cache now
  ASSERT_TRUE(third);
  EXPECT_TRUE(*third == *first || *third == *second);
  device_free(*third);
}

TEST(CudaGraphs, SmallUploadsAreValuesInTheGraph) {
  REQUIRE_GPU();
  GraphCache cache;
  auto st = stream(0);
  ASSERT_TRUE(st);
  Block b(64);
  const GraphStats before = graph_stats();
  for (double v : {1.5, -2.25, 1e300, 3.0}) {
    GraphRun run(cache, 0, *st);
    ASSERT_TRUE(run.active());
    ASSERT_TRUE(copy_to_device(0, b.p, &v, 8));  // recorded as two 4-byte memsets of its halves
    const float f = static_cast<float>(v == 1e300 ? 7.0 : v);
    ASSERT_TRUE(copy_to_device(0, b.data() + 8, &f, 4));
    ASSERT_TRUE(run.finish());
    double got = 0;
    float got_f = 0;
    ASSERT_TRUE(copy_to_host(0, &got, b.p, 8));
    ASSERT_TRUE(copy_to_host(0, &got_f, b.data() + 8, 4));
    EXPECT_EQ(got, v);
    EXPECT_EQ(got_f, f);
  }
  EXPECT_EQ(graph_stats().built - before.built, 1);
}

}  // namespace
}  // namespace framejit::rt::cuda
