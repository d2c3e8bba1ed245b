// guards.cpp — building, checking and explaining a GuardSet.
#include "frontend/guards/guards.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "frontend/interop/array_adapter.h"
#include "frontend/interop/numpy_abi.h"
#include "frontend/interop/torch_array.h"
#include "frontend/tensor/object.h"

namespace framejit::frontend {

enum class LeafKind : uint8_t { Type, Identity, Equals, Tensor, Length, DictKeys, Range, NoInstanceAttr };

struct GuardLeaf {
  LeafKind kind;
  OwnedRef obj;  // the type, object, constant or keys tuple; also keeps TensorGuard::type alive
  TensorGuard tensor;
  Py_ssize_t length = 0;
  RangeGuard range = {};
};

// Note [Guard tree]
//
//   GuardSet
//    ├─ GuardNode L['x']        leaves: TENSOR(float32, rank 2, (s0, 4))   slot 0
//    ├─ GuardNode G['np']       leaves: ID(<module numpy>)
//    │    └─ GuardNode .exp     leaves: ID(<ufunc exp>)
//    └─ GuardNode L['self']     leaves: TYPE(Model)
//         └─ GuardNode .w       leaves: TENSOR(...)                     slot 1
//
// Each node fetches its value from its parent's (never running user code: dict lookups, MRO
// lookups, tuple items) and runs its leaves before its children, so a child can rely on the
// parent's type having been checked. A node with a slot hands its value to the compiled program,
// which is how graph inputs are read without a second lookup.
struct GuardNode {
  SourcePtr src;
  std::vector<GuardLeaf> leaves;
  std::vector<std::unique_ptr<GuardNode>> children;
  int slot = -1;
  /// A global's or a module attribute's last lookup, valid while the dicts it came from are
  /// unchanged (Note [Dict version tags]). Written by check() under the GIL: a cache of what the
  /// frame holds, not a change to what the guards accept.
  struct LookupCache {
    PyObject* dict = nullptr;  // identities only: the globals dict, or the module's dict
    uint64_t version = 0;
    PyObject* builtins = nullptr;  // globals only: a name not in the globals comes from here
    uint64_t builtins_version = 0;
    PyObject* value = nullptr;  // borrowed: held by the dict while it is unchanged
  };
  mutable LookupCache cache;
};

// Note [Shape guards as a program]
// A ShapeGuard's left side is a SymInt: a tree of shared_ptr nodes. Walking it on every call is a
// recursive descent with a pointer chase per node. add_shape() instead compiles each guard, once,
// into postfix instructions appended to one array, `push s0; push 4; floordiv; check >= 2; ...`;
// check() runs them in a loop over a small fixed stack. A guard whose expression needs a deeper
// stack than kShapeStack (none that tracing makes) leaves the program incomplete, and check()
// evaluates the trees instead.
struct ShapeInstr {
  enum class Op : uint8_t { Const, Symbol, Add, Mul, FloorDiv, Mod, Check } op;
  CmpOp cmp = CmpOp::Eq;  // Check only
  int64_t value = 0;      // Const: the value; Symbol: the id; Check: the right-hand side
};

namespace {

constexpr int kShapeStack = 32;

// Appends `e` in postfix order; returns the stack depth it needs.
int emit_sym(const jit::SymInt& e, std::vector<ShapeInstr>& code) {
  using K = jit::SymInt::Kind;
  using Op = ShapeInstr::Op;
  switch (e.kind()) {
    case K::Const: code.push_back({Op::Const, CmpOp::Eq, e.const_value()}); return 1;
    case K::Symbol: code.push_back({Op::Symbol, CmpOp::Eq, e.symbol_id()}); return 1;
    case K::Add:
    case K::Mul:
    case K::FloorDiv:
    case K::Mod: {
      int l = emit_sym(e.lhs(), code);
      int r = emit_sym(e.rhs(), code);
      Op op = e.kind() == K::Add ? Op::Add : e.kind() == K::Mul ? Op::Mul : e.kind() == K::FloorDiv ? Op::FloorDiv : Op::Mod;
      code.push_back({op, CmpOp::Eq, 0});
      return std::max(l, r + 1);
    }
  }
  return kShapeStack + 1;  // unknown node: not representable
}

bool compare(int64_t a, CmpOp op, int64_t b);

// Runs a complete shape program; true when every check passes.
bool run_shape_code(const ShapeInstr* pc, const ShapeInstr* end, const int64_t* syms) {
  using Op = ShapeInstr::Op;
  int64_t stack[kShapeStack];
  int top = 0;  // stack[top - 1] is the top
  for (; pc != end; ++pc) {
    switch (pc->op) {
      case Op::Const: stack[top++] = pc->value; break;
      case Op::Symbol: stack[top++] = syms[pc->value]; break;
      case Op::Add: --top; stack[top - 1] += stack[top]; break;
      case Op::Mul: --top; stack[top - 1] *= stack[top]; break;
      case Op::FloorDiv: {
        int64_t b = stack[--top];
        stack[top - 1] = b == 0 ? 0 : jit::py_floordiv(stack[top - 1], b);
        break;
      }
      case Op::Mod: {
        int64_t b = stack[--top];
        stack[top - 1] = b == 0 ? 0 : jit::py_mod(stack[top - 1], b);
        break;
      }
      case Op::Check:
        if (!compare(stack[--top], pc->cmp, pc->value)) return false;
        break;
    }
  }
  return true;
}

int64_t eval_sym(const jit::SymInt& e, const int64_t* syms) {
  using K = jit::SymInt::Kind;
  switch (e.kind()) {
    case K::Const: return e.const_value();
    case K::Symbol: return syms[e.symbol_id()];
    case K::Add: return eval_sym(e.lhs(), syms) + eval_sym(e.rhs(), syms);
    case K::Mul: return eval_sym(e.lhs(), syms) * eval_sym(e.rhs(), syms);
    case K::FloorDiv: {
      int64_t b = eval_sym(e.rhs(), syms);
      return b == 0 ? 0 : jit::py_floordiv(eval_sym(e.lhs(), syms), b);
    }
    case K::Mod: {
      int64_t b = eval_sym(e.rhs(), syms);
      return b == 0 ? 0 : jit::py_mod(eval_sym(e.lhs(), syms), b);
    }
  }
  return 0;
}

bool compare(int64_t a, CmpOp op, int64_t b) {
  switch (op) {
    case CmpOp::Eq: return a == b;
    case CmpOp::Ne: return a != b;
    case CmpOp::Lt: return a < b;
    case CmpOp::Le: return a <= b;
    case CmpOp::Gt: return a > b;
    case CmpOp::Ge: return a >= b;
  }
  return false;
}

const char* op_text(CmpOp op) {
  static const char* kText[] = {"==", "!=", "<", "<=", ">", ">="};
  return kText[static_cast<int>(op)];
}

std::string repr_of(PyObject* o) {
  PyObject* r = PyObject_Repr(o);  // new ref
  if (!r) {
    PyErr_Clear();
    return "<?>";
  }
  const char* s = PyUnicode_AsUTF8(r);
  std::string out = s ? s : "<?>";
  Py_DECREF(r);
  if (out.size() > 80) out = out.substr(0, 77) + "...";
  return out;
}

bool equals(PyObject* v, PyObject* expected) {
  if (v == expected) return true;
  if (Py_TYPE(v) != Py_TYPE(expected)) return false;
  if (PyFloat_CheckExact(v)) {
    // Bit equality: -0.0 is not 0.0 here (it can change a result's sign), and NaN is itself.
    double a = PyFloat_AS_DOUBLE(v), b = PyFloat_AS_DOUBLE(expected);
    return std::memcmp(&a, &b, sizeof a) == 0;
  }
  // Only immutable builtin types reach here, so comparing runs no user code.
  int eq = PyObject_RichCompareBool(v, expected, Py_EQ);
  if (eq < 0) {
    PyErr_Clear();
    return false;
  }
  return eq == 1;
}

// Returns "" when the tensor matches, else why not. `syms` may be null (verbose mode).
template <bool kVerbose>
bool check_tensor(const TensorGuard& g, PyObject* v, int64_t* syms, std::string* why) {
  if (Py_TYPE(v) != g.type) {
    if (kVerbose) *why = std::string("type is ") + Py_TYPE(v)->tp_name + ", expected " + g.type->tp_name;
    return false;
  }
  int nd, type_num;
  const int64_t* dims;
  bool c;
  if (g.kind == TensorGuard::Kind::NumPyScalar) return true;  // its exact type pins the dtype
  if (g.kind == TensorGuard::Kind::Torch) {
    // Note [Torch values]: read through the DLPack export the run keeps (Note [Torch arrays]).
    const std::optional<TorchTensorFacts> facts = torch_tensor_facts(v);
    if (!facts) {
      if (kVerbose) *why = "is not a CPU or CUDA tensor of a dtype framejit has";
      return false;
    }
    const ArrayFields& a = facts->fields;
    if (!(a.device == g.device)) {
      if (kVerbose) *why = "is on another device";
      return false;
    }
    const bool requires_grad = facts->requires_grad;
    if (requires_grad != g.requires_grad) {
      if (kVerbose) *why = requires_grad ? "requires grad" : "no longer requires grad";
      return false;
    }
    if (requires_grad && torch_grad_enabled() != g.grad_enabled) {
      if (kVerbose) *why = g.grad_enabled ? "requires grad, and grad mode is off" : "requires grad, and grad mode is on";
      return false;
    }
    nd = a.nd;
    dims = a.dims;
    type_num = static_cast<int>(a.dtype);
    c = fields_c_contiguous(a);
  } else if (g.kind == TensorGuard::Kind::CuPy) {
    // Note [CuPy arrays]: read once per run, kept by the adapter's run table.
    const ArrayFields a = array_adapter(ArrayKind::CuPy)->fields(v);
    if (!a.ok) {
      if (kVerbose) *why = "is not a CuPy array of a dtype framejit has";
      return false;
    }
    if (!(a.device == g.device)) {
      if (kVerbose) *why = "is on another device";
      return false;
    }
    nd = a.nd;
    dims = a.dims;
    type_num = static_cast<int>(a.dtype);
    c = fields_c_contiguous(a);
  } else if (g.kind == TensorGuard::Kind::Tensor) {
    const TensorObject* t = as_tensor(v);
    if (!(t->device == g.device)) {
      if (kVerbose) *why = "is on another device";
      return false;
    }
    nd = t->nd;
    dims = t->shape;
    type_num = static_cast<int>(t->dtype);
    c = (t->flags & kTensorCContiguous) != 0;
  } else {
    NdArrayFields* a = as_ndarray(v);
    auto* d = reinterpret_cast<DescrFields*>(a->descr);
    if (d->byteorder == '>') {
      if (kVerbose) *why = "byte order is big-endian";
      return false;
    }
    nd = a->nd;
    dims = a->dimensions;
    type_num = d->type_num;
    c = (a->flags & kNpyCContiguous) != 0;
  }
  if (type_num != g.type_num) {
    if (kVerbose) *why = "dtype changed (type number " + std::to_string(type_num) +
                         ", expected " + std::to_string(g.type_num) + ")";
    return false;
  }
  if (nd != g.ndim) {
    if (kVerbose) *why = "rank is " + std::to_string(nd) + ", expected " + std::to_string(g.ndim);
    return false;
  }
  for (int i = 0; i < g.ndim; ++i) {
    int64_t n = dims[i];
    if (g.sizes[i] >= 0 ? n != g.sizes[i] : n < 2) {
      if (kVerbose)
        *why = "size of dim " + std::to_string(i) + " is " + std::to_string(n) + ", expected " +
               (g.sizes[i] >= 0 ? std::to_string(g.sizes[i]) : std::string(">= 2"));
      return false;
    }
    if (g.symbols[i] >= 0 && syms) syms[g.symbols[i]] = n;
  }
  if (c != g.c_contiguous) {
    if (kVerbose) *why = c ? "became C-contiguous" : "is no longer C-contiguous";
    return false;
  }
  if (g.writeable && g.kind == TensorGuard::Kind::NdArray && !(as_ndarray(v)->flags & kNpyWriteable)) {
    if (kVerbose) *why = "is read-only";
    return false;
  }
  return true;
}

// The bytes an array's elements span, [lo, hi); empty arrays span nothing. The tensor guards
// of both slots ran before, so they are arrays of the traced dtypes.
bool array_extent(PyObject* v, int itemsize, uintptr_t* lo, uintptr_t* hi) {
  if (!v) return false;
  const NumPyHandles* np = numpy_handles();
  ArrayFields a;
  if (np && Py_TYPE(v) == np->ndarray) {  // the common case, read in place
    NdArrayFields* n = as_ndarray(v);
    a.data = n->data;
    a.nd = n->nd;
    a.dims = n->dimensions;
    a.strides = n->strides;
    a.ok = true;
  } else {
    a = array_fields(v);
  }
  if (!a.ok) return false;
  intptr_t first = 0, last = 0;
  for (int i = 0; i < a.nd; ++i) {
    if (a.dims[i] == 0) {
      *lo = *hi = 0;
      return true;
    }
    intptr_t span = (a.dims[i] - 1) * a.strides[i];
    (span < 0 ? first : last) += span;
  }
  *lo = reinterpret_cast<uintptr_t>(a.data) + first;
  *hi = reinterpret_cast<uintptr_t>(a.data) + last + static_cast<uintptr_t>(itemsize);
  return true;
}

bool extents_disjoint(PyObject* a, int itemsize_a, PyObject* b, int itemsize_b) {
  uintptr_t alo, ahi, blo, bhi;
  if (!array_extent(a, itemsize_a, &alo, &ahi) || !array_extent(b, itemsize_b, &blo, &bhi)) return false;
  return alo == ahi || blo == bhi || ahi <= blo || bhi <= alo;
}

template <typename D>
bool disjoint(const D& d, PyObject* const* slots) {
  return extents_disjoint(slots[d.a], d.itemsize_a, slots[d.b], d.itemsize_b);
}

template <bool kVerbose>
bool check_leaf(const GuardLeaf& leaf, PyObject* v, int64_t* syms, std::string* why) {
  switch (leaf.kind) {
    case LeafKind::Type:
      if (Py_TYPE(v) == reinterpret_cast<PyTypeObject*>(leaf.obj.get())) return true;
      if (kVerbose) *why = std::string("type is ") + Py_TYPE(v)->tp_name + ", expected " +
                           reinterpret_cast<PyTypeObject*>(leaf.obj.get())->tp_name;
      return false;
    case LeafKind::Identity:
      if (v == leaf.obj.get()) return true;
      if (kVerbose) *why = "is a different object than " + repr_of(leaf.obj.get());
      return false;
    case LeafKind::Equals:
      if (equals(v, leaf.obj.get())) return true;
      if (kVerbose) *why = "is " + repr_of(v) + ", expected " + repr_of(leaf.obj.get());
      return false;
    case LeafKind::Tensor: return check_tensor<kVerbose>(leaf.tensor, v, syms, why);
    case LeafKind::Length: {
      Py_ssize_t n = PyList_Check(v) ? PyList_GET_SIZE(v)
                     : PyTuple_Check(v) ? PyTuple_GET_SIZE(v)
                     : PyDict_Check(v)  ? PyDict_GET_SIZE(v)
                                        : -1;
      if (n == leaf.length) return true;
      if (kVerbose) *why = "length is " + std::to_string(n) + ", expected " + std::to_string(leaf.length);
      return false;
    }
    case LeafKind::Range: {
      const RangeGuard& r = leaf.range;
      bool ok;
      // Python numbers, and NumPy scalars (numpy.float64 is a float; the others are read in place).
      if (r.is_float) {
        double x = NAN;
        const bool number = PyFloat_Check(v) ? (x = PyFloat_AS_DOUBLE(v), true) : numpy_scalar_float(v, &x);
        ok = number && (std::isfinite(x) ? (x > r.flo && x < r.fhi) : r.nonfinite_ok);
      } else {
        int overflow = 0;
        long long x = 0;
        const bool number = PyLong_Check(v) ? (x = PyLong_AsLongLongAndOverflow(v, &overflow), true)
                                            : numpy_scalar_int(v, &x);
        ok = number && !overflow && x >= r.ilo && x <= r.ihi;
      }
      if (!ok && kVerbose) *why = "value " + repr_of(v) + " changes NumPy's result type";
      return ok;
    }
    case LeafKind::NoInstanceAttr: {
      PyObject** dictptr = _PyObject_GetDictPtr(v);
      bool ok = !dictptr || !*dictptr || !PyDict_GetItemWithError(*dictptr, leaf.obj.get());
      if (PyErr_Occurred()) {
        PyErr_Clear();
        ok = false;
      }
      if (!ok && kVerbose) *why = "an instance attribute now shadows " + repr_of(leaf.obj.get());
      return ok;
    }
    case LeafKind::DictKeys: {
      PyObject* keys = leaf.obj.get();
      bool ok = PyDict_Check(v) && PyDict_GET_SIZE(v) == PyTuple_GET_SIZE(keys);
      Py_ssize_t pos = 0, i = 0;
      PyObject *k, *val;
      if (ok && !PyDict_CheckExact(v)) {
        // An OrderedDict (its type is guarded too): its own order, by iterating it.
        PyObject* it = PyObject_GetIter(v);  // new ref
        ok = it != nullptr;
        while (ok) {
          PyObject* x = PyIter_Next(it);  // new ref
          if (!x) break;
          ok = i < PyTuple_GET_SIZE(keys) && equals(x, PyTuple_GET_ITEM(keys, i++));
          Py_DECREF(x);
        }
        Py_XDECREF(it);
        if (PyErr_Occurred()) {
          PyErr_Clear();
          ok = false;
        }
      }
      while (ok && PyDict_CheckExact(v) && PyDict_Next(v, &pos, &k, &val)) ok = equals(k, PyTuple_GET_ITEM(keys, i++));
      if (!ok && kVerbose) *why = "dict keys changed, expected " + repr_of(keys);
      return ok;
    }
  }
  return false;
}

// fetch_step(), answered from the node's cache for a global or a module attribute whose dicts have
// not changed since the last check. Borrowed.
PyObject* fetch_cached(const GuardNode& node, const FrameView& frame, PyObject* base) {
#ifdef FRAMEJIT_HAVE_DICT_VERSION
  const Source& s = *node.src;
  GuardNode::LookupCache& c = node.cache;
  if (s.kind == SourceKind::Global && frame.globals && frame.builtins && PyDict_Check(frame.globals) &&
      PyDict_Check(frame.builtins)) {
    if (c.dict == frame.globals && c.version == dict_version_tag(frame.globals) && c.builtins == frame.builtins &&
        c.builtins_version == dict_version_tag(frame.builtins))
      return c.value;
    PyObject* v = fetch_step(s, frame, base);
    if (v) c = {frame.globals, dict_version_tag(frame.globals), frame.builtins, dict_version_tag(frame.builtins), v};
    return v;
  }
  if (s.kind == SourceKind::ModuleAttr && base && PyModule_Check(base)) {
    PyObject* dict = PyModule_GetDict(base);  // borrowed
    if (dict && PyDict_Check(dict)) {
      if (c.dict == dict && c.version == dict_version_tag(dict)) return c.value;
      PyObject* v = fetch_step(s, frame, base);
      if (v) c = {dict, dict_version_tag(dict), nullptr, 0, v};
      return v;
    }
  }
#endif
  return fetch_step(*node.src, frame, base);
}

bool check_node(const GuardNode& node, const FrameView& frame, PyObject* base, PyObject** slots,
                int64_t* syms) {
  PyObject* v = fetch_cached(node, frame, base);  // borrowed
  if (!v) return false;
  for (const GuardLeaf& leaf : node.leaves)
    if (!check_leaf<false>(leaf, v, syms, nullptr)) return false;
  if (node.slot >= 0) slots[node.slot] = v;
  for (const auto& child : node.children)
    if (!check_node(*child, frame, v, slots, syms)) return false;
  return true;
}

std::string verbose_node(const GuardNode& node, const FrameView& frame, PyObject* base,
                         int64_t* syms) {
  PyObject* v = fetch_step(*node.src, frame, base);
  if (!v) return node.src->to_string() + " is missing";
  std::string why;
  for (const GuardLeaf& leaf : node.leaves)
    if (!check_leaf<true>(leaf, v, syms, &why)) return node.src->to_string() + ": " + why;
  for (const auto& child : node.children) {
    std::string r = verbose_node(*child, frame, v, syms);
    if (!r.empty()) return r;
  }
  return "";
}

std::string number_text(double x) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", x);
  return buf;
}

std::string describe_leaf(const GuardLeaf& leaf, const std::string& what) {
  switch (leaf.kind) {
    case LeafKind::Type:
      return "type(" + what + ") is " + reinterpret_cast<PyTypeObject*>(leaf.obj.get())->tp_name;
    case LeafKind::Identity: return what + " is " + repr_of(leaf.obj.get());
    case LeafKind::Equals: return what + " == " + repr_of(leaf.obj.get());
    case LeafKind::Length: return "len(" + what + ") == " + std::to_string(leaf.length);
    case LeafKind::NoInstanceAttr: return repr_of(leaf.obj.get()) + " not in " + what + ".__dict__";
    case LeafKind::Range:
      if (leaf.range.is_float)
        return number_text(leaf.range.flo) + " < " + what + " < " + number_text(leaf.range.fhi) +
               (leaf.range.nonfinite_ok ? " or not finite" : "") + "  # NumPy value-based casting";
      if (leaf.range.ilo == INT64_MIN && leaf.range.ihi == INT64_MAX) return what + " fits int64";
      return std::to_string(leaf.range.ilo) + " <= " + what + " <= " + std::to_string(leaf.range.ihi) +
             "  # NumPy value-based casting";
    case LeafKind::DictKeys: return "tuple(" + what + ".keys()) == " + repr_of(leaf.obj.get());
    case LeafKind::Tensor: {
      const TensorGuard& g = leaf.tensor;
      std::string s = what + ": " + g.type->tp_name;
      if (g.type_num >= 0) {
        // A framejit.Tensor's, torch or CuPy array's guard holds its DType; an ndarray's, NumPy's type number.
        auto dt = g.kind == TensorGuard::Kind::Tensor || g.kind == TensorGuard::Kind::Torch ||
                          g.kind == TensorGuard::Kind::CuPy
                      ? std::optional<rt::DType>(static_cast<rt::DType>(g.type_num))
                      : dtype_from_type_num(g.type_num);
        s += " " + std::string(dt ? rt::dtype_name(*dt) : "?") + " shape (";
        for (int i = 0; i < g.ndim; ++i) {
          if (i) s += ", ";
          s += g.sizes[i] >= 0 ? std::to_string(g.sizes[i]) : "s" + std::to_string(g.symbols[i]) + ">=2";
        }
        s += g.ndim == 1 ? ",)" : ")";
        s += g.c_contiguous ? " C-contiguous" : " strided";
        if (g.writeable) s += " writeable";
        if (g.requires_grad) s += g.grad_enabled ? " requires_grad (grad mode on)" : " requires_grad (grad mode off)";
      }
      return s;
    }
  }
  return what;
}

void describe_node(const GuardNode& node, std::vector<std::string>& out) {
  std::string what = node.src->to_string();
  for (const GuardLeaf& leaf : node.leaves) out.push_back(describe_leaf(leaf, what));
  for (const auto& child : node.children) describe_node(*child, out);
}

}  // namespace

