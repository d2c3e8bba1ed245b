// row_chain_codegen.cpp — PTX for a chain of kernels and last-axis reductions over the same rows
// as one kernel (Note [CUDA row-chain kernel ABI]): softmax and layer norm read their input once
// from memory and the rest from cache.
#include "jit/cuda/row_chain_codegen.h"

#include <array>
#include <cstdint>
#include <vector>

#include "jit/cuda/combiner_p.h"
#include "jit/cuda/indexing_p.h"
#include "jit/cuda/pointwise_codegen.h"
#include "jit/cuda/reduction_codegen.h"
#include "runtime/cuda/row_chain.h"

namespace framejit::jit::cuda {

namespace {

using rt::DType;
namespace abi = rt::cuda;

std::string at(int offset) { return "[args+" + std::to_string(offset) + "]"; }

}  // namespace

bool row_chain_supported(const RowChainIR& chain) {
  if (chain.parts.empty() || chain.parts.size() > static_cast<size_t>(abi::kChainParts)) return false;
  if (chain.caches < 0 || chain.caches > abi::kChainCaches) return false;
  size_t slots = 0, params = 0;
  for (size_t j = 0; j < chain.parts.size(); ++j) {
    const RowChainIR::Part& p = chain.parts[j];
    const PointwiseKernelIR& ir = p.reduction ? p.red.prologue : p.kernel;
    if (p.reduction ? (!reduction_supported(p.red) || is_arg_reduce(p.red.op)) : !pointwise_supported(p.kernel))
      return false;
    if (p.forwarded.size() != ir.input_dtypes.size()) return false;
    for (size_t k = 0; k < p.forwarded.size(); ++k) {
      const int f = p.forwarded[k];
      if (f < 0) continue;
      if (f >= static_cast<int>(j) || !chain.parts[f].reduction) return false;
      if (acc_type(chain.parts[f].red.dtype()) != acc_type(ir.input_dtypes[k])) return false;
    }
    if (p.cached.size() != ir.input_dtypes.size()) return false;
    for (size_t k = 0; k < p.cached.size(); ++k) {
      const int q = p.cached[k];
      if (q < 0) continue;
      const int size = rt::dtype_itemsize(ir.input_dtypes[k]);
      if (q >= chain.caches || p.forwarded[k] >= 0 || (size != 4 && size != 8)) return false;
    }
    slots += ir.input_dtypes.size() + (p.reduction ? 1 + (p.red.store_value ? 1 : 0) : ir.outputs.size());
    params += ir.param_dtypes.size();
  }
  return slots <= static_cast<size_t>(abi::kChainSlots) && params <= static_cast<size_t>(abi::kChainParams);
}

Expected<std::string> row_chain_ptx(const RowChainIR& chain, const std::string& name) {
  if (!row_chain_supported(chain)) return Status::unsupported("the PTX generator does not support this chain");
  PtxWriter w;
  ElementEmitter e(w);
  auto u32 = [&](int offset) {
    std::string v = w.reg(32);
    w.op("ld.param.u32 " + v + ", " + at(offset));
    return v;
  };
  auto u64 = [&](int offset) {
    std::string v = w.reg(64);
    w.op("ld.param.u64 " + v + ", " + at(offset));
    return v;
  };

  LaneGroups g(w, u32(abi::kChainLanesLog2));
  const std::string &lanes = g.lanes, &lane = g.lane, &group = g.group, &block_group = g.block_group;
  const std::string rows = u32(abi::kChainRows), lead_rank = u32(abi::kChainLeadRankAt);
  std::array<std::string, 3> lead_shape;
  std::array<FastDivRegs, 3> lead_div;
  for (int d = 0; d < 3; ++d) {
    lead_shape[d] = u32(abi::kChainLeadShape + 4 * d);
    lead_div[d] = load_fast_div(w, "args", abi::kChainLeadDiv + 8 * d);
  }

  // Slots in ABI order, with their pointers, lead strides and inner strides.
  struct PartSlots {
    std::vector<int> in, out;  // slot numbers: inputs; a kernel's outputs or a reduction's result (+ values)
  };
  std::vector<PartSlots> part_slots(chain.parts.size());
  std::vector<int> fill_slot(chain.caches, -1), fill_size(chain.caches, 0);
  std::vector<std::string> ptr, inner;
  std::vector<std::array<std::string, 4>> lead_stride;
  std::vector<std::vector<std::string>> hoisted(chain.parts.size());
  std::vector<PointwiseKernelIR> irs(chain.parts.size());
  int param = 0;
  for (size_t j = 0; j < chain.parts.size(); ++j) {
    const RowChainIR::Part& p = chain.parts[j];
    irs[j] = p.reduction ? twin_prologue(p.red) : p.kernel;
    const PointwiseKernelIR& ir = irs[j];
    const int nout = p.reduction ? 1 + (p.red.store_value ? 1 : 0) : static_cast<int>(ir.outputs.size());
    auto add_slot = [&](std::vector<int>& to) {
      const int s = static_cast<int>(ptr.size());
      to.push_back(s);
      ptr.push_back(u64(abi::kChainPtr + 8 * s));
      inner.push_back(u64(abi::kChainInner + 8 * s));
      std::array<std::string, 4> ls;
      for (int d = 0; d < 4; ++d) ls[d] = u64(abi::kChainLeadStride + 8 * (4 * s + d));
      lead_stride.push_back(ls);
    };
    for (size_t k = 0; k < ir.input_dtypes.size(); ++k) {
      add_slot(part_slots[j].in);
      const int q = p.cached[k];
      if (q >= 0 && fill_slot[q] < 0) {
        fill_slot[q] = part_slots[j].in.back();
        fill_size[q] = rt::dtype_itemsize(ir.input_dtypes[k]);
      }
    }
    for (int k = 0; k < nout; ++k) add_slot(part_slots[j].out);
    hoisted[j] = e.hoist(ir, "args", abi::kChainParamsAt + 8 * param);
    param += static_cast<int>(ir.param_dtypes.size());
  }

  // Row caches (Note [CUDA row-chain kernel ABI]): this group's piece of shared memory, filled
  // at the start of each row by asynchronous copies from the first part that reads each array.
  std::string cache_on = w.reg(1), group_base = w.reg(32);
  std::vector<std::string> cache_base(chain.caches);
  {
    std::string on = u32(abi::kChainCacheOn), group_bytes = u32(abi::kChainGroupBytes);
    w.op("setp.ne.u32 " + cache_on + ", " + on + ", 0");
    w.op("mov.u32 " + group_base + ", fj_rows");
    w.op("mad.lo.u32 " + group_base + ", " + group + ", " + group_bytes + ", " + group_base);
    for (int q = 0; q < chain.caches; ++q) {
      cache_base[q] = w.reg(32);
      w.op("ld.param.u32 " + cache_base[q] + ", " + at(abi::kChainCacheOffset + 4 * q));
      w.op("add.u32 " + cache_base[q] + ", " + cache_base[q] + ", " + group_base);
    }
  }
  // Four elements of a cached array (4 or 8 bytes each) from shared address `addr`.
  auto shared4 = [&](DType t, const std::string& addr, const std::array<std::string, 4>& v) {
    if (rt::dtype_itemsize(t) == 4) {
      w.op("ld.shared.v4.b32 {" + v[0] + ", " + v[1] + ", " + v[2] + ", " + v[3] + "}, [" + addr + "]");
      return;
    }
    w.op("ld.shared.v2.b64 {" + v[0] + ", " + v[1] + "}, [" + addr + "]");
    w.op("ld.shared.v2.b64 {" + v[2] + ", " + v[3] + "}, [" + addr + "+16]");
  };

  // A barrier for the group: the block's, or the warp's for groups of at most a warp.
  auto group_barrier = [&] {
    std::string warp_sync = w.label(), synced = w.label();
    w.op("@!" + block_group + " bra.uni " + warp_sync);
    w.op("bar.sync 0");
    w.op("bra.uni " + synced);
    w.place(warp_sync);
    w.op("bar.warp.sync -1");
    w.place(synced);
  };

  std::string p = w.reg(1);
  g.open(rows);
  const std::string &row = g.item, &active = g.active;
  std::vector<std::string> lead_off = strided_offsets(w, row, rank_predicates(w, lead_rank), lead_shape, lead_div, lead_stride);
  std::vector<std::string> base(ptr.size());
  for (size_t s = 0; s < ptr.size(); ++s) {
    base[s] = w.reg(64);
    w.op("add.s64 " + base[s] + ", " + ptr[s] + ", " + lead_off[s]);
  }

  // Fill the row caches: 16-byte asynchronous copies (or element copies where the launcher found
  // the row unaligned), all issued before any is waited for.
  {
    std::string skip = w.label();
    w.op("@!" + cache_on + " bra.uni " + skip);
    for (int q = 0; q < chain.caches; ++q) {
      const std::string cn = u32(abi::kChainCacheN + 4 * q), chunks = u32(abi::kChainCacheChunks + 4 * q);
      const std::string size = std::to_string(fill_size[q]);
      std::string c = w.reg(32), loop = w.label(), loop_done = w.label(), sa = w.reg(32), wide = w.reg(64), ga = w.reg(64);
      w.op("mov.u32 " + c + ", " + lane);
      w.op("@!" + active + " mov.u32 " + c + ", " + chunks);
      w.place(loop);
      w.op("setp.ge.u32 " + p + ", " + c + ", " + chunks);
      w.op("@" + p + " bra " + loop_done);
      w.op("mad.lo.u32 " + sa + ", " + c + ", 16, " + cache_base[q]);
      w.op("mul.wide.u32 " + wide + ", " + c + ", 16");
      w.op("add.s64 " + ga + ", " + base[fill_slot[q]] + ", " + wide);
      w.op("cp.async.cg.shared.global [" + sa + "], [" + ga + "], 16");
      w.op("add.u32 " + c + ", " + c + ", " + lanes);
      w.op("bra " + loop);
      w.place(loop_done);
      // The elements past the whole chunks (all of them when unaligned).
      std::string el = w.reg(32), tail = w.label(), tail_done = w.label();
      w.op("mul.lo.u32 " + el + ", " + chunks + ", " + std::to_string(16 / fill_size[q]));
      w.op("add.u32 " + el + ", " + el + ", " + lane);
      w.op("@!" + active + " mov.u32 " + el + ", " + cn);
      w.place(tail);
      w.op("setp.ge.u32 " + p + ", " + el + ", " + cn);
      w.op("@" + p + " bra " + tail_done);
      w.op("mad.lo.u32 " + sa + ", " + el + ", " + size + ", " + cache_base[q]);
      w.op("mul.wide.u32 " + wide + ", " + el + ", " + size);
      w.op("add.s64 " + ga + ", " + base[fill_slot[q]] + ", " + wide);
      w.op("cp.async.ca.shared.global [" + sa + "], [" + ga + "], " + size);
      w.op("add.u32 " + el + ", " + el + ", " + lanes);
      w.op("bra " + tail);
      w.place(tail_done);
    }
    w.op("cp.async.wait_all");
    group_barrier();
    w.place(skip);
  }

  std::vector<std::string> result(chain.parts.size());  // each reduction part's finished value
  for (size_t j = 0; j < chain.parts.size(); ++j) {
    const RowChainIR::Part& part = chain.parts[j];
    const PointwiseKernelIR& ir = irs[j];
    const PartSlots& sl = part_slots[j];
    const int nin = static_cast<int>(ir.input_dtypes.size());
    w.comment("part " + std::to_string(j) + (part.reduction ? ": reduction" : ": kernel"));
    std::string n = u32(abi::kChainN + 4 * static_cast<int>(j));
    Combiner c(e, part.reduction ? part.red.op : ReduceOp::Sum, part.reduction ? part.red.dtype() : DType::Float32);
    std::string acc;
    if (part.reduction) {
      acc = e.reg(c.type());
      w.op(std::string("mov.") + btype(c.type()) + " " + acc + ", " + c.identity());
    }
    // Vector chunks (4 elements, 16-byte accesses), then single elements. A broadcast input
    // (inner stride 0) is read once per chunk; a forwarded one is its reduction's register.
    std::string nvec = u32(abi::kChainNvec + 4 * static_cast<int>(j));
    {
      std::string chunk = w.reg(32), loop = w.label(), loop_done = w.label(), wide = w.reg(64);
      w.op("mov.u32 " + chunk + ", " + lane);
      w.op("@!" + active + " mov.u32 " + chunk + ", " + nvec);
      w.place(loop);
      w.op("setp.ge.u32 " + p + ", " + chunk + ", " + nvec);
      w.op("@" + p + " bra " + loop_done);
      w.op("mul.wide.u32 " + wide + ", " + chunk + ", 4");
      auto addr_of = [&](int s) {
        std::string a = w.reg(64);
        w.op("mad.lo.s64 " + a + ", " + wide + ", " + inner[s] + ", " + base[s]);
        return a;
      };
      std::vector<std::array<std::string, 4>> lanes4(nin);
      for (int k = 0; k < nin; ++k) {
        if (part.forwarded[k] >= 0) {
          lanes4[k].fill(result[part.forwarded[k]]);
          continue;
        }
        const DType t = ir.input_dtypes[k];
        const int s = sl.in[k];
        const int q = part.cached[k];
        std::string a = addr_of(s), bcast = w.reg(1), vec_load = w.label(), loaded = w.label();
        for (auto& r : lanes4[k]) r = e.reg(t);
        std::string cache_addr;
        if (q >= 0) {
          cache_addr = w.reg(32);
          w.op("mad.lo.u32 " + cache_addr + ", " + chunk + ", " + std::to_string(4 * rt::dtype_itemsize(t)) + ", " +
               cache_base[q]);
          std::string from_memory = w.label();
          w.op("@!" + cache_on + " bra.uni " + from_memory);
          shared4(t, cache_addr, lanes4[k]);
          w.op("bra.uni " + loaded);
          w.place(from_memory);
        }
        w.op("setp.eq.s64 " + bcast + ", " + inner[s] + ", 0");
        w.op("@!" + bcast + " bra " + vec_load);
        std::string one = e.load(t, a);
        for (auto& r : lanes4[k]) w.op(std::string("mov.") + btype(t) + " " + r + ", " + one);
        w.op("bra " + loaded);
        w.place(vec_load);
        std::vector<std::string> v4 = e.load4(t, a);
        for (int l = 0; l < 4; ++l) w.op(std::string("mov.") + btype(t) + " " + lanes4[k][l] + ", " + v4[l]);
        w.place(loaded);
      }
      std::vector<std::vector<std::string>> values(4);
      for (int l = 0; l < 4; ++l) {
        std::vector<std::string> in(nin);
        for (int k = 0; k < nin; ++k) in[k] = lanes4[k][l];
        values[l] = e.body(ir, hoisted[j], in);
      }
      if (part.reduction) {
        std::vector<std::string> v(4);
        for (int l = 0; l < 4; ++l) v[l] = values[l][ir.outputs[0]];
        if (part.red.store_value) e.store4(c.type(), addr_of(sl.out[1]), v);
        for (int l = 0; l < 4; ++l) c.combine(acc, "", v[l], "");
      } else {
        for (size_t o = 0; o < ir.outputs.size(); ++o) {
          std::vector<std::string> v(4);
          for (int l = 0; l < 4; ++l) v[l] = values[l][ir.outputs[o]];
          e.store4(ir.output_dtypes[o], addr_of(sl.out[o]), v);
        }
      }
      w.op("add.u32 " + chunk + ", " + chunk + ", " + lanes);
      w.op("bra " + loop);
      w.place(loop_done);
    }
    std::string el = w.reg(32), loop = w.label(), loop_done = w.label();
    w.op("shl.b32 " + el + ", " + nvec + ", 2");
    w.op("add.u32 " + el + ", " + el + ", " + lane);
    w.op("@!" + active + " mov.u32 " + el + ", " + n);
    w.place(loop);
    w.op("setp.ge.u32 " + p + ", " + el + ", " + n);
    w.op("@" + p + " bra " + loop_done);
    {
      std::string wide = w.reg(64);
      w.op("cvt.u64.u32 " + wide + ", " + el);
      auto addr_of = [&](int s) {
        std::string a = w.reg(64);
        w.op("mad.lo.s64 " + a + ", " + wide + ", " + inner[s] + ", " + base[s]);
        return a;
      };
      std::vector<std::string> in(nin);
      for (int k = 0; k < nin; ++k) {
        if (part.forwarded[k] >= 0) {
          in[k] = result[part.forwarded[k]];
          continue;
        }
        const DType t = ir.input_dtypes[k];
        const int q = part.cached[k];
        if (q < 0) {
          in[k] = e.load(t, addr_of(sl.in[k]));
          continue;
        }
        const std::string bt = btype(t);
        std::string cache_addr = w.reg(32), loaded = w.label();
        w.op("mad.lo.u32 " + cache_addr + ", " + el + ", " + std::to_string(rt::dtype_itemsize(t)) + ", " + cache_base[q]);
        in[k] = e.reg(t);
        std::string from_memory = w.label();
        w.op("@!" + cache_on + " bra.uni " + from_memory);
        w.op("ld.shared." + bt + " " + in[k] + ", [" + cache_addr + "]");
        w.op("bra.uni " + loaded);
        w.place(from_memory);
        w.op("mov." + bt + " " + in[k] + ", " + e.load(t, addr_of(sl.in[k])));
        w.place(loaded);
      }
      std::vector<std::string> v = e.body(ir, hoisted[j], in);
      if (part.reduction) {
        const std::string& value = v[ir.outputs[0]];
        if (part.red.store_value) e.store(c.type(), addr_of(sl.out[1]), value);
        c.combine(acc, "", value, "");
      } else {
        for (size_t o = 0; o < ir.outputs.size(); ++o) e.store(ir.output_dtypes[o], addr_of(sl.out[o]), v[ir.outputs[o]]);
      }
    }
    w.op("add.u32 " + el + ", " + el + ", " + lanes);
    w.op("bra " + loop);
    w.place(loop_done);
    if (part.reduction) {
      // Every lane of the group ends with the row's value: the butterfly leaves it in each lane
      // of a warp's group; a block's group broadcasts it through shared memory.
      c.butterfly(acc, "", g.warp_lanes, 16);
      std::string skip = w.label();
      w.op("@!" + block_group + " bra.uni " + skip);
      c.block_combine(acc, "", g.tid, g.ntid, true);
      w.place(skip);
      result[j] = c.finish(part.red, acc, at(abi::kChainDivisor + 8 * static_cast<int>(j)));
      std::string store = w.reg(1);
      w.op("setp.eq.u32 " + store + ", " + lane + ", 0");
      w.op("and.pred " + store + ", " + store + ", " + active);
      std::string skip_store = w.label();
      w.op("@!" + store + " bra " + skip_store);
      e.store(c.type(), base[sl.out[0]], result[j]);
      w.place(skip_store);
    }
    // What this part wrote is read by other lanes of the group in later parts; and the next row's
    // caches overwrite what this row's parts read.
    group_barrier();
  }
  g.close();
  w.op("ret");
  if (!e.failed().empty()) return Status::unsupported(e.failed());

  std::string ptx = module_header(chain.to_string());
  ptx += "\n" + Combiner::shared_declarations() + ".extern .shared .align 16 .b8 fj_rows[];\n";
  ptx += "\n.visible .entry " + name + "(\n\t.param .align 8 .b8 args[" + std::to_string(abi::kChainSize) + "]\n)\n{\n";
  ptx += w.body();
  ptx += "}\n";
  return ptx;
}

}  // namespace framejit::jit::cuda
