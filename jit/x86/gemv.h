// gemv.h — products with one row or one column, in one pass over the matrix (Note
// [Matrix-vector products] in gemv.cpp).
#pragma once

#include "jit/x86/gemm.h"

namespace framejit::jit::x86 {

/// Runs `args` when it is a product with one row or one column (m == 1 or n == 1, k > 0) of
/// float32 or float64 whose matrix has a unit stride on one axis, or one with at most two
/// vectors' worth of columns (Note [Narrow products]), epilogue included, and returns true; false
/// leaves it to the GEMM (nothing done).
bool gemv(const GemmArgs& args);

}  // namespace framejit::jit::x86
