// gemm_codegen.cpp — PTX for small matrix products: a warp per column of C's tile, then the fused
// epilogue on the finished tile (Note [Small device products]).
#include "jit/cuda/gemm_codegen.h"

#include <vector>

#include "jit/cuda/element_emitter_p.h"
#include "jit/cuda/indexing_p.h"
#include "jit/cuda/pointwise_codegen.h"
#include "runtime/cuda/gemm.h"

namespace framejit::jit::cuda {

namespace {

using rt::DType;
namespace abi = rt::cuda;
constexpr int kRows = abi::kSmallGemmTileRows;
constexpr int kWarps = abi::kSmallGemmWarps;
constexpr int kUnroll = 2;

}  // namespace

bool small_gemm_supported(const GemmKernelIR& g) {
  if (g.dtype != DType::Float32 && g.dtype != DType::Float64) return false;
  if (g.c_input < 0) return true;
  const PointwiseKernelIR& ep = g.epilogue;
  return pointwise_supported(ep) && g.c_input < static_cast<int>(ep.input_dtypes.size()) &&
         ep.input_dtypes[g.c_input] == g.dtype && ep.outputs.size() == 1 && ep.output_dtypes[0] == g.dtype;
}

Expected<std::string> small_gemm_ptx(const GemmKernelIR& g, const std::string& name) {
  if (!small_gemm_supported(g)) return Status::unsupported("the PTX generator does not support this product");
  PtxWriter w;
  ElementEmitter e(w);
  const DType t = g.dtype;
  const int item = t == DType::Float64 ? 8 : 4;
  const std::string bt = btype(t), ft = ftype(t), items = std::to_string(item);
  const bool has_ep = g.c_input >= 0;
  const PointwiseKernelIR& ep = g.epilogue;

  // A 64-bit address: base + index * stride (index 32-bit unsigned, stride 64-bit bytes).
  auto address = [&](const std::string& base, const std::string& idx, const std::string& stride) {
    std::string wide = w.reg(64), out = w.reg(64);
    w.op("cvt.u64.u32 " + wide + ", " + idx);
    w.op("mad.lo.s64 " + out + ", " + wide + ", " + stride + ", " + base);
    return out;
  };
  auto shared_slot = [&](const std::string& base, const std::string& index) {  // base + index * item
    std::string out = w.reg(32);
    w.op("mad.lo.u32 " + out + ", " + index + ", " + items + ", " + base);
    return out;
  };

  const std::string m = param_u32(w, abi::kSgM), n = param_u32(w, abi::kSgN), k = param_u32(w, abi::kSgK);
  const std::string a = param_u64(w, abi::kSgA), b = param_u64(w, abi::kSgB), c = param_u64(w, abi::kSgC);
  const std::string a_rs = param_u64(w, abi::kSgARs), a_cs = param_u64(w, abi::kSgACs);
  const std::string b_rs = param_u64(w, abi::kSgBRs), b_cs = param_u64(w, abi::kSgBCs), ldc = param_u64(w, abi::kSgLdc);
  std::string tid = w.reg(32), ctaid = w.reg(32), warp = w.reg(32), lane = w.reg(32), j0 = w.reg(32);
  std::string tile = w.reg(32), last = w.reg(32);
  w.op("mov.u32 " + tid + ", %tid.x");
  w.op("mov.u32 " + ctaid + ", %ctaid.x");
  w.op("shr.u32 " + warp + ", " + tid + ", 5");
  w.op("and.b32 " + lane + ", " + tid + ", 31");
  w.op("shl.b32 " + j0 + ", " + ctaid + ", 3");  // kWarps columns per block
  w.op("mov.u32 " + tile + ", fj_gemm_tile");
  w.op("sub.u32 " + last + ", " + m + ", 1");

  // The epilogue's parameters, constants and operand pointers, once.
  std::vector<std::string> hoisted, ep_ptr, ep_rs, ep_cs;
  if (has_ep) {
    hoisted = e.hoist(ep, "args", abi::kSgParams);
    const int nin = static_cast<int>(ep.input_dtypes.size());
    ep_ptr.resize(nin);
    ep_rs.resize(nin);
    ep_cs.resize(nin);
    for (int j = 0; j < nin; ++j) {
      if (j == g.c_input) continue;
      ep_ptr[j] = param_u64(w, abi::kSgPtr + 8 * j);
      ep_rs[j] = param_u64(w, abi::kSgRowStride + 8 * j);
      ep_cs[j] = param_u64(w, abi::kSgColStride + 8 * j);
    }
  }

  std::string i0 = w.reg(32), p = w.reg(1);
  std::string rows_loop = w.label(), done = w.label();
  w.op("mov.u32 " + i0 + ", 0");
  w.place(rows_loop);
  w.op("setp.ge.u32 " + p + ", " + i0 + ", " + m);
  w.op("@" + p + " bra.uni " + done);
  // The tile's rows of A (past the last row: the last row again, computed and never stored).
  std::vector<std::string> a_row(kRows), acc(kRows);
  for (int r = 0; r < kRows; ++r) {
    std::string ri = w.reg(32);
    w.op("add.u32 " + ri + ", " + i0 + ", " + std::to_string(r));
    w.op("min.u32 " + ri + ", " + ri + ", " + last);
    a_row[r] = address(a, ri, a_rs);
    acc[r] = w.reg(reg_bits(t));
    w.op("mov." + bt + " " + acc[r] + ", 0");
  }
  // kUnroll steps of the product from kk on, kk + 32u below k: acc[r] += A[r][kk'] * B[kk'] (b_col:
  // B's column j). Every load first, then the FMAs: a warp has 9 * kUnroll loads in flight. An
  // 8 x 1024 x 1024 product on the H200 took 14 us with one step per trip (waiting on memory) and
  // 12 us with two (8.1 us for x @ W.T, cuBLAS 8.4); four made ptxas take 41 ms instead of 28.
  auto steps = [&](const std::string& b_col, const std::string& kk) {
    std::vector<std::string> in(kUnroll), bv(kUnroll);
    std::vector<std::vector<std::string>> av(kUnroll, std::vector<std::string>(kRows));
    for (int u = 0; u < kUnroll; ++u) {
      std::string ku = w.reg(32), k64 = w.reg(64), a_off = w.reg(64);
      in[u] = w.reg(1);
      w.op("add.u32 " + ku + ", " + kk + ", " + std::to_string(32 * u));
      w.op("setp.lt.u32 " + in[u] + ", " + ku + ", " + k);
      w.op("cvt.u64.u32 " + k64 + ", " + ku);
      std::string b_at = w.reg(64);
      w.op("mad.lo.s64 " + b_at + ", " + k64 + ", " + b_rs + ", " + b_col);
      bv[u] = w.reg(reg_bits(t));
      w.op("@" + in[u] + " ld.global." + bt + " " + bv[u] + ", [" + b_at + "]");
      w.op("mul.lo.s64 " + a_off + ", " + k64 + ", " + a_cs);
      for (int r = 0; r < kRows; ++r) {
        std::string at = w.reg(64);
        w.op("add.s64 " + at + ", " + a_row[r] + ", " + a_off);
        av[u][r] = w.reg(reg_bits(t));
        w.op("@" + in[u] + " ld.global." + bt + " " + av[u][r] + ", [" + at + "]");
      }
    }
    for (int u = 0; u < kUnroll; ++u)
      for (int r = 0; r < kRows; ++r)
        w.op("@" + in[u] + " fma.rn." + ft + " " + acc[r] + ", " + av[u][r] + ", " + bv[u] + ", " + acc[r]);
  };
  // ---- warp `warp` owns column j0 + warp; its lanes stride through k --------------------------------
  {
    std::string j = w.reg(32), kk = w.reg(32), loop = w.label(), reduce = w.label();
    w.op("add.u32 " + j + ", " + j0 + ", " + warp);
    w.op("setp.ge.u32 " + p + ", " + j + ", " + n);
    w.op("@" + p + " bra.uni " + reduce);  // warp-uniform: the whole warp skips
    const std::string b_col = address(b, j, b_cs);
    w.op("mov.u32 " + kk + ", " + lane);
    w.place(loop);
    // Loops stay loops: unrolled by ptxas, this module took it 70 ms instead of 21 (Note [PTX
    // size]); the body is kUnroll steps already.
    w.op(".pragma \"nounroll\"");
    w.op("setp.ge.u32 " + p + ", " + kk + ", " + k);
    w.op("@" + p + " bra " + reduce);
    steps(b_col, kk);
    w.op("add.u32 " + kk + ", " + kk + ", " + std::to_string(32 * kUnroll));
    w.op("bra " + loop);
    w.place(reduce);
    w.op("bar.warp.sync -1");
    // The lanes' sums, butterfly order (deterministic); lane r keeps row r's.
    std::string mine = w.reg(reg_bits(t)), is = w.reg(1);
    for (int r = 0; r < kRows; ++r) {
      for (int mask = 16; mask >= 1; mask /= 2) {
        std::string other = w.reg(reg_bits(t));
        if (t == DType::Float64) {
          std::string lo = w.reg(32), hi = w.reg(32);
          w.op("mov.b64 {" + lo + ", " + hi + "}, " + acc[r]);
          w.op("shfl.sync.bfly.b32 " + lo + ", " + lo + ", " + std::to_string(mask) + ", 31, -1");
          w.op("shfl.sync.bfly.b32 " + hi + ", " + hi + ", " + std::to_string(mask) + ", 31, -1");
          w.op("mov.b64 " + other + ", {" + lo + ", " + hi + "}");
        } else {
          w.op("shfl.sync.bfly.b32 " + other + ", " + acc[r] + ", " + std::to_string(mask) + ", 31, -1");
        }
        w.op("add.rn." + ft + " " + acc[r] + ", " + acc[r] + ", " + other);
      }
      w.op("setp.eq.u32 " + is + ", " + lane + ", " + std::to_string(r));
      w.op("@" + is + " mov." + bt + " " + mine + ", " + acc[r]);
    }
    // tile[r][warp] from lane r.
    std::string slot = w.reg(32);
    w.op("setp.lt.u32 " + is + ", " + lane + ", " + std::to_string(kRows));
    w.op("mad.lo.u32 " + slot + ", " + lane + ", " + std::to_string(kWarps) + ", " + warp);
    w.op("@" + is + " st.shared." + bt + " [" + shared_slot(tile, slot) + "], " + mine);
  }

  // ---- the finished tile: the epilogue per (row, column), by every thread of the block ------------
  w.op("bar.sync 0");
  {
    std::string rows = w.reg(32), total = w.reg(32), q = w.reg(32);
    std::string loop = w.label(), next = w.label(), finished = w.label();
    w.op("sub.u32 " + rows + ", " + m + ", " + i0);
    w.op("min.u32 " + rows + ", " + rows + ", " + std::to_string(kRows));
    w.op("shl.b32 " + total + ", " + rows + ", 3");
    w.op("mov.u32 " + q + ", " + tid);
    w.place(loop);
    w.op(".pragma \"nounroll\"");
    w.op("setp.ge.u32 " + p + ", " + q + ", " + total);
    w.op("@" + p + " bra " + finished);
    std::string r = w.reg(32), jj = w.reg(32), j = w.reg(32), i = w.reg(32), slot = w.reg(32);
    w.op("shr.u32 " + r + ", " + q + ", 3");
    w.op("and.b32 " + jj + ", " + q + ", 7");
    w.op("add.u32 " + j + ", " + j0 + ", " + jj);
    w.op("setp.ge.u32 " + p + ", " + j + ", " + n);
    w.op("@" + p + " bra " + next);
    w.op("add.u32 " + i + ", " + i0 + ", " + r);
    w.op("mad.lo.u32 " + slot + ", " + r + ", " + std::to_string(kWarps) + ", " + jj);
    std::string v = w.reg(reg_bits(t));
    w.op("ld.shared." + bt + " " + v + ", [" + shared_slot(tile, slot) + "]");
    std::string result = v;
    if (has_ep) {
      std::vector<std::string> in(ep.input_dtypes.size());
      for (size_t x = 0; x < in.size(); ++x) {
        if (static_cast<int>(x) == g.c_input) {
          in[x] = v;
          continue;
        }
        const std::string row = address(ep_ptr[x], i, ep_rs[x]);
        in[x] = e.load(ep.input_dtypes[x], address(row, j, ep_cs[x]));
      }
      result = e.body(ep, hoisted, in)[ep.outputs[0]];
    }
    std::string c_row = address(c, i, ldc), c_at = w.reg(64), j64 = w.reg(64);
    w.op("mul.wide.u32 " + j64 + ", " + j + ", " + items);
    w.op("add.s64 " + c_at + ", " + c_row + ", " + j64);
    e.store(t, c_at, result);
    w.place(next);
    w.op("add.u32 " + q + ", " + q + ", " + std::to_string(abi::kSmallGemmThreads));
    w.op("bra " + loop);
    w.place(finished);
  }
  w.op("bar.sync 0");  // the tile is rewritten by the next rows
  w.op("add.u32 " + i0 + ", " + i0 + ", " + std::to_string(kRows));
  w.op("bra.uni " + rows_loop);
  w.place(done);
  w.op("ret");
  if (!e.failed().empty()) return Status::unsupported(e.failed());

  std::string ptx = module_header(g.key());
  ptx += ".shared .align 16 .b8 fj_gemm_tile[" + std::to_string(kRows * kWarps * item) + "];\n";
  ptx += "\n.visible .entry " + name + "(\n\t.param .align 8 .b8 args[" + std::to_string(abi::kSgSize) + "]\n)\n{\n";
  ptx += w.body();
  ptx += "}\n";
  return ptx;
}

}  // namespace framejit::jit::cuda
