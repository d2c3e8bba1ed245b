// indexing.cpp — lane groups and tile loops, flat-index coordinates and module headers in PTX.
#include "jit/cuda/indexing_p.h"

namespace framejit::jit::cuda {

LaneGroups::LaneGroups(PtxWriter& w, const std::string& lanes_log2) : w_(w) {
  tid = w.reg(32), ntid = w.reg(32), ctaid = w.reg(32), nctaid = w.reg(32);
  w.op("mov.u32 " + tid + ", %tid.x");
  w.op("mov.u32 " + ntid + ", %ntid.x");
  w.op("mov.u32 " + ctaid + ", %ctaid.x");
  w.op("mov.u32 " + nctaid + ", %nctaid.x");
  lanes = w.reg(32), lane = w.reg(32), group = w.reg(32), groups = w.reg(32), warp_lanes = w.reg(32);
  block_group = w.reg(1);
  w.op("mov.u32 " + lanes + ", 1");
  w.op("shl.b32 " + lanes + ", " + lanes + ", " + lanes_log2);
  w.op("sub.u32 " + lane + ", " + lanes + ", 1");
  w.op("and.b32 " + lane + ", " + tid + ", " + lane);
  w.op("shr.u32 " + group + ", " + tid + ", " + lanes_log2);
  w.op("shr.u32 " + groups + ", " + ntid + ", " + lanes_log2);
  w.op("min.u32 " + warp_lanes + ", " + lanes + ", 32");
  w.op("setp.gt.u32 " + block_group + ", " + lanes + ", 32");
}

void LaneGroups::open(const std::string& count) {
  tile_ = w_.reg(32), item = w_.reg(32), active = w_.reg(1), loop_ = w_.label(), done_ = w_.label();
  std::string past = w_.reg(1);
  w_.op("mov.u32 " + tile_ + ", " + ctaid);
  w_.place(loop_);
  w_.op("mul.lo.u32 " + item + ", " + tile_ + ", " + groups);
  w_.op("setp.ge.u32 " + past + ", " + item + ", " + count);
  w_.op("@" + past + " bra.uni " + done_);  // the same for the whole block
  w_.op("add.u32 " + item + ", " + item + ", " + group);
  w_.op("setp.lt.u32 " + active + ", " + item + ", " + count);
}

void LaneGroups::close() {
  w_.op("add.u32 " + tile_ + ", " + tile_ + ", " + nctaid);
  w_.op("bra.uni " + loop_);
  w_.place(done_);
}

std::array<std::string, 3> rank_predicates(PtxWriter& w, const std::string& rank) {
  std::array<std::string, 3> is;
  for (int d = 0; d < 3; ++d) {
    is[d] = w.reg(1);
    w.op("setp.eq.u32 " + is[d] + ", " + rank + ", " + std::to_string(d + 1));
  }
  return is;
}

std::vector<std::string> strided_offsets(PtxWriter& w, const std::string& idx, const std::array<std::string, 3>& rank_is,
                                         const std::array<std::string, 3>& shape, const std::array<FastDivRegs, 3>& div,
                                         const std::vector<std::array<std::string, 4>>& strides) {
  const size_t n = strides.size();
  std::vector<std::string> off(n);
  for (auto& o : off) {
    o = w.reg(64);
    w.op("mov.u64 " + o + ", 0");
  }
  std::string done = w.label(), q = w.reg(32), wide = w.reg(64);
  w.op("mov.u32 " + q + ", " + idx);
  auto add = [&](const std::string& coord, int d) {
    w.op("cvt.u64.u32 " + wide + ", " + coord);
    for (size_t k = 0; k < n; ++k) w.op("mad.lo.s64 " + off[k] + ", " + wide + ", " + strides[k][d] + ", " + off[k]);
  };
  for (int d = 0; d < 3; ++d) {
    std::string divide = w.label();
    w.op("@!" + rank_is[d] + " bra.uni " + divide);
    add(q, d);
    w.op("bra.uni " + done);
    w.place(divide);
    std::string nq = w.reg(32), c = w.reg(32);
    fast_divide(w, nq, q, div[d]);
    w.op("mul.lo.u32 " + c + ", " + nq + ", " + shape[d]);
    w.op("sub.u32 " + c + ", " + q + ", " + c);
    add(c, d);
    w.op("mov.u32 " + q + ", " + nq);
  }
  add(q, 3);
  w.place(done);
  return off;
}

FastDivRegs load_fast_div(PtxWriter& w, const std::string& args, int offset) {
  FastDivRegs f{w.reg(32), w.reg(32)};
  w.op("ld.param.v2.u32 {" + f.magic + ", " + f.shift + "}, [" + args + "+" + std::to_string(offset) + "]");
  return f;
}

void fast_divide(PtxWriter& w, const std::string& q, const std::string& x, const FastDivRegs& d) {
  std::string wide = w.reg(64);
  w.op("mul.wide.u32 " + wide + ", " + x + ", " + d.magic);
  w.op("shr.b64 " + wide + ", " + wide + ", " + d.shift);
  w.op("cvt.u32.u64 " + q + ", " + wide);
}

std::string param_u32(PtxWriter& w, int offset) {
  std::string v = w.reg(32);
  w.op("ld.param.u32 " + v + ", " + param_at(offset));
  return v;
}

std::string param_u64(PtxWriter& w, int offset) {
  std::string v = w.reg(64);
  w.op("ld.param.u64 " + v + ", " + param_at(offset));
  return v;
}

std::string module_header(const std::string& ir_text) {
  std::string ptx = ".version 8.0\n.target sm_80\n.address_size 64\n\n";
  for (size_t from = 0; from < ir_text.size();) {
    size_t end = ir_text.find('\n', from);
    if (end == std::string::npos) end = ir_text.size();
    ptx += "// " + ir_text.substr(from, end - from) + "\n";
    from = end + 1;
  }
  return ptx;
}

}  // namespace framejit::jit::cuda
