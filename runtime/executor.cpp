// executor.cpp — launching pointwise kernels over strided, broadcast operands.
#include "runtime/executor.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "runtime/strided_copy.h"
#include "runtime/threads.h"

namespace framejit::rt {

namespace {
// Rows shorter than this are not worth a thread; about 16 K elements of work per chunk.
constexpr int64_t kElementsPerChunk = 1 << 15;
constexpr int64_t kTileBytes = 8192;  // strided rows as tiles: bytes of every operand per tile, about
constexpr int64_t kMinBufferedRow = 16;
}  // namespace

// Note [Memory order of axes]
// NumPy's iterator runs over the operands' memory in the order it lies, whatever the logical
// order of the axes: a transposed or Fortran-ordered array is a C-ordered one seen through
// permuted axes. The rule (also Note [Output memory order], which allocates outputs by it): the
// axes are ordered from innermost outward by insertion, and an axis moves inside another when
// every operand that steps along both does so with a smaller stride there; operands that
// disagree leave C order. Pointwise launches iterate in this order, so np.tanh(x.T) reads and
// writes along the contiguous axis and its dims merge into one row of vector code (it ran a
// scalar loop striding a whole row per element: 0.07x NumPy on a (1000, 1000) float32).
void memory_order(const Operand* operands, int num_operands, int n, int* axes) {
  int inner_first[kMaxRank];
  for (int i = 0; i < n; ++i) inner_first[i] = axes[n - 1 - i];
  for (int i = 1; i < n; ++i) {
    const int axis = inner_first[i];
    int pos = i;
    for (int j = i - 1; j >= 0; --j) {
      const int other = inner_first[j];
      bool decided = false, inside = false;
      for (int k = 0; k < num_operands; ++k) {
        const int64_t sa = std::abs(operands[k].strides[axis]), so = std::abs(operands[k].strides[other]);
        if (sa == 0 || so == 0) continue;
        if (so <= sa) inside = false;  // also overrides an earlier "inside": C order wins conflicts
        else if (!decided) inside = true;
        decided = true;
      }
      if (!decided) continue;
      if (!inside) break;
      pos = j;
    }
    for (int j = i; j > pos; --j) inner_first[j] = inner_first[j - 1];
    inner_first[pos] = axis;
  }
  for (int i = 0; i < n; ++i) axes[i] = inner_first[n - 1 - i];
}

int collapse_dims(int rank, const int64_t* shape, int num_operands, const Operand* operands, int64_t* dims,
                  int64_t (*strides)[kMaxRank]) {
  // Drop size-1 dims, order the rest as memory runs, then merge axis d into d+1 when every
  // operand steps through them as one (stride[d] == stride[d+1] * shape[d+1]). Fixed-size
  // arrays: no allocation per launch.
  int axes[kMaxRank];
  int n = 0;
  for (int d = 0; d < rank; ++d)
    if (shape[d] != 1) axes[n++] = d;
  if (n > 1) memory_order(operands, num_operands, n, axes);
  int nd = 0;
  for (int a = 0; a < n; ++a) {
    const int d = axes[a];
    bool merge = nd > 0;
    for (int k = 0; merge && k < num_operands; ++k)
      merge = strides[k][nd - 1] == operands[k].strides[d] * shape[d];
    if (merge) {
      dims[nd - 1] *= shape[d];
      for (int k = 0; k < num_operands; ++k) strides[k][nd - 1] = operands[k].strides[d];
    } else {
      dims[nd] = shape[d];
      for (int k = 0; k < num_operands; ++k) strides[k][nd] = operands[k].strides[d];
      ++nd;
    }
  }
  if (nd == 0) {  // a single element
    dims[0] = 1;
    for (int k = 0; k < num_operands; ++k) strides[k][0] = 0;
    nd = 1;
  }
  return nd;
}

// Note [Buffered strided rows]
// A kernel's vector loop needs every operand contiguous or broadcast along the row; a row with a
// strided operand (x[::2], Z[:, 0], x[::-1], a column of a C array that memory order could not
// make the inner axis) would otherwise run the kernel's element-at-a-time loop, where every math
// function is a scalar call: np.sin of a reversed float32 (1000, 1000) took 13x its contiguous
// time, 0.33x NumPy. As NumPy's iterator buffers such operands, the row runs in blocks that fit in
// L1: strided inputs are copied into contiguous buffers, the kernel runs its vector loop over the
// block, and strided outputs are written from theirs. Operands already contiguous or broadcast are
// used in place. The block reads every input before it writes any output, as the element loop
// did for the elements of one block; an output that is also an input (in place, same strides)
// reads its old values first.
namespace {

constexpr int kBufferBytes = 16 << 10;
// A short row's copies fit in this much: a small stack frame (a 16 KiB one costs its page probes
// and more than the copies of 16 elements).
constexpr int kShortBufferBytes = 1 << 10;

// The strided operands of a row.
struct StridedOperands {
  int index[kMaxKernelOperands];
  int count = 0;
  int64_t bytes_per_element = 0;
};

// One strided row `call` (call.contiguous == 0) through the kernel's vector loop, a block at a time.
// `call` is changed in place (no copy of its ~400 bytes per row): its strides, n and contiguity
// are restored at the end, its pointers are not (callers set them for every row).
template <int kBytes>
void run_buffered_in(PointwiseFn fn, PointwiseCall& call, int num_operands, int num_inputs, const Operand* operands,
                     const StridedOperands& so) {
  alignas(64) char buffer[kBytes];
  const int* strided = so.index;
  const int num_strided = so.count;
  // A multiple of 64 elements keeps every buffer 64-byte aligned (a short row fits whole).
  const int64_t n = call.n;
  const int64_t block = std::min(n, std::max<int64_t>(64, kBytes / so.bytes_per_element / 64 * 64));
  char* data[kMaxKernelOperands];
  int64_t stride[kMaxKernelOperands];
  char* slot[kMaxKernelOperands];
  int64_t offset = 0;
  for (int j = 0; j < num_strided; ++j) {
    const int k = strided[j];
    data[j] = call.ptr[k];
    stride[j] = call.stride[k];
    slot[j] = buffer + offset;
    offset += block * operands[k].itemsize;
    call.stride[k] = operands[k].itemsize;
  }
  call.contiguous = 1;
  for (int64_t start = 0; start < n; start += block) {
    const int64_t m = std::min(block, n - start);
    call.n = m;
    for (int j = 0; j < num_strided; ++j) {
      const int k = strided[j];
      call.ptr[k] = slot[j];
      if (k < num_inputs) copy_strided(true, slot[j], data[j] + start * stride[j], stride[j], m, operands[k].itemsize);
    }
    fn(&call);
    for (int j = 0; j < num_strided; ++j) {
      const int k = strided[j];
      if (k >= num_inputs)
        copy_strided(false, slot[j], data[j] + start * stride[j], stride[j], m, operands[k].itemsize);
    }
    // The kernel's contiguous operands advanced by the block.
    for (int k = 0; k < num_operands; ++k) call.ptr[k] += m * call.stride[k];
  }
  for (int j = 0; j < num_strided; ++j) call.stride[strided[j]] = stride[j];
  call.n = n;
  call.contiguous = 0;
}

void run_buffered(PointwiseFn fn, PointwiseCall& call, int num_operands, int num_inputs, const Operand* operands) {
  StridedOperands so;
  for (int k = 0; k < num_operands; ++k) {
    if (call.stride[k] == 0 || call.stride[k] == operands[k].itemsize) continue;
    so.index[so.count++] = k;
    so.bytes_per_element += operands[k].itemsize;
  }
  if (call.n * so.bytes_per_element <= kShortBufferBytes)
    run_buffered_in<kShortBufferBytes>(fn, call, num_operands, num_inputs, operands, so);
  else
    run_buffered_in<kBufferBytes>(fn, call, num_operands, num_inputs, operands, so);
}

}  // namespace

namespace {

// Note [Short rows as tiles]
// Rows of a few elements under many (x / col with x of shape (50000, 5) and col (50000, 1)): a
// kernel call per row costs more than its five elements, and the rows do not merge into one
// because col steps differently. A tile of consecutive rows is one kernel call over tile * row
// contiguous elements instead: an operand whose tile already lies that way (x, the output of a C
// array) is used in place, a scalar broadcast as itself, and any other is copied into a buffer
// laid out so (col's value repeated along each row), outputs copied back after. Threads take
// tiles. Two dims only (the outer one of at least kShortRowTile rows).

void run_short_rows(PointwiseFn fn, const PointwiseCall& base, int num_operands, int num_inputs,
                    const Operand* operands, const int64_t* dims, const int64_t (*strides)[kMaxRank],
                    int64_t tile_rows) {
  const int64_t rows = dims[0], row = dims[1];
  int64_t row_stride[kMaxKernelOperands], col_stride[kMaxKernelOperands];
  int itemsize[kMaxKernelOperands];
  for (int k = 0; k < num_operands; ++k)
    row_stride[k] = strides[k][0], col_stride[k] = strides[k][1], itemsize[k] = operands[k].itemsize;
  const int64_t tiles = (rows + tile_rows - 1) / tile_rows;
  parallel_for(tiles, std::max<int64_t>(1, kElementsPerChunk / (tile_rows * row)), [&](int64_t t0, int64_t t1) {
    const int64_t r0 = t0 * tile_rows, r1 = std::min(t1 * tile_rows, rows);
    char* data[kMaxKernelOperands];
    for (int k = 0; k < num_operands; ++k) data[k] = operands[k].data + r0 * row_stride[k];
    run_short_row_tiles(fn, base, num_operands, num_inputs, data, row_stride, col_stride, itemsize, r1 - r0, row,
                        tile_rows);
  });
}

}  // namespace

void run_short_row_tiles(PointwiseFn fn, const PointwiseCall& base, int num_operands, int num_inputs, char* const* data,
                         const int64_t* row_stride, const int64_t* col_stride, const int* itemsize, int64_t rows,
                         int64_t row, int64_t tile_rows) {
  bool copied[kMaxKernelOperands];
  int64_t offset[kMaxKernelOperands], bytes = 0;
  for (int k = 0; k < num_operands; ++k) {
    const int64_t s0 = row_stride[k], s1 = col_stride[k], size = itemsize[k];
    copied[k] = !((s1 == size && s0 == row * size) || (s0 == 0 && s1 == 0));
    offset[k] = bytes;
    if (copied[k]) bytes += tile_rows * row * size;
  }
  thread_local std::vector<char> area;
  if (area.size() < static_cast<size_t>(bytes)) area.resize(bytes);
  PointwiseCall call = base;
  call.contiguous = 1;
  for (int64_t r0 = 0; r0 < rows; r0 += tile_rows) {
    const int64_t tile = std::min(tile_rows, rows - r0);
    call.n = tile * row;
    for (int k = 0; k < num_operands; ++k) {
      char* at = data[k] + r0 * row_stride[k];
      const int size = itemsize[k];
      if (!copied[k]) {
        call.ptr[k] = at;
        call.stride[k] = col_stride[k] == 0 ? 0 : size;
        continue;
      }
      call.ptr[k] = area.data() + offset[k];
      call.stride[k] = size;
      if (k >= num_inputs) continue;
      for (int64_t r = 0; r < tile; ++r)
        copy_strided(true, call.ptr[k] + r * row * size, at + r * row_stride[k], col_stride[k], row, size);
    }
    fn(&call);
    for (int k = num_inputs; k < num_operands; ++k) {
      if (!copied[k]) continue;
      char* at = data[k] + r0 * row_stride[k];
      const int size = itemsize[k];
      for (int64_t r = 0; r < tile; ++r)
        copy_strided(false, call.ptr[k] + r * row * size, at + r * row_stride[k], col_stride[k], row, size);
    }
  }
}

void run_pointwise(const Kernel& kernel, int rank, const int64_t* shape, int num_operands, const Operand* operands,
                   const ParamValue* params, int num_params) {
  auto fn = reinterpret_cast<PointwiseFn>(kernel.entry);
  int64_t total = 1;
  for (int d = 0; d < rank; ++d) total *= shape[d];
  if (total == 0) return;

  int64_t dims[kMaxRank];
  int64_t strides[kMaxKernelOperands][kMaxRank];
  const int nd = collapse_dims(rank, shape, num_operands, operands, dims, strides);
  const int outer_rank = nd - 1;
  const int64_t row = dims[nd - 1];
  int64_t rows = 1;  // total / row, without a division
  for (int d = 0; d < outer_rank; ++d) rows *= dims[d];

  PointwiseCall base;  // what the kernel reads is set below (and ptr, n per row)
  base.contiguous = 1;
  for (int k = 0; k < num_operands; ++k) {
    base.stride[k] = strides[k][nd - 1];
    if (base.stride[k] != 0 && base.stride[k] != operands[k].itemsize) base.contiguous = 0;
  }
  // NB: copy_n, not memcpy: a kernel without parameters passes params == nullptr, and memcpy
  // from a null pointer is undefined even for zero bytes (UBSan reports it).
  std::copy_n(params, num_params, base.params);

  // Note [Short rows as tiles].
  if (nd == 2 && row < kShortRow && rows >= kShortRowTile && kernel.buffered_inputs > 0)
    return run_short_rows(fn, base, num_operands, kernel.buffered_inputs, operands, dims, strides, kShortRowTile);
  // Strided rows of up to a few hundred elements (x[::2, 1::3] * 2), as tiles too: a tile of rows
  // is copied into one buffer and runs as one kernel call, where Note [Buffered strided rows]
  // below makes a call (and a copy loop) per row.
  if (nd == 2 && !base.contiguous && rows >= 2 && kernel.buffered_inputs > 0) {
    int64_t row_bytes = 0;
    for (int k = 0; k < num_operands; ++k) row_bytes += row * operands[k].itemsize;
    if (2 * row_bytes <= kTileBytes)
      return run_short_rows(fn, base, num_operands, kernel.buffered_inputs, operands, dims, strides,
                            std::min(rows, kTileBytes / row_bytes));
  }

  // Note [Buffered strided rows]: rows shorter than a vector or two gain nothing from it.
  const bool buffered = !base.contiguous && kernel.buffered_inputs > 0 && row >= kMinBufferedRow;
  auto call_row = [&](PointwiseCall& call) {
    if (buffered) run_buffered(fn, call, num_operands, kernel.buffered_inputs, operands);
    else fn(&call);
  };

  // One row too short to split (every 1-D launch below 64 K elements): call the kernel here.
  // The general path below costs several integer divisions and a callable.
  if (rows == 1 && row < 2 * kElementsPerChunk) {
    base.n = row;
    for (int k = 0; k < num_operands; ++k) base.ptr[k] = operands[k].data;
    call_row(base);
    return;
  }

  // Rows, or pieces of rows when there are fewer rows than threads and the rows are long.
  int64_t pieces_per_row = 1;
  if (rows < num_threads() && row >= 2 * kElementsPerChunk)
    pieces_per_row = std::min<int64_t>(num_threads(), row / kElementsPerChunk);
  const int64_t piece = (row + pieces_per_row - 1) / pieces_per_row;
  const int64_t work_items = rows * pieces_per_row;
  const int64_t grain = std::max<int64_t>(1, kElementsPerChunk / std::min(piece, row));

  // Work items [begin, end) through `call` (base's contiguity, strides and parameters).
  auto run_items = [&](PointwiseCall& call, int64_t begin, int64_t end) {
    for (int64_t w = begin; w < end; ++w) {
      int64_t r = w / pieces_per_row, p = w % pieces_per_row;
      int64_t start = p * piece;
      call.n = std::min(piece, row - start);
      // Row r's offset: unravel r over the outer dims (innermost outer dim fastest).
      for (int k = 0; k < num_operands; ++k) call.ptr[k] = operands[k].data + start * strides[k][nd - 1];
      int64_t rem = r;
      for (int d = outer_rank - 1; d >= 0; --d) {
        int64_t idx = rem % dims[d];
        rem /= dims[d];
        for (int k = 0; k < num_operands; ++k) call.ptr[k] += idx * strides[k][d];
      }
      call_row(call);
    }
  };
  // One chunk (a row of a few thousand elements): run it here, without parallel_for's callable
  // and a second copy of the call struct.
  if (work_items <= grain) return run_items(base, 0, work_items);
  parallel_for(work_items, grain, [&](int64_t begin, int64_t end) {
    PointwiseCall call = base;
    run_items(call, begin, end);
  });
}

namespace {

// The strided operands of one launch's block of rows, copied into contiguous rows (Note [Buffered
// strided rows]): inputs when made, outputs (a pointwise kernel's, a reduction's stored values)
// by write_back. Inputs are read element by element across the block's rows, so a Fortran-order
// matrix (rows adjacent in memory) is read in memory order. Inactive unless `active`.
class BlockBuffers {
public:
  template <typename RowStart>
  BlockBuffers(bool active, const RowLaunch& l, const bool* strided, int lead, int64_t first_row, int64_t rows,
               RowStart&& row_start)
      : active_(active), l_(l), strided_(strided), lead_(lead), rows_(rows) {
    if (!active_) return;
    int64_t bytes = 0;
    for (int k = 0; k < l.num_operands; ++k)
      if (strided[k]) bytes += rows * l.n * l.operands[k].itemsize;
    thread_local std::vector<char> area;
    thread_local std::vector<char*> starts;
    if (area.size() < static_cast<size_t>(bytes)) area.resize(bytes);
    starts.resize(rows * l.num_operands);
    area_ = area.data();
    starts_ = starts.data();
    int64_t offset = 0;
    for (int k = 0; k < l.num_operands; ++k) {
      if (!strided[k]) continue;
      slot_[k] = area_ + offset;
      offset += rows * l.n * l.operands[k].itemsize;
      for (int64_t r = 0; r < rows; ++r) starts_[k * rows + r] = row_start(first_row + r, k);
      if (k < l.kernel->buffered_inputs) copy(k, true);
    }
  }
  BlockBuffers(const BlockBuffers&) = delete;
  BlockBuffers& operator=(const BlockBuffers&) = delete;

