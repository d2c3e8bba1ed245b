// gemm_kernels.cpp — GEMM micro-kernels: Xbyak AVX2/AVX-512 generators, portable C++ tiles.
#include <xbyak/xbyak.h>

#include <algorithm>
#include <cstddef>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "jit/x86/gemm_p.h"

namespace framejit::jit::x86 {

namespace {

// Note [GEMM register tile]
// C is row-major, so a tile row is NR contiguous elements held in `nv` vector registers, and the
// tile has MR rows: MR * nv accumulators. Each k step loads one row of B (nv vectors), broadcasts
// A[i][p] for each row i and issues MR * nv FMAs into the accumulators:
//
//            B row p:   [ b0 | b1 ]            (nv = 2 vectors)
//   A[0][p] bcast  ->   [acc00|acc01]
//   ...                  ...
//   A[MR-1][p]     ->   [accM0|accM1]
//
//   AVX2    16 ymm: 6 x 16 f32 / 6 x 8 f64  = 12 accumulators + 2 B + 2 broadcast registers
//   AVX-512 32 zmm: 14 x 32 f32 / 14 x 16 f64 = 28 accumulators + 2 B + 2 broadcast registers
// Both leave enough independent FMA chains (12 or 28) to cover FMA latency x throughput (8 on
// Zen 3 and Skylake). Two broadcast registers alternate so consecutive rows do not serialize.

// Where a kernel reads B from.
enum class BMode : uint8_t {
  Packed,  // a packed micro-panel: rows NR * itemsize apart (immediate offsets)
  Stream,  // B in place, rows args.ldb apart; also writes them packed to args.b_pack and
           // prefetches the rows at args.pf (Note [GEMM streamed B] in gemm.cpp)
};

struct GemmUkrParams {
  Isa isa = Isa::Avx2;
  rt::DType dtype = rt::DType::Float32;
  int mr = 6;        // MR: elements per packed A group
  int rows = 6;      // rows this kernel computes, 1..mr
  int nv = 2;        // vector registers per tile row
  int k_unroll = 4;  // a power of two
  BMode b_mode = BMode::Packed;
};

constexpr size_t kUkrCodeBytes = 8192;

class GemmUkrGenerator : public Xbyak::CodeGenerator {
public:
  explicit GemmUkrGenerator(const GemmUkrParams& p)
      : Xbyak::CodeGenerator(kUkrCodeBytes, Xbyak::DontSetProtectRWE),
        p_(p),
        vbytes_(vector_bytes(p.isa)),
        esize_(rt::dtype_itemsize(p.dtype)) {}

  /// Generates the kernel and makes its memory read+execute.
  Status create() {
    if (p_.isa == Isa::Scalar) return Status::internal("gemm: no generated kernel for Isa::Scalar");
    if (p_.rows < 1 || p_.rows > p_.mr || p_.k_unroll < 1 || (p_.k_unroll & (p_.k_unroll - 1)) != 0)
      return Status::internal("gemm: bad micro-kernel parameters");
    const int num_vregs = p_.isa == Isa::Avx512 ? 32 : 16;
    if (p_.mr * p_.nv + p_.nv + 2 > num_vregs)
      return Status::internal("gemm: register tile too large");
    try {
      generate();
      ready();
      setProtectModeRE();
    } catch (const std::exception& e) {
      return Status::internal(std::string("gemm: Xbyak: ") + e.what());
    }
    return Status::ok();
  }
  GemmUkrFn entry() const { return getCode<GemmUkrFn>(); }

private:
  // Caller-saved under the SysV ABI, except rbx (the stream kernels save it).
  const Xbyak::Reg64 reg_args_ = rdi;
  const Xbyak::Reg64 reg_a_ = rsi;
  const Xbyak::Reg64 reg_b_ = rdx;
  const Xbyak::Reg64 reg_c_ = rcx;   // C rows, at the start and the end
  const Xbyak::Reg64 reg_pf_ = rcx;  // the prefetch stream, during the k loop
  const Xbyak::Reg64 reg_k_ = r8;
  const Xbyak::Reg64 reg_ldb_ = r9;
  const Xbyak::Reg64 reg_ldc_ = r10;
  const Xbyak::Reg64 reg_ldb3_ = r11;  // 3 * ldb
  const Xbyak::Reg64 reg_kiter_ = rax;
  const Xbyak::Reg64 reg_bpack_ = rbx;  // where the stream kernel writes B packed

