// passes.h — graph-to-graph passes run before lowering. Each returns how many nodes it changed.
#pragma once

#include "jit/ir/graph.h"

namespace framejit::jit {

/// Rewrites every node's shape with the sizes the frontend proved equal (Graph::size_facts): a
/// symbol proved equal to a constant or to an older symbol is spelled as that, so shapes the trace
/// built from different sources (x's s2 and a weight's 256) compare equal for fusion, and a size
/// read of such a dim folds. Defined in equal_sizes.cpp.
int equal_sizes(Graph& graph);

/// True for calls that change state other than their result: OpKind::Mutate (in-place operators,
/// setitem, copyto, in-place methods, draws that advance a generator's state) and any call with a
/// non-None `out=`. Passes neither remove nor merge them. Defined in dce.cpp.
bool has_side_effects(const Node& node);

/// True for calls that can raise depending on values only known when the graph runs: an integer
/// array raised to an array power (NumPy raises for negative exponents), max/min/argmax/argmin of
/// an array with symbolic sizes (empty after, say, x[1:-1]) and reshapes of one with a -1. DCE
/// keeps them even when nothing uses their value, so the compiled function raises where CPython
/// raises. Defined in dce.cpp.
bool may_raise_on_values(const Graph& graph, const Node& node);

/// Removes call nodes whose values nothing uses, except has_side_effects / may_raise_on_values
/// ones. Placeholders and the output always stay.
int dead_code_elimination(Graph& graph);

/// Merges call nodes with the same op, attrs, args and kwargs into the first of them. Ops that
/// produce fresh uninitialized memory (fresh_memory(): empty, empty_like) never merge, and two
/// nodes that are both returned never merge (the caller must get two distinct arrays, as in NumPy).
int common_subexpression_elimination(Graph& graph);

/// Folds scalar arithmetic on constants (ScalarAdd/Sub/Mul/FloorDiv/Mod/TrueDiv/Neg on Int and
/// Float constants, with Python semantics) and SymSize of a dim whose size is static, replacing
/// every use by the constant.
int constant_fold(Graph& graph);

}  // namespace framejit::jit
