// reduction_codegen.cpp — PTX for reductions: groups of lanes per output, butterfly shuffles,
// partial results combined by a second entry (Note [CUDA reduction kernel ABI]).
#include "jit/cuda/reduction_codegen.h"

#include <array>
#include <cstdint>
#include <vector>

#include "jit/cuda/combiner_p.h"
#include "jit/cuda/indexing_p.h"
#include "jit/cuda/pointwise_codegen.h"
#include "runtime/cuda/reduction.h"

namespace framejit::jit::cuda {

namespace {

using rt::DType;
namespace abi = rt::cuda;

// One entry of a reduction module: the reduction, or (combine) its partials' combination.
class ReductionEmitter {
public:
  ReductionEmitter(const ReductionKernelIR& r, bool combine)
      : r_(r), ir_(twin_prologue(r)), combine_(combine), e_(w_), c_(e_, r.op, r.dtype()), t_(c_.type()), arg_(c_.arg()) {}

  // The entry's body (without its header), or the first thing the element emitter refused.
  Expected<std::string> body();

private:
  std::string u32(int offset) { return param_u32(w_, offset); }
  std::string u64(int offset) { return param_u64(w_, offset); }

  const ReductionKernelIR& r_;
  PointwiseKernelIR ir_;
  bool combine_;
  PtxWriter w_;
  ElementEmitter e_;
  Combiner c_;
  DType t_;
  bool arg_;
};

Expected<std::string> ReductionEmitter::body() {
  const int nin = static_cast<int>(ir_.input_dtypes.size());
  // The combine entry reads partials only: no operands.
  const int nops = combine_ ? 0 : nin + (r_.store_value ? 1 : 0);
  const std::string bt = btype(t_);
  const int vbytes = reg_bits(t_) / 8;

  std::string y = w_.reg(32);
  w_.op("mov.u32 " + y + ", %ctaid.y");
  const std::string outputs = u32(abi::kRedOutputs), count = u32(abi::kRedCount);
  const std::array<std::string, 3> kept_rank_is = rank_predicates(w_, u32(abi::kRedKeptRank));
  const std::array<std::string, 3> red_rank_is = rank_predicates(w_, u32(abi::kRedRedRank));
  std::array<std::string, 3> kept_shape, red_shape;
  std::array<FastDivRegs, 3> kept_div, red_div;
  for (int d = 0; d < 3; ++d) {
    kept_shape[d] = u32(abi::kRedKeptShape + 4 * d);
    red_shape[d] = u32(abi::kRedRedShape + 4 * d);
    kept_div[d] = load_fast_div(w_, "args", abi::kRedKeptDiv + 8 * d);
    red_div[d] = load_fast_div(w_, "args", abi::kRedRedDiv + 8 * d);
  }
  const std::string splits = u32(abi::kRedSplits), chunk = u32(abi::kRedChunk);
  LaneGroups g(w_, u32(abi::kRedLanesLog2));
  const std::string &lanes = g.lanes, &lane = g.lane;

  // Operands: each input's (and the stored values') pointer with its kept and reduced strides; the
  // output's pointer and kept strides.
  std::vector<std::string> ptr(nops);
  std::vector<std::array<std::string, 4>> kept_stride(nops + 1), red_stride(nops);
  for (int k = 0; k < nops; ++k) {
    ptr[k] = u64(abi::kRedPtr + 8 * k);
    for (int d = 0; d < abi::kReduceRank; ++d) {
      kept_stride[k][d] = u64(abi::kRedKeptStride + 8 * (abi::kReduceRank * k + d));
      red_stride[k][d] = u64(abi::kRedRedStride + 8 * (abi::kReduceRank * k + d));
    }
  }
  const std::string out = u64(abi::kRedOut);
  for (int d = 0; d < abi::kReduceRank; ++d) kept_stride[nops][d] = u64(abi::kRedOutStride + 8 * d);
  const std::string pvalue = u64(abi::kRedPartialValue), pindex = u64(abi::kRedPartialIndex);
  const std::vector<std::string> hoisted = combine_ ? std::vector<std::string>() : e_.hoist(ir_, "args", abi::kRedParams);

  // This block's slice of every output's reduced elements.
  std::string r_begin = w_.reg(32), r_end = w_.reg(32);
  w_.op("mul.lo.u32 " + r_begin + ", " + y + ", " + chunk);
  w_.op("add.u32 " + r_end + ", " + r_begin + ", " + chunk);
  w_.op("min.u32 " + r_end + ", " + r_end + ", " + count);

  std::string p = w_.reg(1);
  g.open(outputs);
  const std::string &o = g.item, &active = g.active;

  std::vector<std::string> kept_off = strided_offsets(w_, o, kept_rank_is, kept_shape, kept_div, kept_stride);
  std::vector<std::string> base(nops);
  for (int k = 0; k < nops; ++k) {
    base[k] = w_.reg(64);
    w_.op("add.s64 " + base[k] + ", " + ptr[k] + ", " + kept_off[k]);
  }
  // Where this output's partials are: o * (partials per output) + slice.
  std::string slot = w_.reg(32);
  w_.op("mad.lo.u32 " + slot + ", " + o + ", " + (combine_ ? count : splits) + ", " + (combine_ ? "0" : y));

  std::string acc = e_.reg(t_), acc_i = arg_ ? w_.reg(64) : std::string();
  w_.op("mov." + bt + " " + acc + ", " + c_.identity());
  if (arg_) w_.op("mov.b64 " + acc_i + ", 0x7FFFFFFFFFFFFFFF");

  std::string rr = w_.reg(32), elem_loop = w_.label(), elem_done = w_.label();
  w_.op("add.u32 " + rr + ", " + r_begin + ", " + lane);
  w_.op("@!" + active + " mov.u32 " + rr + ", " + r_end);
  w_.place(elem_loop);
  w_.op("setp.ge.u32 " + p + ", " + rr + ", " + r_end);
  w_.op("@" + p + " bra " + elem_done);
  {
    std::string v, v_i;
    if (combine_) {
      std::string idx = w_.reg(32), wide = w_.reg(64), addr = w_.reg(64);
      w_.op("add.u32 " + idx + ", " + slot + ", " + rr);
      w_.op("mul.wide.u32 " + wide + ", " + idx + ", " + std::to_string(vbytes));
      w_.op("add.s64 " + addr + ", " + pvalue + ", " + wide);
      v = e_.reg(t_);
      w_.op("ld.global." + bt + " " + v + ", [" + addr + "]");
      if (arg_) {
        v_i = w_.reg(64);
        w_.op("mul.wide.u32 " + wide + ", " + idx + ", 8");
        w_.op("add.s64 " + addr + ", " + pindex + ", " + wide);
        w_.op("ld.global.b64 " + v_i + ", [" + addr + "]");
      }
    } else {
      std::vector<std::string> red_off = strided_offsets(w_, rr, red_rank_is, red_shape, red_div, red_stride);
      std::vector<std::string> addr(nops), in(nin);
      for (int k = 0; k < nops; ++k) {
        addr[k] = w_.reg(64);
        w_.op("add.s64 " + addr[k] + ", " + base[k] + ", " + red_off[k]);
      }
      for (int k = 0; k < nin; ++k) in[k] = e_.load(ir_.input_dtypes[k], addr[k]);
      v = e_.body(ir_, hoisted, in)[ir_.outputs[0]];
      if (r_.store_value) e_.store(t_, addr[nin], v);
      if (arg_) {
        v_i = w_.reg(64);
        w_.op("cvt.u64.u32 " + v_i + ", " + rr);
      }
    }
    c_.combine(acc, acc_i, v, v_i);
  }
  w_.op("add.u32 " + rr + ", " + rr + ", " + lanes);
  w_.op("bra " + elem_loop);
  w_.place(elem_done);

  // The group's lanes, then (a group of the whole block) the warps.
  c_.butterfly(acc, acc_i, g.warp_lanes, 16);
  {
    std::string skip = w_.label();
    w_.op("@!" + g.block_group + " bra.uni " + skip);
    c_.block_combine(acc, acc_i, g.tid, g.ntid, false);
    w_.place(skip);
  }

  // Lane 0 of an active group stores: the finished result, or this slice's partial.
  std::string store = w_.reg(1), skip_store = w_.label();
  w_.op("setp.eq.u32 " + store + ", " + lane + ", 0");
  w_.op("and.pred " + store + ", " + store + ", " + active);
  w_.op("@!" + store + " bra " + skip_store);
  {
    std::string to_partial = w_.label(), stored = w_.label();
    if (!combine_) {
      w_.op("setp.gt.u32 " + p + ", " + splits + ", 1");
      w_.op("@" + p + " bra " + to_partial);
    }
    std::string addr = w_.reg(64);
    w_.op("add.s64 " + addr + ", " + out + ", " + kept_off[nops]);
    if (arg_) {
      w_.op("st.global.b64 [" + addr + "], " + acc_i);
    } else {
      e_.store(t_, addr, c_.finish(r_, acc, param_at(abi::kRedDivisor)));
    }
    if (!combine_) {
      w_.op("bra " + stored);
      w_.place(to_partial);
      std::string wide = w_.reg(64), paddr = w_.reg(64);
      w_.op("mul.wide.u32 " + wide + ", " + slot + ", " + std::to_string(vbytes));
      w_.op("add.s64 " + paddr + ", " + pvalue + ", " + wide);
      w_.op("st.global." + bt + " [" + paddr + "], " + acc);
      if (arg_) {
        w_.op("mul.wide.u32 " + wide + ", " + slot + ", 8");
        w_.op("add.s64 " + paddr + ", " + pindex + ", " + wide);
        w_.op("st.global.b64 [" + paddr + "], " + acc_i);
      }
    }
    w_.place(stored);
  }
  w_.place(skip_store);
  g.close();
  w_.op("ret");
  if (!e_.failed().empty()) return Status::unsupported(e_.failed());
  return w_.body();
}

}  // namespace

bool reduction_supported(const ReductionKernelIR& r) {
  // The library's rules (jit/lower), then the pointwise generator's for the prologue, with room
  // for the stored values' operand.
  const auto prologue = reduction_prologue(r);
  return prologue && pointwise_supported(*prologue) &&
         r.prologue.input_dtypes.size() + 2 <= static_cast<size_t>(rt::kMaxKernelOperands);
}

Expected<std::string> reduction_ptx(const ReductionKernelIR& r, const std::string& name) {
  if (!reduction_supported(r)) return Status::unsupported("the PTX generator does not support this reduction");
  std::string ptx = module_header(r.to_string());
  ptx += "\n" + Combiner::shared_declarations();
  for (bool combine : {false, true}) {
    ReductionEmitter e(r, combine);
    auto body = e.body();
    if (!body) return body.error();
    ptx += "\n.visible .entry " + name + (combine ? "_combine" : "") + "(\n\t.param .align 8 .b8 args[" +
           std::to_string(abi::kRedSize) + "]\n)\n{\n" + *body + "}\n";
  }
  return ptx;
}

}  // namespace framejit::jit::cuda
