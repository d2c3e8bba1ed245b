// reduction_executor.cpp — launching reduction kernels over strided operands: which dimensions
// the kernel loops over (row or column form), which the executor walks, and the thread split.
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <type_traits>
#include <vector>

#include "runtime/executor.h"
#include "runtime/fixed_vector.h"
#include "runtime/strided_copy.h"
#include "runtime/threads.h"

namespace framejit::rt {

namespace {

// About this many elements of work per parallel task.
constexpr int64_t kElementsPerTask = 1 << 15;
// Column form: outputs per task. Each task streams its slice of every reduced row; a slice of a
// whole row (up to 16 K outputs, whose partial results stay in L2) keeps the stream linear, which
// is what the hardware prefetchers follow best.
constexpr int64_t kColumnChunk = 1 << 14;
// ... and a task gets at least this many outputs when the kept dims are split to feed threads:
// slices of 4 K elements (4 or 8 pages) still stream well.
constexpr int64_t kMinColumnChunk = 1 << 12;
// Note [Short rows]: rows spanning at most this many bytes of every input, under at least this
// many outputs, run in the column form.
constexpr int64_t kShortRowBytes = 64;
constexpr int64_t kShortRowOutputs = 64;
// Note [Long and strided arg rows]: the most pieces one long row is split into.
constexpr int64_t kMaxThreadsForPieces = 64;

using Dim = ReductionDim;

// Walks some dims in C order (last fastest): the operands' byte offsets of the idx-th position.
struct Walk {
  FixedVector<const Dim*, kMaxRank + 1> dims;
  int64_t count() const {
    int64_t c = 1;
    for (const Dim* d : dims) c *= d->size;
    return c;
  }
  void add_offsets(int64_t idx, int num_operands, int64_t* off) const {
    for (size_t i = dims.size(); i-- > 0;) {
      int64_t pos = idx % dims[i]->size;
      idx /= dims[i]->size;
      for (int k = 0; k < num_operands; ++k) off[k] += pos * dims[i]->stride[k];
    }
  }
};

// The offsets of consecutive positions of a Walk, stepped like an odometer: no divisions per
// position (they cost as much as a 300-element row's kernel call).
struct WalkCursor {
  WalkCursor(const Walk& walk, int num_operands, int64_t idx) : walk_(walk), nops_(num_operands) {
    walk.add_offsets(idx, nops_, off);
    for (size_t i = walk.dims.size(); i-- > 0;) {
      pos_[i] = idx % walk.dims[i]->size;
      idx /= walk.dims[i]->size;
    }
  }
  void next() {
    for (size_t i = walk_.dims.size(); i-- > 0;) {
      const Dim& d = *walk_.dims[i];
      if (++pos_[i] < d.size) {
        for (int k = 0; k < nops_; ++k) off[k] += d.stride[k];
        return;
      }
      pos_[i] = 0;
      for (int k = 0; k < nops_; ++k) off[k] -= (d.size - 1) * d.stride[k];
    }
  }
  int64_t off[kMaxKernelOperands + 1] = {};
  // Positions left in the innermost dim's run, this one included.
  int64_t left_in_run() const { return walk_.dims.back()->size - pos_[walk_.dims.size() - 1]; }
  // m <= left_in_run() positions on.
  void advance(int64_t m) {
    const size_t last = walk_.dims.size() - 1;
    const Dim& d = *walk_.dims[last];
    if (pos_[last] + m < d.size) {
      pos_[last] += m;
      for (int k = 0; k < nops_; ++k) off[k] += m * d.stride[k];
      return;
    }
    pos_[last] += m - 1;
    for (int k = 0; k < nops_; ++k) off[k] += (m - 1) * d.stride[k];
    next();
  }

private:
  const Walk& walk_;
  int nops_;
  int64_t pos_[kMaxRank + 1] = {};
};

// Argmax over the whole array when it is not one row: each row's (first extreme, its index) comes
// from the kernel, and a later row wins only with a strictly better value, or with NaN while the
// best so far is not NaN (NumPy: the first NaN is the answer).
// Integer and bool values have no NaN: a strictly better value wins.
template <typename T>
bool later_row_wins(T v, T best, bool is_max) {
  if constexpr (std::is_floating_point_v<T>) {
    if (std::isnan(best)) return false;
    if (std::isnan(v)) return true;
  }
  return is_max ? v > best : v < best;
}

template <typename T>
bool later_row_wins(const char* v, const char* best, bool is_max) {
  T a, b;
  std::memcpy(&a, v, sizeof a);
  std::memcpy(&b, best, sizeof b);
  return later_row_wins(a, b, is_max);
}

bool later_row_wins(DType t, const char* v, const char* best, bool is_max) {
  switch (t) {
    case DType::Float32: return later_row_wins<float>(v, best, is_max);
    case DType::Float64: return later_row_wins<double>(v, best, is_max);
    case DType::Int32: return later_row_wins<int32_t>(v, best, is_max);
    case DType::Int64: return later_row_wins<int64_t>(v, best, is_max);
    default: return later_row_wins<uint8_t>(v, best, is_max);  // uint8, bool (0 or 1)
  }
}

// Note [Long and strided arg rows]
// The arg kernel reads a row in two passes (the extreme, then its first index), element by element
// when the row is strided (np.argmax(x, axis=1) of a Fortran-order (2, 100000): 0.2x NumPy), and one
// row is one thread's (np.argmax of 1 M floats: 0.55x NumPy's AVX-512 loop). Such rows run in
// pieces here: each piece gives its first extreme and index (copied into a contiguous buffer first
// when strided, so the kernel's vector loop reads it), and the pieces combine in order by
// later_row_wins: the first index of the extreme, the first NaN, as over the whole row. A single
// long contiguous row is split across threads. And a long range is read once, not 1.5 times: its
// blocks' extremes first (the kernel's first pass alone), then both passes over the first block
// that holds the best (np.argmax of 1 M float32 on one thread: 0.6x -> 1.0x NumPy's; a strided
// row gathers each block once more only for that block: axis 1 of a Fortran (2, 100000) float64,
// 0.9-1.0x -> 1.4x).
struct ArgBest {
  int64_t index = -1;
  alignas(8) char value[8] = {};
};

constexpr int64_t kArgBlock = 2048;          // strided rows: elements per buffered piece
constexpr int64_t kArgContiguousBlock = int64_t{1} << 14;  // a long contiguous range's blocks
constexpr int64_t kArgPiece = int64_t{1} << 17;  // a long row's pieces per thread, at least

// The first extreme of elements [start, end) of the row `call` points at (index from the row's
// start), a buffered block at a time when the row is strided.
ArgBest arg_range(ReductionFn fn, ReductionCall call, int64_t start, int64_t end, int nin, const Operand* inputs,
                  DType value_dtype, bool is_max) {
  const bool buffered = !call.contiguous;
  thread_local std::vector<char> buffer;
  if (buffered && buffer.size() < static_cast<size_t>(nin * kArgBlock * 8)) buffer.resize(nin * kArgBlock * 8);
  char* data[kMaxKernelOperands];
  int64_t stride[kMaxKernelOperands];
  for (int k = 0; k < nin; ++k) data[k] = call.ptr[k], stride[k] = call.stride[k];
  int64_t index = 0;
  alignas(8) char value[8];
  call.out = reinterpret_cast<char*>(&index);
  call.out_value = value;
  if (buffered) call.contiguous = 1;  // the kernel reads the buffer
  // One kernel call per block of [lo, hi): the first best of them (its index: the block's start,
  // plus the kernel's index unless only extremes are asked for).
  auto blocks = [&](int64_t lo, int64_t hi, int64_t block) {
    ArgBest best;
    for (int64_t b = lo; b < hi; b += block) {
      const int64_t m = std::min(block, hi - b);
      call.n = m;
      for (int k = 0; k < nin; ++k) {
        call.ptr[k] = data[k] + b * stride[k];
        if (!buffered || stride[k] == 0 || stride[k] == inputs[k].itemsize) continue;
        char* slot = buffer.data() + k * kArgBlock * 8;
        copy_strided(true, slot, call.ptr[k], stride[k], m, inputs[k].itemsize);
        call.ptr[k] = slot;
        call.stride[k] = inputs[k].itemsize;
      }
      fn(&call);
      if (best.index < 0 || later_row_wins(value_dtype, value, best.value, is_max)) {
        best.index = b + (call.extreme_only ? 0 : index);
        std::memcpy(best.value, value, sizeof value);
      }
    }
    return best;
  };
  const int64_t block = buffered ? kArgBlock : kArgContiguousBlock;
  if (value_dtype != DType::Bool && end - start > 2 * block) {
    // The blocks' extremes, in order; then both passes over the first block holding the best.
    call.extreme_only = 1;
    const ArgBest first = blocks(start, end, block);
    call.extreme_only = 0;
    start = first.index;
    end = std::min(first.index + block, end);
  }
  return blocks(start, end, buffered ? kArgBlock : std::max<int64_t>(end - start, 1));
}

// Note [Buffered strided columns]
// A column reduction whose outputs are adjacent but whose inputs are not (x[:, ::3].max(axis=0)) ran
// the column kernel's scalar loop: 0.57x NumPy. Its rows are copied here, a block at a time, into
// an L1-sized buffer of contiguous rows, and the kernel's vector loop combines the block; the rows
// still combine in order, so the result is the unbuffered one.
constexpr int64_t kColumnBlockBytes = 16 << 10;

void buffered_column(ReductionFn fn, ReductionCall call, int nin, const Operand* inputs) {
  if (call.rows == 0) return fn(&call);  // reads no input
  thread_local std::vector<char> buffer;
  int64_t row_bytes = 0;  // one row of every input, packed
  for (int k = 0; k < nin; ++k) row_bytes += call.n * inputs[k].itemsize;
  const int64_t block = std::clamp<int64_t>(kColumnBlockBytes / std::max<int64_t>(row_bytes, 1), 1, call.rows);
  if (buffer.size() < static_cast<size_t>(block * row_bytes)) buffer.resize(block * row_bytes);
  char* data[kMaxKernelOperands];
  int64_t row_stride[kMaxKernelOperands], stride[kMaxKernelOperands];
  for (int k = 0; k < nin; ++k) data[k] = call.ptr[k], row_stride[k] = call.row_stride[k], stride[k] = call.stride[k];
  const int64_t rows = call.rows, accumulate = call.accumulate, finish = call.finish;
  for (int64_t r = 0; r < rows;) {
    const int64_t m = std::min(block, rows - r);
    char* slot = buffer.data();
    for (int k = 0; k < nin; ++k) {
      const int itemsize = inputs[k].itemsize;
      call.ptr[k] = data[k] + r * row_stride[k];
      if (stride[k] == 0 || stride[k] == itemsize) continue;
      for (int64_t i = 0; i < m; ++i)
        copy_strided(true, slot + i * call.n * itemsize, call.ptr[k] + i * row_stride[k], stride[k], call.n, itemsize);
      call.ptr[k] = slot;
      call.row_stride[k] = call.n * itemsize;
      call.stride[k] = itemsize;
      slot += m * call.n * itemsize;
    }
    call.contiguous = 1;
    call.rows = m;
    call.accumulate = accumulate || r > 0;
    call.finish = finish && r + m >= rows;
    fn(&call);
    r += m;
  }
}

// Note [Split column rows]
// A column reduction with few outputs over many rows (x.sum(axis=0) of a (100000, 100) array,
// x.mean(axis=-1) of a Fortran-order (1000, 1000)) is one task: the outputs are too few to split
// across threads. Its rows are split instead, into parts fixed by the sizes alone (never by the
// thread count, so the result is the same on every machine): part 0 reduces into the outputs,
// part p > 0 into a scratch row of partial results, the parts run in parallel, and the partials
// join the outputs in order, op(op(out, partial 1), partial 2)..., before the column kernel
// finishes them (mean's division, std's root) in a call without rows. max/min join with the
// kernel's own rule, (a > b || a is NaN) ? a : b, whose ties and NaN go where the sequential
// order sends them, so their results do not change; float sums and products round a little
// differently from one pass (closer to pairwise summation); integer ones wrap the same.
constexpr int64_t kMinSplitRows = 64;         // rows per part, at least
constexpr int64_t kMaxColumnParts = 16;

template <typename T>
void join_partials(const ReductionLaunch& L, char* out, int64_t out_stride, const char* partials, int64_t parts,
                   int64_t n) {
  const bool is_max = L.extreme > 0;
  for (int64_t p = 0; p < parts; ++p) {
    const char* part = partials + p * n * static_cast<int64_t>(sizeof(T));
    for (int64_t j = 0; j < n; ++j) {
      T a, b;
      std::memcpy(&a, out + j * out_stride, sizeof a);
      std::memcpy(&b, part + j * sizeof(T), sizeof b);
      T r;
      if (L.extreme != 0) {
        bool keep_a = is_max ? a > b : a < b;
        if constexpr (std::is_floating_point_v<T>) keep_a = keep_a || std::isnan(a);
        r = keep_a ? a : b;
      } else if constexpr (std::is_floating_point_v<T>) {
        r = L.product ? a * b : a + b;
      } else {  // wrap around, as the kernels' integer sums and products do
        using U = std::make_unsigned_t<T>;
        r = static_cast<T>(L.product ? static_cast<U>(a) * static_cast<U>(b) : static_cast<U>(a) + static_cast<U>(b));
      }
      std::memcpy(out + j * out_stride, &r, sizeof r);
    }
  }
}

void join_partials(const ReductionLaunch& L, char* out, int64_t out_stride, const char* partials, int64_t parts,
                   int64_t n) {
  switch (L.value_dtype) {
    case DType::Float32: return join_partials<float>(L, out, out_stride, partials, parts, n);
    case DType::Float64: return join_partials<double>(L, out, out_stride, partials, parts, n);
    case DType::Int32: return join_partials<int32_t>(L, out, out_stride, partials, parts, n);
    case DType::Int64: return join_partials<int64_t>(L, out, out_stride, partials, parts, n);
    case DType::UInt64: return join_partials<uint64_t>(L, out, out_stride, partials, parts, n);
    default: return join_partials<uint8_t>(L, out, out_stride, partials, parts, n);  // uint8, bool (0 or 1)
  }
}

bool joinable(DType t) {
  switch (t) {
    case DType::Float32:
    case DType::Float64:
    case DType::Int32:
    case DType::Int64:
    case DType::UInt64:
    case DType::UInt8:
    case DType::Bool: return true;
    default: return false;
  }
}

// Note [Pairwise sums]
// A float sum accumulated in one pass over n elements is off by up to about n/m ulps of its sum of
// magnitudes (m: independent accumulator lanes), which for millions of elements is far from
// NumPy's pairwise summation (np.add.reduce: leaves of 128 elements over 8 accumulators, then
// halves recursively: about 16 + log2(n / 128) ulps). So a float sum is pairwise at three levels.
// In the row kernel each accumulator lane, vector or scalar, sums a leaf of 16 elements
// (kLeafIterations in jit/x86/reduction_codegen.cpp) and adds it into a second accumulator. Here,
// a row longer than eight leaves per lane (the kernel's sum_block: 4096 float32 elements with AVX2,
// 128 for strided rows, which run the scalar loop) runs the kernel block by block, each block into
// a scratch value, and the block sums combine as a binary counter: sums of equal rank are added as
// soon as both exist, so every output is a balanced tree of blocks. The outer reduced rows of the
// same output join the same cascade. The error is within about 16 + 8 + log2(n / block) + 1 ulps
// of the sum of magnitudes, NumPy's bound or better. The last step stores the total and runs the
// kernel on no elements with accumulate and finish set, which applies mean's division and std's
// square root. Rows of one block or less, with no outer reduced rows, run as before, in one call.
// Row chains (softmax, layer norm on the host) run their reductions' rows the same way
// (run_reduction_row).
// Measured against math.fsum on adversarial inputs in tests/python/test_reduction_accuracy.py;
// it costs a few percent of a cache-resident sum's speed.
template <typename T>
class PairwiseSum {
public:
  void push(T v) {
    int i = 0;
    for (; full_ >> i & 1; ++i) v = level_[i] + v;  // earlier (left) operand first
    full_ = (full_ & ~((uint64_t{1} << i) - 1)) | uint64_t{1} << i;
    level_[i] = v;
  }
  T total() const {
    T s = 0;
    bool any = false;
    for (int i = 0; i < 64; ++i)
      if (full_ >> i & 1) {
        s = any ? level_[i] + s : level_[i];
        any = true;
      }
    return s;
  }

private:
  T level_[64];
  uint64_t full_ = 0;
};

// Pushes the block sums of one row (call: n, ptr at the row's start) onto `sum`; call.out, n and
// ptr are left changed.
template <typename T>
void push_blocks(ReductionFn row_fn, ReductionCall& call, int64_t block, int num_operands, PairwiseSum<T>& sum) {
  const int64_t n = call.n;
  char* start[kMaxKernelOperands];
  std::copy_n(call.ptr, num_operands, start);
  T part;
  call.out = reinterpret_cast<char*>(&part);
  for (int64_t b = 0; b < n; b += block) {
    call.n = std::min(block, n - b);
    for (int k = 0; k < num_operands; ++k) call.ptr[k] = start[k] + b * call.stride[k];
    row_fn(&call);
    sum.push(part);
  }
}

// Stores the cascade's total at `out` and has the kernel finish it there (mean, sqrt).
template <typename T>
void finish_pairwise(ReductionFn row_fn, ReductionCall& call, char* out, const PairwiseSum<T>& sum) {
  const T total = sum.total();
  std::memcpy(out, &total, sizeof total);
  call.out = out;
  call.n = 0;
  call.accumulate = 1;
  call.finish = 1;
  row_fn(&call);
}

// One long row's float sum with its blocks summed by the threads (np.dot of two vectors, x.sum() of
// a large array: one output, which the threads could not otherwise share): the block sums are the
// ones push_blocks makes, pushed in the same order, so the result is the same whatever the
// number of threads. call: n and ptr at the row's start.
template <typename T>
void parallel_pairwise_row(ReductionFn row_fn, ReductionCall call, int64_t block, int nin, char* out) {
  const int64_t n = call.n, blocks = (n + block - 1) / block;
  std::vector<T> parts(blocks);
  call.accumulate = 0;
  call.finish = 0;
  parallel_for(blocks, std::max<int64_t>(1, kElementsPerTask / block), [&](int64_t b0, int64_t b1) {
    ReductionCall c = call;
    for (int64_t b = b0; b < b1; ++b) {
      c.n = std::min(block, n - b * block);
      for (int k = 0; k < nin; ++k) c.ptr[k] = call.ptr[k] + b * block * call.stride[k];
      c.out = reinterpret_cast<char*>(&parts[b]);
      row_fn(&c);
    }
  });
  PairwiseSum<T> sum;
  for (T part : parts) sum.push(part);
  finish_pairwise(row_fn, call, out, sum);
}

// One output of a float sum in run_reduction: every block of every outer reduced row (offsets
// `outer_reduced` from off0) in one cascade.
template <typename T>
void pairwise_output(ReductionFn row_fn, ReductionCall call, int64_t block, const Walk& outer_reduced,
                     const int64_t* off0, int nin, const Operand* inputs) {
  char* const out = call.out;
  const int64_t n = call.n;
  PairwiseSum<T> sum;
  call.accumulate = 0;
  call.finish = 0;
  const int64_t combos = outer_reduced.count();
  for (int64_t c = 0; c < combos; ++c) {
    int64_t off[kMaxKernelOperands + 1];
    std::memcpy(off, off0, sizeof off);
    outer_reduced.add_offsets(c, nin + 1, off);
    for (int k = 0; k < nin; ++k) call.ptr[k] = inputs[k].data + off[k];
    call.n = n;
    push_blocks(row_fn, call, block, nin, sum);
  }
  finish_pairwise(row_fn, call, out, sum);
}

}  // namespace

// Note [Reduction layouts]
// The iteration space is the reduced value's shape. Size-1 dims are dropped; for sum/prod/max/min
// the dims are then ordered by stride (largest first, as NumPy's iterator does) so the innermost
// dim is the one adjacent in memory, and neighbours of the same kind (both reduced or both kept)
// that every operand steps through as one are merged. Then:
//   - innermost dim reduced: the row kernel reduces it, one output per call; outer reduced dims
//     accumulate into the output in order (call.accumulate), the last call finishes (mean, sqrt);
//   - innermost dim kept: the column kernel streams the innermost reduced dim's rows, each row
//     combined into a chunk of outputs (out[j] = op(out[j], v[r, j]), NumPy's order for axis=0).
// Threads split the outputs (and the column form's chunks of them), never the reduced elements of
// one output, so the order of every combination, and thus the result, is independent of the
// thread count. argmax/argmin keep the logical dim order (the index is a position, not an
// address) and use the row kernel only: a single axis is one strided row per output, and the
// whole array is C-order rows combined here by `later_row_wins`.
void reduction_dims(const ReductionLaunch& L, FixedVector<ReductionDim, kMaxRank + 1>& out) {
  const int n = L.num_inputs;  // operands; the output's strides follow
  out.clear();
  for (int d = 0; d < L.rank; ++d) {
    if (L.shape[d] == 1) continue;
    Dim x;
    x.size = L.shape[d];
    x.reduced = L.reduced[d];
    for (int k = 0; k < n; ++k) x.stride[k] = L.inputs[k].strides[d];
    x.stride[n] = L.reduced[d] ? 0 : L.out_strides[d];
    out.push_back(x);
  }
  if (!L.arg) {
    auto key = [&](const Dim& x) {
      int64_t m = 0;
      for (int k = 0; k < n; ++k) m = std::max<int64_t>(m, x.stride[k] < 0 ? -x.stride[k] : x.stride[k]);
      return m;
    };
    std::stable_sort(out.begin(), out.end(), [&](const Dim& a, const Dim& b) { return key(a) > key(b); });
  }
  // Merge in place: dims [0, kept) are final.
  size_t kept = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    const Dim x = out[i];
    bool merge = kept > 0 && out[kept - 1].reduced == x.reduced;
    for (int k = 0; merge && k <= n; ++k) merge = out[kept - 1].stride[k] == x.stride[k] * x.size;
    if (merge) {
      out[kept - 1].size *= x.size;
      for (int k = 0; k <= n; ++k) out[kept - 1].stride[k] = x.stride[k];
    } else {
      out[kept++] = x;
    }
  }
  out.resize(kept);
}