namespace {
std::string find_slot(const GuardNode& n, int slot) {
  if (n.slot == slot) return n.src->to_string();
  for (const auto& c : n.children)
    if (std::string s = find_slot(*c, slot); !s.empty()) return s;
  return "";
}
}  // namespace

std::string GuardSet::slot_source_text(int slot) const {
  for (const auto& root : roots_)
    if (std::string s = find_slot(*root, slot); !s.empty()) return s;
  return "slot " + std::to_string(slot);
}

bool arrays_disjoint(PyObject* a, int itemsize_a, PyObject* b, int itemsize_b) {
  return extents_disjoint(a, itemsize_a, b, itemsize_b);
}

GuardSet::GuardSet() = default;
GuardSet::~GuardSet() = default;
GuardSet::GuardSet(GuardSet&&) noexcept = default;
GuardSet& GuardSet::operator=(GuardSet&&) noexcept = default;

GuardNode* GuardSet::node_for(const SourcePtr& src) {
  if (src->kind == SourceKind::Local) max_local_ = std::max(max_local_, src->index);
  std::vector<std::unique_ptr<GuardNode>>* level = &roots_;
  if (src->base) level = &node_for(src->base)->children;
  for (auto& n : *level)
    if (n->src->same_step(*src)) return n.get();
  level->push_back(std::make_unique<GuardNode>());
  level->back()->src = src;
  return level->back().get();
}

