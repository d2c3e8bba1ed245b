// combiner_p.h — Combiner: PTX that combines reduced values (sum, product, max, min and the
// arg forms) within a thread, across a group's lanes and across a block's warps, shared by the
// reduction and row-chain generators.
#pragma once

#include <string>

#include "jit/cuda/element_emitter_p.h"

namespace framejit::jit::cuda {

/// The accumulator as registers see it: uint64 (only a uint8 or bool sum's or product's
/// accumulator, Note [Unsigned accumulators] in jit/x86/reduction_codegen.cpp) is int64's twin.
inline rt::DType acc_type(rt::DType t) { return t == rt::DType::UInt64 ? rt::DType::Int64 : t; }
/// `r`'s prologue as the generators compile it (reduction_prologue in jit/lower: a uint64
/// accumulator's final cast made an int64 one, the same bits).
PointwiseKernelIR twin_prologue(const ReductionKernelIR& r);

class Combiner {
public:
  Combiner(ElementEmitter& e, ReduceOp op, rt::DType t)
      : w_(e.w()), e_(e), op_(op), t_(acc_type(t)), arg_(is_arg_reduce(op)) {}

  rt::DType type() const { return t_; }
  bool arg() const { return arg_; }
  /// A register holding the op's identity (max: -inf or the type's minimum...).
  std::string identity();
  /// acc (and, for argmax/argmin, its int64 index acc_i) = the better of acc and v. Sum, product,
  /// max and min combine as the body's own operations do (NaN propagating through max and min);
  /// the arg forms keep the extreme with the smaller index on ties, NaN counting as the extreme.
  void combine(const std::string& acc, const std::string& acc_i, const std::string& v, const std::string& v_i);
  /// Combines the lanes of each group within a warp: butterfly masks from `from` down to 1, each
  /// only where it is below `lanes` (a register uniform over the launch, so a warp's lanes take the
  /// same path and its shuffles see the whole warp). Every lane of a group ends with the result.
  void butterfly(const std::string& acc, const std::string& acc_i, const std::string& lanes, int from);
  /// A group that is the whole block: each warp's lane 0 leaves its result in shared memory
  /// (fj_red_value, fj_red_index: kSharedWords words each), warp 0 combines them in warp order.
  /// Thread 0 holds the result, or with `broadcast` every thread does. Every thread of the block
  /// must call it.
  void block_combine(const std::string& acc, const std::string& acc_i, const std::string& tid, const std::string& ntid,
                     bool broadcast);
  /// `v` finished as `r` says: divided by the int64 count at `divisor` (a param-space address
  /// text) for a mean, then square-rooted for std.
  std::string finish(const ReductionKernelIR& r, const std::string& v, const std::string& divisor);

  /// The shared-memory declarations block_combine uses, for a module's header: a word per warp
  /// of the largest block (1024 threads), and one more for the broadcast.
  static std::string shared_declarations();

private:
  std::string shuffle(const std::string& x, int bits, int mask);

  PtxWriter& w_;
  ElementEmitter& e_;
  ReduceOp op_;
  rt::DType t_;
  bool arg_;
};

}  // namespace framejit::jit::cuda