  // A ymm or zmm register. NB: Xbyak's Zmm adds no members to Ymm (the kind lives in Operand), so
  // returning it as a Ymm keeps it a zmm.
  Xbyak::Ymm vec(int idx) const {
    if (p_.isa == Isa::Avx512) return Xbyak::Zmm(idx);
    return Xbyak::Ymm(idx);
  }
  Xbyak::Ymm acc(int row, int v) const { return vec(row * p_.nv + v); }
  Xbyak::Ymm breg(int v) const { return vec(p_.mr * p_.nv + v); }
  Xbyak::Ymm bcast(int row) const { return vec(p_.mr * p_.nv + p_.nv + (row & 1)); }
  bool f32() const { return p_.dtype == rt::DType::Float32; }
  bool stream() const { return p_.b_mode == BMode::Stream; }
  int row_bytes() const { return p_.nv * vbytes_; }  // NR * itemsize

  // Row u (mod 4) of a stream whose rows are ldb bytes apart, relative to `base` (which moves on
  // every 4 rows).
  Xbyak::RegExp ldb_row(const Xbyak::Reg64& base, int u) const {
    switch (u & 3) {
      case 0: return base;
      case 1: return base + reg_ldb_;
      case 2: return base + reg_ldb_ * 2;
      default: return base + reg_ldb3_;
    }
  }

  void zero(const Xbyak::Ymm& x) {
    if (p_.isa == Isa::Avx512)
      vpxord(x, x, x);  // EVEX: reaches zmm16..31
    else
      vxorps(x, x, x);
  }

  // One k step: row u of B against A group u (both relative to their stream's position).
  void k_step(int u) {
    for (int v = 0; v < p_.nv; ++v) {
      if (stream()) {
        vmovups(breg(v), ptr[ldb_row(reg_b_, u) + v * vbytes_]);
        vmovups(ptr[reg_bpack_ + u * row_bytes() + v * vbytes_], breg(v));
      } else {
        vmovups(breg(v), ptr[reg_b_ + u * row_bytes() + v * vbytes_]);
      }
    }
    if (stream())
      for (int off = 0; off < row_bytes(); off += 64) prefetcht0(ptr[ldb_row(reg_pf_, u) + off]);
    for (int i = 0; i < p_.rows; ++i) {
      const int a_off = (u * p_.mr + i) * esize_;
      if (f32())
        vbroadcastss(bcast(i), dword[reg_a_ + a_off]);
      else
        vbroadcastsd(bcast(i), qword[reg_a_ + a_off]);
      for (int v = 0; v < p_.nv; ++v) {
        if (f32())
          vfmadd231ps(acc(i, v), bcast(i), breg(v));
        else
          vfmadd231pd(acc(i, v), bcast(i), breg(v));
      }
    }
  }

  // Moves the streams on by `steps` k steps (after steps that addressed rows 0..steps-1).
  void advance(int steps) {
    add(reg_a_, steps * p_.mr * esize_);
    if (!stream()) {
      add(reg_b_, steps * row_bytes());
      return;
    }
    add(reg_bpack_, steps * row_bytes());
    for (const Xbyak::Reg64& r : {reg_b_, reg_pf_}) {
      if (steps == 4)
        lea(r, ptr[r + reg_ldb_ * 4]);
      else
        for (int s = 0; s < steps; ++s) add(r, reg_ldb_);
    }
  }

