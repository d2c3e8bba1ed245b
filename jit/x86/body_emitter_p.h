// body_emitter_p.h — emitting loop-IR element operations with asmjit, shared by the pointwise and
// reduction generators: one class that knows every operation at vector and scalar width.
#pragma once

#include <asmjit/x86.h>

#include <cstddef>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "jit/lower/loop_ir.h"
#include "jit/x86/injectors.h"
#include "jit/x86/isa.h"
#include "jit/x86/pointwise_codegen.h"
#include "runtime/executor.h"
#include "runtime/kernel_cache.h"
#include "runtime/log.h"

namespace framejit::jit::x86 {
namespace detail {

using namespace asmjit;
namespace ax = asmjit::x86;  // NB: our namespace is also called x86
using rt::DType;

inline JitRuntime& jit_runtime() {
  static JitRuntime* rt = new JitRuntime();  // NB: immortal: kernels may outlive static destructors
  return *rt;
}

inline bool is_math(ScalarOp op) {
  switch (op) {
    case ScalarOp::Exp:
    case ScalarOp::Log:
    case ScalarOp::Log1p:
    case ScalarOp::Expm1:
    case ScalarOp::Tanh:
    case ScalarOp::Sigmoid:
    case ScalarOp::Sin:
    case ScalarOp::Cos:
    case ScalarOp::Tan:
    case ScalarOp::Atan:
    case ScalarOp::Pow:
    case ScalarOp::Atan2: return true;
    default: return false;
  }
}

inline MathFn math_fn_of(ScalarOp op) {
  switch (op) {
    case ScalarOp::Exp: return MathFn::Exp;
    case ScalarOp::Log: return MathFn::Log;
    case ScalarOp::Log1p: return MathFn::Log1p;
    case ScalarOp::Expm1: return MathFn::Expm1;
    case ScalarOp::Tanh: return MathFn::Tanh;
    case ScalarOp::Sigmoid: return MathFn::Sigmoid;
    case ScalarOp::Sin: return MathFn::Sin;
    case ScalarOp::Cos: return MathFn::Cos;
    case ScalarOp::Tan: return MathFn::Tan;
    case ScalarOp::Atan: return MathFn::Atan;
    case ScalarOp::Pow: return MathFn::Pow;
    default: return MathFn::Atan2;
  }
}

// Emits element operations at one width: the ISA's vector, or one element in an xmm register.
class BodyEmitter {
public:
  BodyEmitter(ax::Compiler& cc, Isa isa, bool vector, DType dtype)
      : cc_(cc), isa_(isa), vector_(vector), vex_(isa != Isa::Scalar), f32_(dtype == DType::Float32),
        math_(cc, isa, dtype) {}

  // With AVX every operation is packed on the full register, also when only lane 0 matters (the
  // tail and strided loops load and store one element): every element then goes through exactly
  // the same instructions, wherever it sits in the array, and no legacy SSE encoding mixes in.
  ax::Vec newv() { return vex_ && isa_ == Isa::Avx2 ? ax::Vec(cc_.newYmm()) : ax::Vec(cc_.newXmm()); }

  // dst = a op b for the arithmetic instructions.
  void arith(ScalarOp op, const ax::Vec& dst, const ax::Vec& a, const ax::Vec& b) {
    InstId id = 0;
    switch (op) {
      case ScalarOp::Add: id = pick(ax::Inst::kIdVaddps, ax::Inst::kIdVaddpd, ax::Inst::kIdVaddss, ax::Inst::kIdVaddsd,
                                    ax::Inst::kIdAddss, ax::Inst::kIdAddsd); break;
      case ScalarOp::Sub: id = pick(ax::Inst::kIdVsubps, ax::Inst::kIdVsubpd, ax::Inst::kIdVsubss, ax::Inst::kIdVsubsd,
                                    ax::Inst::kIdSubss, ax::Inst::kIdSubsd); break;
      case ScalarOp::Mul: id = pick(ax::Inst::kIdVmulps, ax::Inst::kIdVmulpd, ax::Inst::kIdVmulss, ax::Inst::kIdVmulsd,
                                    ax::Inst::kIdMulss, ax::Inst::kIdMulsd); break;
      case ScalarOp::Div: id = pick(ax::Inst::kIdVdivps, ax::Inst::kIdVdivpd, ax::Inst::kIdVdivss, ax::Inst::kIdVdivsd,
                                    ax::Inst::kIdDivss, ax::Inst::kIdDivsd); break;
      default: break;
    }
    three(id, dst, a, b);
  }

