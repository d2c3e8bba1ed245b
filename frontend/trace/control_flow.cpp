// control_flow.cpp — higher-order control-flow operators in a trace: framejit.cond as a Cond node,
// framejit.while_loop and fori_loop as WhileLoop nodes, whose bodies are traced into graphs of
// their own (Note [Subgraphs] in jit/ir/graph.h).
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

std::string meta_text(const jit::TensorMeta& m) { return m.to_string(); }

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

}  // namespace

const char* body_ops_name() { return body_ops.empty() ? "framejit" : body_ops.back(); }

HigherOrderOp higher_order_op(PyObject* fn) {
  if (!fn) return HigherOrderOp::None;
  if (fn == framejit_cond()) return HigherOrderOp::Cond;
  static PyObject* while_loop = control_attr("while_loop");
  static PyObject* fori_loop = control_attr("fori_loop");
  if (fn == while_loop) return HigherOrderOp::WhileLoop;
  if (fn == fori_loop) return HigherOrderOp::ForiLoop;
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
                             const std::function<std::vector<VarPtr>(std::vector<VarPtr>)>& run) {
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

// Puts `body`'s placeholders first, in `order` (node indices; -1: a placeholder to make, of
// `metas[k]`), so that the body's k-th placeholder is the node's k-th operand.
static void order_placeholders(jit::Graph& body, const std::vector<int>& order, const std::vector<jit::TensorMeta>& metas,
                               const std::vector<std::string>& names) {
  std::vector<int> idx = order;
  for (size_t k = 0; k < idx.size(); ++k)
    if (idx[k] < 0) idx[k] = body.add_placeholder(names[k], metas[k]);
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
    BREAK_IF(at == n.size(), Raises{PyExc_TypeError}, std::string(fn) + "() got an unexpected keyword argument '" + k + "'");
    BREAK_IF(a[at] != nullptr, Raises{PyExc_TypeError}, std::string(fn) + "() got multiple values for argument '" + k + "'");
    a[at] = v;
  }
  for (size_t i = 0; i < n.size(); ++i)
    BREAK_IF(!a[i], Raises{PyExc_TypeError}, std::string(fn) + "() missing required argument: '" + n[i] + "'");
  return a;
}

