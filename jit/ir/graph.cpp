// graph.cpp — the Graph IR: Arg constructors, node naming, the FX-style printer and the verifier.
#include "jit/ir/graph.h"

#include <bit>
#include <charconv>
#include <cmath>
#include <optional>
#include <string_view>

#include "jit/ir/element_loop.h"

namespace framejit::jit {

// ----- Arg -------------------------------------------------------------------------------------

Arg Arg::node(int index) {
  Arg a;
  a.kind = Kind::Node;
  a.i = index;
  return a;
}
Arg Arg::integer(int64_t v) {
  Arg a;
  a.kind = Kind::Int;
  a.i = v;
  return a;
}
Arg Arg::real(double v) {
  Arg a;
  a.kind = Kind::Float;
  a.f = v;
  return a;
}
Arg Arg::boolean(bool v) {
  Arg a;
  a.kind = Kind::Bool;
  a.i = v ? 1 : 0;
  return a;
}
Arg Arg::str(std::string v) {
  Arg a;
  a.kind = Kind::Str;
  a.s = std::move(v);
  return a;
}
Arg Arg::dtype(DType t) {
  Arg a;
  a.kind = Kind::DType;
  a.i = static_cast<int>(t);
  return a;
}
Arg Arg::tuple(std::vector<Arg> items) {
  Arg a;
  a.kind = Kind::Tuple;
  a.items = std::move(items);
  return a;
}
Arg Arg::list(std::vector<Arg> items) {
  Arg a;
  a.kind = Kind::List;
  a.items = std::move(items);
  return a;
}
Arg Arg::slice(Arg start, Arg stop, Arg step) {
  Arg a;
  a.kind = Kind::Slice;
  a.items = {std::move(start), std::move(stop), std::move(step)};
  return a;
}
Arg Arg::ellipsis() {
  Arg a;
  a.kind = Kind::Ellipsis;
  return a;
}

bool Arg::operator==(const Arg& o) const {
  if (kind != o.kind) return false;
  switch (kind) {
    case Kind::None:
    case Kind::Ellipsis:
      return true;
    case Kind::Node:
    case Kind::Int:
    case Kind::Bool:
    case Kind::DType:
      return i == o.i;
    case Kind::Float:
      // NB: bitwise, so that 0.0 and -0.0 differ (x * -0.0 is not x * 0.0) and a NaN constant
      // equals itself; CSE relies on this being an equivalence relation.
      return std::bit_cast<uint64_t>(f) == std::bit_cast<uint64_t>(o.f);
    case Kind::Str:
      return s == o.s;
    case Kind::Tuple:
    case Kind::List:
    case Kind::Slice:
      return items == o.items;
  }
  return false;
}

// ----- Printing helpers ------------------------------------------------------------------------

namespace {

constexpr std::string_view kKeywords[] = {
    "False", "None",     "True",  "and",    "as",   "assert", "async",  "await",    "break",
    "class", "continue", "def",   "del",    "elif", "else",   "except", "finally",  "for",
    "from",  "global",   "if",    "import", "in",   "is",     "lambda", "nonlocal", "not",
    "or",    "pass",     "raise", "return", "try",  "while",  "with",   "yield"};

// Names a node must not take because the printed code would then shadow something it uses: the
// builtins (as FX does: the first "sum" node is "sum_1"), the module roots targets start with, and
// the dot-less targets, which print as bare callees.
constexpr std::string_view kReserved[] = {
    "abs",        "all",     "any",      "ascii",     "bin",          "bool",     "breakpoint",
    "bytearray",  "bytes",   "callable", "chr",       "classmethod",  "compile",  "complex",
    "delattr",    "dict",    "dir",      "divmod",    "enumerate",    "eval",     "exec",
    "filter",     "float",   "format",   "frozenset", "getattr",      "globals",  "hasattr",
    "hash",       "help",    "hex",      "id",        "input",        "int",      "isinstance",
    "issubclass", "iter",    "len",      "list",      "locals",       "map",      "max",
    "memoryview", "min",     "next",     "object",    "oct",          "open",     "ord",
    "pow",        "print",   "property", "range",     "repr",         "reversed", "round",
    "set",        "setattr", "slice",    "sorted",    "staticmethod", "str",      "sum",
    "super",      "tuple",   "type",     "vars",      "zip",          "Ellipsis", "NotImplemented",
    "numpy",      "np",      "operator", "method",    "math",         "torch",    "framejit",
    "builtins",   "graph",   "getitem",  "setitem"};

bool is_keyword(std::string_view name) {
  for (std::string_view k : kKeywords)
    if (k == name) return true;
  return false;
}

bool is_reserved(std::string_view name) {
  if (is_keyword(name)) return true;
  for (std::string_view k : kReserved)
    if (k == name) return true;
  return false;
}

bool is_ident_char(char c, bool first) {
  return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
         (!first && c >= '0' && c <= '9');
}

bool is_valid_identifier(std::string_view name) {
  if (name.empty() || is_keyword(name)) return false;
  for (size_t i = 0; i < name.size(); ++i)
    if (!is_ident_char(name[i], i == 0)) return false;
  return true;
}

std::string sanitize(std::string_view base) {
  std::string out;
  for (char c : base) out += is_ident_char(c, false) ? c : '_';
  if (out.empty() || !is_ident_char(out[0], true)) out.insert(out.begin(), '_');
  return out;
}

// Python's repr(float): shortest round-trip digits, fixed notation for exponents in [-4, 16).
std::string python_float(double v) {
  if (std::isnan(v)) return "float('nan')";
  if (std::isinf(v)) return v > 0 ? "float('inf')" : "float('-inf')";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), v, std::chars_format::scientific);
  std::string sci(buf, res.ptr);
  size_t epos = sci.find('e');
  int exp = 0;
  std::from_chars(sci.data() + epos + 1 + (sci[epos + 1] == '+'), sci.data() + sci.size(), exp);
  // NB: to_chars writes the exponent as printf's %e does (e+16, e-05), which is Python's form.
  if (exp < -4 || exp >= 16) return sci;
  bool neg = sci[0] == '-';
  std::string digits;
  for (size_t i = neg ? 1 : 0; i < epos; ++i)
    if (sci[i] != '.') digits += sci[i];
  std::string out = neg ? "-" : "";
  if (exp < 0) {
    out += "0." + std::string(static_cast<size_t>(-exp - 1), '0') + digits;
  } else if (digits.size() > static_cast<size_t>(exp) + 1) {
    out += digits.substr(0, exp + 1) + "." + digits.substr(exp + 1);
  } else {
    out += digits + std::string(exp + 1 - digits.size(), '0') + ".0";
  }
  return out;
}

