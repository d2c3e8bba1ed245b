// control_flow.cpp — higher-order control-flow operators in a trace: framejit.cond as a Cond node
// whose branches are traced into graphs of their own (Note [Subgraphs] in jit/ir/graph.h).
#include <algorithm>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "frontend/trace/graph_break.h"
#include "frontend/trace/tracer.h"

namespace framejit::frontend {

// Note [Tracing bodies]
// A branch of framejit.cond is traced like any inlined call, except that the nodes it makes go to
// a graph of its own: OutputGraph::graph becomes a fresh body graph while the frame's (and any
// enclosing body's) waits in OutputGraph::enclosing, and current_graph_scope numbers the depth,
// which every Var records when made. Graph values of the branch's operands enter as the body's
// placeholders. A value of an enclosing scope that the branch reads anyway (a closure over an
// array, a global, a size) is lifted: Tracer::to_arg makes a placeholder for it in the body the
// first time and the Cond node passes the outer value in (after the operands, in the order the
// branches first read them). Graph inputs read for the first time inside a branch still become
// inputs of the frame's graph, and symbols stay the frame's: a body's shapes use them
// (Graph::enclosed). What would outlive the branch is refused with a graph break naming it:
// writes into arrays made outside it, attribute, global and closure stores, changes to lists made
// outside it, random draws (Tracer::refuse_in_body); the statement then runs in CPython, where
// framejit.cond is the plain Python it stands for. Guards the branches add join the frame's: the
// compiled code is valid for exactly the inputs both branches were traced for.

namespace {

// The framejit.cond function object (borrowed; the module keeps it), or null.
PyObject* framejit_cond() {
  static PyObject* fn = [] {
    PyObject* mod = PyImport_ImportModule("framejit._control");  // new ref
    PyObject* f = mod ? PyObject_GetAttrString(mod, "cond") : nullptr;
    Py_XDECREF(mod);
    Py_XDECREF(f);  // the module holds it for the process's life
    if (!f) PyErr_Clear();
    return f;
  }();
  return fn;
}

std::string meta_text(const jit::TensorMeta& m) { return m.to_string(); }

// The branch's result, flattened: one array, or a tuple or list of arrays.
struct BodyResult {
  std::shared_ptr<jit::Graph> graph;
  std::vector<VarPtr> lifted;  // outer values, in the order the body first read them
  std::vector<int> lifted_placeholders;
  std::vector<int> operand_placeholders;  // per operand: its placeholder, or -1 (a constant)
  VarKind shape = VarKind::Tensor;        // Tensor (one array), Tuple or List
  std::vector<jit::TensorMeta> outputs;
};

}  // namespace

bool is_framejit_cond(PyObject* fn) { return fn && fn == framejit_cond(); }

void Tracer::refuse_in_body(const std::string& what) {
  if (!in_body()) return;
  graph_break(BreakKind::SideEffect,
              "framejit.cond: a branch may not have side effects, and this one does: " + what +
                  " (the call runs in CPython)");
}

// Traces `fn(*operands)` into a body graph (Note [Tracing bodies]).
static BodyResult trace_body(Tracer& tx, const VarPtr& fn, const std::vector<VarPtr>& operands, const char* which) {
  OutputGraph& out = tx.out();
  std::vector<std::vector<Tracer::Lifted>>& lifted_stack = tx.lifted_stack();
  // Enter: the body's graph replaces the current one; everything is put back however this ends.
  struct Scope {
    Tracer& tx;
    OutputGraph& out;
    std::vector<std::vector<Tracer::Lifted>>& lifted;
    Scope(Tracer& t, OutputGraph& o, std::vector<std::vector<Tracer::Lifted>>& l, const jit::Graph& around)
        : tx(t), out(o), lifted(l) {
      jit::Graph body;
      body.dtype_module = around.dtype_module;
      body.enclosed = true;
      out.enclosing.push_back(std::move(out.graph));
      out.graph = std::move(body);
      lifted.emplace_back();
      current_graph_scope = out.scope();
    }
    ~Scope() {
      out.graph = std::move(out.enclosing.back());
      out.enclosing.pop_back();
      lifted.pop_back();
      current_graph_scope = out.scope();
      tx.forget_deeper_scopes();
    }
  };
  Scope scope(tx, out, lifted_stack, out.graph);
  BodyResult r;
  std::vector<VarPtr> args;
  for (const VarPtr& op : operands) {
    if (op->kind == VarKind::Tensor || op->kind == VarKind::Scalar) {
      const jit::Node& outer = tx.node_of(op);
      int p = out.graph.add_placeholder(outer.name, outer.meta);
      r.operand_placeholders.push_back(p);
      if (op->kind == VarKind::Tensor) {
        args.push_back(std::make_shared<TensorVar>(p));
      } else {
        // Python logic in the branch on this number specializes what the operand came from.
        auto outer = std::static_pointer_cast<ScalarVar>(op);
        auto s = std::make_shared<ScalarVar>(p, outer->hint);
        s->sym = outer->sym;
        s->deps = outer->deps;
        if (outer->source) s->deps.push_back(outer);
        args.push_back(std::move(s));
      }
    } else {
      r.operand_placeholders.push_back(-1);  // a trace-time constant: the branch sees it as is
      args.push_back(op);
    }
  }
  VarPtr ret = tx.call(fn, std::move(args), {});
  std::vector<VarPtr> items;
  if (ret->kind == VarKind::Tensor) {
    items = {ret};
  } else if (ret->kind == VarKind::Tuple || ret->kind == VarKind::List) {
    r.shape = ret->kind;
    items = as<SeqVar>(ret)->items;
  }
  BREAK_IF(items.empty() && ret->kind != VarKind::Tuple && ret->kind != VarKind::List,
           std::string("framejit.cond: ") + which + " returns " + var_kind_name(ret->kind) +
               "; a branch is captured when it returns arrays (one, or a tuple or list of them)");
  std::vector<jit::Arg> outs;
  for (const VarPtr& v : items) {
    BREAK_IF(v->kind != VarKind::Tensor, std::string("framejit.cond: ") + which + " returns " + var_kind_name(v->kind) +
                                             " among its values; a branch is captured when it returns arrays");
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

VarPtr Tracer::call_cond(std::vector<VarPtr> args, KwArgs kwargs) {
  // framejit.cond(pred, true_fn, false_fn, operands), bound as Python would.
  static const char* names[] = {"pred", "true_fn", "false_fn", "operands"};
  VarPtr a[4];
  BREAK_IF(args.size() > 4, Raises{PyExc_TypeError},
           "cond() takes 4 positional arguments but " + std::to_string(args.size()) + " were given");
  for (size_t i = 0; i < args.size(); ++i) a[i] = args[i];
  for (auto& [k, v] : kwargs) {
    int at = -1;
    for (int i = 0; i < 4; ++i)
      if (k == names[i]) at = i;
    BREAK_IF(at < 0, Raises{PyExc_TypeError}, "cond() got an unexpected keyword argument '" + k + "'");
    BREAK_IF(a[at] != nullptr, Raises{PyExc_TypeError}, "cond() got multiple values for argument '" + k + "'");
    a[at] = v;
  }
  for (int i = 0; i < 4; ++i)
    BREAK_IF(!a[i], Raises{PyExc_TypeError}, std::string("cond() missing required argument: '") + names[i] + "'");
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

  BodyResult t = trace_body(*this, on_true, operands, "true_fn");
  BodyResult f = trace_body(*this, on_false, operands, "false_fn");
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
  std::vector<VarPtr> passed;
  for (size_t i = 0; i < operands.size(); ++i)
    if (t.operand_placeholders[i] >= 0) passed.push_back(operands[i]);
  for (const VarPtr& v : t.lifted) passed.push_back(v);
  for (const VarPtr& v : f.lifted)
    if (std::find(passed.begin(), passed.end(), v) == passed.end()) passed.push_back(v);
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

}  // namespace framejit::frontend