void GuardSet::add_type(const SourcePtr& src, PyTypeObject* type) {
  GuardNode* n = node_for(src);
  for (const GuardLeaf& l : n->leaves)
    if (l.kind == LeafKind::Type && l.obj.get() == reinterpret_cast<PyObject*>(type)) return;
  n->leaves.push_back({LeafKind::Type, OwnedRef::borrow(reinterpret_cast<PyObject*>(type)), {}, 0});
}

void GuardSet::add_identity(const SourcePtr& src, PyObject* obj) {
  GuardNode* n = node_for(src);
  for (const GuardLeaf& l : n->leaves)
    if (l.kind == LeafKind::Identity) return;
  n->leaves.push_back({LeafKind::Identity, OwnedRef::borrow(obj), {}, 0});
}

void GuardSet::add_equals(const SourcePtr& src, PyObject* value) {
  GuardNode* n = node_for(src);
  for (const GuardLeaf& l : n->leaves)
    if (l.kind == LeafKind::Equals) return;
  n->leaves.push_back({LeafKind::Equals, OwnedRef::borrow(value), {}, 0});
}

void GuardSet::add_tensor(const SourcePtr& src, TensorGuard g) {
  GuardNode* n = node_for(src);
  for (const GuardLeaf& l : n->leaves)
    if (l.kind == LeafKind::Tensor) return;
  OwnedRef keep = OwnedRef::borrow(reinterpret_cast<PyObject*>(g.type));
  n->leaves.push_back({LeafKind::Tensor, std::move(keep), std::move(g), 0});
}

