// cse.cpp — common subexpression elimination: merge calls with equal op, attrs, args and kwargs.
#include <algorithm>
#include <cstring>
#include <unordered_map>
#include <unordered_set>

#include "jit/passes/passes.h"

#include "jit/ir/element_loop.h"

namespace framejit::jit {
namespace {

// A call's identity as a string: target, args and kwargs (sorted by name, since Python does not
// care about keyword order), with node references as indices. Floats go in by their bits, so
// 0.0 and -0.0 stay apart (see Arg::operator==).
void append_key(const Arg& a, std::string& key) {
  key += static_cast<char>('A' + static_cast<int>(a.kind));
  switch (a.kind) {
    case Arg::Kind::None:
    case Arg::Kind::Ellipsis:
      break;
    case Arg::Kind::Node:
    case Arg::Kind::Int:
    case Arg::Kind::Bool:
    case Arg::Kind::DType:
      key += std::to_string(a.i);
      break;
    case Arg::Kind::Float: {
      uint64_t bits = 0;
      std::memcpy(&bits, &a.f, sizeof(bits));
      key += std::to_string(bits);
      break;
    }
    case Arg::Kind::Str:
      key += std::to_string(a.s.size()) + ":" + a.s;
      break;
    case Arg::Kind::Tuple:
    case Arg::Kind::List:
    case Arg::Kind::Slice:
      key += '(';
      for (const Arg& item : a.items) {
        append_key(item, key);
        key += ',';
      }
      key += ')';
      break;
  }
  key += ';';
}

// The callable, the canonical op and its attributes. NB: the callable takes part as an opaque
// string only: two spellings of one op (np.sum(x) and x.sum()) stay apart, as two calls of
// different callables must when only the library can run them (Extern).
void append_op(const Node& node, std::string& key) {
  const OpAttrs& at = node.attrs;
  key += std::to_string(node.target.size()) + ":" + node.target + "@";
  key += std::to_string(static_cast<int>(node.op));
  auto ints = [&](char tag, const auto& v) {
    key += tag;
    for (auto x : v) key += std::to_string(static_cast<int64_t>(x)) + ",";
  };
  key += at.described ? "D" : "d";
  key += at.all_axes ? "A" : "a";
  ints('x', at.axes);
  key += at.keepdims ? "K" : "k";
  key += "o" + std::to_string(at.ddof);
  key += at.dtype ? "t" + std::to_string(static_cast<int>(*at.dtype)) : "T";
  ints('p', at.perm);
  key += 'i';
  for (const IndexSpecItem& it : at.index) {
    key += std::to_string(static_cast<int>(it.kind));
    for (const Arg& a : it.parts) append_key(a, key);
  }
  key += 's';
  for (const Arg& a : at.shape) append_key(a, key);
  ints('l', at.loop_dtypes);
  key += at.operator_form ? "F" : "f";
  key += "e" + std::to_string(at.exponent);
  // A compiled loop is its code: two loops merge only when they are the same program.
  if (at.element_loop) {
    const std::string code = at.element_loop->to_string();
    key += "L" + std::to_string(code.size()) + ":" + code;
  }
}

std::string call_key(const Node& node) {
  std::string key;
  append_op(node, key);
  key += "(";
  for (const Arg& a : node.args) append_key(a, key);
  std::vector<const std::pair<std::string, Arg>*> kwargs;
  for (const auto& kw : node.kwargs) kwargs.push_back(&kw);
  std::sort(kwargs.begin(), kwargs.end(),
            [](const auto* x, const auto* y) { return x->first < y->first; });
  for (const auto* kw : kwargs) {
    key += "|" + kw->first + "=";
    append_key(kw->second, key);
  }
  return key + ")";
}

bool never_merges(const Node& node) {
  // Fresh uninitialized buffers are distinct objects the program will fill separately; two
  // control-flow nodes are not compared body by body (Note [Subgraphs]).
  return fresh_memory(node.op) || has_side_effects(node) || !node.subgraphs.empty();
}

}  // namespace

int common_subexpression_elimination(Graph& graph) {
  std::vector<Node>& nodes = graph.nodes();
  const int n = static_cast<int>(nodes.size());
  int inner = 0;  // inside bodies (Note [Subgraphs])
  for (Node& node : nodes)
    for (const std::shared_ptr<Graph>& body : node.subgraphs) inner += common_subexpression_elimination(*body);
  std::vector<int> replacement(n);
  for (int i = 0; i < n; ++i) replacement[i] = i;
  auto resolve = [&](int ref) { return ref >= 0 && ref < n ? replacement[ref] : ref; };

  // Nodes whose value the graph returns; grows as merged nodes hand their slot to the survivor.
  std::unordered_set<int> returned;
  for (const Arg& a : graph.outputs()) a.for_each_node([&](int ref) { returned.insert(ref); });

  std::unordered_map<std::string, int> seen;
  int merged = 0;
  for (int i = 0; i < n; ++i) {
    Node& node = nodes[i];
    for (Arg& a : node.args) a.remap_nodes(resolve);
    for (auto& kw : node.kwargs) kw.second.remap_nodes(resolve);
    node.attrs.for_each_arg([&](Arg& a) { a.remap_nodes(resolve); });
    if (node.kind != NodeKind::Call) continue;
    if (never_merges(node)) {
      // NB: a mutation may change what an earlier expression would compute now
      // (`a = x*2; x += 1; b = x*2`), so nothing before it may stand in for anything after it.
      if (has_side_effects(node)) seen.clear();
      continue;
    }
    auto [it, inserted] = seen.try_emplace(call_key(node), i);
    if (inserted) continue;
    int survivor = it->second;
    if (returned.count(survivor) && returned.count(i)) continue;
    if (returned.count(i)) returned.insert(survivor);
    replacement[i] = survivor;
    ++merged;
  }
  if (merged == 0) return inner;

  std::vector<int> remap(n, -1);
  std::vector<Node> kept;
  kept.reserve(n - merged);
  for (int i = 0; i < n; ++i) {
    if (replacement[i] != i) continue;
    remap[i] = static_cast<int>(kept.size());
    kept.push_back(std::move(nodes[i]));
  }
  graph.rebuild(std::move(kept), remap);
  return merged + inner;
}

}  // namespace framejit::jit
