// test_sym.cpp — SymInt: folding, canonical forms, printing, evaluation against a reference.
#include <gtest/gtest.h>

#include <functional>
#include <random>

#include "jit/ir/sym.h"

namespace framejit::jit {
namespace {

const SymInt s0 = SymInt::symbol(0);
const SymInt s1 = SymInt::symbol(1);
const SymInt s2 = SymInt::symbol(2);

TEST(PyDivMod, MatchesPython) {
  struct Case {
    int64_t a, b, q, r;
  };
  // Values from Python: a // b, a % b.
  const Case cases[] = {{7, 2, 3, 1},   {-7, 2, -4, 1}, {7, -2, -4, -1}, {-7, -2, 3, -1},
                        {6, 3, 2, 0},   {-6, 3, -2, 0}, {0, 5, 0, 0},    {1, -1, -1, 0},
                        {-1, 3, -1, 2}, {5, 7, 0, 5}};
  for (const Case& c : cases) {
    EXPECT_EQ(py_floordiv(c.a, c.b), c.q) << c.a << " // " << c.b;
    EXPECT_EQ(py_mod(c.a, c.b), c.r) << c.a << " % " << c.b;
  }
  // Must not trap (x86 idiv faults on both).
  EXPECT_EQ(py_mod(INT64_MIN, -1), 0);
  EXPECT_EQ(py_floordiv(5, 0), 0);
  EXPECT_EQ(py_mod(5, 0), 0);
}

TEST(SymInt, ConstantsFold) {
  EXPECT_TRUE((SymInt(3) + SymInt(4)).is_const());
  EXPECT_EQ((SymInt(3) + SymInt(4)).const_value(), 7);
  EXPECT_EQ((SymInt(3) - SymInt(10)).const_value(), -7);
  EXPECT_EQ((SymInt(3) * SymInt(-4)).const_value(), -12);
  EXPECT_EQ(floordiv(SymInt(-7), SymInt(2)).const_value(), -4);
  EXPECT_EQ(mod(SymInt(-7), SymInt(2)).const_value(), 1);
  EXPECT_EQ(mod(SymInt(7), SymInt(-2)).const_value(), -1);
  EXPECT_EQ(SymInt().const_value(), 0);
}

TEST(SymInt, DivisionByZeroStaysUnfolded) {
  SymInt q = floordiv(SymInt(5), SymInt(0));
  EXPECT_FALSE(q.is_const());
  EXPECT_EQ(q.kind(), SymInt::Kind::FloorDiv);
  EXPECT_EQ(q.to_string(), "5//0");
  SymInt r = mod(s0, SymInt(0));
  EXPECT_EQ(r.kind(), SymInt::Kind::Mod);
  EXPECT_EQ(r.to_string(), "s0%0");
  // Evaluation does not crash either.
  EXPECT_EQ(q.evaluate({}), 0);
}

TEST(SymInt, Identities) {
  EXPECT_TRUE((s0 + 0).same_as(s0));
  EXPECT_TRUE((SymInt(0) + s0).same_as(s0));
  EXPECT_TRUE((s0 * 1).same_as(s0));
  EXPECT_TRUE((SymInt(1) * s0).same_as(s0));
  EXPECT_TRUE((s0 * 0).is_const());
  EXPECT_EQ((s0 * 0).const_value(), 0);
  EXPECT_EQ((SymInt(0) * (s0 + s1)).const_value(), 0);
  EXPECT_TRUE(floordiv(s0, 1).same_as(s0));
  EXPECT_EQ(mod(s0, 1).const_value(), 0);
  EXPECT_EQ(mod(s0 * s1, -1).const_value(), 0);
  EXPECT_TRUE((s0 - 0).same_as(s0));
  EXPECT_EQ((s0 - s0).const_value(), 0);
  EXPECT_EQ(((s0 + 3) - (s0 + 1)).const_value(), 2);
}

TEST(SymInt, CommutativeOperandsAreCanonical) {
  EXPECT_TRUE((s0 * 2).same_as(SymInt(2) * s0));
  EXPECT_TRUE((s0 + 2).same_as(SymInt(2) + s0));
  EXPECT_TRUE((s0 + s1).same_as(s1 + s0));
  EXPECT_TRUE((s0 * s1).same_as(s1 * s0));
  EXPECT_TRUE(((s0 + s1) + s2).same_as(s2 + (s1 + s0)));
  EXPECT_TRUE(((s0 * 2) * s1).same_as(s1 * (s0 * 2)));
  EXPECT_TRUE(((s0 * 2) * 3).same_as(s0 * 6));
  EXPECT_TRUE(((s0 + 1) + 2).same_as(s0 + 3));
  EXPECT_TRUE((s0 + s0).same_as(s0 * 2));
  EXPECT_TRUE(((s0 + 1) * 2).same_as(s0 * 2 + 2));
  EXPECT_FALSE((s0 * 2).same_as(s0 * 3));
  EXPECT_FALSE((s0 + s1).same_as(s0 * s1));
  EXPECT_FALSE(floordiv(s0, s1).same_as(floordiv(s1, s0)));
  EXPECT_EQ((s0 * 2).hash(), (SymInt(2) * s0).hash());
  EXPECT_EQ((s0 + s1 + 1).hash(), (SymInt(1) + s1 + s0).hash());
}

TEST(SymInt, DivisionByAConstantPullsOutMultiples) {
  // A reshape's -1: (s0*4*3)//6 is s0*2.
  EXPECT_TRUE(floordiv(s0 * 12, 6).same_as(s0 * 2));
  EXPECT_TRUE(floordiv(s0 * 4 + 8, 4).same_as(s0 + 2));
  EXPECT_TRUE(floordiv(s0 * 4 + s1, 4).same_as(s0 + floordiv(s1, 4)));
  EXPECT_TRUE(floordiv(floordiv(s0, 2), 3).same_as(floordiv(s0, 6)));
  EXPECT_TRUE(floordiv(s0, -1).same_as(s0 * -1));
  EXPECT_EQ(mod(s0 * 4, 2).const_value(), 0);
  EXPECT_TRUE(mod(s0 * 4 + s1 + 5, 4).same_as(mod(s1 + 1, 4)));
  // Not a multiple: nothing to pull out.
  EXPECT_EQ(floordiv(s0 + 1, 2).kind(), SymInt::Kind::FloorDiv);
  EXPECT_EQ(floordiv(s0, s1).kind(), SymInt::Kind::FloorDiv);
}

TEST(SymInt, Accessors) {
  EXPECT_EQ(s1.kind(), SymInt::Kind::Symbol);
  EXPECT_EQ(s1.symbol_id(), 1);
  SymInt e = floordiv(s0 + 1, 2);
  EXPECT_EQ(e.kind(), SymInt::Kind::FloorDiv);
  EXPECT_TRUE(e.lhs().same_as(s0 + 1));
  EXPECT_EQ(e.rhs().const_value(), 2);
  EXPECT_TRUE((s0 * 4).rhs().is_const());  // constant on the right
}

TEST(SymInt, Printing) {
  EXPECT_EQ(SymInt(7).to_string(), "7");
  EXPECT_EQ(SymInt(-7).to_string(), "-7");
  EXPECT_EQ(s0.to_string(), "s0");
  EXPECT_EQ((s0 * 4).to_string(), "s0*4");
  EXPECT_EQ((SymInt(4) * s0).to_string(), "s0*4");
  EXPECT_EQ(floordiv(s0 + 1, 2).to_string(), "(s0 + 1)//2");
  EXPECT_EQ((s0 + s1 * 2 + 1).to_string(), "s0 + s1*2 + 1");
  EXPECT_EQ((s0 - 1).to_string(), "s0 - 1");
  EXPECT_EQ((s0 - s1).to_string(), "s0 - s1");
  EXPECT_EQ((s1 - s0).to_string(), "s1 - s0");
  EXPECT_EQ((s0 - s1 * 3).to_string(), "s0 - s1*3");
  EXPECT_EQ((SymInt(0) - s0).to_string(), "-s0");
  EXPECT_EQ((s0 * s1).to_string(), "s0*s1");
  EXPECT_EQ((s0 * (s1 + 1)).to_string(), "s0*(s1 + 1)");
  EXPECT_EQ(floordiv(s0, s1 * 2).to_string(), "s0//(s1*2)");
  EXPECT_EQ((floordiv(s0, s1) * 2).to_string(), "s0//s1*2");
  EXPECT_EQ(mod(s0 * s1, s2).to_string(), "s0*s1%s2");
  EXPECT_EQ((SymInt(0) - floordiv(s0, s1)).to_string(), "-(s0//s1)");
  EXPECT_EQ((s0 * -3).to_string(), "s0*-3");
}

TEST(SymInt, Evaluate) {
  std::vector<int64_t> v = {10, 3, 7};
  EXPECT_EQ((s0 * 4).evaluate(v), 40);
  EXPECT_EQ(floordiv(s0 + 1, 2).evaluate(v), 5);
  EXPECT_EQ(floordiv(SymInt(0) - s0, s1).evaluate(v), -4);  // Python: -10 // 3
  EXPECT_EQ(mod(SymInt(0) - s0, s1).evaluate(v), 2);        // Python: -10 % 3
  EXPECT_EQ((s0 - s1 * s2).evaluate(v), -11);
}

// Builds random expressions and checks that the simplified SymInt evaluates to what the same
// expression computes step by step, with no simplification at all.
TEST(SymInt, SimplificationPreservesValue) {
  std::mt19937 rng(1234);
  std::vector<int64_t> values = {5, 8, 3};
  struct Built {
    SymInt sym;
    int64_t value;
  };
  std::function<Built(int)> gen = [&](int depth) -> Built {
    int pick = static_cast<int>(rng() % (depth > 0 ? 10 : 2));
    if (pick == 0) {
      int64_t c = static_cast<int64_t>(rng() % 13) - 6;
      return {SymInt(c), c};
    }
    if (pick == 1) {
      int id = static_cast<int>(rng() % 3);
      return {SymInt::symbol(id), values[id]};
    }
    Built a = gen(depth - 1), b = gen(depth - 1);
    switch (pick % 5) {
      case 0:
        return {a.sym + b.sym, a.value + b.value};
      case 1:
        return {a.sym - b.sym, a.value - b.value};
      case 2:
        return {a.sym * b.sym, a.value * b.value};
      case 3:
        if (b.value == 0) return {a.sym * b.sym, a.value * b.value};
        return {floordiv(a.sym, b.sym), py_floordiv(a.value, b.value)};
      default:
        if (b.value == 0) return {a.sym + b.sym, a.value + b.value};
        return {mod(a.sym, b.sym), py_mod(a.value, b.value)};
    }
  };
  for (int trial = 0; trial < 3000; ++trial) {
    Built e = gen(4);
    ASSERT_EQ(e.sym.evaluate(values), e.value) << e.sym.to_string();
  }
}

}  // namespace
}  // namespace framejit::jit