std::string python_str(const std::string& s) {
  static const char* kHex = "0123456789abcdef";
  std::string out = "'";
  for (unsigned char c : s) {
    switch (c) {
      case '\\':
        out += "\\\\";
        break;
      case '\'':
        out += "\\'";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\r':
        out += "\\r";
        break;
      case '\t':
        out += "\\t";
        break;
      default:
        if (c < 0x20 || c == 0x7f) {
          out += "\\x";
          out += kHex[c >> 4];
          out += kHex[c & 15];
        } else {
          out += static_cast<char>(c);  // UTF-8 passes through: Python source is UTF-8
        }
    }
  }
  return out + "'";
}

std::string last_component(const std::string& target) {
  size_t dot = target.rfind('.');
  return dot == std::string::npos ? target : target.substr(dot + 1);
}

void collect_symbols(const SymInt& e, std::vector<int>& out) {
  switch (e.kind()) {
    case SymInt::Kind::Const:
      return;
    case SymInt::Kind::Symbol:
      out.push_back(e.symbol_id());
      return;
    default:
      collect_symbols(e.lhs(), out);
      collect_symbols(e.rhs(), out);
  }
}

std::string node_label(int index, const Node& n) {
  return "node " + std::to_string(index) + " '" + n.name + "'";
}

}  // namespace

