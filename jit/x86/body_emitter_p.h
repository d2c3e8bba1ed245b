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
    case ScalarOp::Erf: return MathFn::Erf;
    case ScalarOp::Pow: return MathFn::Pow;
    default: return MathFn::Atan2;
  }
}

// Note [Element widths]
// A kernel processes `count` elements per operation: W = vector bytes / the widest itemsize among
// its values in the vector loop, 1 in the tail and strided loops. Every value lives in a vector
// register of the ISA's width; a value of itemsize s holds its count elements packed in the low
// count * s bytes (with W = 4, float64 fills a ymm, float32 an xmm, uint8 four bytes) and the
// bytes above are don't-care. So casts are the cvt / pack / zero-extend instructions, and every
// operation may compute on the whole register. Bool values hold one byte per element, 0 or 1, as
// in memory; comparisons build lane masks internally and narrow them to those bytes. A half
// value (Note [Half types] in jit/lower/loop_ir.h) packs like int16; its casts convert through
// float32, so a kernel with one counts 4 bytes per element for W.
//
// With AVX every operation is packed on the full register, also when only lane 0 matters (the
// tail and strided loops load and store one element): every element then goes through exactly
// the same instructions, wherever it sits in the array, and no legacy SSE encoding mixes in.
// Without AVX (Isa::Scalar) floats use the SSE2 ss/sd instructions on lane 0, and integer, bool
// and conversion operations run in general-purpose registers ("lane-wise"). Operations with no
// reasonable AVX2 form (integer division, float -> int64 and int64 -> float32 conversions) run
// lane-wise too: the operands are spilled to the stack and each element goes through the scalar
// instructions.
//
// Avx512 keeps the same layout on zmm registers (W doubles, so an int32 value of a float64 kernel
// fills a ymm of its zmm). Predicates live in k registers there: a comparison's lane j is bit j,
// which is also byte j of the packed bool value, so one zero-masking byte move of 1s writes the
// bool bytes with no narrowing, and `where` tests the bool bytes back into a k register. AVX-512DQ
// converts int64 <-> float in vector form, so only integer division stays lane-wise. Every
// instruction either rounds the same way as its AVX2 / SSE2 counterpart or is exact, so results
// match the other ISAs bit for bit; the exceptions are reductions (their lanes fold in another
// order) and the math injectors, which are held to the same ulp bounds rather than to identity.
class BodyEmitter {
public:
  BodyEmitter(ax::Compiler& cc, Isa isa, int count);

  int count() const { return count_; }
  // A new register of the ISA's width.
  ax::Vec newv();

  // ---- floats (float32 / float64) ----
  // dst = a op b for Add/Sub/Mul/Div.
  void arith(ScalarOp op, DType t, const ax::Vec& dst, const ax::Vec& a, const ax::Vec& b);
  // NumPy's maximum/minimum: NaN in either operand propagates; maximum(0.0, -0.0) is the first.
  void max_min(bool is_max, DType t, const ax::Vec& dst, const ax::Vec& a, const ax::Vec& b);
  void unary(ScalarOp op, DType t, const ax::Vec& dst, const ax::Vec& a);
  void binary_math(ScalarOp op, DType t, const ax::Vec& dst, const ax::Vec& a, const ax::Vec& b);
  // An int64 register converted to float t, in every lane.
  ax::Vec int_to_value(DType t, const ax::Gp& g);

