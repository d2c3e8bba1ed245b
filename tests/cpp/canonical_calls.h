// canonical_calls.h — C++ tests build call nodes as the frontend does: the callable as traced,
// and the canonical op and attributes that frontend/ops decides for it.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "frontend/ops/numpy/canonical.h"
#include "jit/ir/graph.h"

namespace framejit::jit::test {

/// g.add_call with the op frontend/ops decodes from `target`, args and kwargs.
inline int add_call(Graph& g, const std::string& target, std::vector<Arg> args,
                    std::vector<std::pair<std::string, Arg>> kwargs, TensorMeta meta) {
  return frontend::ops::add_canonical_call(g, target, std::move(args), std::move(kwargs), std::move(meta));
}

/// A lone call node (no graph), for predicates that read one node.
inline Node call_node(std::string target, std::vector<std::pair<std::string, Arg>> kwargs = {}) {
  Node node;
  const Graph empty;
  frontend::ops::CanonicalOp c = frontend::ops::canonicalize(empty, target, {}, kwargs, TensorMeta{});
  node.op = c.op;
  node.attrs = std::move(c.attrs);
  node.target = std::move(target);
  node.kwargs = std::move(kwargs);
  return node;
}

/// Metadata of a tensor value (float32 unless said) and of a Python number.
inline TensorMeta tensor(std::vector<SymInt> shape, DType dtype = DType::Float32) {
  TensorMeta m;
  m.dtype = dtype;
  m.shape = std::move(shape);
  return m;
}
inline TensorMeta f32(std::vector<SymInt> shape) { return tensor(std::move(shape)); }
inline TensorMeta scalar(DType dtype) {
  TensorMeta m;
  m.kind = ValueKind::Scalar;
  m.dtype = dtype;
  return m;
}

/// A graph whose printer spells dtypes as NumPy does (what the frontend's graphs do).
inline Graph numpy_graph() {
  Graph g;
  g.dtype_module = "numpy";
  return g;
}

}  // namespace framejit::jit::test