  // Bitwise ops (and/andn/or/xor) on whole registers.
  void bits(InstId vex_ps, InstId vex_pd, InstId sse_ps, InstId sse_pd, const ax::Vec& dst, const ax::Vec& a,
            const ax::Vec& b) {
    InstId id = vex_ ? (f32_ ? vex_ps : vex_pd) : (f32_ ? sse_ps : sse_pd);
    three(id, dst, a, b);
  }

  ax::Vec constant(double v) {
    ax::Vec r = newv();
    if (f32_) {
      float f = static_cast<float>(v);
      ax::Mem m = cc_.newConst(ConstPoolScope::kLocal, &f, 4);
      if (vex_) cc_.vbroadcastss(r, m);
      else if (vex_) cc_.vmovss(r.as<ax::Xmm>(), m);
      else cc_.movss(r.as<ax::Xmm>(), m);
    } else {
      ax::Mem m = cc_.newConst(ConstPoolScope::kLocal, &v, 8);
      if (vex_) cc_.vbroadcastsd(r.as<ax::Ymm>(), m);
      else if (vex_) cc_.vmovsd(r.as<ax::Xmm>(), m);
      else cc_.movsd(r.as<ax::Xmm>(), m);
    }
    return r;
  }

  // A mask constant (sign bit / everything but the sign bit) as a full register.
  ax::Vec mask_constant(bool sign_only) {
    ax::Vec r = newv();
    if (f32_) {
      uint32_t bitsv = sign_only ? 0x80000000u : 0x7fffffffu;
      ax::Mem m = cc_.newConst(ConstPoolScope::kLocal, &bitsv, 4);
      if (vex_) cc_.vbroadcastss(r, m);
      else if (vex_) cc_.vmovss(r.as<ax::Xmm>(), m);
      else cc_.movss(r.as<ax::Xmm>(), m);
    } else {
      uint64_t bitsv = sign_only ? 0x8000000000000000ull : 0x7fffffffffffffffull;
      ax::Mem m = cc_.newConst(ConstPoolScope::kLocal, &bitsv, 8);
      if (vex_) cc_.vbroadcastsd(r.as<ax::Ymm>(), m);
      else if (vex_) cc_.vmovsd(r.as<ax::Xmm>(), m);
      else cc_.movsd(r.as<ax::Xmm>(), m);
    }
    return r;
  }

  // NumPy's maximum/minimum: (a >= b || isnan(a)) ? a : b (and <= for minimum), so NaN in either
  // operand propagates and maximum(0.0, -0.0) is the first operand.
  void max_min(bool is_max, const ax::Vec& dst, const ax::Vec& a, const ax::Vec& b) {
    ax::Vec keep_a = newv(), nan_a = newv();
    // keep_a = (b <= a) for max, (a <= b) for min; predicate 2 = LE (ordered); 3 = UNORD.
    cmp(keep_a, is_max ? b : a, is_max ? a : b, 2);
    cmp(nan_a, a, a, 3);
    bits(ax::Inst::kIdVorps, ax::Inst::kIdVorpd, ax::Inst::kIdOrps, ax::Inst::kIdOrpd, keep_a, keep_a, nan_a);
    select(dst, keep_a, a, b);
  }

