// dce.cpp — dead code elimination: drop call nodes whose values nothing uses.
#include <algorithm>
#include <functional>

#include "jit/ir/element_loop.h"
#include "jit/passes/passes.h"
#include "runtime/dtype.h"

namespace framejit::jit {

bool has_side_effects(const Node& node) {
  if (node.kind != NodeKind::Call) return false;
  // NB: out= is the one keyword every array library spells the same way for "write here".
  for (const auto& [key, value] : node.kwargs)
    if (key == "out" && value.kind != Arg::Kind::None) return true;
  return mutates(node.op);
}

bool may_raise_on_values(const Graph& graph, const Node& node) {
  if (node.kind != NodeKind::Call) return false;
  // A compiled loop raises where CPython's would (an index out of bounds, a division by zero),
  // also when nothing reads what it computes.
  if (node.op == OpKind::Loop) return node.attrs.element_loop && element_loop_may_fail(*node.attrs.element_loop);
  // NumPy raises ValueError for an integer array raised to a negative integer power; whether it
  // does depends on the exponent's values, so only running the call can tell. (Exponents that are
  // constants were checked when the graph was traced.)
  // (Python numbers too: 0 ** -1 raises ZeroDivisionError.)
  if (node.op == OpKind::Pow || node.op == OpKind::ScalarPow) {
    if (!rt::dtype_is_integer(node.meta.dtype)) return false;
    const size_t exponent = static_cast<size_t>(node.attrs.exponent);
    return node.args.size() > exponent && node.args[exponent].is_node();
  }
  // A symbolic size is >= 2 when traced but can reach 0 after arithmetic (x[1:-1] of a length-2
  // x), and then max/min/argmax/argmin raise (an empty reduction has no identity) and so does a
  // reshape with -1 (NumPy cannot infer it for 0 elements). Only running the call can tell.
  if (!reduction_needs_elements(node.op) && node.op != OpKind::Reshape) return false;
  if (node.args.empty() || !node.args[0].is_node()) return false;
  bool symbolic = false;
  for (const SymInt& d : graph.node(static_cast<int>(node.args[0].i)).meta.shape)
    symbolic = symbolic || !d.is_const();
  if (!symbolic) return false;
  if (reduction_needs_elements(node.op)) return true;
  bool infer = false;
  std::function<void(const Arg&)> scan = [&](const Arg& a) {
    infer = infer || (a.kind == Arg::Kind::Int && a.i == -1);
    for (const Arg& item : a.items) scan(item);
  };
  for (size_t k = 1; k < node.args.size(); ++k) scan(node.args[k]);
  for (const auto& kw : node.kwargs) scan(kw.second);
  return infer;
}

int dead_code_elimination(Graph& graph) {
  std::vector<Node>& nodes = graph.nodes();
  const int n = static_cast<int>(nodes.size());
  // Inside bodies first (Note [Subgraphs]): a body's placeholders stay, they are its signature.
  int inner = 0;
  for (Node& node : nodes)
    for (const std::shared_ptr<Graph>& body : node.subgraphs) inner += dead_code_elimination(*body);
  // One backward sweep suffices: nodes are in topological order, so every user of a node is
  // decided before the node itself.
  std::vector<bool> live(n, false);
  for (int i = n - 1; i >= 0; --i) {
    const Node& node = nodes[i];
    if (node.kind != NodeKind::Call || has_side_effects(node) ||
        may_raise_on_values(graph, node))
      live[i] = true;
    if (!live[i]) continue;
    auto mark = [&](int ref) {
      if (ref >= 0 && ref < n) live[ref] = true;
    };
    for (const Arg& a : node.args) a.for_each_node(mark);
    for (const auto& kw : node.kwargs) kw.second.for_each_node(mark);
  }

  const int removed = static_cast<int>(std::count(live.begin(), live.end(), false));
  if (removed == 0) return inner;
  // Moved, not copied: rebuild replaces the node list (a 30,000-node unrolled loop copied every
  // node's arguments here).
  std::vector<int> remap(n, -1);
  std::vector<Node> kept;
  kept.reserve(n - removed);
  for (int i = 0; i < n; ++i) {
    if (!live[i]) continue;
    remap[i] = static_cast<int>(kept.size());
    kept.push_back(std::move(nodes[i]));
  }
  graph.rebuild(std::move(kept), remap);
  return removed + inner;
}

}  // namespace framejit::jit
