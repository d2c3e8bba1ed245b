// row_chain.cpp — the launcher of Note [CUDA row-chain kernel ABI].
#include "runtime/cuda/row_chain.h"

#include <algorithm>
#include <cstring>

#include "runtime/cuda/launch.h"
#include "runtime/cuda/memory.h"

namespace framejit::rt::cuda {

namespace {

constexpr int64_t kMaxIndex = (int64_t{1} << 31) - 1;

}  // namespace

Status plan_row_chain(const RowChainPart* parts, int count, RowChainLaunch& launch) {
  if (count < 1 || count > kChainParts) return Status::unsupported("chain length");
  const int rank = parts[0].rank;
  const int lead = rank - 1;
  if (rank < 1 || lead > kChainLeadRank) return Status::unsupported("chain rank");
  ChainArgs& args = launch.args;
  std::memset(&args, 0, sizeof args);
  launch.tiles = 0;
  launch.shared = 0;
  int64_t rows = 1, longest = 0;
  for (int d = 0; d < lead; ++d) rows *= parts[0].shape[d];
  int slot = 0, param = 0;
  for (int j = 0; j < count; ++j) {
    const RowChainPart& p = parts[j];
    if (p.rank != rank || !std::equal(p.shape, p.shape + lead, parts[0].shape))
      return Status::unsupported("parts disagree on the rows");
    const int64_t n = p.shape[rank - 1];
    if (n > kMaxIndex || rows > kMaxIndex) return Status::unsupported("2^31 elements");
    args.n[j] = static_cast<uint32_t>(n);
    args.divisor[j] = p.divisor;
    longest = std::max(longest, n);
    const int slots = p.num_operands + (p.reduction ? 1 : 0);
    if (slot + slots > kChainSlots || param + p.num_params > kChainParams) return Status::unsupported("too many operands");
    auto put = [&](const char* data, const int64_t* strides) {
      args.ptr[slot] = reinterpret_cast<uint64_t>(data);
      for (int d = 0; d < lead; ++d) args.lead_stride[slot][d] = strides[lead - 1 - d];
      args.inner[slot] = strides[rank - 1];
      ++slot;
    };
    // Vector chunks when every operand the part reads or writes per element is contiguous along
    // the row (or broadcast along it) and 16-byte aligned at every row.
    bool vec = n >= 4;
    auto vectorizable = [&](const Operand& o) {
      const int64_t inner = o.strides[rank - 1];
      if (inner == 0) return true;
      if (inner != o.itemsize || reinterpret_cast<uint64_t>(o.data) % 16) return false;
      for (int d = 0; d < lead; ++d)
        if (o.strides[d] % 16) return false;
      return true;
    };
    for (int k = 0; k < p.num_inputs; ++k) {
      // A forwarded input must be the same value along the row (its reduction's keepdims result).
      if (p.forwarded[k] && p.operands[k].strides[rank - 1] != 0 && n > 1)
        return Status::unsupported("a forwarded input varies along the row");
      if (!p.forwarded[k]) vec = vec && vectorizable(p.operands[k]);
      put(p.operands[k].data, p.operands[k].strides);
    }
    if (p.reduction) put(p.out, p.out_strides);
    for (int k = p.num_inputs; k < p.num_operands; ++k) {
      vec = vec && vectorizable(p.operands[k]) && p.operands[k].strides[rank - 1] != 0;
      put(p.operands[k].data, p.operands[k].strides);
    }
    args.nvec[j] = vec ? static_cast<uint32_t>(n / 4) : 0;
    std::copy_n(p.params, p.num_params, args.params + param);
    param += p.num_params;
  }
  if (rows == 0) return Status::ok();  // no tiles: nothing to launch
  // Row caches: on when each cached array is contiguous along the row wherever it is read, with
  // one row length, and every group's caches fit in shared memory.
  int64_t cache_n[kChainCaches] = {}, cache_size[kChainCaches] = {};
  bool cache_on = true;
  int caches = 0;
  for (int j = 0; j < count; ++j) {
    const RowChainPart& p = parts[j];
    for (int k = 0; p.cached && k < p.num_inputs; ++k) {
      const int q = p.cached[k];
      if (q < 0) continue;
      if (q >= kChainCaches) return Status::unsupported("row caches");
      caches = std::max(caches, q + 1);
      const int64_t n = p.shape[rank - 1];
      const Operand& o = p.operands[k];
      if (o.strides[rank - 1] != o.itemsize || (cache_n[q] && cache_n[q] != n)) cache_on = false;
      if (!cache_n[q]) {  // the first reader's rows are the ones copied
        bool aligned = reinterpret_cast<uint64_t>(o.data) % 16 == 0;
        for (int d = 0; d < lead; ++d) aligned = aligned && o.strides[d] % 16 == 0;
        args.cache_chunks[q] = aligned ? static_cast<uint32_t>(n * o.itemsize / 16) : 0;
      }
      cache_n[q] = n;
      args.cache_n[q] = static_cast<uint32_t>(n);
      // A half-type row is cached widened to float32 (Note [Half-type rows are cached in float32]
      // in jit/cuda/row_chain_codegen.cpp): 2-byte elements take 4 bytes there.
      cache_size[q] = o.itemsize == 2 ? 4 : o.itemsize;
    }
  }
  int64_t group_bytes = 0;
  for (int q = 0; q < caches; ++q) {
    args.cache_offset[q] = static_cast<uint32_t>(group_bytes);
    group_bytes += (cache_n[q] * cache_size[q] + 15) / 16 * 16;
  }
  args.rows = static_cast<uint32_t>(rows);
  args.lead_rank = static_cast<uint32_t>(std::max(lead, 1));
  for (int d = 0; d < kChainLeadRank; ++d) {
    args.lead_shape[d] = d < lead ? static_cast<uint32_t>(parts[0].shape[lead - 1 - d]) : 1;
    args.lead_div[d] = fast_div(args.lead_shape[d]);
  }
  // Lanes per row: about 8 elements a lane, a warp at most for rows up to kChainWarpRow elements
  // (64 a lane: its shuffles combine them, no barrier), the whole block past that. A block per
  // row of 512 (attention's softmax) spent its time in barriers: 222 us against 73 for torch's
  // warp-per-row kernel on 65536 x 512 float32 (H200), where a warp per row runs at copy speed.
  int lanes_log2 = 0;
  while (lanes_log2 < 5 && (int64_t{8} << lanes_log2) < longest) ++lanes_log2;
  if (longest > kChainWarpRow)
    while ((1 << lanes_log2) < kChainBlock) ++lanes_log2;
  args.lanes_log2 = static_cast<uint32_t>(lanes_log2);
  const int64_t per_block = kChainBlock >> lanes_log2;
  cache_on = cache_on && caches > 0 && group_bytes * per_block <= kChainCacheBytes;
  args.cache_on = cache_on;
  args.group_bytes = cache_on ? static_cast<uint32_t>(group_bytes) : 0;
  launch.shared = static_cast<unsigned>(cache_on ? group_bytes * per_block : 0);
  launch.tiles = (rows + per_block - 1) / per_block;
  return Status::ok();
}

Status run_row_chain(const Kernel& kernel, const RowChainPart* parts, int count) {
  RowChainLaunch l;
  FJ_PROPAGATE(plan_row_chain(parts, count, l));
  if (l.tiles == 0) return Status::ok();
  auto st = stream(kernel.device.index);
  if (!st) return st.error();
  const auto blocks = static_cast<unsigned>(grid_blocks(kernel.device.index, l.tiles, kChainBlock, l.shared));
  return launch(kernel, Dim3{blocks}, Dim3{static_cast<unsigned>(kChainBlock)}, l.shared, *st, &l.args,
                sizeof l.args);
}

}  // namespace framejit::rt::cuda