  void unary(ScalarOp op, const ax::Vec& dst, const ax::Vec& a) {
    switch (op) {
      case ScalarOp::Neg: bits(ax::Inst::kIdVxorps, ax::Inst::kIdVxorpd, ax::Inst::kIdXorps, ax::Inst::kIdXorpd,
                               dst, a, mask_constant(true)); return;
      case ScalarOp::Abs: bits(ax::Inst::kIdVandps, ax::Inst::kIdVandpd, ax::Inst::kIdAndps, ax::Inst::kIdAndpd,
                               dst, a, mask_constant(false)); return;
      case ScalarOp::Square: arith(ScalarOp::Mul, dst, a, a); return;
      case ScalarOp::Reciprocal: arith(ScalarOp::Div, dst, constant(1.0), a); return;
      case ScalarOp::Sqrt:
        if (vex_) cc_.emit(f32_ ? ax::Inst::kIdVsqrtps : ax::Inst::kIdVsqrtpd, dst, a);
        else cc_.emit(f32_ ? ax::Inst::kIdSqrtss : ax::Inst::kIdSqrtsd, dst, a);
        return;
      case ScalarOp::Floor:
      case ScalarOp::Ceil: {
        int imm = (op == ScalarOp::Floor ? 1 : 2) | 8;  // round down/up, suppress precision exception
        if (vex_) cc_.emit(f32_ ? ax::Inst::kIdVroundps : ax::Inst::kIdVroundpd, dst, a, imm);
        else cc_.emit(f32_ ? ax::Inst::kIdRoundss : ax::Inst::kIdRoundsd, dst, a, imm);
        return;
      }
      default: math_.emit(math_fn_of(op), dst, a); return;
    }
  }

  void binary_math(ScalarOp op, const ax::Vec& dst, const ax::Vec& a, const ax::Vec& b) {
    math_.emit(math_fn_of(op), dst, a, b);
  }

  void load(const ax::Vec& dst, const ax::Gp& ptr) {
    if (vector_) cc_.vmovups(dst, vector_mem(ptr));
    else if (f32_) vex_ ? cc_.vmovss(dst.as<ax::Xmm>(), ax::dword_ptr(ptr)) : cc_.movss(dst.as<ax::Xmm>(), ax::dword_ptr(ptr));
    else vex_ ? cc_.vmovsd(dst.as<ax::Xmm>(), ax::qword_ptr(ptr)) : cc_.movsd(dst.as<ax::Xmm>(), ax::qword_ptr(ptr));
  }

  // dst = src (whole register).
  void move(const ax::Vec& dst, const ax::Vec& src) {
    if (vex_) cc_.vmovaps(dst, src);
    else cc_.movaps(dst.as<ax::Xmm>(), src.as<ax::Xmm>());
  }

  // One element from memory (scalar width).
  void load_mem(const ax::Vec& dst, const ax::Mem& m) {
    if (f32_) vex_ ? cc_.vmovss(dst.as<ax::Xmm>(), m) : cc_.movss(dst.as<ax::Xmm>(), m);
    else vex_ ? cc_.vmovsd(dst.as<ax::Xmm>(), m) : cc_.movsd(dst.as<ax::Xmm>(), m);
  }

  // An int64 register converted to the kernel type (scalar width).
  ax::Vec int_to_value(const ax::Gp& g) {
    ax::Xmm s = cc_.newXmm();
    if (vex_) {
      cc_.vxorps(s, s, s);
      f32_ ? cc_.vcvtsi2ss(s, s, g) : cc_.vcvtsi2sd(s, s, g);
      ax::Vec r = newv();
      f32_ ? cc_.vbroadcastss(r, s) : cc_.vbroadcastsd(r.as<ax::Ymm>(), s);
      return r;
    }
    cc_.xorps(s, s);
    f32_ ? cc_.cvtsi2ss(s, g) : cc_.cvtsi2sd(s, g);
    return s;
  }

  void store(const ax::Gp& ptr, const ax::Vec& src) {
    if (vector_) cc_.vmovups(vector_mem(ptr), src);
    else if (f32_) vex_ ? cc_.vmovss(ax::dword_ptr(ptr), src.as<ax::Xmm>()) : cc_.movss(ax::dword_ptr(ptr), src.as<ax::Xmm>());
    else vex_ ? cc_.vmovsd(ax::qword_ptr(ptr), src.as<ax::Xmm>()) : cc_.movsd(ax::qword_ptr(ptr), src.as<ax::Xmm>());
  }