// Reduced dims of `dims` besides the last reduced one.
int outer_reduced_dims(const FixedVector<ReductionDim, kMaxRank + 1>& dims) {
  int count = 0;
  for (const ReductionDim& x : dims) count += x.reduced;
  return std::max(count - 1, 0);
}

void run_reduction(const ReductionLaunch& L) {
  const int nin = L.num_inputs, nops = nin + 1;
  const int itemsize = dtype_itemsize(L.value_dtype);
  for (int d = 0; d < L.rank; ++d)
    if (L.shape[d] == 0) return;  // no outputs (a reduced dim of 0 is the caller's to handle)
  FixedVector<Dim, kMaxRank + 1> merged;
  reduction_dims(L, merged);
  int rdim = -1;
  for (int i = 0; i < static_cast<int>(merged.size()); ++i)
    if (merged[i].reduced) rdim = i;
  if (rdim < 0) {  // every reduced dim has size 1: each output reduces one element
    Dim one;
    one.reduced = true;
    merged.push_back(one);
    rdim = static_cast<int>(merged.size()) - 1;
  }
  int64_t count = 1;
  for (const Dim& x : merged)
    if (x.reduced) count *= x.size;

  const int last = static_cast<int>(merged.size()) - 1;
  // Note [Short rows]
  // A row of a few elements (x.sum(axis=1) of a (100000, 2) array) costs a row-kernel call per
  // output, several times the elements' own work: 0.46x NumPy there. Rows within one cache line
  // (kShortRowBytes) under many outputs run in the column form instead, the short dim as its rows
  // and the innermost kept dim as its outputs (strided when they are not adjacent): one call per
  // chunk of outputs, which walks the chunk's lines once per element of a row, from cache after
  // the first. Longer rows would walk more lines per pass than the cache keeps: float64 rows of
  // 16 ran 0.6x NumPy that way, 1.0x under the row kernel. The rows still combine in order, as the
  // row kernel's scalar loop does for so few elements. Measured here (NumPy time / framejit's,
  // before -> after): sum(axis=1) of float32 (100000, 2) 0.46 -> 10, of float64 (100000, 8)
  // 0.52 -> 2.0, int64 (100000, 8) 0.51 -> 1.4, max(axis=1) of float32 (100000, 2) -> 26.
  int kept_inner = -1;
  for (int i = 0; i <= last; ++i)
    if (!merged[i].reduced) kept_inner = i;
  bool short_rows = L.column && merged[last].reduced && kept_inner >= 0 && merged[kept_inner].size >= kShortRowOutputs;
  for (int k = 0; short_rows && k < nin; ++k)
    short_rows = std::abs(merged[last].stride[k]) * merged[last].size <= kShortRowBytes;
  // Note [Column arg-reductions] (jit/x86/arg_reduction_codegen.cpp): argmax keeps the logical dim
  // order, so its reduced dim may be last while a kept one is the adjacent one in memory (axis=1
  // of a Fortran-order matrix): the column form then runs over that kept dim.
  int adjacent_kept = -1;
  if (L.arg && L.column && !short_rows && outer_reduced_dims(merged) == 0) {
    auto span = [&](const Dim& x) {
      int64_t m = 0;
      for (int k = 0; k < nin; ++k) m = std::max<int64_t>(m, std::abs(x.stride[k]));
      return m;
    };
    for (int i = 0; i <= last; ++i)
      if (!merged[i].reduced && (adjacent_kept < 0 || span(merged[i]) < span(merged[adjacent_kept])))
        adjacent_kept = i;
    if (adjacent_kept >= 0 && (merged[adjacent_kept].size < kShortRowOutputs ||
                               span(merged[adjacent_kept]) >= span(merged[rdim])))
      adjacent_kept = -1;
  }
  // (An arg-reduction's last dim being kept says nothing of memory: only the two cases above.)
  const bool column = L.column && (short_rows || adjacent_kept >= 0 || (!L.arg && !merged[last].reduced));
  const int jdim = !column ? -1 : short_rows ? kept_inner : adjacent_kept >= 0 ? adjacent_kept : last;
  Walk kept, outer_reduced;
  for (int i = 0; i <= last; ++i)
    if (i != rdim && i != jdim) (merged[i].reduced ? outer_reduced : kept).dims.push_back(&merged[i]);

  ReductionCall base;
  std::copy_n(L.params, L.num_params, base.params);  // NB: not memcpy: L.params may be null
  base.divisor = count - L.ddof;
  base.contiguous = 1;
  const Dim& inner = merged[column ? jdim : rdim];
  for (int k = 0; k < nin; ++k) {
    base.stride[k] = inner.stride[k];
    if (base.stride[k] != 0 && base.stride[k] != L.inputs[k].itemsize) base.contiguous = 0;
  }
  int64_t jsize = 1, chunk = 1, chunks = 1;
  if (column) {
    base.rows = merged[rdim].size;
    for (int k = 0; k < nin; ++k) base.row_stride[k] = merged[rdim].stride[k];
    base.out_stride = inner.stride[nin];
    if (base.out_stride != (L.arg ? 8 : itemsize)) base.contiguous = 0;  // arg: int64 indices
    jsize = inner.size;
    chunk = std::min(jsize, kColumnChunk);
    if (kept.count() * ((jsize + chunk - 1) / chunk) < num_threads() && jsize >= 2 * kMinColumnChunk) {
      int64_t want = std::min<int64_t>(num_threads(), jsize / kMinColumnChunk);
      chunk = (jsize + want - 1) / want;
      chunk = (chunk + 15) / 16 * 16;  // whole vectors, so only the last chunk has a tail
    }
    chunks = (jsize + chunk - 1) / chunk;
  } else {
    base.n = merged[rdim].size;
  }

  // Note [Buffered strided columns]: outputs adjacent, some input strided along them.
  bool buffered_columns = column && !L.arg && !base.contiguous && base.out_stride == itemsize;
  const auto row_fn = reinterpret_cast<ReductionFn>(L.row->entry);
  const auto column_fn = column ? reinterpret_cast<ReductionFn>(L.column->entry) : nullptr;
  const int64_t combos = outer_reduced.count();
  // Note [Pairwise sums]: the calls' size for a float sum's rows (0: not one, or column form).
  const int64_t pairwise_block = L.pairwise == DType::Bool || column ? 0
                                 : base.contiguous                   ? L.row->sum_block
                                                                     : L.row->sum_block_strided;
  const int64_t work = kept.count() * chunks;

  // Note [Split column rows]: decided by the sizes alone (jsize below the output split's minimum
  // keeps the outputs in one chunk whatever the thread count).
  if (column && !L.arg && combos == 1 && kept.count() == 1 && jsize < 2 * kMinColumnChunk &&
      base.rows >= 2 * kMinSplitRows && base.rows * jsize >= 2 * kElementsPerTask && joinable(L.value_dtype)) {
    const int64_t parts =
        std::min<int64_t>({kMaxColumnParts, base.rows / kMinSplitRows, base.rows * jsize / kElementsPerTask});
    int64_t off0[kMaxKernelOperands + 1] = {};
    kept.add_offsets(0, nops, off0);
    std::vector<char> partials(static_cast<size_t>((parts - 1) * jsize * itemsize));
    bool inputs_contiguous = true;
    for (int k = 0; k < nin; ++k) inputs_contiguous &= base.stride[k] == 0 || base.stride[k] == L.inputs[k].itemsize;
    parallel_for(parts, 1, [&](int64_t p0, int64_t p1) {
      for (int64_t p = p0; p < p1; ++p) {
        ReductionCall call = base;
        const int64_t r0 = base.rows * p / parts, r1 = base.rows * (p + 1) / parts;
        call.n = jsize;
        call.rows = r1 - r0;
        for (int k = 0; k < nin; ++k) call.ptr[k] = L.inputs[k].data + off0[k] + r0 * base.row_stride[k];
        if (p > 0) {
          call.out = partials.data() + (p - 1) * jsize * itemsize;
          call.out_stride = itemsize;
          call.contiguous = inputs_contiguous;
        } else {
          call.out = L.out + off0[nin];
        }
        if (p == 0 ? buffered_columns : !inputs_contiguous)
          buffered_column(column_fn, call, nin, L.inputs);
        else
          column_fn(&call);
      }
    });
    join_partials(L, L.out + off0[nin], base.out_stride, partials.data(), parts - 1, jsize);
    ReductionCall finish = base;  // no rows: finishes what the outputs hold
    finish.n = jsize;
    finish.rows = 0;
    finish.out = L.out + off0[nin];
    finish.accumulate = 1;
    finish.finish = 1;
    column_fn(&finish);
    return;
  }
  const int64_t per_task = count * (column ? chunk : 1);
  const int64_t grain = std::max<int64_t>(1, kElementsPerTask / std::max<int64_t>(per_task, 1));

  // One long float sum, its blocks across threads.
  if (pairwise_block > 0 && work == 1 && combos == 1 && base.n >= 2 * kElementsPerTask &&
      base.n >= 4 * pairwise_block && num_threads() > 1) {
    int64_t off0[kMaxKernelOperands + 1] = {};
    kept.add_offsets(0, nops, off0);
    ReductionCall call = base;
    for (int k = 0; k < nin; ++k) call.ptr[k] = L.inputs[k].data + off0[k];
    if (L.pairwise == DType::Float32)
      parallel_pairwise_row<float>(row_fn, call, pairwise_block, nin, L.out + off0[nin]);
    else
      parallel_pairwise_row<double>(row_fn, call, pairwise_block, nin, L.out + off0[nin]);
    return;
  }

  // One long max or min in pieces across threads, combined in order: a NaN in any piece is the
  // result (NumPy's max propagates it), else a later piece wins only when strictly beyond. Not
  // any / all of bool: the kernel stops at the first True / False (Note [Settled truth values]),
  // typically long before a second thread would have started.
  if (L.extreme != 0 && L.value_dtype != DType::Bool && !column && work == 1 && combos == 1 &&
      base.n >= 2 * kElementsPerTask && num_threads() > 1) {
    const int64_t parts = std::min<int64_t>({num_threads(), base.n / kElementsPerTask, kMaxThreadsForPieces});
    int64_t off0[kMaxKernelOperands + 1] = {};
    kept.add_offsets(0, nops, off0);
    alignas(8) char part[kMaxThreadsForPieces][8];
    parallel_for(parts, 1, [&](int64_t p0, int64_t p1) {
      ReductionCall call = base;
      for (int64_t p = p0; p < p1; ++p) {
        const int64_t start = base.n * p / parts;
        call.n = base.n * (p + 1) / parts - start;
        for (int k = 0; k < nin; ++k) call.ptr[k] = L.inputs[k].data + off0[k] + start * base.stride[k];
        call.out = part[p];
        row_fn(&call);
      }
    });
    int best = 0;
    for (int p = 1; p < parts; ++p)
      if (later_row_wins(L.value_dtype, part[p], part[best], L.extreme > 0)) best = p;
    std::memcpy(L.out + off0[nin], part[best], itemsize);
    return;
  }

  // Note [Long and strided arg rows]: one long row, in pieces across threads.
  if (L.arg && !column && combos == 1 && work == 1 && base.n >= 2 * kArgPiece && num_threads() > 1) {
    const int64_t pieces = std::min<int64_t>(num_threads(), base.n / kArgPiece);
    ArgBest best[kMaxThreadsForPieces];
    const int64_t parts = std::min<int64_t>(pieces, kMaxThreadsForPieces);
    int64_t off0[kMaxKernelOperands + 1] = {};
    kept.add_offsets(0, nops, off0);
    ReductionCall call = base;
    for (int k = 0; k < nin; ++k) call.ptr[k] = L.inputs[k].data + off0[k];
    parallel_for(parts, 1, [&](int64_t p0, int64_t p1) {
      for (int64_t p = p0; p < p1; ++p)
        best[p] = arg_range(row_fn, call, base.n * p / parts, base.n * (p + 1) / parts, nin, L.inputs,
                            L.value_dtype, L.arg_max);
    });
    ArgBest all = best[0];
    for (int64_t p = 1; p < parts; ++p)
      if (later_row_wins(L.value_dtype, best[p].value, all.value, L.arg_max)) all = best[p];
    std::memcpy(L.out + off0[nin], &all.index, sizeof all.index);
    return;
  }

  // Rows of one kept dim in one kernel call each run (Note [Reduction kernel ABI], row form with
  // call->rows): outputs of a plain row reduction or argmax, one reduced row each.
  const bool row_runs = !column && (!L.arg || base.contiguous) && combos == 1 &&
                        !(pairwise_block > 0 && base.n > pairwise_block) && kept.count() > 1;
  parallel_for(work, grain, [&](int64_t begin, int64_t end) {
    ReductionCall call = base;
    if (row_runs) {
      const Dim& inner_kept = *kept.dims.back();
      for (int k = 0; k < nin; ++k) call.row_stride[k] = inner_kept.stride[k];
      call.out_stride = inner_kept.stride[nin];
      call.finish = 1;
      WalkCursor cursor(kept, nops, begin);
      for (int64_t w = begin; w < end;) {
        const int64_t run = std::min(cursor.left_in_run(), end - w);
        for (int k = 0; k < nin; ++k) call.ptr[k] = L.inputs[k].data + cursor.off[k];
        call.out = L.out + cursor.off[nin];
        call.rows = run;
        row_fn(&call);
        w += run;
        if (w < end) cursor.advance(run);
      }
      return;
    }
    // A column arg-reduction's best values, one per output of a chunk (kept per thread: a chunk's
    // 128 KB would be a fresh mmap per task from malloc).
    if (column && L.arg) {
      thread_local std::vector<char> best;
      if (best.size() < static_cast<size_t>(chunk * itemsize)) best.resize(chunk * itemsize);
      call.out_value = best.data();
    }
    WalkCursor cursor(kept, nops, begin / chunks);
    for (int64_t w = begin; w < end; ++w) {
      if (w > begin && w % chunks == 0) cursor.next();
      // NB: the cursor's offsets are used in place, not copied: a block copy reads them back
      // wider than they were just written, a store-forwarding stall per row (a third of the
      // executor's time over rows of a few hundred elements).
      const int64_t* off0 = cursor.off;
      int64_t shifted[kMaxKernelOperands + 1];
      if (column) {
        int64_t j0 = (w % chunks) * chunk;
        call.n = std::min(chunk, jsize - j0);
        for (int k = 0; k < nops; ++k) shifted[k] = off0[k] + j0 * inner.stride[k];
        off0 = shifted;
      }
      if (L.arg && combos > 1) {
        // The flattened argmax: every dim is reduced, the rows are in C order.
        int64_t idx = 0, best_idx = 0;
        alignas(8) char value[8], best[8];
        call.out = reinterpret_cast<char*>(&idx);
        call.out_value = value;
        for (int64_t c = 0; c < combos; ++c) {
          int64_t off[kMaxKernelOperands + 1];
          std::memcpy(off, off0, sizeof off);
          outer_reduced.add_offsets(c, nops, off);
          for (int k = 0; k < nin; ++k) call.ptr[k] = L.inputs[k].data + off[k];
          row_fn(&call);
          const bool wins = c == 0 || later_row_wins(L.value_dtype, value, best, L.arg_max);
          if (wins) {
            std::memcpy(best, value, sizeof best);
            best_idx = c * base.n + idx;
          }
        }
        std::memcpy(L.out + off0[nin], &best_idx, sizeof best_idx);
        call.out_value = nullptr;
        continue;
      }
      if (pairwise_block > 0 && (base.n > pairwise_block || combos > 1)) {
        call.out = L.out + off0[nin];
        if (L.pairwise == DType::Float32) {
          pairwise_output<float>(row_fn, call, pairwise_block, outer_reduced, off0, nin, L.inputs);
        } else {
          pairwise_output<double>(row_fn, call, pairwise_block, outer_reduced, off0, nin, L.inputs);
        }
        continue;
      }
      // Note [Long and strided arg rows]
      if (L.arg && !column && (!base.contiguous || base.n > 2 * kArgContiguousBlock)) {
        for (int k = 0; k < nin; ++k) call.ptr[k] = L.inputs[k].data + off0[k];
        const ArgBest best = arg_range(row_fn, call, 0, base.n, nin, L.inputs, L.value_dtype, L.arg_max);
        std::memcpy(L.out + off0[nin], &best.index, sizeof best.index);
        continue;
      }
      for (int64_t c = 0; c < combos; ++c) {
        int64_t off[kMaxKernelOperands + 1];
        const int64_t* at = off0;  // (NB: no copy for one combination, see above)
        if (combos > 1) {
          std::copy_n(off0, nops, off);
          outer_reduced.add_offsets(c, nops, off);
          at = off;
        }
        for (int k = 0; k < nin; ++k) call.ptr[k] = L.inputs[k].data + at[k];
        call.out = L.out + at[nin];
        call.accumulate = c > 0;
        call.finish = c == combos - 1;
        if (buffered_columns)
          buffered_column(column_fn, call, nin, L.inputs);
        else
          (column ? column_fn : row_fn)(&call);
      }
    }
  });
}

void run_reduction_row(const Kernel& kernel, DType pairwise, const ReductionCall& call, int num_operands) {
  const auto fn = reinterpret_cast<ReductionFn>(kernel.entry);
  const int64_t block = pairwise == DType::Bool ? 0 : call.contiguous ? kernel.sum_block : kernel.sum_block_strided;
  if (block <= 0 || call.n <= block) {
    fn(&call);
    return;
  }
  ReductionCall c = call;
  char* const out = call.out;
  c.finish = 0;
  if (pairwise == DType::Float32) {
    PairwiseSum<float> sum;
    push_blocks(fn, c, block, num_operands, sum);
    c.finish = call.finish;
    finish_pairwise(fn, c, out, sum);
  } else {
    PairwiseSum<double> sum;
    push_blocks(fn, c, block, num_operands, sum);
    c.finish = call.finish;
    finish_pairwise(fn, c, out, sum);
  }
}

}  // namespace framejit::rt
