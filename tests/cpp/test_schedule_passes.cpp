// test_schedule_passes.cpp — the passes behind plan_fusion one at a time, and the Users index.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/cpp/canonical_calls.h"
#include "jit/schedule/fusion.h"
#include "jit/schedule/fusion_passes.h"
#include "runtime/log.h"

namespace framejit::jit {
namespace {

using test::f32;

std::vector<std::pair<std::string, Arg>> last_axis(bool keepdims) {
  return {{"axis", Arg::integer(-1)}, {"keepdims", Arg::boolean(keepdims)}};
}

bool accept_all(const PointwiseKernelIR&) { return true; }
bool accept_all_reductions(const ReductionKernelIR&) { return true; }

std::vector<int> as_vector(std::span<const int> s) { return {s.begin(), s.end()}; }

// One entry per reference, kwargs and the output included, in graph order.
TEST(Users, EveryReferenceOnceInGraphOrder) {
  Graph g;
  int x = g.add_placeholder("x", f32({4}));
  int y = g.add_placeholder("y", f32({4}));
  int sq = test::add_call(g, "operator.mul", {Arg::node(x), Arg::node(x)}, {}, f32({4}));
  int w = test::add_call(g, "numpy.where", {Arg::node(sq), Arg::node(y)}, {{"out", Arg::tuple({Arg::node(y)})}}, f32({4}));
  int unused = test::add_call(g, "numpy.exp", {Arg::node(x)}, {}, f32({4}));
  g.set_output({Arg::node(w), Arg::node(sq)});
  const int out = static_cast<int>(g.nodes().size()) - 1;
  Users users = g.users();
  ASSERT_EQ(users.size(), static_cast<int>(g.nodes().size()));
  EXPECT_EQ(as_vector(users.of(x)), std::vector<int>({sq, sq, unused}));
  EXPECT_EQ(as_vector(users.of(y)), std::vector<int>({w, w}));  // an arg and a kwarg
  EXPECT_EQ(as_vector(users.of(sq)), std::vector<int>({w, out}));
  EXPECT_EQ(as_vector(users.of(w)), std::vector<int>({out}));
  EXPECT_TRUE(users.of(unused).empty());
  std::vector<int> counts;
  for (int v = 0; v < users.size(); ++v) counts.push_back(users.count(v));
  EXPECT_EQ(counts, g.use_counts());
}

// Each call node is one of pointwise, reduction, matmul or view, or none; reductions only when
// the backend has reduction kernels.
TEST(LowerNodes, ClassifiesEachNodeOnce) {
  Graph g;
  int x = g.add_placeholder("x", f32({8, 4}));
  int w = g.add_placeholder("w", f32({4, 4}));
  int e = test::add_call(g, "numpy.exp", {Arg::node(x)}, {}, f32({8, 4}));
  int s = test::add_call(g, "method.sum", {Arg::node(e)}, last_axis(false), f32({8}));
  int mm = test::add_call(g, "operator.matmul", {Arg::node(x), Arg::node(w)}, {}, f32({8, 4}));
  int t = test::add_call(g, "method.transpose", {Arg::node(x)}, {}, f32({4, 8}));
  int sorted = test::add_call(g, "numpy.sort", {Arg::node(x)}, {}, f32({8, 4}));
  g.set_output({Arg::node(s), Arg::node(mm), Arg::node(t), Arg::node(sorted)});
  for (bool reductions : {true, false}) {
    FusionState state(g);
    lower_nodes(state, reductions);
    auto kinds = [&](int i) {
      const NodeRecord& r = state.nodes[i];
      return std::to_string(r.pointwise.has_value()) + std::to_string(r.reduction.has_value()) +
             std::to_string(r.matmul.has_value()) + std::to_string(r.view.has_value());
    };
    EXPECT_EQ(kinds(x), "0000");
    EXPECT_EQ(kinds(e), "1000");
    EXPECT_EQ(kinds(s), reductions ? "0100" : "0000");
    EXPECT_EQ(kinds(mm), "0010");
    EXPECT_EQ(kinds(t), "0001");
    EXPECT_EQ(state.nodes[t].view->source, x);
    EXPECT_EQ(kinds(sorted), "0000");
  }
}

// std becomes a mean into a temporary (keepdims, no ddof, no sqrt), then the centered kernel with
// std's own ddof, keepdims and sqrt; a sum stays one kernel.
TEST(DecomposeReductions, VarAndStdBecomeMeanThenCenteredMean) {
  Graph g;
  int x = g.add_placeholder("x", f32({8, 64}));
  int sd = test::add_call(g, "method.std", {Arg::node(x)}, {{"axis", Arg::integer(-1)}, {"ddof", Arg::integer(1)}}, f32({8}));
  int s = test::add_call(g, "method.sum", {Arg::node(x)}, last_axis(true), f32({8, 1}));
  g.set_output({Arg::node(sd), Arg::node(s)});
  FusionState state(g);
  lower_nodes(state, true);
  decompose_reductions(state);

  const std::vector<ReductionStep>& steps = state.nodes[sd].steps;
  ASSERT_EQ(steps.size(), 2u);
  const ReductionGroup& mean = steps[0].kernel;
  EXPECT_FALSE(steps[0].centered);
  EXPECT_EQ(mean.node, -1);
  EXPECT_EQ(mean.operand, x);
  EXPECT_TRUE(mean.keepdims);
  EXPECT_TRUE(mean.ir.mean);
  EXPECT_EQ(mean.ir.ddof, 0);
  EXPECT_FALSE(mean.ir.sqrt);
  const ReductionGroup& dev = steps[1].kernel;
  EXPECT_TRUE(steps[1].centered);
  EXPECT_EQ(dev.node, sd);
  EXPECT_EQ(dev.output, sd);
  EXPECT_FALSE(dev.keepdims);
  EXPECT_TRUE(dev.ir.mean);
  EXPECT_EQ(dev.ir.ddof, 1);
  EXPECT_TRUE(dev.ir.sqrt);
  EXPECT_EQ(dev.reduced, std::vector<bool>({false, true}));

  ASSERT_EQ(state.nodes[s].steps.size(), 1u);
  EXPECT_FALSE(state.nodes[s].steps[0].centered);
  EXPECT_EQ(state.nodes[s].steps[0].kernel.node, s);
  EXPECT_TRUE(state.nodes[x].steps.empty());
}

// var(exp(x)): both kernels take exp as their prologue; the second reads the temporary (value
// index nodes().size()) and subtracts it; exp is needed by no one else.
TEST(FusePointwise, VarTakesItsOperandAsPrologueAndReadsTheTemporary) {
  Graph g;
  int x = g.add_placeholder("x", f32({8, 64}));
  int e = test::add_call(g, "numpy.exp", {Arg::node(x)}, {}, f32({8, 64}));
  int v = test::add_call(g, "method.var", {Arg::node(e)}, {{"axis", Arg::integer(-1)}}, f32({8}));
  g.set_output({Arg::node(v)});
  FusionState state(g);
  lower_nodes(state, true);
  decompose_reductions(state);
  fuse_pointwise(state, accept_all_reductions);

  const int temp = static_cast<int>(g.nodes().size());
  const FusionPlan& plan = state.plan;
  ASSERT_EQ(plan.reductions.size(), 2u);
  EXPECT_EQ(plan.num_temps, 1);
  EXPECT_EQ(plan.reductions[0].output, temp);
  EXPECT_EQ(plan.reductions[0].inputs, std::vector<int>({x}));
  EXPECT_EQ(plan.reductions[1].temp_producer, 0);
  EXPECT_EQ(plan.reductions[1].inputs, std::vector<int>({x, temp}));
  EXPECT_EQ(plan.reduction_of[v], 1);
  EXPECT_EQ(plan.reductions[1].ir.prologue.to_string(),
            "pointwise(in0: f32, in1: f32):\n"
            "  t0 = load(in0) : f32\n"
            "  t1 = exp(t0) : f32\n"
            "  t2 = load(in1) : f32\n"
            "  t3 = sub(t1, t2) : f32\n"
            "  t4 = mul(t3, t3) : f32\n"
            "  out0 = t4\n");
  EXPECT_EQ(state.nodes[e].tentative, 0);
  EXPECT_FALSE(state.nodes[e].needed_outside);

  // When the backend takes only one of the two kernels, neither is planned (and no temporary).
  FusionState rejected(g);
  lower_nodes(rejected, true);
  decompose_reductions(rejected);
  // The mean reads x alone; the centered kernel reads x and the temporary.
  fuse_pointwise(rejected, [](const ReductionKernelIR& ir) { return ir.prologue.input_dtypes.size() == 1; });
  EXPECT_TRUE(rejected.plan.reductions.empty());
  EXPECT_EQ(rejected.plan.num_temps, 0);
  EXPECT_TRUE(rejected.nodes[e].needed_outside);  // the var call reads it
}

// Softmax: the sum stores exp(x - max) for the division; it does not when the division is gone
// (nothing else in the group reads the operand and it is not returned).
TEST(StoreReductionOperands, ExpensiveOperandReadAfterTheReduction) {
  for (bool divide : {true, false}) {
    Graph g;
    int x = g.add_placeholder("x", f32({8, 64}));
    int m = test::add_call(g, "method.max", {Arg::node(x)}, last_axis(true), f32({8, 1}));
    int sub = test::add_call(g, "operator.sub", {Arg::node(x), Arg::node(m)}, {}, f32({8, 64}));
    int e = test::add_call(g, "numpy.exp", {Arg::node(sub)}, {}, f32({8, 64}));
    int s = test::add_call(g, "method.sum", {Arg::node(e)}, last_axis(true), f32({8, 1}));
    if (divide) {
      int out = test::add_call(g, "operator.truediv", {Arg::node(e), Arg::node(s)}, {}, f32({8, 64}));
      g.set_output({Arg::node(out)});
    } else {
      g.set_output({Arg::node(s)});
    }
    FusionState state(g);
    lower_nodes(state, true);
    decompose_reductions(state);
    fuse_pointwise(state, accept_all_reductions);
    store_reduction_operands(state);
    const ReductionGroup& sum = state.plan.reductions[state.plan.reduction_of[s]];
    EXPECT_EQ(sum.ir.store_value, divide);
    EXPECT_EQ(sum.value_output, divide ? e : -1);
    EXPECT_EQ(state.nodes[e].stored_by, divide ? state.plan.reduction_of[s] : -1);
  }
}

// A rejected group's members run as calls, and a reduction that was to store one of them for the
// group stops storing it.
TEST(BuildPointwiseKernels, RejectedGroupUndoesItsStoredOperands) {
  Graph g;
  int x = g.add_placeholder("x", f32({8, 64}));
  int e = test::add_call(g, "numpy.exp", {Arg::node(x)}, {}, f32({8, 64}));
  int s = test::add_call(g, "method.sum", {Arg::node(e)}, last_axis(true), f32({8, 1}));
  int out = test::add_call(g, "operator.truediv", {Arg::node(e), Arg::node(s)}, {}, f32({8, 64}));
  g.set_output({Arg::node(out)});
  for (bool accept : {true, false}) {
    FusionState state(g);
    lower_nodes(state, true);
    decompose_reductions(state);
    fuse_pointwise(state, accept_all_reductions);
    store_reduction_operands(state);
    ASSERT_EQ(state.nodes[e].stored_by, 0);
    build_pointwise_kernels(state, [&](const PointwiseKernelIR&) { return accept; });
    const FusionPlan& plan = state.plan;
    if (accept) {
      ASSERT_EQ(plan.groups.size(), 1u);
      EXPECT_EQ(plan.groups[0].inputs, std::vector<int>({e, s}));  // the stored exp
      EXPECT_EQ(plan.group_of[e], FusionPlan::kNotComputed);
      EXPECT_EQ(plan.group_of[out], 0);
      EXPECT_TRUE(plan.reductions[0].ir.store_value);
    } else {
      EXPECT_TRUE(plan.groups.empty());
      EXPECT_EQ(plan.group_of[e], FusionPlan::kNotFused);
      EXPECT_EQ(plan.group_of[out], FusionPlan::kNotFused);
      EXPECT_FALSE(plan.reductions[0].ir.store_value);
      EXPECT_EQ(plan.reductions[0].value_output, -1);
      EXPECT_EQ(state.nodes[e].stored_by, -1);
    }
  }
}

// relu(x @ w + b) with a row sum of exp(x @ w) beside it: the sum's prologue reads the product
// too (through exp, which only it needs), so the product must not be overwritten in place.
TEST(FuseGemmEpilogues, AReductionPrologueReadingTheProductPreventsIt) {
  for (bool with_sum : {false, true}) {
    Graph g;
    int x = g.add_placeholder("x", f32({8, 16}));
    int w = g.add_placeholder("w", f32({16, 4}));
    int b = g.add_placeholder("b", f32({4}));
    int y = test::add_call(g, "operator.matmul", {Arg::node(x), Arg::node(w)}, {}, f32({8, 4}));
    int z = test::add_call(g, "operator.add", {Arg::node(y), Arg::node(b)}, {}, f32({8, 4}));
    int r = test::add_call(g, "numpy.maximum", {Arg::node(z), Arg::integer(0)}, {}, f32({8, 4}));
    std::vector<Arg> outputs{Arg::node(r)};
    int e = -1;
    if (with_sum) {
      e = test::add_call(g, "numpy.exp", {Arg::node(y)}, {}, f32({8, 4}));
      int s = test::add_call(g, "method.sum", {Arg::node(e)}, last_axis(false), f32({8}));
      outputs.push_back(Arg::node(s));
    }
    g.set_output(outputs);
    FusionState state(g);
    lower_nodes(state, true);
    decompose_reductions(state);
    fuse_pointwise(state, accept_all_reductions);
    store_reduction_operands(state);
    build_pointwise_kernels(state, accept_all);
    select_gemms(state);
    ASSERT_EQ(state.plan.gemms.size(), 1u);
    EXPECT_EQ(state.plan.gemm_of[y], 0);
    EXPECT_EQ(state.plan.extern_calls, 0);
    fuse_gemm_epilogues(state);
    const FusionPlan& plan = state.plan;
    if (with_sum) {
      EXPECT_EQ(plan.group_of[e], FusionPlan::kNotComputed);
      EXPECT_EQ(plan.gemm_epilogue[0], -1);
    } else {
      EXPECT_EQ(plan.gemm_epilogue[0], plan.group_of[r]);
      EXPECT_EQ(plan.groups[plan.group_of[r]].gemm, 0);
    }
  }
}

// A transpose read only by a kernel is folded (one fewer extern call); one that is also returned
// must exist as an array, and so must a view of it.
TEST(FoldViews, OnlyWhenEveryReaderBindsLayouts) {
  for (bool returned : {false, true}) {
    Graph g;
    int x = g.add_placeholder("x", f32({8, 4}));
    int t = test::add_call(g, "method.transpose", {Arg::node(x)}, {}, f32({4, 8}));
    int tt = test::add_call(g, "method.transpose", {Arg::node(t)}, {}, f32({8, 4}));
    int e = test::add_call(g, "numpy.exp", {Arg::node(tt)}, {}, f32({8, 4}));
    std::vector<Arg> outputs{Arg::node(e)};
    if (returned) outputs.push_back(Arg::node(t));
    g.set_output(outputs);
    FusionState state(g);
    lower_nodes(state, true);
    // The plan as earlier passes leave it: exp in kernel 0, both views counted as calls.
    state.plan.group_of[e] = 0;
    state.plan.extern_calls = 2;
    fold_views(state);
    const FusionPlan& plan = state.plan;
    EXPECT_EQ(plan.view_of[tt], returned ? 0 : 1);
    EXPECT_EQ(plan.view_of[t], returned ? -1 : 0);
    EXPECT_EQ(plan.extern_calls, returned ? 1 : 0);
    ASSERT_FALSE(plan.views.empty());
    EXPECT_EQ(plan.views.back().source, t);
  }
}

// plan_fusion is the passes in order, each followed by one log line under FRAMEJIT_LOGS=passes.
TEST(PlanFusion, LogsAfterEveryPass) {
  Graph g;
  int x = g.add_placeholder("x", f32({8}));
  int e = test::add_call(g, "numpy.exp", {Arg::node(x)}, {}, f32({8}));
  g.set_output({Arg::node(e)});
  rt::set_log_spec("passes");
  testing::internal::CaptureStderr();
  FusionPlan plan = plan_fusion(g, accept_all, accept_all_reductions);
  const std::string log = testing::internal::GetCapturedStderr();
  rt::set_log_spec("");
  EXPECT_EQ(plan.groups.size(), 1u);
  size_t at = 0;
  for (const char* pass : {"lower_nodes", "decompose_reductions", "fuse_pointwise", "store_reduction_operands",
                           "build_pointwise_kernels", "select_gemms", "fuse_gemm_epilogues", "fold_views"}) {
    const size_t found = log.find(std::string("[framejit:passes] after ") + pass + ": ", at);
    ASSERT_NE(found, std::string::npos) << pass << "\n" << log;
    at = found;
  }
  EXPECT_NE(log.find("after fold_views: nodes 3 (pointwise 1, reduction 0, matmul 0, view 0); tentative groups 1; "
                     "stored operands 0; plan: 1 kernel(s), 0 reduction(s), 0 gemm(s), 0 folded view(s), 0 extern "
                     "call(s)"),
            std::string::npos)
      << log;
}

}  // namespace
}  // namespace framejit::jit
