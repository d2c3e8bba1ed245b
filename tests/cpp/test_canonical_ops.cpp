// test_canonical_ops.cpp — frontend/ops decides each call's canonical op and attributes once, and
// jit/ reads only those: lowering, views and passes work whatever the target string says.
#include <gtest/gtest.h>

#include "frontend/ops/numpy/canonical.h"
#include "jit/lower/lowering.h"
#include "jit/lower/views.h"
#include "jit/passes/passes.h"
#include "tests/cpp/canonical_calls.h"

namespace framejit::jit {
namespace {

using test::scalar;
using test::tensor;

const Node& last(const Graph& g) { return g.nodes().back(); }

TEST(CanonicalOps, PointwiseFamilies) {
  Graph g;
  int x = g.add_placeholder("x", tensor({4}));
  int xi = g.add_placeholder("xi", tensor({4}, DType::Int32));
  int n = g.add_placeholder("n", scalar(DType::Int64));
  // A ufunc and its operator form are one op; only the operator form takes ndarray's fast paths.
  test::add_call(g, "numpy.add", {Arg::node(x), Arg::real(1.0)}, {}, tensor({4}));
  EXPECT_EQ(last(g).op, OpKind::Add);
  EXPECT_EQ(last(g).attrs.loop_dtypes, (std::vector<DType>{DType::Float32, DType::Float32}));
  EXPECT_FALSE(last(g).attrs.operator_form);
  test::add_call(g, "operator.pow", {Arg::node(x), Arg::real(0.5)}, {}, tensor({4}));
  EXPECT_EQ(last(g).op, OpKind::Pow);
  EXPECT_TRUE(last(g).attrs.operator_form);
  test::add_call(g, "builtins.abs", {Arg::node(x)}, {}, tensor({4}));
  EXPECT_EQ(last(g).op, OpKind::Abs);
  // Comparisons meet in a type holding both operands; logical ops read bools; where's condition.
  test::add_call(g, "operator.lt", {Arg::node(xi), Arg::node(n)}, {}, tensor({4}, DType::Bool));
  EXPECT_EQ(last(g).op, OpKind::Lt);
  EXPECT_EQ(last(g).attrs.loop_dtypes, (std::vector<DType>{DType::Int64, DType::Int64}));
  test::add_call(g, "numpy.greater", {Arg::node(xi), Arg::node(x)}, {}, tensor({4}, DType::Bool));
  EXPECT_EQ(last(g).attrs.loop_dtypes, (std::vector<DType>{DType::Float64, DType::Float64}));
  int b = test::add_call(g, "numpy.logical_not", {Arg::node(x)}, {}, tensor({4}, DType::Bool));
  EXPECT_EQ(last(g).attrs.loop_dtypes, (std::vector<DType>{DType::Bool}));
  test::add_call(g, "numpy.where", {Arg::node(b), Arg::node(x), Arg::integer(0)}, {}, tensor({4}));
  EXPECT_EQ(last(g).op, OpKind::Where);
  EXPECT_EQ(last(g).attrs.loop_dtypes, (std::vector<DType>{DType::Bool, DType::Float32, DType::Float32}));
  test::add_call(g, "method.astype", {Arg::node(x), Arg::dtype(DType::Int32)}, {}, tensor({4}, DType::Int32));
  EXPECT_EQ(last(g).op, OpKind::Cast);
  EXPECT_EQ(last(g).attrs.dtype, DType::Int32);
  EXPECT_EQ(last(g).attrs.loop_dtypes, (std::vector<DType>{DType::Float32}));
  // A float number against a uint8 array goes through float16 in NumPy: no loop framejit runs.
  int u = g.add_placeholder("u", tensor({4}, DType::UInt8));
  test::add_call(g, "operator.gt", {Arg::node(u), Arg::real(0.5)}, {}, tensor({4}, DType::Bool));
  EXPECT_TRUE(last(g).attrs.loop_dtypes.empty());
  // Python numbers keep Python's semantics: scalar kinds, not array ones.
  test::add_call(g, "operator.add", {Arg::node(n), Arg::integer(1)}, {}, scalar(DType::Int64));
  EXPECT_EQ(last(g).op, OpKind::ScalarAdd);
  test::add_call(g, "sym_size", {Arg::node(x), Arg::integer(0)}, {}, scalar(DType::Int64));
  EXPECT_EQ(last(g).op, OpKind::SymSize);
}

TEST(CanonicalOps, ReductionsBindNumPyParameters) {
  Graph g;
  int x = g.add_placeholder("x", tensor({8, 4, 2}));
  // np.var(x, (0, -1), None, None, 1, True): positional parameters by NumPy's order.
  test::add_call(g, "numpy.var",
                 {Arg::node(x), Arg::tuple({Arg::integer(0), Arg::integer(-1)}), Arg::none(), Arg::none(),
                  Arg::integer(1), Arg::boolean(true)},
                 {}, tensor({1, 4, 1}));
  EXPECT_EQ(last(g).op, OpKind::Var);
  EXPECT_TRUE(last(g).attrs.described);
  EXPECT_FALSE(last(g).attrs.all_axes);
  EXPECT_EQ(last(g).attrs.axes, (std::vector<int>{0, 2}));
  EXPECT_EQ(last(g).attrs.ddof, 1);
  EXPECT_TRUE(last(g).attrs.keepdims);
  test::add_call(g, "method.sum", {Arg::node(x)}, {{"dtype", Arg::dtype(DType::Float64)}}, tensor({}, DType::Float64));
  EXPECT_EQ(last(g).op, OpKind::Sum);
  EXPECT_TRUE(last(g).attrs.all_axes);
  EXPECT_EQ(last(g).attrs.dtype, DType::Float64);
  test::add_call(g, "numpy.max", {Arg::node(x)}, {{"initial", Arg::real(0.0)}}, tensor({}));
  EXPECT_EQ(last(g).op, OpKind::Max);
  EXPECT_FALSE(last(g).attrs.described);  // initial= has no typed form: only NumPy runs it
  test::add_call(g, "numpy.matmul", {Arg::node(x), Arg::node(x)}, {}, tensor({8, 4, 4}));
  EXPECT_EQ(last(g).op, OpKind::Matmul);
  test::add_call(g, "method.dot", {Arg::node(x), Arg::node(x)}, {}, tensor({8, 4, 8, 2}));
  EXPECT_EQ(last(g).op, OpKind::Dot);
}

TEST(CanonicalOps, ViewsCarryPermutationsIndexesAndShapes) {
  Graph g;
  int x = g.add_placeholder("x", tensor({SymInt::symbol(0), 1, 3}));
  g.add_symbol(x, 0, 5);
  int d = test::add_call(g, "sym_size", {Arg::node(x), Arg::integer(0)}, {}, scalar(DType::Int64));
  test::add_call(g, "method.transpose", {Arg::node(x)}, {}, tensor({3, 1, SymInt::symbol(0)}));
  EXPECT_EQ(last(g).op, OpKind::Transpose);
  EXPECT_EQ(last(g).attrs.perm, (std::vector<int>{2, 1, 0}));
  test::add_call(g, "numpy.swapaxes", {Arg::node(x), Arg::integer(0), Arg::integer(-1)}, {},
                 tensor({3, 1, SymInt::symbol(0)}));
  EXPECT_EQ(last(g).attrs.perm, (std::vector<int>{2, 1, 0}));
  test::add_call(g, "numpy.squeeze", {Arg::node(x)}, {}, tensor({SymInt::symbol(0), 3}));
  ASSERT_EQ(last(g).attrs.index.size(), 3u);
  EXPECT_EQ(last(g).attrs.index[1].kind, IndexSpecItem::Kind::Int);
  test::add_call(g, "getitem",
                 {Arg::node(x), Arg::tuple({Arg::slice(Arg::integer(1), Arg::node(d), Arg::none()), Arg::none(),
                                            Arg::ellipsis(), Arg::integer(2)})},
                 {}, tensor({SymInt::symbol(0) - 1, 1, 1}));
  EXPECT_EQ(last(g).op, OpKind::GetItem);
  ASSERT_EQ(last(g).attrs.index.size(), 4u);
  EXPECT_EQ(last(g).attrs.index[0].kind, IndexSpecItem::Kind::Slice);
  EXPECT_EQ(last(g).attrs.index[0].parts[1], Arg::node(d));  // a run-time bound stays a graph value
  EXPECT_EQ(last(g).attrs.index[1].kind, IndexSpecItem::Kind::NewAxis);
  EXPECT_EQ(last(g).attrs.index[2].kind, IndexSpecItem::Kind::Ellipsis);
  test::add_call(g, "method.reshape", {Arg::node(x), Arg::node(d), Arg::integer(-1)}, {},
                 tensor({SymInt::symbol(0), 3}));
  EXPECT_EQ(last(g).op, OpKind::Reshape);
  EXPECT_EQ(last(g).attrs.shape, (std::vector<Arg>{Arg::node(d), Arg::integer(-1)}));
  test::add_call(g, "method.reshape", {Arg::node(x), Arg::integer(-1)}, {{"order", Arg::str("F")}},
                 tensor({SymInt::symbol(0) * 3}));
  EXPECT_FALSE(last(g).attrs.described);  // Fortran order is not a view of C order
  test::add_call(g, "numpy.empty_like", {Arg::node(x)}, {}, tensor({SymInt::symbol(0), 1, 3}));
  EXPECT_TRUE(fresh_memory(last(g).op));
}

// Nodes whose target means nothing: everything below jit/ must work from op and attrs alone.
int opaque(Graph& g, const std::string& target_of_real, std::vector<Arg> args,
           std::vector<std::pair<std::string, Arg>> kwargs, TensorMeta meta) {
  frontend::ops::CanonicalOp c = frontend::ops::canonicalize(g, target_of_real, args, kwargs, meta);
  return g.add_call(c.op, std::move(c.attrs), "no.such.callable", std::move(args), std::move(kwargs),
                    std::move(meta));
}

TEST(CanonicalOps, JitNeverReadsTheTarget) {
  Graph g;
  int x = g.add_placeholder("x", tensor({8, 4}));
  int w = g.add_placeholder("w", tensor({4, 4}));
  int add = opaque(g, "operator.add", {Arg::node(x), Arg::real(1.5)}, {}, tensor({8, 4}));
  auto pw = lower_pointwise(g, g.node(add));
  ASSERT_TRUE(pw.has_value());
  EXPECT_EQ(pw->op, ScalarOp::Add);
  int sq = opaque(g, "operator.pow", {Arg::node(x), Arg::real(0.5)}, {}, tensor({8, 4}));
  ASSERT_TRUE(lower_pointwise(g, g.node(sq)).has_value());
  EXPECT_EQ(lower_pointwise(g, g.node(sq))->op, ScalarOp::Sqrt);
  int red = opaque(g, "method.sum", {Arg::node(x)}, {{"axis", Arg::integer(-1)}, {"keepdims", Arg::boolean(true)}},
                   tensor({8, 1}));
  auto r = lower_reduction(g, g.node(red));
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->reduced, (std::vector<bool>{false, true}));
  EXPECT_TRUE(r->keepdims);
  int mm = opaque(g, "operator.matmul", {Arg::node(x), Arg::node(w)}, {}, tensor({8, 4}));
  ASSERT_TRUE(lower_matmul(g, g.node(mm)).has_value());
  int t = opaque(g, "method.transpose", {Arg::node(x)}, {}, tensor({4, 8}));
  auto v = lower_view(g, g.node(t));
  ASSERT_TRUE(v.has_value());
  EXPECT_EQ(v->perm, (std::vector<int>{1, 0}));
  // Passes: a mutating op stays, a fresh buffer never merges, scalar arithmetic folds.
  int s = opaque(g, "sym_size", {Arg::node(x), Arg::integer(1)}, {}, scalar(DType::Int64));
  int k = opaque(g, "operator.mul", {Arg::node(s), Arg::integer(2)}, {}, scalar(DType::Int64));
  opaque(g, "operator.iadd", {Arg::node(x), Arg::real(1.0)}, {}, tensor({8, 4}));
  EXPECT_TRUE(has_side_effects(g.nodes().back()));
  int e1 = opaque(g, "numpy.empty_like", {Arg::node(x)}, {}, tensor({8, 4}));
  int e2 = opaque(g, "numpy.empty_like", {Arg::node(x)}, {}, tensor({8, 4}));
  g.set_output({Arg::node(add), Arg::node(sq), Arg::node(red), Arg::node(mm), Arg::node(t), Arg::node(k),
                Arg::node(e1), Arg::node(e2)});
  EXPECT_EQ(common_subexpression_elimination(g), 0);
  EXPECT_EQ(constant_fold(g), 2);  // x.shape[1] is 4, then 4 * 2
  EXPECT_EQ(g.outputs()[5], Arg::integer(8));
  EXPECT_EQ(dead_code_elimination(g), 0);  // the in-place add stays
}

}  // namespace
}  // namespace framejit::jit
