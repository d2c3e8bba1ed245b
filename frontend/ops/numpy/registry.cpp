// registry.cpp — the table of NumPy callables and ndarray methods framejit captures, and dispatch
// from Python operators, functions, methods and attributes to the op families.
#include "frontend/ops/numpy/registry.h"

#include <cstring>
#include <unordered_map>

#include "frontend/interop/numpy_abi.h"
#include "frontend/ops/numpy/canonical.h"
#include "frontend/ops/numpy/families.h"
#include "frontend/cpython/python_env.h"
#include "frontend/trace/op_table.h"

namespace framejit::frontend::ops {

namespace {

enum class Family : uint8_t {
  Elementwise, Reduction, Linalg, View, Join, Creation, Composite, Sequence, Array, Cumulative, Extern,
  ScalarType, Indexing, Tiling, Contraction, Store, Grid, ArrayType
};

struct Entry {
  std::string name;  // the numpy attribute name
  Family family;
};

// Elementwise ufuncs (and where/clip, which broadcast their operands the same way).
const char* const kElementwise[] = {
    "add", "subtract", "multiply", "divide", "true_divide", "floor_divide", "mod", "remainder", "fmod",
    "power", "float_power", "maximum", "minimum", "fmax", "fmin", "arctan2", "hypot", "copysign",
    "equal", "not_equal", "less", "less_equal", "greater", "greater_equal", "logical_and",
    "logical_or", "logical_xor", "logical_not", "bitwise_and", "bitwise_or", "bitwise_xor",
    "invert", "bitwise_not", "left_shift", "right_shift", "negative", "positive", "exp", "exp2",
    "expm1", "log", "log2", "log10", "log1p", "sqrt", "cbrt", "square", "reciprocal", "sin", "cos",
    "tan", "arcsin", "arccos", "arctan", "sinh", "cosh", "tanh", "arcsinh", "arccosh", "arctanh",
    "abs", "absolute", "fabs", "sign", "floor", "ceil", "trunc", "rint", "isnan", "isinf",
    "isfinite", "signbit", "where", "clip", "deg2rad", "rad2deg", "degrees", "radians"};
const char* const kReductions[] = {"sum", "mean", "max", "min", "amax", "amin", "prod", "var",
                                   "std", "argmax", "argmin", "any", "all"};
const char* const kViews[] = {"reshape", "transpose", "swapaxes", "expand_dims", "squeeze",
                              "broadcast_to", "ravel", "split", "copy"};
const char* const kIndexing[] = {"nonzero", "argwhere", "flatnonzero", "take", "take_along_axis"};
const char* const kCreation[] = {"zeros", "ones", "empty", "full", "arange", "zeros_like",
                                 "ones_like", "empty_like", "full_like"};

// Composites (sequences.cpp, arrays.cpp): traced as the ops above.
const char* const kSequences[] = {"linspace", "eye", "identity", "tri", "tril", "triu", "diag",
                                  "diagonal", "trace", "diff", "meshgrid", "indices"};
const char* const kArrays[] = {"asarray", "asanyarray", "array", "ascontiguousarray", "atleast_1d",
                               "atleast_2d", "atleast_3d", "shape", "ndim", "size", "roll", "isscalar"};
// Composites of the second round: tiling.cpp, contractions.cpp; copyto writes (stores.cpp).
const char* const kTiling[] = {"tile", "repeat", "pad"};
const char* const kContractions[] = {"einsum", "cov"};
// numpy.mgrid / numpy.ogrid: objects indexed with slices (grid_getitem), not called.
const char* const kGrids[] = {"mgrid", "ogrid"};
// Extern steps with exact meta (externs.cpp), by their path under numpy. NB: not listed by
// supported_ops(): they run the library, not generated code.
const char* const kExterns[] = {"linalg.solve", "linalg.inv", "linalg.norm", "linalg.cholesky", "linalg.det",
                                "sort", "argsort", "partition", "argpartition", "bincount",
                                "histogram", "histogram_bin_edges", "searchsorted",
                                "random.rand", "random.randn", "random.random", "random.random_sample",
                                "random.sample", "random.ranf", "random.standard_normal",
                                "random.uniform", "random.normal", "random.randint", "random.seed",
                                "random.permutation", "random.choice", "random.shuffle"};
// NumPy's scalar types, called to make a scalar: numpy.float32(0.5), numpy.int64(n) (scalar_types.cpp).
const char* const kScalarTypes[] = {"float64", "float32", "float16", "int64", "int32", "int16", "int8",
                                    "uint64", "uint32", "uint16", "uint8", "bool_", "double", "single",
                                    "half", "intc", "intp", "int_", "float_", "longlong"};
// The ufunc methods captured: `numpy.<ufunc>.<method>` for every registered ufunc.
const char* const kUfuncMethods[] = {"outer", "reduce", "accumulate", "reduceat"};

struct Registry {
  std::unordered_map<PyObject*, Entry> by_object;  // borrowed keys: numpy keeps them alive
};

Registry* g_registry = new Registry();  // NB: immortal, like the NumPy objects it points at

const Registry& registry() { return *g_registry; }

// numpy.<a>.<b>..., borrowed (NumPy keeps its submodules' functions alive), or null.
PyObject* numpy_path(const std::string& path) {
  size_t dot = path.find('.');
  PyObject* obj = numpy_attr(path.substr(0, dot).c_str());
  while (obj && dot != std::string::npos) {
    size_t next = path.find('.', dot + 1);
    OwnedRef r = OwnedRef::steal(PyObject_GetAttrString(obj, path.substr(dot + 1, next - dot - 1).c_str()));
    if (!r) PyErr_Clear();
    obj = r.get();  // NB: its owner (the module) keeps it alive
    dot = next;
  }
  return obj;
}

bool is_ufunc(PyObject* obj) {  // borrowed
  PyObject* add = numpy_attr("add");
  return add && Py_TYPE(obj) == Py_TYPE(add);
}

// For `bound` = numpy.add.outer (a new bound method object at every attribute read): the ufunc
// it belongs to, when that ufunc is registered and the method is one the table captures.
const Entry* ufunc_method_entry(PyObject* bound, std::string* method) {
  if (!PyCFunction_Check(bound)) return nullptr;
  PyObject* self = PyCFunction_GET_SELF(bound);  // borrowed
  if (!self || !is_ufunc(self)) return nullptr;
  auto it = registry().by_object.find(self);
  if (it == registry().by_object.end() || it->second.family != Family::Elementwise) return nullptr;
  const char* name = reinterpret_cast<PyCFunctionObject*>(bound)->m_ml->ml_name;
  for (const char* m : kUfuncMethods)
    if (std::strcmp(m, name) == 0) {
      if (method) *method = m;
      return &it->second;
    }
  return nullptr;
}

// Calls `fn` with the name of every function under numpy the table traces as graph ops (not the
// extern steps, scalar types and grids), aliases included.
template <typename Fn>
void for_each_function_name(Fn&& fn) {
  for (const char* n : kElementwise) fn(n);
  for (const char* n : kReductions) fn(n);
  for (const char* n : kViews) fn(n);
  for (const char* n : kCreation) fn(n);
  for (const char* n : kIndexing) fn(n);
  for (const char* n : {"matmul", "dot", "concatenate", "stack", "outer", "flip", "cumsum", "cumprod", "vstack",
                        "hstack", "dstack", "column_stack", "append", "copyto"})
    fn(n);
  for (const char* n : kSequences) fn(n);
  for (const char* n : kArrays) fn(n);
  for (const char* n : kTiling) fn(n);
  for (const char* n : kContractions) fn(n);
}

}  // namespace

namespace {

void fill_registry() {
  Registry* r = g_registry;
  if (!r->by_object.empty() || !numpy_handles()) return;
  {
    auto add = [&](const char* name, Family f) {
      if (PyObject* obj = numpy_attr(name)) r->by_object.emplace(obj, Entry{name, f});
    };
    for (const char* n : kElementwise) add(n, Family::Elementwise);
    for (const char* n : kReductions) add(n, Family::Reduction);
    for (const char* n : kViews) add(n, Family::View);
    for (const char* n : kCreation) add(n, Family::Creation);
    for (const char* n : kIndexing) add(n, Family::Indexing);
    add("matmul", Family::Linalg);
    add("dot", Family::Linalg);
    add("concatenate", Family::Join);
    add("outer", Family::Composite);
    for (const char* n : {"vstack", "hstack", "dstack", "column_stack", "row_stack", "append"}) add(n, Family::Composite);
    add("flip", Family::Composite);
    add("stack", Family::Join);
    for (const char* n : kSequences) add(n, Family::Sequence);
    for (const char* n : kArrays) add(n, Family::Array);
    add("cumsum", Family::Cumulative);
    for (const char* n : kScalarTypes) add(n, Family::ScalarType);
    add("cumprod", Family::Cumulative);
    for (const char* n : kTiling) add(n, Family::Tiling);
    for (const char* n : kContractions) add(n, Family::Contraction);
    for (const char* n : kGrids) add(n, Family::Grid);
    add("copyto", Family::Store);
    add("ndarray", Family::ArrayType);
    for (const char* n : kExterns)
      if (PyObject* obj = numpy_path(n)) r->by_object.emplace(obj, Entry{n, Family::Extern});
  }
}

VarPtr dispatch(Tracer& tx, const Entry& e, const std::string& target, PyObject* fn, const std::vector<VarPtr>& args,
                const KwArgs& kwargs, bool is_method) {
  if (e.family == Family::Creation || e.family == Family::Join || e.family == Family::Sequence ||
      e.family == Family::Extern || e.family == Family::Cumulative || e.family == Family::Tiling ||
      e.family == Family::Contraction || e.family == Family::ArrayType) {
    // These make NumPy arrays (Note [One array kind per graph]), or CuPy's.
    claim_numpy_arrays(tx, target);
  }
  if (e.name == "where" && args.size() == 1 && kwargs.empty()) return indexing(tx, "where", args, kwargs);
  switch (e.family) {
    case Family::Indexing: return indexing(tx, e.name, args, kwargs);
    case Family::Elementwise:
      if (VarPtr r = elementwise_out(tx, target, fn, args, kwargs)) return r;
      return elementwise(tx, target, fn, args, kwargs);
    case Family::Reduction: return reduction(tx, e.name, target, args, kwargs, is_method);
    case Family::Linalg: return linalg(tx, e.name, target, args, kwargs);
    case Family::View: return view_op(tx, e.name, target, args, kwargs, is_method);
    case Family::Join: return join(tx, e.name, args, kwargs);
    case Family::Creation: return creation(tx, e.name, args, kwargs);
    case Family::Composite: return composite(tx, e.name, args, kwargs);
    case Family::Sequence: return sequence(tx, e.name, args, kwargs);
    case Family::Array: return array_fn(tx, e.name, args, kwargs);
    case Family::Cumulative: return cumulative(tx, e.name, args, kwargs);
    case Family::Extern: return extern_fn(tx, e.name, args, kwargs);
    case Family::ScalarType: return scalar_type(tx, e.name, fn, args, kwargs);
    case Family::Tiling: return tiling(tx, e.name, args, kwargs);
    case Family::Contraction: return contraction(tx, e.name, args, kwargs);
    case Family::Store: return store_fn(tx, e.name, args, kwargs);
    case Family::Grid:
      graph_break(Raises{PyExc_TypeError}, "'" + std::string(Py_TYPE(fn)->tp_name) + "' object is not callable");
    case Family::ArrayType: return ndarray_new(tx, args, kwargs);
  }
  graph_break(BreakKind::Internal, "internal: unknown op family");
}

}  // namespace

bool is_registered(PyObject* callable) {
  return registry().by_object.count(callable) != 0 || ufunc_method_entry(callable, nullptr);
}

VarPtr call_function(Tracer& tx, PyObject* callable, std::vector<VarPtr> args, KwArgs kwargs) {
  std::string method;
  if (const Entry* u = ufunc_method_entry(callable, &method)) {
    // Composites of elementwise ops and reductions, or extern steps making NumPy arrays.
    claim_numpy_arrays(tx, "numpy." + u->name + "." + method);
    return ufunc_method(tx, u->name, method, callable, args, kwargs);
  }
  const Entry& e = registry().by_object.at(callable);
  // A scalar type makes a NumPy scalar from numbers in either library (cupy.float32 is numpy's).
  BREAK_IF(tx.out().array_kind == ArrayKind::CuPy && !in_cupy_call() && e.family != Family::ScalarType,
           "numpy." + e.name + " in a graph of CuPy arrays (call cupy." + e.name +
               ": NumPy would hand the call to CuPy through __array_function__, which framejit does not model)");
  return dispatch(tx, e, "numpy." + e.name, callable, args, kwargs, false);
}

std::vector<std::pair<std::string, PyObject*>> functions_by_name() {
  std::vector<std::pair<std::string, PyObject*>> out;
  for_each_function_name([&](const char* n) {
    PyObject* obj = numpy_attr(n);
    if (!obj || !is_registered(obj)) return;
    const Family f = registry().by_object.at(obj).family;
    if (f != Family::Extern && f != Family::Grid && f != Family::ArrayType && f != Family::ScalarType) out.emplace_back(n, obj);
  });
  return out;
}

VarPtr binary(Tracer& tx, const std::string& op, const VarPtr& a, const VarPtr& b, bool inplace) {
  if (op == "matmul") {
    VarPtr r = linalg(tx, "matmul", "operator.matmul", {a, b}, {});
    BREAK_IF(inplace, "in-place matmul (@=)");
    return r;
  }
  VarPtr r = elementwise(tx, "operator." + op, operator_fn(op), {a, b}, {});
  if (!inplace || a->kind != VarKind::Tensor) return r;
  // `y op= v` on an array updates it in place. On an array this trace made (and nobody else sees)
  // that is the same as rebinding every alias of `y` to the result; anything else mutates memory
  // the caller can observe.
  // A NumPy scalar is immutable: `s op= v` rebinds the name, as `s = s op v` does.
  if (tx.meta(a).scalar_object) return r;
  const jit::TensorMeta& before = tx.meta(a);
  const jit::TensorMeta& after = tx.meta(r);
  // NumPy's ufuncs hand back a scalar for 0-d operands; in place, the 0-d array stays an array.
  BREAK_IF(after.scalar_object, "in-place " + op + " on a 0-d array");
  BREAK_IF(before.dtype != after.dtype, "in-place " + op + " would cast its result (NumPy's same_kind rule)");
  BREAK_IF(before.rank() != after.rank(), "in-place " + op + " broadcasts its target");
  for (int d = 0; d < before.rank(); ++d)
    BREAK_IF(!before.shape[d].same_as(after.shape[d]), "in-place " + op + " broadcasts its target");
  tx.assign_array(a, as<TensorVar>(r)->node, "in-place " + op);
  return a;
}

VarPtr unary(Tracer& tx, const std::string& op, const VarPtr& a) {
  if (op == "abs") return elementwise(tx, "builtins.abs", operator_fn("abs"), {a}, {});
  return elementwise(tx, "operator." + op, operator_fn(op), {a}, {});
}

VarPtr tensor_attr(Tracer& tx, const VarPtr& t, const std::string& name) {
  const jit::TensorMeta& m = tx.meta(t);
  if (name == "shape") {
    std::vector<VarPtr> dims;
    for (const SymInt& d : m.shape) dims.push_back(tx.sym_value(d));
    return std::make_shared<SeqVar>(VarKind::Tuple, std::move(dims));
  }
  if (name == "ndim") return tx.wrap_const(OwnedRef::steal(PyLong_FromLong(m.rank())).get());
  if (name == "size") return tx.sym_value(numel(m.shape));
  const bool fj_tensor = tx.out().array_kind == ArrayKind::Tensor;
  if (name == "dtype") {
    // framejit.Tensor.dtype is NumPy's name as a str ("float32"); an ndarray's, a numpy.dtype.
    if (fj_tensor) return tx.wrap_const(OwnedRef::steal(PyUnicode_FromString(rt::dtype_name(m.dtype).data())).get());
    return tx.wrap_const(numpy_handles()->dtypes[static_cast<int>(m.dtype)]);
  }
  if (name == "device" && fj_tensor) return tx.wrap_const(OwnedRef::steal(PyUnicode_FromString("cpu")).get());
  if (name == "itemsize") return tx.wrap_const(OwnedRef::steal(PyLong_FromLong(rt::dtype_itemsize(m.dtype))).get());
  if (name == "nbytes") return tx.sym_value(numel(m.shape) * SymInt(rt::dtype_itemsize(m.dtype)));
  if (name == "T") return view_op(tx, "transpose", "method.transpose", {t}, {}, true);
  static const char* const kMethods[] = {"sum", "mean", "max", "min", "prod", "var", "std", "argmax", "argmin",
                                         "any", "all", "reshape", "transpose", "swapaxes", "squeeze", "ravel",
                                         "flatten", "astype", "copy", "clip", "dot", "round", "nonzero", "take",
                                         "fill", "repeat"};
  for (const char* n : kMethods)
    if (name == n) return std::make_shared<AttrMethodVar>(t, name);
  graph_break("ndarray attribute '" + name + "' is not captured yet");
}

VarPtr call_method(Tracer& tx, const VarPtr& t, const std::string& name, std::vector<VarPtr> args, KwArgs kwargs) {
  if (t->kind == VarKind::Object) return random_method(tx, t, name, args, kwargs);
  args.insert(args.begin(), t);
  std::string target = "method." + name;
  if (name == "dot") return linalg(tx, "dot", target, args, kwargs);
  if (name == "nonzero" || name == "take") return indexing(tx, name, args, kwargs);
  if (name == "clip") {
    // x.clip(min, max) has NumPy's clip semantics; ask numpy.clip for the dtype.
    auto b = bind_args("clip", {"self", "min", "max", "out"}, args, kwargs);
    BREAK_IF(!is_absent(b, "out"), "clip(out=)");
    std::vector<VarPtr> operands{t, b.count("min") ? b["min"] : tx.wrap_const(Py_None),
                                 b.count("max") ? b["max"] : tx.wrap_const(Py_None)};
    VarPtr probe_result = elementwise(tx, target, numpy_attr("clip"), operands, {});
    // Record the call as written (method form), with the metadata computed above.
    auto& graph = tx.out().graph;
    auto& node = graph.nodes()[as<TensorVar>(probe_result)->node];
    node.args = to_args(tx, args);
    node.kwargs = to_kwargs(tx, kwargs);
    CanonicalOp c = canonicalize(graph, node.target, node.args, node.kwargs, node.meta);
    node.op = c.op;
    node.attrs = std::move(c.attrs);
    return probe_result;
  }
  for (const char* n : kReductions)
    if (name == n) return reduction(tx, name, target, args, kwargs, true);
  if (name == "flatten") return view_op(tx, "flatten", target, args, kwargs, true);
  if (name == "fill") return fill(tx, t, std::vector<VarPtr>(args.begin() + 1, args.end()), kwargs);
  if (name == "repeat") {
    // ndarray.repeat(repeats, axis=None) is numpy.repeat(self, ...): a new NumPy array.
    claim_numpy_arrays(tx, "ndarray.repeat");
    return tiling(tx, "repeat", args, kwargs);
  }
  for (const char* n : kViews)
    if (name == n) return view_op(tx, name, target, args, kwargs, true);
  if (name == "astype") return view_op(tx, "astype", target, args, kwargs, true);
  graph_break("ndarray." + name + "() is not captured yet");
}

VarPtr getitem(Tracer& tx, const VarPtr& t, const VarPtr& index) {
  return is_advanced_index(index) ? advanced_index(tx, t, index) : basic_index(tx, t, index);
}

namespace {

// NumPy's op table: the functions above behind the tracer's interface (Note [Op tables]).
class NumPyOpTable final : public OpTable {
public:
  bool owns(PyObject* callable) const override { return is_registered(callable); }
  std::vector<std::string> supported() const override {
    std::vector<std::string> names;
    // By name, not by object: aliases (amax is max in NumPy 1.x) are one object, two names.
    auto add_function = [&](const char* n) {
      if (PyObject* obj = numpy_attr(n); obj && is_registered(obj)) names.push_back(std::string("numpy.") + n);
    };
    for_each_function_name(add_function);
    for (const char* n : {"sort", "argsort", "partition", "argpartition", "ndarray"}) add_function(n);
    for (const char* n : kGrids)
      if (PyObject* obj = numpy_attr(n); obj && is_registered(obj)) names.push_back(std::string("numpy.") + n + "[...]");
    // The ufunc methods traced as ops: outer of every binary ufunc, reduce where it is a reduction.
    for (const char* n : kElementwise) {
      PyObject* obj = numpy_attr(n);
      if (!obj || !is_ufunc(obj)) continue;
      OwnedRef nin = OwnedRef::steal(PyObject_GetAttrString(obj, "nin"));
      if (nin && PyLong_AsLong(nin.get()) == 2) names.push_back(std::string("numpy.") + n + ".outer");
      if (!nin) PyErr_Clear();
      if (reduction_of_ufunc(n)) names.push_back(std::string("numpy.") + n + ".reduce");
    }
    // ndarray's methods (call_method) and attributes (tensor_attr): those the type has (the
    // families also serve numpy functions that are no methods, such as amax), and the operators
    // on arrays (binary, unary).
    std::vector<const char*> members(std::begin(kReductions), std::end(kReductions));
    members.insert(members.end(), std::begin(kViews), std::end(kViews));
    for (const char* n : {"flatten", "astype", "clip", "dot", "nonzero", "take", "shape", "ndim", "size", "dtype", "T",
                          "itemsize", "nbytes", "fill", "repeat"})
      members.push_back(n);
    if (const NumPyHandles* np = numpy_handles())
      for (const char* n : members)
        if (PyObject_HasAttrString(reinterpret_cast<PyObject*>(np->ndarray), n)) names.push_back(std::string("ndarray.") + n);
    for (const char* n : {"+", "-", "*", "/", "//", "%", "**", "@", "==", "!=", "<", "<=", ">", ">=", "&", "|",
                          "^", "<<", ">>", "unary -", "unary +", "~", "abs()", "x[basic index]", "x[basic index] = v",
                          "x[index array or mask]", "x[index array or mask] = v",
                          "x op= y (in place)"})
      names.push_back(std::string("operator ") + n);
    std::sort(names.begin(), names.end());
    names.erase(std::unique(names.begin(), names.end()), names.end());
    return names;
  }
  VarPtr call_function(Tracer& tx, PyObject* callable, std::vector<VarPtr> args, KwArgs kwargs) override {
    return ops::call_function(tx, callable, std::move(args), std::move(kwargs));
  }
  VarPtr attr(Tracer& tx, const VarPtr& a, const std::string& name) override { return tensor_attr(tx, a, name); }
  VarPtr call_method(Tracer& tx, const VarPtr& a, const std::string& name, std::vector<VarPtr> args,
                     KwArgs kwargs) override {
    return ops::call_method(tx, a, name, std::move(args), std::move(kwargs));
  }
  VarPtr getitem(Tracer& tx, const VarPtr& a, const VarPtr& index) override { return ops::getitem(tx, a, index); }
  VarPtr object_getitem(Tracer& tx, PyObject* obj, const VarPtr& index) override {
    auto it = registry().by_object.find(obj);
    if (it == registry().by_object.end() || it->second.family != Family::Grid) return nullptr;
    claim_numpy_arrays(tx, "numpy." + it->second.name + "[...]");
    return grid_getitem(tx, it->second.name, index);
  }
  void setitem(Tracer& tx, const VarPtr& a, const VarPtr& index, const VarPtr& value) override {
    ops::setitem(tx, a, index, value);
  }
  VarPtr binary(Tracer& tx, const std::string& op, const VarPtr& a, const VarPtr& b, bool inplace) override {
    return ops::binary(tx, op, a, b, inplace);
  }
  VarPtr unary(Tracer& tx, const std::string& op, const VarPtr& a) override { return ops::unary(tx, op, a); }
  int add_call(jit::Graph& graph, const std::string& target, std::vector<jit::Arg> args,
               std::vector<std::pair<std::string, jit::Arg>> kwargs, jit::TensorMeta meta) override {
    return add_canonical_call(graph, target, std::move(args), std::move(kwargs), std::move(meta));
  }
};

}  // namespace

bool install_op_table() {
  if (numpy_handles() && !init_probe()) return false;
  fill_registry();
  static NumPyOpTable* table = new NumPyOpTable();  // NB: immortal, like the tracer's table list
  for (ArrayKind kind : {ArrayKind::None, ArrayKind::NumPy, ArrayKind::Tensor}) register_op_table(kind, table);
  return true;
}

}  // namespace framejit::frontend::ops
