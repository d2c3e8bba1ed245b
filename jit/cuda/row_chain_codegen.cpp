// row_chain_codegen.cpp — PTX for a chain of kernels and last-axis reductions over the same rows
// as one kernel (Note [CUDA row-chain kernel ABI]): softmax and layer norm read their input once
// from memory and the rest from cache.
#include "jit/cuda/row_chain_codegen.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <optional>
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
static_assert(abi::kChainCaches >= RowChainIR::kMaxRowCaches, "the ABI holds every cache a chain may have");

// A kernel part of one output whose every input is forwarded: the same value for a whole row,
// computed in registers by every lane and forwarded in turn (fuse_row_chains).
bool row_constant(const RowChainIR::Part& p) {
  return !p.reduction && p.kernel.outputs.size() == 1 && !p.forwarded.empty() &&
         std::all_of(p.forwarded.begin(), p.forwarded.end(), [](int f) { return f >= 0; });
}

// The dtype a forwarded part hands on.
DType forwarded_dtype(const RowChainIR::Part& p) { return p.reduction ? p.red.dtype() : p.kernel.output_dtypes[0]; }

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
      if (f >= static_cast<int>(j) || !(chain.parts[f].reduction || row_constant(chain.parts[f]))) return false;
      if (acc_type(forwarded_dtype(chain.parts[f])) != acc_type(ir.input_dtypes[k])) return false;
    }
    if (p.cached.size() != ir.input_dtypes.size()) return false;
    for (size_t k = 0; k < p.cached.size(); ++k) {
      const int q = p.cached[k];
      if (q < 0) continue;
      const int size = rt::dtype_itemsize(ir.input_dtypes[k]);
      if (q >= chain.caches || p.forwarded[k] >= 0 || (size != 2 && size != 4 && size != 8)) return false;
    }
    slots += ir.input_dtypes.size() + (p.reduction ? 1 + (p.red.store_value ? 1 : 0) : ir.outputs.size());
    params += ir.param_dtypes.size();
  }
  return slots <= static_cast<size_t>(abi::kChainSlots) && params <= static_cast<size_t>(abi::kChainParams);
}

namespace {

// One row-chain kernel's body, emitted part by part (Note [CUDA row-chain kernel ABI]).
class RowChainEmitter {
public:
  explicit RowChainEmitter(const RowChainIR& chain) : chain_(chain), e_(w_), g_(w_, u32(abi::kChainLanesLog2)) {}

  // The entry's body (without its header), or the first thing the element emitter refused.
  Expected<std::string> body();

private:
  // Slot numbers in ABI order: a part's inputs; a kernel's outputs or a reduction's result
  // (then its stored values).
  struct PartSlots {
    std::vector<int> in, out;
  };

  std::string u32(int offset) { return param_u32(w_, offset); }
  std::string u64(int offset) { return param_u64(w_, offset); }
  void declare_slots();
  void plan_value_caches();
  void declare_caches();
  void fill_caches();
  void emit_part(size_t j);
  // Both return nothing but leave part j's values combined into acc (a reduction) or stored.
  // `ir` and `hoisted`: the part's body, or its form over a value cache (Note [Row caches that
  // hold a computed value]); `cache_known` when the caller branched on cache_on already.
  std::string vector_loop(size_t j, Combiner& c, const std::string& acc, const PointwiseKernelIR& ir,
                          const std::vector<std::string>& hoisted, bool cache_known);  // returns nvec's register
  void element_loop(size_t j, Combiner& c, const std::string& acc, const std::string& n, const std::string& nvec,
                    const PointwiseKernelIR& ir, const std::vector<std::string>& hoisted, bool cache_known);
  void finish_reduction(size_t j, Combiner& c, const std::string& acc);
  void group_barrier();
  // Part j's element at `index` (scaled: 4 * chunk or the element) of slot s.
  std::string address(int s, const std::string& wide_index);
  // Four elements of a cached array (4 or 8 bytes each: half types are widened) from shared
  // address `addr`.
  void shared4(DType t, const std::string& addr, const std::array<std::string, 4>& v);
  // The same, stored (only when the caches are on).
  void store_shared4(DType t, const std::string& addr, const std::vector<std::string>& v);

