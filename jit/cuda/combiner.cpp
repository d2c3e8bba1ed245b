// combiner.cpp — combining reduced values in PTX: identities, the per-element combination, warp
// butterflies and the block-wide step through shared memory.
#include "jit/cuda/combiner_p.h"


namespace framejit::jit::cuda {

using rt::DType;

namespace {
// Warps of the largest block a generator launches (1024 threads).
constexpr int kSharedWarps = 32;
}  // namespace

PointwiseKernelIR twin_prologue(const ReductionKernelIR& r) {
  auto prologue = reduction_prologue(r);
  return prologue ? *prologue : r.prologue;
}

std::string Combiner::shared_declarations() {
  // One word per warp, plus the broadcast word.
  const std::string words = std::to_string(8 * (kSharedWarps + 1));
  return ".shared .align 8 .b8 fj_red_value[" + words + "];\n.shared .align 8 .b8 fj_red_index[" + words + "];\n";
}

std::string Combiner::finish(const ReductionKernelIR& r, const std::string& v, const std::string& divisor) {
  std::string out = v;
  if (r.mean) {
    std::string n = w_.reg(64), d = e_.reg(t_), q = e_.reg(t_);
    w_.op("ld.param.s64 " + n + ", " + divisor);
    // numpy.mean divides by the count converted to the array's type.
    w_.op(std::string("cvt.rn.") + ftype(t_) + ".s64 " + d + ", " + n);
    w_.op(std::string("div.rn.") + ftype(t_) + " " + q + ", " + out + ", " + d);
    out = q;
  }
  if (r.sqrt) {
    std::string s = e_.reg(t_);
    w_.op(std::string("sqrt.rn.") + ftype(t_) + " " + s + ", " + out);
    out = s;
  }
  return out;
}

std::string Combiner::identity() {
  const ReduceOp op = op_;
  const bool max = op == ReduceOp::Max || op == ReduceOp::ArgMax;  // else min or argmin
  const char* bits = nullptr;
  if (op == ReduceOp::Sum) return e_.constant(t_, 0);
  if (op == ReduceOp::Prod) return e_.constant(t_, 1);
  switch (t_) {
    case DType::Float32: bits = max ? "0fFF800000" : "0f7F800000"; break;
    case DType::Float64: bits = max ? "0dFFF0000000000000" : "0d7FF0000000000000"; break;
    case DType::Int32: bits = max ? "0x80000000" : "0x7FFFFFFF"; break;
    case DType::Int64: bits = max ? "0x8000000000000000" : "0x7FFFFFFFFFFFFFFF"; break;
    case DType::UInt8: bits = max ? "0" : "255"; break;
    default: bits = max ? "0" : "1"; break;  // bool
  }
  std::string r = e_.reg(t_);
  w_.op(std::string("mov.") + btype(t_) + " " + r + ", " + bits);
  return r;
}

void Combiner::combine(const std::string& acc, const std::string& acc_i, const std::string& v, const std::string& v_i) {
  const bool fp = is_fp(t_);
  if (!arg_) {
    ScalarOp op = ScalarOp::Add;
    switch (op_) {
      case ReduceOp::Prod: op = ScalarOp::Mul; break;
      case ReduceOp::Max: op = ScalarOp::Max; break;
      case ReduceOp::Min: op = ScalarOp::Min; break;
      default: break;
    }
    const ScalarExpr x{op, t_, 0, 1};
    const std::vector<std::string> operands{acc, v};
    const std::string out = fp ? e_.float_op(x, operands) : e_.int_op(x, operands);
    w_.op(std::string("mov.") + btype(t_) + " " + acc + ", " + out);
    return;
  }
  const std::string ty = fp ? ftype(t_) : itype(t_);
  const char* better = op_ == ReduceOp::ArgMax ? "gt" : "lt";
  std::string wins = w_.reg(1), eq = w_.reg(1), earlier = w_.reg(1), tie = w_.reg(1);
  w_.op(std::string("setp.") + better + "." + ty + " " + wins + ", " + v + ", " + acc);
  w_.op("setp.eq." + ty + " " + eq + ", " + v + ", " + acc);
  if (fp) {
    // NaN: a NaN beats a number; two NaNs tie.
    std::string vn = w_.reg(1), an = w_.reg(1), both = w_.reg(1), only = w_.reg(1);
    w_.op("setp.nan." + ty + " " + vn + ", " + v + ", " + v);
    w_.op("setp.nan." + ty + " " + an + ", " + acc + ", " + acc);
    w_.op("and.pred " + both + ", " + vn + ", " + an);
    w_.op("or.pred " + eq + ", " + eq + ", " + both);
    w_.op("not.pred " + an + ", " + an);
    w_.op("and.pred " + only + ", " + vn + ", " + an);
    w_.op("or.pred " + wins + ", " + wins + ", " + only);
  }
  w_.op("setp.lt.s64 " + earlier + ", " + v_i + ", " + acc_i);
  w_.op("and.pred " + tie + ", " + eq + ", " + earlier);
  w_.op("or.pred " + wins + ", " + wins + ", " + tie);
  w_.op(std::string("selp.") + btype(t_) + " " + acc + ", " + v + ", " + acc + ", " + wins);
  w_.op("selp.b64 " + acc_i + ", " + v_i + ", " + acc_i + ", " + wins);
}

std::string Combiner::shuffle(const std::string& x, int bits, int mask) {
  const std::string m = std::to_string(mask);
  std::string out = w_.reg(bits);
  if (bits == 32) {
    w_.op("shfl.sync.bfly.b32 " + out + ", " + x + ", " + m + ", 31, -1");
    return out;
  }
  std::string lo = w_.reg(32), hi = w_.reg(32);
  w_.op("mov.b64 {" + lo + ", " + hi + "}, " + x);
  w_.op("shfl.sync.bfly.b32 " + lo + ", " + lo + ", " + m + ", 31, -1");
  w_.op("shfl.sync.bfly.b32 " + hi + ", " + hi + ", " + m + ", 31, -1");
  w_.op("mov.b64 " + out + ", {" + lo + ", " + hi + "}");
  return out;
}

void Combiner::butterfly(const std::string& acc, const std::string& acc_i, const std::string& lanes, int from) {
  for (int m = from; m >= 1; m /= 2) {
    std::string skip = w_.label(), p = w_.reg(1);
    w_.op("setp.le.u32 " + p + ", " + lanes + ", " + std::to_string(m));
    w_.op("@" + p + " bra.uni " + skip);
    const std::string v = shuffle(acc, reg_bits(t_), m);
    const std::string v_i = arg_ ? shuffle(acc_i, 64, m) : std::string();
    combine(acc, acc_i, v, v_i);
    w_.place(skip);
  }
}

void Combiner::block_combine(const std::string& acc, const std::string& acc_i, const std::string& tid,
                             const std::string& ntid, bool broadcast) {
  std::string warp = w_.reg(32), wl = w_.reg(32), slot = w_.reg(32), base = w_.reg(32), ibase = w_.reg(32);
  std::string first = w_.reg(1), in_warp0 = w_.reg(1), have = w_.reg(1), nw = w_.reg(32);
  const std::string bt = btype(t_);
  w_.op("shr.u32 " + warp + ", " + tid + ", 5");
  w_.op("and.b32 " + wl + ", " + tid + ", 31");
  w_.op("mov.u32 " + base + ", fj_red_value");
  w_.op("mov.u32 " + ibase + ", fj_red_index");
  w_.op("setp.eq.u32 " + first + ", " + wl + ", 0");
  w_.op("mad.lo.u32 " + slot + ", " + warp + ", 8, " + base);
  w_.op("@" + first + " st.shared." + bt + " [" + slot + "], " + acc);
  if (arg_) {
    w_.op("mad.lo.u32 " + slot + ", " + warp + ", 8, " + ibase);
    w_.op("@" + first + " st.shared.b64 [" + slot + "], " + acc_i);
  }
  w_.op("bar.sync 0");
  std::string after = w_.label();
  w_.op("setp.ne.u32 " + in_warp0 + ", " + warp + ", 0");
  w_.op("@" + in_warp0 + " bra " + after);
  w_.op("shr.u32 " + nw + ", " + ntid + ", 5");
  w_.op("setp.lt.u32 " + have + ", " + wl + ", " + nw);
  const std::string id = identity();
  w_.op("mov." + bt + " " + acc + ", " + id);
  w_.op("mad.lo.u32 " + slot + ", " + wl + ", 8, " + base);
  w_.op("@" + have + " ld.shared." + bt + " " + acc + ", [" + slot + "]");
  if (arg_) {
    w_.op("mad.lo.u32 " + slot + ", " + wl + ", 8, " + ibase);
    w_.op("mov.b64 " + acc_i + ", 0x7FFFFFFFFFFFFFFF");
    w_.op("@" + have + " ld.shared.b64 " + acc_i + ", [" + slot + "]");
  }
  std::string all = w_.reg(32);
  w_.op("mov.u32 " + all + ", 32");
  butterfly(acc, acc_i, all, 16);
  if (broadcast) {
    std::string word = w_.reg(32);
    w_.op("add.u32 " + word + ", " + base + ", " + std::to_string(8 * kSharedWarps));
    w_.op("@" + first + " st.shared." + bt + " [" + word + "], " + acc);
    if (arg_) {
      w_.op("add.u32 " + word + ", " + ibase + ", " + std::to_string(8 * kSharedWarps));
      w_.op("@" + first + " st.shared.b64 [" + word + "], " + acc_i);
    }
  }
  w_.place(after);
  w_.op("bar.sync 0");
  if (broadcast) {
    std::string word = w_.reg(32);
    w_.op("add.u32 " + word + ", " + base + ", " + std::to_string(8 * kSharedWarps));
    w_.op("ld.shared." + bt + " " + acc + ", [" + word + "]");
    if (arg_) {
      w_.op("add.u32 " + word + ", " + ibase + ", " + std::to_string(8 * kSharedWarps));
      w_.op("ld.shared.b64 " + acc_i + ", [" + word + "]");
    }
  }
}


}  // namespace framejit::jit::cuda