  // ---- every dtype ----
  // `v` in every lane (bool: v != 0).
  ax::Vec constant(DType t, double v);
  // An integer or bool `v` in every lane, kept to the width of t (values a double cannot hold,
  // such as INT64_MAX).
  ax::Vec int_constant(DType t, int64_t v);
  // count elements of t at ptr + disp.
  void load(DType t, const ax::Vec& dst, const ax::Gp& ptr, int disp = 0);
  void store(DType t, const ax::Gp& ptr, const ax::Vec& src, int disp = 0);
  // Avx512: load / store with lane mask k (bit j = element j of count): masked-off elements are
  // neither read nor written (no fault past the end of an array), and load as zero.
  void load_masked(DType t, const ax::Vec& dst, const ax::Gp& ptr, const ax::KReg& k);
  void store_masked(DType t, const ax::Gp& ptr, const ax::Vec& src, const ax::KReg& k);
  // Avx512: dst = k ? a : b per element of `itemsize` bytes (1, 4 or 8).
  void k_select(int itemsize, const ax::KReg& k, const ax::Vec& dst, const ax::Vec& a, const ax::Vec& b);
  // A parameter (double or int64 at `mem`) converted to t, in every lane.
  ax::Vec param(DType t, const ax::Mem& mem, bool is_int);
  // dst = src (whole register).
  void move(const ax::Vec& dst, const ax::Vec& src);

  // ---- integers and bool (body_emitter_int.cpp) ----
  // Add Sub Mul Max Min And Or Xor FloorDiv Mod on int32/int64/uint8 (And Or Xor also bool).
  void int_binary(ScalarOp op, DType t, const ax::Vec& dst, const ax::Vec& a, const ax::Vec& b);
  // Neg Abs Square Not.
  void int_unary(ScalarOp op, DType t, const ax::Vec& dst, const ax::Vec& a);
  // dst (bool) = a op b, compared as `t` (any dtype).
  void compare(ScalarOp op, DType t, const ax::Vec& dst, const ax::Vec& a, const ax::Vec& b);
  // dst = c ? a : b, a and b of dtype t, c bool.
  void where(DType t, const ax::Vec& dst, const ax::Vec& c, const ax::Vec& a, const ax::Vec& b);
  // dst (to) = a (from), Note [Casts].
  void cast(DType from, DType to, const ax::Vec& dst, const ax::Vec& a);

private:
  friend struct LaneOps;
  InstId pick(DType t, InstId vps, InstId vpd, InstId ss, InstId sd) const;
  // Views of a register at the vector width and at half of it (ymm/xmm for Avx2, zmm/ymm for
  // Avx512): widening and narrowing conversions read or write the half.
  ax::Vec full(const ax::Vec& v) const { return evex_ ? ax::Vec(v.zmm()) : ax::Vec(v.ymm()); }
  ax::Vec half(const ax::Vec& v) const { return evex_ ? ax::Vec(v.ymm()) : ax::Vec(v.xmm()); }
  // Integer moves between registers and memory: vmovdqu has no EVEX form (vmovdqu32 does).
  void movdqu(const Operand& dst, const Operand& src);
  // Avx512: a lane predicate as bool bytes (byte j = bit j of k).
  void k_to_bool(const ax::KReg& k, const ax::Vec& dst);
  void bits(DType t, InstId vex_ps, InstId vex_pd, InstId sse_ps, InstId sse_pd, const ax::Vec& dst,
            const ax::Vec& a, const ax::Vec& b);
  ax::Vec mask_constant(DType t, bool sign_only);
  void three(InstId id, const ax::Vec& dst, const ax::Vec& a, const ax::Vec& b);
  void cmp(DType t, const ax::Vec& dst, const ax::Vec& a, const ax::Vec& b, int predicate);
  void select(DType t, const ax::Vec& dst, const ax::Vec& mask, const ax::Vec& a, const ax::Vec& b);
  MathInjector& math(DType t) { return t == DType::Float32 ? math_f32_ : math_f64_; }
  ax::Mem vector_mem(int bytes, const ax::Gp& ptr, int disp) const;
  void load_bytes(DType t, const ax::Vec& dst, const ax::Mem& m, int bytes);
  void store_bytes(DType t, const ax::Mem& m, const ax::Vec& src, int bytes);
  // A register whose first `bytes` bytes are `data` (the rest zero).
  ax::Vec bytes_constant(const void* data, int bytes);
  ax::Vec splat_bytes(uint8_t b);  // b in every byte
  ax::Vec zero();

