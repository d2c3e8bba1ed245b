// constant_fold.cpp — fold scalar arithmetic on constants and static sizes into constant args.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <optional>

#include "jit/passes/passes.h"

namespace framejit::jit {
namespace {

// A Python number: int (bool counts as int, as in Python arithmetic) or float.
struct Number {
  bool is_float = false;
  int64_t i = 0;
  double f = 0.0;
  double as_float() const { return is_float ? f : static_cast<double>(i); }
};

std::optional<Number> number_of(const Arg& a) {
  switch (a.kind) {
    case Arg::Kind::Int:
    case Arg::Kind::Bool:
      return Number{false, a.i, 0.0};
    case Arg::Kind::Float:
      return Number{true, 0, a.f};
    default:
      return std::nullopt;
  }
}

// CPython's float floor division and modulo (Objects/floatobject.c, _float_div_mod), which
// differ from C's fmod in sign handling and in rounding of the quotient.
void float_div_mod(double vx, double wx, double* floordiv, double* mod) {
  double m = std::fmod(vx, wx);
  double div = (vx - m) / wx;
  if (m != 0.0) {
    if ((wx < 0) != (m < 0)) {
      m += wx;
      div -= 1.0;
    }
  } else {
    m = std::copysign(0.0, wx);
  }
  double fd = 0.0;
  if (div != 0.0) {
    fd = std::floor(div);
    if (div - fd > 0.5) fd += 1.0;
  } else {
    fd = std::copysign(0.0, vx / wx);
  }
  *floordiv = fd;
  *mod = m;
}

// Python semantics, or nullopt where Python would raise (division by zero) or where an int64
// cannot hold Python's exact result (overflow; int/int beyond 2^53 would double-round).
std::optional<Arg> fold_arithmetic(OpKind op, const Number& a, const Number* b) {
  if (op == OpKind::ScalarNeg) {
    if (a.is_float) return Arg::real(-a.f);
    if (a.i == std::numeric_limits<int64_t>::min()) return std::nullopt;
    return Arg::integer(-a.i);
  }
  if (!b) return std::nullopt;
  if (op == OpKind::ScalarTrueDiv) {
    if (b->as_float() == 0.0) return std::nullopt;
    if (!a.is_float && !b->is_float) {
      constexpr int64_t kExact = int64_t{1} << 53;
      if (std::llabs(a.i) > kExact || std::llabs(b->i) > kExact ||
          a.i == std::numeric_limits<int64_t>::min() || b->i == std::numeric_limits<int64_t>::min())
        return std::nullopt;
    }
    return Arg::real(a.as_float() / b->as_float());
  }
  if (a.is_float || b->is_float) {
    double x = a.as_float(), y = b->as_float();
    if (op == OpKind::ScalarAdd) return Arg::real(x + y);
    if (op == OpKind::ScalarSub) return Arg::real(x - y);
    if (op == OpKind::ScalarMul) return Arg::real(x * y);
    if (op == OpKind::ScalarFloorDiv || op == OpKind::ScalarMod) {
      if (y == 0.0) return std::nullopt;
      double fd = 0.0, m = 0.0;
      float_div_mod(x, y, &fd, &m);
      return Arg::real(op == OpKind::ScalarFloorDiv ? fd : m);
    }
    return std::nullopt;
  }
  int64_t x = a.i, y = b->i, r = 0;
  if (op == OpKind::ScalarAdd)
    return __builtin_add_overflow(x, y, &r) ? std::nullopt : std::optional(Arg::integer(r));
  if (op == OpKind::ScalarSub)
    return __builtin_sub_overflow(x, y, &r) ? std::nullopt : std::optional(Arg::integer(r));
  if (op == OpKind::ScalarMul)
    return __builtin_mul_overflow(x, y, &r) ? std::nullopt : std::optional(Arg::integer(r));
  if (op == OpKind::ScalarFloorDiv) {
    if (y == 0 || (x == std::numeric_limits<int64_t>::min() && y == -1)) return std::nullopt;
    return Arg::integer(py_floordiv(x, y));
  }
  if (op == OpKind::ScalarMod) {
    if (y == 0) return std::nullopt;
    return Arg::integer(py_mod(x, y));
  }
  return std::nullopt;
}

std::optional<Arg> try_fold(const Graph& graph, const Node& node) {
  if (node.kind != NodeKind::Call || !node.kwargs.empty()) return std::nullopt;
  if (node.op == OpKind::SymSize) {
    if (node.args.size() != 2 || !node.args[0].is_node() || node.args[1].kind != Arg::Kind::Int)
      return std::nullopt;
    const TensorMeta& meta = graph.node(static_cast<int>(node.args[0].i)).meta;
    int64_t dim = node.args[1].i;
    if (dim < 0) dim += meta.rank();
    if (meta.kind != ValueKind::Tensor || dim < 0 || dim >= meta.rank()) return std::nullopt;
    const SymInt& size = meta.shape[dim];
    if (!size.is_const()) return std::nullopt;
    return Arg::integer(size.const_value());
  }
  const OpKind op = node.op;
  static constexpr OpKind kOps[] = {OpKind::ScalarAdd, OpKind::ScalarSub,      OpKind::ScalarMul,
                                    OpKind::ScalarFloorDiv, OpKind::ScalarMod, OpKind::ScalarTrueDiv,
                                    OpKind::ScalarNeg};
  if (std::find(std::begin(kOps), std::end(kOps), op) == std::end(kOps)) return std::nullopt;
  if (node.args.size() != (op == OpKind::ScalarNeg ? 1u : 2u)) return std::nullopt;
  std::optional<Number> a = number_of(node.args[0]);
  if (!a) return std::nullopt;
  if (op == OpKind::ScalarNeg) return fold_arithmetic(op, *a, nullptr);
  std::optional<Number> b = number_of(node.args[1]);
  if (!b) return std::nullopt;
  return fold_arithmetic(op, *a, &*b);
}

// Replaces references to folded nodes by their constants, inside containers too.
void substitute(Arg& arg, const std::vector<std::optional<Arg>>& folded) {
  if (arg.kind == Arg::Kind::Node) {
    int ref = static_cast<int>(arg.i);
    if (ref >= 0 && ref < static_cast<int>(folded.size()) && folded[ref]) arg = *folded[ref];
    return;
  }
  for (Arg& item : arg.items) substitute(item, folded);
}

}  // namespace

int constant_fold(Graph& graph) {
  int total = 0;
  for (Node& node : graph.nodes())  // inside bodies (Note [Subgraphs])
    for (const std::shared_ptr<Graph>& body : node.subgraphs) total += constant_fold(*body);
  // NB: one forward sweep already reaches the fixpoint (a folded value is substituted before any
  // later node is looked at); the loop only guards that claim.
  for (;;) {
    std::vector<Node>& nodes = graph.nodes();
    const int n = static_cast<int>(nodes.size());
    std::vector<std::optional<Arg>> folded(n);
    int count = 0;
    for (int i = 0; i < n; ++i) {
      Node& node = nodes[i];
      for (Arg& a : node.args) substitute(a, folded);
      for (auto& kw : node.kwargs) substitute(kw.second, folded);
      node.attrs.for_each_arg([&](Arg& a) { substitute(a, folded); });
      folded[i] = try_fold(graph, node);
      count += folded[i].has_value();
    }
    if (count == 0) break;
    total += count;
    std::vector<int> remap(n, -1);
    std::vector<Node> kept;
    kept.reserve(n - count);
    for (int i = 0; i < n; ++i) {
      if (folded[i]) continue;
      remap[i] = static_cast<int>(kept.size());
      kept.push_back(std::move(nodes[i]));
    }
    graph.rebuild(std::move(kept), remap);
  }
  return total;
}

}  // namespace framejit::jit
