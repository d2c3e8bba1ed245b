// launch.h — running compiled CUDA kernels over strided device arrays: the pointwise kernel ABI
// the PTX generator (jit/cuda) emits against, and the launcher that fills it.
#pragma once

#include <cstdint>

#include "framejit/status.h"
#include "runtime/cuda/driver.h"
#include "runtime/executor.h"
#include "runtime/kernel_cache.h"

namespace framejit::rt::cuda {

// Note [Division by a run-time size]
// Kernels split a flat index into coordinates by dividing by the launch's dim sizes. A PTX
// div.u32 is some twenty instructions; a multiply-high and a shift by numbers the launcher
// computes once per size (Granlund and Montgomery's method) give the same quotient for every
// dividend below 2^31, which launchers guarantee: with l = ceil(log2 d) and
// magic = ceil(2^(31 + l) / d) (which fits 32 bits), x / d = (x * magic) >> (31 + l).
struct FastDiv {
  uint32_t magic, shift;  // NB: no initializers: the argument structs are memset, so trivial
};
FastDiv fast_div(uint32_t divisor);

// Note [CUDA pointwise kernel ABI]
// A pointwise kernel takes one parameter, a PointwiseArgs by value (kernel parameter space, read
// through the constant cache). Thread t of T handles 4-element chunks t, t+T, ... below `nvec`
// with 16-byte vector accesses where an operand is contiguous along dim 0 (a broadcast one,
// stride 0, is read once per chunk), then elements 4*nvec + t, + 2T, ... below `n` one at a
// time. An element's index is split into coordinates innermost first (32-bit divisions by
// `shape`, only for rank > 1); operand k's element is at ptr[k] + sum coord[d] * stride[k][d].
// The launcher guarantees n < 2^31 (so indices never overflow 32 bits), rank <= kLaunchRank (it
// loops over outer dims or splits the outermost one otherwise), and for nvec > 0: shape[0] a
// multiple of 4 (or rank 1), every non-broadcast operand contiguous along dim 0 with its pointer
// and outer strides multiples of 4 elements, no output broadcast.
constexpr int kLaunchRank = 4;
struct PointwiseArgs {
  uint32_t n;
  uint32_t rank;
  uint32_t shape[kLaunchRank];  // innermost first; dims past rank are 1
  uint32_t nvec;
  uint32_t pad;
  uint64_t ptr[kMaxKernelOperands];                  // inputs, then outputs
  int64_t stride[kMaxKernelOperands][kLaunchRank];  // bytes, innermost first
  ParamValue params[kMaxKernelParams];
  FastDiv div[kLaunchRank];  // shape[d]'s (Note [Division by a run-time size])
};
// The offsets the generated code reads (checked against the struct here, once).
constexpr int kArgsN = 0, kArgsRank = 4, kArgsShape = 8, kArgsNvec = 24, kArgsPtr = 32;
constexpr int kArgsStride = kArgsPtr + 8 * kMaxKernelOperands;
constexpr int kArgsParams = kArgsStride + 8 * kLaunchRank * kMaxKernelOperands;
constexpr int kArgsDiv = kArgsParams + 8 * kMaxKernelParams;
constexpr int kArgsSize = kArgsDiv + 8 * kLaunchRank;
static_assert(offsetof(PointwiseArgs, shape) == kArgsShape && offsetof(PointwiseArgs, nvec) == kArgsNvec &&
              offsetof(PointwiseArgs, ptr) == kArgsPtr && offsetof(PointwiseArgs, stride) == kArgsStride &&
              offsetof(PointwiseArgs, params) == kArgsParams && offsetof(PointwiseArgs, div) == kArgsDiv &&
              sizeof(PointwiseArgs) == kArgsSize);
/// Threads per block of a pointwise launch.
constexpr int kPointwiseBlock = 256;

/// The number of SMs of `device` (1 when it cannot be read), cached per device.
int multiprocessors(int device);
/// Blocks of `threads` threads using `shared` bytes of shared memory that fit on one SM of
/// `device` at once (threads, shared memory; registers are the caller's to keep in bounds).
int resident_blocks(int device, int threads, int64_t shared);
/// A grid-stride launch's blocks for `tiles` units of work: a block per tile, so the hardware's
/// block scheduler balances uneven tiles and SMs, up to 32 waves of resident blocks; past that,
/// as few blocks as give each the same number of tiles (or one fewer), amortizing their setup.
int64_t grid_blocks(int device, int64_t tiles, int threads, int64_t shared);

/// Launches device kernel `kernel` (its module loaded first when it is not yet, Kernel::ready),
/// whose one parameter is the `size` bytes at `args` (every framejit kernel takes one struct), or
/// records the launch when the thread records work for the stream (Note [Replayed launches]).
Status launch(const Kernel& kernel, Dim3 grid, Dim3 block, unsigned shared_bytes, CUstream stream, const void* args,
              size_t size);

/// Runs device kernel `kernel` over `shape` (rank dims; operands' data are device pointers on the
/// kernel's device) on framejit's stream (Note [One stream per device]). Returns once the work is
/// issued; an error names the failing driver call.
Status run_pointwise(const Kernel& kernel, int rank, const int64_t* shape, int num_operands, const Operand* operands,
                     const ParamValue* params, int num_params);

}  // namespace framejit::rt::cuda
