// dce.cpp — dead code elimination: drop call nodes whose values nothing uses.
#include <functional>
#include <string_view>

#include "jit/passes/passes.h"
#include "runtime/dtype.h"

namespace framejit::jit {

bool has_side_effects(const Node& node) {
  if (node.kind != NodeKind::Call) return false;
  for (const auto& [key, value] : node.kwargs)
    if (key == "out" && value.kind != Arg::Kind::None) return true;
  // clang-format off
  static constexpr std::string_view kMutating[] = {
      "operator.iadd", "operator.isub", "operator.imul", "operator.imatmul", "operator.itruediv",
      "operator.ifloordiv", "operator.imod", "operator.ipow", "operator.iand", "operator.ior",
      "operator.ixor", "operator.ilshift", "operator.irshift", "operator.iconcat",
      "operator.setitem", "operator.delitem", "setitem",
      "numpy.copyto", "numpy.put", "numpy.place", "numpy.putmask", "numpy.fill_diagonal",
      "numpy.put_along_axis", "numpy.seterr",
      "method.fill", "method.sort", "method.put", "method.itemset", "method.resize",
      "method.setfield", "method.partition", "method.setflags", "method.__setitem__"};
  // clang-format on
  std::string_view t = node.target;
  for (std::string_view m : kMutating)
    if (t == m) return true;
  // In-place dunders (method.__iadd__), ufunc.at (numpy.add.at), and any draw from the global
  // random generator, which advances its state.
  if (t.starts_with("method.__i") && t.ends_with("__")) return true;
  if (t.starts_with("numpy.") && t.ends_with(".at")) return true;
  if (t.starts_with("numpy.random.")) return true;
  return false;
}

bool may_raise_on_values(const Graph& graph, const Node& node) {
  if (node.kind != NodeKind::Call) return false;
  std::string_view t = node.target;
  // NumPy raises ValueError for an integer array raised to a negative integer power; whether it
  // does depends on the exponent's values, so only running the call can tell. (Exponents that are
  // constants were checked when the graph was traced.)
  if (t == "operator.pow" || t == "numpy.power" || t == "method.__pow__" ||
      t == "method.__rpow__") {
    if (!rt::dtype_is_integer(node.meta.dtype)) return false;
    const size_t exponent = t == "method.__rpow__" ? 0 : 1;
    return node.args.size() > exponent && node.args[exponent].is_node();
  }
  // A symbolic size is >= 2 when traced but can reach 0 after arithmetic (x[1:-1] of a length-2
  // x), and then max/min/argmax/argmin raise (an empty reduction has no identity) and so does a
  // reshape with -1 (NumPy cannot infer it for 0 elements). Only running the call can tell.
  if (!t.starts_with("numpy.") && !t.starts_with("method.")) return false;
  if (node.args.empty() || !node.args[0].is_node()) return false;
  bool symbolic = false;
  for (const SymInt& d : graph.node(static_cast<int>(node.args[0].i)).meta.shape)
    symbolic = symbolic || !d.is_const();
  if (!symbolic) return false;
  std::string_view name = t.substr(t.find('.') + 1);
  if (name == "max" || name == "amax" || name == "min" || name == "amin" || name == "argmax" ||
      name == "argmin")
    return true;
  if (name == "reshape") {
    bool infer = false;
    std::function<void(const Arg&)> scan = [&](const Arg& a) {
      infer = infer || (a.kind == Arg::Kind::Int && a.i == -1);
      for (const Arg& item : a.items) scan(item);
    };
    for (size_t k = 1; k < node.args.size(); ++k) scan(node.args[k]);
    for (const auto& kw : node.kwargs) scan(kw.second);
    return infer;
  }
  return false;
}

int dead_code_elimination(Graph& graph) {
  const std::vector<Node>& nodes = graph.nodes();
  const int n = static_cast<int>(nodes.size());
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

  std::vector<int> remap(n, -1);
  std::vector<Node> kept;
  kept.reserve(n);
  for (int i = 0; i < n; ++i) {
    if (!live[i]) continue;
    remap[i] = static_cast<int>(kept.size());
    kept.push_back(nodes[i]);
  }
  int removed = n - static_cast<int>(kept.size());
  if (removed > 0) graph.rebuild(std::move(kept), remap);
  return removed;
}

}  // namespace framejit::jit