std::string TensorMeta::to_string() const {
  if (kind == ValueKind::Object) return "object";
  if (kind == ValueKind::Scalar) {
    if (dtype == DType::Bool) return "bool";
    if (rt::dtype_is_float(dtype)) return "float";
    if (rt::dtype_is_complex(dtype)) return "complex";
    return "int";
  }
  std::string out(rt::dtype_short_name(dtype));
  out += '[';
  for (size_t d = 0; d < shape.size(); ++d) {
    if (d) out += ", ";
    out += shape[d].to_string();
  }
  return out + ']';
}

std::string Graph::arg_to_string(const Arg& arg) const {
  auto join = [&](const std::vector<Arg>& items) {
    std::string out;
    for (size_t k = 0; k < items.size(); ++k) {
      if (k) out += ", ";
      out += arg_to_string(items[k]);
    }
    return out;
  };
  switch (arg.kind) {
    case Arg::Kind::None:
      return "None";
    case Arg::Kind::Node:
      if (arg.i >= 0 && arg.i < static_cast<int64_t>(nodes_.size())) return nodes_[arg.i].name;
      return "<bad node " + std::to_string(arg.i) + ">";
    case Arg::Kind::Int:
      return std::to_string(arg.i);
    case Arg::Kind::Float:
      return python_float(arg.f);
    case Arg::Kind::Bool:
      return arg.i ? "True" : "False";
    case Arg::Kind::Str:
      return python_str(arg.s);
    case Arg::Kind::DType:
      if (arg.i >= 0 && arg.i < rt::kNumDTypes) {
        std::string name(rt::dtype_name(static_cast<DType>(arg.i)));
        return dtype_module.empty() ? name : dtype_module + "." + name;
      }
      return "<bad dtype " + std::to_string(arg.i) + ">";
    case Arg::Kind::Tuple:
      return "(" + join(arg.items) + (arg.items.size() == 1 ? ",)" : ")");
    case Arg::Kind::List:
      return "[" + join(arg.items) + "]";
    case Arg::Kind::Slice:
      return "slice(" + join(arg.items) + ")";
    case Arg::Kind::Ellipsis:
      return "...";
  }
  return "?";
}

// ----- Graph construction ----------------------------------------------------------------------

void Graph::claim_name(const std::string& name) {
  if (name_set_.insert(name).second) used_names_.push_back(name);
}

std::string Graph::unique_name(const std::string& base) {
  std::string name = sanitize(base);
  if (!is_reserved(name) && !name_set_.count(name)) {
    claim_name(name);
    return name;
  }
  int& k = next_suffix_[name];
  std::string candidate;
  do {
    candidate = name + "_" + std::to_string(++k);
  } while (name_set_.count(candidate));
  claim_name(candidate);
  return candidate;
}

int Graph::add_placeholder(const std::string& name, TensorMeta meta) {
  Node n;
  n.kind = NodeKind::Placeholder;
  n.name = unique_name(name);
  n.meta = std::move(meta);
  nodes_.push_back(std::move(n));
  return static_cast<int>(nodes_.size()) - 1;
}

int Graph::add_call(OpKind op, OpAttrs attrs, const std::string& target, std::vector<Arg> args,
                    std::vector<std::pair<std::string, Arg>> kwargs, TensorMeta meta) {
  Node n;
  n.kind = NodeKind::Call;
  // A dot-less target prints as a bare callee: no node may take its name and shadow it.
  if (target.find('.') == std::string::npos) claim_name(sanitize(target));
  n.name = unique_name(last_component(target));
  n.target = target;
  n.op = op;
  n.attrs = std::move(attrs);
  n.args = std::move(args);
  n.kwargs = std::move(kwargs);
  n.meta = std::move(meta);
  nodes_.push_back(std::move(n));
  return static_cast<int>(nodes_.size()) - 1;
}

