// graph.h — the Graph IR: placeholder / call / output nodes in topological order, with TensorMeta.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "framejit/status.h"
#include "jit/ir/ops.h"
#include "jit/ir/sym.h"
#include "runtime/dtype.h"

namespace framejit::jit {

using rt::Device;
using rt::DType;

/// What a graph value is. Tensors are arrays; Scalars are Python numbers (int/float/bool) that
/// flow through the graph as run-time values (a learning rate, a size); Objects are library
/// objects (a random generator) that only library calls (extern steps) read.
enum class ValueKind : uint8_t { Tensor, Scalar, Object };

/// Layout classes the guards distinguish. Actual strides are read at run time.
enum class Layout : uint8_t { Contiguous, Strided };

/// Metadata of one graph value. For a Scalar, `dtype` is Int64/Float64/Bool and `shape` is empty.
struct TensorMeta {
  ValueKind kind = ValueKind::Tensor;
  DType dtype = DType::Float32;
  std::vector<SymInt> shape;
  Layout layout = Layout::Contiguous;
  Device device;
  /// The library returns its scalar object here, not a 0-d array (NumPy does from full
  /// reductions and integer indexing); programs must hand back the same kind of object.
  bool scalar_object = false;

  int rank() const { return static_cast<int>(shape.size()); }
  /// "f32[s0, 4]" for tensors, "int"/"float"/"bool" for scalars.
  std::string to_string() const;
};

/// An argument of a call: a reference to an earlier node, a constant, or a container of them.
struct Arg {
  enum class Kind : uint8_t { None, Node, Int, Float, Bool, Str, DType, Tuple, List, Slice, Ellipsis };
  Kind kind = Kind::None;
  int64_t i = 0;           // Node: node index; Int/Bool: value; DType: static_cast<int>(DType)
  double f = 0.0;          // Float
  std::string s;           // Str
  std::vector<Arg> items;  // Tuple, List; Slice: exactly {start, stop, step}

  static Arg none() { return {}; }
  static Arg node(int index);
  static Arg integer(int64_t v);
  static Arg real(double v);
  static Arg boolean(bool v);
  static Arg str(std::string v);
  static Arg dtype(DType t);
  static Arg tuple(std::vector<Arg> items);
  static Arg list(std::vector<Arg> items);
  static Arg slice(Arg start, Arg stop, Arg step);
  static Arg ellipsis();

  bool is_node() const { return kind == Kind::Node; }
  bool operator==(const Arg& o) const;
  /// Calls fn(node_index) for every node reference, recursively.
  template <typename Fn>
  void for_each_node(Fn&& fn) const {
    if (kind == Kind::Node) fn(static_cast<int>(i));
    for (const Arg& a : items) a.for_each_node(fn);
  }
  /// Rewrites every node reference with fn(old_index) -> new_index.
  template <typename Fn>
  void remap_nodes(Fn&& fn) {
    if (kind == Kind::Node) i = fn(static_cast<int>(i));
    for (Arg& a : items) a.remap_nodes(fn);
  }
};

enum class NodeKind : uint8_t { Placeholder, Call, Output };

class Graph;

// Note [Subgraphs]
// A control-flow node (cond, while_loop; DESIGN's HOPs) owns the graphs of its bodies. A body is a
// Graph of its own: its placeholders are the values the node passes it, in order (free variables
// of the Python body, arrays and numbers alike, are lifted to explicit operands of the node, so a
// body reads nothing else), and its output is what the body returns. The node's value is the
// tuple of those outputs (getitem nodes select them, as for split).
//   cond        args (pred, *operands); subgraphs (true_fn, false_fn), each taking the operands;
//               both return as many values, pairwise of one kind, dtype and rank.
//   while_loop  args (*carried); subgraphs (cond_fn, body_fn), each taking the carried values;
//               cond_fn returns one bool, body_fn values of the carried ones' kinds, dtypes, ranks.
//   scan        args (*carry, xs, *invariant), kwargs carried (the carry's count), dim, reverse;
//               one subgraph taking (*carry, x, *invariant), x the slice of xs at each index of
//               dim, returning (*carry, y); the value is (*carry, ys), ys the ys stacked along dim.
//   associative_scan  args (xs, *invariant), kwargs dim, reverse; one subgraph taking (a, b,
//               *invariant), a and b of xs's dtype and rank, returning one value like them; the
//               value is (out,), the inclusive scan of xs along dim (Note [Parallel scans]).
// verify() checks these rules and recurses; the passes run inside bodies too; the printer writes
// each body indented under its node.

/// One node. A call node computes `op` with `attrs` (frontend/ops decided both when it traced the
/// call); `target` is the library callable it stands for, fully qualified ("numpy.add",
/// "operator.mul", "method.sum"...): the printer writes it, and backends that replay the call in
/// the library (the eager backend, extern steps) resolve it. Nothing in jit/ reads it.
/// A frame of the user's code: where a node was made (Note [Tracebacks of run-time errors] in
/// frontend/program/run_program.cpp).
struct SourceFrame {
  std::string function, file;
  int line = 0;
};

struct Node {
  NodeKind kind = NodeKind::Call;
  std::string name;    // unique within the graph; the printer uses it
  std::string target;  // empty for placeholders and the output
  OpKind op = OpKind::Extern;
  OpAttrs attrs;       // NB: Args in attrs refer only to nodes that args/kwargs refer to as well
  std::vector<Arg> args;
  std::vector<std::pair<std::string, Arg>> kwargs;
  TensorMeta meta;  // unused for the output node
  /// A control-flow node's bodies (Note [Subgraphs]); empty for every other node. Shared, not
  /// copied, with the node: a copied Graph shares its bodies with the original.
  std::vector<std::shared_ptr<Graph>> subgraphs;
  /// For a node that may raise at run time: the user's frames that made it, outermost first;
  /// null for every other node.
  std::shared_ptr<const std::vector<SourceFrame>> where;
};

/// What a symbol stands for and the value it had when traced.
struct SymbolInfo {
  int placeholder = -1;  // node index of the graph input whose size it is (unbacked: the call's)
  int dim = -1;
  int64_t hint = 0;
  /// Bound only when the call `placeholder` has run (Note [Unbacked sizes]): no hint, no guard.
  bool unbacked = false;
};

class Users;

/// A graph: nodes in topological order, the last one being the Output whose args[0] is a Tuple of
/// the returned values (node refs or constants).
class Graph {
public:
  int add_placeholder(const std::string& name, TensorMeta meta);
  int add_call(OpKind op, OpAttrs attrs, const std::string& target, std::vector<Arg> args,
               std::vector<std::pair<std::string, Arg>> kwargs, TensorMeta meta);
  void set_output(std::vector<Arg> values);
  int add_symbol(int placeholder, int dim, int64_t hint);
  /// A size that only the run of call `node` knows: its output's dim `dim` (Note [Unbacked sizes]).
  int add_unbacked_symbol(int node, int dim);

