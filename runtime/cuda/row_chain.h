// row_chain.h — running fused row chains on a CUDA device: the kernel ABI of jit/cuda's
// row-chain generator (one kernel for softmax, layer norm and the like) and its launcher.
#pragma once

#include <cstddef>
#include <cstdint>

#include "framejit/status.h"
#include "runtime/cuda/launch.h"
#include "runtime/executor.h"

namespace framejit::rt::cuda {

// Note [CUDA row-chain kernel ABI]
// A chain's parts (kernels and reductions of the last axis) share their leading dims: `rows`
// positions over `lead_rank` dims (innermost first; at most kChainLeadRank). Part j iterates over
// n[j] elements of each row. Threads work in groups of 2^lanes_log2 lanes (at most a warp, or the
// whole block) as reductions do (Note [CUDA reduction kernel ABI]): a group takes one row, and runs
// every part over it in order, lane l taking 4-element chunks l, l + lanes, ... below nvec[j] with
// vector accesses, then single elements 4 * nvec[j] + l, + lanes, ... A reduction part combines
// its group's lanes and every lane keeps the result; lane 0 stores it. A barrier separates the
// parts, so a part reads what earlier parts wrote, and a part takes an input that is an earlier
// reduction's result (broadcast along the row) from that reduction directly. Operand slots run
// part by part: each part's inputs, then its outputs (a kernel's), or its result and the stored
// values' array (a reduction's). Slot s of row r, element e is at
// ptr[s] + sum lead coord(r)[d] * lead_stride[s][d] + e * inner[s]. Parameters run part by part
// too, each part's after the previous ones'. nvec[j] is nonzero only when every slot part j reads
// from or writes to memory is contiguous along the row (or broadcast along it, inner stride 0) and
// 16-byte aligned at every row.
// Row caches: an array that several parts read is copied into shared memory when a group starts a
// row (each group has group_bytes there, cache q at cache_offset[q]: cache_n[q] elements, the
// first cache_chunks[q] * 16 bytes as 16-byte asynchronous copies, which need 16-byte aligned
// rows; a half-type row is stored widened to float32), and every part reads it from there. The
// launcher turns caching on (cache_on) only when every cached array is contiguous along the row
// in every part that reads it, with the same row length, and all groups' caches fit in
// kChainCacheBytes; otherwise every part reads memory.
constexpr int kChainLeadRank = 4;
constexpr int kChainSlots = 32;
constexpr int kChainParams = 32;
constexpr int kChainParts = kMaxRowLaunches;
constexpr int kChainBlock = 256;
constexpr int64_t kChainWarpRow = 2048;  // longer rows take a block's lanes (plan_row_chain)
constexpr int kChainCaches = 4;  // jit's RowChainIR::kMaxRowCaches (checked in jit/cuda)
constexpr int kChainCacheBytes = 48 * 1024;  // dynamic shared memory a launch may ask for as is
struct ChainArgs {
  uint32_t rows, lead_rank, lanes_log2, cache_on;
  uint32_t group_bytes;                   // row caches of one group, in shared memory
  uint32_t cache_offset[kChainCaches];    // each cache's place in its group's bytes
  uint32_t cache_n[kChainCaches];         // each cache's elements per row
  uint32_t cache_chunks[kChainCaches];    // of which 16-byte chunks copied whole (0: unaligned rows)
  uint32_t pad;
  uint32_t lead_shape[kChainLeadRank];
  uint32_t n[kChainParts];
  uint32_t nvec[kChainParts];    // 4-element chunks done with vector accesses (0: none)
  int64_t divisor[kChainParts];  // a mean part's count - ddof
  uint64_t ptr[kChainSlots];
  int64_t lead_stride[kChainSlots][kChainLeadRank];
  int64_t inner[kChainSlots];
  ParamValue params[kChainParams];
  FastDiv lead_div[kChainLeadRank];  // Note [Division by a run-time size]
};
constexpr int kChainRows = 0, kChainLeadRankAt = 4, kChainLanesLog2 = 8, kChainCacheOn = 12, kChainGroupBytes = 16;
constexpr int kChainCacheOffset = 20;
constexpr int kChainCacheN = kChainCacheOffset + 4 * kChainCaches;
constexpr int kChainCacheChunks = kChainCacheN + 4 * kChainCaches;
constexpr int kChainLeadShape = kChainCacheChunks + 4 * kChainCaches + 4;
constexpr int kChainN = kChainLeadShape + 4 * kChainLeadRank;
constexpr int kChainNvec = kChainN + 4 * kChainParts;
constexpr int kChainDivisor = kChainNvec + 4 * kChainParts;
constexpr int kChainPtr = kChainDivisor + 8 * kChainParts;
constexpr int kChainLeadStride = kChainPtr + 8 * kChainSlots;
constexpr int kChainInner = kChainLeadStride + 8 * kChainLeadRank * kChainSlots;
constexpr int kChainParamsAt = kChainInner + 8 * kChainSlots;
constexpr int kChainLeadDiv = kChainParamsAt + 8 * kChainParams;
constexpr int kChainSize = kChainLeadDiv + 8 * kChainLeadRank;
static_assert(offsetof(ChainArgs, cache_on) == kChainCacheOn && offsetof(ChainArgs, group_bytes) == kChainGroupBytes &&
              offsetof(ChainArgs, cache_offset) == kChainCacheOffset && offsetof(ChainArgs, cache_n) == kChainCacheN &&
              offsetof(ChainArgs, cache_chunks) == kChainCacheChunks && offsetof(ChainArgs, lead_shape) == kChainLeadShape && offsetof(ChainArgs, n) == kChainN &&
              offsetof(ChainArgs, nvec) == kChainNvec &&
              offsetof(ChainArgs, divisor) == kChainDivisor && offsetof(ChainArgs, ptr) == kChainPtr &&
              offsetof(ChainArgs, lead_stride) == kChainLeadStride && offsetof(ChainArgs, inner) == kChainInner &&
              offsetof(ChainArgs, params) == kChainParamsAt && offsetof(ChainArgs, lead_div) == kChainLeadDiv &&
              sizeof(ChainArgs) == kChainSize);

/// One part of a chain as the run bound it: its iteration space (the chain's lead dims, then its
/// row), its operands broadcast to it (inputs, then a kernel's outputs or a reduction's stored
/// values), a reduction's result, and which inputs the kernel takes from an earlier reduction.
struct RowChainPart {
  bool reduction = false;
  int rank = 0;
  const int64_t* shape = nullptr;
  int num_inputs = 0;
  int num_operands = 0;
  const Operand* operands = nullptr;
  char* out = nullptr;                   // reduction: the result, strides over the iteration dims
  const int64_t* out_strides = nullptr;  // (0 along the row)
  int64_t divisor = 1;
  const bool* forwarded = nullptr;  // per input
  const int* cached = nullptr;      // per input: its row cache, or -1 (null: none)
  const ParamValue* params = nullptr;
  int num_params = 0;
};

/// A fused chain's launch: its arguments, the dynamic shared memory its row caches take, and the
/// tiles (groups of rows, one per block) it covers.
struct RowChainLaunch {
  ChainArgs args;
  int64_t tiles = 0;
  unsigned shared = 0;
};
/// Plans the launch of a fused chain over bound parts (no device call: tests/cpp checks it).
/// Unsupported, as run_row_chain says, when the layout does not fit the kernel.
Status plan_row_chain(const RowChainPart* parts, int count, RowChainLaunch& launch);

/// Runs a fused chain kernel over bound parts on framejit's stream. Unsupported (and nothing
/// issued) when the layout does not fit the kernel: parts that disagree on the leading dims, more
/// than kChainLeadRank of them, 2^31 rows or elements, or a forwarded input that is not broadcast
/// along the row; the caller then runs the parts one by one.
Status run_row_chain(const Kernel& kernel, const RowChainPart* parts, int count);

}  // namespace framejit::rt::cuda
