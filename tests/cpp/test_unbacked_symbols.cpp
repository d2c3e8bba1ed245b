// test_unbacked_symbols.cpp — sizes bound by a call's output (Note [Unbacked
// sizes]): printed, verified, moved and dropped by rebuild, and read at run
// time through SymSize of the call.
#include <gtest/gtest.h>

#include "jit/ir/graph.h"
#include "tests/cpp/canonical_calls.h"

namespace framejit::jit {
namespace {

using test::tensor;

// def f(x, m): y = x[m]; return y * 2.0  — y's length is s1, known once the
// getitem has run.
Graph masked_graph() {
  Graph g;
  int x = g.add_placeholder("x", tensor({SymInt::symbol(0)}, DType::Float64));
  int m = g.add_placeholder("m", tensor({SymInt::symbol(0)}, DType::Bool));
  g.add_symbol(x, 0, 9);
  int y = test::add_call(g, "operator.getitem", {Arg::node(x), Arg::node(m)}, {},
                         tensor({SymInt::symbol(1)}, DType::Float64));
  EXPECT_EQ(g.add_unbacked_symbol(y, 0), 1);
  int z = test::add_call(g, "numpy.multiply", {Arg::node(y), Arg::real(2.0)}, {},
                         tensor({SymInt::symbol(1)}, DType::Float64));
  g.set_output({Arg::node(z)});
  return g;
}

TEST(UnbackedSymbols, PrintedAndVerified) {
  Graph g = masked_graph();
  EXPECT_TRUE(g.symbols()[1].unbacked);
  EXPECT_FALSE(g.symbols()[0].unbacked);
  EXPECT_NE(g.to_string().find("s1 = getitem_1.shape[0] (unbacked)"), std::string::npos) << g.to_string();
  EXPECT_TRUE(g.verify().is_ok()) << g.verify().message();
}

TEST(UnbackedSymbols, MustBeBoundToACall) {
  Graph g = masked_graph();
  g.symbols()[1].placeholder = 0; // a placeholder's size is not unbacked
  Status s = g.verify();
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("unbacked symbol s1 refers to node 0, which is not a call"), std::string::npos)
      << s.message();

  Graph bad_dim = masked_graph();
  bad_dim.symbols()[1].dim = 1;
  s = bad_dim.verify();
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("unbacked symbol s1 is dim 1"), std::string::npos) << s.message();
}

TEST(UnbackedSymbols, RebuildMovesAndDropsTheirCall) {
  // The unused placeholder dropped: the getitem moves from node 2 to node 1.
  Graph moved;
  int x0 = moved.add_placeholder("x", tensor({SymInt::symbol(0)}, DType::Float64));
  int unused = moved.add_placeholder("unused", tensor({2}, DType::Float64));
  moved.add_symbol(x0, 0, 9);
  int y0 = test::add_call(moved, "operator.getitem", {Arg::node(x0), Arg::node(x0)}, {},
                          tensor({SymInt::symbol(1)}, DType::Float64));
  moved.add_unbacked_symbol(y0, 0);
  moved.set_output({Arg::node(y0)});
  (void)unused;
  std::vector<Node> kept = {moved.node(0), moved.node(2), moved.node(3)};
  moved.rebuild(std::move(kept), {0, -1, 1, 2});
  EXPECT_EQ(moved.symbols()[1].placeholder, 1);
  EXPECT_TRUE(moved.verify().is_ok()) << moved.verify().message();

  // A pass that drops the call leaves the symbol unbound; nothing reads it, and
  // the graph verifies.
  Graph h;
  int x = h.add_placeholder("x", tensor({SymInt::symbol(0)}, DType::Float64));
  h.add_symbol(x, 0, 9);
  int y = test::add_call(h, "operator.getitem", {Arg::node(x), Arg::node(x)}, {},
                         tensor({SymInt::symbol(1)}, DType::Float64));
  h.add_unbacked_symbol(y, 0);
  h.set_output({Arg::node(x)});
  std::vector<Node> nodes = {h.node(0), h.node(2)};
  h.rebuild(std::move(nodes), {0, -1, 1});
  EXPECT_EQ(h.symbols()[1].placeholder, -1);
  EXPECT_TRUE(h.verify().is_ok()) << h.verify().message();
}

} // namespace
} // namespace framejit::jit