void Graph::set_output(std::vector<Arg> values) {
  // NB: a second call replaces the values in place rather than adding a second output.
  for (Node& n : nodes_) {
    if (n.kind == NodeKind::Output) {
      n.args = {Arg::tuple(std::move(values))};
      return;
    }
  }
  Node n;
  n.kind = NodeKind::Output;
  n.name = unique_name("output");
  n.args = {Arg::tuple(std::move(values))};
  nodes_.push_back(std::move(n));
}

int Graph::add_symbol(int placeholder, int dim, int64_t hint) {
  symbols_.push_back({placeholder, dim, hint});
  return static_cast<int>(symbols_.size()) - 1;
}

// Note [Unbacked sizes]
// Some sizes exist only once a call has run: x[mask] has as many rows as mask has true elements,
// nonzero as many indices. Such a size is a symbol like an input's, bound to the call's output
// dim instead of a placeholder's. Programs need no table of symbol values: kernels read sizes
// from the arrays they are handed, and a size the code reads as a number (len(x[mask])) is a
// SymSize of the call's value, computed after it. What an unbacked symbol has no value for is
// the trace: no hint and no guard can decide anything about it, so the tracer breaks where Python
// logic or a broadcast needs one (OutputGraph::decide), and only structurally equal sizes (the
// same mask selecting from two arrays) meet. A pass that drops the call leaves the symbol
// unbound (-1): nothing reads it then, since every reader of its value reads the call.
int Graph::add_unbacked_symbol(int node, int dim) {
  SymbolInfo info{node, dim, 0};
  info.unbacked = true;
  symbols_.push_back(info);
  return static_cast<int>(symbols_.size()) - 1;
}

// ----- Queries ---------------------------------------------------------------------------------

std::vector<int> Graph::placeholders() const {
  std::vector<int> out;
  for (size_t i = 0; i < nodes_.size(); ++i)
    if (nodes_[i].kind == NodeKind::Placeholder) out.push_back(static_cast<int>(i));
  return out;
}

const std::vector<Arg>& Graph::outputs() const {
  static const std::vector<Arg> kEmpty;
  for (auto it = nodes_.rbegin(); it != nodes_.rend(); ++it) {
    if (it->kind != NodeKind::Output) continue;
    if (it->args.size() == 1 && it->args[0].kind == Arg::Kind::Tuple) return it->args[0].items;
    return it->args;
  }
  return kEmpty;
}

int Graph::num_calls() const {
  int count = 0;
  for (const Node& n : nodes_) count += n.kind == NodeKind::Call;
  return count;
}

std::vector<int> Graph::use_counts() const {
  std::vector<int> counts(nodes_.size(), 0);
  auto count = [&](int ref) {
    if (ref >= 0 && ref < static_cast<int>(counts.size())) ++counts[ref];
  };
  for (const Node& n : nodes_) {
    for (const Arg& a : n.args) a.for_each_node(count);
    for (const auto& kw : n.kwargs) kw.second.for_each_node(count);
  }
  return counts;
}

Users Graph::users() const { return Users(*this); }

Users::Users(const Graph& graph) {
  const auto& nodes = graph.nodes();
  const int n = static_cast<int>(nodes.size());
  begin_.assign(n + 1, 0);
  // Out-of-range references (a graph that verify() would reject) are skipped, as in use_counts.
  auto each_ref = [&](const Node& node, auto&& fn) {
    auto visit = [&](int ref) {
      if (ref >= 0 && ref < n) fn(ref);
    };
    for (const Arg& a : node.args) a.for_each_node(visit);
    for (const auto& kw : node.kwargs) kw.second.for_each_node(visit);
  };
  for (const Node& node : nodes) each_ref(node, [&](int ref) { ++begin_[ref + 1]; });
  for (int v = 0; v < n; ++v) begin_[v + 1] += begin_[v];
  users_.resize(begin_[n]);
  std::vector<int> next(begin_.begin(), begin_.end() - 1);
  for (int i = 0; i < n; ++i) each_ref(nodes[i], [&](int ref) { users_[next[ref]++] = i; });
}

// ----- Printer ---------------------------------------------------------------------------------

