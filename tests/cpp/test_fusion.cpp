// test_fusion.cpp — GraphLowering of pointwise nodes and the greedy fusion plan, with golden text.
#include <gtest/gtest.h>

#include "jit/lower/lowering.h"
#include "jit/schedule/fusion.h"
#include "tests/cpp/canonical_calls.h"

namespace framejit::jit {
namespace {

using test::f32;

bool accept_all(const PointwiseKernelIR&) { return true; }

TEST(Lowering, ArithmeticAndPowerFastPaths) {
  Graph g;
  int x = g.add_placeholder("x", f32({SymInt::symbol(0)}));
  int sq = test::add_call(g, "operator.pow", {Arg::node(x), Arg::integer(2)}, {}, f32({SymInt::symbol(0)}));
  int rt = test::add_call(g, "operator.pow", {Arg::node(x), Arg::real(0.5)}, {}, f32({SymInt::symbol(0)}));
  int pw = test::add_call(g, "numpy.power", {Arg::node(x), Arg::real(0.5)}, {}, f32({SymInt::symbol(0)}));
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
  int mixed = test::add_call(g, "operator.add", {Arg::node(x), Arg::node(xi)}, {}, [] {
    TensorMeta m;
    m.dtype = DType::Float64;
    m.shape = {SymInt(4)};
    return m;
  }());
  int ipow = test::add_call(g, "operator.pow", {Arg::node(xi), Arg::integer(3)}, {}, i64);
  int fdiv = test::add_call(g, "operator.floordiv", {Arg::node(x), Arg::integer(3)}, {}, f32({4}));
  TensorMeta u16 = i64;
  u16.dtype = DType::UInt16;
  int wide = test::add_call(g, "operator.add", {Arg::node(xi), Arg::integer(1)}, {}, u16);
  int kw = test::add_call(g, "numpy.add", {Arg::node(x), Arg::real(1)}, {{"dtype", Arg::dtype(DType::Float64)}}, f32({4}));
  int sum = test::add_call(g, "method.sum", {Arg::node(x)}, {}, f32({}));
  g.set_output({Arg::node(mixed), Arg::node(ipow), Arg::node(fdiv), Arg::node(wide), Arg::node(kw), Arg::node(sum)});
  EXPECT_FALSE(lower_pointwise(g, g.node(ipow)));   // int ** int raises for negative exponents
  EXPECT_FALSE(lower_pointwise(g, g.node(fdiv)));   // float floor_divide needs fmod
  EXPECT_FALSE(lower_pointwise(g, g.node(wide)));   // uint16 is not a kernel dtype
  EXPECT_FALSE(lower_pointwise(g, g.node(kw)));     // ufunc keyword arguments
  EXPECT_FALSE(lower_pointwise(g, g.node(sum)));    // not pointwise
}

// Mixed dtypes: operands are converted to the ufunc's loop type, comparisons to the promoted type.
TEST(Lowering, OperandsConvertToTheLoopType) {
  Graph g;
  TensorMeta i32m = f32({4});
  i32m.dtype = DType::Int32;
  TensorMeta f64m = f32({4});
  f64m.dtype = DType::Float64;
  TensorMeta bm = f32({4});
  bm.dtype = DType::Bool;
  int x = g.add_placeholder("x", f32({4}));
  int xi = g.add_placeholder("xi", i32m);
  int add = test::add_call(g, "operator.add", {Arg::node(x), Arg::node(xi)}, {}, f64m);
  int gt = test::add_call(g, "operator.gt", {Arg::node(xi), Arg::real(0.5)}, {}, bm);
  int gti = test::add_call(g, "operator.gt", {Arg::node(xi), Arg::integer(3)}, {}, bm);
  int wh = test::add_call(g, "numpy.where", {Arg::node(gt), Arg::node(xi), Arg::integer(0)}, {}, i32m);
  int badd = test::add_call(g, "operator.add", {Arg::node(gt), Arg::node(gti)}, {}, bm);
  int cast = test::add_call(g, "method.astype", {Arg::node(x), Arg::dtype(DType::Int32)}, {}, i32m);
  g.set_output({Arg::node(add), Arg::node(wh), Arg::node(badd), Arg::node(cast)});
  auto p = lower_pointwise(g, g.node(add));
  ASSERT_TRUE(p);
  EXPECT_EQ(p->operand_dtypes, std::vector<DType>({DType::Float64, DType::Float64}));
  p = lower_pointwise(g, g.node(gt));
  ASSERT_TRUE(p);
  EXPECT_EQ(p->operand_dtypes, std::vector<DType>({DType::Float64, DType::Float64}));
  p = lower_pointwise(g, g.node(gti));
  ASSERT_TRUE(p);
  EXPECT_EQ(p->operand_dtypes, std::vector<DType>({DType::Int64, DType::Int64}));
  p = lower_pointwise(g, g.node(wh));
  ASSERT_TRUE(p);
  EXPECT_EQ(p->op, ScalarOp::Where);
  EXPECT_EQ(p->operand_dtypes, std::vector<DType>({DType::Bool, DType::Int32, DType::Int32}));
  p = lower_pointwise(g, g.node(badd));
  ASSERT_TRUE(p);
  EXPECT_EQ(p->op, ScalarOp::Or);  // NumPy's bool add
  p = lower_pointwise(g, g.node(cast));
  ASSERT_TRUE(p);
  EXPECT_EQ(p->op, ScalarOp::Cast);
  EXPECT_EQ(p->operand_dtypes, std::vector<DType>({DType::Float32}));

  FusionPlan plan = plan_fusion(g, [](const PointwiseKernelIR&) { return true; });
  ASSERT_EQ(plan.groups.size(), 1u);
  EXPECT_EQ(plan.groups[0].ir.to_string(),
            "pointwise(in0: f32, in1: i32):\n"
            "  t0 = load(in0) : f32\n"
            "  t1 = cast(t0) : f64\n"
            "  t2 = load(in1) : i32\n"
            "  t3 = cast(t2) : f64\n"
            "  t4 = add(t1, t3) : f64\n"
            "  t5 = const(0.5) : f64\n"
            "  t6 = gt(t3, t5) : b8\n"
            "  t7 = cast(t2) : i64\n"
            "  t8 = const(3) : i64\n"
            "  t9 = gt(t7, t8) : b8\n"
            "  t10 = const(0) : i32\n"
            "  t11 = where(t6, t2, t10) : i32\n"
            "  t12 = or(t6, t9) : b8\n"
            "  t13 = cast(t0) : i32\n"
            "  out0 = t4\n"
            "  out1 = t11\n"
            "  out2 = t12\n"
            "  out3 = t13\n");
}

// tanh(x * a + b) * exp(-x * x): one kernel, one output, no intermediates.
TEST(Fusion, ChainBecomesOneKernel) {
  Graph g;
  SymInt n = SymInt::symbol(0);
  int x = g.add_placeholder("x", f32({n}));
  int a = g.add_placeholder("a", test::scalar(DType::Float64));
  int mul = test::add_call(g, "operator.mul", {Arg::node(x), Arg::node(a)}, {}, f32({n}));
  int add = test::add_call(g, "operator.add", {Arg::node(mul), Arg::real(1.5)}, {}, f32({n}));
  int th = test::add_call(g, "numpy.tanh", {Arg::node(add)}, {}, f32({n}));
  int neg = test::add_call(g, "operator.neg", {Arg::node(x)}, {}, f32({n}));
  int sq = test::add_call(g, "operator.mul", {Arg::node(neg), Arg::node(x)}, {}, f32({n}));
  int ex = test::add_call(g, "numpy.exp", {Arg::node(sq)}, {}, f32({n}));
  int out = test::add_call(g, "operator.mul", {Arg::node(th), Arg::node(ex)}, {}, f32({n}));
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
  int e = test::add_call(g, "numpy.exp", {Arg::node(x)}, {}, f32({8, 4}));
  int s = test::add_call(g, "method.sum", {Arg::node(e)}, {{"axis", Arg::integer(-1)}, {"keepdims", Arg::boolean(true)}},
                     f32({8, 1}));
  int d = test::add_call(g, "operator.truediv", {Arg::node(e), Arg::node(s)}, {}, f32({8, 4}));
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
  int a = test::add_call(g, "numpy.exp", {Arg::node(y)}, {}, f32({4}));
  int b = test::add_call(g, "operator.add", {Arg::node(x), Arg::node(a)}, {}, f32({8, 4}));
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
  int m = test::add_call(g, "method.max", {Arg::node(x)}, kw(true), f32({n, 1}));
  int sub = test::add_call(g, "operator.sub", {Arg::node(x), Arg::node(m)}, {}, f32({n, 64}));
  int e = test::add_call(g, "numpy.exp", {Arg::node(sub)}, {}, f32({n, 64}));
  int s = test::add_call(g, "method.sum", {Arg::node(e)}, kw(true), f32({n, 1}));
  int out = test::add_call(g, "operator.truediv", {Arg::node(e), Arg::node(s)}, {}, f32({n, 64}));
  g.set_output({Arg::node(out)});
  FusionPlan plan = plan_fusion(g, accept_all, accept_all_reductions);
  ASSERT_EQ(plan.reductions.size(), 2u);
  EXPECT_EQ(plan.reductions[0].inputs, std::vector<int>({x}));
  EXPECT_EQ(plan.reductions[1].inputs, std::vector<int>({x, m}));
  // The exp is expensive and the division reads it after the sum: the sum stores it (Note
  // [Stored reduction operands]) and the division's kernel reads it instead of recomputing it.
  EXPECT_EQ(plan.reductions[1].ir.to_string(),
            "reduce_sum, storing the values of:\n"
            "pointwise(in0: f32, in1: f32):\n"
            "  t0 = load(in0) : f32\n"
            "  t1 = load(in1) : f32\n"
            "  t2 = sub(t0, t1) : f32\n"
            "  t3 = exp(t2) : f32\n"
            "  out0 = t3\n");
  EXPECT_EQ(plan.reductions[1].value_output, e);
  ASSERT_EQ(plan.groups.size(), 1u);
  EXPECT_EQ(plan.groups[0].inputs, std::vector<int>({e, s}));
  EXPECT_EQ(plan.groups[0].nodes, std::vector<int>({out}));
  EXPECT_EQ(plan.groups[0].outputs, std::vector<int>({out}));
  EXPECT_EQ(plan.group_of[sub], FusionPlan::kNotComputed);
  EXPECT_EQ(plan.group_of[e], FusionPlan::kNotComputed);
  EXPECT_EQ(plan.extern_calls, 0);
}

// A cheap operand (x - mean, as in layernorm's variance) is recomputed, never stored; an expensive
// one read by a group member before the reduction cannot be stored either.
TEST(Fusion, CheapOrEarlyReadOperandsAreRecomputed) {
  auto kw = std::vector<std::pair<std::string, Arg>>{{"axis", Arg::integer(-1)}, {"keepdims", Arg::boolean(true)}};
  {
    Graph g;
    int x = g.add_placeholder("x", f32({8, 64}));
    int mu = test::add_call(g, "method.mean", {Arg::node(x)}, kw, f32({8, 1}));
    int d = test::add_call(g, "operator.sub", {Arg::node(x), Arg::node(mu)}, {}, f32({8, 64}));
    int var = test::add_call(g, "method.sum", {Arg::node(d)}, kw, f32({8, 1}));
    int out = test::add_call(g, "operator.truediv", {Arg::node(d), Arg::node(var)}, {}, f32({8, 64}));
    g.set_output({Arg::node(out)});
    FusionPlan plan = plan_fusion(g, accept_all, accept_all_reductions);
    ASSERT_EQ(plan.reductions.size(), 2u);
    EXPECT_FALSE(plan.reductions[1].ir.store_value);
    EXPECT_EQ(plan.reductions[1].value_output, -1);
  }
  {
    Graph g;
    int x = g.add_placeholder("x", f32({8, 64}));
    int e = test::add_call(g, "numpy.exp", {Arg::node(x)}, {}, f32({8, 64}));
    int y = test::add_call(g, "operator.mul", {Arg::node(e), Arg::real(2.0)}, {}, f32({8, 64}));
    int s = test::add_call(g, "method.sum", {Arg::node(e)}, kw, f32({8, 1}));
    int out = test::add_call(g, "operator.truediv", {Arg::node(y), Arg::node(s)}, {}, f32({8, 64}));
    g.set_output({Arg::node(out)});
    FusionPlan plan = plan_fusion(g, accept_all, accept_all_reductions);
    ASSERT_EQ(plan.reductions.size(), 1u);
    EXPECT_FALSE(plan.reductions[0].ir.store_value);
    ASSERT_EQ(plan.groups.size(), 1u);
    EXPECT_EQ(plan.groups[0].inputs, std::vector<int>({x, s}));
  }
}

// A reduction nobody can generate leaves its operand materialized by the pointwise kernel.
TEST(Fusion, RejectedReductionReadsAMaterializedOperand) {
  Graph g;
  int x = g.add_placeholder("x", f32({8, 4}));
  int e = test::add_call(g, "numpy.exp", {Arg::node(x)}, {}, f32({8, 4}));
  int s = test::add_call(g, "method.sum", {Arg::node(e)}, {{"axis", Arg::integer(1)}}, f32({8}));
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

namespace framejit::jit {
namespace {

// relu(x @ w + b): the bias/relu kernel becomes the GEMM's epilogue; when the product is also a
// result, or the kernel reads a value computed after the product, it stays a kernel of its own.
TEST(Fusion, GemmEpilogues) {
  for (int variant : {0, 1, 2}) {
    Graph g;
    int x = g.add_placeholder("x", f32({8, 16}));
    int w = g.add_placeholder("w", f32({16, 4}));
    int b = g.add_placeholder("b", f32({4}));
    int y = test::add_call(g, "operator.matmul", {Arg::node(x), Arg::node(w)}, {}, f32({8, 4}));
    int bias = b;
    if (variant == 2) bias = test::add_call(g, "numpy.exp", {Arg::node(b)}, {}, f32({4}));
    int z = test::add_call(g, "operator.add", {Arg::node(y), Arg::node(bias)}, {}, f32({8, 4}));
    int r = test::add_call(g, "numpy.maximum", {Arg::node(z), Arg::integer(0)}, {}, f32({8, 4}));
    if (variant == 1) g.set_output({Arg::node(r), Arg::node(y)});
    else g.set_output({Arg::node(r)});
    FusionPlan plan = plan_fusion(g, accept_all, accept_all_reductions);
    ASSERT_EQ(plan.gemms.size(), 1u) << variant;
    const int k = plan.group_of[r];
    ASSERT_GE(k, 0);
    if (variant == 0) {
      EXPECT_EQ(plan.gemm_epilogue[0], k);
      EXPECT_EQ(plan.groups[k].gemm, 0);
      EXPECT_EQ(plan.groups[k].inputs, std::vector<int>({y, b}));
    } else {
      EXPECT_EQ(plan.gemm_epilogue[0], -1) << variant;
      EXPECT_EQ(plan.groups[k].gemm, -1) << variant;
    }
  }
}

}  // namespace
}  // namespace framejit::jit
