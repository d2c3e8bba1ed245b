// test_program.cpp — graphs compiled by jit::compile_graph for the x86 backend and run by the
// runtime's executor on plain C++ buffers: no Python anywhere (this file is part of the static
// framejit_codegen_tests binary, which does not link libpython).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "jit/pipeline.h"
#include "jit/x86/backend.h"
#include "runtime/program.h"

namespace framejit::jit {
namespace {

// An array the host owns: C-ordered, 64-byte aligned, with its own dims and strides.
struct Buffer {
  std::vector<int64_t> dims, strides;
  DType dtype = DType::Float32;
  char* data = nullptr;
  int refs = 1;
  ~Buffer() { std::free(data); }
};

// A RunHost without any interpreter: arrays are Buffers, numbers are plain values, and nothing
// can run as an extern step (the graphs here must compile whole).
class CppHost final : public rt::RunHost {
public:
  int live = 0;  // Buffers not yet released: every run must bring it back to the outputs
  std::string error;
  bool failed = false;
  rt::RunError last = rt::RunError::NotComputed;

  bool alloc(rt::Value& out, DType dtype, int rank, const int64_t* shape, const int* outer_first) override {
    auto* b = new Buffer;
    b->dtype = dtype;
    b->dims.assign(shape, shape + rank);
    b->strides.assign(rank, 0);
    // Memory runs through the axes in outer_first order (C order when null).
    int64_t stride = rt::dtype_itemsize(dtype), total = 1;
    for (int i = rank - 1; i >= 0; --i) {
      const int axis = outer_first ? outer_first[i] : i;
      b->strides[axis] = stride;
      stride *= shape[axis];
      total *= shape[axis];
    }
    b->data = static_cast<char*>(std::aligned_alloc(64, ((total * rt::dtype_itemsize(dtype)) / 64 + 1) * 64));
    ++live;
    out = view(b);
    return true;
  }
  bool is_private(const rt::Value& v) override {
    auto* b = static_cast<Buffer*>(v.handle);
    return b && b->refs == 1;
  }
  void retain(const rt::Value& v) override {
    if (v.handle) ++static_cast<Buffer*>(v.handle)->refs;
  }
  void release(rt::Value& v) override {
    auto* b = static_cast<Buffer*>(v.handle);
    v.handle = nullptr;
    if (b && --b->refs == 0) {
      delete b;
      --live;
    }
  }
  bool run_extern(int node, rt::Value*) override {
    error = "extern step for node " + std::to_string(node);
    return false;
  }
  bool to_scalar(rt::Value&) override { return true; }  // C++ callers take 0-d arrays
  bool read_number(const rt::Value&, bool, rt::ParamValue&) override { return false; }
  void fail(rt::RunError e, int64_t detail) override {
    failed = true;
    last = e;
    error = "run error " + std::to_string(static_cast<int>(e)) + " (" + std::to_string(detail) + ")";
  }

