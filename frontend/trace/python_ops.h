// python_ops.h — Python operators on traced values: arrays go to the op registry, constants are
// computed by CPython itself, size-derived integers stay symbolic.
#pragma once

#include "frontend/trace/tracer.h"

namespace framejit::frontend {

enum class UnaryOp : uint8_t { Positive, Negative, Invert, Not };

/// `nb_op` is BINARY_OP's argument (NB_ADD ... NB_INPLACE_XOR).
VarPtr binary_op(Tracer& tx, int nb_op, const VarPtr& lhs, const VarPtr& rhs);
/// `cmp` is COMPARE_OP's argument (Py_LT ... Py_GE).
VarPtr compare_op(Tracer& tx, int cmp, const VarPtr& lhs, const VarPtr& rhs);
VarPtr is_op(Tracer& tx, const VarPtr& lhs, const VarPtr& rhs, bool negate);
VarPtr contains_op(Tracer& tx, const VarPtr& item, const VarPtr& container, bool negate);
VarPtr unary_op(Tracer& tx, UnaryOp op, const VarPtr& v);
bool is_none(Tracer& tx, const VarPtr& v);

/// operator-module name of a BINARY_OP argument ("add", "iadd", "matmul" ...).
const char* nb_op_name(int nb_op);

}  // namespace framejit::frontend
