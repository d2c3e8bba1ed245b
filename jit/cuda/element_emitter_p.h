// element_emitter_p.h — ElementEmitter: PTX for one element of a loop-IR body (Note [PTX values])
// and for loading and storing elements, shared by the CUDA kernel generators.
#pragma once

#include <string>
#include <vector>

#include "jit/cuda/ptx_ops.h"
#include "jit/lower/loop_ir.h"

namespace framejit::jit::cuda {

// Note [PTX values]
// Every value lives in a bit-size register: float32, int32, uint8 and bool in 32 bits, float64
// and int64 in 64. Narrow values are kept canonical — uint8 zero-extended (0..255), bool 0 or 1 —
// so comparisons and conversions read them as they are, and uint8 arithmetic masks its result
// back to 8 bits (NumPy's wrap-around).
inline bool wide(rt::DType t) { return t == rt::DType::Int64 || t == rt::DType::Float64; }
inline int reg_bits(rt::DType t) { return wide(t) ? 64 : 32; }
inline bool is_fp(rt::DType t) { return t == rt::DType::Float32 || t == rt::DType::Float64; }
inline const char* btype(rt::DType t) { return wide(t) ? "b64" : "b32"; }
inline const char* ftype(rt::DType t) { return t == rt::DType::Float64 ? "f64" : "f32"; }
/// The integer type an integer value's compares, divisions and conversions use.
inline const char* itype(rt::DType t) {
  return t == rt::DType::Int64 ? "s64" : t == rt::DType::Int32 ? "s32" : "u32";  // uint8, bool: u32
}

/// Writes the instructions of kernel bodies into one PtxWriter. A generator hoists each body's
/// constants and parameters once per thread, then emits the body wherever it needs an element.
class ElementEmitter {
public:
  explicit ElementEmitter(PtxWriter& w) : w_(w) {}

  std::string reg(rt::DType t) { return w_.reg(reg_bits(t)); }
  PtxWriter& w() { return w_; }

  /// Registers for `ir`'s constants and parameters (a parameter is 8 bytes at `params_at` +
  /// 8 * index of the kernel's parameter struct `args`), indexed like the body; others empty.
  std::vector<std::string> hoist(const PointwiseKernelIR& ir, const std::string& args, int params_at);
  /// `ir`'s body over `inputs` (a register per kernel input); a register per body value.
  std::vector<std::string> body(const PointwiseKernelIR& ir, const std::vector<std::string>& hoisted,
                                const std::vector<std::string>& inputs);

  std::string constant(rt::DType t, double value);
  /// A parameter (float64 or int64 bits in `raw`) as a value of t.
  std::string param(rt::DType t, const std::string& raw, bool is_int);
  /// Note [Casts] in jit/lower/loop_ir.h, as the x86 backend does it.
  std::string cast(rt::DType from, rt::DType to, const std::string& a);
  /// Casts from and to float16 / bfloat16 (Note [Half types] in jit/lower/loop_ir.h).
  std::string half_cast(rt::DType from, rt::DType to, const std::string& a);
  std::string compare(ScalarOp op, rt::DType t, const std::string& a, const std::string& b);
  /// x's float / integer operation on its operands' registers in v.
  std::string float_op(const ScalarExpr& x, const std::vector<std::string>& v);
  std::string int_op(const ScalarExpr& x, const std::vector<std::string>& v);

  /// One element of t at `addr` (a 64-bit address register), canonical (bool 0 or 1).
  std::string load(rt::DType t, const std::string& addr);
  void store(rt::DType t, const std::string& addr, const std::string& v);
  /// Four consecutive elements at `addr` (aligned to 4 elements).
  std::vector<std::string> load4(rt::DType t, const std::string& addr);
  void store4(rt::DType t, const std::string& addr, const std::vector<std::string>& v);

  /// Set when a body asked for something the generator cannot emit.
  const std::string& failed() const { return failed_; }

private:
  std::string floor_div_mod(bool want_div, rt::DType t, const std::string& a, const std::string& b);

  PtxWriter& w_;
  std::string failed_;
};

}  // namespace framejit::jit::cuda