  // int_ops helpers (body_emitter_int.cpp).
  InstId by_size(DType t, InstId b, InstId d, InstId q) const;
  void narrow_to_bytes(int itemsize, const ax::Vec& dst, const ax::Vec& a);
  void mask_to_bool(int itemsize, bool negate, const ax::Vec& dst, const ax::Vec& mask);
  void bool_to_mask(int itemsize, const ax::Vec& dst, const ax::Vec& c);
  bool cast_vector(DType from, DType to, const ax::Vec& dst, const ax::Vec& a);
  void half_cast(DType from, DType to, const ax::Vec& dst, const ax::Vec& a);
  void int_mul(DType t, const ax::Vec& dst, const ax::Vec& a, const ax::Vec& b);
  // Runs `op` on every element of the operands in general-purpose/xmm registers (LaneOps).
  void lanewise(ScalarOp op, DType out, const std::vector<std::pair<ax::Vec, DType>>& in, const ax::Vec& dst);
  ax::Mem spill_slot(int k);

  ax::Compiler& cc_;
  Isa isa_;
  int count_;
  bool vex_;   // any AVX level (VEX or EVEX encodings, full-register operations)
  bool evex_;  // Avx512: zmm registers, k-register predicates
  MathInjector math_f32_, math_f64_;
  ax::Mem spill_;  // lane-wise scratch: 4 vectors, allocated on first use
  bool have_spill_ = false;
};

// Emits the body at the emitter's width. `inputs[k]` holds loaded input k; consts/params hoisted.
std::vector<ax::Vec> emit_body(BodyEmitter& e, const PointwiseKernelIR& ir, const std::vector<ax::Vec>& inputs,
                               const std::vector<ax::Vec>& hoisted);

// Loads every kernel input at its pointer (one element, or the emitter's width); with `steps`,
// then advances each pointer by its step (the loops of the reduction generators).
std::vector<ax::Vec> load_inputs(ax::Compiler& cc, BodyEmitter& e, const PointwiseKernelIR& ir,
                                 const std::vector<ax::Gp>& ptrs, const std::vector<ax::Gp>* steps = nullptr);

// ptr[k] += stride[k] * i for the first `count` operands: where a scalar tail continues a row
// after a vector loop that stepped its own copies of the pointers.
// Avx512 (Note [Masked tail] in pointwise_codegen.cpp): a lane mask of the first `count` (< 64) lanes.
ax::KReg first_lanes(ax::Compiler& cc, const ax::Gp& count);
// The inputs at `ptrs` loaded under lane mask `k` (the lanes it leaves out read as zero, unread).
std::vector<ax::Vec> load_inputs_masked(BodyEmitter& e, const PointwiseKernelIR& ir, const std::vector<ax::Gp>& ptrs,
                                        const ax::KReg& k);
void advance_to(ax::Compiler& cc, const std::vector<ax::Gp>& ptr, const std::vector<ax::Gp>& stride, int count,
                const ax::Gp& i);

// Constants and parameters, emitted once before the loops. `params_offset` is where the call
// struct keeps its parameter values.
std::vector<ax::Vec> hoist(BodyEmitter& e, const PointwiseKernelIR& ir, const ax::Gp& call, int params_offset);

// The widest itemsize among the kernel's values (Note [Element widths]).
int widest_itemsize(const PointwiseKernelIR& ir);

// The registers every row kernel starts with: its call struct, the row length n, the element
// counter i, and each operand's pointer and stride. `Call` is rt::PointwiseCall or
// rt::ReductionCall (same leading fields).
struct RowKernel {
  ax::Gp call, n, i;
  std::vector<ax::Gp> ptr, stride;
};

