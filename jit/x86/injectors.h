// injectors.h — vectorized math emitters ("injectors") that kernels call to compute exp, log,
// tanh ... on a register of float32 or float64 lanes, at any ISA level.
#pragma once

#include <asmjit/x86.h>

#include <memory>

#include "jit/x86/isa.h"
#include "runtime/dtype.h"

namespace framejit::jit::x86 {

namespace injectors {
struct RegPool;
}

enum class MathFn : uint8_t {
  Exp,
  Log,
  Log1p,
  Expm1,
  Tanh,
  Sigmoid,  // 1 / (1 + exp(-x))
  Erf,
  Sin,
  Cos,
  Tan,
  Atan,
  Atan2,  // two operands: atan2(a, b)
  Sqrt,
  Pow,    // two operands: pow(a, b) with NumPy's semantics for special values
};
constexpr int kNumMathFns = 14;
const char* math_fn_name(MathFn fn);
bool math_fn_is_binary(MathFn fn);
/// Whether MathInjector implements `fn` for `dtype` (every MathFn, for Float32 and Float64).
inline bool math_injector_supports(MathFn, rt::DType dtype) {
  return dtype == rt::DType::Float32 || dtype == rt::DType::Float64;
}

/// Emits math functions into a kernel being built with an asmjit x86::Compiler.
///
/// Registers are virtual: the Compiler allocates them. For Isa::Scalar the operands are xmm
/// registers whose lane 0 holds the value (ss/sd instructions); for Avx2 ymm; for Avx512 zmm.
/// Constants live in the function's local constant pool (cc.newConst). Accuracy: at most 4 ulp
/// from the correctly rounded result over the whole float32 range and the common float64 range;
/// NaN, ±Inf and -0.0 behave as NumPy's implementation does.
class MathInjector {
public:
  MathInjector(asmjit::x86::Compiler& cc, Isa isa, rt::DType dtype);  // dtype: Float32 or Float64
  ~MathInjector();
  MathInjector(MathInjector&&) noexcept;

  /// dst = fn(a) or fn(a, b). dst may alias a or b.
  void emit(MathFn fn, const asmjit::x86::Vec& dst, const asmjit::x86::Vec& a,
            const asmjit::x86::Vec& b = asmjit::x86::Vec());

  /// A new virtual vector register of this injector's width.
  asmjit::x86::Vec new_vec(const char* name = nullptr);

private:
  asmjit::x86::Compiler& cc_;
  Isa isa_;
  rt::DType dtype_;
  std::unique_ptr<injectors::RegPool> pool_;  // temporaries shared by successive calls
};

}  // namespace framejit::jit::x86