  const std::vector<Node>& nodes() const { return nodes_; }
  std::vector<Node>& nodes() { return nodes_; }
  const Node& node(int i) const { return nodes_[i]; }
  /// For a frontend finishing the node it just added with a shared builder whose result meta
  /// differs in one field for its library; passes rebuild graphs instead.
  Node& mutable_node(int i) { return nodes_[i]; }
  const std::vector<SymbolInfo>& symbols() const { return symbols_; }
  /// The frontend binds an unbacked symbol once the call that makes it exists.
  std::vector<SymbolInfo>& symbols() { return symbols_; }
  /// Indices of placeholder nodes, in order (the graph's inputs).
  std::vector<int> placeholders() const;
  /// The output node's values; empty if no output was set.
  const std::vector<Arg>& outputs() const;
  int num_calls() const;

  /// Number of uses of each node (by later nodes' args/kwargs and by the output).
  std::vector<int> use_counts() const;
  /// Who reads each node, built in one walk (see Users).
  Users users() const;

  /// FX-style Python-like text: `def graph(x: "f32[s0, 4]"): ... return (add,)`.
  std::string to_string() const;
  /// Checks topological order, unique names, valid references, one trailing output.
  Status verify() const;

  /// Replaces the node list (used by passes); `remap[i]` is the new index of old node i or -1.
  /// The args and kwargs of `nodes` still refer to OLD indices: rebuild rewrites every reference
  /// through `remap` (a reference to a dropped node becomes -1, which verify() reports), and
  /// moves SymbolInfo::placeholder the same way.
  void rebuild(std::vector<Node> nodes, const std::vector<int>& remap);

  /// Sizes the frontend proved equal while tracing, each checked by a guard before the graph runs
  /// (Note [Equal sizes] in jit/passes/equal_sizes.cpp): size_facts[id], when set, is what symbol
  /// `id` equals — a constant, or a symbol of a smaller id. The equal_sizes pass writes them into
  /// every node's shape.
  std::vector<std::optional<SymInt>> size_facts;

  /// Python numbers in this graph are "weak" (NumPy 2's NEP 50, framejit.Tensor's rule): a
  /// number's value never changes an op's result dtype, so kernels may take integer numbers as
  /// run-time parameters. False: NumPy 1.x value-based casting, where only constants may.
  bool weak_scalars = false;

  /// How the printer spells a dtype constant: the array library's module, as its users write it
  /// ("numpy" prints numpy.float32); empty prints the bare dtype name. The frontend sets it.
  std::string dtype_module;
  /// A control-flow node's body (Note [Subgraphs]): its shapes use the symbols of the graph that
  /// encloses it, which has their table.
  bool enclosed = false;

  /// One argument as the printer writes it (node refs by name), for messages and logs.
  std::string arg_to_string(const Arg& arg) const;

private:
  std::string unique_name(const std::string& base);
  void claim_name(const std::string& name);
  std::vector<Node> nodes_;
  std::vector<SymbolInfo> symbols_;
  std::vector<std::string> used_names_;
  // Lookup side of used_names_, and the next suffix to try per base name, so that naming stays
  // linear in graphs with thousands of "add" nodes.
  std::unordered_set<std::string> name_set_;
  std::unordered_map<std::string, int> next_suffix_;
};

/// The readers of every value of a graph: for node v, the nodes whose args or kwargs refer to it,
/// once per reference (a node reading v twice is listed twice), in graph order, the output node
/// among them. A snapshot: it does not follow later edits of the graph, so a pass that rewrites
/// the graph builds it again. Scheduling passes share one instead of each rescanning every node's
/// arguments.
class Users {
public:
  Users() = default;
  explicit Users(const Graph& graph);

  /// The nodes reading `node`, ascending.
  std::span<const int> of(int node) const {
    return {users_.data() + begin_[node], users_.data() + begin_[node + 1]};
  }
  /// Number of references to `node` (Graph::use_counts()[node]).
  int count(int node) const { return begin_[node + 1] - begin_[node]; }
  /// Number of graph nodes indexed.
  int size() const { return begin_.empty() ? 0 : static_cast<int>(begin_.size()) - 1; }

private:
  // Compressed rows: the users of v are users_[begin_[v], begin_[v + 1]). One allocation for all
  // nodes, so building it costs two walks over the arguments, not one vector per node.
  std::vector<int> begin_;
  std::vector<int> users_;
};

}  // namespace framejit::jit
