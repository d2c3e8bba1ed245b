// pointwise_codegen.cpp — PTX for fused pointwise kernels: a grid-stride loop over 4-element
// chunks with vector accesses, then over single elements (Note [CUDA pointwise kernel ABI]).
#include "jit/cuda/pointwise_codegen.h"

#include <array>
#include <cstdint>
#include <vector>

#include "jit/cuda/element_emitter_p.h"
#include "jit/cuda/indexing_p.h"
#include "jit/lower/lowering.h"
#include "runtime/cuda/launch.h"

namespace framejit::jit::cuda {

using rt::DType;

// Note [Flat pointwise kernels]
// Most launches are over one dim once the launcher has collapsed what steps through memory as one
// (contiguous arrays, a scalar broadcast): for those, the element's address is its index times
// the operand's stride, and the coordinate arithmetic of the general form (a division per dim by
// a run-time size, four strides per operand) is dead code that the driver's JIT still compiles.
// So every pointwise kernel has two forms: `flat` (rank 1 only: a third of the PTX; ptxas here
// 5.5 ms against 12-20 for x + 1) and the general one, made as its `strided` twin. The launcher
// picks by the collapsed rank, and the twin's module loads only when a launch needs it (Note
// [Device modules load when needed] in backend.cpp).

bool pointwise_supported(const PointwiseKernelIR& ir) {
  if (!ir.well_formed() || !half_types_placed(ir)) return false;
  for (DType t : ir.input_dtypes)
    if (!pointwise_dtype(t)) return false;
  for (const ScalarExpr& e : ir.body) {
    if (!pointwise_dtype(e.dtype)) return false;
    if (scalar_op_is_math(e.op) && !is_fp(e.dtype)) return false;
  }
  return true;
}

Expected<std::string> pointwise_ptx(const PointwiseKernelIR& ir, const std::string& name, bool flat) {
  if (!pointwise_supported(ir)) return Status::unsupported("the PTX generator does not support this kernel");
  namespace abi = rt::cuda;
  PtxWriter w;
  ElementEmitter e(w);
  const std::string args = "args";
  const int nin = static_cast<int>(ir.input_dtypes.size()), nout = static_cast<int>(ir.outputs.size());
  const int nops = nin + nout;
  auto at = [&](int offset) { return "[" + args + "+" + std::to_string(offset) + "]"; };

  // Thread index and count, sizes, pointers and strides (kernel parameters: constant cache).
  std::string tid = w.reg(32), ntid = w.reg(32), ctaid = w.reg(32), nctaid = w.reg(32), gid = w.reg(32), nth = w.reg(32);
  w.op("mov.u32 " + tid + ", %tid.x");
  w.op("mov.u32 " + ntid + ", %ntid.x");
  w.op("mov.u32 " + ctaid + ", %ctaid.x");
  w.op("mov.u32 " + nctaid + ", %nctaid.x");
  w.op("mad.lo.u32 " + gid + ", " + ctaid + ", " + ntid + ", " + tid);
  w.op("mul.lo.u32 " + nth + ", " + nctaid + ", " + ntid);
  std::string n = w.reg(32), rank = w.reg(32), nvec = w.reg(32);
  w.op("ld.param.u32 " + n + ", " + at(abi::kArgsN));
  if (!flat) w.op("ld.param.u32 " + rank + ", " + at(abi::kArgsRank));
  w.op("ld.param.u32 " + nvec + ", " + at(abi::kArgsNvec));
  // A flat kernel (Note [Flat pointwise kernels]) reads dim 0's strides only.
  std::array<std::string, 3> shape;  // the outermost dim is never divided by
  std::array<FastDivRegs, 3> div;
  for (int d = 0; !flat && d < abi::kLaunchRank - 1; ++d) {
    shape[d] = w.reg(32);
    w.op("ld.param.u32 " + shape[d] + ", " + at(abi::kArgsShape + 4 * d));
    div[d] = load_fast_div(w, args, abi::kArgsDiv + 8 * d);
  }
  std::vector<std::string> ptr(nops);
  std::vector<std::array<std::string, abi::kLaunchRank>> stride(nops);
  for (int k = 0; k < nops; ++k) {
    ptr[k] = w.reg(64);
    w.op("ld.param.u64 " + ptr[k] + ", " + at(abi::kArgsPtr + 8 * k));
    for (int d = 0; d < (flat ? 1 : abi::kLaunchRank); ++d) {
      stride[k][d] = w.reg(64);
      w.op("ld.param.u64 " + stride[k][d] + ", " + at(abi::kArgsStride + 8 * (abi::kLaunchRank * k + d)));
    }
  }
  std::array<std::string, 3> rank_is;
  if (!flat) rank_is = rank_predicates(w, rank);

  const std::vector<std::string> hoisted = e.hoist(ir, args, abi::kArgsParams);

  // Each operand's address of element `idx`.
  auto addresses = [&](const std::string& idx) {
    std::vector<std::string> addr(nops);
    if (flat) {
      std::string wide = w.reg(64);
      w.op("cvt.u64.u32 " + wide + ", " + idx);
      for (int k = 0; k < nops; ++k) {
        addr[k] = w.reg(64);
        w.op("mad.lo.s64 " + addr[k] + ", " + wide + ", " + stride[k][0] + ", " + ptr[k]);
      }
      return addr;
    }
    std::vector<std::string> off = strided_offsets(w, idx, rank_is, shape, div, stride);
    for (int k = 0; k < nops; ++k) {
      addr[k] = w.reg(64);
      w.op("add.s64 " + addr[k] + ", " + ptr[k] + ", " + off[k]);
    }
    return addr;
  };
  auto outputs_of = [&](const std::vector<std::string>& v) {
    std::vector<std::string> out(nout);
    for (int j = 0; j < nout; ++j) out[j] = v[ir.outputs[j]];
    return out;
  };

  // ---- 4-element chunks ---------------------------------------------------------------------------
  std::string p = w.reg(1);
  {
  std::vector<std::string> bcast(nin);  // inputs broadcast along dim 0: one load per chunk
  for (int k = 0; k < nin; ++k) {
    bcast[k] = w.reg(1);
    w.op("setp.eq.s64 " + bcast[k] + ", " + stride[k][0] + ", 0");
  }
  std::string c = w.reg(32), elem = w.reg(32);
  std::string vloop = w.label(), vdone = w.label();
  w.op("mov.u32 " + c + ", " + gid);
  w.place(vloop);
  w.op("setp.ge.u32 " + p + ", " + c + ", " + nvec);
  w.op("@" + p + " bra.uni " + vdone);
  w.op("shl.b32 " + elem + ", " + c + ", 2");
  {
    std::vector<std::string> addr = addresses(elem);
    std::vector<std::vector<std::string>> lanes(nin);
    for (int k = 0; k < nin; ++k) {
      // Both forms into the same registers; the broadcast one replicates lane 0.
      std::string vec_load = w.label(), loaded = w.label();
      w.op("@!" + bcast[k] + " bra.uni " + vec_load);
      std::string one = e.load(ir.input_dtypes[k], addr[k]);
      lanes[k] = {w.reg(reg_bits(ir.input_dtypes[k])), w.reg(reg_bits(ir.input_dtypes[k])),
                  w.reg(reg_bits(ir.input_dtypes[k])), w.reg(reg_bits(ir.input_dtypes[k]))};
      for (int j = 0; j < 4; ++j) w.op(std::string("mov.") + btype(ir.input_dtypes[k]) + " " + lanes[k][j] + ", " + one);
      w.op("bra.uni " + loaded);
      w.place(vec_load);
      std::vector<std::string> v4 = e.load4(ir.input_dtypes[k], addr[k]);
      for (int j = 0; j < 4; ++j) w.op(std::string("mov.") + btype(ir.input_dtypes[k]) + " " + lanes[k][j] + ", " + v4[j]);
      w.place(loaded);
    }
    // Four copies of the body, one per lane: independent chains for the scheduler (Note [PTX
    // size] in jit/cuda/backend.cpp says what a loop over the lanes cost instead).
    std::vector<std::vector<std::string>> results(nout, std::vector<std::string>(4));
    for (int j = 0; j < 4; ++j) {
      std::vector<std::string> in(nin);
      for (int k = 0; k < nin; ++k) in[k] = lanes[k][j];
      std::vector<std::string> out = outputs_of(e.body(ir, hoisted, in));
      for (int o = 0; o < nout; ++o) results[o][j] = out[o];
    }
    for (int o = 0; o < nout; ++o) e.store4(ir.output_dtypes[o], addr[nin + o], results[o]);
  }
  w.op("add.u32 " + c + ", " + c + ", " + nth);
  w.op("bra.uni " + vloop);
  w.place(vdone);
  }

  // ---- single elements ---------------------------------------------------------------------------
  std::string i = w.reg(32), sloop = w.label(), sdone = w.label();
  w.op("shl.b32 " + i + ", " + nvec + ", 2");
  w.op("add.u32 " + i + ", " + i + ", " + gid);
  w.place(sloop);
  w.op("setp.ge.u32 " + p + ", " + i + ", " + n);
  w.op("@" + p + " bra.uni " + sdone);
  {
    std::vector<std::string> addr = addresses(i);
    std::vector<std::string> in(nin);
    for (int k = 0; k < nin; ++k) in[k] = e.load(ir.input_dtypes[k], addr[k]);
    std::vector<std::string> out = outputs_of(e.body(ir, hoisted, in));
    for (int o = 0; o < nout; ++o) e.store(ir.output_dtypes[o], addr[nin + o], out[o]);
  }
  w.op("add.u32 " + i + ", " + i + ", " + nth);
  w.op("bra.uni " + sloop);
  w.place(sdone);
  w.op("ret");
  if (!e.failed().empty()) return Status::unsupported(e.failed());

  std::string ptx = module_header(ir.to_string());
  ptx += "\n.visible .entry " + name + "(\n\t.param .align 8 .b8 " + args + "[" + std::to_string(abi::kArgsSize) + "]\n)\n{\n";
  ptx += w.body();
  ptx += "}\n";
  return ptx;
}

}  // namespace framejit::jit::cuda