std::string Graph::to_string() const {
  std::string out;
  if (!symbols_.empty()) {
    out += "# ";
    for (size_t s = 0; s < symbols_.size(); ++s) {
      const SymbolInfo& info = symbols_[s];
      if (s) out += ", ";
      bool valid = info.placeholder >= 0 && info.placeholder < static_cast<int>(nodes_.size());
      out += "s" + std::to_string(s) + " = " + (valid ? nodes_[info.placeholder].name : "?") +
             ".shape[" + std::to_string(info.dim) + "] " +
             (info.unbacked ? std::string("(unbacked)") : "(hint " + std::to_string(info.hint) + ")");
    }
    out += "\n";
  }
  out += "def graph(";
  bool first = true;
  for (const Node& n : nodes_) {
    if (n.kind != NodeKind::Placeholder) continue;
    if (!first) out += ", ";
    first = false;
    out += n.name + ": \"" + n.meta.to_string() + "\"";
  }
  out += "):\n";
  bool body = false;
  for (const Node& n : nodes_) {
    if (n.kind == NodeKind::Placeholder) continue;
    body = true;
    if (n.kind == NodeKind::Output) {
      const std::vector<Arg>& values =
          n.args.size() == 1 && n.args[0].kind == Arg::Kind::Tuple ? n.args[0].items : n.args;
      out += "    return " + arg_to_string(Arg::tuple(values)) + "\n";
      continue;
    }
    out += "    " + n.name + ": \"" + n.meta.to_string() + "\" = " + n.target + "(";
    bool first_arg = true;
    for (const Arg& a : n.args) {
      if (!first_arg) out += ", ";
      first_arg = false;
      out += arg_to_string(a);
    }
    for (const auto& [key, value] : n.kwargs) {
      if (!first_arg) out += ", ";
      first_arg = false;
      out += key + "=" + arg_to_string(value);
    }
    out += ")\n";
    auto indented = [&](const std::string& text) {
      for (size_t from = 0; from < text.size();) {
        size_t end = text.find('\n', from);
        if (end == std::string::npos) end = text.size();
        out += "        " + text.substr(from, end - from) + "\n";
        from = end + 1;
      }
    };
    // Note [Subgraphs]: each body under its node, indented; a compiled loop's code likewise.
    for (size_t k = 0; k < n.subgraphs.size(); ++k) {
      out += "        # " + n.name + " body " + std::to_string(k) + ":\n";
      indented(n.subgraphs[k] ? n.subgraphs[k]->to_string() : "(none)\n");
    }
    if (n.op == OpKind::Loop && n.attrs.element_loop) {
      out += "        # " + n.name + " loop:\n";
      indented(n.attrs.element_loop->to_string());
    }
  }
  if (!body) out += "    pass\n";
  return out;
}

// ----- Verifier --------------------------------------------------------------------------------

