// test_passes.cpp — DCE, CSE, constant folding and the graph-pass pipeline, with golden IR text.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>

#include "tests/cpp/canonical_calls.h"

#include "jit/ir/element_loop.h"
#include "jit/passes/passes.h"
#include "jit/pipeline.h"
#include "runtime/log.h"

namespace framejit::jit {
namespace {

using test::scalar;
using test::tensor;

Arg n(int i) { return Arg::node(i); }

// ----- DCE -------------------------------------------------------------------------------------

TEST(DeadCodeElimination, RemovesUnusedChainsKeepsEffects) {
  Graph g;
  int x = g.add_placeholder("x", tensor({4}));
  int unused_input = g.add_placeholder("y", tensor({4}));
  int e = test::add_call(g, "numpy.exp", {n(x)}, {}, tensor({4}));
  test::add_call(g, "numpy.log", {n(e)}, {}, tensor({4}));
  int neg = test::add_call(g, "numpy.negative", {n(x)}, {}, tensor({4}));
  test::add_call(g, "operator.iadd", {n(x), Arg::real(1.0)}, {}, tensor({4}));  // mutates x
  test::add_call(g, "numpy.add", {n(x), n(x)}, {{"out", n(x)}}, tensor({4}));   // writes x
  g.set_output({n(neg)});
  (void)unused_input;

  EXPECT_EQ(dead_code_elimination(g), 2);
  ASSERT_TRUE(g.verify().is_ok()) << g.verify().message();
  EXPECT_EQ(g.to_string(),
            "def graph(x: \"f32[4]\", y: \"f32[4]\"):\n"
            "    negative: \"f32[4]\" = numpy.negative(x)\n"
            "    iadd: \"f32[4]\" = operator.iadd(x, 1.0)\n"
            "    add: \"f32[4]\" = numpy.add(x, x, out=x)\n"
            "    return (negative,)\n");
  EXPECT_EQ(dead_code_elimination(g), 0);
}

TEST(DeadCodeElimination, KeepsWhatTheOutputAndLiveNodesUse) {
  Graph g;
  int x = g.add_placeholder("x", tensor({4}));
  int a = test::add_call(g, "numpy.exp", {n(x)}, {}, tensor({4}));
  int b = test::add_call(g, "method.reshape", {n(a), Arg::tuple({Arg::integer(2), Arg::integer(2)})}, {},
                     tensor({2, 2}));
  int c = test::add_call(g, "numpy.sum", {n(b)}, {{"axis", Arg::tuple({Arg::integer(0)})}}, tensor({2}));
  g.set_output({n(c), Arg::integer(1)});
  EXPECT_EQ(dead_code_elimination(g), 0);
  EXPECT_EQ(g.num_calls(), 3);
}

TEST(DeadCodeElimination, KeepsLoopsThatMayRaise) {
  // A compiled loop whose results nothing reads still runs when it may stop with an error (a load
  // whose index may be out of bounds), as CPython's loop would raise; one that cannot fail goes.
  auto loop_node = [](Graph& g, int x, bool loads) {
    auto loop = std::make_shared<ElementLoop>();
    loop->arrays.push_back({rt::DType::Float64, 1, false});
    loop->blocks.emplace_back();
    const int i = loop->new_var(EType::Int);
    EInstr c;
    c.op = EOp::Const;
    c.dst = i;
    loop->blocks[0].instrs.push_back(c);
    if (loads) {
      EInstr ld;
      ld.op = EOp::Load;
      ld.type = EType::Float;
      ld.array = 0;
      ld.index = {i};
      ld.dst = loop->new_var(EType::Float);
      loop->blocks[0].instrs.push_back(ld);
    }
    EInstr exit;
    exit.op = EOp::Exit;
    loop->blocks[0].instrs.push_back(exit);
    OpAttrs attrs;
    attrs.element_loop = loop;
    jit::TensorMeta object;
    object.kind = ValueKind::Object;
    return g.add_call(OpKind::Loop, std::move(attrs), "framejit.loop", {n(x)}, {}, object);
  };
  Graph g;
  int x = g.add_placeholder("x", tensor({4}));
  loop_node(g, x, true);
  loop_node(g, x, false);
  g.set_output({n(x)});
  EXPECT_EQ(dead_code_elimination(g), 1);
  EXPECT_EQ(g.num_calls(), 1);
}

TEST(SideEffects, Classification) {
  auto call = [](std::string target, std::vector<std::pair<std::string, Arg>> kwargs = {}) {
    return test::call_node(std::move(target), std::move(kwargs));
  };
  EXPECT_TRUE(has_side_effects(call("operator.iadd")));
  EXPECT_TRUE(has_side_effects(call("operator.setitem")));
  EXPECT_TRUE(has_side_effects(call("numpy.copyto")));
  EXPECT_TRUE(has_side_effects(call("method.fill")));
  EXPECT_TRUE(has_side_effects(call("method.__imul__")));
  EXPECT_TRUE(has_side_effects(call("numpy.add.at")));
  EXPECT_TRUE(has_side_effects(call("numpy.random.rand")));
  EXPECT_TRUE(has_side_effects(call("numpy.add", {{"out", Arg::node(0)}})));
  EXPECT_FALSE(has_side_effects(call("numpy.add", {{"out", Arg::none()}})));
  EXPECT_FALSE(has_side_effects(call("numpy.add")));
  EXPECT_FALSE(has_side_effects(call("operator.add")));
  EXPECT_FALSE(has_side_effects(call("operator.index")));
  EXPECT_FALSE(has_side_effects(call("method.__getitem__")));
}

TEST(DeadCodeElimination, KeepsIntegerPowerThatMayRaise) {
  // Found by the fuzzer: `y = x ** x` with nothing using y must still raise for x < 0.
  Graph g;
  int x = g.add_placeholder("x", tensor({4}, DType::Int64));
  int p = test::add_call(g, "operator.pow", {n(x), n(x)}, {}, tensor({4}, DType::Int64));
  test::add_call(g, "operator.pow", {n(x), Arg::integer(2)}, {}, tensor({4}, DType::Int64));
  int f = g.add_placeholder("f", tensor({4}));
  test::add_call(g, "numpy.power", {n(f), n(f)}, {}, tensor({4}));
  g.set_output({n(x)});
  EXPECT_TRUE(may_raise_on_values(g, g.node(p)));
  EXPECT_EQ(dead_code_elimination(g), 2);  // the constant and the float power go
  EXPECT_EQ(g.num_calls(), 1);
}

TEST(DeadCodeElimination, KeepsEmptyReductionThatMayRaise) {
  // Found by the fuzzer: an unused np.min(x[1:-1]) must still raise when len(x) == 2.
  Graph g;
  int x = g.add_placeholder("x", tensor({SymInt::symbol(0)}));
  g.add_symbol(x, 0, 16);
  int mn = test::add_call(g, "numpy.min", {n(x)}, {}, scalar(DType::Float32));
  int y = g.add_placeholder("y", tensor({4}));
  test::add_call(g, "method.max", {n(y)}, {}, scalar(DType::Float32));  // static size: cannot raise
  test::add_call(g, "numpy.sum", {n(x)}, {}, scalar(DType::Float32));   // has an identity
  g.set_output({n(x)});
  EXPECT_TRUE(may_raise_on_values(g, g.node(mn)));
  EXPECT_EQ(dead_code_elimination(g), 2);
  EXPECT_EQ(g.num_calls(), 1);
}

// ----- CSE -------------------------------------------------------------------------------------

TEST(CommonSubexpressionElimination, MergesTransitively) {
  Graph g;
  int x = g.add_placeholder("x", tensor({4}));
  int y = g.add_placeholder("y", tensor({4}));
  int a = test::add_call(g, "numpy.add", {n(x), n(y)}, {}, tensor({4}));
  int b = test::add_call(g, "numpy.add", {n(x), n(y)}, {}, tensor({4}));
  int ma = test::add_call(g, "numpy.multiply", {n(a), Arg::integer(2)}, {}, tensor({4}));
  int mb = test::add_call(g, "numpy.multiply", {n(b), Arg::integer(2)}, {}, tensor({4}));
  int s = test::add_call(g, "numpy.subtract", {n(ma), n(mb)}, {}, tensor({4}));
  g.set_output({n(s)});

  EXPECT_EQ(common_subexpression_elimination(g), 2);
  ASSERT_TRUE(g.verify().is_ok()) << g.verify().message();
  EXPECT_EQ(g.to_string(),
            "def graph(x: \"f32[4]\", y: \"f32[4]\"):\n"
            "    add: \"f32[4]\" = numpy.add(x, y)\n"
            "    multiply: \"f32[4]\" = numpy.multiply(add, 2)\n"
            "    subtract: \"f32[4]\" = numpy.subtract(multiply, multiply)\n"
            "    return (subtract,)\n");
  EXPECT_EQ(common_subexpression_elimination(g), 0);
}

TEST(CommonSubexpressionElimination, KeyIsTargetArgsAndKwargs) {
  Graph g;
  int x = g.add_placeholder("x", tensor({4, 4}));
  int s1 =
      test::add_call(g, "numpy.sum", {n(x)}, {{"axis", Arg::integer(0)}, {"keepdims", Arg::boolean(true)}},
                 tensor({1, 4}));
  int s2 =
      test::add_call(g, "numpy.sum", {n(x)}, {{"keepdims", Arg::boolean(true)}, {"axis", Arg::integer(0)}},
                 tensor({1, 4}));  // same call, keywords in another order
  int s3 =
      test::add_call(g, "numpy.sum", {n(x)}, {{"axis", Arg::integer(1)}, {"keepdims", Arg::boolean(true)}},
                 tensor({4, 1}));
  int s4 = test::add_call(g, "method.sum", {n(x)},
                      {{"axis", Arg::integer(0)}, {"keepdims", Arg::boolean(true)}},
                      tensor({1, 4}));  // another target
  int m1 = test::add_call(g, "numpy.multiply", {n(x), Arg::real(0.0)}, {}, tensor({4, 4}));
  int m2 = test::add_call(g, "numpy.multiply", {n(x), Arg::real(-0.0)}, {}, tensor({4, 4}));
  int m3 = test::add_call(g, "numpy.multiply", {n(x), Arg::integer(0)}, {}, tensor({4, 4}));
  int t = test::add_call(g, "numpy.stack", {Arg::list({n(s1), n(s2), n(s3), n(s4), n(m1), n(m2), n(m3)})},
                     {}, tensor({7, 4, 4}));
  g.set_output({n(t)});

  EXPECT_EQ(common_subexpression_elimination(g), 1);
  ASSERT_TRUE(g.verify().is_ok()) << g.verify().message();
  EXPECT_EQ(g.node(g.num_calls()).args[0],  // the stack node, now at index 7
            Arg::list({n(1), n(1), n(2), n(3), n(4), n(5), n(6)}));
}

TEST(CommonSubexpressionElimination, FreshBuffersNeverMerge) {
  Graph g;
  Arg shape = Arg::tuple({Arg::integer(3)});
  int e1 = test::add_call(g, "numpy.empty", {shape}, {{"dtype", Arg::dtype(DType::Float32)}}, tensor({3}));
  int e2 = test::add_call(g, "numpy.empty", {shape}, {{"dtype", Arg::dtype(DType::Float32)}}, tensor({3}));
  int l1 = test::add_call(g, "numpy.empty_like", {n(e1)}, {}, tensor({3}));
  int l2 = test::add_call(g, "numpy.empty_like", {n(e1)}, {}, tensor({3}));
  int s =
      test::add_call(g, "numpy.concatenate", {Arg::tuple({n(e1), n(e2), n(l1), n(l2)})}, {}, tensor({12}));
  g.set_output({n(s)});
  EXPECT_EQ(common_subexpression_elimination(g), 0);
  EXPECT_EQ(g.num_calls(), 5);
}

TEST(CommonSubexpressionElimination, TwoReturnedNodesStayDistinct) {
  Graph g;
  int x = g.add_placeholder("x", tensor({4}));
  int a = test::add_call(g, "numpy.exp", {n(x)}, {}, tensor({4}));
  int b = test::add_call(g, "numpy.exp", {n(x)}, {}, tensor({4}));
  g.set_output({n(a), n(b)});
  EXPECT_EQ(common_subexpression_elimination(g), 0);
  EXPECT_EQ(g.num_calls(), 2);
}

TEST(CommonSubexpressionElimination, OneReturnedNodeMerges) {
  Graph g;
  int x = g.add_placeholder("x", tensor({4}));
  int a = test::add_call(g, "numpy.exp", {n(x)}, {}, tensor({4}));
  int b = test::add_call(g, "numpy.exp", {n(x)}, {}, tensor({4}));
  int c = test::add_call(g, "numpy.add", {n(a), n(x)}, {}, tensor({4}));
  g.set_output({n(b), n(c)});
  EXPECT_EQ(common_subexpression_elimination(g), 1);
  EXPECT_EQ(g.to_string(),
            "def graph(x: \"f32[4]\"):\n"
            "    exp: \"f32[4]\" = numpy.exp(x)\n"
            "    add: \"f32[4]\" = numpy.add(exp, x)\n"
            "    return (exp, add)\n");
}

TEST(CommonSubexpressionElimination, SurvivorInheritsReturnedSlot) {
  // a is not returned, b and c are: b may merge into a, but then a is returned, so c may not.
  Graph g;
  int x = g.add_placeholder("x", tensor({4}));
  int a = test::add_call(g, "numpy.exp", {n(x)}, {}, tensor({4}));
  int b = test::add_call(g, "numpy.exp", {n(x)}, {}, tensor({4}));
  int c = test::add_call(g, "numpy.exp", {n(x)}, {}, tensor({4}));
  int d = test::add_call(g, "numpy.negative", {n(a)}, {}, tensor({4}));
  g.set_output({n(b), n(c), n(d)});
  EXPECT_EQ(common_subexpression_elimination(g), 1);
  ASSERT_TRUE(g.verify().is_ok()) << g.verify().message();
  ASSERT_EQ(g.outputs().size(), 3u);
  EXPECT_FALSE(g.outputs()[0] == g.outputs()[1]);
}

TEST(CommonSubexpressionElimination, MutationSeparatesEqualExpressions) {
  // a = x * 2; x += 1; b = x * 2 — a and b differ.
  Graph g;
  int x = g.add_placeholder("x", tensor({4}));
  int a = test::add_call(g, "numpy.multiply", {n(x), Arg::integer(2)}, {}, tensor({4}));
  test::add_call(g, "operator.iadd", {n(x), Arg::integer(1)}, {}, tensor({4}));
  test::add_call(g, "operator.iadd", {n(x), Arg::integer(1)}, {}, tensor({4}));
  int b = test::add_call(g, "numpy.multiply", {n(x), Arg::integer(2)}, {}, tensor({4}));
  int c = test::add_call(g, "numpy.multiply", {n(x), Arg::integer(2)}, {}, tensor({4}));
  int s = test::add_call(g, "numpy.add", {n(a), n(b)}, {}, tensor({4}));
  int t = test::add_call(g, "numpy.add", {n(s), n(c)}, {}, tensor({4}));
  g.set_output({n(t)});
  // Only c into b; the two increments both stay.
  EXPECT_EQ(common_subexpression_elimination(g), 1);
  EXPECT_EQ(g.num_calls(), 6);
}

// ----- Constant folding ------------------------------------------------------------------------

// Folds `target(args...)` alone in a graph and returns what the output became.
Arg fold_one(const std::string& target, std::vector<Arg> args, int expected_folds = 1) {
  Graph g;
  int c = test::add_call(g, target, std::move(args), {}, scalar(DType::Int64));
  g.set_output({n(c)});
  EXPECT_EQ(constant_fold(g), expected_folds) << target;
  EXPECT_TRUE(g.verify().is_ok()) << g.verify().message();
  return g.outputs().at(0);
}

TEST(ConstantFold, IntegerArithmeticHasPythonSemantics) {
  using A = Arg;
  EXPECT_EQ(fold_one("operator.add", {A::integer(2), A::integer(3)}), A::integer(5));
  EXPECT_EQ(fold_one("operator.sub", {A::integer(2), A::integer(3)}), A::integer(-1));
  EXPECT_EQ(fold_one("operator.mul", {A::integer(-4), A::integer(3)}), A::integer(-12));
  EXPECT_EQ(fold_one("operator.floordiv", {A::integer(-7), A::integer(2)}), A::integer(-4));
  EXPECT_EQ(fold_one("operator.floordiv", {A::integer(7), A::integer(-2)}), A::integer(-4));
  EXPECT_EQ(fold_one("operator.mod", {A::integer(-7), A::integer(2)}), A::integer(1));
  EXPECT_EQ(fold_one("operator.mod", {A::integer(7), A::integer(-2)}), A::integer(-1));
  EXPECT_EQ(fold_one("operator.truediv", {A::integer(7), A::integer(2)}), A::real(3.5));
  EXPECT_EQ(fold_one("operator.truediv", {A::integer(6), A::integer(3)}), A::real(2.0));
  EXPECT_EQ(fold_one("operator.neg", {A::integer(5)}), A::integer(-5));
  // bool is an int in arithmetic.
  EXPECT_EQ(fold_one("operator.add", {A::boolean(true), A::boolean(true)}), A::integer(2));
  EXPECT_EQ(fold_one("operator.neg", {A::boolean(true)}), A::integer(-1));
  EXPECT_EQ(fold_one("operator.mul", {A::boolean(false), A::integer(9)}), A::integer(0));
}

TEST(ConstantFold, FloatArithmeticHasPythonSemantics) {
  using A = Arg;
  EXPECT_EQ(fold_one("operator.add", {A::real(0.5), A::integer(1)}), A::real(1.5));
  EXPECT_EQ(fold_one("operator.mul", {A::real(0.5), A::boolean(true)}), A::real(0.5));
  EXPECT_EQ(fold_one("operator.floordiv", {A::real(-7.0), A::integer(2)}), A::real(-4.0));
  EXPECT_EQ(fold_one("operator.mod", {A::real(7.5), A::integer(-2)}), A::real(-0.5));
  EXPECT_EQ(fold_one("operator.mod", {A::real(-0.0), A::integer(3)}), A::real(0.0));
  EXPECT_EQ(fold_one("operator.mod", {A::real(6.0), A::real(-3.0)}), A::real(-0.0));
  // Python: 1.0 // 0.1 == 9.0 and 1.0 % 0.1 == 0.09999999999999995.
  EXPECT_EQ(fold_one("operator.floordiv", {A::real(1.0), A::real(0.1)}), A::real(9.0));
  EXPECT_EQ(fold_one("operator.mod", {A::real(1.0), A::real(0.1)}), A::real(0.09999999999999995));
  EXPECT_EQ(fold_one("operator.neg", {A::real(0.0)}), A::real(-0.0));
  EXPECT_EQ(fold_one("operator.truediv", {A::real(1.0), A::integer(4)}), A::real(0.25));
}

TEST(ConstantFold, LeavesWhatPythonWouldRaiseOrInt64CannotHold) {
  using A = Arg;
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
  EXPECT_TRUE(fold_one("operator.floordiv", {A::integer(1), A::integer(0)}, 0).is_node());
  EXPECT_TRUE(fold_one("operator.mod", {A::integer(1), A::integer(0)}, 0).is_node());
  EXPECT_TRUE(fold_one("operator.truediv", {A::integer(1), A::integer(0)}, 0).is_node());
  EXPECT_TRUE(fold_one("operator.truediv", {A::real(1.0), A::real(0.0)}, 0).is_node());
  EXPECT_TRUE(fold_one("operator.floordiv", {A::real(1.0), A::boolean(false)}, 0).is_node());
  EXPECT_TRUE(fold_one("operator.mod", {A::real(1.0), A::real(-0.0)}, 0).is_node());
  EXPECT_TRUE(fold_one("operator.add", {A::integer(kMax), A::integer(1)}, 0).is_node());
  EXPECT_TRUE(fold_one("operator.mul", {A::integer(kMax), A::integer(2)}, 0).is_node());
  EXPECT_TRUE(fold_one("operator.neg", {A::integer(kMin)}, 0).is_node());
  EXPECT_TRUE(fold_one("operator.floordiv", {A::integer(kMin), A::integer(-1)}, 0).is_node());
  EXPECT_TRUE(fold_one("operator.truediv", {A::integer(kMax), A::integer(3)}, 0).is_node());
  // Not arithmetic, or not constants.
  EXPECT_TRUE(fold_one("operator.pow", {A::integer(2), A::integer(3)}, 0).is_node());
  EXPECT_TRUE(fold_one("numpy.add", {A::integer(2), A::integer(3)}, 0).is_node());
  EXPECT_TRUE(fold_one("operator.add", {A::integer(2), A::str("3")}, 0).is_node());
  EXPECT_TRUE(fold_one("operator.add", {A::integer(2)}, 0).is_node());
}

TEST(ConstantFold, StaticSizesFoldThroughChains) {
  Graph g;
  int x = g.add_placeholder("x", tensor({SymInt::symbol(0), 4}));
  g.add_symbol(x, 0, 8);
  int d1 = test::add_call(g, "sym_size", {n(x), Arg::integer(1)}, {}, scalar(DType::Int64));
  int d0 = test::add_call(g, "sym_size", {n(x), Arg::integer(0)}, {}, scalar(DType::Int64));
  int last = test::add_call(g, "sym_size", {n(x), Arg::integer(-1)}, {}, scalar(DType::Int64));
  int twice = test::add_call(g, "operator.mul", {n(d1), Arg::integer(2)}, {}, scalar(DType::Int64));
  int half = test::add_call(g, "operator.floordiv", {n(twice), n(last)}, {}, scalar(DType::Int64));
  int scale =
      test::add_call(g, "operator.truediv", {Arg::integer(1), n(half)}, {}, scalar(DType::Float64));
  int r = test::add_call(g, "method.reshape", {n(x), Arg::tuple({Arg::integer(-1), n(twice)})}, {},
                     tensor({floordiv(SymInt::symbol(0), 2), 8}));
  int m = test::add_call(g, "numpy.multiply", {n(r), n(scale)}, {{"dtype", Arg::none()}},
                     tensor({floordiv(SymInt::symbol(0), 2), 8}));
  g.set_output({n(m), n(d0), n(half)});

  EXPECT_EQ(constant_fold(g), 5);
  ASSERT_TRUE(g.verify().is_ok()) << g.verify().message();
  EXPECT_EQ(g.to_string(),
            "# s0 = x.shape[0] (hint 8)\n"
            "def graph(x: \"f32[s0, 4]\"):\n"
            "    sym_size_2: \"int\" = sym_size(x, 0)\n"
            "    reshape: \"f32[s0//2, 8]\" = method.reshape(x, (-1, 8))\n"
            "    multiply: \"f32[s0//2, 8]\" = numpy.multiply(reshape, 0.5, dtype=None)\n"
            "    return (multiply, sym_size_2, 2)\n");
  EXPECT_EQ(constant_fold(g), 0);
}

// ----- equal sizes ---------------------------------------------------------------------------

TEST(EqualSizes, ShapesAreRewrittenThroughChainsOfFacts) {
  Graph g;
  const SymInt s0 = SymInt::symbol(0), s1 = SymInt::symbol(1), s2 = SymInt::symbol(2);
  int x = g.add_placeholder("x", tensor({s0, s2}));
  int y = g.add_placeholder("y", tensor({s1, 8}));
  g.add_symbol(x, 0, 4);
  g.add_symbol(y, 0, 8);
  g.add_symbol(x, 1, 8);
  int a = test::add_call(g, "numpy.add", {n(x), n(y)}, {}, tensor({s0, s2}));
  int f = test::add_call(g, "method.reshape", {n(a), Arg::tuple({Arg::integer(-1)})}, {}, tensor({s0 * s2}));
  int d = test::add_call(g, "sym_size", {n(x), Arg::integer(1)}, {}, scalar(DType::Int64));
  g.set_output({n(f), n(d)});
  // s2 == s1 (the older symbol), s1 == 8; s0 stays.
  g.size_facts = {std::nullopt, SymInt(8), s1};

  EXPECT_EQ(equal_sizes(g), 4);  // x, y, add and reshape
  ASSERT_TRUE(g.verify().is_ok()) << g.verify().message();
  EXPECT_EQ(g.node(a).meta.to_string(), "f32[s0, 8]");
  EXPECT_EQ(g.node(f).meta.to_string(), "f32[s0*8]");
  EXPECT_EQ(g.node(y).meta.to_string(), "f32[8, 8]");
  EXPECT_EQ(equal_sizes(g), 0);
  // The size read of a dim now known folds.
  EXPECT_EQ(constant_fold(g), 1);
}

TEST(SymInt, SubstituteSimplifiesAsIfBuiltThatWay) {
  const SymInt s0 = SymInt::symbol(0), s1 = SymInt::symbol(1);
  std::vector<std::optional<SymInt>> by = {std::nullopt, SymInt(3)};
  EXPECT_TRUE((s0 * s1 + s1).substitute(by).same_as(s0 * 3 + 3));
  EXPECT_TRUE(floordiv(s1 * 4, 2).substitute(by).same_as(SymInt(6)));
  EXPECT_TRUE((s0 - s1).substitute({s1}).same_as(SymInt(0)));
  EXPECT_TRUE(s1.substitute({}).same_as(s1));
}

TEST(ConstantFold, SymSizeOutOfRangeOrOnScalarStays) {
  Graph g;
  int x = g.add_placeholder("x", tensor({3}));
  int a = g.add_placeholder("a", scalar(DType::Int64));
  int bad = test::add_call(g, "sym_size", {n(x), Arg::integer(1)}, {}, scalar(DType::Int64));
  int neg = test::add_call(g, "sym_size", {n(x), Arg::integer(-2)}, {}, scalar(DType::Int64));
  int sc = test::add_call(g, "sym_size", {n(a), Arg::integer(0)}, {}, scalar(DType::Int64));
  int add = test::add_call(g, "operator.add", {n(a), Arg::integer(1)}, {}, scalar(DType::Int64));
  g.set_output({n(bad), n(neg), n(sc), n(add)});
  EXPECT_EQ(constant_fold(g), 0);
}

// ----- Pipeline --------------------------------------------------------------------------------

// x * (x.shape[1] * 2) + x * 8, plus an unused exp: folding makes the two products equal, CSE
// merges them, DCE drops the exp.
Graph pipeline_graph() {
  Graph g;
  int x = g.add_placeholder("x", tensor({SymInt::symbol(0), 4}));
  g.add_symbol(x, 0, 16);
  int d = test::add_call(g, "sym_size", {n(x), Arg::integer(1)}, {}, scalar(DType::Int64));
  int k = test::add_call(g, "operator.mul", {n(d), Arg::integer(2)}, {}, scalar(DType::Int64));
  int a = test::add_call(g, "numpy.multiply", {n(x), n(k)}, {}, tensor({SymInt::symbol(0), 4}));
  int b = test::add_call(g, "numpy.multiply", {n(x), Arg::integer(8)}, {}, tensor({SymInt::symbol(0), 4}));
  test::add_call(g, "numpy.exp", {n(x)}, {}, tensor({SymInt::symbol(0), 4}));
  int c = test::add_call(g, "numpy.add", {n(a), n(b)}, {}, tensor({SymInt::symbol(0), 4}));
  g.set_output({n(c)});
  return g;
}

TEST(Pipeline, FoldThenMergeThenRemove) {
  Graph g = pipeline_graph();
  Expected<PassReport> report = run_graph_passes(g);
  ASSERT_TRUE(report.has_value()) << report.error().message();
  EXPECT_EQ(report->folded, 2);
  EXPECT_EQ(report->cse_merged, 1);
  EXPECT_EQ(report->dce_removed, 1);
  EXPECT_EQ(g.to_string(),
            "# s0 = x.shape[0] (hint 16)\n"
            "def graph(x: \"f32[s0, 4]\"):\n"
            "    multiply: \"f32[s0, 4]\" = numpy.multiply(x, 8)\n"
            "    add: \"f32[s0, 4]\" = numpy.add(multiply, multiply)\n"
            "    return (add,)\n");
}

TEST(Pipeline, RejectsAnInvalidGraph) {
  Graph g = pipeline_graph();
  g.nodes()[1].args[0] = Arg::node(5);  // forward reference
  std::string before = g.to_string();
  Expected<PassReport> report = run_graph_passes(g);
  ASSERT_FALSE(report.has_value());
  EXPECT_EQ(report.error().code(), StatusCode::Internal);
  EXPECT_NE(report.error().message().find("sym_size"), std::string::npos)
      << report.error().message();
  EXPECT_EQ(g.to_string(), before);  // nothing ran
}

TEST(Pipeline, LogsEachStepUnderPasses) {
  rt::set_log_spec("passes");
  Graph g = pipeline_graph();
  testing::internal::CaptureStderr();
  Expected<PassReport> report = run_graph_passes(g);
  std::string log = testing::internal::GetCapturedStderr();
  rt::set_log_spec("");
  ASSERT_TRUE(report.has_value());
  for (const char* step : {"capture", "constant_fold", "cse", "dce"})
    EXPECT_NE(log.find(std::string("[framejit:passes] after ") + step + ":\n"), std::string::npos)
        << step << " missing in:\n"
        << log;
  EXPECT_NE(log.find("numpy.exp(x)"), std::string::npos);  // the graph before DCE

  Graph quiet = pipeline_graph();
  testing::internal::CaptureStderr();
  ASSERT_TRUE(run_graph_passes(quiet).has_value());
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "");
}

}  // namespace
}  // namespace framejit::jit
