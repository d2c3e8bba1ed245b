// control_flow.cpp — higher-order control-flow operators in a trace: framejit.cond as a Cond node,
// framejit.while_loop and fori_loop as WhileLoop nodes, scan and map as Scan nodes,
// associative_scan as an AssociativeScan node, whose bodies are traced into graphs of their own
// (Note [Subgraphs] in jit/ir/graph.h).
#include <algorithm>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "frontend/trace/graph_break.h"
#include "frontend/trace/python_ops.h"
#include "frontend/trace/tracer.h"

namespace framejit::frontend {

// Note [Tracing bodies]
// A body (a branch of framejit.cond; a loop's condition or body) is traced like any inlined call,
// except that the nodes it makes go to a graph of its own: OutputGraph::graph becomes a fresh body
// graph while the frame's (and any enclosing body's) waits in OutputGraph::enclosing, and
// current_graph_scope numbers the depth, which every Var records when made. Graph values among the
// body's operands enter as its placeholders. A value of an enclosing scope that the body reads
// anyway (a closure over an array, a global, a size) is lifted: Tracer::to_arg makes a placeholder
// for it in the body the first time, and the node passes the outer value in (after the operands,
// in the order the bodies first read them; a loop's body hands it back unchanged). Graph inputs
// read for the first time inside a body still become inputs of the frame's graph, and symbols stay
// the frame's: a body's shapes use them (Graph::enclosed). What would outlive the body is refused
// with a graph break naming it: writes into arrays made outside it, attribute, global and closure
// stores, changes to lists made outside it, random draws (Tracer::refuse_in_body); the statement
// then runs in CPython, where the operator is the plain Python it stands for. Guards the bodies add
// join the frame's: the compiled code is valid for exactly the inputs the bodies were traced for.

namespace {

// framejit._control's function `name` (borrowed; the module keeps it for the process's life), or
// null.
PyObject* control_attr(const char* name) {
  PyObject* mod = PyImport_ImportModule("framejit._control");  // new ref
  PyObject* f = mod ? PyObject_GetAttrString(mod, name) : nullptr;
  Py_XDECREF(mod);
  Py_XDECREF(f);
  if (!f) PyErr_Clear();
  return f;
}

PyObject* framejit_cond() {
  static PyObject* fn = control_attr("cond");
  return fn;
}

std::string meta_text(const jit::TensorMeta& m) {
  return m.scalar_object ? "a NumPy scalar of " + m.to_string() : m.to_string();
}

// A body's graph and what it took: the operands' placeholders, the outer values it lifted.
struct BodyResult {
  std::shared_ptr<jit::Graph> graph;
  std::vector<VarPtr> lifted;  // outer values, in the order the body first read them
  std::vector<int> lifted_placeholders;
  std::vector<int> operand_placeholders;  // per operand: its placeholder, or -1 (a constant)
  VarKind shape = VarKind::Tensor;        // what it returned: Tensor (one value), Tuple or List
  std::vector<jit::TensorMeta> outputs;
};

// The operator whose bodies are being traced, innermost last (refuse_in_body names it).
std::vector<const char*> body_ops;

// Flattens what a cond branch returned: one array, or a tuple or list of arrays.
std::vector<VarPtr> branch_values(const VarPtr& ret, const char* op, const char* which, VarKind& shape) {
  if (ret->kind == VarKind::Tensor) {
    shape = VarKind::Tensor;
    return {ret};
  }
  BREAK_IF(ret->kind != VarKind::Tuple && ret->kind != VarKind::List,
           std::string(op) + ": " + which + " returns " + var_kind_name(ret->kind) +
               "; a branch is captured when it returns arrays (one, or a tuple or list of them)");
  shape = ret->kind;
  for (const VarPtr& v : as<SeqVar>(ret)->items)
    BREAK_IF(v->kind != VarKind::Tensor, std::string(op) + ": " + which + " returns " + var_kind_name(v->kind) +
                                             " among its values; a branch is captured when it returns arrays");
  return as<SeqVar>(ret)->items;
}

// A tuple or list value: its kind (Tuple or List; Null for anything else) and items. A tuple of
// constants is one Const, taken apart here.
VarKind sequence_of(Tracer& tx, const VarPtr& v, std::vector<VarPtr>& items) {
  if (v->kind == VarKind::Tuple || v->kind == VarKind::List) {
    items = as<SeqVar>(v)->items;
    return v->kind;
  }
  if (v->kind == VarKind::Const && (PyTuple_CheckExact(const_value(v)) || PyList_CheckExact(const_value(v)))) {
    items = tx.unpack(v, "a higher-order operator's values");
    return PyTuple_CheckExact(const_value(v)) ? VarKind::Tuple : VarKind::List;
  }
  return VarKind::Null;
}

// Whether `b` may stand for `a` across a branch or an iteration: one kind, dtype and shape (sizes
// equal as expressions), and both NumPy scalars or both arrays (a 0-d array is written in place
// where a scalar is replaced).
bool same_value_kind(const jit::TensorMeta& a, const jit::TensorMeta& b) {
  bool same = a.kind == b.kind && a.dtype == b.dtype && a.rank() == b.rank() && a.scalar_object == b.scalar_object;
  for (int d = 0; same && d < a.rank(); ++d) same = a.shape[d].same_as(b.shape[d]);
  return same;
}

// A loop's or scan's body hands back each carried value as it took it (Note [Subgraphs]).
void check_carried(const char* op, const std::vector<jit::TensorMeta>& in, const std::vector<jit::TensorMeta>& out) {
  for (size_t j = 0; j < in.size(); ++j)
    BREAK_IF(!same_value_kind(in[j], out[j]), std::string(op) + ": carried value " + std::to_string(j) + " enters as " +
                                                  meta_text(in[j]) + " and leaves the body as " + meta_text(out[j]) +
                                                  " (each carried value keeps its dtype and shape)");
}

// The carried values as graph values: numbers made in the trace (a literal 0) become graph
// numbers, since the loop changes them.
std::vector<VarPtr> carried_values(Tracer& tx, const char* op, const std::vector<VarPtr>& init) {
  std::vector<VarPtr> carried;
  for (const VarPtr& v : init) {
    if (v->kind == VarKind::Tensor || v->kind == VarKind::Scalar) {
      carried.push_back(v);
      continue;
    }
    BREAK_IF(v->kind != VarKind::Const || !(PyLong_CheckExact(const_value(v)) || PyFloat_CheckExact(const_value(v)) ||
                                            PyBool_Check(const_value(v))),
             std::string(op) + ": a carried value is " + var_kind_name(v->kind) +
                 "; loops are captured when they carry arrays and Python numbers");
    PyObject* c = const_value(v);
    // (to_arg refuses an int past 64 bits.) operator.truth keeps a bool a bool; pos, a number.
    carried.push_back(
        tx.add_scalar(PyBool_Check(c) ? "operator.truth" : "operator.pos", {tx.to_arg(v)}, c, std::nullopt, {}));
  }
  return carried;
}

}  // namespace

const char* body_ops_name() { return body_ops.empty() ? "framejit" : body_ops.back(); }

HigherOrderOp higher_order_op(PyObject* fn) {
  if (!fn) return HigherOrderOp::None;
  if (fn == framejit_cond()) return HigherOrderOp::Cond;
  static PyObject* while_loop = control_attr("while_loop");
  static PyObject* fori_loop = control_attr("fori_loop");
  static PyObject* scan = control_attr("scan");
  static PyObject* map = control_attr("map");
  static PyObject* associative_scan = control_attr("associative_scan");
  if (fn == while_loop) return HigherOrderOp::WhileLoop;
  if (fn == fori_loop) return HigherOrderOp::ForiLoop;
  if (fn == scan) return HigherOrderOp::Scan;
  if (fn == map) return HigherOrderOp::Map;
  if (fn == associative_scan) return HigherOrderOp::AssociativeScan;
  return HigherOrderOp::None;
}

void Tracer::refuse_in_body(const std::string& what) {
  if (!in_body()) return;
  graph_break(BreakKind::SideEffect, std::string(body_ops_name()) +
                                         ": a body may not have side effects, and this one does: " + what +
                                         " (the call runs in CPython)");
}

// Traces `run(args)` into a body graph (Note [Tracing bodies]): `operands` enter as placeholders
// (graph values) or as they are (constants); `run` returns the body's values. `carried`: a loop's
// body, whose numbers change from one iteration to the next (Note [Loop-carried numbers]).
static BodyResult trace_body(Tracer& tx, const char* op, const std::vector<VarPtr>& operands, bool carried,
                             const std::function<std::vector<VarPtr>(std::vector<VarPtr>)>& run,
                             const std::vector<jit::TensorMeta>& slices = {}) {
  OutputGraph& out = tx.out();
  std::vector<std::vector<Tracer::Lifted>>& lifted_stack = tx.lifted_stack();
  // Enter: the body's graph replaces the current one; everything is put back however this ends.
  struct Scope {
    Tracer& tx;
    OutputGraph& out;
    std::vector<std::vector<Tracer::Lifted>>& lifted;
    Scope(Tracer& t, OutputGraph& o, std::vector<std::vector<Tracer::Lifted>>& l, const jit::Graph& around,
          const char* op)
        : tx(t), out(o), lifted(l) {
      jit::Graph body;
      body.dtype_module = around.dtype_module;
      body.enclosed = true;
      out.enclosing.push_back(std::move(out.graph));
      out.graph = std::move(body);
      lifted.emplace_back();
      body_ops.push_back(op);
      current_graph_scope = out.scope();
    }
    ~Scope() {
      out.graph = std::move(out.enclosing.back());
      out.enclosing.pop_back();
      lifted.pop_back();
      body_ops.pop_back();
      current_graph_scope = out.scope();
      tx.forget_deeper_scopes();
    }
  };
  Scope scope(tx, out, lifted_stack, out.graph, op);
  BodyResult r;
  std::vector<VarPtr> args;
  for (const VarPtr& v : operands) {
    if (v->kind != VarKind::Tensor && v->kind != VarKind::Scalar) {
      r.operand_placeholders.push_back(-1);  // a trace-time constant: the body sees it as is
      args.push_back(v);
      continue;
    }
    const jit::Node& outer = tx.node_of(v);
    int p = out.graph.add_placeholder(outer.name, outer.meta);
    r.operand_placeholders.push_back(p);
    if (v->kind == VarKind::Tensor) {
      args.push_back(std::make_shared<TensorVar>(p));
      continue;
    }
    auto o = std::static_pointer_cast<ScalarVar>(v);
    auto sv = std::make_shared<ScalarVar>(p, o->hint);
    if (carried) {
      sv->loop_carried = true;  // no value to specialize on, and no size
    } else {
      // Python logic in a branch on this number specializes what the operand came from.
      sv->sym = o->sym;
      sv->deps = o->deps;
      if (o->source) sv->deps.push_back(o);
    }
    args.push_back(std::move(sv));
  }
  // A scan's slice of xs: a placeholder of the body alone (after the operands).
  for (const jit::TensorMeta& m : slices) {
    int p = out.graph.add_placeholder("x", m);
    r.operand_placeholders.push_back(p);
    args.push_back(std::make_shared<TensorVar>(p));
  }
  std::vector<VarPtr> values = run(std::move(args));
  std::vector<jit::Arg> outs;
  for (const VarPtr& v : values) {
    outs.push_back(tx.to_arg(v));
    r.outputs.push_back(tx.meta(v));
  }
  out.graph.set_output(std::move(outs));
  for (const Tracer::Lifted& l : lifted_stack.back()) {
    r.lifted.push_back(l.outer);
    r.lifted_placeholders.push_back(l.placeholder);
  }
  r.graph = std::make_shared<jit::Graph>(std::move(out.graph));
  return r;
}

// Puts `body`'s placeholders first, in `order` (node indices; -1: a placeholder to make, like
// `passed[k]`'s), so that the body's k-th placeholder is the node's k-th operand `passed[k]`.
static void order_placeholders(Tracer& tx, jit::Graph& body, const std::vector<int>& order,
                               const std::vector<VarPtr>& passed) {
  std::vector<int> idx = order;
  for (size_t k = 0; k < idx.size(); ++k)
    if (idx[k] < 0) idx[k] = body.add_placeholder(tx.node_of(passed[k]).name, tx.meta(passed[k]));
  const auto& nodes = body.nodes();
  std::vector<int> remap(nodes.size(), -1);
  std::vector<jit::Node> reordered;
  for (int i : idx) {
    remap[i] = static_cast<int>(reordered.size());
    reordered.push_back(nodes[i]);
  }
  for (size_t i = 0; i < nodes.size(); ++i)
    if (nodes[i].kind != jit::NodeKind::Placeholder) {
      remap[i] = static_cast<int>(reordered.size());
      reordered.push_back(nodes[i]);
    }
  body.rebuild(std::move(reordered), remap);
}

// `args` and `kwargs` bound to the parameters `names` of framejit.`fn`, as Python binds them.
static std::vector<VarPtr> bind(const char* fn, std::initializer_list<const char*> names, std::vector<VarPtr> args,
                                KwArgs kwargs) {
  const std::vector<const char*> n(names);
  std::vector<VarPtr> a(n.size());
  BREAK_IF(args.size() > n.size(), Raises{PyExc_TypeError},
           std::string(fn) + "() takes " + std::to_string(n.size()) + " positional arguments but " +
               std::to_string(args.size()) + " were given");
  for (size_t i = 0; i < args.size(); ++i) a[i] = std::move(args[i]);
  for (auto& [k, v] : kwargs) {
    size_t at = n.size();
    for (size_t i = 0; i < n.size(); ++i)
      if (k == n[i]) at = i;
    BREAK_IF(at == n.size(), Raises{PyExc_TypeError},
             std::string(fn) + "() got an unexpected keyword argument '" + k + "'");
    BREAK_IF(a[at] != nullptr, Raises{PyExc_TypeError},
             std::string(fn) + "() got multiple values for argument '" + k + "'");
    a[at] = v;
  }
  for (size_t i = 0; i < n.size(); ++i)
    BREAK_IF(!a[i], Raises{PyExc_TypeError}, std::string(fn) + "() missing required argument: '" + n[i] + "'");
  return a;
}

// Breaks when a result that may be one of `operands` itself would be an input array written
// earlier in the graph (or a view of one): the graph holds such an array's new contents apart
// from the caller's array until it ends (Note [Writes into arrays]), so the result could not be
// that array, and writes through one would miss the other. CPython runs the statement instead.
static void check_no_written_operand(Tracer& tx, const char* op, const std::vector<VarPtr>& operands) {
  for (const VarPtr& o : operands)
    BREAK_IF(o->kind == VarKind::Tensor &&
                 (tx.is_written_input(o.get()) || tx.is_view_of_written_input(*as<TensorVar>(o))),
             std::string(op) + ": it may hand back an operand that is an input array written earlier in this graph "
                               "(the statement runs in CPython, on the array itself)");
}

// A control-flow result that may be one of `operands` itself (a branch handing back its operand,
// a loop that ran no step handing back what it was given): CPython's result is that very array.
// Writes into it break (TensorVar::may_be_operand), and so do writes into the operands, which
// list it as a view that cannot be made again (check_views_remakeable); CPython then writes
// through the objects, which the program hands back as they are.
static VarPtr maybe_operand_result(int node, bool may_alias, const std::vector<VarPtr>& operands) {
  auto result = std::make_shared<TensorVar>(node);
  if (!may_alias) return result;
  result->may_be_operand = true;
  result->maybe_copy = true;
  for (const VarPtr& o : operands)
    if (o->kind == VarKind::Tensor) as<TensorVar>(o)->views.push_back(result);
  return result;
}

VarPtr Tracer::call_cond(std::vector<VarPtr> args, KwArgs kwargs) {
  const std::vector<VarPtr> a =
      bind("cond", {"pred", "true_fn", "false_fn", "operands"}, std::move(args), std::move(kwargs));
  const VarPtr &pred = a[0], &on_true = a[1], &on_false = a[2];
  std::vector<VarPtr> operands;
  BREAK_IF(sequence_of(*this, a[3], operands) == VarKind::Null, Raises{PyExc_TypeError},
           std::string("framejit.cond: operands must be a tuple or list, got ") + var_kind_name(a[3]->kind));

  // A predicate known when tracing (a constant, a guarded number): only its branch runs.
  if (pred->kind != VarKind::Tensor && pred->kind != VarKind::Scalar)
    return call(truth(pred, "framejit.cond's predicate") ? on_true : on_false, operands, {});
  const jit::TensorMeta& pm = meta(pred);
  if (pm.kind == jit::ValueKind::Tensor) {
    bool one = true;
    for (const jit::SymInt& d : pm.shape) one = one && d.is_const() && d.const_value() == 1;
    BREAK_IF(!one, "framejit.cond: the predicate must be a bool, a number or a one-element array, not an array of " +
                       meta_text(pm));
  }

  VarKind t_shape = VarKind::Tensor, f_shape = VarKind::Tensor;
  BodyResult t = trace_body(*this, "framejit.cond", operands, false, [&](std::vector<VarPtr> in) {
    return branch_values(call(on_true, std::move(in), {}), "framejit.cond", "true_fn", t_shape);
  });
  BodyResult f = trace_body(*this, "framejit.cond", operands, false, [&](std::vector<VarPtr> in) {
    return branch_values(call(on_false, std::move(in), {}), "framejit.cond", "false_fn", f_shape);
  });
  t.shape = t_shape;
  f.shape = f_shape;
  // Note [Subgraphs]: the branches return alike.
  BREAK_IF(t.shape != f.shape || t.outputs.size() != f.outputs.size(),
           "framejit.cond: the branches return different structures (" + std::to_string(t.outputs.size()) + " and " +
               std::to_string(f.outputs.size()) + " values)");
  for (size_t j = 0; j < t.outputs.size(); ++j) {
    const jit::TensorMeta &x = t.outputs[j], &y = f.outputs[j];
    BREAK_IF(!same_value_kind(x, y), "framejit.cond: the branches' output " + std::to_string(j) +
                                         " differs: " + meta_text(x) + " from true_fn, " + meta_text(y) +
                                         " from false_fn (each output needs one dtype and shape)");
  }

  // A branch that hands back an array it was given (or a view of one) makes the result that very
  // memory (maybe_operand_result).
  std::vector<bool> may_alias(t.outputs.size(), false);
  for (const BodyResult* b : {&t, &f}) {
    const std::vector<jit::Arg>& outs = b->graph->outputs();
    for (size_t j = 0; j < outs.size() && j < may_alias.size(); ++j) {
      if (!outs[j].is_node()) continue;
      int v = static_cast<int>(outs[j].i);
      while (b->graph->node(v).kind == jit::NodeKind::Call && jit::is_view(b->graph->node(v).op) &&
             !b->graph->node(v).args.empty() && b->graph->node(v).args[0].is_node())
        v = static_cast<int>(b->graph->node(v).args[0].i);
      may_alias[j] = may_alias[j] || b->graph->node(v).kind == jit::NodeKind::Placeholder;
    }
  }

  std::vector<VarPtr> aliased;
  for (size_t j = 0; j < may_alias.size(); ++j)
    if (may_alias[j]) aliased = operands;
  check_no_written_operand(*this, "framejit.cond", aliased);

  // The node's operands: the graph values among the operands, then what either branch lifted;
  // each body's placeholders in that order (one it lacks is made, unused).
  // (A value both passed as an operand and read as a closure is both: two placeholders.)
  std::vector<VarPtr> passed;
  for (size_t i = 0; i < operands.size(); ++i)
    if (t.operand_placeholders[i] >= 0) passed.push_back(operands[i]);
  const size_t first_lifted = passed.size();
  for (const VarPtr& v : t.lifted) passed.push_back(v);
  for (const VarPtr& v : f.lifted)
    if (std::find(passed.begin() + first_lifted, passed.end(), v) == passed.end()) passed.push_back(v);
  auto order_of = [&](const BodyResult& b) {
    std::vector<int> order;
    for (size_t i = 0; i < operands.size(); ++i)
      if (b.operand_placeholders[i] >= 0) order.push_back(b.operand_placeholders[i]);
    for (size_t k = order.size(); k < passed.size(); ++k) {
      auto at = std::find(b.lifted.begin(), b.lifted.end(), passed[k]);
      order.push_back(at == b.lifted.end() ? -1 : b.lifted_placeholders[at - b.lifted.begin()]);
    }
    return order;
  };
  const std::vector<int> t_order = order_of(t), f_order = order_of(f);
  order_placeholders(*this, *t.graph, t_order, passed);
  order_placeholders(*this, *f.graph, f_order, passed);

  std::vector<jit::Arg> node_args{to_arg(pred)};
  for (const VarPtr& v : passed) node_args.push_back(to_arg(v));
  jit::TensorMeta tuple;
  tuple.kind = jit::ValueKind::Object;
  const int c = out_.graph.add_call(jit::OpKind::Cond, {}, "framejit.cond", std::move(node_args), {}, tuple);
  out_.graph.mutable_node(c).subgraphs = {t.graph, f.graph};
  check_raise_under_handler(c);
  std::vector<VarPtr> results;
  for (size_t j = 0; j < t.outputs.size(); ++j) {
    int r = out_.graph.add_call(jit::OpKind::Extern, {}, "getitem",
                                {jit::Arg::node(c), jit::Arg::integer(static_cast<int64_t>(j))}, {}, t.outputs[j]);
    results.push_back(maybe_operand_result(r, may_alias[j], operands));
  }
  out_.saw_tensor = true;
  if (t.shape == VarKind::Tensor) return results[0];
  return std::make_shared<SeqVar>(t.shape, std::move(results));
}

// Note [Loop-carried numbers]
// A while_loop's carried values enter its bodies as placeholders like cond's operands, but a
// carried Python number has a new value each iteration: its hint (the first iteration's) may not
// decide anything. So it is marked loop_carried, and so is, through deps, whatever is computed
// from it: arithmetic and comparisons on it stay graph nodes (a counter `i + 1`, a test `i < n`),
// and Python logic that needs its value (an `if` on it, a size made from it) is a graph break
// naming it. The loop's results are such numbers too.

// A WhileLoop node for carried values `init` (Note [Subgraphs]): `cond_body` and `step_body`
// trace the condition and the body (each given the carried values). Returns the results.
VarPtr Tracer::build_while(const char* op, const std::vector<VarPtr>& init,
                           const std::function<VarPtr(std::vector<VarPtr>)>& cond_body,
                           const std::function<std::vector<VarPtr>(std::vector<VarPtr>)>& step_body, VarKind shape) {
  check_no_written_operand(*this, op, init);  // after no step, a result is the init itself
  const std::vector<VarPtr> carried = carried_values(*this, op, init);
  BodyResult test = trace_body(*this, op, carried, true, [&](std::vector<VarPtr> in) {
    VarPtr p = cond_body(std::move(in));
    BREAK_IF(p->kind != VarKind::Tensor && p->kind != VarKind::Scalar,
             std::string(op) + ": the condition returns " + var_kind_name(p->kind) +
                 ", known when tracing; a loop is captured when its condition is computed from what it carries");
    const jit::TensorMeta& m = meta(p);
    BREAK_IF(m.dtype != jit::DType::Bool || (m.kind == jit::ValueKind::Tensor && m.rank() != 0),
             std::string(op) + ": the condition returns " + meta_text(m) + "; it must be one bool");
    return std::vector<VarPtr>{p};
  });
  BodyResult step = trace_body(*this, op, carried, true, step_body);
  BREAK_IF(step.outputs.size() != carried.size(), std::string(op) + ": the body returns " +
                                                      std::to_string(step.outputs.size()) + " values for " +
                                                      std::to_string(carried.size()) + " carried");
  std::vector<jit::TensorMeta> carried_metas;
  for (const VarPtr& v : carried) carried_metas.push_back(meta(v));
  check_carried(op, carried_metas, step.outputs);
  // The node passes the carried values, then what either body lifted (carried through unchanged).
  // (A value both carried and read as a closure is both: the closure sees the loop's initial value.)
  std::vector<VarPtr> passed = carried;
  for (const VarPtr& v : test.lifted) passed.push_back(v);
  for (const VarPtr& v : step.lifted)
    if (std::find(passed.begin() + carried.size(), passed.end(), v) == passed.end()) passed.push_back(v);
  auto order_of = [&](const BodyResult& b) {
    std::vector<int> order(b.operand_placeholders.begin(), b.operand_placeholders.end());
    for (size_t k = order.size(); k < passed.size(); ++k) {
      auto at = std::find(b.lifted.begin(), b.lifted.end(), passed[k]);
      order.push_back(at == b.lifted.end() ? -1 : b.lifted_placeholders[at - b.lifted.begin()]);
    }
    return order;
  };
  order_placeholders(*this, *test.graph, order_of(test), passed);
  order_placeholders(*this, *step.graph, order_of(step), passed);
  std::vector<jit::Arg> step_outs = step.graph->outputs();
  const std::vector<int> ph = step.graph->placeholders();
  for (size_t k = carried.size(); k < passed.size(); ++k) step_outs.push_back(jit::Arg::node(ph[k]));
  step.graph->set_output(std::move(step_outs));

  std::vector<jit::Arg> node_args;
  for (const VarPtr& v : passed) node_args.push_back(to_arg(v));
  jit::TensorMeta tuple;
  tuple.kind = jit::ValueKind::Object;
  const int w = out_.graph.add_call(jit::OpKind::WhileLoop, {}, std::string(op), std::move(node_args), {}, tuple);
  out_.graph.mutable_node(w).subgraphs = {test.graph, step.graph};
  check_raise_under_handler(w);
  std::vector<VarPtr> results;
  for (size_t j = 0; j < carried.size(); ++j) {
    const int r =
        out_.graph.add_call(jit::OpKind::Extern, {}, "getitem",
                            {jit::Arg::node(w), jit::Arg::integer(static_cast<int64_t>(j))}, {}, meta(carried[j]));
    if (meta(carried[j]).kind == jit::ValueKind::Tensor) {
      results.push_back(maybe_operand_result(r, true, {carried[j]}));  // no step: the init itself
    } else {
      auto s = std::make_shared<ScalarVar>(r, as<ScalarVar>(carried[j])->hint);
      s->loop_carried = true;  // Note [Loop-carried numbers]: the hint is not the result
      results.push_back(std::move(s));
    }
  }
  out_.saw_tensor = true;
  if (shape == VarKind::Tensor) return results.at(0);
  return std::make_shared<SeqVar>(shape, std::move(results));
}

VarPtr Tracer::call_while_loop(std::vector<VarPtr> args, KwArgs kwargs) {
  const std::vector<VarPtr> a =
      bind("while_loop", {"cond_fn", "body_fn", "carried_inputs"}, std::move(args), std::move(kwargs));
  std::vector<VarPtr> init;
  BREAK_IF(
      sequence_of(*this, a[2], init) == VarKind::Null, Raises{PyExc_TypeError},
      std::string("framejit.while_loop: carried_inputs must be a tuple or list, got ") + var_kind_name(a[2]->kind));
  const VarPtr &cond_fn = a[0], &body_fn = a[1];
  return build_while(
      "framejit.while_loop", init, [&](std::vector<VarPtr> in) { return call(cond_fn, std::move(in), {}); },
      [&](std::vector<VarPtr> in) {
        VarPtr r = call(body_fn, std::move(in), {});
        BREAK_IF(r->kind != VarKind::Tuple && r->kind != VarKind::List, Raises{PyExc_TypeError},
                 std::string("framejit.while_loop: body_fn's result must be a tuple or list, got ") +
                     var_kind_name(r->kind));
        return as<SeqVar>(r)->items;
      },
      VarKind::Tuple);  // while_loop returns a tuple, whatever carried_inputs was
}

VarPtr Tracer::call_fori_loop(std::vector<VarPtr> args, KwArgs kwargs) {
  const std::vector<VarPtr> a =
      bind("fori_loop", {"lower", "upper", "body_fn", "init_val"}, std::move(args), std::move(kwargs));
  const VarPtr &body_fn = a[2], &init_val = a[3];
  // Carried: the counter, then the value (its items, for a tuple or list); the bound rides along.
  std::vector<VarPtr> value_items;
  const VarKind value_kind = sequence_of(*this, init_val, value_items);
  const bool seq = value_kind != VarKind::Null;
  std::vector<VarPtr> init{a[0]};
  if (seq)
    for (const VarPtr& v : value_items) init.push_back(v);
  else
    init.push_back(init_val);
  for (const VarPtr& bound : {a[0], a[1]})
    BREAK_IF(bound->kind == VarKind::Tensor,
             "framejit.fori_loop: a bound is an array; loops are captured when their "
             "bounds are Python ints");
  const VarPtr upper = a[1];
  VarPtr loop = build_while(
      "framejit.fori_loop", init, [&](std::vector<VarPtr> in) { return compare_op(*this, Py_LT, in[0], upper); },
      [&](std::vector<VarPtr> in) {
        VarPtr i = in[0];
        VarPtr val = seq ? std::make_shared<SeqVar>(value_kind, std::vector<VarPtr>(in.begin() + 1, in.end())) : in[1];
        VarPtr r = call(body_fn, {i, val}, {});
        std::vector<VarPtr> out{
            binary_op(*this, 0 /* NB_ADD */, i, wrap_const(OwnedRef::steal(PyLong_FromLong(1)).get()))};
        if (seq) {
          BREAK_IF(r->kind != VarKind::Tuple && r->kind != VarKind::List, Raises{PyExc_TypeError},
                   std::string("framejit.fori_loop: body_fn's result must be a tuple or list, got ") +
                       var_kind_name(r->kind));
          for (const VarPtr& v : as<SeqVar>(r)->items) out.push_back(v);
        } else {
          out.push_back(r);
        }
        return out;
      },
      VarKind::Tuple);
  std::vector<VarPtr> items = as<SeqVar>(loop)->items;
  if (!seq) return items.at(1);
  return std::make_shared<SeqVar>(value_kind, std::vector<VarPtr>(items.begin() + 1, items.end()));
}

// scan(combine_fn, init, xs, dim=0, reverse=False) and map(fn, xs, *args) as a Scan node (Note
// [Subgraphs]): the body is traced once on a slice of xs, with the carry loop-carried (Note
// [Loop-carried numbers]); the program runs it per index and stacks the ys (Note [Running scan]).
VarPtr Tracer::build_scan(
    const char* op, const std::vector<VarPtr>& init, const VarPtr& xs, int64_t dim, bool reverse,
    const std::function<std::pair<std::vector<VarPtr>, VarPtr>(std::vector<VarPtr>, VarPtr)>& run) {
  BREAK_IF(xs->kind != VarKind::Tensor,
           std::string(op) + ": xs is " + var_kind_name(xs->kind) + "; a scan is captured over an array");
  const jit::TensorMeta xm = meta(xs);
  BREAK_IF(xm.rank() == 0, Raises{PyExc_TypeError}, std::string(op) + ": xs must have at least one dim");
  BREAK_IF(dim < -xm.rank() || dim >= xm.rank(), Raises{PyExc_ValueError},
           std::string(op) + ": dim " + std::to_string(dim) + " is out of range for an array of " +
               std::to_string(xm.rank()) + " dims");
  if (dim < 0) dim += xm.rank();
  check_no_written_operand(*this, op, init);  // after no step, the carry is the init itself
  const jit::SymInt n = xm.shape[dim];
  // No elements: the plain meaning raises (the ys' shape is unknown); so does CPython here.
  BREAK_IF(n.is_const() && n.const_value() == 0, Raises{PyExc_ValueError},
           std::string(op) + ": xs has no elements along the scanned dim (the result's shape is unknown)");
  jit::TensorMeta x = xm;
  x.shape.erase(x.shape.begin() + dim);
  if (dim != 0) x.layout = jit::Layout::Strided;
  x.scalar_object = x.rank() == 0 && out_.array_kind == ArrayKind::NumPy;  // NumPy's xs[i] of a vector
  const std::vector<VarPtr> carried = carried_values(*this, op, init);
  jit::TensorMeta ym;
  BodyResult body = trace_body(*this, op, carried, true,
                               [&](std::vector<VarPtr> in) {
                                 VarPtr x_var = in.back();
                                 in.pop_back();
                                 auto [next, y] = run(std::move(in), x_var);
                                 BREAK_IF(y->kind != VarKind::Tensor,
                                          std::string(op) + ": the body's y is " + var_kind_name(y->kind) +
                                              "; a scan is captured when each y is an array");
                                 ym = meta(y);
                                 next.push_back(y);
                                 return next;
                               },
                               {x});
  BREAK_IF(body.outputs.size() != carried.size() + 1, std::string(op) + ": the body returns " +
                                                          std::to_string(body.outputs.size() - 1) +
                                                          " carried values for " + std::to_string(carried.size()));
  std::vector<jit::TensorMeta> carried_metas;
  for (const VarPtr& v : carried) carried_metas.push_back(meta(v));
  check_carried(op, carried_metas, body.outputs);
  // Placeholders: the carry, x, then what the body lifted.
  std::vector<VarPtr> passed = carried;
  passed.push_back(xs);
  for (const VarPtr& v : body.lifted) passed.push_back(v);
  std::vector<int> order(body.operand_placeholders.begin(), body.operand_placeholders.end());
  order.insert(order.end(), body.lifted_placeholders.begin(), body.lifted_placeholders.end());
  order_placeholders(*this, *body.graph, order, passed);

  std::vector<jit::Arg> node_args;
  for (const VarPtr& v : passed) node_args.push_back(to_arg(v));
  jit::TensorMeta tuple;
  tuple.kind = jit::ValueKind::Object;
  const int node = out_.graph.add_call(jit::OpKind::Scan, {}, std::string(op), std::move(node_args),
                                       {{"carried", jit::Arg::integer(static_cast<int64_t>(carried.size()))},
                                        {"dim", jit::Arg::integer(dim)},
                                        {"reverse", jit::Arg::boolean(reverse)}},
                                       tuple);
  out_.graph.mutable_node(node).subgraphs = {body.graph};
  check_raise_under_handler(node);
  std::vector<VarPtr> results;
  for (size_t j = 0; j <= carried.size(); ++j) {
    jit::TensorMeta m;
    if (j < carried.size()) {
      m = meta(carried[j]);
    } else {  // ys: each y, stacked along dim
      m = ym;
      m.shape.insert(m.shape.begin() + std::min<int64_t>(dim, m.rank()), n);
      m.layout = jit::Layout::Contiguous;
      m.scalar_object = false;
    }
    const int r = out_.graph.add_call(jit::OpKind::Extern, {}, "getitem",
                                      {jit::Arg::node(node), jit::Arg::integer(static_cast<int64_t>(j))}, {}, m);
    if (m.kind == jit::ValueKind::Tensor) {
      // The carry after no step is the init itself; ys are new.
      results.push_back(j < carried.size() ? maybe_operand_result(r, true, {carried[j]})
                                           : std::make_shared<TensorVar>(r));
    } else {
      auto sv = std::make_shared<ScalarVar>(r, as<ScalarVar>(carried[j])->hint);
      sv->loop_carried = true;  // Note [Loop-carried numbers]
      results.push_back(std::move(sv));
    }
  }
  out_.saw_tensor = true;
  return std::make_shared<SeqVar>(VarKind::Tuple, std::move(results));
}

VarPtr Tracer::call_scan(std::vector<VarPtr> args, KwArgs kwargs) {
  // dim and reverse have defaults: bind what was given.
  VarPtr dim_v, reverse_v;
  for (auto it = kwargs.begin(); it != kwargs.end();) {
    if (it->first == "dim" || it->first == "reverse") {
      (it->first == "dim" ? dim_v : reverse_v) = it->second;
      it = kwargs.erase(it);
    } else {
      ++it;
    }
  }
  if (args.size() > 3 && !dim_v) dim_v = args[3];
  if (args.size() > 4 && !reverse_v) reverse_v = args[4];
  if (args.size() > 3) args.resize(3);
  const std::vector<VarPtr> a = bind("scan", {"combine_fn", "init", "xs"}, std::move(args), std::move(kwargs));
  const int64_t dim = dim_v ? to_int(dim_v, "framejit.scan's dim") : 0;
  const bool reverse = reverse_v ? truth(reverse_v, "framejit.scan's reverse") : false;
  const VarPtr &combine = a[0], &init = a[1];
  std::vector<VarPtr> init_items;
  const VarKind carry_kind = sequence_of(*this, init, init_items);
  const bool seq = carry_kind != VarKind::Null;
  if (!seq) init_items = {init};
  VarPtr r = build_scan("framejit.scan", init_items, a[2], dim, reverse, [&](std::vector<VarPtr> carry, VarPtr x) {
    VarPtr c = seq ? std::make_shared<SeqVar>(carry_kind, carry) : carry.at(0);
    VarPtr out = call(combine, {c, x}, {});
    BREAK_IF((out->kind != VarKind::Tuple && out->kind != VarKind::List) || as<SeqVar>(out)->items.size() != 2,
             Raises{PyExc_TypeError}, "framejit.scan: combine_fn must return (carry, y)");
    VarPtr next = as<SeqVar>(out)->items[0], y = as<SeqVar>(out)->items[1];
    std::vector<VarPtr> next_items;
    if (seq) {
      BREAK_IF(next->kind != VarKind::Tuple && next->kind != VarKind::List, Raises{PyExc_TypeError},
               std::string("framejit.scan: the carry must be a tuple or list, got ") + var_kind_name(next->kind));
      next_items = as<SeqVar>(next)->items;
    } else {
      next_items = {next};
    }
    return std::make_pair(next_items, y);
  });
  std::vector<VarPtr> items = as<SeqVar>(r)->items;
  VarPtr ys = items.back();
  items.pop_back();
  VarPtr carry = seq ? std::make_shared<SeqVar>(carry_kind, std::move(items)) : items.at(0);
  return std::make_shared<SeqVar>(VarKind::Tuple, std::vector<VarPtr>{carry, ys});
}

VarPtr Tracer::call_map(std::vector<VarPtr> args, KwArgs kwargs) {
  BREAK_IF(!kwargs.empty(), Raises{PyExc_TypeError},
           "map() got an unexpected keyword argument '" + kwargs[0].first + "'");
  BREAK_IF(args.size() < 2, Raises{PyExc_TypeError}, "map() missing required arguments: 'fn' and 'xs'");
  const VarPtr fn = args[0], xs = args[1];
  const std::vector<VarPtr> extra(args.begin() + 2, args.end());  // read in the body: lifted
  VarPtr r = build_scan("framejit.map", {}, xs, 0, false, [&](std::vector<VarPtr>, VarPtr x) {
    std::vector<VarPtr> call_args{x};
    call_args.insert(call_args.end(), extra.begin(), extra.end());
    return std::make_pair(std::vector<VarPtr>{}, call(fn, std::move(call_args), {}));
  });
  return as<SeqVar>(r)->items.back();
}

// Note [Parallel scans]
// framejit.associative_scan(combine_fn, xs, dim, reverse) is an inclusive scan whose combine_fn
// the caller promises associative. The plain meaning folds slice after slice: n - 1 calls, each
// waiting for the one before. Captured, it is a parallel scan: combine_fn is traced once on two
// batches of slices (arrays shaped like xs, their length along dim a size known only when the
// program runs), and the program runs ceil(log2 n) levels over a copy of xs (Hillis and Steele):
// at level d = 1, 2, 4, ..., out[d:] = combine_fn(out[:-d], out[d:]) along dim (with reverse,
// out[:-d] = combine_fn(out[d:], out[:-d])), each level one run of the body's compiled program
// over all the slices at once.
// That is the plain meaning's value only when combine_fn treats each slice on its own: the body
// must be made of pointwise ops and Python numbers alone, each array in it shaped like the batches
// or 0-d (no reduction, view, product or broadcast across slices; no array read from outside but
// 0-d ones). And a step must compute as on one slice: the body is traced on single slices too
// (the plain meaning's operands: NumPy scalars for a vector xs), and both traces must run the same
// ops in the same dtypes and keep xs's dtype (NumPy 1 makes float64 of a float32 scalar times a
// Python float, float32 of such an array). Anything else breaks with the reason, and CPython runs
// the plain meaning. Floats are then combined in another order than the plain meaning's, as in
// jax.lax.associative_scan: equal up to rounding for an associative combine_fn, exact for integers.
// framejit.Tensor has no slice assignment for the levels to write with: captured on NumPy arrays
// and torch tensors.

namespace {

// Whether graph `body` (placeholders a, b, then lifted values) combines batches of shape `batch`
// slice by slice (Note [Parallel scans]); otherwise why not.
std::string why_not_slicewise(const jit::Graph& body, const jit::TensorMeta& batch) {
  auto shaped_like_batch = [&](const jit::TensorMeta& m) {
    if (m.kind != jit::ValueKind::Tensor || m.rank() == 0) return true;
    if (m.rank() != batch.rank()) return false;
    for (int d = 0; d < m.rank(); ++d)
      if (!m.shape[d].same_as(batch.shape[d])) return false;
    return true;
  };
  const std::vector<int> ph = body.placeholders();
  for (size_t k = 2; k < ph.size(); ++k) {
    const jit::TensorMeta& m = body.node(ph[k]).meta;
    if (m.kind == jit::ValueKind::Tensor && m.rank() != 0)
      return "combine_fn reads an array from outside (" + body.node(ph[k]).name + ")";
  }
  for (const jit::Node& n : body.nodes()) {
    if (n.kind != jit::NodeKind::Call) continue;
    if (!jit::is_pointwise(n.op) && !jit::is_scalar_op(n.op))
      return "combine_fn calls " + n.target + ", not an elementwise operation";
    if (!shaped_like_batch(n.meta)) return "combine_fn broadcasts its operands (" + n.target + ")";
  }
  return {};
}

// The (op, dtype) of each call of `g`, in order: what a body computes.
std::vector<std::pair<jit::OpKind, jit::DType>> computation(const jit::Graph& g) {
  std::vector<std::pair<jit::OpKind, jit::DType>> out;
  for (const jit::Node& n : g.nodes())
    if (n.kind == jit::NodeKind::Call) out.emplace_back(n.op, n.meta.dtype);
  return out;
}

}  // namespace

VarPtr Tracer::call_associative_scan(std::vector<VarPtr> args, KwArgs kwargs) {
  static const char* op = "framejit.associative_scan";
  VarPtr reverse_v;
  for (auto it = kwargs.begin(); it != kwargs.end();) {
    if (it->first == "reverse") {
      reverse_v = it->second;
      it = kwargs.erase(it);
    } else {
      ++it;
    }
  }
  if (args.size() > 3 && !reverse_v) reverse_v = args[3];
  BREAK_IF(args.size() > 4, Raises{PyExc_TypeError},
           "associative_scan() takes from 3 to 4 positional arguments but " + std::to_string(args.size()) +
               " were given");
  if (args.size() > 3) args.resize(3);
  const std::vector<VarPtr> a =
      bind("associative_scan", {"combine_fn", "xs", "dim"}, std::move(args), std::move(kwargs));
  const VarPtr &combine = a[0], &xs = a[1];
  int64_t dim = to_int(a[2], "framejit.associative_scan's dim");
  const bool reverse = reverse_v ? truth(reverse_v, "framejit.associative_scan's reverse") : false;
  BREAK_IF(xs->kind != VarKind::Tensor,
           std::string(op) + ": xs is " + var_kind_name(xs->kind) + "; a scan is captured over an array");
  const jit::TensorMeta xm = meta(xs);
  BREAK_IF(dim < -xm.rank() || dim >= xm.rank(), Raises{PyExc_ValueError},
           std::string(op) + ": dim " + std::to_string(dim) + " is out of range for an array of " +
               std::to_string(xm.rank()) + " dims");
  if (dim < 0) dim += xm.rank();
  BREAK_IF(out_.array_kind != ArrayKind::NumPy && out_.array_kind != ArrayKind::Torch,
           std::string(op) + " is captured on NumPy arrays and torch tensors (a framejit.Tensor has no slice "
                             "assignment for the scan's levels)");
  const jit::SymInt n = xm.shape[dim];
  BREAK_IF(n.is_const() && n.const_value() == 0, Raises{PyExc_ValueError},
           std::string(op) + ": xs has no elements along the scanned dim (the result's shape is unknown)");

  // Traces combine_fn on two operands of `m`: its one array result.
  auto trace_combine = [&](const jit::TensorMeta& m) {
    return trace_body(
        *this, op, {}, false,
        [&](std::vector<VarPtr> in) {
          VarPtr r = call(combine, std::move(in), {});
          BREAK_IF(r->kind != VarKind::Tensor, std::string(op) + ": combine_fn returns " + var_kind_name(r->kind) +
                                                   "; a scan is captured when it returns one array");
          return std::vector<VarPtr>{r};
        },
        {m, m});
  };
  // The plain meaning's step, on one slice of each.
  jit::TensorMeta one = xm;
  one.shape.erase(one.shape.begin() + dim);
  if (dim != 0) one.layout = jit::Layout::Strided;
  one.scalar_object = one.rank() == 0 && out_.array_kind == ArrayKind::NumPy;
  const BodyResult single = trace_combine(one);
  // The batches: xs's shape, with a length along dim that only the run knows. The symbol is bound
  // to no call of the frame's graph (Note [Unbacked sizes]): it lives in the body alone.
  jit::TensorMeta batch = xm;
  const int s =
      out_.new_unbacked_symbol(-1, dim, "a batch of framejit.associative_scan's slices",
                               [](const std::string& reason) { graph_break(BreakKind::DataDependent, reason); });
  batch.shape[dim] = jit::SymInt::symbol(s);
  batch.layout = dim == 0 ? jit::Layout::Contiguous : jit::Layout::Strided;  // views of a C-ordered copy
  BodyResult body = trace_combine(batch);

  const std::string why = why_not_slicewise(*body.graph, batch);
  BREAK_IF(!why.empty(), std::string(op) + ": " + why + "; a parallel scan needs an elementwise combine_fn");
  BREAK_IF(single.outputs[0].dtype != xm.dtype || body.outputs[0].dtype != xm.dtype,
           std::string(op) + ": combine_fn turns " + std::string(rt::dtype_name(xm.dtype)) + " slices into " +
               std::string(rt::dtype_name(single.outputs[0].dtype == xm.dtype ? body.outputs[0].dtype
                                                                               : single.outputs[0].dtype)) +
               " (a captured scan keeps xs's dtype)");
  BREAK_IF(computation(*single.graph) != computation(*body.graph),
           std::string(op) + ": combine_fn computes in other dtypes on one slice than on many (the library's "
                             "promotion of scalars); a parallel scan needs the same computation");

  // Placeholders: a, b, then what the body lifted; the node passes xs for the scan and the lifted.
  std::vector<VarPtr> passed{xs, xs};
  for (const VarPtr& v : body.lifted) passed.push_back(v);
  std::vector<int> order(body.operand_placeholders.begin(), body.operand_placeholders.end());
  order.insert(order.end(), body.lifted_placeholders.begin(), body.lifted_placeholders.end());
  order_placeholders(*this, *body.graph, order, passed);
  std::vector<jit::Arg> node_args;
  for (size_t k = 1; k < passed.size(); ++k) node_args.push_back(to_arg(passed[k]));
  jit::TensorMeta tuple;
  tuple.kind = jit::ValueKind::Object;
  const int node =
      out_.graph.add_call(jit::OpKind::AssociativeScan, {}, op, std::move(node_args),
                          {{"dim", jit::Arg::integer(dim)}, {"reverse", jit::Arg::boolean(reverse)}}, tuple);
  out_.graph.mutable_node(node).subgraphs = {body.graph};
  check_raise_under_handler(node);
  jit::TensorMeta m = xm;
  m.layout = jit::Layout::Contiguous;
  m.scalar_object = false;
  const int r = out_.graph.add_call(jit::OpKind::Extern, {}, "getitem", {jit::Arg::node(node), jit::Arg::integer(0)},
                                    {}, m);
  out_.saw_tensor = true;
  return std::make_shared<TensorVar>(r);  // new memory: the scan runs over a copy of xs
}

}  // namespace framejit::frontend