void GuardSet::add_range(const SourcePtr& src, RangeGuard r) {
  GuardNode* n = node_for(src);
  for (GuardLeaf& l : n->leaves)
    if (l.kind == LeafKind::Range) {  // intersect: both results must stay as traced
      if (r.is_float) {
        l.range.flo = std::max(l.range.flo, r.flo);
        l.range.fhi = std::min(l.range.fhi, r.fhi);
        l.range.nonfinite_ok &= r.nonfinite_ok;
      } else {
        l.range.ilo = std::max(l.range.ilo, r.ilo);
        l.range.ihi = std::min(l.range.ihi, r.ihi);
      }
      return;
    }
  GuardLeaf leaf{LeafKind::Range, {}, {}, 0, r};
  n->leaves.push_back(std::move(leaf));
}

void GuardSet::add_no_instance_attr(const SourcePtr& src, PyObject* name) {
  GuardNode* n = node_for(src);
  for (const GuardLeaf& l : n->leaves)
    if (l.kind == LeafKind::NoInstanceAttr && equals(l.obj.get(), name)) return;
  n->leaves.push_back({LeafKind::NoInstanceAttr, OwnedRef::borrow(name), {}, 0, {}});
}

void GuardSet::add_length(const SourcePtr& src, Py_ssize_t len) {
  GuardNode* n = node_for(src);
  for (const GuardLeaf& l : n->leaves)
    if (l.kind == LeafKind::Length) return;
  n->leaves.push_back({LeafKind::Length, {}, {}, len});
}