  const RowChainIR& chain_;
  PtxWriter w_;
  ElementEmitter e_;
  LaneGroups g_;
  std::string p_;  // a scratch predicate
  std::vector<PartSlots> slots_;
  std::vector<int> fill_slot_, fill_size_;  // per cache: the slot its rows are copied from, bytes an element there
  std::vector<DType> fill_half_;           // per cache: the half type it widens (Float32: none)
  // Per part and input: the dtype in memory of an input the part's IR reads as float32 (a cached
  // half-type row, Note [Half-type rows are cached in float32]); Float32 otherwise.
  std::vector<std::vector<DType>> memory_dtype_;
  // An input's element(s) from memory as the part's IR reads them.
  std::string load_input(size_t j, int k, const std::string& addr);
  std::vector<std::string> load_input4(size_t j, int k, const std::string& addr);
  std::vector<std::string> ptr_, inner_, base_;
  std::vector<std::array<std::string, 4>> lead_stride_;
  std::vector<std::vector<std::string>> hoisted_;
  std::vector<PointwiseKernelIR> irs_;
  std::vector<int> params_at_;  // each part's first parameter's offset in the ABI
  // Note [Row caches that hold a computed value]: per reduction part, the input whose cache it
  // overwrites with its prologue's value (-1: none); per kernel part, its body over that cache.
  std::vector<int> overwrites_;
  std::vector<std::optional<PointwiseKernelIR>> cached_irs_;
  std::vector<std::vector<std::string>> cached_hoisted_;
  std::string cache_on_;
  std::vector<std::string> cache_base_;
  std::vector<std::string> result_;  // each reduction part's finished value
};

Expected<std::string> RowChainEmitter::body() {
  const std::string rows = u32(abi::kChainRows), lead_rank = u32(abi::kChainLeadRankAt);
  std::array<std::string, 3> lead_shape;
  std::array<FastDivRegs, 3> lead_div;
  for (int d = 0; d < 3; ++d) {
    lead_shape[d] = u32(abi::kChainLeadShape + 4 * d);
    lead_div[d] = load_fast_div(w_, "args", abi::kChainLeadDiv + 8 * d);
  }
  declare_slots();
  declare_caches();

  p_ = w_.reg(1);
  g_.open(rows);
  std::vector<std::string> lead_off =
      strided_offsets(w_, g_.item, rank_predicates(w_, lead_rank), lead_shape, lead_div, lead_stride_);
  base_.resize(ptr_.size());
  for (size_t s = 0; s < ptr_.size(); ++s) {
    base_[s] = w_.reg(64);
    w_.op("add.s64 " + base_[s] + ", " + ptr_[s] + ", " + lead_off[s]);
  }
  fill_caches();
  result_.assign(chain_.parts.size(), "");
  for (size_t j = 0; j < chain_.parts.size(); ++j) emit_part(j);
  g_.close();
  w_.op("ret");
  if (!e_.failed().empty()) return Status::unsupported(e_.failed());
  return w_.body();
}

// Every slot's pointer, inner stride and lead strides, each part's loop IR (uint64 accumulators
// as their int64 twins) and hoisted constants and parameters.
void RowChainEmitter::declare_slots() {
  slots_.resize(chain_.parts.size());
  fill_slot_.assign(chain_.caches, -1);
  fill_size_.assign(chain_.caches, 0);
  fill_half_.assign(chain_.caches, DType::Float32);
  hoisted_.resize(chain_.parts.size());
  irs_.resize(chain_.parts.size());
  memory_dtype_.resize(chain_.parts.size());
  int param = 0;
  for (size_t j = 0; j < chain_.parts.size(); ++j) {
    const RowChainIR::Part& p = chain_.parts[j];
    irs_[j] = p.reduction ? twin_prologue(p.red) : p.kernel;
    // Note [Half-type rows are cached in float32]: the part reads a cached half input as float32
    // (its widening cast becomes a no-op); an output that is the load itself is rounded back.
    PointwiseKernelIR& wide_ir = irs_[j];
    memory_dtype_[j].assign(wide_ir.input_dtypes.size(), DType::Float32);
    for (size_t k = 0; k < wide_ir.input_dtypes.size(); ++k) {
      const DType h = wide_ir.input_dtypes[k];
      if (p.cached[k] < 0 || !rt::dtype_is_half(h)) continue;
      memory_dtype_[j][k] = h;
      wide_ir.input_dtypes[k] = DType::Float32;
      for (size_t b = 0; b < wide_ir.body.size(); ++b) {
        ScalarExpr& x = wide_ir.body[b];
        if (x.op != ScalarOp::Load || x.input != static_cast<int>(k)) continue;
        x.dtype = DType::Float32;
        for (int& o : wide_ir.outputs)
          if (o == static_cast<int>(b)) {
            wide_ir.body.push_back({ScalarOp::Cast, h, static_cast<int>(b), -1, -1, 0});
            o = static_cast<int>(wide_ir.body.size()) - 1;
          }
      }
    }
    const PointwiseKernelIR& ir = irs_[j];
    const int nout = p.reduction ? 1 + (p.red.store_value ? 1 : 0) : static_cast<int>(ir.outputs.size());
    auto add_slot = [&](std::vector<int>& to) {
      const int s = static_cast<int>(ptr_.size());
      to.push_back(s);
      ptr_.push_back(u64(abi::kChainPtr + 8 * s));
      inner_.push_back(u64(abi::kChainInner + 8 * s));
      std::array<std::string, 4> ls;
      for (int d = 0; d < 4; ++d) ls[d] = u64(abi::kChainLeadStride + 8 * (4 * s + d));
      lead_stride_.push_back(ls);
    };
    for (size_t k = 0; k < ir.input_dtypes.size(); ++k) {
      add_slot(slots_[j].in);
      const int q = p.cached[k];
      if (q >= 0 && fill_slot_[q] < 0) {
        fill_slot_[q] = slots_[j].in.back();
        fill_half_[q] = memory_dtype_[j][k];
        fill_size_[q] = rt::dtype_itemsize(rt::dtype_is_half(fill_half_[q]) ? fill_half_[q] : ir.input_dtypes[k]);
      }
    }
    for (int k = 0; k < nout; ++k) add_slot(slots_[j].out);
    params_at_.push_back(abi::kChainParamsAt + 8 * param);
    hoisted_[j] = e_.hoist(ir, "args", params_at_[j]);
    param += static_cast<int>(ir.param_dtypes.size());
  }
  plan_value_caches();
}

// Note [Row caches that hold a computed value]
// Softmax's sum reduces exp(x - max) and its last kernel computes exp(x - max) / sum: the same
// value twice per element, and on an H200 the chain is bound by instructions (ncu: 83% of the
// SMs' issue rate, 3.4 instructions a cycle). When a reduction's prologue value (a computation,
// not a plain load) reappears in a later kernel over the same cached row and the same forwarded
// results, and nothing after the reduction reads that row's raw values except through it, the
// reduction writes its values over the row cache as it goes (each lane over the elements it
// read), and the kernel reads them instead of recomputing (its body with that expression a load
// of the cache). Both happen only when the caches are on: the kernel keeps its plain form for
// launches whose rows do not fit shared memory, picked at run time.
void RowChainEmitter::plan_value_caches() {
  const size_t np = chain_.parts.size();
  overwrites_.assign(np, -1);
  cached_irs_.assign(np, std::nullopt);
  cached_hoisted_.assign(np, {});
  // Whether expression a of part i computes what expression b of part k does.
  auto same = [&](auto& self, size_t i, int a, size_t k, int b) -> bool {
    const ScalarExpr &x = irs_[i].body[a], &y = irs_[k].body[b];
    if (x.op != y.op || x.dtype != y.dtype) return false;
    switch (x.op) {
      case ScalarOp::Param: return false;  // another part's parameter slot: not worth proving
      case ScalarOp::Const: return x.fconst == y.fconst;
      case ScalarOp::Load: {
        const RowChainIR::Part &pi = chain_.parts[i], &pk = chain_.parts[k];
        if (pi.forwarded[x.input] >= 0) return pi.forwarded[x.input] == pk.forwarded[y.input];
        return pi.cached[x.input] >= 0 && pi.cached[x.input] == pk.cached[y.input];
      }
      default:
        for (auto [u, v] : {std::pair{x.a, y.a}, std::pair{x.b, y.b}, std::pair{x.c, y.c}})
          if ((u < 0) != (v < 0) || (u >= 0 && !self(self, i, u, k, v))) return false;
        return true;
    }
  };
  for (size_t j = 0; j < np; ++j) {
    const RowChainIR::Part& pj = chain_.parts[j];
    if (!pj.reduction || pj.red.store_value) continue;
    const PointwiseKernelIR& rj = irs_[j];
    const int root = rj.outputs[0];
    if (rj.body[root].op == ScalarOp::Load) continue;
    // The one cache the value's expression reads, and the input of part j reading it.
    int q = -1, qin = -1;
    bool one_cache = true;
    for (const ScalarExpr& x : rj.body)
      if (x.op == ScalarOp::Load && pj.cached[x.input] >= 0) {
        one_cache = one_cache && (q < 0 || q == pj.cached[x.input]);
        q = pj.cached[x.input];
        qin = x.input;
      }
    if (q < 0 || !one_cache || rt::dtype_itemsize(rj.input_dtypes[qin]) != rt::dtype_itemsize(rj.body[root].dtype) ||
        rj.input_dtypes[qin] != rj.body[root].dtype || rt::dtype_is_half(rj.body[root].dtype))
      continue;
    // The one later part that reads cache q: a kernel.
    int k = -1;
    bool others = false;
    for (size_t m = j + 1; m < np; ++m)
      for (int c : chain_.parts[m].cached)
        if (c == q) {
          others = others || (k >= 0 && k != static_cast<int>(m)) || chain_.parts[m].reduction;
          k = static_cast<int>(m);
        }
    if (k < 0 || others) continue;
    const PointwiseKernelIR& rk = irs_[k];
    int at = -1;
    for (int b = 0; b < static_cast<int>(rk.body.size()) && at < 0; ++b)
      if (same(same, j, root, static_cast<size_t>(k), b)) at = b;
    if (at < 0) continue;
    // Part k's body with that value a load of the cache; what only it needed becomes a dead
    // constant. Refused if a raw read of the row stays live.
    int kin = -1;
    for (size_t i = 0; i < chain_.parts[k].cached.size(); ++i)
      if (chain_.parts[k].cached[i] == q) kin = static_cast<int>(i);
    PointwiseKernelIR ck = rk;
    ScalarExpr load{ScalarOp::Load, rk.body[at].dtype};
    load.input = kin;
    ck.body[at] = load;
    std::vector<char> live(ck.body.size(), 0);
    for (int o : ck.outputs) live[o] = 1;
    for (int b = static_cast<int>(ck.body.size()) - 1; b >= 0; --b)
      if (live[b])
        for (int u : {ck.body[b].a, ck.body[b].b, ck.body[b].c})
          if (u >= 0) live[u] = 1;
    bool raw = false;
    for (int b = 0; b < static_cast<int>(ck.body.size()); ++b) {
      const ScalarExpr& x = ck.body[b];
      if (live[b] && b != at && x.op == ScalarOp::Load && chain_.parts[k].cached[x.input] == q) raw = true;
      if (!live[b] && x.op != ScalarOp::Load) ck.body[b] = ScalarExpr{ScalarOp::Const, x.dtype};
    }
    if (raw || rk.input_dtypes[kin] != rk.body[at].dtype) continue;
    overwrites_[j] = qin;
    cached_hoisted_[k] = e_.hoist(ck, "args", params_at_[k]);
    cached_irs_[k] = std::move(ck);
  }
}

// Row caches (Note [CUDA row-chain kernel ABI]): this group's piece of shared memory, filled at
// the start of each row by asynchronous copies from the first part that reads each array.
void RowChainEmitter::declare_caches() {
  cache_on_ = w_.reg(1);
  std::string group_base = w_.reg(32);
  cache_base_.resize(chain_.caches);
  std::string on = u32(abi::kChainCacheOn), group_bytes = u32(abi::kChainGroupBytes);
  w_.op("setp.ne.u32 " + cache_on_ + ", " + on + ", 0");
  w_.op("mov.u32 " + group_base + ", fj_rows");
  w_.op("mad.lo.u32 " + group_base + ", " + g_.group + ", " + group_bytes + ", " + group_base);
  for (int q = 0; q < chain_.caches; ++q) {
    cache_base_[q] = w_.reg(32);
    w_.op("ld.param.u32 " + cache_base_[q] + ", " + param_at(abi::kChainCacheOffset + 4 * q));
    w_.op("add.u32 " + cache_base_[q] + ", " + cache_base_[q] + ", " + group_base);
  }
}

void RowChainEmitter::shared4(DType t, const std::string& addr, const std::array<std::string, 4>& v) {
  if (rt::dtype_itemsize(t) == 4) {
    w_.op("ld.shared.v4.b32 {" + v[0] + ", " + v[1] + ", " + v[2] + ", " + v[3] + "}, [" + addr + "]");
    return;
  }
  w_.op("ld.shared.v2.b64 {" + v[0] + ", " + v[1] + "}, [" + addr + "]");
  w_.op("ld.shared.v2.b64 {" + v[2] + ", " + v[3] + "}, [" + addr + "+16]");
}

void RowChainEmitter::store_shared4(DType t, const std::string& addr, const std::vector<std::string>& v) {
  if (rt::dtype_itemsize(t) == 4) {
    w_.op("@" + cache_on_ + " st.shared.v4.b32 [" + addr + "], {" + v[0] + ", " + v[1] + ", " + v[2] + ", " + v[3] + "}");
    return;
  }
  w_.op("@" + cache_on_ + " st.shared.v2.b64 [" + addr + "], {" + v[0] + ", " + v[1] + "}");
  w_.op("@" + cache_on_ + " st.shared.v2.b64 [" + addr + "+16], {" + v[2] + ", " + v[3] + "}");
}

void RowChainEmitter::group_barrier() {
  std::string warp_sync = w_.label(), synced = w_.label();
  w_.op("@!" + g_.block_group + " bra.uni " + warp_sync);
  w_.op("bar.sync 0");
  w_.op("bra.uni " + synced);
  w_.place(warp_sync);
  w_.op("bar.warp.sync -1");
  w_.place(synced);
}

std::string RowChainEmitter::address(int s, const std::string& wide_index) {
  std::string a = w_.reg(64);
  w_.op("mad.lo.s64 " + a + ", " + wide_index + ", " + inner_[s] + ", " + base_[s]);
  return a;
}

// 16-byte asynchronous copies (or element copies where the launcher found the row unaligned),
// all issued before any is waited for.
// Note [Half-type rows are cached in float32]
// A cached half-type row is stored in shared memory widened to float32 (4 bytes an element, which
// the launcher sizes): every part reads it without converting, and a reduction may leave a float32
// value over it (Note [Row caches that hold a computed value]) as over a float32 row; bfloat16
// softmax recomputed exp in its last kernel otherwise, and ran 1.4x slower than float32 softmax
// while moving half the bytes. The fill loads 16 bytes (8 elements) a lane and stores 32.

std::string RowChainEmitter::load_input(size_t j, int k, const std::string& addr) {
  const DType m = memory_dtype_[j][k];
  if (!rt::dtype_is_half(m)) return e_.load(irs_[j].input_dtypes[k], addr);
  return e_.cast(m, DType::Float32, e_.load(m, addr));
}

std::vector<std::string> RowChainEmitter::load_input4(size_t j, int k, const std::string& addr) {
  const DType m = memory_dtype_[j][k];
  if (!rt::dtype_is_half(m)) return e_.load4(irs_[j].input_dtypes[k], addr);
  std::vector<std::string> v = e_.load4(m, addr);
  for (auto& x : v) x = e_.cast(m, DType::Float32, x);
  return v;
}

void RowChainEmitter::fill_caches() {
  const std::string &lane = g_.lane, &lanes = g_.lanes, &active = g_.active;
  std::string skip = w_.label();
  w_.op("@!" + cache_on_ + " bra.uni " + skip);
  for (int q = 0; q < chain_.caches; ++q) {
    // A half-type row is widened on the way (Note [Half-type rows are cached in float32]); the
    // others are copied as they are, asynchronously.
    const DType h = fill_half_[q];
    const bool widen = rt::dtype_is_half(h);
    const int size = fill_size_[q], stored = widen ? 4 : size;  // bytes an element in memory, in the cache
    const std::string cn = u32(abi::kChainCacheN + 4 * q), chunks = u32(abi::kChainCacheChunks + 4 * q);
    std::string c = w_.reg(32), loop = w_.label(), loop_done = w_.label(), sa = w_.reg(32), wide = w_.reg(64), ga = w_.reg(64);
    w_.op("mov.u32 " + c + ", " + lane);
    w_.op("@!" + active + " mov.u32 " + c + ", " + chunks);
    w_.place(loop);
    w_.op("setp.ge.u32 " + p_ + ", " + c + ", " + chunks);
    w_.op("@" + p_ + " bra " + loop_done);
    w_.op("mad.lo.u32 " + sa + ", " + c + ", " + std::to_string(16 / size * stored) + ", " + cache_base_[q]);
    w_.op("mul.wide.u32 " + wide + ", " + c + ", 16");
    w_.op("add.s64 " + ga + ", " + base_[fill_slot_[q]] + ", " + wide);
    if (widen) {
      std::array<std::string, 4> words;
      for (auto& r : words) r = w_.reg(32);
      w_.op("ld.global.v4.b32 {" + words[0] + ", " + words[1] + ", " + words[2] + ", " + words[3] + "}, [" + ga + "]");
      std::vector<std::string> f(8);
      for (int i = 0; i < 8; ++i) {
        std::string bits = w_.reg(32);
        w_.op((i % 2 ? "shr.u32 " : "and.b32 ") + bits + ", " + words[i / 2] + (i % 2 ? ", 16" : ", 65535"));
        f[i] = e_.cast(h, DType::Float32, bits);
      }
      w_.op("st.shared.v4.b32 [" + sa + "], {" + f[0] + ", " + f[1] + ", " + f[2] + ", " + f[3] + "}");
      w_.op("st.shared.v4.b32 [" + sa + "+16], {" + f[4] + ", " + f[5] + ", " + f[6] + ", " + f[7] + "}");
    } else {
      w_.op("cp.async.cg.shared.global [" + sa + "], [" + ga + "], 16");
    }
    w_.op("add.u32 " + c + ", " + c + ", " + lanes);
    w_.op("bra " + loop);
    w_.place(loop_done);
    // The elements past the whole chunks (all of them when unaligned).
    std::string el = w_.reg(32), tail = w_.label(), tail_done = w_.label();
    w_.op("mul.lo.u32 " + el + ", " + chunks + ", " + std::to_string(16 / size));
    w_.op("add.u32 " + el + ", " + el + ", " + lane);
    w_.op("@!" + active + " mov.u32 " + el + ", " + cn);
    w_.place(tail);
    w_.op("setp.ge.u32 " + p_ + ", " + el + ", " + cn);
    w_.op("@" + p_ + " bra " + tail_done);
    w_.op("mad.lo.u32 " + sa + ", " + el + ", " + std::to_string(stored) + ", " + cache_base_[q]);
    w_.op("mul.wide.u32 " + wide + ", " + el + ", " + std::to_string(size));
    w_.op("add.s64 " + ga + ", " + base_[fill_slot_[q]] + ", " + wide);
    if (widen)
      w_.op("st.shared.b32 [" + sa + "], " + e_.cast(h, DType::Float32, e_.load(h, ga)));
    else
      w_.op("cp.async.ca.shared.global [" + sa + "], [" + ga + "], " + std::to_string(size));
    w_.op("add.u32 " + el + ", " + el + ", " + lanes);
    w_.op("bra " + tail);
    w_.place(tail_done);
  }
  w_.op("cp.async.wait_all");
  group_barrier();
  w_.place(skip);
}

void RowChainEmitter::emit_part(size_t j) {
  const RowChainIR::Part& part = chain_.parts[j];
  w_.comment("part " + std::to_string(j) + (part.reduction ? ": reduction" : ": kernel"));
  if (row_constant(part)) {
    // Every lane computes it; the group's first lane stores the row's element.
    std::vector<std::string> in;
    for (int f : part.forwarded) in.push_back(result_[f]);
    const std::vector<std::string> v = e_.body(irs_[j], hoisted_[j], in);
    result_[j] = v[irs_[j].outputs[0]];
    std::string store = w_.reg(1), skip_store = w_.label();
    w_.op("setp.eq.u32 " + store + ", " + g_.lane + ", 0");
    w_.op("and.pred " + store + ", " + store + ", " + g_.active);
    w_.op("@!" + store + " bra " + skip_store);
    e_.store(irs_[j].output_dtypes[0], base_[slots_[j].out[0]], result_[j]);
    w_.place(skip_store);
    return;
  }
  Combiner c(e_, part.reduction ? part.red.op : ReduceOp::Sum, part.reduction ? part.red.dtype() : DType::Float32);
  const std::string n = u32(abi::kChainN + 4 * static_cast<int>(j));
  std::string acc;
  if (part.reduction) {
    acc = e_.reg(c.type());
    w_.op(std::string("mov.") + btype(c.type()) + " " + acc + ", " + c.identity());
  }
  if (cached_irs_[j]) {
    // Note [Row caches that hold a computed value]: the cache's form when the caches are on.
    std::string plain = w_.label(), done = w_.label();
    w_.op("@!" + cache_on_ + " bra.uni " + plain);
    const std::string nv = vector_loop(j, c, acc, *cached_irs_[j], cached_hoisted_[j], true);
    element_loop(j, c, acc, n, nv, *cached_irs_[j], cached_hoisted_[j], true);
    w_.op("bra.uni " + done);
    w_.place(plain);
    const std::string nvec = vector_loop(j, c, acc, irs_[j], hoisted_[j], false);
    element_loop(j, c, acc, n, nvec, irs_[j], hoisted_[j], false);
    w_.place(done);
  } else {
    const std::string nvec = vector_loop(j, c, acc, irs_[j], hoisted_[j], false);
    element_loop(j, c, acc, n, nvec, irs_[j], hoisted_[j], false);
  }
  if (part.reduction) finish_reduction(j, c, acc);
  // What this part wrote is read by other lanes of the group in later parts; and the next row's
  // caches overwrite what this row's parts read.
  group_barrier();
}

// Vector chunks (4 elements, 16-byte accesses). A broadcast input (inner stride 0) is read once
// per chunk; a forwarded one is its reduction's register; a cached one comes from shared memory.
std::string RowChainEmitter::vector_loop(size_t j, Combiner& c, const std::string& acc, const PointwiseKernelIR& ir,
                                         const std::vector<std::string>& hoisted, bool cache_known) {
  const RowChainIR::Part& part = chain_.parts[j];
  const PartSlots& sl = slots_[j];
  const int nin = static_cast<int>(ir.input_dtypes.size());
  const std::string nvec = u32(abi::kChainNvec + 4 * static_cast<int>(j));
  std::string chunk = w_.reg(32), loop = w_.label(), loop_done = w_.label(), wide = w_.reg(64);
  w_.op("mov.u32 " + chunk + ", " + g_.lane);
  w_.op("@!" + g_.active + " mov.u32 " + chunk + ", " + nvec);
  w_.place(loop);
  w_.op("setp.ge.u32 " + p_ + ", " + chunk + ", " + nvec);
  w_.op("@" + p_ + " bra " + loop_done);
  w_.op("mul.wide.u32 " + wide + ", " + chunk + ", 4");
  std::vector<std::array<std::string, 4>> lanes4(nin);
  std::vector<std::string> cache_addrs(nin);
  for (int k = 0; k < nin; ++k) {
    if (part.forwarded[k] >= 0) {
      lanes4[k].fill(result_[part.forwarded[k]]);
      continue;
    }
    const DType t = ir.input_dtypes[k];
    const int s = sl.in[k];
    const int q = part.cached[k];
    std::string bcast = w_.reg(1), vec_load = w_.label(), loaded = w_.label();
    for (auto& r : lanes4[k]) r = e_.reg(t);
    if (q >= 0) {
      std::string cache_addr = w_.reg(32);
      w_.op("mad.lo.u32 " + cache_addr + ", " + chunk + ", " + std::to_string(4 * rt::dtype_itemsize(t)) + ", " +
            cache_base_[q]);
      cache_addrs[k] = cache_addr;
      if (cache_known) {
        shared4(t, cache_addr, lanes4[k]);
        continue;
      }
      std::string from_memory = w_.label();
      w_.op("@!" + cache_on_ + " bra.uni " + from_memory);
      shared4(t, cache_addr, lanes4[k]);
      w_.op("bra.uni " + loaded);
      w_.place(from_memory);
    }
    const std::string a = address(s, wide);  // (only where the row is read from memory)
    w_.op("setp.eq.s64 " + bcast + ", " + inner_[s] + ", 0");
    w_.op("@!" + bcast + " bra " + vec_load);
    std::string one = load_input(j, k, a);
    for (auto& r : lanes4[k]) w_.op(std::string("mov.") + btype(t) + " " + r + ", " + one);
    w_.op("bra " + loaded);
    w_.place(vec_load);
    std::vector<std::string> v4 = load_input4(j, k, a);
    for (int l = 0; l < 4; ++l) w_.op(std::string("mov.") + btype(t) + " " + lanes4[k][l] + ", " + v4[l]);
    w_.place(loaded);
  }
  std::vector<std::vector<std::string>> values(4);
  for (int l = 0; l < 4; ++l) {
    std::vector<std::string> in(nin);
    for (int k = 0; k < nin; ++k) in[k] = lanes4[k][l];
    values[l] = e_.body(ir, hoisted, in);
  }
  if (part.reduction) {
    std::vector<std::string> v(4);
    for (int l = 0; l < 4; ++l) v[l] = values[l][ir.outputs[0]];
    if (part.red.store_value) e_.store4(c.type(), address(sl.out[1], wide), v);
    if (overwrites_[j] >= 0) store_shared4(ir.input_dtypes[overwrites_[j]], cache_addrs[overwrites_[j]], v);
    for (int l = 0; l < 4; ++l) c.combine(acc, "", v[l], "");
  } else {
    for (size_t o = 0; o < ir.outputs.size(); ++o) {
      std::vector<std::string> v(4);
      for (int l = 0; l < 4; ++l) v[l] = values[l][ir.outputs[o]];
      e_.store4(ir.output_dtypes[o], address(sl.out[o], wide), v);
    }
  }
  w_.op("add.u32 " + chunk + ", " + chunk + ", " + g_.lanes);
  w_.op("bra " + loop);
  w_.place(loop_done);
  return nvec;
}

// The elements past the vector chunks, one at a time (all of them when the launcher found the
// part's operands unaligned or strided).
void RowChainEmitter::element_loop(size_t j, Combiner& c, const std::string& acc, const std::string& n,
                                   const std::string& nvec, const PointwiseKernelIR& ir,
                                   const std::vector<std::string>& hoisted, bool cache_known) {
  const RowChainIR::Part& part = chain_.parts[j];
  const PartSlots& sl = slots_[j];
  const int nin = static_cast<int>(ir.input_dtypes.size());
  std::string el = w_.reg(32), loop = w_.label(), loop_done = w_.label();
  w_.op("shl.b32 " + el + ", " + nvec + ", 2");
  w_.op("add.u32 " + el + ", " + el + ", " + g_.lane);
  w_.op("@!" + g_.active + " mov.u32 " + el + ", " + n);
  w_.place(loop);
  w_.op("setp.ge.u32 " + p_ + ", " + el + ", " + n);
  w_.op("@" + p_ + " bra " + loop_done);
  std::string wide = w_.reg(64);
  w_.op("cvt.u64.u32 " + wide + ", " + el);
  std::vector<std::string> in(nin), cache_addrs(nin);
  for (int k = 0; k < nin; ++k) {
    if (part.forwarded[k] >= 0) {
      in[k] = result_[part.forwarded[k]];
      continue;
    }
    const DType t = ir.input_dtypes[k];
    const int q = part.cached[k];
    if (q < 0) {
      in[k] = load_input(j, k, address(sl.in[k], wide));
      continue;
    }
    const std::string bt = btype(t);
    std::string cache_addr = w_.reg(32), loaded = w_.label();
    w_.op("mad.lo.u32 " + cache_addr + ", " + el + ", " + std::to_string(rt::dtype_itemsize(t)) + ", " + cache_base_[q]);
    in[k] = e_.reg(t);
    cache_addrs[k] = cache_addr;
    const std::string ld = "ld.shared." + bt + " ";
    if (cache_known) {
      w_.op(ld + in[k] + ", [" + cache_addr + "]");
      continue;
    }
    std::string from_memory = w_.label();
    w_.op("@!" + cache_on_ + " bra.uni " + from_memory);
    w_.op(ld + in[k] + ", [" + cache_addr + "]");
    w_.op("bra.uni " + loaded);
    w_.place(from_memory);
    w_.op("mov." + bt + " " + in[k] + ", " + load_input(j, k, address(sl.in[k], wide)));
    w_.place(loaded);
  }
  std::vector<std::string> v = e_.body(ir, hoisted, in);
  if (part.reduction) {
    const std::string& value = v[ir.outputs[0]];
    if (part.red.store_value) e_.store(c.type(), address(sl.out[1], wide), value);
    if (overwrites_[j] >= 0)
      w_.op("@" + cache_on_ + " st.shared." + btype(ir.input_dtypes[overwrites_[j]]) + " [" +
            cache_addrs[overwrites_[j]] + "], " + value);
    c.combine(acc, "", value, "");
  } else {
    for (size_t o = 0; o < ir.outputs.size(); ++o) e_.store(ir.output_dtypes[o], address(sl.out[o], wide), v[ir.outputs[o]]);
  }
  w_.op("add.u32 " + el + ", " + el + ", " + g_.lanes);
  w_.op("bra " + loop);
  w_.place(loop_done);
}

// Every lane of the group ends with the row's value: the butterfly leaves it in each lane of a
// warp's group; a block's group broadcasts it through shared memory. Lane 0 stores it.
void RowChainEmitter::finish_reduction(size_t j, Combiner& c, const std::string& acc) {
  const RowChainIR::Part& part = chain_.parts[j];
  c.butterfly(acc, "", g_.warp_lanes, 16);
  std::string skip = w_.label();
  w_.op("@!" + g_.block_group + " bra.uni " + skip);
  c.block_combine(acc, "", g_.tid, g_.ntid, true);
  w_.place(skip);
  result_[j] = c.finish(part.red, acc, param_at(abi::kChainDivisor + 8 * static_cast<int>(j)));
  std::string store = w_.reg(1);
  w_.op("setp.eq.u32 " + store + ", " + g_.lane + ", 0");
  w_.op("and.pred " + store + ", " + store + ", " + g_.active);
  std::string skip_store = w_.label();
  w_.op("@!" + store + " bra " + skip_store);
  e_.store(c.type(), base_[slots_[j].out[0]], result_[j]);
  w_.place(skip_store);
}

}  // namespace

Expected<std::string> row_chain_ptx(const RowChainIR& chain, const std::string& name) {
  if (!row_chain_supported(chain)) return Status::unsupported("the PTX generator does not support this chain");
  RowChainEmitter emitter(chain);
  auto body = emitter.body();
  if (!body) return body.error();
  std::string ptx = module_header(chain.to_string());
  ptx += "\n" + Combiner::shared_declarations() + ".extern .shared .align 16 .b8 fj_rows[];\n";
  ptx += "\n.visible .entry " + name + "(\n\t.param .align 8 .b8 args[" + std::to_string(abi::kChainSize) + "]\n)\n{\n";
  ptx += *body;
  ptx += "}\n";
  return ptx;
}

}  // namespace framejit::jit::cuda