  // A parameter (double or int64 at `mem`) converted to the kernel type, broadcast when vector.
  ax::Vec param(const ax::Mem& mem, bool is_int) {
    ax::Xmm s = cc_.newXmm();
    if (is_int) {
      ax::Gp g = cc_.newInt64();
      cc_.mov(g, mem);
      if (vex_) {
        cc_.vxorps(s, s, s);
        f32_ ? cc_.vcvtsi2ss(s, s, g) : cc_.vcvtsi2sd(s, s, g);
      } else {
        cc_.xorps(s, s);
        f32_ ? cc_.cvtsi2ss(s, g) : cc_.cvtsi2sd(s, g);
      }
    } else {
      vex_ ? cc_.vmovsd(s, mem) : cc_.movsd(s, mem);
      if (f32_) vex_ ? cc_.vcvtsd2ss(s, s, s) : cc_.cvtsd2ss(s, s);
    }
    if (!vex_) return s;
    ax::Vec r = newv();
    f32_ ? cc_.vbroadcastss(r, s) : cc_.vbroadcastsd(r.as<ax::Ymm>(), s);
    return r;
  }

private:
  InstId pick(InstId vps, InstId vpd, InstId vss, InstId vsd, InstId ss, InstId sd) const {
    (void)vss;
    (void)vsd;
    if (vex_) return f32_ ? vps : vpd;
    return f32_ ? ss : sd;
  }

  // dst = a op b, using the destructive two-operand SSE form when there is no VEX.
  void three(InstId id, const ax::Vec& dst, const ax::Vec& a, const ax::Vec& b) {
    if (vex_) {
      cc_.emit(id, dst, a, b);
    } else {
      cc_.movaps(dst.as<ax::Xmm>(), a.as<ax::Xmm>());
      cc_.emit(id, dst, b);
    }
  }

  void cmp(const ax::Vec& dst, const ax::Vec& a, const ax::Vec& b, int predicate) {
    if (vex_) cc_.emit(f32_ ? ax::Inst::kIdVcmpps : ax::Inst::kIdVcmppd, dst, a, b, predicate);
    else {
      cc_.movaps(dst.as<ax::Xmm>(), a.as<ax::Xmm>());
      cc_.emit(f32_ ? ax::Inst::kIdCmpss : ax::Inst::kIdCmpsd, dst, b, predicate);
    }
  }

  // dst = mask ? a : b (mask lanes all ones or all zeros).
  void select(const ax::Vec& dst, const ax::Vec& mask, const ax::Vec& a, const ax::Vec& b) {
    if (vex_) {
      cc_.emit(f32_ ? ax::Inst::kIdVblendvps : ax::Inst::kIdVblendvpd, dst, b, a, mask);
    } else {
      ax::Vec t = newv();
      bits(ax::Inst::kIdVandps, ax::Inst::kIdVandpd, ax::Inst::kIdAndps, ax::Inst::kIdAndpd, t, mask, a);
      bits(ax::Inst::kIdVandnps, ax::Inst::kIdVandnpd, ax::Inst::kIdAndnps, ax::Inst::kIdAndnpd, dst, mask, b);
      bits(ax::Inst::kIdVorps, ax::Inst::kIdVorpd, ax::Inst::kIdOrps, ax::Inst::kIdOrpd, dst, dst, t);
    }
  }

  ax::Mem vector_mem(const ax::Gp& ptr) const { return isa_ == Isa::Avx2 ? ax::ymmword_ptr(ptr) : ax::xmmword_ptr(ptr); }