// Tells the register allocator which registers and spill moves the kernel may use, and has the
// epilogue clear the upper halves of the vector registers (vzeroupper), as compilers do at every
// return from AVX code: a kernel that returns with them dirty leaves its caller's SSE code (the
// runtime's row loops, the interpreter) running with a false dependency on them on Intel cores.
// Row reductions and chains, one kernel call per row, took 205 ns a row on the GPU machine's Xeon
// against 29 ns on an AMD core, where the state costs nothing.
inline void set_frame_isa(FuncNode* fn, Isa isa) {
  // Without this the register allocator spills ymm values with SSE moves, which keep 128 bits.
  if (isa != Isa::Scalar) fn->frame().setAvxEnabled();
  if (isa != Isa::Scalar) fn->frame().setAvxCleanup();
  // zmm spills, and zmm16-31 for the EVEX instructions.
  if (isa == Isa::Avx512) fn->frame().setAvx512Enabled();
}

template <typename Call>
RowKernel begin_row_kernel(ax::Compiler& cc, Isa isa, int num_operands) {
  RowKernel k;
  FuncNode* fn = cc.addFunc(FuncSignatureT<void, const void*>(CallConvId::kHost));
  k.call = cc.newIntPtr("call");
  fn->setArg(0, k.call);
  set_frame_isa(fn, isa);
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
// `scratch` has room for one vector per input; each pointer steps `count` elements.
void vector_inputs(ax::Compiler& cc, BodyEmitter& ve, Isa isa, const std::vector<DType>& dtypes,
                   const std::vector<ax::Gp>& ptr, const std::vector<ax::Gp>& stride, const ax::Mem& scratch,
                   std::vector<ax::Gp>& vptr, std::vector<ax::Gp>& vinc);

// Keeps the first error of any emitted instruction (emit calls return errors that generators do
// not check one by one).
struct FirstError : ErrorHandler {
  Error error = kErrorOk;
  std::string message;
  void handleError(Error err, const char* msg, BaseEmitter*) override {
    if (error != kErrorOk) return;
    error = err;
    message = msg;
  }
};

// What a host kernel's launcher knows of it besides its entry point: rt::Kernel's fields of these names.
struct KernelTraits {
  int64_t sum_block = 0, sum_block_strided = 0;
  int buffered_inputs = 0;
};

// Assembles what `build` emits into executable memory, as a kernel named `name`.
template <typename Build>
Expected<rt::KernelPtr> assemble(const std::string& name, const std::string& ir_text, bool want_listing, Build&& build,
                                 const KernelTraits& traits = {}) {
  CodeHolder code;
  code.init(jit_runtime().environment());
  FirstError first_error;
  code.setErrorHandler(&first_error);
  StringLogger logger;
  if (want_listing) code.setLogger(&logger);
  ax::Compiler cc(&code);
  // Operand forms are checked against asmjit's instruction tables, before and after register
  // allocation (a VEX-only instruction given zmm16-31 fails here, not at run time). Kernels are
  // generated once per shape/dtype signature, so this costs little; it is how the AVX-512 paths
  // get checked on hosts that cannot run them.
  cc.addDiagnosticOptions(DiagnosticOptions::kValidateIntermediate | DiagnosticOptions::kValidateAssembler);
  Error err = build(cc);
  if (first_error.error != kErrorOk)
    return Status::internal("asmjit: " + name + ": " + first_error.message);
  if (err) return Status::internal(std::string("asmjit: ") + DebugUtils::errorAsString(err));
  void* entry = nullptr;
  if (Error add_err = jit_runtime().add(&entry, &code))
    return Status::internal(std::string("asmjit: ") + DebugUtils::errorAsString(add_err));
  auto k = std::make_shared<rt::Kernel>();
  k->entry = entry;
  k->name = name;
  if (want_listing) k->listing = ir_text + logger.data();
  k->release = [entry] { jit_runtime().release(entry); };
  k->sum_block = traits.sum_block;
  k->sum_block_strided = traits.sum_block_strided;
  k->buffered_inputs = traits.buffered_inputs;
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