void GuardSet::add_dict_keys(const SourcePtr& src, PyObject* keys_tuple) {
  GuardNode* n = node_for(src);
  for (const GuardLeaf& l : n->leaves)
    if (l.kind == LeafKind::DictKeys) return;
  n->leaves.push_back({LeafKind::DictKeys, OwnedRef::borrow(keys_tuple), {}, 0});
}

void GuardSet::add_disjoint(int a, int b, int itemsize_a, int itemsize_b) {
  for (const Disjoint& d : disjoint_)
    if ((d.a == a && d.b == b) || (d.a == b && d.b == a)) return;
  disjoint_.push_back({a, b, itemsize_a, itemsize_b});
}

void GuardSet::require_writeable(const SourcePtr& src) {
  for (GuardLeaf& l : node_for(src)->leaves)
    if (l.kind == LeafKind::Tensor) l.tensor.writeable = true;
}

void GuardSet::add_shape(ShapeGuard g) {
  for (const ShapeGuard& s : shape_guards_)
    if (s.op == g.op && s.rhs == g.rhs && s.lhs.same_as(g.lhs)) return;
  size_t mark = shape_code_.size();
  if (emit_sym(g.lhs, shape_code_) > kShapeStack) {
    shape_code_.resize(mark);
    shape_code_complete_ = false;
  } else {
    shape_code_.push_back({ShapeInstr::Op::Check, g.op, g.rhs});
  }
  shape_guards_.push_back(std::move(g));
}