  // Row r of the block (0-based) reads and writes the copies.
  void point(char** ptr, int64_t r) const {
    if (!active_) return;
    for (int k = 0; k < l_.num_operands; ++k)
      if (strided_[k]) ptr[k] = slot_[k] + r * l_.n * l_.operands[k].itemsize;
  }

  void write_back() {
    if (!active_) return;
    for (int k = l_.kernel->buffered_inputs; k < l_.num_operands; ++k)
      if (strided_[k]) copy(k, false);
  }

private:
  void copy(int k, bool in) {
    switch (l_.operands[k].itemsize) {
      case 1: return copy_as<uint8_t>(k, in);
      case 2: return copy_as<uint16_t>(k, in);
      case 4: return copy_as<uint32_t>(k, in);
      default: return copy_as<uint64_t>(k, in);
    }
  }
  template <typename T>
  void copy_as(int k, bool in) {
    const int64_t stride = l_.operands[k].strides[lead_], n = l_.n;
    T* rows = reinterpret_cast<T*>(slot_[k]);
    char* const* start = starts_ + k * rows_;
    for (int64_t i = 0; i < n; ++i)
      for (int64_t r = 0; r < rows_; ++r) {
        char* element = start[r] + i * stride;
        if (in) std::memcpy(rows + r * n + i, element, sizeof(T));
        else std::memcpy(element, rows + r * n + i, sizeof(T));
      }
  }

