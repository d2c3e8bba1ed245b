// reduction.h — running compiled CUDA reductions: the kernel ABI the PTX generator
// (jit/cuda/reduction_codegen) emits against, and the launcher that picks the thread layout.
#pragma once

#include <cstddef>
#include <cstdint>

#include "framejit/status.h"
#include "runtime/cuda/launch.h"
#include "runtime/executor.h"

namespace framejit::rt::cuda {

// Note [CUDA reduction kernel ABI]
// A reduction module has two entries taking one ReduceArgs by value: the reduction and its
// combine. The iteration space is split into kept dims (one output per position, `outputs` in
// all) and reduced dims (`count` elements per output), each collapsed to at most kReduceRank
// dims, innermost first. Threads work in groups of `lanes` (a power of two up to the block):
// the block's groups take consecutive outputs of a tile, blocks take tiles in turn (grid-stride),
// and lane l of a group reads reduced elements l, l + lanes, ... of its output's slice
// [y * chunk, y * chunk + chunk) where y is blockIdx.y, one of `splits`. The group combines its
// lanes with butterfly shuffles (and shared memory across warps when the group is the block).
// With splits == 1 the group's lane 0 finishes (mean's division by `divisor`, sqrt) and stores
// the result; otherwise it stores the slice's value (and argmax/argmin's index) into partials
// [o * splits + y], and the combine entry, launched next with splits == 1 and count == splits,
// reduces each output's partials in order and finishes. Every choice depends on the shapes
// alone, and every combination happens in a fixed tree, so results are the same run to run.
// Operands are the prologue's inputs, then (when the kernel stores reduced values) the values'
// array; their strides and the output's are bytes.
constexpr int kReduceRank = 4;
constexpr int kReduceBlock = 256;
struct ReduceArgs {
  uint32_t outputs, count;
  uint32_t kept_rank, red_rank;
  uint32_t kept_shape[kReduceRank];  // innermost first; dims past the rank are 1
  uint32_t red_shape[kReduceRank];
  uint32_t lanes_log2, splits, chunk, pad;
  uint64_t ptr[kMaxKernelOperands];
  int64_t kept_stride[kMaxKernelOperands][kReduceRank];
  int64_t red_stride[kMaxKernelOperands][kReduceRank];
  uint64_t out;
  int64_t out_stride[kReduceRank];  // over the kept dims
  uint64_t partial_value, partial_index;
  int64_t divisor;  // mean: count - ddof, converted to the result's type by the kernel
  ParamValue params[kMaxKernelParams];
  FastDiv kept_div[kReduceRank], red_div[kReduceRank];  // Note [Division by a run-time size]
};
constexpr int kRedOutputs = 0, kRedCount = 4, kRedKeptRank = 8, kRedRedRank = 12, kRedKeptShape = 16;
constexpr int kRedRedShape = kRedKeptShape + 4 * kReduceRank;
constexpr int kRedLanesLog2 = kRedRedShape + 4 * kReduceRank;
constexpr int kRedSplits = kRedLanesLog2 + 4, kRedChunk = kRedLanesLog2 + 8;
constexpr int kRedPtr = kRedLanesLog2 + 16;
constexpr int kRedKeptStride = kRedPtr + 8 * kMaxKernelOperands;
constexpr int kRedRedStride = kRedKeptStride + 8 * kReduceRank * kMaxKernelOperands;
constexpr int kRedOut = kRedRedStride + 8 * kReduceRank * kMaxKernelOperands;
constexpr int kRedOutStride = kRedOut + 8;
constexpr int kRedPartialValue = kRedOutStride + 8 * kReduceRank, kRedPartialIndex = kRedPartialValue + 8;
constexpr int kRedDivisor = kRedPartialIndex + 8;
constexpr int kRedParams = kRedDivisor + 8;
constexpr int kRedKeptDiv = kRedParams + 8 * kMaxKernelParams;
constexpr int kRedRedDiv = kRedKeptDiv + 8 * kReduceRank;
constexpr int kRedSize = kRedRedDiv + 8 * kReduceRank;
static_assert(offsetof(ReduceArgs, kept_shape) == kRedKeptShape && offsetof(ReduceArgs, red_shape) == kRedRedShape &&
              offsetof(ReduceArgs, lanes_log2) == kRedLanesLog2 && offsetof(ReduceArgs, splits) == kRedSplits &&
              offsetof(ReduceArgs, chunk) == kRedChunk && offsetof(ReduceArgs, ptr) == kRedPtr &&
              offsetof(ReduceArgs, kept_stride) == kRedKeptStride && offsetof(ReduceArgs, red_stride) == kRedRedStride &&
              offsetof(ReduceArgs, out) == kRedOut && offsetof(ReduceArgs, out_stride) == kRedOutStride &&
              offsetof(ReduceArgs, partial_value) == kRedPartialValue && offsetof(ReduceArgs, divisor) == kRedDivisor &&
              offsetof(ReduceArgs, params) == kRedParams && offsetof(ReduceArgs, kept_div) == kRedKeptDiv &&
              offsetof(ReduceArgs, red_div) == kRedRedDiv && sizeof(ReduceArgs) == kRedSize);

/// Lanes per output when the reduced elements are adjacent in memory: enough that each lane reads
/// about 8 of them, either at most a warp or the whole block (Note [CUDA reduction kernel ABI]).
int64_t row_lanes(int64_t count);
/// How a launch of `outputs` results of `count` elements each is laid out on `sms` SMs: lanes per
/// output, the slices each output's elements are split into (and their length), and the combine
/// entry's lanes. Shapes alone decide it, so results are the same run to run.
struct ReduceShape {
  int64_t lanes = 1, splits = 1, chunk = 1, combine_lanes = 1;
};
ReduceShape reduce_shape(int64_t outputs, int64_t count, bool rows_adjacent, int sms);

/// Runs a reduction on the kernels' device, on framejit's stream: `launch.row` is the reduction
/// entry, `launch.column` its combine entry; `launch.inputs` holds every operand of the kernel
/// (the values' array last when it stores them). Returns once the work is issued.
Status run_reduction(const ReductionLaunch& launch);

}  // namespace framejit::rt::cuda
