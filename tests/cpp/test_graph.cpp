// test_graph.cpp — Graph IR: naming, the printer (golden text), the verifier, queries, rebuild.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "jit/ir/graph.h"
#include "tests/cpp/canonical_calls.h"

namespace framejit::jit {
namespace {

using test::scalar;
using test::tensor;

// The graph of `def f(x, a): y = x * a; return y, y.sum(axis=0)` with a dynamic batch dim.
Graph example_graph() {
  Graph g;
  int x = g.add_placeholder("x", tensor({SymInt::symbol(0), 4}, DType::Float32));
  int a = g.add_placeholder("a", scalar(DType::Float64));
  g.add_symbol(x, 0, 8);
  int mul = test::add_call(g, "numpy.multiply", {Arg::node(x), Arg::node(a)}, {},
                       tensor({SymInt::symbol(0), 4}, DType::Float32));
  int sum = test::add_call(g, "method.sum", {Arg::node(mul)},
                       {{"axis", Arg::integer(0)}, {"keepdims", Arg::boolean(false)}},
                       tensor({4}, DType::Float32));
  g.set_output({Arg::node(mul), Arg::node(sum)});
  return g;
}

TEST(GraphPrinter, Golden) {
  Graph g = example_graph();
  EXPECT_EQ(g.to_string(),
            "# s0 = x.shape[0] (hint 8)\n"
            "def graph(x: \"f32[s0, 4]\", a: \"float\"):\n"
            "    multiply: \"f32[s0, 4]\" = numpy.multiply(x, a)\n"
            "    sum_1: \"f32[4]\" = method.sum(multiply, axis=0, keepdims=False)\n"
            "    return (multiply, sum_1)\n");
  EXPECT_TRUE(g.verify().is_ok()) << g.verify().message();
}

TEST(GraphPrinter, NoSymbolsSingleOutputAndZeroDim) {
  Graph g = test::numpy_graph();
  int x = g.add_placeholder("x", tensor({3, 4}, DType::Float64));
  int flag = g.add_placeholder("flag", scalar(DType::Bool));
  int n = g.add_placeholder("n", scalar(DType::Int64));
  int m = test::add_call(g, "operator.mul", {Arg::node(x), Arg::real(2.0)}, {},
                     tensor({3, 4}, DType::Float64));
  int s = test::add_call(g, "numpy.sum", {Arg::node(m)}, {}, tensor({}, DType::Float64));
  g.set_output({Arg::node(s)});
  (void)flag;
  (void)n;
  EXPECT_EQ(g.to_string(),
            "def graph(x: \"f64[3, 4]\", flag: \"bool\", n: \"int\"):\n"
            "    mul: \"f64[3, 4]\" = operator.mul(x, 2.0)\n"
            "    sum_1: \"f64[]\" = numpy.sum(mul)\n"
            "    return (sum_1,)\n");
}

TEST(GraphPrinter, SeveralSymbols) {
  Graph g;
  int x = g.add_placeholder("x", tensor({SymInt::symbol(0), SymInt::symbol(1)}, DType::Int32));
  g.add_symbol(x, 0, 8);
  g.add_symbol(x, 1, 16);
  int r = test::add_call(g, "method.reshape", {Arg::node(x), Arg::integer(-1)}, {},
                     tensor({SymInt::symbol(0) * SymInt::symbol(1)}, DType::Int32));
  g.set_output({Arg::node(r), Arg::integer(3)});
  EXPECT_EQ(g.to_string(),
            "# s0 = x.shape[0] (hint 8), s1 = x.shape[1] (hint 16)\n"
            "def graph(x: \"i32[s0, s1]\"):\n"
            "    reshape: \"i32[s0*s1]\" = method.reshape(x, -1)\n"
            "    return (reshape, 3)\n");
  EXPECT_TRUE(g.verify().is_ok()) << g.verify().message();
}

TEST(GraphPrinter, ArgsPrintAsPython) {
  Graph g = test::numpy_graph();
  int x = g.add_placeholder("x", tensor({2}, DType::Float32));
  g.set_output({});
  auto p = [&](const Arg& a) { return g.arg_to_string(a); };
  EXPECT_EQ(p(Arg::none()), "None");
  EXPECT_EQ(p(Arg::node(x)), "x");
  EXPECT_EQ(p(Arg::integer(-42)), "-42");
  EXPECT_EQ(p(Arg::boolean(true)), "True");
  EXPECT_EQ(p(Arg::boolean(false)), "False");
  EXPECT_EQ(p(Arg::real(1.0)), "1.0");
  EXPECT_EQ(p(Arg::real(0.5)), "0.5");
  EXPECT_EQ(p(Arg::real(0.1)), "0.1");
  EXPECT_EQ(p(Arg::real(-2.25)), "-2.25");
  EXPECT_EQ(p(Arg::real(-0.0)), "-0.0");
  EXPECT_EQ(p(Arg::real(123456.0)), "123456.0");
  EXPECT_EQ(p(Arg::real(1e16)), "1e+16");
  EXPECT_EQ(p(Arg::real(1e15)), "1000000000000000.0");
  EXPECT_EQ(p(Arg::real(1e-5)), "1e-05");
  EXPECT_EQ(p(Arg::real(0.0001)), "0.0001");
  EXPECT_EQ(p(Arg::real(1.5e300)), "1.5e+300");
  EXPECT_EQ(p(Arg::real(1.0 / 3.0)), "0.3333333333333333");
  EXPECT_EQ(p(Arg::real(std::numeric_limits<double>::infinity())), "float('inf')");
  EXPECT_EQ(p(Arg::real(-std::numeric_limits<double>::infinity())), "float('-inf')");
  EXPECT_EQ(p(Arg::real(std::nan(""))), "float('nan')");
  EXPECT_EQ(p(Arg::str("ij,jk->ik")), "'ij,jk->ik'");
  EXPECT_EQ(p(Arg::str("it's\n\\")), "'it\\'s\\n\\\\'");
  EXPECT_EQ(p(Arg::dtype(DType::Float32)), "numpy.float32");
  EXPECT_EQ(p(Arg::dtype(DType::Int64)), "numpy.int64");
  EXPECT_EQ(p(Arg::tuple({})), "()");
  EXPECT_EQ(p(Arg::tuple({Arg::integer(1)})), "(1,)");
  EXPECT_EQ(p(Arg::tuple({Arg::integer(1), Arg::node(x)})), "(1, x)");
  EXPECT_EQ(p(Arg::list({Arg::integer(1)})), "[1]");
  EXPECT_EQ(p(Arg::list({})), "[]");
  EXPECT_EQ(p(Arg::slice(Arg::none(), Arg::integer(3), Arg::none())), "slice(None, 3, None)");
  EXPECT_EQ(p(Arg::ellipsis()), "...");
  EXPECT_EQ(
      p(Arg::tuple({Arg::ellipsis(), Arg::slice(Arg::integer(1), Arg::none(), Arg::integer(-1)),
                    Arg::none()})),
      "(..., slice(1, None, -1), None)");
}

TEST(GraphPrinter, KwargsAndEmptyGraph) {
  Graph g;
  g.set_output({});
  EXPECT_EQ(g.to_string(), "def graph():\n    return ()\n");
  Graph empty;
  EXPECT_EQ(empty.to_string(), "def graph():\n    pass\n");
}

TEST(TensorMeta, Strings) {
  EXPECT_EQ(tensor({SymInt::symbol(0), 4}, DType::Float32).to_string(), "f32[s0, 4]");
  EXPECT_EQ(tensor({}, DType::Float32).to_string(), "f32[]");
  EXPECT_EQ(tensor({1}, DType::Bool).to_string(), "b8[1]");
  EXPECT_EQ(tensor({floordiv(SymInt::symbol(0) + 1, 2)}, DType::Int64).to_string(),
            "i64[(s0 + 1)//2]");
  EXPECT_EQ(scalar(DType::Int64).to_string(), "int");
  EXPECT_EQ(scalar(DType::Float64).to_string(), "float");
  EXPECT_EQ(scalar(DType::Bool).to_string(), "bool");
}

TEST(GraphNames, UniqueAndValid) {
  Graph g;
  TensorMeta t = tensor({2}, DType::Float32);
  EXPECT_EQ(g.node(g.add_placeholder("x", t)).name, "x");
  EXPECT_EQ(g.node(g.add_placeholder("x", t)).name, "x_1");
  EXPECT_EQ(g.node(g.add_placeholder("x", t)).name, "x_2");
  EXPECT_EQ(g.node(g.add_placeholder("x_1", t)).name, "x_1_1");
  EXPECT_EQ(g.node(g.add_placeholder("self.weight", t)).name, "self_weight");
  EXPECT_EQ(g.node(g.add_placeholder("0x", t)).name, "_0x");
  EXPECT_EQ(g.node(g.add_placeholder("", t)).name, "_");
  EXPECT_EQ(g.node(g.add_placeholder("lambda", t)).name, "lambda_1");
  EXPECT_EQ(g.node(g.add_placeholder("numpy", t)).name, "numpy_1");
  EXPECT_EQ(g.node(g.add_placeholder("sum", t)).name, "sum_1");
  EXPECT_EQ(g.node(test::add_call(g, "numpy.add", {Arg::node(0), Arg::node(1)}, {}, t)).name, "add");
  EXPECT_EQ(g.node(test::add_call(g, "numpy.add", {Arg::node(0), Arg::node(1)}, {}, t)).name, "add_1");
  EXPECT_EQ(g.node(test::add_call(g, "operator.add", {Arg::node(0), Arg::node(1)}, {}, t)).name, "add_2");
  EXPECT_EQ(g.node(test::add_call(g, "operator.mul", {Arg::node(0), Arg::node(1)}, {}, t)).name, "mul");
  EXPECT_EQ(g.node(test::add_call(g, "method.sum", {Arg::node(0)}, {}, t)).name, "sum_2");
  EXPECT_EQ(g.node(test::add_call(g, "numpy.linalg.norm", {Arg::node(0)}, {}, t)).name, "norm");
  // A dot-less target prints as a bare callee; its node must not shadow it.
  EXPECT_EQ(g.node(test::add_call(g, "getitem", {Arg::node(0), Arg::integer(0)}, {}, t)).name,
            "getitem_1");
  EXPECT_EQ(g.node(test::add_call(g, "method.__getitem__", {Arg::node(0)}, {}, t)).name, "__getitem__");
  g.set_output({});
  EXPECT_EQ(g.nodes().back().name, "output");
  EXPECT_TRUE(g.verify().is_ok()) << g.verify().message();
}

TEST(Arg, Equality) {
  EXPECT_EQ(Arg::integer(3), Arg::integer(3));
  EXPECT_FALSE(Arg::integer(3) == Arg::integer(4));
  EXPECT_FALSE(Arg::integer(1) == Arg::boolean(true));
  EXPECT_FALSE(Arg::integer(1) == Arg::real(1.0));
  EXPECT_FALSE(Arg::integer(1) == Arg::node(1));
  EXPECT_EQ(Arg::real(0.5), Arg::real(0.5));
  EXPECT_FALSE(Arg::real(0.0) == Arg::real(-0.0));
  EXPECT_EQ(Arg::real(std::nan("")), Arg::real(std::nan("")));
  EXPECT_EQ(Arg::str("a"), Arg::str("a"));
  EXPECT_FALSE(Arg::str("a") == Arg::str("b"));
  EXPECT_EQ(Arg::tuple({Arg::integer(1), Arg::none()}), Arg::tuple({Arg::integer(1), Arg::none()}));
  EXPECT_FALSE(Arg::tuple({Arg::integer(1)}) == Arg::list({Arg::integer(1)}));
  EXPECT_FALSE(Arg::tuple({Arg::integer(1)}) == Arg::tuple({Arg::integer(1), Arg::integer(1)}));
  EXPECT_EQ(Arg::dtype(DType::Float32), Arg::dtype(DType::Float32));
  EXPECT_FALSE(Arg::dtype(DType::Float32) == Arg::dtype(DType::Float64));
  EXPECT_EQ(Arg::ellipsis(), Arg::ellipsis());
}

TEST(GraphQueries, UseCountsPlaceholdersOutputs) {
  Graph g = example_graph();
  EXPECT_EQ(g.placeholders(), (std::vector<int>{0, 1}));
  EXPECT_EQ(g.num_calls(), 2);
  ASSERT_EQ(g.outputs().size(), 2u);
  EXPECT_EQ(g.outputs()[0], Arg::node(2));
  EXPECT_EQ(g.outputs()[1], Arg::node(3));
  // x: by mul; a: by mul; mul: by sum and the output; sum: by the output; output: none.
  EXPECT_EQ(g.use_counts(), (std::vector<int>{1, 1, 2, 1, 0}));
  Graph none;
  EXPECT_TRUE(none.outputs().empty());
}

TEST(GraphQueries, SetOutputTwiceReplaces) {
  Graph g = example_graph();
  g.set_output({Arg::node(3)});
  EXPECT_EQ(g.nodes().size(), 5u);
  ASSERT_EQ(g.outputs().size(), 1u);
  EXPECT_EQ(g.outputs()[0], Arg::node(3));
}

// Each broken graph must fail verify() with a message naming what is wrong.
void expect_invalid(const Graph& g, const std::string& fragment) {
  Status s = g.verify();
  EXPECT_FALSE(s.is_ok()) << "expected failure mentioning: " << fragment;
  EXPECT_EQ(s.code(), StatusCode::Internal);
  EXPECT_NE(s.message().find(fragment), std::string::npos) << s.message();
}

TEST(GraphVerify, ForwardReference) {
  Graph g = example_graph();
  g.nodes()[2].args[0] = Arg::node(3);
  expect_invalid(g, "node 2 'multiply': argument refers to node 3");
}

TEST(GraphVerify, SelfAndOutOfRangeReferences) {
  Graph g = example_graph();
  g.nodes()[3].kwargs[0].second = Arg::tuple({Arg::node(3)});
  expect_invalid(g, "node 3 'sum_1': argument refers to node 3");
  Graph h = example_graph();
  h.nodes()[4].args[0].items[1] = Arg::node(-1);
  expect_invalid(h, "'output': argument refers to node -1");
  Graph k = example_graph();
  k.nodes()[4].args[0].items[1] = Arg::node(99);
  expect_invalid(k, "refers to node 99");
}

TEST(GraphVerify, PlaceholderAfterCall) {
  Graph g;
  int x = g.add_placeholder("x", tensor({2}, DType::Float32));
  test::add_call(g, "numpy.exp", {Arg::node(x)}, {}, tensor({2}, DType::Float32));
  g.add_placeholder("late", tensor({2}, DType::Float32));
  g.set_output({});
  expect_invalid(g, "node 2 'late': placeholder after a call");
}

TEST(GraphVerify, OutputRules) {
  Graph none = example_graph();
  none.nodes().pop_back();
  expect_invalid(none, "no output");

  Graph not_last = example_graph();
  test::add_call(not_last, "numpy.exp", {Arg::node(0)}, {}, tensor({2}, DType::Float32));
  expect_invalid(not_last, "'output': output is not last");

  Graph two = example_graph();
  two.nodes().push_back(two.nodes().back());
  two.nodes().back().name = "output_1";
  expect_invalid(two, "node 4 'output': output is not last");

  Graph bad_args = example_graph();
  bad_args.nodes().back().args = {Arg::node(2)};
  expect_invalid(bad_args, "output args must be one tuple");
}

TEST(GraphVerify, Names) {
  Graph dup = example_graph();
  dup.nodes()[3].name = "multiply";
  expect_invalid(dup, "node 3 'multiply': duplicate name");
  Graph bad = example_graph();
  bad.nodes()[2].name = "not valid";
  expect_invalid(bad, "node 2 'not valid': name is not a Python identifier");
  Graph kw = example_graph();
  kw.nodes()[2].name = "class";
  expect_invalid(kw, "'class': name is not a Python identifier");
}

TEST(GraphVerify, Symbols) {
  Graph unknown = example_graph();
  unknown.nodes()[2].meta.shape[1] = SymInt::symbol(3) * 2;
  expect_invalid(unknown, "node 2 'multiply': shape uses unknown symbol s3");

  Graph not_placeholder = example_graph();
  not_placeholder.add_symbol(2, 0, 4);
  expect_invalid(not_placeholder, "symbol s1 refers to node 2, which is not a placeholder");

  Graph bad_dim = example_graph();
  bad_dim.add_symbol(0, 5, 4);
  expect_invalid(bad_dim, "symbol s1 is dim 5 of node 0 'x'");
}

TEST(GraphVerify, CallWithoutTarget) {
  Graph g = example_graph();
  g.nodes()[2].target.clear();
  expect_invalid(g, "node 2 'multiply': call without a target");
}

TEST(GraphRebuild, RemapsArgsAndSymbols) {
  // Drop placeholder 'a' (node 1) and the multiply; sum now reads x directly.
  Graph g = example_graph();
  std::vector<Node> nodes = {g.node(0), g.node(3), g.node(4)};
  nodes[1].args[0] = Arg::node(0);
  nodes[2].args[0] = Arg::tuple({Arg::node(3), Arg::node(0)});
  g.rebuild(std::move(nodes), {0, -1, -1, 1, 2});
  ASSERT_TRUE(g.verify().is_ok()) << g.verify().message();
  EXPECT_EQ(g.outputs()[0], Arg::node(1));
  EXPECT_EQ(g.outputs()[1], Arg::node(0));
  EXPECT_EQ(g.symbols()[0].placeholder, 0);
  EXPECT_EQ(g.to_string(),
            "# s0 = x.shape[0] (hint 8)\n"
            "def graph(x: \"f32[s0, 4]\"):\n"
            "    sum_1: \"f32[4]\" = method.sum(x, axis=0, keepdims=False)\n"
            "    return (sum_1, x)\n");
  // Names given out before the rebuild stay taken.
  int again = test::add_call(g, "numpy.multiply", {Arg::node(0), Arg::node(0)}, {},
                         tensor({SymInt::symbol(0), 4}, DType::Float32));
  EXPECT_EQ(g.node(again).name, "multiply_1");
}

TEST(GraphRebuild, DroppedReferenceIsCaught) {
  Graph g = example_graph();
  std::vector<Node> nodes = {g.node(0), g.node(1), g.node(3), g.node(4)};
  g.rebuild(std::move(nodes), {0, 1, -1, 2, 3});  // sum still reads the dropped multiply
  expect_invalid(g, "'sum_1': argument refers to node -1");
}

TEST(GraphRebuild, SymbolPlaceholderMoves) {
  Graph g;
  int a = g.add_placeholder("a", scalar(DType::Float64));
  int x = g.add_placeholder("x", tensor({SymInt::symbol(0)}, DType::Float32));
  g.add_symbol(x, 0, 5);
  g.set_output({Arg::node(x)});
  (void)a;
  std::vector<Node> nodes = {g.node(1), g.node(2)};
  g.rebuild(std::move(nodes), {-1, 0, 1});
  EXPECT_EQ(g.symbols()[0].placeholder, 0);
  EXPECT_TRUE(g.verify().is_ok()) << g.verify().message();
}

}  // namespace
}  // namespace framejit::jit