namespace {

// What a body returns, as metas (a constant output: a Python number's kind, by its Arg).
std::vector<TensorMeta> output_metas(const Graph& g) {
  std::vector<TensorMeta> out;
  for (const Arg& a : g.outputs()) {
    TensorMeta m;
    if (a.is_node()) {
      m = g.node(static_cast<int>(a.i)).meta;
    } else {
      m.kind = ValueKind::Scalar;
      m.dtype = a.kind == Arg::Kind::Float ? DType::Float64 : a.kind == Arg::Kind::Bool ? DType::Bool : DType::Int64;
    }
    out.push_back(std::move(m));
  }
  return out;
}

std::string kind_text(const TensorMeta& m) {
  return m.kind == ValueKind::Tensor ? m.to_string() + " (rank " + std::to_string(m.rank()) + ")" : m.to_string();
}

// Values `a` and `b` may stand for each other across a branch or an iteration: one kind, dtype and
// rank (sizes may differ: a loop may grow an array).
bool same_kind(const TensorMeta& a, const TensorMeta& b) {
  return a.kind == b.kind && a.dtype == b.dtype && a.rank() == b.rank();
}

// The first `count` values a body returns stand for the node's args of the same places: carried
// from one iteration to the next (constants are not checked).
Status check_carried(const Graph& graph, const Node& node, const std::vector<TensorMeta>& out, size_t count,
                     const std::string& label) {
  for (size_t j = 0; j < count; ++j) {
    const Arg& a = node.args[j];
    if (!a.is_node()) continue;
    const TensorMeta& in = graph.node(static_cast<int>(a.i)).meta;
    if (!same_kind(in, out[j]))
      return Status::internal(label + ": carried value " + std::to_string(j) + " enters as " + kind_text(in) +
                              " and leaves the body as " + kind_text(out[j]));
  }
  return Status::ok();
}

// scan: kwargs carried = c, dim, reverse; args (*carry, xs, *invariant); the body takes
// (*carry, x, *invariant) with x a slice of xs along dim and returns (*carry, y).
Status verify_scan(const Graph& graph, const Node& node, const std::string& label) {
  if (node.subgraphs.size() != 1 || !node.subgraphs[0]) return Status::internal(label + ": needs one body");
  const Graph& body = *node.subgraphs[0];
  Status s = body.verify();
  if (!s) return Status::internal(label + ", body: " + s.message());
  int64_t carried = -1;
  for (const auto& [k, v] : node.kwargs)
    if (k == "carried" && v.kind == Arg::Kind::Int) carried = v.i;
  if (carried < 0 || carried >= static_cast<int64_t>(node.args.size()))
    return Status::internal(label + ": needs carried= the number of carried values before xs");
  if (body.placeholders().size() != node.args.size())
    return Status::internal(label + ": the body takes " + std::to_string(body.placeholders().size()) +
                            " values, the node passes " + std::to_string(node.args.size()));
  const std::vector<TensorMeta> out = output_metas(body);
  if (out.size() != static_cast<size_t>(carried) + 1)
    return Status::internal(label + ": the body returns " + std::to_string(out.size()) + " values for " +
                            std::to_string(carried) + " carried and y");
  return check_carried(graph, node, out, static_cast<size_t>(carried), label);
}

Status verify_associative_scan(const Graph& graph, const Node& node, const std::string& label) {
  if (node.subgraphs.size() != 1 || !node.subgraphs[0]) return Status::internal(label + ": needs one body");
  const Graph& body = *node.subgraphs[0];
  Status s = body.verify();
  if (!s) return Status::internal(label + ", body: " + s.message());
  if (node.args.empty() || !node.args[0].is_node()) return Status::internal(label + ": needs xs");
  if (body.placeholders().size() != node.args.size() + 1)
    return Status::internal(label + ": the body takes " + std::to_string(body.placeholders().size()) +
                            " values, the node passes xs twice and " + std::to_string(node.args.size() - 1) + " more");
  const TensorMeta& xs = graph.node(static_cast<int>(node.args[0].i)).meta;
  const std::vector<TensorMeta> out = output_metas(body);
  if (out.size() != 1 || out[0].dtype != xs.dtype || out[0].rank() != xs.rank())
    return Status::internal(label + ": the body must return one value of xs's dtype and rank");
  return Status::ok();
}

// Note [Subgraphs]: the rules of a control-flow node's bodies, or why they are broken.
Status verify_bodies(const Graph& graph, const Node& node, const std::string& label) {
  if (!is_control_flow(node.op)) return Status::internal(label + ": only control-flow nodes own subgraphs");
  if (node.op == OpKind::Scan) return verify_scan(graph, node, label);
  if (node.op == OpKind::AssociativeScan) return verify_associative_scan(graph, node, label);
  if (node.subgraphs.size() != 2) return Status::internal(label + ": needs two bodies");
  for (size_t k = 0; k < node.subgraphs.size(); ++k) {
    if (!node.subgraphs[k]) return Status::internal(label + ": body " + std::to_string(k) + " is missing");
    Status s = node.subgraphs[k]->verify();
    if (!s) return Status::internal(label + ", body " + std::to_string(k) + ": " + s.message());
  }
  const Graph &first = *node.subgraphs[0], &second = *node.subgraphs[1];
  const size_t operands = node.op == OpKind::Cond ? node.args.size() - (node.args.empty() ? 0 : 1) : node.args.size();
  if (node.op == OpKind::Cond && node.args.empty()) return Status::internal(label + ": cond without a predicate");
  for (const Graph* body : {&first, &second})
    if (body->placeholders().size() != operands)
      return Status::internal(label + ": a body takes " + std::to_string(body->placeholders().size()) +
                              " values, the node passes " + std::to_string(operands));
  const std::vector<TensorMeta> a = output_metas(first), b = output_metas(second);
  if (node.op == OpKind::Cond) {
    if (a.size() != b.size())
      return Status::internal(label + ": the branches return " + std::to_string(a.size()) + " and " +
                              std::to_string(b.size()) + " values");
    for (size_t j = 0; j < a.size(); ++j)
      if (!same_kind(a[j], b[j]))
        return Status::internal(label + ": the branches' output " + std::to_string(j) + " differs: " + kind_text(a[j]) +
                                " against " + kind_text(b[j]));
    return Status::ok();
  }
  // while_loop: a bool condition, a body that returns what it takes.
  if (a.size() != 1 || a[0].dtype != DType::Bool || (a[0].kind == ValueKind::Tensor && a[0].rank() != 0))
    return Status::internal(label + ": the condition must return one bool");
  if (b.size() != operands)
    return Status::internal(label + ": the body returns " + std::to_string(b.size()) + " values for " +
                            std::to_string(operands) + " carried");
  return check_carried(graph, node, b, operands, label);
}

}  // namespace

