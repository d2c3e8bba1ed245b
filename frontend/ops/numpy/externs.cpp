// externs.cpp — NumPy functions with no native op, run as extern steps (the library callable at
// run time) with the result's dtype and shape decided exactly at trace time: numpy.linalg's
// LAPACK calls, sorting, and numpy.random's draws (Note [Random draws]). Each one is counted in
// framejit.stats()["extern_calls"]: a last resort, not a kernel.
#include "frontend/ops/numpy/compose.h"
#include "frontend/ops/numpy/registry.h"

namespace framejit::frontend::ops {

namespace {

using rt::DType;

// Note [Random draws]
// A draw from numpy.random's global generator advances its state: the node is a Mutate (never
// merged, never dropped, ordered with the other side effects), and it runs in the graph's
// program order, so a program seeded with np.random.seed gets NumPy's very numbers. Only draws
// with an explicit size are captured: without one NumPy hands back a Python float.
// numpy.random.seed is such a step with no result; numpy.random.shuffle(x) is permutation(x)
// (which draws the very same swaps) written back into x.
// A Generator or RandomState the function receives (or reads from a global or an attribute) is a
// graph input of kind Object, guarded by its type only: any generator runs the same graph. Its
// draws are the same steps as the module's, calling the method on the run's generator
// (method.normal(rng, ...)); a method on an Object input is a Mutate for the same reason.

// numpy.linalg's result type (linalg._commonType): single precision only when every operand is,
// ints and bools computed in double; float16 and long double are rejected by NumPy.
DType linalg_type(Tracer& tx, const std::vector<VarPtr>& operands) {
  bool complex = false, dbl = false;
  for (const VarPtr& v : operands) {
    DType d = tx.meta(v).dtype;
    BREAK_IF(d == DType::Float16, Raises{PyExc_TypeError}, "array type float16 is unsupported in linalg");
    complex |= d == DType::Complex64 || d == DType::Complex128;
    dbl |= d != DType::Float32 && d != DType::Complex64;
  }
  if (complex) return dbl ? DType::Complex128 : DType::Complex64;
  return dbl ? DType::Float64 : DType::Float32;
}

void square_check(Tracer& tx, const std::string& user, const Shape& s) {
  BREAK_IF(s.size() < 2, Raises{PyExc_ValueError},
           std::to_string(s.size()) + "-dimensional array given. Array must be at least two-dimensional");
  BREAK_IF(!tx.out().sizes_equal(s[s.size() - 1], s[s.size() - 2], user + " at " + tx.location()),
           Raises{PyExc_ValueError}, "Last 2 dimensions of the array must be square");
}

VarPtr extern_call(Tracer& tx, const std::string& target, const std::vector<VarPtr>& args, const KwArgs& kwargs,
                   jit::TensorMeta meta) {
  return tx.add_tensor(target, to_args(tx, args), std::move(meta), to_kwargs(tx, kwargs));
}

VarPtr linalg_fn(Tracer& tx, const std::string& name, const std::vector<VarPtr>& args, const KwArgs& kwargs) {
  const std::string user = "numpy.linalg." + name;
  for (const VarPtr& a : args) BREAK_IF(a->kind != VarKind::Tensor, user + " of a non-array (it would call numpy.asarray)");
  if (name == "norm") {
    auto b = bind_args(user, {"x", "ord", "axis", "keepdims"}, args, kwargs);
    BREAK_IF(!b.count("x"), Raises{PyExc_TypeError}, "norm() needs an array");
    const VarPtr& x = b["x"];
    const DType dt = tx.meta(x).dtype;
    const int rank = tx.meta(x).rank();  // NB: copied: adding nodes moves the metas
    BREAK_IF(dt == DType::Complex64 || dt == DType::Complex128 || !is_absent(b, "ord"),
             user + " with ord= or of a complex array is not captured yet");
    const bool keepdims = b.count("keepdims") && tx.truth(b["keepdims"], "keepdims");
    // NumPy: ints become float64; the 2-norm (Frobenius for matrices) is sqrt(sum(x * x)).
    VarPtr xf = dt == DType::Float16 || dt == DType::Float32 || dt == DType::Float64 ? x : cast(tx, x, DType::Float64);
    if (is_absent(b, "axis") && !keepdims) {
      VarPtr flat = view_op(tx, "ravel", "numpy.ravel", {xf}, {}, false);
      return ufunc(tx, "sqrt", {linalg(tx, "dot", "numpy.dot", {flat, flat}, {})});
    }
    KwArgs kw;
    if (b.count("axis")) kw.emplace_back("axis", b["axis"]);
    if (b.count("keepdims")) kw.emplace_back("keepdims", b["keepdims"]);
    if (!is_absent(b, "axis")) {
      auto axes = normalize_axes(tx, b["axis"], rank);
      BREAK_IF(axes && axes->size() > 2, Raises{PyExc_ValueError}, "Improper number of dimensions to norm.");
    }
    VarPtr sq = ufunc(tx, "multiply", {xf, xf});
    return ufunc(tx, "sqrt", {reduction(tx, "sum", "numpy.sum", {sq}, kw, false)});
  }
  BREAK_IF(!kwargs.empty(), user + "() with keyword arguments");
  if (name == "solve") {
    BREAK_IF(args.size() != 2, Raises{PyExc_TypeError}, "solve() takes two arrays");
    const Shape sa = tx.meta(args[0]).shape, sb = tx.meta(args[1]).shape;
    square_check(tx, user, sa);
    const SymInt n = sa.back();
    Shape out;
    // NumPy 1.x: b is a stack of vectors when it has one dimension fewer than a.
    if (sb.size() + 1 == sa.size()) {
      BREAK_IF(!tx.out().sizes_equal(sb.back(), n, user), Raises{PyExc_ValueError}, "solve: b does not match a");
      out = broadcast_shapes(tx, {Shape(sa.begin(), sa.end() - 2), Shape(sb.begin(), sb.end() - 1)});
      out.push_back(n);
    } else {
      BREAK_IF(sb.size() < 2, Raises{PyExc_ValueError}, "solve: b must be at least 1-d");
      BREAK_IF(!tx.out().sizes_equal(sb[sb.size() - 2], n, user), Raises{PyExc_ValueError}, "solve: b does not match a");
      out = broadcast_shapes(tx, {Shape(sa.begin(), sa.end() - 2), Shape(sb.begin(), sb.end() - 2)});
      out.push_back(n);
      out.push_back(sb.back());
    }
    return extern_call(tx, "numpy.linalg.solve", args, kwargs, tensor_meta(linalg_type(tx, args), out));
  }
  BREAK_IF(args.size() != 1, Raises{PyExc_TypeError}, name + "() takes one array");
  const Shape s = tx.meta(args[0]).shape;
  square_check(tx, user, s);
  const DType t = linalg_type(tx, args);
  if (name == "inv" || name == "cholesky") return extern_call(tx, user, args, kwargs, tensor_meta(t, s));
  if (name == "det") {
    Shape out(s.begin(), s.end() - 2);
    // A single matrix's determinant is a NumPy scalar.
    return extern_call(tx, user, args, kwargs, tensor_meta(t, out, out.empty()));
  }
  graph_break(user + " is not supported by framejit yet");
}

VarPtr sort_fn(Tracer& tx, const std::string& name, const std::vector<VarPtr>& args, const KwArgs& kwargs) {
  const std::string user = "numpy." + name;
  const bool part = name == "partition" || name == "argpartition";
  auto b = part ? bind_args(name, {"a", "kth", "axis", "kind", "order"}, args, kwargs)
                : bind_args(name, {"a", "axis", "kind", "order"}, args, kwargs);
  BREAK_IF(!b.count("a") || b["a"]->kind != VarKind::Tensor, user + " of a non-array (it would call numpy.asarray)");
  BREAK_IF(!is_absent(b, "order"), user + "(order=)");
  const VarPtr& a = b["a"];
  const jit::TensorMeta& m = tx.meta(a);
  Shape shape = m.shape;
  if (b.count("axis") && is_none(b["axis"])) {
    shape = {numel(m.shape)};
  } else {
    BREAK_IF(m.rank() == 0, Raises{PyExc_ValueError}, "axis -1 is out of bounds for array of dimension 0");
    int axis = normalize_axis(tx, b.count("axis") ? tx.to_int(b["axis"], "axis") : -1, m.rank());
    if (part) {
      // kth must be a valid index along the axis: checked now (guarded), as NumPy raises.
      for (const VarPtr& k : tx.unpack(b["kth"]->kind == VarKind::Const && !PyLong_Check(const_value(b["kth"]))
                                           ? b["kth"]
                                           : std::make_shared<SeqVar>(VarKind::Tuple, std::vector<VarPtr>{b["kth"]}),
                                       "kth")) {
        int64_t kv = tx.to_int(k, "kth");
        const SymInt& n = shape[axis];
        BREAK_IF(!(kv >= 0 ? tx.out().decide(n - SymInt(kv), CmpOp::Gt, 0, "kth at " + tx.location())
                           : tx.out().decide(n + SymInt(kv), CmpOp::Ge, 0, "kth at " + tx.location())),
                 Raises{PyExc_ValueError}, "kth out of bounds");
      }
    }
  }
  const DType dt = name.rfind("arg", 0) == 0 ? DType::Int64 : m.dtype;
  return extern_call(tx, user, args, kwargs, tensor_meta(dt, shape));
}

// A draw from numpy.random's global generator (gen null: numpy.random.<name>) or from a Generator
// or RandomState graph input (gen.<name>, run as the method on the run's own generator).
VarPtr random_draw(Tracer& tx, const VarPtr& gen, const std::string& name, const std::vector<VarPtr>& args,
                   const KwArgs& kwargs) {
  const bool generator = gen && std::string(Py_TYPE(as<ObjectVar>(gen)->obj.get())->tp_name).ends_with("Generator");
  const std::string user = gen ? std::string(Py_TYPE(as<ObjectVar>(gen)->obj.get())->tp_name) + "." + name
                               : "numpy.random." + name;
  // The call itself: the module's function, or the method with the generator first.
  auto extern_call = [&](Tracer& t, const std::string& target, const std::vector<VarPtr>& a, const KwArgs& kw,
                         jit::TensorMeta meta) {
    if (!gen) return ops::extern_call(t, target, a, kw, std::move(meta));
    std::vector<VarPtr> with_self{gen};
    with_self.insert(with_self.end(), a.begin(), a.end());
    return ops::extern_call(t, "method." + target.substr(target.rfind('.') + 1), with_self, kw, std::move(meta));
  };
  Shape shape;
  DType dt = DType::Float64;
  auto sized = [&](std::map<std::string, VarPtr>& b, std::initializer_list<const char*> numbers) {
    BREAK_IF(is_absent(b, "size"), user + " without size= (NumPy returns a Python float)");
    for (const char* k : numbers)
      if (b.count(k)) BREAK_IF(b[k]->kind == VarKind::Tensor || is_seq(b[k]), user + " with array parameters");
    shape = parse_shape(tx, b["size"]);
  };
  if (name == "rand" || name == "randn") {
    BREAK_IF(!kwargs.empty(), Raises{PyExc_TypeError}, user + "() takes no keyword arguments");
    BREAK_IF(args.empty(), user + "() without dimensions (NumPy returns a Python float)");
    shape = parse_shape(tx, std::make_shared<SeqVar>(VarKind::Tuple, args));
  } else if (generator && (name == "random" || name == "standard_normal")) {
    auto b = bind_args(user, {"size", "dtype", "out"}, args, kwargs);
    BREAK_IF(!is_absent(b, "out"), user + " with out=");
    sized(b, {});
    if (!is_absent(b, "dtype")) dt = dtype_of(tx, b["dtype"]);
    BREAK_IF(dt != DType::Float64 && dt != DType::Float32, Raises{PyExc_TypeError}, "Unsupported dtype for " + name);
  } else if (generator && name == "integers") {
    auto b = bind_args(user, {"low", "high", "size", "dtype", "endpoint"}, args, kwargs);
    sized(b, {"low", "high"});
    dt = is_absent(b, "dtype") ? DType::Int64 : dtype_of(tx, b["dtype"]);
  } else if (generator && name == "exponential") {
    auto b = bind_args(user, {"scale", "size"}, args, kwargs);
    sized(b, {"scale"});
  } else if (generator && (name == "shuffle" || name == "permuted" || name == "bytes")) {
    graph_break(user + " is not supported by framejit yet");
  } else if (name == "random" || name == "random_sample" || name == "sample" || name == "ranf" ||
             name == "standard_normal") {
    auto b = bind_args(user, {"size"}, args, kwargs);
    sized(b, {});
  } else if (name == "uniform" || name == "normal") {
    auto b = name == "uniform" ? bind_args(user, {"low", "high", "size"}, args, kwargs)
                               : bind_args(user, {"loc", "scale", "size"}, args, kwargs);
    sized(b, {"low", "high", "loc", "scale"});
  } else if (name == "randint") {
    auto b = bind_args(user, {"low", "high", "size", "dtype"}, args, kwargs);
    sized(b, {"low", "high"});
    dt = is_absent(b, "dtype") ? DType::Int64 : dtype_of(tx, b["dtype"]);
  } else if (name == "seed") {
    // Resets the generator: a step with no result, ordered before the draws that follow it.
    auto b = bind_args(user, {"seed"}, args, kwargs);
    BREAK_IF(b.count("seed") && (b["seed"]->kind == VarKind::Tensor || is_seq(b["seed"])), user + " with an array seed");
    if (b.count("seed") && !is_none(b["seed"])) tx.to_int(b["seed"], "seed");  // NumPy raises on other values
    extern_call(tx, user, args, kwargs, tensor_meta(DType::Float64, {}));
    return tx.wrap_const(Py_None);
  } else if (name == "permutation" || name == "shuffle") {
    auto b = bind_args(user, {"x"}, args, kwargs);
    BREAK_IF(!b.count("x"), Raises{PyExc_TypeError}, user + "() needs x");
    const VarPtr& x = b["x"];
    if (x->kind != VarKind::Tensor) {
      BREAK_IF(name == "shuffle", user + " of a non-array");
      shape = {SymInt(tx.to_int(x, "permutation size"))};  // arange(x) shuffled
      dt = DType::Int64;
      BREAK_IF(shape[0].const_value() < 0, Raises{PyExc_ValueError}, "negative dimensions are not allowed");
      return extern_call(tx, user, args, kwargs, tensor_meta(dt, shape));
    }
    const jit::TensorMeta m = tx.meta(x);
    BREAK_IF(m.rank() == 0, Raises{PyExc_IndexError}, "x must be an integer or at least 1-dimensional");
    // permutation(x) of an array draws exactly what shuffle(x) draws (the same Fisher-Yates swaps,
    // on x's copy or on an index), so shuffle is permutation written back into x.
    BREAK_IF(generator && !kwargs.empty(), user + " with keyword arguments");
    VarPtr r = extern_call(tx, "numpy.random.permutation", {x}, {}, tensor_meta(m.dtype, m.shape));
    if (name == "permutation") return r;
    setitem(tx, x, tx.wrap_const(Py_Ellipsis), r);
    return tx.wrap_const(Py_None);
  } else if (name == "choice") {
    auto b = generator ? bind_args(user, {"a", "size", "replace", "p", "axis", "shuffle"}, args, kwargs)
                       : bind_args(user, {"a", "size", "replace", "p"}, args, kwargs);
    BREAK_IF(b.count("axis") && !(is_const(b["axis"]) && PyLong_Check(const_value(b["axis"])) &&
                                  PyLong_AsLong(const_value(b["axis"])) == 0),
             user + " with an axis other than 0");
    BREAK_IF(!b.count("a"), Raises{PyExc_TypeError}, user + "() needs a");
    sized(b, {});
    SymInt pop;
    if (b["a"]->kind == VarKind::Tensor) {
      BREAK_IF(tx.meta(b["a"]).rank() != 1, Raises{PyExc_ValueError}, "a must be 1-dimensional");
      dt = tx.meta(b["a"]).dtype;
      pop = tx.meta(b["a"]).shape[0];
    } else {
      dt = DType::Int64;
      pop = SymInt(tx.to_int(b["a"], "choice population"));
    }
    BREAK_IF(!tx.out().decide(pop, CmpOp::Gt, 0, user + " at " + tx.location()), Raises{PyExc_ValueError},
             "a must be a positive integer or a non-empty array");
    if (!is_absent(b, "p")) {
      BREAK_IF(b["p"]->kind != VarKind::Tensor || tx.meta(b["p"]).rank() != 1, user + " with p that is not a 1-d array");
      BREAK_IF(!tx.out().sizes_equal(tx.meta(b["p"]).shape[0], pop, user + " at " + tx.location()),
               Raises{PyExc_ValueError}, "'a' and 'p' must have same size");
    }
    if (b.count("replace") && !tx.truth(b["replace"], "replace"))
      BREAK_IF(!tx.out().decide(pop - numel(shape), CmpOp::Ge, 0, user + " at " + tx.location()), Raises{PyExc_ValueError},
               "Cannot take a larger sample than population when 'replace=False'");
  } else {
    graph_break(user + " is not supported by framejit yet");
  }
  for (const SymInt& d : shape) BREAK_IF(d.is_const() && d.const_value() < 0, Raises{PyExc_ValueError}, "negative dimensions are not allowed");
  return extern_call(tx, user, args, kwargs, tensor_meta(dt, shape));
}

// numpy.bincount(x, weights=None, minlength=0): the counts of each value of a 1-d array of
// non-negative integers, max(x) + 1 of them (at least minlength): a length only the run knows, an
// unbacked symbol (Note [Unbacked sizes]). NumPy checks the values (negative ones raise): the
// library call does that at run time.
VarPtr bincount(Tracer& tx, const std::vector<VarPtr>& args, const KwArgs& kwargs) {
  const std::string user = "numpy.bincount";
  auto b = bind_args(user, {"x", "weights", "minlength"}, args, kwargs);
  BREAK_IF(!b.count("x"), Raises{PyExc_TypeError}, "bincount() needs x");
  BREAK_IF(b["x"]->kind != VarKind::Tensor, user + " of a non-array (it would call numpy.asarray)");
  const jit::TensorMeta& x = tx.meta(b["x"]);
  BREAK_IF(x.rank() != 1, Raises{PyExc_ValueError}, "object too deep for desired array");
  BREAK_IF(x.dtype != DType::Int64 && x.dtype != DType::Int32 && x.dtype != DType::UInt8 && x.dtype != DType::Bool,
           user + " of a " + std::string(rt::dtype_name(x.dtype)) + " array");
  if (!is_absent(b, "minlength"))
    BREAK_IF(tx.to_int(b["minlength"], "minlength") < 0, Raises{PyExc_ValueError}, "'minlength' must not be negative");
  DType dt = DType::Int64;
  if (!is_absent(b, "weights")) {
    BREAK_IF(b["weights"]->kind != VarKind::Tensor || tx.meta(b["weights"]).rank() != 1,
             user + " with weights that are not a 1-d array");
    BREAK_IF(!tx.out().sizes_equal(tx.meta(b["weights"]).shape[0], x.shape[0], user + " at " + tx.location()),
             Raises{PyExc_ValueError}, "The weights and list don't have the same length.");
    dt = DType::Float64;
  }
  OutputGraph& out = tx.out();
  const int next = static_cast<int>(out.graph.nodes().size());
  const int s = out.new_unbacked_symbol(next, 0, user + " at " + tx.location(),
                                        [](const std::string& reason) { graph_break(BreakKind::DataDependent, reason); });
  VarPtr r = extern_call(tx, user, args, kwargs, tensor_meta(dt, {SymInt::symbol(s)}));
  BREAK_IF(as<TensorVar>(r)->node != next, BreakKind::Internal, "internal: bincount's node was not added last");
  return r;
}

// numpy.histogram(a, bins=10, range=None, density=None, weights=None) -> (counts, edges), and
// numpy.histogram_bin_edges(a, bins, range, weights). A step has one array result, so the pair
// is two steps: the edges from numpy.histogram_bin_edges, which is the very function histogram
// gets them from, and the counts from histogram itself (framejit._externs.histogram_counts);
// code that keeps one of them runs only its step. Captured: bins a number (the counts' length)
// or a 1-d array of edges of a known length; a string rule ("auto") sizes the result from the
// data and is not.
VarPtr histogram(Tracer& tx, const std::string& name, const std::vector<VarPtr>& args, const KwArgs& kwargs) {
  const bool edges_only = name == "histogram_bin_edges";
  const std::string user = "numpy." + name;
  auto b = edges_only ? bind_args(user, {"a", "bins", "range", "weights"}, args, kwargs)
                      : bind_args(user, {"a", "bins", "range", "density", "weights"}, args, kwargs);
  BREAK_IF(!b.count("a"), Raises{PyExc_TypeError}, name + "() needs a");
  BREAK_IF(b["a"]->kind != VarKind::Tensor, user + " of a non-array (it would call numpy.asarray)");
  const DType a = tx.meta(b["a"]).dtype;
  BREAK_IF(!(rt::dtype_is_float(a) && a != DType::Float16) && !rt::dtype_is_integer(a),
           user + " of a " + std::string(rt::dtype_name(a)) + " array is not captured yet");
  // NumPy: the outer edges are the range or a.min()/a.max(), as the array's float type (ints: float64).
  DType edge_type = rt::dtype_is_float(a) ? a : DType::Float64;
  int64_t nbins = 10;
  if (b.count("bins") && !is_absent(b, "bins")) {
    const VarPtr& bins = b["bins"];
    if (bins->kind == VarKind::Tensor) {
      const jit::TensorMeta& m = tx.meta(bins);
      BREAK_IF(m.rank() != 1, Raises{PyExc_ValueError}, "`bins` must be 1d, when an array");
      BREAK_IF(!m.shape[0].is_const(), user + " with edges of a run-time length");
      BREAK_IF(!rt::dtype_is_float(m.dtype) && !rt::dtype_is_integer(m.dtype),
               user + " with " + std::string(rt::dtype_name(m.dtype)) + " edges");
      nbins = m.shape[0].const_value() - 1;
      edge_type = m.dtype;  // NumPy hands the given edges back as they are
    } else {
      BREAK_IF(bins->kind == VarKind::Const && PyUnicode_Check(as<ConstVar>(bins)->value.get()),
               user + " with a bin rule such as 'auto' sizes its result from the data");
      nbins = tx.to_int(bins, "bins");
      BREAK_IF(nbins < 1, Raises{PyExc_ValueError}, "`bins` must be positive, when an integer");
    }
  }
  BREAK_IF(nbins < 0, Raises{PyExc_ValueError}, "`bins` must increase monotonically, when an array");
  DType count_type = DType::Int64;
  if (!is_absent(b, "weights")) {
    const VarPtr& w = b["weights"];
    BREAK_IF(w->kind != VarKind::Tensor, user + " with weights that are not an array");
    const Shape ws = tx.meta(w).shape, as = tx.meta(b["a"]).shape;  // NB: copies: nodes are added below
    bool same = ws.size() == as.size();
    for (size_t d = 0; same && d < ws.size(); ++d) same = tx.out().sizes_equal(ws[d], as[d], user + " at " + tx.location());
    BREAK_IF(!same, Raises{PyExc_ValueError}, "weights should have the same shape as a.");
    count_type = tx.meta(w).dtype;
    BREAK_IF(!rt::dtype_is_float(count_type) && !rt::dtype_is_integer(count_type),
             user + " with " + std::string(rt::dtype_name(count_type)) + " weights is not captured yet");
  }
  KwArgs edge_kw;
  for (const char* k : {"range", "weights"})
    if (b.count(k)) edge_kw.emplace_back(k, b[k]);
  std::vector<VarPtr> edge_args{b["a"]};
  if (b.count("bins")) edge_args.push_back(b["bins"]);
  VarPtr edges = extern_call(tx, "numpy.histogram_bin_edges", edge_args, edge_kw, tensor_meta(edge_type, {SymInt(nbins + 1)}));
  if (edges_only) return edges;
  if (b.count("density") && !is_absent(b, "density") && tx.truth(b["density"], "density"))
    count_type = DType::Float64;  // counts / widths / total, the widths as float64
  KwArgs kw;
  for (const auto& [k, v] : b)
    if (k != "a") kw.emplace_back(k, v);
  VarPtr counts = extern_call(tx, "framejit._externs.histogram_counts", {b["a"]}, kw, tensor_meta(count_type, {SymInt(nbins)}));
  return std::make_shared<SeqVar>(VarKind::Tuple, std::vector<VarPtr>{counts, edges});
}

// numpy.searchsorted(a, v, side='left', sorter=None): an intp index per value of v, in v's shape
// (a NumPy integer for a number v).
VarPtr searchsorted(Tracer& tx, const std::vector<VarPtr>& args, const KwArgs& kwargs) {
  const std::string user = "numpy.searchsorted";
  auto b = bind_args(user, {"a", "v", "side", "sorter"}, args, kwargs);
  BREAK_IF(!b.count("a") || !b.count("v"), Raises{PyExc_TypeError}, "searchsorted() needs a and v");
  BREAK_IF(b["a"]->kind != VarKind::Tensor, user + " of a non-array (it would call numpy.asarray)");
  BREAK_IF(tx.meta(b["a"]).rank() != 1, Raises{PyExc_ValueError}, "object too deep for desired array");
  if (b.count("side") && !is_absent(b, "side")) {
    PyObject* side = b["side"]->kind == VarKind::Const ? const_value(b["side"]) : nullptr;  // borrowed
    BREAK_IF(!side || !PyUnicode_Check(side), user + " with a side that is not a string");
    const std::string s = PyUnicode_AsUTF8(side);
    BREAK_IF(s.empty() || (s[0] != 'l' && s[0] != 'L' && s[0] != 'r' && s[0] != 'R'), Raises{PyExc_ValueError},
             "side must be 'left' or 'right' (got '" + s + "')");
  }
  if (b.count("sorter") && !is_absent(b, "sorter"))
    BREAK_IF(b["sorter"]->kind != VarKind::Tensor, user + " with a sorter that is not an array");
  const VarPtr& v = b["v"];
  const bool number = v->kind == VarKind::Scalar ||
                      (is_const(v) && (PyLong_Check(const_value(v)) || PyFloat_Check(const_value(v))));
  BREAK_IF(v->kind != VarKind::Tensor && !number, user + " of values that are not an array or a number");
  Shape shape = v->kind == VarKind::Tensor ? tx.meta(v).shape : Shape{};
  const bool scalar = v->kind != VarKind::Tensor || tx.meta(v).rank() == 0;
  return extern_call(tx, user, args, kwargs, tensor_meta(DType::Int64, std::move(shape), scalar));
}

}  // namespace

VarPtr extern_fn(Tracer& tx, const std::string& name, const std::vector<VarPtr>& args, const KwArgs& kwargs) {
  if (name.rfind("linalg.", 0) == 0) return linalg_fn(tx, name.substr(7), args, kwargs);
  if (name.rfind("random.", 0) == 0) return random_draw(tx, nullptr, name.substr(7), args, kwargs);
  if (name == "sort" || name == "argsort" || name == "partition" || name == "argpartition")
    return sort_fn(tx, name, args, kwargs);
  if (name == "bincount") return bincount(tx, args, kwargs);
  if (name == "searchsorted") return searchsorted(tx, args, kwargs);
  if (name == "histogram" || name == "histogram_bin_edges") return histogram(tx, name, args, kwargs);
  graph_break(BreakKind::Internal, "internal: no extern " + name);
}

VarPtr random_method(Tracer& tx, const VarPtr& gen, const std::string& name, const std::vector<VarPtr>& args,
                     const KwArgs& kwargs) {
  return random_draw(tx, gen, name, args, kwargs);
}

}  // namespace framejit::frontend::ops
