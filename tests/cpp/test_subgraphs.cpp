// test_subgraphs.cpp — control-flow nodes owning their bodies (Note [Subgraphs] in jit/ir/graph.h):
// the verifier's rules, the printer, and the graph passes inside bodies.
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "tests/cpp/canonical_calls.h"

#include "jit/passes/passes.h"

namespace framejit::jit {
namespace {

using test::scalar;
using test::tensor;

Arg n(int i) { return Arg::node(i); }

// A body taking `x` (f32[4]) and returning `ufunc`(x) (or x * 2.0 twice, for CSE).
std::shared_ptr<Graph> unary_body(const std::string& ufunc, DType out = DType::Float32) {
  auto g = std::make_shared<Graph>();
  int x = g->add_placeholder("x", tensor({4}));
  int y = test::add_call(*g, ufunc, {n(x)}, {}, tensor({4}, out));
  g->set_output({n(y)});
  return g;
}

// cond(p, true_fn, false_fn, (a,)) over a graph input `a`; the node's value is the tuple of the
// branches' outputs, taken apart by getitem.
Graph cond_graph(std::shared_ptr<Graph> on_true, std::shared_ptr<Graph> on_false) {
  Graph g;
  int p = g.add_placeholder("p", scalar(DType::Bool));
  int a = g.add_placeholder("a", tensor({4}));
  TensorMeta tuple;
  tuple.kind = ValueKind::Object;
  int c = g.add_call(OpKind::Cond, {}, "framejit.cond", {n(p), n(a)}, {}, tuple);
  g.mutable_node(c).subgraphs = {std::move(on_true), std::move(on_false)};
  int r = test::add_call(g, "operator.getitem", {n(c), Arg::integer(0)}, {}, tensor({4}));
  g.set_output({n(r)});
  return g;
}

TEST(Subgraphs, CondBranchesVerifyAndPrintUnderTheirNode) {
  Graph g = cond_graph(unary_body("numpy.exp"), unary_body("numpy.negative"));
  ASSERT_TRUE(g.verify()) << g.verify().message();
  EXPECT_EQ(g.to_string(),
            "def graph(p: \"bool\", a: \"f32[4]\"):\n"
            "    cond: \"object\" = framejit.cond(p, a)\n"
            "        # cond body 0:\n"
            "        def graph(x: \"f32[4]\"):\n"
            "            exp: \"f32[4]\" = numpy.exp(x)\n"
            "            return (exp,)\n"
            "        # cond body 1:\n"
            "        def graph(x: \"f32[4]\"):\n"
            "            negative: \"f32[4]\" = numpy.negative(x)\n"
            "            return (negative,)\n"
            "    getitem_1: \"f32[4]\" = operator.getitem(cond, 0)\n"
            "    return (getitem_1,)\n");
}

TEST(Subgraphs, VerifierNamesWhatTheBranchesDisagreeOn) {
  // One branch returns float64: the error names the output and both kinds.
  Graph dtype = cond_graph(unary_body("numpy.exp"), unary_body("numpy.exp", DType::Float64));
  Status s = dtype.verify();
  ASSERT_FALSE(s);
  EXPECT_NE(s.message().find("the branches' output 0 differs: f32[4] (rank 1) against f64[4] (rank 1)"),
            std::string::npos)
      << s.message();
  // A body that takes another number of values than the node passes.
  auto two = std::make_shared<Graph>();
  int x = two->add_placeholder("x", tensor({4}));
  int y = two->add_placeholder("y", tensor({4}));
  two->set_output({n(test::add_call(*two, "numpy.add", {n(x), n(y)}, {}, tensor({4})))});
  s = cond_graph(unary_body("numpy.exp"), two).verify();
  ASSERT_FALSE(s);
  EXPECT_NE(s.message().find("a body takes 2 values, the node passes 1"), std::string::npos) << s.message();
  // A broken body is reported as the node's.
  auto broken = unary_body("numpy.exp");
  broken->nodes().pop_back();  // no output
  s = cond_graph(unary_body("numpy.exp"), broken).verify();
  ASSERT_FALSE(s);
  EXPECT_NE(s.message().find("body 1: graph has no output node"), std::string::npos) << s.message();
  // Only control-flow nodes own bodies.
  Graph g = cond_graph(unary_body("numpy.exp"), unary_body("numpy.exp"));
  g.mutable_node(3).subgraphs = {unary_body("numpy.exp"), unary_body("numpy.exp")};
  s = g.verify();
  ASSERT_FALSE(s);
  EXPECT_NE(s.message().find("only control-flow nodes own subgraphs"), std::string::npos) << s.message();
}

TEST(Subgraphs, WhileLoopCarriesItsValuesKinds) {
  auto build = [](DType body_out, DType cond_out) {
    Graph g;
    int i = g.add_placeholder("i", scalar(DType::Int64));
    int a = g.add_placeholder("a", tensor({4}));
    auto cond_fn = std::make_shared<Graph>();
    int ci = cond_fn->add_placeholder("i", scalar(DType::Int64));
    cond_fn->add_placeholder("a", tensor({4}));
    int lt = test::add_call(*cond_fn, "operator.lt", {n(ci), Arg::integer(10)}, {}, scalar(cond_out));
    cond_fn->set_output({n(lt)});
    auto body_fn = std::make_shared<Graph>();
    int bi = body_fn->add_placeholder("i", scalar(DType::Int64));
    int ba = body_fn->add_placeholder("a", tensor({4}));
    int next = test::add_call(*body_fn, "operator.add", {n(bi), Arg::integer(1)}, {}, scalar(DType::Int64));
    int grown = test::add_call(*body_fn, "numpy.exp", {n(ba)}, {}, tensor({4}, body_out));
    body_fn->set_output({n(next), n(grown)});
    TensorMeta tuple;
    tuple.kind = ValueKind::Object;
    int w = g.add_call(OpKind::WhileLoop, {}, "framejit.while_loop", {n(i), n(a)}, {}, tuple);
    g.mutable_node(w).subgraphs = {cond_fn, body_fn};
    g.set_output({n(w)});
    return g;
  };
  Graph ok = build(DType::Float32, DType::Bool);
  EXPECT_TRUE(ok.verify()) << ok.verify().message();
  Status s = build(DType::Float64, DType::Bool).verify();
  ASSERT_FALSE(s);
  EXPECT_NE(s.message().find("carried value 1 enters as f32[4] (rank 1) and leaves the body as f64[4] (rank 1)"),
            std::string::npos)
      << s.message();
  s = build(DType::Float32, DType::Int64).verify();
  ASSERT_FALSE(s);
  EXPECT_NE(s.message().find("the condition must return one bool"), std::string::npos) << s.message();
}

TEST(Subgraphs, ScanTakesTheCarryAndASliceAndReturnsTheCarryAndY) {
  // scan over xs f32[5, 4] along dim 0 carrying c f32[4]: body (c, x) -> (c + x, exp(c)).
  auto build = [](DType carry_out, int64_t carried) {
    Graph g;
    int c = g.add_placeholder("c", tensor({4}));
    int xs = g.add_placeholder("xs", tensor({5, 4}));
    auto body = std::make_shared<Graph>();
    int bc = body->add_placeholder("c", tensor({4}));
    int bx = body->add_placeholder("x", tensor({4}));
    int next = test::add_call(*body, "operator.add", {n(bc), n(bx)}, {}, tensor({4}, carry_out));
    int y = test::add_call(*body, "numpy.exp", {n(bc)}, {}, tensor({4}));
    body->set_output({n(next), n(y)});
    TensorMeta tuple;
    tuple.kind = ValueKind::Object;
    int sc = g.add_call(OpKind::Scan, {}, "framejit.scan", {n(c), n(xs)},
                        {{"carried", Arg::integer(carried)}, {"dim", Arg::integer(0)}, {"reverse", Arg::boolean(false)}},
                        tuple);
    g.mutable_node(sc).subgraphs = {body};
    g.set_output({n(sc)});
    return g;
  };
  Graph ok = build(DType::Float32, 1);
  EXPECT_TRUE(ok.verify()) << ok.verify().message();
  EXPECT_NE(ok.to_string().find("framejit.scan(c, xs, carried=1, dim=0, reverse=False)"), std::string::npos) << ok.to_string();
  Status s = build(DType::Float64, 1).verify();
  ASSERT_FALSE(s);
  EXPECT_NE(s.message().find("carried value 0 enters as f32[4] (rank 1) and leaves the body as f64[4]"), std::string::npos)
      << s.message();
  s = build(DType::Float32, 0).verify();
  ASSERT_FALSE(s);
  EXPECT_NE(s.message().find("the body returns 2 values for 0 carried and y"), std::string::npos) << s.message();
}

TEST(Subgraphs, AssociativeScanCombinesTwoBatchesIntoOneLikeThem) {
  // associative_scan over xs f32[5, 4] along dim 0: body (a, b, k) -> a * k + b.
  auto build = [](DType out, bool extra_output) {
    Graph g;
    int xs = g.add_placeholder("xs", tensor({5, 4}));
    int k = g.add_placeholder("k", tensor({}));
    auto body = std::make_shared<Graph>();
    int a = body->add_placeholder("a", tensor({3, 4}));
    int b = body->add_placeholder("b", tensor({3, 4}));
    int bk = body->add_placeholder("k", tensor({}));
    int m = test::add_call(*body, "operator.mul", {n(a), n(bk)}, {}, tensor({3, 4}));
    int s = test::add_call(*body, "operator.add", {n(m), n(b)}, {}, tensor({3, 4}, out));
    body->set_output(extra_output ? std::vector<Arg>{n(s), n(m)} : std::vector<Arg>{n(s)});
    TensorMeta tuple;
    tuple.kind = ValueKind::Object;
    int sc = g.add_call(OpKind::AssociativeScan, {}, "framejit.associative_scan", {n(xs), n(k)},
                        {{"dim", Arg::integer(0)}, {"reverse", Arg::boolean(false)}}, tuple);
    g.mutable_node(sc).subgraphs = {body};
    g.set_output({n(sc)});
    return g;
  };
  Graph ok = build(DType::Float32, false);
  EXPECT_TRUE(ok.verify()) << ok.verify().message();
  EXPECT_NE(ok.to_string().find("framejit.associative_scan(xs, k, dim=0, reverse=False)"), std::string::npos)
      << ok.to_string();
  for (Graph bad : {build(DType::Float64, false), build(DType::Float32, true)}) {
    Status s = bad.verify();
    ASSERT_FALSE(s);
    EXPECT_NE(s.message().find("the body must return one value of xs's dtype and rank"), std::string::npos)
        << s.message();
  }
}

TEST(Subgraphs, PassesRunInsideBodies) {
  // A true branch with a dead call, a repeated subexpression and a constant expression.
  auto body = std::make_shared<Graph>();
  int x = body->add_placeholder("x", tensor({4}));
  test::add_call(*body, "numpy.log", {n(x)}, {}, tensor({4}));  // dead
  int m1 = test::add_call(*body, "operator.mul", {n(x), Arg::real(2.0)}, {}, tensor({4}));
  int m2 = test::add_call(*body, "operator.mul", {n(x), Arg::real(2.0)}, {}, tensor({4}));
  int s = test::add_call(*body, "operator.add", {n(m1), n(m2)}, {}, tensor({4}));
  body->set_output({n(s)});
  Graph g = cond_graph(body, unary_body("numpy.negative"));
  EXPECT_EQ(common_subexpression_elimination(g), 1);
  EXPECT_EQ(dead_code_elimination(g), 1);  // the log (CSE dropped the merged mul)
  ASSERT_TRUE(g.verify()) << g.verify().message();
  EXPECT_EQ(body->to_string(),
            "def graph(x: \"f32[4]\"):\n"
            "    mul: \"f32[4]\" = operator.mul(x, 2.0)\n"
            "    add: \"f32[4]\" = operator.add(mul, mul)\n"
            "    return (add,)\n");
  // Two cond nodes over the same operands stay two: bodies are not compared.
  Graph twice;
  int p = twice.add_placeholder("p", scalar(DType::Bool));
  int a = twice.add_placeholder("a", tensor({4}));
  TensorMeta tuple;
  tuple.kind = ValueKind::Object;
  int c1 = twice.add_call(OpKind::Cond, {}, "framejit.cond", {n(p), n(a)}, {}, tuple);
  twice.mutable_node(c1).subgraphs = {unary_body("numpy.exp"), unary_body("numpy.exp")};
  int c2 = twice.add_call(OpKind::Cond, {}, "framejit.cond", {n(p), n(a)}, {}, tuple);
  twice.mutable_node(c2).subgraphs = {unary_body("numpy.exp"), unary_body("numpy.negative")};
  twice.set_output({n(c1), n(c2)});
  EXPECT_EQ(common_subexpression_elimination(twice), 0);
  // An unused cond node goes, bodies and all.
  Graph unused = cond_graph(unary_body("numpy.exp"), unary_body("numpy.negative"));
  unused.set_output({n(1)});
  EXPECT_EQ(dead_code_elimination(unused), 2);
  EXPECT_TRUE(unused.verify()) << unused.verify().message();
}

}  // namespace
}  // namespace framejit::jit
