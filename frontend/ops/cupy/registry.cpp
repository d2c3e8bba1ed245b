// registry.cpp — CuPy's op table: cupy.* functions and cupy.ndarray's methods, operators and
// indexing traced by NumPy's rules (Note [CuPy through NumPy's table]).
#include "frontend/ops/cupy/registry.h"

#include <string>
#include <type_traits>
#include <unordered_map>

#include "frontend/cpython/pyref.h"
#include "frontend/interop/cupy_array.h"
#include "frontend/ops/numpy/canonical.h"
#include "frontend/ops/numpy/common.h"
#include "frontend/ops/numpy/registry.h"
#include "frontend/trace/op_table.h"

namespace framejit::frontend::ops::cupy_ops {

namespace {

// cupy.<name> -> numpy.<name>, for every function NumPy's table traces that CuPy has. Built once
// cupy is imported; the keys are borrowed (cupy's module keeps its functions alive).
struct Functions {
  std::unordered_map<PyObject*, PyObject*> numpy_of;
  std::unordered_map<PyObject*, std::string> name_of;
  bool built = false;
};

const Functions& functions() {
  static Functions* f = new Functions();  // NB: immortal, like the objects it points at
  if (f->built) return *f;
  const CupyHandles* h = cupy_handles();
  if (!h) return *f;
  f->built = true;
  for (const auto& [name, numpy_fn] : functions_by_name()) {
    OwnedRef c = OwnedRef::steal(PyObject_GetAttrString(h->module, name.c_str()));
    if (!c) {
      PyErr_Clear();
      continue;
    }
    // NB: cupy re-exports a few of numpy's own objects; those stay NumPy's table's.
    if (c.get() == numpy_fn || !PyCallable_Check(c.get())) continue;
    f->numpy_of.emplace(c.get(), numpy_fn);
    f->name_of.emplace(c.get(), name);
  }
  return *f;
}

// Runs one CuPy operation through NumPy's rules: the graph is claimed for CuPy arrays on CuPy's
// device, and the nodes the operation adds are 0-d arrays where NumPy's would be scalars.
// Breaks when one of the nodes from `first` on computes on NumPy scalars alone: NumPy does that on
// the host, giving a NumPy scalar (Note [NumPy scalars in CuPy graphs] in frontend/builder). A
// CuPy graph's other nodes with scalar_object set are the NumPy scalars it reads.
void check_not_host_arithmetic(const jit::Graph& g, size_t first, const std::string& what) {
  std::vector<char> host(g.nodes().size() - first, 0);
  for (size_t i = first; i < g.nodes().size(); ++i) {
    const jit::Node& n = g.nodes()[i];
    if (n.kind != jit::NodeKind::Call) continue;
    bool any = false, all_host = true;
    auto check = [&](int v) {
      const jit::Node& a = g.node(v);
      if (a.meta.kind != jit::ValueKind::Tensor) return;
      any = true;
      all_host = all_host && (static_cast<size_t>(v) < first ? a.meta.scalar_object : host[v - first] != 0);
    };
    for (const jit::Arg& a : n.args) a.for_each_node(check);
    for (const auto& kw : n.kwargs) kw.second.for_each_node(check);
    host[i - first] = any && all_host;
    BREAK_IF(host[i - first],
             what + " on NumPy scalars alone in a graph of CuPy arrays (NumPy computes it on the host)");
  }
}

template <typename Fn>
auto as_cupy(Tracer& tx, const std::string& what, Fn&& fn) {
  OutputGraph& out = tx.out();
  const std::string refused = out.claim_array_kind(ArrayKind::CuPy);
  BREAK_IF(!refused.empty(), what + ": " + refused);
  if (!out.has_device) {
    // A graph that reads no CuPy array (it makes its own: cupy.zeros(n)) runs where CuPy
    // allocates, its current device.
    Expected<int> d = cupy_current_device();
    BREAK_IF(!d, d ? std::string() : d.error().message());
    out.has_device = true;
    out.device = {rt::DeviceType::CUDA, *d};
  }
  out.array_kind = ArrayKind::CuPy;
  // On the way out (a break thrown drops the graph anyway): the call's nodes are CuPy's 0-d arrays.
  struct NoScalars {
    jit::Graph& graph;
    size_t first;
    ~NoScalars() {
      for (size_t i = first; i < graph.nodes().size(); ++i) graph.nodes()[i].meta.scalar_object = false;
    }
  } no_scalars{out.graph, out.graph.nodes().size()};
  CupyCall call;
  if constexpr (std::is_void_v<decltype(fn())>) {
    fn();
    check_not_host_arithmetic(out.graph, no_scalars.first, what);
  } else {
    auto r = fn();
    check_not_host_arithmetic(out.graph, no_scalars.first, what);
    return r;
  }
}

class CupyOpTable final : public OpTable {
public:
  bool owns(PyObject* callable) const override { return functions().numpy_of.count(callable) != 0; }
  std::vector<std::string> supported() const override {
    std::vector<std::string> names;
    for (const auto& [fn, name] : functions().name_of) names.push_back("cupy." + name);
    return names;
  }
  VarPtr call_function(Tracer& tx, PyObject* callable, std::vector<VarPtr> args, KwArgs kwargs) override {
    const Functions& f = functions();
    const std::string what = "cupy." + f.name_of.at(callable);
    PyObject* numpy_fn = f.numpy_of.at(callable);
    return as_cupy(tx, what, [&] { return ops::call_function(tx, numpy_fn, std::move(args), std::move(kwargs)); });
  }
  VarPtr attr(Tracer& tx, const VarPtr& a, const std::string& name) override {
    return as_cupy(tx, "cupy.ndarray." + name, [&] { return tensor_attr(tx, a, name); });
  }
  VarPtr call_method(Tracer& tx, const VarPtr& a, const std::string& name, std::vector<VarPtr> args,
                     KwArgs kwargs) override {
    return as_cupy(tx, "cupy.ndarray." + name,
                   [&] { return ops::call_method(tx, a, name, std::move(args), std::move(kwargs)); });
  }
  VarPtr getitem(Tracer& tx, const VarPtr& a, const VarPtr& index) override {
    return as_cupy(tx, "cupy indexing", [&] { return ops::getitem(tx, a, index); });
  }
  void setitem(Tracer& tx, const VarPtr& a, const VarPtr& index, const VarPtr& value) override {
    as_cupy(tx, "cupy index assignment", [&] { ops::setitem(tx, a, index, value); });
  }
  VarPtr binary(Tracer& tx, const std::string& op, const VarPtr& a, const VarPtr& b, bool inplace) override {
    return as_cupy(tx, "operator." + op, [&] { return ops::binary(tx, op, a, b, inplace); });
  }
  VarPtr unary(Tracer& tx, const std::string& op, const VarPtr& a) override {
    return as_cupy(tx, "operator." + op, [&] { return ops::unary(tx, op, a); });
  }
  int add_call(jit::Graph& graph, const std::string& target, std::vector<jit::Arg> args,
               std::vector<std::pair<std::string, jit::Arg>> kwargs, jit::TensorMeta meta) override {
    meta.scalar_object = false;
    return add_canonical_call(graph, target, std::move(args), std::move(kwargs), std::move(meta));
  }
};

}  // namespace

bool install_op_table() {
  static CupyOpTable* table = new CupyOpTable();  // NB: immortal, like the tracer's table list
  register_op_table(ArrayKind::CuPy, table);
  register_cupy_adapter();
  return true;
}

}  // namespace framejit::frontend::ops::cupy_ops
