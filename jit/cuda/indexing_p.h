// indexing_p.h — what the CUDA generators share about where a thread works: lane groups and
// their tile loop, coordinates of a flat index (with divisions by run-time sizes as multiplies),
// and a module's opening lines.
#pragma once

#include <array>
#include <string>
#include <vector>

#include "jit/cuda/ptx_ops.h"

namespace framejit::jit::cuda {

/// Threads in groups of 2^lanes_log2 lanes (Note [CUDA reduction kernel ABI]): the block's
/// groups take consecutive items of a tile (an output, a row), blocks take tiles in turn. open()
/// starts the tile loop (the same trip count for the whole block, so barriers and shuffles see
/// every thread) with `item` and `active` (item < count) set; close() ends it.
class LaneGroups {
public:
  LaneGroups(PtxWriter& w, const std::string& lanes_log2);
  void open(const std::string& count);
  void close();

  std::string tid, ntid, ctaid, nctaid;  // %tid.x ...
  std::string lanes, lane, group, groups;
  std::string warp_lanes;   // min(lanes, 32): the butterfly's span
  std::string block_group;  // predicate: the group is the whole block (lanes > 32)
  std::string item, active;

private:
  PtxWriter& w_;
  std::string tile_, loop_, done_;
};

/// A size's division registers (Note [Division by a run-time size] in runtime/cuda/launch.h).
struct FastDivRegs {
  std::string magic, shift;
};
/// Loads the FastDiv at `offset` of the parameter struct `args`.
FastDivRegs load_fast_div(PtxWriter& w, const std::string& args, int offset);
/// q = x / d for x below 2^31.
void fast_divide(PtxWriter& w, const std::string& q, const std::string& x, const FastDivRegs& d);

/// Predicates "rank == 1, 2, 3" of a launch-uniform rank register, for strided_offsets.
std::array<std::string, 3> rank_predicates(PtxWriter& w, const std::string& rank);
/// Byte offsets (64-bit registers) of position `idx` in a space of at most 4 dims (innermost
/// first; `rank_is` from rank_predicates; `shape` and `div` the sizes of all but the outermost,
/// which takes the remaining quotient), one per set of strides.
std::vector<std::string> strided_offsets(PtxWriter& w, const std::string& idx, const std::array<std::string, 3>& rank_is,
                                         const std::array<std::string, 3>& shape, const std::array<FastDivRegs, 3>& div,
                                         const std::vector<std::array<std::string, 4>>& strides);

/// `[args+offset]`: a kernel's parameter struct (every generator names it `args`).
inline std::string param_at(int offset) { return "[args+" + std::to_string(offset) + "]"; }
/// A register loaded with the 32- or 64-bit field at `offset` of the parameter struct.
std::string param_u32(PtxWriter& w, int offset);
std::string param_u64(PtxWriter& w, int offset);

/// A module's opening: the PTX version and target, then `ir_text` (the loop IR) as comments.
std::string module_header(const std::string& ir_text);

}  // namespace framejit::jit::cuda
