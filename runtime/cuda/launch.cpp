// launch.cpp — the pointwise launcher of Note [CUDA pointwise kernel ABI].
#include "runtime/cuda/launch.h"

#include <algorithm>
#include <cstring>
#include <atomic>

#include "runtime/cuda/graph.h"
#include "runtime/cuda/memory.h"

namespace framejit::rt::cuda {

namespace {

constexpr int64_t kMaxLaunchElements = int64_t{1} << 31;

// Blocks per SM a grid-stride launch asks for at most: enough resident warps to hide memory
// latency on every SM, few enough that each thread loops a few times.
constexpr int kBlocksPerSm = 16;


struct Launch {
  const Kernel& kernel;
  CUstream stream;
  int num_operands;
  const int* itemsize;
  int sms;
};

Status issue(const Launch& l, PointwiseArgs& args) {
  int64_t items = args.n;
  if (args.nvec) items = std::max<int64_t>(args.nvec, args.n - 4 * int64_t{args.nvec});
  const int64_t blocks =
      std::clamp<int64_t>((items + kPointwiseBlock - 1) / kPointwiseBlock, 1, int64_t{l.sms} * kBlocksPerSm);
  return launch(l.kernel, Dim3{static_cast<unsigned>(blocks)}, Dim3{static_cast<unsigned>(kPointwiseBlock)}, 0,
                l.stream, &args, sizeof args);
}

// Whether chunks of 4 elements along dim 0 may use vector accesses (the ABI's conditions).
// Outputs are never broadcast (stride 0 along a dim of size > 1 happens to inputs only).
bool vectorizable(const Launch& l, const PointwiseArgs& a) {
  if (a.n < 4 || (a.rank > 1 && a.shape[0] % 4)) return false;
  for (int k = 0; k < l.num_operands; ++k) {
    const int64_t s0 = a.stride[k][0], size = l.itemsize[k];
    if (s0 == 0) continue;  // a broadcast input: read once per chunk
    if (s0 != size) return false;
    const int64_t vec = 4 * size;
    if (a.ptr[k] % vec) return false;
    for (uint32_t d = 1; d < a.rank; ++d)
      if (a.stride[k][d] % vec) return false;
  }
  return true;
}

// One launch per piece: dims[0..nd) outermost first, strides likewise; at most kLaunchRank dims
// and fewer than 2^31 elements, else loops over (or splits) the outermost dim.
Status run_piece(const Launch& l, int nd, const int64_t* dims, const int64_t (*strides)[kMaxRank],
                 const uint64_t* ptr, PointwiseArgs& args) {
  int64_t inner = 1;
  for (int d = 1; d < nd; ++d) inner *= dims[d];
  if (nd > kLaunchRank || (nd > 1 && inner >= kMaxLaunchElements)) {
    uint64_t p[kMaxKernelOperands];
    for (int64_t i = 0; i < dims[0]; ++i) {
      for (int k = 0; k < l.num_operands; ++k) p[k] = ptr[k] + i * strides[k][0];
      int64_t sub_strides[kMaxKernelOperands][kMaxRank];
      for (int k = 0; k < l.num_operands; ++k) std::copy(strides[k] + 1, strides[k] + nd, sub_strides[k]);
      FJ_PROPAGATE(run_piece(l, nd - 1, dims + 1, sub_strides, p, args));
    }
    return Status::ok();
  }
  const int64_t total = dims[0] * inner;
  if (total >= kMaxLaunchElements) {  // the outermost dim in slices of fewer than 2^31 elements
    const int64_t step = std::max<int64_t>(1, (kMaxLaunchElements - 1) / inner) & ~int64_t{3};
    int64_t d0[kMaxRank];
    std::copy(dims, dims + nd, d0);
    uint64_t p[kMaxKernelOperands];
    for (int64_t at = 0; at < dims[0]; at += step) {
      d0[0] = std::min(step, dims[0] - at);
      for (int k = 0; k < l.num_operands; ++k) p[k] = ptr[k] + at * strides[k][0];
      FJ_PROPAGATE(run_piece(l, nd, d0, strides, p, args));
    }
    return Status::ok();
  }
  args.n = static_cast<uint32_t>(total);
  args.rank = static_cast<uint32_t>(nd);
  for (int d = 0; d < kLaunchRank; ++d) {
    args.shape[d] = d < nd ? static_cast<uint32_t>(dims[nd - 1 - d]) : 1;
    args.div[d] = fast_div(args.shape[d]);
  }
  for (int k = 0; k < l.num_operands; ++k) {
    args.ptr[k] = ptr[k];
    for (int d = 0; d < kLaunchRank; ++d) args.stride[k][d] = d < nd ? strides[k][nd - 1 - d] : 0;
  }
  args.nvec = vectorizable(l, args) ? args.n / 4 : 0;
  return issue(l, args);
}

}  // namespace

Status launch(const Kernel& kernel, Dim3 grid, Dim3 block, unsigned shared_bytes, CUstream stream, const void* args,
              size_t size) {
  FJ_PROPAGATE(kernel.ready());
  const auto f = static_cast<CUfunction>(kernel.entry);
  if (records(kernel.device.index, stream)) return record_kernel(f, grid, block, shared_bytes, args, size);
  void* params[] = {const_cast<void*>(args)};
  return launch(f, grid, block, shared_bytes, stream, params);
}

// Read once per device; per launch an atomic load, no lock.
int multiprocessors(int device) {
  static std::atomic<int> count[64] = {};
  if (device < 0 || device >= 64) return 1;
  int n = count[device].load(std::memory_order_relaxed);
  if (!n) {
    auto info = device_info(device);
    n = info ? std::max(1, info->multiprocessors) : 1;
    count[device].store(n, std::memory_order_relaxed);
  }
  return n;
}

FastDiv fast_div(uint32_t divisor) {
  FastDiv f{0, 0};
  if (divisor == 0) return f;  // never divided by: a dim of 0 launches nothing
  uint32_t l = 0;
  while ((uint64_t{1} << l) < divisor) ++l;
  f.magic = static_cast<uint32_t>(((uint64_t{1} << (31 + l)) + divisor - 1) / divisor);
  f.shift = 31 + l;
  return f;
}

int resident_blocks(int device, int threads, int64_t shared) {
  static std::atomic<int> smem[64] = {};
  int per_sm = device >= 0 && device < 64 ? smem[device].load(std::memory_order_relaxed) : 0;
  if (!per_sm) {
    auto info = device_info(device);
    per_sm = info && info->shared_per_multiprocessor > 0 ? info->shared_per_multiprocessor : 48 * 1024;
    if (device >= 0 && device < 64) smem[device].store(per_sm, std::memory_order_relaxed);
  }
  // 2048 resident threads per SM on sm_80 and later; the driver reserves 1 KiB of shared memory
  // per block, and the generators' own shared words take about 1 KiB more.
  int blocks = 2048 / std::max(threads, 1);
  if (shared > 0) blocks = std::min<int64_t>(blocks, per_sm / (shared + 2048));
  return std::max(blocks, 1);
}

int64_t grid_blocks(int device, int64_t tiles, int threads, int64_t shared) {
  const int64_t resident = 32 * int64_t{multiprocessors(device)} * resident_blocks(device, threads, shared);
  if (tiles <= resident) return std::max<int64_t>(tiles, 1);
  const int64_t per_block = (tiles + resident - 1) / resident;
  return (tiles + per_block - 1) / per_block;
}

Status run_pointwise(const Kernel& kernel, int rank, const int64_t* shape, int num_operands, const Operand* operands,
                     const ParamValue* params, int num_params) {
  int64_t total = 1;
  for (int d = 0; d < rank; ++d) total *= shape[d];
  if (total == 0) return Status::ok();
  auto st = stream(kernel.device.index);
  if (!st) return st.error();
  int64_t dims[kMaxRank];
  int64_t strides[kMaxKernelOperands][kMaxRank];
  const int nd = collapse_dims(rank, shape, num_operands, operands, dims, strides);
  int itemsize[kMaxKernelOperands];
  uint64_t ptr[kMaxKernelOperands];
  for (int k = 0; k < num_operands; ++k) {
    itemsize[k] = operands[k].itemsize;
    ptr[k] = reinterpret_cast<uint64_t>(operands[k].data);
  }
  PointwiseArgs args;
  std::memset(&args, 0, sizeof args);
  std::copy_n(params, num_params, args.params);
  // A flat kernel takes one collapsed dim (Note [Flat pointwise kernels]); its strided twin the rest.
  const Kernel& chosen = nd == 1 || !kernel.strided ? kernel : *kernel.strided;
  const Launch l{chosen, *st, num_operands, itemsize, multiprocessors(kernel.device.index)};
  return run_piece(l, nd, dims, strides, ptr, args);
}

}  // namespace framejit::rt::cuda
