// reduction.cpp — the reduction launcher of Note [CUDA reduction kernel ABI]: collapses the
// iteration space into kept and reduced dims and picks lanes per output and splits.
#include "runtime/cuda/reduction.h"

#include <algorithm>
#include <cstring>

#include "runtime/cuda/launch.h"
#include "runtime/cuda/memory.h"
#include "runtime/fixed_vector.h"

namespace framejit::rt::cuda {

namespace {

constexpr int64_t kMaxIndex = (int64_t{1} << 31) - 1;
// Resident threads per SM on every device framejit targets (sm_80 and later): a launch that
// gives each SM this many has enough loads in flight to hide memory latency.
constexpr int64_t kThreadsPerSm = 2048;

using Dim = ReductionDim;

struct Plan {
  const ReductionLaunch& L;
  const Kernel& main;
  const Kernel& combine;
  CUstream stream;
  int sms;
  int nops;
};

int log2_of(int64_t p) {
  int l = 0;
  while ((int64_t{1} << l) < p) ++l;
  return l;
}

Status launch_one(const Kernel& k, unsigned grid_x, unsigned grid_y, CUstream stream, ReduceArgs& args) {
  return launch(k, Dim3{grid_x, grid_y}, Dim3{static_cast<unsigned>(kReduceBlock)}, 0, stream, &args, sizeof args);
}


// One launch (or two, with splits) over kept dims `kept` and reduced dims `red` (outermost first,
// at most kReduceRank each, fewer than 2^31 positions each) from byte offset `off` per operand.
Status run_piece(const Plan& pl, const FixedVector<const Dim*, kMaxRank + 1>& kept,
                 const FixedVector<const Dim*, kMaxRank + 1>& red, const int64_t* off, bool rows_adjacent) {
  ReduceArgs args;
  std::memset(&args, 0, sizeof args);
  const ReductionLaunch& L = pl.L;
  int64_t outputs = 1, count = 1;
  for (const Dim* d : kept) outputs *= d->size;
  for (const Dim* d : red) count *= d->size;
  if (outputs == 0) return Status::ok();
  args.outputs = static_cast<uint32_t>(outputs);
  args.count = static_cast<uint32_t>(count);
  args.kept_rank = static_cast<uint32_t>(std::max<size_t>(kept.size(), 1));
  args.red_rank = static_cast<uint32_t>(std::max<size_t>(red.size(), 1));
  for (int d = 0; d < kReduceRank; ++d) {
    args.kept_shape[d] = d < static_cast<int>(kept.size()) ? static_cast<uint32_t>(kept[kept.size() - 1 - d]->size) : 1;
    args.red_shape[d] = d < static_cast<int>(red.size()) ? static_cast<uint32_t>(red[red.size() - 1 - d]->size) : 1;
    args.kept_div[d] = fast_div(args.kept_shape[d]);
    args.red_div[d] = fast_div(args.red_shape[d]);
  }
  for (int k = 0; k < pl.nops; ++k) {
    args.ptr[k] = reinterpret_cast<uint64_t>(L.inputs[k].data) + off[k];
    for (int d = 0; d < static_cast<int>(kept.size()); ++d) args.kept_stride[k][d] = kept[kept.size() - 1 - d]->stride[k];
    for (int d = 0; d < static_cast<int>(red.size()); ++d) args.red_stride[k][d] = red[red.size() - 1 - d]->stride[k];
  }
  args.out = reinterpret_cast<uint64_t>(L.out) + off[pl.nops];
  for (int d = 0; d < static_cast<int>(kept.size()); ++d) args.out_stride[d] = kept[kept.size() - 1 - d]->stride[pl.nops];
  args.divisor = count - L.ddof;
  std::copy_n(L.params, L.num_params, args.params);  // NB: not memcpy: L.params may be null

  const ReduceShape sh = reduce_shape(outputs, count, rows_adjacent, pl.sms);
  const int64_t lanes = sh.lanes, splits = sh.splits;
  args.lanes_log2 = static_cast<uint32_t>(log2_of(lanes));
  args.splits = static_cast<uint32_t>(splits);
  args.chunk = static_cast<uint32_t>(sh.chunk);
  auto grid = [&](int64_t lanes_per_output) {
    const int64_t per_block = kReduceBlock / lanes_per_output;
    return static_cast<unsigned>(grid_blocks(pl.main.device.index, (outputs + per_block - 1) / per_block, kReduceBlock, 0));
  };
  if (splits == 1) return launch_one(pl.main, grid(lanes), 1, pl.stream, args);

  // Partial results, then the combine entry over them (stream order frees them safely, Note
  // [One stream per device]).
  const int vbytes = dtype_itemsize(L.value_dtype) > 4 ? 8 : 4;
  const size_t n = static_cast<size_t>(outputs * splits);
  auto partials = device_alloc(pl.main.device.index, n * (vbytes + (L.arg ? 8 : 0)));
  if (!partials) return partials.error();
  args.partial_value = reinterpret_cast<uint64_t>(*partials);
  args.partial_index = args.partial_value + n * vbytes;
  Status s = launch_one(pl.main, grid(lanes), static_cast<unsigned>(splits), pl.stream, args);
  if (s) {
    const int64_t combine_lanes = sh.combine_lanes;
    args.count = static_cast<uint32_t>(splits);
    args.splits = 1;
    args.chunk = static_cast<uint32_t>(splits);
    args.lanes_log2 = static_cast<uint32_t>(log2_of(combine_lanes));
    s = launch_one(pl.combine, grid(combine_lanes), 1, pl.stream, args);
  }
  device_free(*partials);
  return s;
}

// Kept dims past kReduceRank (or 2^31 outputs) are walked here, one launch per position of the
// outermost ones.
Status run_kept(const Plan& pl, FixedVector<const Dim*, kMaxRank + 1> kept,
                const FixedVector<const Dim*, kMaxRank + 1>& red, const int64_t* off, bool rows_adjacent) {
  int64_t outputs = 1;
  for (const Dim* d : kept) outputs *= d->size;
  if (kept.size() <= static_cast<size_t>(kReduceRank) && outputs <= kMaxIndex)
    return run_piece(pl, kept, red, off, rows_adjacent);
  const Dim* outer = kept[0];
  FixedVector<const Dim*, kMaxRank + 1> rest;
  for (size_t i = 1; i < kept.size(); ++i) rest.push_back(kept[i]);
  for (int64_t i = 0; i < outer->size; ++i) {
    int64_t o[kMaxKernelOperands + 1];
    for (int k = 0; k <= pl.nops; ++k) o[k] = off[k] + i * outer->stride[k];
    FJ_PROPAGATE(run_kept(pl, rest, red, o, rows_adjacent));
  }
  return Status::ok();
}

}  // namespace

int64_t row_lanes(int64_t count) {
  int64_t lanes = 1;
  while (lanes < kReduceBlock && lanes * 8 < count) lanes *= 2;
  return lanes > 32 ? kReduceBlock : lanes;
}

ReduceShape reduce_shape(int64_t outputs, int64_t count, bool rows_adjacent, int sms) {
  ReduceShape sh;
  sh.lanes = rows_adjacent ? row_lanes(count) : 1;
  // Few outputs and many elements each: split them until the launch fills every SM.
  const int64_t target = int64_t{sms} * kThreadsPerSm;
  if (outputs * sh.lanes < target / 2 && count >= sh.lanes * 64) {
    sh.splits = std::min({(target + outputs * sh.lanes - 1) / (outputs * sh.lanes), count / (sh.lanes * 32), int64_t{65535}});
    sh.splits = std::max<int64_t>(sh.splits, 1);
  }
  const int64_t chunk = (count + sh.splits - 1) / sh.splits;
  sh.splits = count ? (count + chunk - 1) / chunk : 1;
  sh.chunk = std::max<int64_t>(chunk, 1);
  sh.combine_lanes = sh.splits > 1024 ? kReduceBlock : row_lanes(sh.splits);
  return sh;
}

Status run_reduction(const ReductionLaunch& L) {
  const int nops = L.num_inputs;
  auto st = stream(L.row->device.index);
  if (!st) return st.error();
  const int sms = multiprocessors(L.row->device.index);

  // Note [Reduction layouts] in runtime/reduction_executor.cpp (dims of size 0 kept: a count of 0
  // launches, and the kernel stores the identity).
  FixedVector<Dim, kMaxRank + 1> merged;
  reduction_dims(L, merged);
  FixedVector<const Dim*, kMaxRank + 1> kept, red;
  for (const Dim& x : merged) (x.reduced ? red : kept).push_back(&x);
  int64_t count = 1;
  for (const Dim* d : red) count *= d->size;
  if (red.size() > static_cast<size_t>(kReduceRank) || count > kMaxIndex)
    return Status::unsupported("a reduction of more than 2^31 - 1 elements per result, or over more than 4 "
                               "separate dims, is not run on CUDA devices yet");
  // The lanes of a group share an output when the reduced elements are the ones adjacent in
  // memory (the dim of the smallest stride); otherwise each thread takes an output of its own and
  // neighbouring threads read neighbouring outputs' elements.
  bool rows_adjacent = !red.empty();
  if (!red.empty() && !kept.empty()) {
    auto inner = [&](const Dim* x) {
      int64_t m = INT64_MAX;
      for (int k = 0; k < nops; ++k)
        if (x->stride[k]) m = std::min<int64_t>(m, x->stride[k] < 0 ? -x->stride[k] : x->stride[k]);
      return m;
    };
    int64_t r = INT64_MAX, c = INT64_MAX;
    for (const Dim* d : red) r = std::min(r, inner(d));
    for (const Dim* d : kept) c = std::min(c, inner(d));
    rows_adjacent = r <= c;
  }
  const Plan pl{L, *L.row, *L.column, *st, sms, nops};
  int64_t off[kMaxKernelOperands + 1] = {};
  return run_kept(pl, kept, red, off, rows_adjacent);
}

}  // namespace framejit::rt::cuda
