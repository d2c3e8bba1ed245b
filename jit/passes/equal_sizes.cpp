// equal_sizes.cpp — pass: every node's shape spelled with the sizes the trace proved equal.
#include "jit/passes/passes.h"

namespace framejit::jit {

// Note [Equal sizes]
// A size reaches a graph from several sources: x's last dim is the symbol s2, a weight's is the
// constant 256. When the trace adds them it decides s2 == 256 from the hints and guards it, but
// the result's shape still says whichever operand came first, so `x + proj(y)` and `proj(y)` got
// shapes [s0, s1, s2] and [s0, s1, 256]: fusion, which groups nodes of the same shape, put a GEMM's
// bias add and the residual add after it in separate kernels (the GPT block sample ran an extra
// pass over its output). Dynamo's shape environment has the same facts as replacements; here the
// frontend records each decided equality of a bare symbol (OutputGraph::decide, specialize,
// sizes_equal) in Graph::size_facts — towards constants and older symbols, so the facts form no
// cycle — and this pass rewrites every shape through them, placeholders included. Sound because the
// guard that decided each fact runs before the graph does; the symbols stay bound from their
// sources, so anything still spelled with one evaluates the same.
namespace {

// Every shape of `graph` and of its bodies (Note [Subgraphs]: they use the enclosing graph's
// symbols, so its facts).
int rewrite_sizes(Graph& graph, const std::vector<std::optional<SymInt>>& facts) {
  int changed = 0;
  for (Node& n : graph.nodes()) {
    bool any = false;
    for (SymInt& d : n.meta.shape) {
      if (d.is_const()) continue;
      SymInt r = d.substitute(facts);
      if (!r.same_as(d)) {
        d = std::move(r);
        any = true;
      }
    }
    changed += any;
    for (const std::shared_ptr<Graph>& body : n.subgraphs) changed += rewrite_sizes(*body, facts);
  }
  return changed;
}

}  // namespace

int equal_sizes(Graph& graph) {
  auto& facts = graph.size_facts;
  if (facts.empty()) return 0;
  // Resolve chains (s3 -> s1 -> 8) once, in id order: a fact points at a smaller id or a constant.
  for (auto& f : facts)
    if (f) f = f->substitute(facts);
  return rewrite_sizes(graph, facts);
}

}  // namespace framejit::jit
