// reduction_codegen.cpp — asmjit code generation for row reductions (sum, prod, mean, max, min,
// var/std's final pass) with a fused pointwise prologue, and the pieces other reduction forms share.
#include "jit/x86/reduction_codegen.h"

#include <cmath>

#include "jit/x86/reduction_p.h"
#include "runtime/log.h"

namespace framejit::jit::x86 {
namespace detail {

// Note [Reduction kernel ABI]
// Every reduction kernel is `void f(const rt::ReductionCall* call)`; the executor picks the form
// from the layout (Note [Reduction layouts] in runtime/reduction_executor.cpp).
//
// Row form (this file): reduces call->n elements of the prologue's value, input k at
// call->ptr[k] stepping call->stride[k] bytes, into the one element at call->out. Contiguous rows
// run a vector loop with kUnroll independent accumulators (to hide the add latency), a one-vector
// loop, and a scalar tail; other rows run the scalar loop. The accumulation starts from the
// identity (reduce_identity), or with call->accumulate from the partial result already at
// call->out (outer reduced dims the executor walks); with call->finish the result is divided by
// call->divisor (mean, var) and square-rooted (std) before it is stored. With store_value the row
// kernel also writes each element's prologue value to operand nin (ptr[nin], stride[nin]).
// With call->rows > 1 it reduces that many rows, one output each: row r's operands start at
// ptr[k] + r * row_stride[k] and its output at out + r * out_stride (a kernel call per row cost
// as much as a row of a few hundred elements); accumulate and finish apply to every row.
//
// Column form (column_reduction_codegen.cpp): out[j] = op(out[j], value[r, j]) for each reduced
// row r in order, vectorized over j. Arg form (arg_reduction_codegen.cpp): the row form's fold
// finds the extreme, then a second pass finds its first index.
//
// max/min follow numpy.maximum/minimum (NaN propagates); argmax/argmin return the first NaN.
constexpr int kUnroll = 4;
// Float sums: unrolled iterations per leaf (Note [Pairwise sums] in runtime/reduction_executor.cpp),
// so each accumulator lane sums 16 elements before they join the next level, as NumPy's leaves do.
constexpr int kLeafIterations = 16;

// Note [Settled truth values]
// np.any of a bool array stops at its first True (NumPy's logical_or reduction searches for a
// nonzero byte with memchr), so on typical data it reads a few bytes of each row: a kernel that
// reads every byte ran 0.5x NumPy there. The row kernel's vector loop of a bool max / min (any /
// all, and the first pass of argmax / argmin of bool) checks its accumulators after each unrolled
// step and stops once a lane holds True (max) or False (min): no later element can change the
// result. The column form combines whole rows and has no such point.

// Note [Integer reductions]
// NumPy 1.24 reduces bool, int32, int64 and uint8 arrays as follows, and the loop IR says so
// explicitly: the prologue ends with a Cast of the value to the accumulation dtype (lowering
// picks it, fusion appends the Cast), so the reduction itself only ever combines values of one
// dtype, ReductionKernelIR::dtype().
//
//   sum, prod        bool/int32/int64 accumulate in int64, uint8 in uint64 (np.add.reduce's loop
//                    for the platform long), wrapping around on overflow
//   max, min         in the input dtype: signed compares for int32/int64, unsigned for uint8;
//                    bool max/min are logical or/and
//   mean, var, std   in float64: each element is converted to float64 and summed there
//                    (np.mean passes dtype=float64 to add.reduce), so the kernel is a float64
//                    reduction whose prologue starts with the conversion
//   argmax, argmin   in the input dtype (bool: the first True for argmax)
//
// Integer results are exact whatever the order of combination (wrap-around addition and
// multiplication are associative and commutative, max/min too), so the vector accumulators,
// the lane folds and the executor's order need no care; float64 means of integers round like
// any float64 sum (exact while the partial sums stay below 2**53).
//
// Note [Unsigned accumulators]
// uint64 appears only as the accumulator of a uint8 sum or product (reduction_supported allows
// nothing else). Addition and multiplication modulo 2**64 give the same bits for signed and
// unsigned operands, and a uint8 value zero-extends to the same 64 bits for either, so the body
// emitter computes uint64 with its int64 instructions; only the result's dtype, which the
// executor allocates, differs. uint64 max/min (unsigned compares of 64-bit lanes) would need
// code of their own and are not generated.
ax::Vec reduce_identity(BodyEmitter& e, ReduceOp op, DType dtype) {
  const bool is_max = op == ReduceOp::Max || op == ReduceOp::ArgMax;
  if (dtype == DType::Float32 || dtype == DType::Float64) {
    if (op == ReduceOp::Sum) return e.constant(dtype, -0.0);
    if (op == ReduceOp::Prod) return e.constant(dtype, 1.0);
    return e.constant(dtype, is_max ? -INFINITY : INFINITY);
  }
  if (op == ReduceOp::Sum) return e.int_constant(dtype, 0);
  if (op == ReduceOp::Prod) return e.int_constant(dtype, 1);
  int64_t lowest = 0, highest = 0;
  switch (dtype) {
    case DType::Bool: lowest = 0, highest = 1; break;
    case DType::UInt8: lowest = 0, highest = UINT8_MAX; break;
    case DType::Int32: lowest = INT32_MIN, highest = INT32_MAX; break;
    default: lowest = INT64_MIN, highest = INT64_MAX; break;
  }
  return e.int_constant(dtype, is_max ? lowest : highest);
}

void reduce_combine(BodyEmitter& e, ReduceOp op, DType dtype, const ax::Vec& acc, const ax::Vec& v) {
  ax::Vec t = e.newv();
  const bool is_max = op == ReduceOp::Max || op == ReduceOp::ArgMax;
  if (dtype == DType::Float32 || dtype == DType::Float64) {
    if (op == ReduceOp::Sum)
      e.arith(ScalarOp::Add, dtype, t, acc, v);
    else if (op == ReduceOp::Prod)
      e.arith(ScalarOp::Mul, dtype, t, acc, v);
    else
      e.max_min(is_max, dtype, t, acc, v);
  } else if (dtype == DType::Bool) {  // max/min only (sums accumulate in int64)
    e.int_binary(is_max ? ScalarOp::Or : ScalarOp::And, dtype, t, acc, v);
  } else {
    ScalarOp o = is_max ? ScalarOp::Max : ScalarOp::Min;
    if (op == ReduceOp::Sum) o = ScalarOp::Add;
    if (op == ReduceOp::Prod) o = ScalarOp::Mul;
    e.int_binary(o, dtype, t, acc, v);  // uint64 as int64: Note [Unsigned accumulators]
  }
  e.move(acc, t);
}

int reduction_lanes(Isa isa, const ReductionKernelIR& r) {
  return vector_bytes(isa) / widest_itemsize(r.prologue);
}

ax::Vec load_divisor(ax::Compiler& cc, BodyEmitter& e, DType dtype, const ax::Gp& call) {
  ax::Gp d = cc.newInt64("divisor");
  cc.mov(d, ax::qword_ptr(call, offsetof(rt::ReductionCall, divisor)));
  return e.int_to_value(dtype, d);  // numpy.mean/var divide by the count converted to the array's type
}

void emit_finish(BodyEmitter& e, const ReductionKernelIR& r, const ax::Vec& divisor, const ax::Vec& v) {
  ax::Vec q = e.newv();
  if (r.mean) {
    e.arith(ScalarOp::Div, r.dtype(), q, v, divisor);
    e.move(v, q);
  }
  if (r.sqrt) {
    e.unary(ScalarOp::Sqrt, r.dtype(), q, v);
    e.move(v, q);
  }
}

RowLoop begin_rows(ax::Compiler& cc, RowKernel& rk) {
  RowLoop l;
  l.rows = cc.newInt64("rows"), l.row = cc.newInt64("row");
  ax::Gp one = cc.newInt64("one");
  cc.mov(l.rows, ax::qword_ptr(rk.call, offsetof(rt::ReductionCall, rows)));
  cc.mov(one, 1);
  cc.cmp(l.rows, one);
  cc.cmovl(l.rows, one);
  cc.xor_(l.row, l.row);
  l.top = cc.newLabel();
  cc.bind(l.top);
  return l;
}

void row_start(ax::Compiler& cc, RowKernel& rk, const ax::Gp& row, int num_operands) {
  for (int k = 0; k < num_operands; ++k) {
    cc.mov(rk.ptr[k], row);
    cc.imul(rk.ptr[k], ax::qword_ptr(rk.call, static_cast<int>(offsetof(rt::ReductionCall, row_stride) + 8 * k)));
    cc.add(rk.ptr[k], ax::qword_ptr(rk.call, static_cast<int>(offsetof(rt::ReductionCall, ptr) + 8 * k)));
  }
  cc.xor_(rk.i, rk.i);
}

void next_row(ax::Compiler& cc, RowKernel& rk, RowLoop& l, const ax::Gp& out, int num_operands) {
  Label done = cc.newLabel();
  cc.inc(l.row);
  cc.cmp(l.row, l.rows);
  cc.jge(done);
  cc.add(out, ax::qword_ptr(rk.call, offsetof(rt::ReductionCall, out_stride)));
  row_start(cc, rk, l.row, num_operands);
  cc.jmp(l.top);
  cc.bind(done);
}

void bool_lane_bits(ax::Compiler& cc, Isa isa, const ax::Vec& b, const ax::Gp& bits, int lanes) {
  if (lanes > 1 && isa == Isa::Avx512) {
    ax::KReg k = cc.newKq();
    cc.vptestmb(k, b.zmm(), b.zmm());
    cc.kmovq(bits, k);
  } else if (lanes > 1) {
    // Bool bytes are 0 or 1: shifting each 16-bit pair left by 7 moves bit 0 of both bytes to
    // their top bits, which vpmovmskb collects.
    ax::Ymm t = cc.newYmm();
    cc.vpsllw(t, b.ymm(), 7);
    cc.vpmovmskb(bits.r32(), t);
  } else {
    // NB: pextrw, not movd: the allocator may turn a spilled movd source into a memory operand
    // with a general-purpose destination, a form that does not exist (see store_bytes).
    isa == Isa::Scalar ? cc.pextrw(bits.r32(), b.xmm(), 0) : cc.vpextrw(bits.r32(), b.xmm(), 0);
  }
  if (lanes < 32) cc.and_(bits.r32(), (1 << lanes) - 1);
  else if (lanes == 32) cc.mov(bits.r32(), bits.r32());  // clears bits 32-63
}

void emit_row_fold(ax::Compiler& cc, Isa isa, const ReductionKernelIR& r, ReduceOp op, RowKernel& rk,
                   BodyEmitter& se, const ax::Vec& sacc) {
  const PointwiseKernelIR& ir = r.prologue;
  const DType dtype = r.dtype();
  const int itemsize = rt::dtype_itemsize(dtype);
  const int nin = static_cast<int>(ir.input_dtypes.size());
  const int params_offset = static_cast<int>(offsetof(rt::ReductionCall, params));
  const ax::Gp call = rk.call, n = rk.n, i = rk.i;
  const std::vector<ax::Gp>& ptr = rk.ptr;
  const std::vector<ax::Gp>& stride = rk.stride;
  Label scalar_loop = cc.newLabel(), done = cc.newLabel();

  // A stored prologue value (store_value) is operand nin, written element by element.
  const bool store = r.store_value && !is_arg_reduce(op);
  if (isa != Isa::Scalar) {
    const int vbytes = vector_bytes(isa);
    const int lanes = reduction_lanes(isa, r);
    BodyEmitter ve(cc, isa, lanes);
    cc.cmp(ax::qword_ptr(call, offsetof(rt::ReductionCall, contiguous)), 0);
    cc.je(scalar_loop);
    std::vector<ax::Vec> vhoisted = hoist(ve, ir, call, params_offset);
    ax::Mem scratch = cc.newStack(vbytes * std::max(nin, 1), 64);
    std::vector<ax::Gp> vptr, vinc;
    vector_inputs(cc, ve, isa, ir.input_dtypes, ptr, stride, scratch, vptr, vinc);
    std::vector<ax::Vec> vacc(kUnroll);
    for (auto& a : vacc) a = reduce_identity(ve, op, dtype);
    // Note [Pairwise sums]: a float sum's accumulators are leaves of kLeafIterations elements per
    // lane, each then added into a second set (vmid) and restarted.
    const bool leaves = op == ReduceOp::Sum && (dtype == DType::Float32 || dtype == DType::Float64);
    std::vector<ax::Vec> vmid;
    ax::Vec identity;
    ax::Gp leaf;
    if (leaves) {
      for (int u = 0; u < kUnroll; ++u) vmid.push_back(reduce_identity(ve, op, dtype));
      identity = reduce_identity(ve, op, dtype);
      leaf = cc.newInt64("leaf");
      cc.mov(leaf, kLeafIterations);
    }
    Label unrolled = cc.newLabel(), single = cc.newLabel(), vector_done = cc.newLabel();
    Label tail_done = cc.newLabel(), settled = cc.newLabel();
    ax::Gp rem = cc.newInt64("rem");
    // Note [Settled truth values]: any / all (bool max / min) stop at the first True / False.
    const bool stops = dtype == DType::Bool && !store && (op == ReduceOp::Max || op == ReduceOp::Min);
    auto one_vector = [&](const ax::Vec& acc) {
      std::vector<ax::Vec> vals = emit_body(ve, ir, load_inputs(cc, ve, ir, vptr, &vinc), vhoisted);
      if (store) {
        ve.store(dtype, ptr[nin], vals[ir.outputs[0]]);
        cc.add(ptr[nin], lanes * itemsize);
      }
      reduce_combine(ve, op, dtype, acc, vals[ir.outputs[0]]);
    };
    cc.bind(unrolled);
    cc.mov(rem, n);
    cc.sub(rem, i);
    cc.cmp(rem, kUnroll * lanes);
    cc.jl(single);
    for (int u = 0; u < kUnroll; ++u) one_vector(vacc[u]);
    cc.add(i, kUnroll * lanes);
    if (stops) {
      ax::Vec all = ve.newv();
      ve.move(all, vacc[0]);
      for (int u = 1; u < kUnroll; ++u) reduce_combine(ve, op, dtype, all, vacc[u]);
      ax::Gp bits = cc.newInt64("truth_bits");
      bool_lane_bits(cc, isa, all, bits, lanes);
      if (op == ReduceOp::Max) {
        cc.test(bits, bits);
      } else {
        ax::Gp every = cc.newInt64("every_lane");
        cc.mov(every, lanes == 64 ? ~uint64_t{0} : (uint64_t{1} << lanes) - 1);
        cc.cmp(bits, every);
      }
      cc.jne(settled);
    }
    if (leaves) {
      cc.dec(leaf);
      cc.jnz(unrolled);
      for (int u = 0; u < kUnroll; ++u) {
        reduce_combine(ve, op, dtype, vmid[u], vacc[u]);
        ve.move(vacc[u], identity);
      }
      cc.mov(leaf, kLeafIterations);
    }
    cc.jmp(unrolled);
    cc.bind(single);
    cc.mov(rem, n);
    cc.sub(rem, i);
    cc.cmp(rem, lanes);
    cc.jl(vector_done);
    one_vector(vacc[0]);
    cc.add(i, lanes);
    cc.jmp(single);
    if (stops) {
      cc.bind(settled);  // the result is known: the lanes fold to it, the rest is not read
      cc.mov(i, n);
      cc.jmp(tail_done);
    }
    cc.bind(vector_done);
    // Float sums and products keep the scalar tail: a row shorter than a vector then adds in
    // order, as NumPy's does (bit for bit: int64 means of 5 elements round as NumPy's).
    const bool float_fold = (dtype == DType::Float32 || dtype == DType::Float64) &&
                            (op == ReduceOp::Sum || op == ReduceOp::Prod);
    if (isa == Isa::Avx512 && !float_fold) {
      // Note [Masked tail] (pointwise_codegen.cpp): the last rem < W elements in one masked pass,
      // the lanes past the row set to the identity.
      cc.test(rem, rem);
      cc.jz(tail_done);
      const ax::KReg tail = first_lanes(cc, rem);
      const ax::Vec v = emit_body(ve, ir, load_inputs_masked(ve, ir, vptr, tail), vhoisted)[ir.outputs[0]];
      if (store) ve.store_masked(dtype, ptr[nin], v, tail);
      ax::Vec t = ve.newv();
      ve.k_select(itemsize, tail, t, v, reduce_identity(ve, op, dtype));
      reduce_combine(ve, op, dtype, vacc[1], t);
      cc.mov(i, n);
    }
    cc.bind(tail_done);
    if (leaves)
      for (int u = 0; u < kUnroll; ++u) reduce_combine(ve, op, dtype, vacc[u], vmid[u]);
    for (int step = 1; step < kUnroll; step *= 2)  // a tree: (0, 1) and (2, 3), then (0, 2)
      for (int u = 0; u + step < kUnroll; u += 2 * step) reduce_combine(ve, op, dtype, vacc[u], vacc[u + step]);
    // Fold the lanes in a tree too, halving the vector each step: log2(W) dependent combinations
    // instead of W (a row of 333 float32 spent half its time folding one lane at a time). Lanes
    // past the meaningful half compute on leftovers and are never read.
    for (int bytes = lanes * itemsize / 2; bytes >= itemsize; bytes /= 2) {
      ax::Vec t = ve.newv();
      if (bytes == 32) cc.vextracti64x4(t.ymm(), vacc[0].zmm(), 1);
      else if (bytes == 16 && isa == Isa::Avx512) cc.vextracti32x4(t.xmm(), vacc[0].ymm(), 1);
      else if (bytes == 16) cc.vextracti128(t.xmm(), vacc[0].ymm(), 1);
      else cc.vpsrldq(t.xmm(), vacc[0].xmm(), bytes);
      reduce_combine(ve, op, dtype, vacc[0], t);
    }
    reduce_combine(se, op, dtype, sacc, vacc[0]);
    // The vector loop stepped its own input pointers (and the stored values', already past
    // element i); the scalar tail continues the inputs from element i.
    advance_to(cc, ptr, stride, nin, i);
  }

  cc.bind(scalar_loop);
  std::vector<ax::Vec> shoisted = hoist(se, ir, call, params_offset);
  // Float sums: leaves of kLeafIterations elements here too, added into smid.
  const bool leaves = op == ReduceOp::Sum && (dtype == DType::Float32 || dtype == DType::Float64);
  ax::Vec smid, sidentity;
  ax::Gp sleaf;
  if (leaves) {
    smid = reduce_identity(se, op, dtype);
    sidentity = reduce_identity(se, op, dtype);
    sleaf = cc.newInt64("sleaf");
    cc.mov(sleaf, kLeafIterations);
  }
  Label scalar_top = cc.newLabel(), scalar_end = cc.newLabel();
  cc.bind(scalar_top);
  cc.cmp(i, n);
  cc.jge(scalar_end);
  std::vector<ax::Vec> vals = emit_body(se, ir, load_inputs(cc, se, ir, ptr), shoisted);
  if (store) {
    se.store(dtype, ptr[nin], vals[ir.outputs[0]]);
    cc.add(ptr[nin], stride[nin]);
  }
  reduce_combine(se, op, dtype, sacc, vals[ir.outputs[0]]);
  for (int k = 0; k < nin; ++k) cc.add(ptr[k], stride[k]);
  cc.inc(i);
  if (leaves) {
    cc.dec(sleaf);
    cc.jnz(scalar_top);
    reduce_combine(se, op, dtype, smid, sacc);
    se.move(sacc, sidentity);
    cc.mov(sleaf, kLeafIterations);
  }
  cc.jmp(scalar_top);
  cc.bind(scalar_end);
  if (leaves) reduce_combine(se, op, dtype, sacc, smid);
  cc.bind(done);
}

}  // namespace detail

using namespace detail;

namespace {

Error build_row(ax::Compiler& cc, const ReductionKernelIR& r, Isa isa) {
  using Call = rt::ReductionCall;
  const int nops = static_cast<int>(r.prologue.input_dtypes.size()) + (r.store_value ? 1 : 0);
  RowKernel rk = begin_row_kernel<Call>(cc, isa, nops);
  const DType dtype = r.dtype();
  BodyEmitter se(cc, isa, 1);
  ax::Gp out = cc.newIntPtr("out");
  cc.mov(out, ax::qword_ptr(rk.call, offsetof(Call, out)));
  RowLoop rows = begin_rows(cc, rk);
  ax::Vec sacc = reduce_identity(se, r.op, dtype);
  Label fresh = cc.newLabel();
  cc.cmp(ax::qword_ptr(rk.call, offsetof(Call, accumulate)), 0);
  cc.je(fresh);
  se.load(dtype, sacc, out);
  cc.bind(fresh);
  emit_row_fold(cc, isa, r, r.op, rk, se, sacc);
  if (r.mean || r.sqrt) {
    Label store = cc.newLabel();
    cc.cmp(ax::qword_ptr(rk.call, offsetof(Call, finish)), 0);
    cc.je(store);
    emit_finish(se, r, load_divisor(cc, se, dtype, rk.call), sacc);
    cc.bind(store);
  }
  se.store(dtype, out, sacc);
  next_row(cc, rk, rows, out, nops);
  cc.endFunc();
  return cc.finalize();
}

}  // namespace

bool reduction_supported(const ReductionKernelIR& r, Isa isa) {
  // The library's rules (jit/lower), then the pointwise generator's for the prologue (same element
  // emitter), with room for the stored values' operand.
  const auto prologue = reduction_prologue(r);
  return prologue && pointwise_supported(*prologue, isa) &&
         r.prologue.input_dtypes.size() + 2 <= static_cast<size_t>(rt::kMaxKernelOperands);
}

Expected<rt::KernelPtr> generate_reduction(const ReductionKernelIR& r, Isa isa, bool want_listing) {
  const bool arg = is_arg_reduce(r.op);
  // Note [Pairwise sums]: eight leaves per accumulator lane per call.
  KernelTraits traits;
  // Note [Buffered strided rows] (rows of a chain, runtime/executor.cpp): operands after the
  // inputs are the stored values.
  if (isa != Isa::Scalar && !arg) traits.buffered_inputs = static_cast<int>(r.prologue.input_dtypes.size());
  if (r.op == ReduceOp::Sum && (r.dtype() == DType::Float32 || r.dtype() == DType::Float64)) {
    traits.sum_block_strided = 8 * kLeafIterations;  // the scalar loop
    traits.sum_block =
        isa == Isa::Scalar ? traits.sum_block_strided : traits.sum_block_strided * kUnroll * reduction_lanes(isa, r);
  }
  return assemble(
      std::string(arg ? "argreduce_" : "reduce_") + isa_name(isa), r.to_string(), want_listing,
      [&](ax::Compiler& cc) { return arg ? build_arg_reduction(cc, r, isa) : build_row(cc, r, isa); }, traits);
}

bool has_column_kernel(const ReductionKernelIR& r) {
  return !r.store_value && (!is_arg_reduce(r.op) || column_arg_supported(r.dtype()));
}

Expected<rt::KernelPtr> generate_column_reduction(const ReductionKernelIR& r, Isa isa, bool want_listing) {
  if (!has_column_kernel(r)) return Status::internal("no column kernel for " + r.to_string());
  if (is_arg_reduce(r.op))
    return assemble(std::string("argreduce_columns_") + isa_name(isa), r.to_string(), want_listing,
                    [&](ax::Compiler& cc) { return build_column_arg_reduction(cc, r, isa); });
  return assemble(std::string("reduce_columns_") + isa_name(isa), r.to_string(), want_listing,
                  [&](ax::Compiler& cc) { return build_column_reduction(cc, r, isa); });
}

Expected<ReductionKernels> reduction_kernels(const ReductionKernelIR& r) {
  ReductionKernels ks;
  auto row = cached_kernel(r.key(), [&](Isa isa, bool listing) { return generate_reduction(r, isa, listing); });
  if (!row) return row.error();
  ks.row = *row;
  if (has_column_kernel(r)) {
    auto column = cached_kernel("columns\n" + r.key(),
                                [&](Isa isa, bool listing) { return generate_column_reduction(r, isa, listing); });
    if (!column) return column.error();
    ks.column = *column;
  }
  return ks;
}

}  // namespace framejit::jit::x86