  bool active_;
  const RowLaunch& l_;
  const bool* strided_;
  int lead_;
  int64_t rows_;
  char* area_ = nullptr;
  char** starts_ = nullptr;
  char* slot_[kMaxKernelOperands] = {};
};

}  // namespace

void run_row_blocked(int lead, const int64_t* lead_shape, const RowLaunch* launches, int count) {
  int64_t rows = 1;
  for (int d = 0; d < lead; ++d) rows *= lead_shape[d];
  if (rows == 0) return;
  // Bytes a row touches over the whole chain (an operand re-read by several launches counts each
  // time): a block of rows should fit in a quarter of a core's L2, so re-reads hit in cache.
  int64_t row_bytes = 0;
  for (int j = 0; j < count; ++j) {
    const RowLaunch& l = launches[j];
    for (int k = 0; k < l.num_operands; ++k)
      if (l.operands[k].strides[lead] != 0) row_bytes += l.n * l.operands[k].itemsize;
  }
  constexpr int64_t kBlockBytes = 256 << 10;
  int64_t block = std::clamp<int64_t>(kBlockBytes / std::max<int64_t>(row_bytes, 1), 1, rows);
  // Enough blocks to keep every thread busy.
  block = std::min(block, std::max<int64_t>(1, rows / (2 * num_threads())));
  const int64_t blocks = (rows + block - 1) / block;

  // The per-launch call templates: contiguity and inner strides are fixed for the chain.
  // One template per launch; a chain has at most kMaxRowLaunches of them (no allocation).
  PointwiseCall pw[kMaxRowLaunches]{};
  ReductionCall rd[kMaxRowLaunches];
  // Note [Buffered strided rows], for a block of rows at a time: the launches whose rows are not
  // contiguous run on copies, and which of their operands are copied.
  bool transposed[kMaxRowLaunches] = {};
  bool strided[kMaxRowLaunches][kMaxKernelOperands] = {};
  for (int j = 0; j < count; ++j) {
    const RowLaunch& l = launches[j];
    int64_t contiguous = 1;
    for (int k = 0; k < l.num_operands; ++k) {
      int64_t s = l.operands[k].strides[lead];
      strided[j][k] = s != 0 && s != l.operands[k].itemsize;
      if (strided[j][k]) contiguous = 0;
      (l.reduction ? rd[j].stride[k] : pw[j].stride[k]) = s;
    }
    if (!contiguous && l.kernel->buffered_inputs > 0 && l.n >= kMinBufferedRow) {
      transposed[j] = true;
      contiguous = 1;
      for (int k = 0; k < l.num_operands; ++k)
        if (strided[j][k]) (l.reduction ? rd[j].stride[k] : pw[j].stride[k]) = l.operands[k].itemsize;
    }
    if (l.reduction) {
      rd[j].n = l.n;
      rd[j].contiguous = contiguous;
      rd[j].finish = 1;  // each row is one whole reduction: mean's division and std's sqrt apply
      rd[j].divisor = l.divisor;
      std::copy_n(l.params, l.num_params, rd[j].params);
    } else {
      pw[j].n = l.n;
      pw[j].contiguous = contiguous;
      std::copy_n(l.params, l.num_params, pw[j].params);
    }
  }

  parallel_for(blocks, 1, [&](int64_t b0, int64_t b1) {
    PointwiseCall pcall[kMaxRowLaunches]{};
    ReductionCall rcall[kMaxRowLaunches];
    std::copy_n(pw, count, pcall);
    std::copy_n(rd, count, rcall);
    for (int64_t b = b0; b < b1; ++b) {
      const int64_t r0 = b * block, r1 = std::min(rows, r0 + block);
      for (int j = 0; j < count; ++j) {
        const RowLaunch& l = launches[j];
        char** ptr = l.reduction ? rcall[j].ptr : pcall[j].ptr;
        // Row r's operand k starts at data + offset of r over the lead dims.
        auto row_start = [&](int64_t r, int k) {
          char* p = l.operands[k].data;
          for (int d = lead - 1; d >= 0; --d) {
            p += r % lead_shape[d] * l.operands[k].strides[d];
            r /= lead_shape[d];
          }
          return p;
        };
        BlockBuffers copies(transposed[j], l, strided[j], lead, r0, r1 - r0, row_start);
        for (int64_t r = r0; r < r1; ++r) {
          for (int k = 0; k < l.num_operands; ++k) ptr[k] = l.operands[k].data;
          char* out = l.out;
          int64_t rem = r;
          for (int d = lead - 1; d >= 0; --d) {
            int64_t idx = rem % lead_shape[d];
            rem /= lead_shape[d];
            for (int k = 0; k < l.num_operands; ++k) ptr[k] += idx * l.operands[k].strides[d];
            if (l.reduction) out += idx * l.out_strides[d];
          }
          copies.point(ptr, r - r0);
          if (l.reduction) {
            rcall[j].out = out;
            run_reduction_row(*l.kernel, l.pairwise, rcall[j], l.num_operands);
          } else {
            reinterpret_cast<PointwiseFn>(l.kernel->entry)(&pcall[j]);
          }
        }
        copies.write_back();
      }
    }
  });
}

}  // namespace framejit::rt
