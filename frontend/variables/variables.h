// variables.h — what a value is while tracing: TensorVar, ScalarVar, ConstVar, containers,
// functions, modules and objects, each with the Source it was read from (null if made in the trace).
#pragma once

#include <Python.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "frontend/cpython/pyref.h"
#include "frontend/guards/source.h"
#include "jit/ir/sym.h"

namespace framejit::frontend {

enum class VarKind : uint8_t {
  Null,      // the NULL that LOAD_GLOBAL/PUSH_NULL put below a callable
  Const,     // an immutable Python value known at trace time (None, numbers, str, tuple of consts,
             // slices, dtypes, types, code objects)
  Tensor,    // an array computed by the graph (or a graph input)
  Scalar,    // a Python number that is a run-time graph value (an input or derived from sizes)
  Tuple,
  List,
  Dict,
  Function,  // a Python function (real, or made by MAKE_FUNCTION during the trace)
  Method,    // a bound method: self + function
  Builtin,   // a real callable implemented in C or NumPy (len, numpy.exp, int, math.sqrt ...)
  AttrMethod,// a method of a traced value looked up by name (x.sum, xs.append, d.items)
  Module,
  Object,    // an instance of a user class, read from a source
  Class,     // a user class
  Cell,      // a closure cell made during the trace
  Iterator,  // a trace-time iterator over known items (range, list, zip, enumerate ...)
  Slice,     // a slice with a size-derived bound (x[:x.shape[0] - 1]); constant slices are Consts
  Set,       // a set made by the traced code (BUILD_SET, set comprehensions) of hashable constants
  Super,     // super(cls, self), whose attributes are looked up along type(self)'s MRO after cls
};

/// The graph nodes of trace values are made in: 0 the frame's graph, k the body of a control-flow
/// operator nested k deep, while the tracer traces it (Note [Tracing bodies] in frontend/trace/
/// control_flow.cpp). A graph value records the scope it was made in; one read in a deeper scope is
/// lifted into it as a body input. Set only by the tracer (one trace at a time holds the GIL).
inline thread_local int current_graph_scope = 0;

struct Var {
  explicit Var(VarKind k) : kind(k) {}
  virtual ~Var() = default;
  VarKind kind;
  SourcePtr source;  // where it was read from; null if created by the traced code
  /// The trace scope it was made in: a Tensor's or Scalar's node is in that scope's graph (0 for
  /// graph inputs, wherever first read); a container or cell made outside a body is not the
  /// body's to change.
  int scope = current_graph_scope;
};
using VarPtr = std::shared_ptr<Var>;

struct NullVar : Var {
  NullVar() : Var(VarKind::Null) {}
};

struct ConstVar : Var {
  explicit ConstVar(OwnedRef v) : Var(VarKind::Const), value(std::move(v)) {}
  OwnedRef value;
};

struct TensorVar : Var {
  explicit TensorVar(int n) : Var(VarKind::Tensor), node(n) {}
  int node;  // graph node index; its meta is the value's TensorMeta. An in-place op on a tensor
             // made by the trace moves every alias to the new node by assigning here.
  bool is_view = false;    // may share memory with another array (a view op's result)
  std::vector<std::weak_ptr<Var>> views;  // the views of it taken by the trace
  // A view's origin (Note [Writes into arrays]): a write into it writes its base, and a write
  // into its base makes it again from the base's new value.
  VarPtr base;             // the array it is a view of; null when not a view of a trace array
  int view_node = -1;      // the node that made it from `base` (args[0] is the base)
  bool index_view = false; // made by basic indexing: a write into it goes into base[key]
  bool maybe_copy = false; // reshape/ravel of an array that may not be contiguous: NumPy may have
                           // copied, so whether it shares memory is not known at trace time
  bool may_be_operand = false;  // a framejit.cond result a branch may hand back unchanged: it may
                                // be an operand's own memory (writes into it break)
  /// A view of it that the traced code can still reach (a write would have to show through it).
  bool has_live_views() const {
    for (const auto& v : views)
      if (!v.expired()) return true;
    return false;
  }
};

/// Marks `view` (a TensorVar just made from `base` by its own node) as a view of `base`, which
/// lists it in turn (Note [Writes into arrays]); `index_view` when basic indexing made it.
inline void link_view(const VarPtr& view, const VarPtr& base, bool index_view) {
  auto* v = static_cast<TensorVar*>(view.get());
  v->is_view = true;
  v->base = base;
  v->view_node = v->node;
  v->index_view = index_view;
  static_cast<TensorVar*>(base.get())->views.push_back(view);
}

/// A Python int/float/bool that lives in the graph as a run-time value. It keeps the value it had
/// at trace time (the hint); when Python logic needs the actual value (a branch, a range, an axis)
/// the tracer specializes it: it records a guard that pins the value and uses the hint.
struct ScalarVar : Var {
  ScalarVar(int n, OwnedRef h) : Var(VarKind::Scalar), node(n), hint(std::move(h)) {}
  int node;
  OwnedRef hint;                    // the Python number at trace time
  std::optional<jit::SymInt> sym;   // set when it is an integer expression over sizes
  /// Graph-input scalars this one was computed from (specializing this specializes them).
  std::vector<std::shared_ptr<ScalarVar>> deps;
  /// A number a loop carries from one iteration to the next (Note [Loop-carried numbers] in
  /// frontend/trace/control_flow.cpp): its hint is only the first iteration's; what is computed
  /// from it lists it in deps.
  bool loop_carried = false;
};

struct SeqVar : Var {
  SeqVar(VarKind k, std::vector<VarPtr> xs) : Var(k), items(std::move(xs)) {}
  std::vector<VarPtr> items;
  /// A Tuple that is a library's named tuple (torch.return_types.max): the type, called with
  /// the plain tuple to rebuild it, and the names of its items for attribute reads. Null: a tuple.
  OwnedRef named_type;
  std::vector<std::string> field_names;
};

struct DictVar : Var {
  DictVar() : Var(VarKind::Dict) {}
  std::vector<std::pair<OwnedRef, VarPtr>> items;  // keys are hashable constants, in order
};

struct CellVar : Var {
  CellVar() : Var(VarKind::Cell) {}
  VarPtr contents;  // null while unbound
};

struct FunctionVar : Var {
  FunctionVar() : Var(VarKind::Function) {}
  OwnedRef code;     // the function's code object
  OwnedRef globals;  // its globals dict
  OwnedRef real;     // the real function object when it came from a source, else null
  OwnedRef qualname;
  SourcePtr globals_base;  // whose __globals__ its global reads go through; null: the root frame's
  std::vector<VarPtr> defaults;
  std::vector<std::pair<OwnedRef, VarPtr>> kwdefaults;
  /// Closure cells: trace-made cells, or for a real function, cells read through its source.
  std::vector<std::shared_ptr<CellVar>> closure;
};

struct MethodVar : Var {
  MethodVar(VarPtr s, VarPtr f) : Var(VarKind::Method), self(std::move(s)), fn(std::move(f)) {}
  VarPtr self;
  VarPtr fn;
};

struct BuiltinVar : Var {
  explicit BuiltinVar(OwnedRef o) : Var(VarKind::Builtin), obj(std::move(o)) {}
  OwnedRef obj;
};

struct AttrMethodVar : Var {
  AttrMethodVar(VarPtr s, std::string n) : Var(VarKind::AttrMethod), self(std::move(s)), name(std::move(n)) {}
  VarPtr self;
  std::string name;
};

struct ModuleVar : Var {
  explicit ModuleVar(OwnedRef m) : Var(VarKind::Module), module(std::move(m)) {}
  OwnedRef module;
};

struct ObjectVar : Var {
  ObjectVar(VarKind k, OwnedRef o) : Var(k), obj(std::move(o)) {}  // Object or Class
  OwnedRef obj;
  /// An Object that is also a graph input (jit::ValueKind::Object): a library object whose
  /// methods the op table captures as library calls on it (a random generator). -1: none.
  int node = -1;
};

/// A grad-mode context manager the trace made (torch.no_grad(), enable_grad(), inference_mode()),
/// or the __exit__ of one it entered (Note [Grad-mode blocks] in frontend/trace/grad_mode.cpp).
/// Objects without a source: no break code can rebuild them, so breaks move before the block.
struct GradModeVar : ObjectVar {
  enum class Role : uint8_t { Manager, Exit };
  GradModeVar(OwnedRef o, Role r, int8_t on, int made)
      : ObjectVar(VarKind::Object, std::move(o)), role(r), enabled(on), made_at(made) {}
  Role role;
  int8_t enabled;  // the mode inside the block: 1 on, 0 off, -1 unchanged (inference_mode(False))
  int made_at;                  // byte offset of the root instruction that made the manager
};

struct IteratorVar : Var {
  explicit IteratorVar(std::vector<VarPtr> xs) : Var(VarKind::Iterator), items(std::move(xs)) {}
  std::vector<VarPtr> items;
  size_t pos = 0;
};

struct SliceVar : Var {
  SliceVar(VarPtr a, VarPtr b, VarPtr c) : Var(VarKind::Slice), start(std::move(a)), stop(std::move(b)), step(std::move(c)) {}
  VarPtr start, stop, step;  // each a Const (int or None) or a size-derived Scalar
};

/// A set made during the trace. Its items are trace-time Python values (a traced number is pinned
/// by a guard when it goes in); `set` is owned by the trace and never handed out: python_value()
/// gives a copy.
struct SetVar : Var {
  explicit SetVar(OwnedRef s) : Var(VarKind::Set), set(std::move(s)) {}
  OwnedRef set;
};

struct SuperVar : Var {
  SuperVar(VarPtr c, VarPtr s) : Var(VarKind::Super), cls(std::move(c)), self(std::move(s)) {}
  VarPtr cls;   // a Class
  VarPtr self;  // an Object with a source
};

template <typename T>
T* as(const VarPtr& v) {
  return static_cast<T*>(v.get());
}

inline VarPtr make_const(OwnedRef v) { return std::make_shared<ConstVar>(std::move(v)); }
inline VarPtr make_const_steal(PyObject* v) { return make_const(OwnedRef::steal(v)); }
inline bool is_const(const VarPtr& v) { return v->kind == VarKind::Const; }
inline bool is_seq(const VarPtr& v) { return v->kind == VarKind::Tuple || v->kind == VarKind::List; }
inline PyObject* const_value(const VarPtr& v) { return as<ConstVar>(v)->value.get(); }  // borrowed

const char* var_kind_name(VarKind k);

}  // namespace framejit::frontend
