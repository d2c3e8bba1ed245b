// canonical.h — one traced call → its canonical op (jit::OpKind + jit::OpAttrs), decided once,
// by the library's own rules, from the call as the frontend recorded it.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "jit/ir/graph.h"

namespace framejit::frontend::ops {

struct CanonicalOp {
  jit::OpKind op = jit::OpKind::Extern;
  jit::OpAttrs attrs;
};

/// `target` is the callable as the frontend names it ("numpy.add", "method.sum", "operator.pow",
/// "builtins.abs", "getitem", "sym_size"); `args`/`kwargs` are the call as recorded (operands are
/// node refs into `graph`); `result` is the value's meta, whose dtype the library already decided.
/// Attributes that do not decode into a typed form leave `attrs.described` false; a callable
/// with no canonical op is Extern. Needs no Python, so C++ tests build graphs through it too.
CanonicalOp canonicalize(const jit::Graph& graph, const std::string& target, const std::vector<jit::Arg>& args,
                         const std::vector<std::pair<std::string, jit::Arg>>& kwargs, const jit::TensorMeta& result);

/// Graph::add_call with the op decided by canonicalize().
int add_canonical_call(jit::Graph& graph, const std::string& target, std::vector<jit::Arg> args,
                       std::vector<std::pair<std::string, jit::Arg>> kwargs, jit::TensorMeta result);

}  // namespace framejit::frontend::ops