Status Graph::verify() const {
  const int n = static_cast<int>(nodes_.size());
  std::unordered_set<std::string> names;
  bool seen_call = false;
  int output_index = -1;
  for (int i = 0; i < n; ++i) {
    const Node& node = nodes_[i];
    if (!is_valid_identifier(node.name))
      return Status::internal(node_label(i, node) + ": name is not a Python identifier");
    if (!names.insert(node.name).second)
      return Status::internal(node_label(i, node) + ": duplicate name");
    switch (node.kind) {
      case NodeKind::Placeholder:
        if (seen_call)
          return Status::internal(node_label(i, node) + ": placeholder after a call node");
        if (!node.args.empty() || !node.kwargs.empty())
          return Status::internal(node_label(i, node) + ": placeholder with arguments");
        break;
      case NodeKind::Call:
        seen_call = true;
        if (node.target.empty())
          return Status::internal(node_label(i, node) + ": call without a target");
        if (!node.subgraphs.empty() || is_control_flow(node.op))
          FJ_PROPAGATE(verify_bodies(*this, node, node_label(i, node)));
        if (node.op == OpKind::Loop) {
          const ElementLoop* loop = node.attrs.element_loop.get();
          if (!loop) return Status::internal(node_label(i, node) + ": a loop without its code");
          if (node.args.size() != loop->arrays.size() + loop->params.size())
            return Status::internal(node_label(i, node) + ": passes " + std::to_string(node.args.size()) +
                                    " values to a loop of " + std::to_string(loop->arrays.size()) + " arrays and " +
                                    std::to_string(loop->params.size()) + " numbers");
          for (size_t k = 0; k < loop->arrays.size(); ++k)
            if (!node.args[k].is_node()) return Status::internal(node_label(i, node) + ": an array that is a constant");
          FJ_PROPAGATE(loop->verify());
        }
        if (node.op == OpKind::Extern && node.args.size() == 2 && node.args[0].is_node() && node.args[0].i < i &&
            nodes_[node.args[0].i].op == OpKind::Loop && nodes_[node.args[0].i].attrs.element_loop) {
          const ElementLoop& loop = *nodes_[node.args[0].i].attrs.element_loop;
          int64_t outs = static_cast<int64_t>(loop.results.size());
          for (const ElementArray& a : loop.arrays) outs += a.written;
          if (node.args[1].kind != Arg::Kind::Int || node.args[1].i < 0 || node.args[1].i >= outs)
            return Status::internal(node_label(i, node) + ": selects no result of its loop");
        }
        break;
      case NodeKind::Output:
        // NB: this also catches a second output, since the first one is then not last.
        if (i != n - 1) return Status::internal(node_label(i, node) + ": output is not last");
        output_index = i;
        if (node.args.size() != 1 || node.args[0].kind != Arg::Kind::Tuple)
          return Status::internal(node_label(i, node) + ": output args must be one tuple");
        break;
    }
    std::optional<int> bad_ref;
    auto check = [&](int ref) {
      if ((ref < 0 || ref >= i) && !bad_ref) bad_ref = ref;
    };
    for (const Arg& a : node.args) a.for_each_node(check);
    for (const auto& kw : node.kwargs) kw.second.for_each_node(check);
    node.attrs.for_each_arg([&](const Arg& a) { a.for_each_node(check); });
    if (bad_ref)
      return Status::internal(node_label(i, node) + ": argument refers to node " +
                              std::to_string(*bad_ref) + ", which is not an earlier node");
    if (node.kind != NodeKind::Output && !enclosed) {
      std::vector<int> syms;
      for (const SymInt& d : node.meta.shape) collect_symbols(d, syms);
      for (int s : syms)
        if (s < 0 || s >= static_cast<int>(symbols_.size()))
          return Status::internal(node_label(i, node) + ": shape uses unknown symbol s" +
                                  std::to_string(s) + " (graph has " +
                                  std::to_string(symbols_.size()) + ")");
    }
  }
  if (output_index < 0) return Status::internal("graph has no output node");
  for (size_t s = 0; s < symbols_.size(); ++s) {
    const SymbolInfo& info = symbols_[s];
    if (info.unbacked) {
      if (info.placeholder == -1) continue;  // its call was dropped (Note [Unbacked sizes])
      if (info.placeholder < 0 || info.placeholder >= n || nodes_[info.placeholder].kind != NodeKind::Call)
        return Status::internal("unbacked symbol s" + std::to_string(s) + " refers to node " +
                                std::to_string(info.placeholder) + ", which is not a call");
      if (info.dim < 0 || info.dim >= nodes_[info.placeholder].meta.rank())
        return Status::internal("unbacked symbol s" + std::to_string(s) + " is dim " + std::to_string(info.dim) +
                                " of " + node_label(info.placeholder, nodes_[info.placeholder]));
      continue;
    }
    if (info.placeholder < 0 || info.placeholder >= n ||
        nodes_[info.placeholder].kind != NodeKind::Placeholder)
      return Status::internal("symbol s" + std::to_string(s) + " refers to node " +
                              std::to_string(info.placeholder) + ", which is not a placeholder");
    if (info.dim < 0 || info.dim >= nodes_[info.placeholder].meta.rank())
      return Status::internal(
          "symbol s" + std::to_string(s) + " is dim " + std::to_string(info.dim) + " of " +
          node_label(info.placeholder, nodes_[info.placeholder]) + ", which has rank " +
          std::to_string(nodes_[info.placeholder].meta.rank()));
  }
  return Status::ok();
}

// ----- Rewriting -------------------------------------------------------------------------------

void Graph::rebuild(std::vector<Node> nodes, const std::vector<int>& remap) {
  auto map = [&](int old) {
    return old >= 0 && old < static_cast<int>(remap.size()) ? remap[old] : -1;
  };
  for (Node& n : nodes) {
    for (Arg& a : n.args) a.remap_nodes(map);
    for (auto& kw : n.kwargs) kw.second.remap_nodes(map);
    n.attrs.for_each_arg([&](Arg& a) { a.remap_nodes(map); });
    claim_name(n.name);
  }
  for (SymbolInfo& info : symbols_) info.placeholder = map(info.placeholder);
  nodes_ = std::move(nodes);
}

}  // namespace framejit::jit
