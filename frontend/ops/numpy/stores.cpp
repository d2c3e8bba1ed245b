// stores.cpp — NumPy calls that write into an array they are given: numpy.copyto, ndarray.fill
// and the out= of ufuncs (np.add(a, b, out=c), np.multiply(Z, Z, Z)) and numpy.clip. Each is the
// value computed as usual, then `out[...] = value` through setitem (Note [Writes into arrays]).
#include "frontend/interop/numpy_abi.h"
#include "frontend/ops/numpy/compose.h"
#include "frontend/ops/numpy/registry.h"

namespace framejit::frontend::ops {

namespace {

using rt::DType;

VarPtr ellipsis(Tracer& tx) { return tx.wrap_const(Py_Ellipsis); }

// numpy.can_cast(from, to, casting); `from` is a dtype or a Python number (borrowed).
bool can_cast(PyObject* from, DType to, const char* casting) {
  const NumPyHandles* np = numpy_handles();
  PyObject* fn = numpy_attr("can_cast");  // borrowed
  BREAK_IF(!np || !fn, "a NumPy cast check without NumPy");
  OwnedRef r = OwnedRef::steal(PyObject_CallFunction(fn, "OOs", from, np->dtypes[static_cast<int>(to)], casting));
  if (!r) {
    PyErr_Clear();
    graph_break(std::string("numpy.can_cast failed for casting='") + casting + "'");
  }
  return PyObject_IsTrue(r.get()) == 1;
}

PyObject* dtype_object(DType dt) { return numpy_handles()->dtypes[static_cast<int>(dt)]; }  // borrowed

// Whether NumPy lets `value` be written into an array of `to` under `casting`; for a run-time
// Python number the check that holds for every value of its type, else its value (guarded).
bool castable(Tracer& tx, const VarPtr& value, DType to, const char* casting) {
  if (value->kind == VarKind::Tensor) return can_cast(dtype_object(tx.meta(value).dtype), to, casting);
  if (value->kind == VarKind::Scalar) {
    PyObject* h = as<ScalarVar>(value)->hint.get();  // borrowed
    PyObject* type = reinterpret_cast<PyObject*>(Py_TYPE(h));
    if (can_cast(type, to, casting)) return true;
  }
  return can_cast(tx.python_value(value, "the value written").get(), to, casting);
}

std::string casting_of(Tracer& tx, const VarPtr& v) {
  OwnedRef s = tx.python_value(v, "casting");
  BREAK_IF(!PyUnicode_Check(s.get()), Raises{PyExc_TypeError}, "casting must be one of 'no', 'equiv', 'safe', 'same_kind', or 'unsafe'");
  return PyUnicode_AsUTF8(s.get());
}

VarPtr copyto(Tracer& tx, const std::vector<VarPtr>& args, const KwArgs& kwargs) {
  auto b = bind_args("copyto", {"dst", "src", "casting", "where"}, args, kwargs);
  BREAK_IF(!b.count("dst") || !b.count("src"), Raises{PyExc_TypeError}, "copyto() needs dst and src");
  BREAK_IF(b["dst"]->kind != VarKind::Tensor, Raises{PyExc_TypeError}, "copyto() argument 1 must be numpy.ndarray");
  BREAK_IF(tx.meta(b["dst"]).scalar_object, Raises{PyExc_TypeError}, "copyto() argument 1 must be numpy.ndarray");
  if (b.count("where")) {
    BREAK_IF(!is_const(b["where"]) || const_value(b["where"]) != Py_True, "numpy.copyto(where=)");
  }
  const std::string casting = b.count("casting") ? casting_of(tx, b["casting"]) : "same_kind";
  const VarPtr& src = b["src"];
  BREAK_IF(is_seq(src), "numpy.copyto from a list or tuple (it would call numpy.asarray)");
  if (casting != "unsafe")
    BREAK_IF(!castable(tx, src, tx.meta(b["dst"]).dtype, casting.c_str()), Raises{PyExc_TypeError},
             "Cannot cast array data according to the rule '" + casting + "'");
  setitem(tx, b["dst"], ellipsis(tx), src);
  return tx.wrap_const(Py_None);
}

}  // namespace

VarPtr store_fn(Tracer& tx, const std::string& name, const std::vector<VarPtr>& args, const KwArgs& kwargs) {
  if (name == "copyto") return copyto(tx, args, kwargs);
  graph_break(BreakKind::Internal, "internal: no store function " + name);
}

VarPtr fill(Tracer& tx, const VarPtr& t, const std::vector<VarPtr>& args, const KwArgs& kwargs) {
  BREAK_IF(args.size() != 1 || !kwargs.empty(), Raises{PyExc_TypeError}, "fill() takes exactly one argument");
  const VarPtr& v = args[0];
  // ndarray.fill takes one scalar: a 0-d array is one, an n-d array is not.
  BREAK_IF(v->kind == VarKind::Tensor && tx.meta(v).rank() != 0, Raises{PyExc_ValueError},
           "fill() of an array that is not 0-d");
  setitem(tx, t, ellipsis(tx), v);
  return tx.wrap_const(Py_None);
}

VarPtr elementwise_out(Tracer& tx, const std::string& target, PyObject* fn, const std::vector<VarPtr>& args,
                       const KwArgs& kwargs) {
  // How many inputs come before a positional out: a ufunc's nin; clip(a, a_min, a_max, out).
  size_t nin = 0;
  const bool is_clip = target == "numpy.clip";
  if (is_clip) {
    nin = 3;
  } else if (target != "numpy.where") {
    OwnedRef n = OwnedRef::steal(PyObject_GetAttrString(fn, "nin"));
    if (!n) {
      PyErr_Clear();
      return nullptr;
    }
    nin = static_cast<size_t>(PyLong_AsLong(n.get()));
  } else {
    return nullptr;
  }
  VarPtr out;
  std::vector<VarPtr> inputs = args;
  KwArgs rest;
  if (args.size() > nin) {
    BREAK_IF(args.size() != nin + 1, Raises{PyExc_TypeError}, target + "() takes at most one positional out");
    out = args[nin];
    inputs.resize(nin);
  }
  for (const auto& [k, v] : kwargs) {
    if (k != "out") {
      rest.emplace_back(k, v);
      continue;
    }
    BREAK_IF(out && !is_none(v), Raises{PyExc_TypeError}, "cannot specify 'out' as both a positional and keyword argument");
    if (!is_none(v)) out = v;
  }
  if (!out || is_none(out)) return nullptr;
  if (is_seq(out)) {
    std::vector<VarPtr> outs = tx.unpack(out, "out");
    BREAK_IF(outs.size() != 1, Raises{PyExc_ValueError}, "The 'out' tuple must have exactly one entry per ufunc output");
    out = outs[0];
  }
  BREAK_IF(out->kind != VarKind::Tensor || tx.meta(out).scalar_object, Raises{PyExc_TypeError},
           "return arrays must be of ArrayType");
  for (const auto& [k, v] : rest) BREAK_IF(k == "where" && !is_none(v), target + "(where=) with out=");
  VarPtr r = elementwise(tx, target, fn, inputs, rest);
  // The ufunc loop runs in the inputs' type and its result is cast into out (casting='same_kind').
  BREAK_IF(!can_cast(dtype_object(tx.meta(r).dtype), tx.meta(out).dtype, "same_kind"), Raises{PyExc_TypeError},
           "Cannot cast ufunc '" + target.substr(target.find('.') + 1) + "' output according to the rule 'same_kind'");
  // out is not broadcast: the result's shape must fit inside it (setitem checks the broadcast).
  BREAK_IF(tx.meta(r).rank() > tx.meta(out).rank(), Raises{PyExc_ValueError},
           "non-broadcastable output operand");
  setitem(tx, out, ellipsis(tx), r);
  return out;
}

}  // namespace framejit::frontend::ops