  ax::Compiler& cc_;
  Isa isa_;
  bool vector_;
  bool vex_;
  bool f32_;
  MathInjector math_;
};

// Emits the body at one width. `inputs[k]` holds the loaded input k; consts/params are hoisted.
inline std::vector<ax::Vec> emit_body(BodyEmitter& e, const PointwiseKernelIR& ir, const std::vector<ax::Vec>& inputs,
                                const std::vector<ax::Vec>& hoisted) {
  std::vector<ax::Vec> v(ir.body.size());
  for (size_t i = 0; i < ir.body.size(); ++i) {
    const ScalarExpr& x = ir.body[i];
    switch (x.op) {
      case ScalarOp::Load: v[i] = inputs[x.input]; break;
      case ScalarOp::Param:
      case ScalarOp::Const: v[i] = hoisted[i]; break;
      case ScalarOp::Cast: v[i] = v[x.a]; break;  // same-type casts only (pointwise_supported)
      case ScalarOp::Add:
      case ScalarOp::Sub:
      case ScalarOp::Mul:
      case ScalarOp::Div:
        v[i] = e.newv();
        e.arith(x.op, v[i], v[x.a], v[x.b]);
        break;
      case ScalarOp::Max:
      case ScalarOp::Min:
        v[i] = e.newv();
        e.max_min(x.op == ScalarOp::Max, v[i], v[x.a], v[x.b]);
        break;
      case ScalarOp::Pow:
      case ScalarOp::Atan2:
        v[i] = e.newv();
        e.binary_math(x.op, v[i], v[x.a], v[x.b]);
        break;
      default:
        v[i] = e.newv();
        e.unary(x.op, v[i], v[x.a]);
        break;
    }
  }
  return v;
}

// Constants and parameters, emitted once before the loops. `params_offset` is where the call
// struct keeps its parameter values.
inline std::vector<ax::Vec> hoist(BodyEmitter& e, const PointwiseKernelIR& ir, const ax::Gp& call, int params_offset) {
  std::vector<ax::Vec> h(ir.body.size());
  for (size_t i = 0; i < ir.body.size(); ++i) {
    const ScalarExpr& x = ir.body[i];
    if (x.op == ScalarOp::Const) h[i] = e.constant(x.fconst);
    if (x.op == ScalarOp::Param) {
      int off = static_cast<int>(params_offset + sizeof(rt::ParamValue) * x.input);
      h[i] = e.param(ax::qword_ptr(call, off), ir.param_dtypes[x.input] == DType::Int64);
    }
  }
  return h;
}

// The registers every row kernel starts with: its call struct, the row length n, the element
// counter i, and each operand's pointer and stride. `Call` is rt::PointwiseCall or
// rt::ReductionCall (same leading fields).
struct RowKernel {
  ax::Gp call, n, i;
  std::vector<ax::Gp> ptr, stride;
};

template <typename Call>
RowKernel begin_row_kernel(ax::Compiler& cc, Isa isa, int num_operands) {
  RowKernel k;
  FuncNode* fn = cc.addFunc(FuncSignatureT<void, const void*>(CallConvId::kHost));
  k.call = cc.newIntPtr("call");
  fn->setArg(0, k.call);
  // Without this the register allocator spills ymm values with SSE moves, which keep 128 bits.
  if (isa != Isa::Scalar) fn->frame().setAvxEnabled();
  k.n = cc.newInt64("n");
  k.i = cc.newInt64("i");
  cc.mov(k.n, ax::qword_ptr(k.call, offsetof(Call, n)));
  cc.xor_(k.i, k.i);
  for (int j = 0; j < num_operands; ++j) {
    k.ptr.push_back(cc.newIntPtr("ptr%d", j));
    k.stride.push_back(cc.newInt64("stride%d", j));
    cc.mov(k.ptr[j], ax::qword_ptr(k.call, static_cast<int>(offsetof(Call, ptr) + 8 * j)));
    cc.mov(k.stride[j], ax::qword_ptr(k.call, static_cast<int>(offsetof(Call, stride) + 8 * j)));
  }
  return k;
}

// Vector-loop pointers for kernel inputs: a broadcast input (stride 0) reads a scratch slot that
// holds its value in every lane, so the loop body is one plain vector load for every input.
// `scratch` has room for one vector per input.
inline void vector_inputs(ax::Compiler& cc, BodyEmitter& ve, Isa isa, DType dtype, const std::vector<ax::Gp>& ptr,
                          const std::vector<ax::Gp>& stride, int nin, const ax::Mem& scratch, std::vector<ax::Gp>& vptr,
                          std::vector<ax::Gp>& vinc) {
  const int vbytes = vector_bytes(isa);
  const int lanes = vbytes / rt::dtype_itemsize(dtype);
  vptr.resize(nin);
  vinc.resize(nin);
  for (int k = 0; k < nin; ++k) {
    vptr[k] = cc.newIntPtr("vptr%d", k);
    vinc[k] = cc.newInt64("vinc%d", k);
    ax::Vec b = ve.newv();
    dtype == DType::Float32 ? cc.vbroadcastss(b, ax::dword_ptr(ptr[k]))
                            : cc.vbroadcastsd(b.as<ax::Ymm>(), ax::qword_ptr(ptr[k]));
    ax::Mem slot = scratch.cloneAdjusted(vbytes * k);
    slot.setSize(vbytes);
    cc.vmovups(slot, b);
    cc.lea(vptr[k], slot);
    cc.test(stride[k], stride[k]);
    cc.cmovnz(vptr[k], ptr[k]);
    cc.mov(vinc[k], stride[k]);
    cc.imul(vinc[k], vinc[k], lanes);
  }
}

// Assembles what `build` emits into executable memory, as a kernel named `name`.
template <typename Build>
Expected<rt::KernelPtr> assemble(const std::string& name, const std::string& ir_text, bool want_listing, Build&& build) {
  CodeHolder code;
  code.init(jit_runtime().environment());
  StringLogger logger;
  if (want_listing) code.setLogger(&logger);
  ax::Compiler cc(&code);
  if (Error err = build(cc)) return Status::internal(std::string("asmjit: ") + DebugUtils::errorAsString(err));
  void* entry = nullptr;
  if (Error err = jit_runtime().add(&entry, &code))
    return Status::internal(std::string("asmjit: ") + DebugUtils::errorAsString(err));
  auto k = std::make_shared<rt::Kernel>();
  k->entry = entry;
  k->name = name;
  if (want_listing) k->listing = ir_text + logger.data();
  k->release = [entry] { jit_runtime().release(entry); };
  return rt::KernelPtr(std::move(k));
}

// The kernel cached under `key` for the host ISA, generated with `generate(isa, want_listing)` on
// first use (and logged under FRAMEJIT_LOGS=asm).
template <typename Generate>
Expected<rt::KernelPtr> cached_kernel(const std::string& key, Generate&& generate) {
  Isa isa = host_isa();
  bool listing = rt::log_enabled(rt::LogTopic::Kernels) || rt::log_enabled(rt::LogTopic::Asm) || !rt::dump_dir().empty();
  Status failure;
  const std::string full_key = std::string(isa_name(isa)) + "\n" + key;
  rt::KernelPtr k = rt::kernel_cache_get(full_key, [&]() -> rt::KernelPtr {
    Expected<rt::KernelPtr> r = generate(isa, listing);
    if (!r) {
      failure = r.error();
      return nullptr;
    }
    if (listing && rt::log_enabled(rt::LogTopic::Asm)) rt::log_write(rt::LogTopic::Asm, (*r)->listing);
    if (listing && !rt::dump_dir().empty()) {
      // Named by the kernel and its content hash: one file per distinct kernel, stable across runs.
      char hash[17];
      std::snprintf(hash, sizeof hash, "%016zx", std::hash<std::string>{}(full_key));
      rt::dump_write((*r)->name + "-" + hash + ".txt", (*r)->listing);
    }
    return *r;
  });
  if (!k) return failure.is_ok() ? Status::internal("kernel generation failed") : failure;
  return k;
}

}  // namespace detail
}  // namespace framejit::jit::x86
