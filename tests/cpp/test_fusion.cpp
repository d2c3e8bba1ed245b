// test_fusion.cpp — GraphLowering of pointwise nodes and the greedy fusion plan, with golden text.
#include <gtest/gtest.h>

#include "jit/lower/lowering.h"
#include "jit/schedule/fusion.h"

namespace framejit::jit {
namespace {

TensorMeta f32(std::vector<SymInt> shape) {
  TensorMeta m;
  m.dtype = DType::Float32;
  m.shape = std::move(shape);
  return m;
}

TensorMeta scalar_float() {
  TensorMeta m;
  m.kind = ValueKind::Scalar;
  m.dtype = DType::Float64;
  return m;
}

bool accept_all(const PointwiseKernelIR&) { return true; }

TEST(Lowering, ArithmeticAndPowerFastPaths) {
  Graph g;
  int x = g.add_placeholder("x", f32({SymInt::symbol(0)}));
  int sq = g.add_call("operator.pow", {Arg::node(x), Arg::integer(2)}, {}, f32({SymInt::symbol(0)}));
  int rt = g.add_call("operator.pow", {Arg::node(x), Arg::real(0.5)}, {}, f32({SymInt::symbol(0)}));
  int pw = g.add_call("numpy.power", {Arg::node(x), Arg::real(0.5)}, {}, f32({SymInt::symbol(0)}));
  g.set_output({Arg::node(sq), Arg::node(rt), Arg::node(pw)});
  EXPECT_EQ(lower_pointwise(g, g.node(sq))->op, ScalarOp::Square);
  EXPECT_EQ(lower_pointwise(g, g.node(rt))->op, ScalarOp::Sqrt);
  // numpy.power(x, 0.5) is pow, which differs from sqrt at -0.0 and -inf.
  EXPECT_EQ(lower_pointwise(g, g.node(pw))->op, ScalarOp::Pow);
}

TEST(Lowering, RejectsWhatItCannotReproduce) {
  Graph g;
  int x = g.add_placeholder("x", f32({4}));
  TensorMeta i64 = f32({4});
  i64.dtype = DType::Int64;
  int xi = g.add_placeholder("xi", i64);
  int mixed = g.add_call("operator.add", {Arg::node(x), Arg::node(xi)}, {}, [] {
    TensorMeta m;
    m.dtype = DType::Float64;
    m.shape = {SymInt(4)};
    return m;
  }());
  int ints = g.add_call("operator.add", {Arg::node(xi), Arg::integer(1)}, {}, i64);
  int kw = g.add_call("numpy.add", {Arg::node(x), Arg::real(1)}, {{"dtype", Arg::dtype(DType::Float64)}}, f32({4}));
  int sum = g.add_call("method.sum", {Arg::node(x)}, {}, f32({}));
  g.set_output({Arg::node(mixed), Arg::node(ints), Arg::node(kw), Arg::node(sum)});
  EXPECT_FALSE(lower_pointwise(g, g.node(mixed)));  // needs a cast
  EXPECT_FALSE(lower_pointwise(g, g.node(ints)));   // integer kernels come later
  EXPECT_FALSE(lower_pointwise(g, g.node(kw)));     // ufunc keyword arguments
  EXPECT_FALSE(lower_pointwise(g, g.node(sum)));    // not pointwise
}

// tanh(x * a + b) * exp(-x * x): one kernel, one output, no intermediates.
TEST(Fusion, ChainBecomesOneKernel) {
  Graph g;
  SymInt n = SymInt::symbol(0);
  int x = g.add_placeholder("x", f32({n}));
  int a = g.add_placeholder("a", scalar_float());
  int mul = g.add_call("operator.mul", {Arg::node(x), Arg::node(a)}, {}, f32({n}));
  int add = g.add_call("operator.add", {Arg::node(mul), Arg::real(1.5)}, {}, f32({n}));
  int th = g.add_call("numpy.tanh", {Arg::node(add)}, {}, f32({n}));
  int neg = g.add_call("operator.neg", {Arg::node(x)}, {}, f32({n}));
  int sq = g.add_call("operator.mul", {Arg::node(neg), Arg::node(x)}, {}, f32({n}));
  int ex = g.add_call("numpy.exp", {Arg::node(sq)}, {}, f32({n}));
  int out = g.add_call("operator.mul", {Arg::node(th), Arg::node(ex)}, {}, f32({n}));
  g.set_output({Arg::node(out)});
  FusionPlan plan = plan_fusion(g, accept_all);
  ASSERT_EQ(plan.groups.size(), 1u);
  EXPECT_EQ(plan.extern_calls, 0);
  const FusionGroup& k = plan.groups[0];
  EXPECT_EQ(k.inputs, std::vector<int>({x}));
  EXPECT_EQ(k.params, std::vector<int>({a}));
  EXPECT_EQ(k.outputs, std::vector<int>({out}));
  EXPECT_EQ(k.position, out);
  EXPECT_EQ(k.ir.to_string(),
            "pointwise(in0: f32, p0: f64):\n"
            "  t0 = load(in0) : f32\n"
            "  t1 = param(p0) : f32\n"
            "  t2 = mul(t0, t1) : f32\n"
            "  t3 = const(1.5) : f32\n"
            "  t4 = add(t2, t3) : f32\n"
            "  t5 = tanh(t4) : f32\n"
            "  t6 = neg(t0) : f32\n"
            "  t7 = mul(t6, t0) : f32\n"
            "  t8 = exp(t7) : f32\n"
            "  t9 = mul(t5, t8) : f32\n"
            "  out0 = t9\n");
}

// A reduction between pointwise nodes splits them; values read after the kernel are its outputs.
TEST(Fusion, NonPointwiseReaderClosesTheGroup) {
  Graph g;
  int x = g.add_placeholder("x", f32({8, 4}));
  int e = g.add_call("numpy.exp", {Arg::node(x)}, {}, f32({8, 4}));
  int s = g.add_call("method.sum", {Arg::node(e)}, {{"axis", Arg::integer(-1)}, {"keepdims", Arg::boolean(true)}},
                     f32({8, 1}));
  int d = g.add_call("operator.truediv", {Arg::node(e), Arg::node(s)}, {}, f32({8, 4}));
  g.set_output({Arg::node(d)});
  FusionPlan plan = plan_fusion(g, accept_all);
  ASSERT_EQ(plan.groups.size(), 2u);
  EXPECT_EQ(plan.groups[0].outputs, std::vector<int>({e}));  // read by the sum and the division
  EXPECT_EQ(plan.groups[1].inputs, std::vector<int>({e, s}));
  EXPECT_EQ(plan.group_of[s], -1);
  EXPECT_EQ(plan.extern_calls, 1);
}

TEST(Fusion, DifferentShapesOrRejectedKernelsStaySeparate) {
  Graph g;
  int x = g.add_placeholder("x", f32({8, 4}));
  int y = g.add_placeholder("y", f32({4}));
  int a = g.add_call("numpy.exp", {Arg::node(y)}, {}, f32({4}));
  int b = g.add_call("operator.add", {Arg::node(x), Arg::node(a)}, {}, f32({8, 4}));
  g.set_output({Arg::node(b)});
  FusionPlan plan = plan_fusion(g, accept_all);
  ASSERT_EQ(plan.groups.size(), 2u);
  EXPECT_EQ(plan.groups[0].outputs, std::vector<int>({a}));

  FusionPlan none = plan_fusion(g, [](const PointwiseKernelIR&) { return false; });
  EXPECT_TRUE(none.groups.empty());
  EXPECT_EQ(none.extern_calls, 2);
  EXPECT_EQ(none.group_of[b], -1);
}

bool accept_all_reductions(const ReductionKernelIR&) { return true; }

// Softmax over rows: max, then sum(exp(x - max)) with its prologue fused, then one kernel that
// recomputes exp(x - max) and divides. exp(x - max) is never written to memory.
TEST(Fusion, SoftmaxReductionsTakeTheirPrologue) {
  Graph g;
  SymInt n = SymInt::symbol(0);
  auto kw = [](bool keep) {
    return std::vector<std::pair<std::string, Arg>>{{"axis", Arg::integer(-1)}, {"keepdims", Arg::boolean(keep)}};
  };
  int x = g.add_placeholder("x", f32({n, 64}));
  int m = g.add_call("method.max", {Arg::node(x)}, kw(true), f32({n, 1}));
  int sub = g.add_call("operator.sub", {Arg::node(x), Arg::node(m)}, {}, f32({n, 64}));
  int e = g.add_call("numpy.exp", {Arg::node(sub)}, {}, f32({n, 64}));
  int s = g.add_call("method.sum", {Arg::node(e)}, kw(true), f32({n, 1}));
  int out = g.add_call("operator.truediv", {Arg::node(e), Arg::node(s)}, {}, f32({n, 64}));
  g.set_output({Arg::node(out)});
  FusionPlan plan = plan_fusion(g, accept_all, accept_all_reductions);
  ASSERT_EQ(plan.reductions.size(), 2u);
  EXPECT_EQ(plan.reductions[0].inputs, std::vector<int>({x}));
  EXPECT_EQ(plan.reductions[1].inputs, std::vector<int>({x, m}));
  EXPECT_EQ(plan.reductions[1].ir.to_string(),
            "reduce_sum of:\n"
            "pointwise(in0: f32, in1: f32):\n"
            "  t0 = load(in0) : f32\n"
            "  t1 = load(in1) : f32\n"
            "  t2 = sub(t0, t1) : f32\n"
            "  t3 = exp(t2) : f32\n"
            "  out0 = t3\n");
  ASSERT_EQ(plan.groups.size(), 1u);
  EXPECT_EQ(plan.groups[0].inputs, std::vector<int>({x, m, s}));
  EXPECT_EQ(plan.groups[0].outputs, std::vector<int>({out}));
  EXPECT_EQ(plan.extern_calls, 0);
}

// A reduction nobody can generate leaves its operand materialized by the pointwise kernel.
TEST(Fusion, RejectedReductionReadsAMaterializedOperand) {
  Graph g;
  int x = g.add_placeholder("x", f32({8, 4}));
  int e = g.add_call("numpy.exp", {Arg::node(x)}, {}, f32({8, 4}));
  int s = g.add_call("method.sum", {Arg::node(e)}, {{"axis", Arg::integer(1)}}, f32({8}));
  g.set_output({Arg::node(s)});
  FusionPlan plan = plan_fusion(g, accept_all, [](const ReductionKernelIR&) { return false; });
  ASSERT_EQ(plan.groups.size(), 1u);
  EXPECT_EQ(plan.groups[0].outputs, std::vector<int>({e}));
  EXPECT_EQ(plan.reduction_of[s], -1);
  EXPECT_EQ(plan.extern_calls, 1);

  FusionPlan fused = plan_fusion(g, accept_all, accept_all_reductions);
  EXPECT_TRUE(fused.groups.empty());
  EXPECT_EQ(fused.group_of[e], FusionPlan::kNotComputed);
  EXPECT_EQ(fused.reduction_of[s], 0);
}

}  // namespace
}  // namespace framejit::jit