  void generate() {
    Xbyak::Label k_loop, k_tail, k_tail_loop, k_done, store_only, done;
    const int unroll = p_.k_unroll;
    int log2_unroll = 0;
    while ((1 << log2_unroll) < unroll) ++log2_unroll;

    if (stream()) push(reg_bpack_);
    mov(reg_a_, ptr[reg_args_ + offsetof(GemmUkrArgs, a)]);
    mov(reg_b_, ptr[reg_args_ + offsetof(GemmUkrArgs, b)]);
    mov(reg_k_, ptr[reg_args_ + offsetof(GemmUkrArgs, k)]);
    mov(reg_ldc_, ptr[reg_args_ + offsetof(GemmUkrArgs, ldc)]);
    if (stream()) {
      mov(reg_ldb_, ptr[reg_args_ + offsetof(GemmUkrArgs, ldb)]);
      lea(reg_ldb3_, ptr[reg_ldb_ + reg_ldb_ * 2]);
      mov(reg_bpack_, ptr[reg_args_ + offsetof(GemmUkrArgs, b_pack)]);
    }

    // Bring the C tile toward L1 while the k loop runs; it is read back only at the end.
    mov(reg_c_, ptr[reg_args_ + offsetof(GemmUkrArgs, c)]);
    for (int i = 0; i < p_.rows; ++i) {
      for (int off = 0; off < row_bytes(); off += 64) prefetcht0(ptr[reg_c_ + off]);
      if (i + 1 < p_.rows) add(reg_c_, reg_ldc_);
    }
    if (stream()) mov(reg_pf_, ptr[reg_args_ + offsetof(GemmUkrArgs, pf)]);

    for (int i = 0; i < p_.rows; ++i)
      for (int v = 0; v < p_.nv; ++v) zero(acc(i, v));

    // Main loop: `unroll` k steps per iteration, the streams advanced every 4 steps.
    mov(reg_kiter_, reg_k_);
    shr(reg_kiter_, log2_unroll);
    jz(k_tail, T_NEAR);
    L(k_loop);
    for (int u0 = 0; u0 < unroll; u0 += 4) {
      const int steps = std::min(4, unroll - u0);
      for (int u = 0; u < steps; ++u) k_step(u);
      advance(steps);
    }
    dec(reg_kiter_);
    jnz(k_loop, T_NEAR);

    // Tail: the last k % unroll steps, one at a time.
    L(k_tail);
    mov(reg_kiter_, reg_k_);
    and_(reg_kiter_, unroll - 1);
    jz(k_done, T_NEAR);
    L(k_tail_loop);
    k_step(0);
    advance(1);
    dec(reg_kiter_);
    jnz(k_tail_loop, T_NEAR);
    L(k_done);

    // Store: C = acc, or C += acc.
    mov(reg_c_, ptr[reg_args_ + offsetof(GemmUkrArgs, c)]);
    cmp(qword[reg_args_ + offsetof(GemmUkrArgs, accumulate)], 0);
    je(store_only, T_NEAR);
    for (int i = 0; i < p_.rows; ++i) {
      for (int v = 0; v < p_.nv; ++v) {
        if (f32())
          vaddps(acc(i, v), acc(i, v), ptr[reg_c_ + v * vbytes_]);
        else
          vaddpd(acc(i, v), acc(i, v), ptr[reg_c_ + v * vbytes_]);
        vmovups(ptr[reg_c_ + v * vbytes_], acc(i, v));
      }
      if (i + 1 < p_.rows) add(reg_c_, reg_ldc_);
    }
    jmp(done, T_NEAR);
    L(store_only);
    for (int i = 0; i < p_.rows; ++i) {
      for (int v = 0; v < p_.nv; ++v) vmovups(ptr[reg_c_ + v * vbytes_], acc(i, v));
      if (i + 1 < p_.rows) add(reg_c_, reg_ldc_);
    }
    L(done);
    if (stream()) pop(reg_bpack_);
    vzeroupper();
    ret();
  }