VarPtr Tracer::call_cond(std::vector<VarPtr> args, KwArgs kwargs) {
  const std::vector<VarPtr> a =
      bind("cond", {"pred", "true_fn", "false_fn", "operands"}, std::move(args), std::move(kwargs));
  const VarPtr &pred = a[0], &on_true = a[1], &on_false = a[2];
  BREAK_IF(a[3]->kind != VarKind::Tuple && a[3]->kind != VarKind::List, Raises{PyExc_TypeError},
           std::string("framejit.cond: operands must be a tuple or list, got ") + var_kind_name(a[3]->kind));
  const std::vector<VarPtr> operands = as<SeqVar>(a[3])->items;

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
    bool same = x.kind == y.kind && x.dtype == y.dtype && x.rank() == y.rank();
    for (int d = 0; same && d < x.rank(); ++d) same = x.shape[d].same_as(y.shape[d]);
    BREAK_IF(!same, "framejit.cond: the branches' output " + std::to_string(j) + " differs: " + meta_text(x) +
                        " from true_fn, " + meta_text(y) + " from false_fn (each output needs one dtype and shape)");
  }

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
  std::vector<jit::TensorMeta> metas;
  std::vector<std::string> pnames;
  for (const VarPtr& v : passed) {
    metas.push_back(meta(v));
    pnames.push_back(node_of(v).name);
  }
  order_placeholders(*t.graph, t_order, metas, pnames);
  order_placeholders(*f.graph, f_order, metas, pnames);

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
    results.push_back(std::make_shared<TensorVar>(r));
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
  // Carried numbers made in the trace (a literal 0) become graph values: the loop changes them.
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
    carried.push_back(add_scalar(PyBool_Check(c) ? "operator.truth" : "operator.pos", {to_arg(v)}, c, std::nullopt, {}));
  }
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
  BREAK_IF(step.outputs.size() != carried.size(),
           std::string(op) + ": the body returns " + std::to_string(step.outputs.size()) + " values for " +
               std::to_string(carried.size()) + " carried");
  for (size_t j = 0; j < carried.size(); ++j) {
    const jit::TensorMeta &in = meta(carried[j]), &o = step.outputs[j];
    bool same = in.kind == o.kind && in.dtype == o.dtype && in.rank() == o.rank();
    for (int d = 0; same && d < in.rank(); ++d) same = in.shape[d].same_as(o.shape[d]);
    BREAK_IF(!same, std::string(op) + ": carried value " + std::to_string(j) + " enters as " + meta_text(in) +
                        " and leaves the body as " + meta_text(o) + " (a loop keeps each value's dtype and shape)");
  }
  // The node passes the carried values, then what either body lifted (carried through unchanged).
  // (A value both carried and read as a closure is both: the closure sees the loop's initial value.)
  std::vector<VarPtr> passed = carried;
  for (const VarPtr& v : test.lifted) passed.push_back(v);
  for (const VarPtr& v : step.lifted)
    if (std::find(passed.begin() + carried.size(), passed.end(), v) == passed.end()) passed.push_back(v);
  std::vector<jit::TensorMeta> metas;
  std::vector<std::string> pnames;
  for (const VarPtr& v : passed) {
    metas.push_back(meta(v));
    pnames.push_back(node_of(v).name);
  }
  auto order_of = [&](const BodyResult& b) {
    std::vector<int> order(b.operand_placeholders.begin(), b.operand_placeholders.end());
    for (size_t k = order.size(); k < passed.size(); ++k) {
      auto at = std::find(b.lifted.begin(), b.lifted.end(), passed[k]);
      order.push_back(at == b.lifted.end() ? -1 : b.lifted_placeholders[at - b.lifted.begin()]);
    }
    return order;
  };
  order_placeholders(*test.graph, order_of(test), metas, pnames);
  order_placeholders(*step.graph, order_of(step), metas, pnames);
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
    const int r = out_.graph.add_call(jit::OpKind::Extern, {}, "getitem",
                                      {jit::Arg::node(w), jit::Arg::integer(static_cast<int64_t>(j))}, {}, meta(carried[j]));
    if (meta(carried[j]).kind == jit::ValueKind::Tensor) {
      results.push_back(std::make_shared<TensorVar>(r));
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
  BREAK_IF(a[2]->kind != VarKind::Tuple && a[2]->kind != VarKind::List, Raises{PyExc_TypeError},
           std::string("framejit.while_loop: carried_inputs must be a tuple or list, got ") + var_kind_name(a[2]->kind));
  const std::vector<VarPtr> init = as<SeqVar>(a[2])->items;
  const VarPtr &cond_fn = a[0], &body_fn = a[1];
  return build_while(
      "framejit.while_loop", init, [&](std::vector<VarPtr> in) { return call(cond_fn, std::move(in), {}); },
      [&](std::vector<VarPtr> in) {
        VarPtr r = call(body_fn, std::move(in), {});
        BREAK_IF(r->kind != VarKind::Tuple && r->kind != VarKind::List, Raises{PyExc_TypeError},
                 std::string("framejit.while_loop: body_fn's result must be a tuple or list, got ") + var_kind_name(r->kind));
        return as<SeqVar>(r)->items;
      },
      VarKind::Tuple);  // while_loop returns a tuple, whatever carried_inputs was
}

VarPtr Tracer::call_fori_loop(std::vector<VarPtr> args, KwArgs kwargs) {
  const std::vector<VarPtr> a =
      bind("fori_loop", {"lower", "upper", "body_fn", "init_val"}, std::move(args), std::move(kwargs));
  const VarPtr &body_fn = a[2], &init_val = a[3];
  // Carried: the counter, then the value (its items, for a tuple or list); the bound rides along.
  const bool seq = init_val->kind == VarKind::Tuple || init_val->kind == VarKind::List;
  std::vector<VarPtr> init{a[0]};
  if (seq)
    for (const VarPtr& v : as<SeqVar>(init_val)->items) init.push_back(v);
  else
    init.push_back(init_val);
  for (const VarPtr& bound : {a[0], a[1]})
    BREAK_IF(bound->kind == VarKind::Tensor, "framejit.fori_loop: a bound is an array; loops are captured when their "
                                             "bounds are Python ints");
  const VarPtr upper = a[1];
  const VarKind value_kind = init_val->kind;
  VarPtr loop = build_while(
      "framejit.fori_loop", init,
      [&](std::vector<VarPtr> in) { return compare_op(*this, Py_LT, in[0], upper); },
      [&](std::vector<VarPtr> in) {
        VarPtr i = in[0];
        VarPtr val = seq ? std::make_shared<SeqVar>(value_kind, std::vector<VarPtr>(in.begin() + 1, in.end())) : in[1];
        VarPtr r = call(body_fn, {i, val}, {});
        std::vector<VarPtr> out{binary_op(*this, 0 /* NB_ADD */, i, wrap_const(OwnedRef::steal(PyLong_FromLong(1)).get()))};
        if (seq) {
          BREAK_IF(r->kind != VarKind::Tuple && r->kind != VarKind::List, Raises{PyExc_TypeError},
                   std::string("framejit.fori_loop: body_fn's result must be a tuple or list, got ") + var_kind_name(r->kind));
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

}  // namespace framejit::frontend
