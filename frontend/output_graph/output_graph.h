// output_graph.h — what one trace produces: the Graph, its inputs (each with a Source and a guard
// slot), the guards, the symbolic sizes and how to rebuild the function's return value.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "frontend/guards/guards.h"
#include "frontend/interop/array_adapter.h"  // ArrayKind
#include "frontend/cpython/pyref.h"
#include "frontend/guards/source.h"
#include "frontend/variables/variables.h"
#include "jit/ir/graph.h"

namespace framejit::frontend {

/// How to build the Python return value from the compiled program's outputs.
struct OutputSpec {
  enum class Kind : uint8_t {
    Value,  // the graph's output number `index`
    Slot,   // an input object, returned as the very same object (guard slot `index`)
    Const,  // a constant
    Tuple,
    List,
    Dict,
    Attr,  // getattr(items[0], value): a method looked up on a value (x.sum, rng.shuffle)
  };
  Kind kind = Kind::Const;
  int index = -1;
  OwnedRef value;                // Const; Attr: the name; Tuple: a named tuple's type, or null
  std::vector<OutputSpec> items;  // Tuple/List/Dict values
  std::vector<OwnedRef> keys;     // Dict keys
};

struct GraphInput {
  SourcePtr source;
  int slot = -1;  // where GuardSet::check leaves the value
  int node = -1;  // the placeholder
};


class OutputGraph {
public:
  // NB: dtype constants print as NumPy spells them (numpy.float32), in every graph: the printed
  // text is what explain() and golden tests show.
  jit::Graph graph = [] {
    jit::Graph g;
    g.dtype_module = "numpy";
    return g;
  }();
  /// Note [Tracing bodies] (frontend/trace/control_flow.cpp): while the tracer traces the body of a
  /// control-flow operator, `graph` is that body's graph and the graphs around it wait here, the
  /// frame's first. Inputs, symbols and size facts always belong to the frame's graph.
  std::vector<jit::Graph> enclosing;
  jit::Graph& root_graph() { return enclosing.empty() ? graph : enclosing.front(); }
  const jit::Graph& root_graph() const { return enclosing.empty() ? graph : enclosing.front(); }
  /// The graph of trace scope `scope` (current_graph_scope's numbering).
  jit::Graph& graph_at(int scope) { return scope == static_cast<int>(enclosing.size()) ? graph : enclosing[scope]; }
  const jit::Graph& graph_at(int scope) const {
    return scope == static_cast<int>(enclosing.size()) ? graph : enclosing[scope];
  }
  int scope() const { return static_cast<int>(enclosing.size()); }
  GuardSet guards;
  std::vector<GraphInput> inputs;  // in placeholder order
  std::vector<int64_t> symbol_hints;
  std::vector<std::string> symbol_names;  // "L['x'].shape[0]"
  OutputSpec output;
  bool saw_tensor = false;
  /// The input arrays the trace wrote into (Note [Writes into arrays]): each one's placeholder and
  /// the trace value that holds its contents now (the one the frame sees).
  struct InputWrite {
    int placeholder = -1;
    SourcePtr source;
    VarPtr var;
  };
  std::vector<InputWrite> input_writes;
  /// torch inputs that require grad (guarded): x.requires_grad reads True of these alone, as every
  /// value computed in a graph is computed without autograd (Note [Torch values]).
  std::vector<int> requires_grad_inputs;
  /// The device of the graph's arrays (Note [One device per graph] in frontend/builder): set by
  /// the first array input.
  rt::Device device;
  bool has_device = false;
  ArrayKind array_kind = ArrayKind::None;  // set by the first array input or array op
  /// NumPy scalars alone set array_kind (NumPy): a CuPy array may still claim the graph (Note
  /// [NumPy scalars in CuPy graphs] in frontend/builder/builder.cpp).
  bool kind_from_scalars = false;
  /// Claims the graph for arrays of `kind`: "" when it now is (or was) theirs, else why not.
  std::string claim_array_kind(ArrayKind kind);

  /// Adds a placeholder fed from `src` (its guard slot is assigned here).
  int add_input(const SourcePtr& src, const std::string& name, jit::TensorMeta meta);
  int new_symbol(int placeholder, int dim, int64_t hint, std::string description);
  /// A size known only once call `node` has run: its output's dim `dim` (Note [Unbacked sizes]
  /// in jit/ir/graph.cpp). `description` names it in the user's terms ("x[mask]").
  /// `stop` ends the trace when a decision needs its value (it throws the tracer's graph break,
  /// which this layer cannot name) and must not return.
  using StopTrace = void (*)(const std::string& reason);
  int new_unbacked_symbol(int node, int dim, std::string description, StopTrace stop);
  /// Whether `e` holds a size known only at run time (Note [Unbacked sizes]).
  bool is_unbacked(const jit::SymInt& e) const;
  /// The unbacked symbol counting the true elements of the value of node `mask`, or -1.
  int count_symbol(int mask) const;
  void set_count_symbol(int mask, int symbol) { count_symbols_.emplace_back(mask, symbol); }

  int64_t hint(const jit::SymInt& e) const { return e.evaluate(symbol_hints); }
  /// Decides `e op rhs` from the hints and guards the outcome (nothing to guard for constants).
  bool decide(const jit::SymInt& e, CmpOp op, int64_t rhs, const std::string& why);
  /// Pins `e` to its hint with a guard and returns it.
  int64_t specialize(const jit::SymInt& e, const std::string& why);
  /// Whether a and b are the same size, guarding the answer when it is not structural.
  bool sizes_equal(const jit::SymInt& a, const jit::SymInt& b, const std::string& why);

private:
  /// Records that `a` and `b` are the same size (a guard checks it) in graph.size_facts, when one
  /// of them is a bare symbol (Note [Equal sizes] in jit/passes/equal_sizes.cpp).
  void note_equal(const jit::SymInt& a, const jit::SymInt& b);
  /// Breaks when `e` holds an unbacked symbol: the trace cannot decide anything about it.
  void check_backed(const jit::SymInt& e, const std::string& why) const;
  std::vector<std::pair<int, int>> count_symbols_;  // mask node -> its count's symbol
  StopTrace stop_on_unbacked_ = nullptr;
};

/// Builds the Python value `spec` describes (new ref) from a program's outputs and guard slots
/// (borrowed). The outputs it uses are stolen, or with `steal_outputs` false borrowed: a side
/// effect's stored value may be the return value's too.
PyObject* build_return(const OutputSpec& spec, PyObject* const* outputs, PyObject* const* slots,
                       bool steal_outputs = true);

}  // namespace framejit::frontend