  const GemmUkrParams p_;
  const int vbytes_;
  const int esize_;
};

// ---- Isa::Scalar: portable C++ tiles ------------------------------------------------------------

// The same contract as the generated kernels, written so the compiler keeps the ROWS x NR
// accumulators in registers (and vectorizes the j loop with whatever the baseline ISA has).
template <typename T, int MR, int NR, int ROWS, bool kStream>
void scalar_ukr(const GemmUkrArgs* args) {
  T acc[ROWS][NR] = {};
  const T* a = static_cast<const T*>(args->a);
  const char* b = static_cast<const char*>(args->b);
  const int64_t ldb = kStream ? args->ldb : NR * static_cast<int64_t>(sizeof(T));
  for (int64_t p = 0; p < args->k; ++p) {
    const T* brow = reinterpret_cast<const T*>(b + p * ldb);
    if (kStream) std::copy_n(brow, NR, static_cast<T*>(args->b_pack) + p * NR);
    for (int i = 0; i < ROWS; ++i) {
      const T ai = a[p * MR + i];
      for (int j = 0; j < NR; ++j) acc[i][j] += ai * brow[j];
    }
  }
  char* c = static_cast<char*>(args->c);
  for (int i = 0; i < ROWS; ++i) {
    T* crow = reinterpret_cast<T*>(c + i * args->ldc);
    if (args->accumulate) {
      for (int j = 0; j < NR; ++j) crow[j] += acc[i][j];
    } else {
      for (int j = 0; j < NR; ++j) crow[j] = acc[i][j];
    }
  }
}

template <typename T, int MR, int NR, int... Rows>
void fill_scalar_set(GemmKernelSet& set, std::integer_sequence<int, Rows...>) {
  ((set.ukr[Rows + 1] = &scalar_ukr<T, MR, NR, Rows + 1, false>), ...);
  ((set.ukr_stream[Rows + 1] = &scalar_ukr<T, MR, NR, Rows + 1, true>), ...);  // no prefetching
}

// ---- kernel sets --------------------------------------------------------------------------------

struct KernelSetHolder {
  GemmKernelSet set;
  Status status;
  std::vector<std::unique_ptr<GemmUkrGenerator>> code;  // owns the executable memory
};

KernelSetHolder build_kernel_set(Isa isa, rt::DType dtype) {
  KernelSetHolder h;
  h.set.isa = isa;
  h.set.dtype = dtype;
  const bool f32 = dtype == rt::DType::Float32;
  if (!f32 && dtype != rt::DType::Float64) {
    h.status = Status::unsupported("gemm: dtype is not float32 or float64");
    return h;
  }
  if (isa == Isa::Scalar) {
    constexpr int kMr = 4;
    h.set.mr = kMr;
    h.set.k_unroll = 1;
    if (f32) {
      h.set.nr = 8;
      fill_scalar_set<float, kMr, 8>(h.set, std::make_integer_sequence<int, kMr>());
    } else {
      h.set.nr = 4;
      fill_scalar_set<double, kMr, 4>(h.set, std::make_integer_sequence<int, kMr>());
    }
    return h;
  }
  // See Note [GEMM register tile].
  GemmUkrParams p;
  p.isa = isa;
  p.dtype = dtype;
  p.mr = isa == Isa::Avx512 ? 14 : 6;
  p.nv = 2;
  p.k_unroll = 4;
  h.set.mr = p.mr;
  h.set.nr = p.nv * vector_bytes(isa) / rt::dtype_itemsize(dtype);
  h.set.k_unroll = p.k_unroll;
  for (BMode mode : {BMode::Packed, BMode::Stream}) {
    GemmUkrFn* table = mode == BMode::Packed ? h.set.ukr : h.set.ukr_stream;
    for (int rows = 1; rows <= p.mr; ++rows) {
      p.rows = rows;
      p.b_mode = mode;
      auto gen = std::make_unique<GemmUkrGenerator>(p);
      Status s = gen->create();
      if (!s) {
        h.status = s;
        h.set = GemmKernelSet{};
        return h;
      }
      table[rows] = gen->entry();
      h.code.push_back(std::move(gen));
    }
  }
  return h;
}

template <Isa I, rt::DType D>
const KernelSetHolder& holder() {
  static const KernelSetHolder h = build_kernel_set(I, D);  // thread-safe, built on first use
  return h;
}

const KernelSetHolder* find_holder(Isa isa, rt::DType dtype) {
  const bool f32 = dtype == rt::DType::Float32;
  if (!f32 && dtype != rt::DType::Float64) return nullptr;
  switch (isa) {
    case Isa::Scalar:
      return f32 ? &holder<Isa::Scalar, rt::DType::Float32>()
                 : &holder<Isa::Scalar, rt::DType::Float64>();
    case Isa::Avx2:
      return f32 ? &holder<Isa::Avx2, rt::DType::Float32>()
                 : &holder<Isa::Avx2, rt::DType::Float64>();
    case Isa::Avx512:
      return f32 ? &holder<Isa::Avx512, rt::DType::Float32>()
                 : &holder<Isa::Avx512, rt::DType::Float64>();
  }
  return nullptr;
}

}  // namespace

const GemmKernelSet* gemm_kernel_set(Isa isa, rt::DType dtype) {
  const KernelSetHolder* h = find_holder(isa, dtype);
  return h && h->status ? &h->set : nullptr;
}

const Status& gemm_kernel_status(Isa isa, rt::DType dtype) {
  static const Status not_float = Status::unsupported("gemm: dtype is not float32 or float64");
  const KernelSetHolder* h = find_holder(isa, dtype);
  return h ? h->status : not_float;
}

}  // namespace framejit::jit::x86