int GuardSet::slot_for(const SourcePtr& src) {
  GuardNode* n = node_for(src);
  if (n->slot < 0) n->slot = num_slots_++;
  return n->slot;
}

bool GuardSet::check(const FrameView& frame, PyObject** slots, int64_t* syms) const noexcept {
  for (const auto& root : roots_)
    if (!check_node(*root, frame, nullptr, slots, syms)) return false;
  for (const Disjoint& d : disjoint_)
    if (!disjoint(d, slots)) return false;
  if (shape_code_complete_) return run_shape_code(shape_code_.data(), shape_code_.data() + shape_code_.size(), syms);
  for (const ShapeGuard& g : shape_guards_)
    if (!compare(eval_sym(g.lhs, syms), g.op, g.rhs)) return false;
  return true;
}

std::string GuardSet::check_verbose(const FrameView& frame) const {
  std::vector<int64_t> syms(num_symbols_ + 1, 0);
  for (const auto& root : roots_) {
    std::string r = verbose_node(*root, frame, nullptr, syms.data());
    if (!r.empty()) return r;
  }
  if (!disjoint_.empty()) {
    std::vector<PyObject*> slots(static_cast<size_t>(num_slots_), nullptr);
    for (const auto& root : roots_) check_node(*root, frame, nullptr, slots.data(), syms.data());
    for (const Disjoint& d : disjoint_)
      if (!disjoint(d, slots.data())) return "two arrays the graph writes and reads share memory";
  }
  for (const ShapeGuard& g : shape_guards_) {
    int64_t v = eval_sym(g.lhs, syms.data());
    if (!compare(v, g.op, g.rhs))
      return g.lhs.to_string() + " " + op_text(g.op) + " " + std::to_string(g.rhs) + " failed (" +
             g.lhs.to_string() + " = " + std::to_string(v) + (g.why.empty() ? "" : "; " + g.why) + ")";
  }
  return "";
}

std::vector<std::string> GuardSet::describe() const {
  std::vector<std::string> out;
  for (const auto& root : roots_) describe_node(*root, out);
  for (const Disjoint& d : disjoint_)
    out.push_back(slot_source_text(d.a) + " and " + slot_source_text(d.b) + " share no memory");
  for (const ShapeGuard& g : shape_guards_)
    out.push_back(g.lhs.to_string() + " " + op_text(g.op) + " " + std::to_string(g.rhs) +
                  (g.why.empty() ? "" : "  # " + g.why));
  return out;
}

}  // namespace framejit::frontend
