// executor.cpp — launching pointwise kernels over strided, broadcast operands.
#include "runtime/executor.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "runtime/threads.h"

namespace framejit::rt {

namespace {
// Rows shorter than this are not worth a thread; about 16 K elements of work per chunk.
constexpr int64_t kElementsPerChunk = 1 << 15;
}  // namespace

void run_pointwise(const Kernel& kernel, int rank, const int64_t* shape, int num_operands, const Operand* operands,
                   const ParamValue* params, int num_params) {
  auto fn = reinterpret_cast<PointwiseFn>(kernel.entry);
  int64_t total = 1;
  for (int d = 0; d < rank; ++d) total *= shape[d];
  if (total == 0) return;

  // Collapse: drop size-1 dims, then merge dim d into d+1 when every operand steps through them as
  // one (stride[d] == stride[d+1] * shape[d+1]).
  std::vector<int64_t> dims;
  std::vector<std::vector<int64_t>> strides(num_operands);
  for (int d = 0; d < rank; ++d) {
    if (shape[d] == 1) continue;
    bool merge = !dims.empty();
    for (int k = 0; merge && k < num_operands; ++k)
      merge = strides[k].back() == operands[k].strides[d] * shape[d];
    if (merge) {
      dims.back() *= shape[d];
      for (int k = 0; k < num_operands; ++k) strides[k].back() = operands[k].strides[d];
    } else {
      dims.push_back(shape[d]);
      for (int k = 0; k < num_operands; ++k) strides[k].push_back(operands[k].strides[d]);
    }
  }
  if (dims.empty()) {  // a single element
    dims.push_back(1);
    for (int k = 0; k < num_operands; ++k) strides[k].push_back(0);
  }
  const int outer_rank = static_cast<int>(dims.size()) - 1;
  const int64_t row = dims.back();
  const int64_t rows = total / row;

  PointwiseCall base;
  base.contiguous = 1;
  for (int k = 0; k < num_operands; ++k) {
    base.stride[k] = strides[k].back();
    if (base.stride[k] != 0 && base.stride[k] != operands[k].itemsize) base.contiguous = 0;
  }
  std::memcpy(base.params, params, sizeof(ParamValue) * num_params);

  // Rows, or pieces of rows when there are fewer rows than threads and the rows are long.
  int64_t pieces_per_row = 1;
  if (rows < num_threads() && row >= 2 * kElementsPerChunk)
    pieces_per_row = std::min<int64_t>(num_threads(), row / kElementsPerChunk);
  const int64_t piece = (row + pieces_per_row - 1) / pieces_per_row;
  const int64_t work_items = rows * pieces_per_row;
  const int64_t grain = std::max<int64_t>(1, kElementsPerChunk / std::min(piece, row));

  parallel_for(work_items, grain, [&](int64_t begin, int64_t end) {
    PointwiseCall call = base;
    for (int64_t w = begin; w < end; ++w) {
      int64_t r = w / pieces_per_row, p = w % pieces_per_row;
      int64_t start = p * piece;
      call.n = std::min(piece, row - start);
      // Row r's offset: unravel r over the outer dims (innermost outer dim fastest).
      for (int k = 0; k < num_operands; ++k) call.ptr[k] = operands[k].data + start * strides[k].back();
      int64_t rem = r;
      for (int d = outer_rank - 1; d >= 0; --d) {
        int64_t idx = rem % dims[d];
        rem /= dims[d];
        for (int k = 0; k < num_operands; ++k) call.ptr[k] += idx * strides[k][d];
      }
      fn(&call);
    }
  });
}

}  // namespace framejit::rt
