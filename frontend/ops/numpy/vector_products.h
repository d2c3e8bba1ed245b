// vector_products.h — the dot product of two vectors as multiply + sum, for the jit backend.
#pragma once

#include <optional>

#include "jit/ir/graph.h"

namespace framejit::frontend::ops {

/// A copy of `graph` in which every float dot product of two vectors (a @ b, numpy.dot, a.dot) is
/// an elementwise product and a sum (Note [Vector products]), and on a device every
/// matrix-vector product too; nullopt when there is none.
std::optional<jit::Graph> vector_products_as_reductions(const jit::Graph& graph, bool on_device);

}  // namespace framejit::frontend::ops