  static rt::Value view(Buffer* b) {
    rt::Value v;
    v.kind = rt::Value::Kind::Array;
    v.dtype = b->dtype;
    v.nd = static_cast<int>(b->dims.size());
    v.data = b->data;
    v.dims = b->dims.data();
    v.strides = b->strides.data();
    v.handle = b;
    return v;
  }
};

// A canonical call node as frontend/ops would decide it (this binary has no frontend): float32
// operands meet in float32.
int call(Graph& g, OpKind op, std::vector<Arg> args, TensorMeta meta, OpAttrs at = {}) {
  if (is_pointwise(op) && at.loop_dtypes.empty()) at.loop_dtypes.assign(args.size(), DType::Float32);
  return g.add_call(op, std::move(at), std::string(op_name(op)), std::move(args), {}, std::move(meta));
}

OpAttrs axis_attrs(std::vector<int> axes, bool keepdims) {
  OpAttrs at;
  at.all_axes = false;
  at.axes = std::move(axes);
  at.keepdims = keepdims;
  return at;
}

TensorMeta f32(std::vector<SymInt> shape) {
  TensorMeta m;
  m.dtype = DType::Float32;
  m.shape = std::move(shape);
  return m;
}

rt::Value input(CppHost& host, std::vector<int64_t> shape, const std::vector<float>& data) {
  rt::Value v;
  host.alloc(v, DType::Float32, static_cast<int>(shape.size()), shape.data(), nullptr);
  std::memcpy(v.data, data.data(), data.size() * sizeof(float));
  return v;
}

const float* floats(const rt::Value& v) { return reinterpret_cast<const float*>(v.data); }

// Runs `graph` (compiled for x86) on `inputs`; returns the values, outputs set.
std::vector<rt::Value> run(const Graph& graph, CppHost& host, const std::vector<rt::Value>& inputs,
                           CompiledGraph* keep = nullptr) {
  auto compiled = compile_graph(graph, x86::backend());
  EXPECT_TRUE(compiled.has_value()) << (compiled ? "" : compiled.error().message());
  if (!compiled) return {};
  const rt::Program& p = compiled->program;
  EXPECT_EQ(p.extern_steps, 0) << compiled->plan.to_string(graph);
  std::vector<rt::Value> vals(p.num_values);
  for (size_t i = 0; i < inputs.size(); ++i) vals[p.inputs[i]] = inputs[i];
  EXPECT_TRUE(rt::run_program(p, vals.data(), host)) << host.error;
  if (keep) *keep = std::move(*compiled);
  return vals;
}

void release_all(CppHost& host, std::vector<rt::Value>& vals) {
  for (rt::Value& v : vals) host.release(v);
  EXPECT_EQ(host.live, 0);
}

TEST(Program, PointwiseChainRunsWithoutPython) {
  // tanh(x * y + 1) over (3, 5) float32: one fused kernel, one output.
  Graph g;
  int x = g.add_placeholder("x", f32({SymInt::symbol(0), 5}));
  int y = g.add_placeholder("y", f32({SymInt::symbol(0), 5}));
  g.add_symbol(x, 0, 3);
  int mul = call(g, OpKind::Mul, {Arg::node(x), Arg::node(y)}, f32({SymInt::symbol(0), 5}));
  int add = call(g, OpKind::Add, {Arg::node(mul), Arg::real(1.0)}, f32({SymInt::symbol(0), 5}));
  int th = call(g, OpKind::Tanh, {Arg::node(add)}, f32({SymInt::symbol(0), 5}));
  g.set_output({Arg::node(th)});
  ASSERT_TRUE(g.verify());

  CppHost host;
  std::vector<float> xs(15), ys(15);
  for (int i = 0; i < 15; ++i) {
    xs[i] = 0.1f * static_cast<float>(i) - 0.7f;
    ys[i] = 0.05f * static_cast<float>(15 - i);
  }
  std::vector<rt::Value> vals = run(g, host, {input(host, {3, 5}, xs), input(host, {3, 5}, ys)});
  ASSERT_EQ(vals[th].nd, 2);
  EXPECT_EQ(vals[th].dims[0], 3);
  for (int i = 0; i < 15; ++i) EXPECT_NEAR(floats(vals[th])[i], std::tanh(xs[i] * ys[i] + 1.0f), 2e-6f) << i;
  // Intermediates were released as they died; inputs and the output remain.
  EXPECT_EQ(vals[mul].kind, rt::Value::Kind::Empty);
  release_all(host, vals);
}

TEST(Program, SoftmaxChainAndFoldedTransposeRunWithoutPython) {
  // softmax over the last axis of x.T, x of shape (6, 4): a chain of reductions and kernels that
  // reads x through a folded transpose (no transposed copy exists).
  Graph g;
  int x = g.add_placeholder("x", f32({6, 4}));
  int xt = call(g, OpKind::Transpose, {Arg::node(x)}, f32({4, 6}), [] {
    OpAttrs at;
    at.perm = {1, 0};
    return at;
  }());
  int mx = call(g, OpKind::Max, {Arg::node(xt)}, f32({4, 1}), axis_attrs({1}, true));
  int sub = call(g, OpKind::Sub, {Arg::node(xt), Arg::node(mx)}, f32({4, 6}));
  int ex = call(g, OpKind::Exp, {Arg::node(sub)}, f32({4, 6}));
  int sm = call(g, OpKind::Sum, {Arg::node(ex)}, f32({4, 1}), axis_attrs({1}, true));
  int div = call(g, OpKind::Div, {Arg::node(ex), Arg::node(sm)}, f32({4, 6}));
  g.set_output({Arg::node(div)});
  ASSERT_TRUE(g.verify());

  CppHost host;
  std::vector<float> xs(24);
  for (int i = 0; i < 24; ++i) xs[i] = std::sin(0.37f * static_cast<float>(i));
  CompiledGraph compiled;
  std::vector<rt::Value> vals = run(g, host, {input(host, {6, 4}, xs)}, &compiled);
  EXPECT_GE(compiled.program.view_of[xt], 0) << "the transpose is folded into its readers";
  for (int r = 0; r < 4; ++r) {
    double m = -1e30, s = 0;
    for (int c = 0; c < 6; ++c) m = std::max<double>(m, xs[c * 4 + r]);
    for (int c = 0; c < 6; ++c) s += std::exp(xs[c * 4 + r] - m);
    for (int c = 0; c < 6; ++c) {
      const float* out = floats(vals[div]);
      const int64_t* st = vals[div].strides;
      const float got = out[(r * st[0] + c * st[1]) / 4];
      EXPECT_NEAR(got, std::exp(xs[c * 4 + r] - m) / s, 1e-6) << r << "," << c;
    }
  }
  release_all(host, vals);
}

// A backend that fuses row chains the way a device backend does (Note [Row chains on a device]),
// with the x86 backend's kernels for the parts: what the scheduler gives the fused kernel can be
// checked without a GPU. The program is inspected, not run.
class RowChainRecorder final : public Backend {
public:
  std::string_view name() const override { return "row-chain recorder"; }
  bool supports(const PointwiseKernelIR& ir) const override { return x86::backend().supports(ir); }
  bool supports(const ReductionKernelIR& ir) const override { return x86::backend().supports(ir); }
  rt::GemmFn gemm(DType t) const override { return x86::backend().gemm(t); }
  Expected<KernelArtifact> compile(const PointwiseKernelIR& ir) override { return x86::backend().compile(ir); }
  Expected<ReductionArtifact> compile(const ReductionKernelIR& ir) override { return x86::backend().compile(ir); }
  bool fuses_row_chains() const override { return true; }
  bool stores_reduction_operands() const override { return false; }
  Expected<KernelArtifact> compile(const RowChainIR& chain) override {
    chains.push_back(chain);
    return KernelArtifact(std::make_shared<rt::Kernel>());
  }
  std::vector<RowChainIR> chains;
};

TEST(Program, RowChainsForwardReductionsAndCacheRereadInputs) {
  // softmax(x) as one row-chain kernel: the reductions' results reach later parts directly, and x,
  // which every part reads, gets a row cache.
  Graph g;
  int x = g.add_placeholder("x", f32({4, 6}));
  int mx = call(g, OpKind::Max, {Arg::node(x)}, f32({4, 1}), axis_attrs({1}, true));
  int sub = call(g, OpKind::Sub, {Arg::node(x), Arg::node(mx)}, f32({4, 6}));
  int ex = call(g, OpKind::Exp, {Arg::node(sub)}, f32({4, 6}));
  int sm = call(g, OpKind::Sum, {Arg::node(ex)}, f32({4, 1}), axis_attrs({1}, true));
  int div = call(g, OpKind::Div, {Arg::node(ex), Arg::node(sm)}, f32({4, 6}));
  g.set_output({Arg::node(div)});
  ASSERT_TRUE(g.verify());

  RowChainRecorder backend;
  auto compiled = compile_graph(g, backend);
  ASSERT_TRUE(compiled) << compiled.error().message();
  ASSERT_EQ(backend.chains.size(), 1u) << compiled->plan.to_string(g);
  const RowChainIR& c = backend.chains[0];
  ASSERT_EQ(c.parts.size(), 3u) << c.to_string();
  EXPECT_TRUE(c.parts[0].reduction && c.parts[1].reduction && !c.parts[2].reduction);
  EXPECT_FALSE(c.parts[1].red.store_value) << "a device recomputes exp instead of storing it";
  // The sum reads max's result from part 0; the division reads both results from their parts.
  auto forwards = [](const RowChainIR::Part& p, int from) {
    return std::count(p.forwarded.begin(), p.forwarded.end(), from);
  };
  EXPECT_EQ(forwards(c.parts[1], 0), 1) << c.to_string();
  EXPECT_EQ(forwards(c.parts[2], 0), 1) << c.to_string();
  EXPECT_EQ(forwards(c.parts[2], 1), 1) << c.to_string();
  // x: one row cache, read by every part.
  EXPECT_EQ(c.caches, 1) << c.to_string();
  for (const RowChainIR::Part& p : c.parts) EXPECT_EQ(std::count(p.cached.begin(), p.cached.end(), 0), 1) << c.to_string();
  // The program's chain step carries the same choices for the launcher.
  int chains = 0;
  for (const rt::Step& s : compiled->program.steps) {
    if (s.kind != rt::Step::Kind::Chain) continue;
    ++chains;
    EXPECT_TRUE(s.chain().fused);
    ASSERT_EQ(s.chain().forwarded.size(), 3u);
    EXPECT_EQ(s.chain().forwarded[2], c.parts[2].forwarded);
    EXPECT_EQ(s.chain().cached[1], c.parts[1].cached);
  }
  EXPECT_EQ(chains, 1);

  // Five arrays each read by the sum and the division: the first four get row caches, the chain
  // is fused all the same.
  Graph h;
  std::vector<int> xs;
  for (int i = 0; i < 5; ++i) xs.push_back(h.add_placeholder("x" + std::to_string(i), f32({4, 6})));
  int acc = xs[0];
  for (int i = 1; i < 5; ++i) acc = call(h, OpKind::Add, {Arg::node(acc), Arg::node(xs[i])}, f32({4, 6}));
  int hs = call(h, OpKind::Sum, {Arg::node(acc)}, f32({4, 1}), axis_attrs({1}, true));
  int hd = call(h, OpKind::Div, {Arg::node(acc), Arg::node(hs)}, f32({4, 6}));
  h.set_output({Arg::node(hd)});
  ASSERT_TRUE(h.verify());
  RowChainRecorder five;
  auto fused5 = compile_graph(h, five);
  ASSERT_TRUE(fused5) << fused5.error().message();
  ASSERT_EQ(five.chains.size(), 1u) << fused5->plan.to_string(h);
  EXPECT_EQ(five.chains[0].caches, RowChainIR::kMaxRowCaches) << five.chains[0].to_string();
  bool fused_step = false;
  for (const rt::Step& st : fused5->program.steps) fused_step = fused_step || (st.kind == rt::Step::Kind::Chain && st.chain().fused);
  EXPECT_TRUE(fused_step);

  // The x86 backend blocks rows of separate kernels instead: no fused kernel.
  auto x86 = compile_graph(g, x86::backend());
  ASSERT_TRUE(x86);
  for (const rt::Step& st : x86->program.steps)
    if (st.kind == rt::Step::Kind::Chain) EXPECT_FALSE(st.chain().fused);
}

TEST(Program, GemmWithEpilogueAndVarianceRunWithoutPython) {
  // relu(a @ b + bias) through the backend's GEMM with the bias/activation as its epilogue, and
  // the variance of a's rows (var's mean temporary is a program value of its own).
  Graph g;
  int a = g.add_placeholder("a", f32({8, 16}));
  int b = g.add_placeholder("b", f32({16, 12}));
  int bias = g.add_placeholder("bias", f32({12}));
  int mm = call(g, OpKind::Matmul, {Arg::node(a), Arg::node(b)}, f32({8, 12}));
  int add = call(g, OpKind::Add, {Arg::node(mm), Arg::node(bias)}, f32({8, 12}));
  int relu = call(g, OpKind::Maximum, {Arg::node(add), Arg::real(0.0)}, f32({8, 12}));
  int var = call(g, OpKind::Var, {Arg::node(a)}, f32({8}), axis_attrs({1}, false));
  g.set_output({Arg::node(relu), Arg::node(var)});
  ASSERT_TRUE(g.verify());

  CppHost host;
  std::vector<float> as(8 * 16), bs(16 * 12), bias_v(12);
  for (size_t i = 0; i < as.size(); ++i) as[i] = std::cos(0.11f * static_cast<float>(i));
  for (size_t i = 0; i < bs.size(); ++i) bs[i] = std::sin(0.07f * static_cast<float>(i));
  for (size_t i = 0; i < bias_v.size(); ++i) bias_v[i] = 0.1f * static_cast<float>(i) - 0.5f;
  CompiledGraph compiled;
  std::vector<rt::Value> vals = run(
      g, host, {input(host, {8, 16}, as), input(host, {16, 12}, bs), input(host, {12}, bias_v)}, &compiled);
  EXPECT_EQ(compiled.plan.gemms.size(), 1u);
  ASSERT_EQ(compiled.plan.gemm_epilogue.size(), 1u);
  EXPECT_GE(compiled.plan.gemm_epilogue[0], 0) << "bias + relu run inside the GEMM";
  for (int i = 0; i < 8; ++i) {
    for (int j = 0; j < 12; ++j) {
      double s = bias_v[j];
      for (int k = 0; k < 16; ++k) s += static_cast<double>(as[i * 16 + k]) * bs[k * 12 + j];
      EXPECT_NEAR(floats(vals[relu])[i * 12 + j], std::max(s, 0.0), 1e-4) << i << "," << j;
    }
    double mean = 0, v = 0;
    for (int k = 0; k < 16; ++k) mean += as[i * 16 + k] / 16.0;
    for (int k = 0; k < 16; ++k) v += (as[i * 16 + k] - mean) * (as[i * 16 + k] - mean) / 16.0;
    EXPECT_NEAR(floats(vals[var])[i], v, 1e-4) << i;
  }
  release_all(host, vals);
}

TEST(Program, ErrorsReachTheHostAndNothingLeaks) {
  // Shapes that do not broadcast at run time (guards would refuse them; the executor must still
  // fail cleanly): the host hears of it and every value can be released.
  Graph g;
  int x = g.add_placeholder("x", f32({SymInt::symbol(0)}));
  int y = g.add_placeholder("y", f32({SymInt::symbol(1)}));
  g.add_symbol(x, 0, 4);
  g.add_symbol(y, 0, 4);
  int add = call(g, OpKind::Add, {Arg::node(x), Arg::node(y)}, f32({SymInt::symbol(0)}));
  g.set_output({Arg::node(add)});
  auto compiled = compile_graph(g, x86::backend());
  ASSERT_TRUE(compiled.has_value());
  CppHost host;
  std::vector<rt::Value> vals(compiled->program.num_values);
  vals[compiled->program.inputs[0]] = input(host, {4}, {1, 2, 3, 4});
  vals[compiled->program.inputs[1]] = input(host, {3}, {1, 2, 3});
  EXPECT_FALSE(rt::run_program(compiled->program, vals.data(), host));
  EXPECT_TRUE(host.failed);
  EXPECT_EQ(host.last, rt::RunError::Broadcast);
  release_all(host, vals);
}

// ----- Lowered writes (Note [Lowered writes] in jit/schedule/program.cpp) ------------------------

namespace writes {

IndexSpecItem int_item(int64_t i) { return {IndexSpecItem::Kind::Int, {Arg::integer(i)}}; }
IndexSpecItem slice_item(Arg start, Arg stop, Arg step) { return {IndexSpecItem::Kind::Slice, {start, stop, step}}; }

// base with base[key] = value, as frontend/ops decodes framejit._C._index_put.
int index_put(Graph& g, int base, std::vector<IndexSpecItem> index, Arg key, Arg value) {
  OpAttrs at;
  at.index = std::move(index);
  TensorMeta m = g.node(base).meta;
  m.layout = Layout::Contiguous;
  return g.add_call(OpKind::IndexPut, std::move(at), "framejit._C._index_put", {Arg::node(base), std::move(key), std::move(value)},
                    {}, m);
}

int copy_into(Graph& g, int input, int final_value) {
  return g.add_call(OpKind::CopyInto, {}, "framejit._C._copy_into", {Arg::node(input), Arg::node(final_value)},
                    {{"after", Arg::tuple({Arg::node(final_value)})}}, g.node(input).meta);
}

const rt::StoreStep& store_step(const rt::Program& p, int node) {
  for (const rt::Step& s : p.steps)
    if (s.kind == rt::Step::Kind::Store && s.node == node) return s.store();
  ADD_FAILURE() << "no store step for node " << node;
  static rt::StoreStep none;
  return none;
}

}  // namespace writes

TEST(Program, WriteIntoWrittenInputRunsInPlaceAndItsCopyBackWritesNothing) {
  // x[1] = a + 1; x[2, ::-1] = 7.5, then copy_into(x, final): both writes go into x's own memory,
  // the add runs inside the first store, and the copy back finds the final value already there.
  using namespace writes;
  Graph g;
  int x = g.add_placeholder("x", f32({4, 3}));
  int a = g.add_placeholder("a", f32({3}));
  int add = call(g, OpKind::Add, {Arg::node(a), Arg::real(1.0)}, f32({3}));
  int w1 = index_put(g, x, {int_item(1)}, Arg::integer(1), Arg::node(add));
  int w2 = index_put(g, w1, {int_item(2), slice_item(Arg::none(), Arg::none(), Arg::integer(-1))},
                     Arg::tuple({Arg::integer(2), Arg::slice(Arg::none(), Arg::none(), Arg::integer(-1))}), Arg::real(7.5));
  int back = copy_into(g, x, w2);
  g.set_output({});
  ASSERT_TRUE(g.verify());

  CppHost host;
  std::vector<float> xs(12), as{0.5f, -2.0f, 3.0f};
  for (int i = 0; i < 12; ++i) xs[i] = static_cast<float>(i);
  rt::Value xin = input(host, {4, 3}, xs);
  host.retain(xin);  // the caller's reference: x is never private to the run
  const char* memory = xin.data;
  CompiledGraph compiled;
  std::vector<rt::Value> vals = run(g, host, {xin, input(host, {3}, as)}, &compiled);
  ASSERT_EQ(compiled.plan.stores.size(), 3u) << compiled.plan.to_string(g);
  EXPECT_TRUE(compiled.plan.groups.empty()) << compiled.plan.to_string(g);
  EXPECT_EQ(compiled.plan.stores[0].kernel.nodes, std::vector<int>{add});
  EXPECT_EQ(store_step(compiled.program, w1).memory, rt::StoreStep::Memory::Always);
  EXPECT_EQ(store_step(compiled.program, w2).memory, rt::StoreStep::Memory::Always);
  EXPECT_EQ(vals[back].data, memory);
  std::vector<float> want = xs;
  for (int j = 0; j < 3; ++j) want[3 + j] = as[j] + 1.0f, want[6 + j] = 7.5f;
  for (int i = 0; i < 12; ++i) EXPECT_EQ(reinterpret_cast<const float*>(memory)[i], want[i]) << i;
  host.release(xin);
  release_all(host, vals);
}

TEST(Program, WriteIntoABaseReadLaterWritesACopy) {
  // y = -x; w = y with w[:, 1] = 2; z = y + w: y's old contents are read after the write.
  using namespace writes;
  Graph g;
  int x = g.add_placeholder("x", f32({2, 3}));
  int y = call(g, OpKind::Neg, {Arg::node(x)}, f32({2, 3}));
  int w = index_put(g, y, {slice_item(Arg::none(), Arg::none(), Arg::none()), int_item(1)},
                    Arg::tuple({Arg::slice(Arg::none(), Arg::none(), Arg::none()), Arg::integer(1)}), Arg::integer(2));
  int z = call(g, OpKind::Add, {Arg::node(y), Arg::node(w)}, f32({2, 3}));
  g.set_output({Arg::node(z), Arg::node(w)});
  ASSERT_TRUE(g.verify());
  CppHost host;
  std::vector<float> xs{1, 2, 3, 4, 5, 6};
  CompiledGraph compiled;
  std::vector<rt::Value> vals = run(g, host, {input(host, {2, 3}, xs)}, &compiled);
  EXPECT_EQ(store_step(compiled.program, w).memory, rt::StoreStep::Memory::Copy);
  for (int i = 0; i < 6; ++i) {
    const float wi = i % 3 == 1 ? 2.0f : -xs[i];
    EXPECT_EQ(floats(vals[w])[i], wi) << i;
    EXPECT_EQ(floats(vals[z])[i], -xs[i] + wi) << i;
  }
  release_all(host, vals);
}

TEST(Program, WriteIntoADyingPrivateArrayReusesItUnlessTheValueOverlapsIt) {
  // y = -x; y[1:] = y[:-1] (overlapping: NumPy's result is a shift, so it goes to a copy);
  // then w2 = w1 with w2[::-2] = b (int32 into float32, broadcast from shape (1,)): in place.
  using namespace writes;
  Graph g;
  int x = g.add_placeholder("x", f32({6}));
  TensorMeta i32 = f32({1});
  i32.dtype = DType::Int32;
  int b = g.add_placeholder("b", i32);
  int y = call(g, OpKind::Neg, {Arg::node(x)}, f32({6}));
  OpAttrs head;
  head.index = {writes::slice_item(Arg::none(), Arg::integer(-1), Arg::none())};
  int shifted = g.add_call(OpKind::GetItem, head, "getitem", {Arg::node(y), Arg::slice(Arg::none(), Arg::integer(-1), Arg::none())},
                           {}, f32({5}));
  int w1 = index_put(g, y, {slice_item(Arg::integer(1), Arg::none(), Arg::none())},
                     Arg::slice(Arg::integer(1), Arg::none(), Arg::none()), Arg::node(shifted));
  int w2 = index_put(g, w1, {slice_item(Arg::none(), Arg::none(), Arg::integer(-2))},
                     Arg::slice(Arg::none(), Arg::none(), Arg::integer(-2)), Arg::node(b));
  g.set_output({Arg::node(w2)});
  ASSERT_TRUE(g.verify());
  CppHost host;
  std::vector<float> xs{1, 2, 3, 4, 5, 6};
  rt::Value bin;
  const int64_t one = 1;
  host.alloc(bin, DType::Int32, 1, &one, nullptr);
  *reinterpret_cast<int32_t*>(bin.data) = -9;
  CompiledGraph compiled;
  std::vector<rt::Value> vals = run(g, host, {input(host, {6}, xs), bin}, &compiled);
  EXPECT_EQ(store_step(compiled.program, w1).memory, rt::StoreStep::Memory::IfPrivate);
  EXPECT_EQ(store_step(compiled.program, w2).memory, rt::StoreStep::Memory::IfPrivate);
  const std::vector<float> want{-1, -9, -2, -9, -4, -9};
  for (int i = 0; i < 6; ++i) EXPECT_EQ(floats(vals[w2])[i], want[i]) << i;
  release_all(host, vals);
}

TEST(Program, WriteWithARunTimeIndexOutOfRangeGoesToTheHost) {
  // x[i] = 1 with i a run-time int past the end: the region does not apply, so the host runs the
  // library's call (which raises there); nothing is written.
  using namespace writes;
  Graph g;
  int x = g.add_placeholder("x", f32({3}));
  TensorMeta im;
  im.kind = ValueKind::Scalar;
  im.dtype = DType::Int64;
  int i = g.add_placeholder("i", im);
  int y = call(g, OpKind::Neg, {Arg::node(x)}, f32({3}));
  int w = index_put(g, y, {{IndexSpecItem::Kind::Int, {Arg::node(i)}}}, Arg::node(i), Arg::real(1.0));
  g.set_output({Arg::node(w)});
  auto compiled = compile_graph(g, x86::backend());
  ASSERT_TRUE(compiled.has_value());
  CppHost host;
  auto run_with = [&](int64_t index, std::vector<rt::Value>& vals) {
    vals.assign(compiled->program.num_values, rt::Value{});
    vals[compiled->program.inputs[0]] = input(host, {3}, {1, 2, 3});
    rt::Value& iv = vals[compiled->program.inputs[1]];
    iv.kind = rt::Value::Kind::Number;
    iv.is_int = true;
    iv.number.i = index;
    return rt::run_program(compiled->program, vals.data(), host);
  };
  std::vector<rt::Value> vals;
  EXPECT_FALSE(run_with(3, vals));
  EXPECT_EQ(host.error, "extern step for node " + std::to_string(w));
  release_all(host, vals);
  EXPECT_TRUE(run_with(-3, vals)) << host.error;  // in range, from the end
  const std::vector<float> want{1, -2, -3};
  for (int k = 0; k < 3; ++k) EXPECT_EQ(floats(vals[w])[k], want[k]) << k;
  release_all(host, vals);
}

}  // namespace
}  // namespace framejit::jit
