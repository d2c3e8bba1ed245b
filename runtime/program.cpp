// program.cpp — run_program: binds each step's values to kernel operands, allocates outputs
// through the host, and launches kernels, reductions, chains and GEMMs (Note [Programs and their
// host] in program.h).
#include "runtime/program.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <string>

#include "runtime/cuda/gemm.h"
#include "runtime/cuda/launch.h"
#include "runtime/cuda/reduction.h"
#include "runtime/cuda/row_chain.h"
#include "runtime/fixed_vector.h"
#include "runtime/log.h"
#include "runtime/threads.h"

namespace framejit::rt {

namespace {

// Below this many elements, releasing and re-taking the host's lock costs more than it frees.
constexpr int64_t kDetachElements = 1 << 16;
// Below this many elements in the chain's first input, a chain runs part by part (the data is in
// cache anyway and blocking costs per-row calls).
constexpr int64_t kChainMinElements = 1 << 15;
// Below this many multiply-adds one product cannot give 16 threads a GEMM task of its minimum size
// (64^3), so a batch of them runs batch-parallel (Note [Batched products]).
constexpr int64_t kSmallGemmMacs = int64_t{1} << 22;

// A value's memory as a step reads it: the value's own fields, or a folded view's layout computed
// into caller-provided scratch. Pointers only: nothing is copied per operand. NB: no member
// initializers: a step keeps kMaxKernelOperands of them, filled only for the operands it has.
struct ArrayRef {
  char* data;
  int nd;
  const int64_t* dims;
  const int64_t* strides;
  int itemsize;
};

// Room for the layouts of the folded views one step reads, each constructed only when a view
// needs it: an array of kMaxKernelOperands StridedLayouts would be 8 KB of stack, one cache line
// per layout written on every launch.
template <int N>
class LayoutScratch {
public:
  LayoutScratch() {}
  LayoutScratch(const LayoutScratch&) = delete;
  LayoutScratch& operator=(const LayoutScratch&) = delete;
  // Callers take at most N (one per operand; each view level has its own scratch).
  StridedLayout& take() { return *new (&slots_[used_++].layout) StridedLayout; }  // NB: not (): no zeroing

private:
  union Slot {
    Slot() {}
    StridedLayout layout;  // trivially destructible: nothing to destroy
  };
  Slot slots_[N];
  int used_ = 0;
};
using StepScratch = LayoutScratch<kMaxKernelOperands>;

// The state of one run: the program, its values and its host.
struct Run {
  const Program& p;
  Value* vals;
  RunHost& host;
  // A device launch's failure, recorded where the host's lock may be released and reported by
  // device_ok() once it is held again.
  std::string device_error;

  bool device_ok() {
    if (device_error.empty()) return true;
    host.fail_device(device_error);
    return false;
  }

  // Whether reading v may run the library's copying reshape (a folded reshape somewhere in its
  // views), which reads v's source data when the step binds.
  bool may_copy(int v) const {
    for (; p.is_folded(v) && !vals[v].is_array(); v = p.views[p.view_of[v]].source)
      if (p.views[p.view_of[v]].kind == ViewOp::Kind::Reshape) return true;
    return false;
  }

  bool read_int(int v, int64_t& out) const {
    const Value& x = vals[v];
    if (x.kind != Value::Kind::Number || !x.is_int) return false;
    out = x.number.i;
    return true;
  }

  // Value v's layout into `out`; `scratch` holds a folded view's computed layout.
  template <int N>
  bool layout(int v, ArrayRef& out, LayoutScratch<N>& scratch_room) {
    if (!vals[v].is_array() && p.is_folded(v)) {
      const ViewOp& op = p.views[p.view_of[v]];
      StridedLayout& scratch = scratch_room.take();
      LayoutScratch<1> src_scratch;
      ArrayRef src;
      if (!layout(op.source, src, src_scratch)) return false;
      StridedLayout in;
      in.data = src.data;
      in.nd = src.nd;
      std::copy_n(src.dims, src.nd, in.dims);
      std::copy_n(src.strides, src.nd, in.strides);
      auto value = [&](int id, int64_t& x) { return read_int(id, x); };
      if (apply_view(op, in, src.itemsize, value, scratch)) {
        out = {scratch.data, scratch.nd, scratch.dims, scratch.strides, src.itemsize};
        return true;
      }
      // The eager way: the library copies or raises. First make the views it reads. Of several
      // views that cannot apply (run-time indices out of range, Note [Run-time indices]), the
      // first the user's code made raises, with the message eager code gives.
      // (A view the library makes without raising, a reshape it copies, is made and passed.)
      for (int u = first_failing_view(0, v); u != v; u = first_failing_view(u + 1, v))
        if (!make_view(u)) return false;
      if (!make_view(v)) return false;
    }
    const Value& x = vals[v];
    if (x.kind == Value::Kind::Empty) {
      host.fail(RunError::NotComputed, v);
      return false;
    }
    if (!x.is_array()) {
      host.fail(RunError::NotAnArray, v);
      return false;
    }
    out = {x.data, x.nd, x.dims, x.strides, dtype_itemsize(x.dtype)};
    return true;
  }

  // The first folded view in [from, v) (value ids are the graph's order) that reads a computed
  // array and cannot apply to it, or v. Only on the failure path.
  int first_failing_view(int from, int v) {
    bool unread = false;  // a run-time int the view reads is not computed yet: not its turn
    auto value = [&](int id, int64_t& x) {
      const bool ok = read_int(id, x);
      unread = unread || !ok;
      return ok;
    };
    for (int u = from; u < v; ++u) {
      if (!p.is_folded(u) || vals[u].is_array()) continue;
      const ViewOp& op = p.views[p.view_of[u]];
      const Value& s = vals[op.source];
      if (!s.is_array()) continue;
      StridedLayout in, out;
      in.data = s.data;
      in.nd = s.nd;
      std::copy_n(s.dims, s.nd, in.dims);
      std::copy_n(s.strides, s.nd, in.strides);
      unread = false;
      if (!apply_view(op, in, dtype_itemsize(s.dtype), value, out) && !unread) return u;
    }
    return v;
  }

  // Makes folded view v (and the folded views it is made from) through the host.
  bool make_view(int v) {
    int src = p.views[p.view_of[v]].source;
    if (p.is_folded(src) && !vals[src].is_array() && !make_view(src)) return false;
    return vals[v].is_array() || host.run_extern(v, vals);
  }

  bool read_params(const std::vector<int>& params, const std::vector<DType>& dtypes, ParamValue* out) {
    for (size_t k = 0; k < params.size(); ++k) {
      const Value& x = vals[params[k]];
      const bool want_int = dtypes[k] == DType::Int64;
      if (x.kind == Value::Kind::Number) {
        if (want_int && !x.is_int) {
          host.fail(RunError::ParamType, params[k]);
          return false;
        }
        if (want_int) out[k].i = x.number.i;
        else out[k].f = x.is_int ? static_cast<double>(x.number.i) : x.number.f;
        continue;
      }
      if (x.is_array() && x.nd == 0 && read_element(x, want_int, out[k])) continue;  // a library scalar
      if (x.kind != Value::Kind::Object || !host.read_number(x, want_int, out[k])) {
        if (x.kind != Value::Kind::Object) host.fail(RunError::ParamType, params[k]);
        return false;
      }
    }
    return true;
  }

  // The one element of a 0-d array (how a host may hold a NumPy scalar) as a parameter.
  static bool read_element(const Value& x, bool want_int, ParamValue& out) {
    switch (x.dtype) {
      case DType::Float64:
      case DType::Float32: {
        if (want_int) return false;
        if (x.dtype == DType::Float64) {
          std::memcpy(&out.f, x.data, sizeof(double));
        } else {
          float g;
          std::memcpy(&g, x.data, sizeof g);
          out.f = g;
        }
        return true;
      }
      case DType::Int64:
      case DType::Int32:
      case DType::Bool: {  // a numpy.bool_ where the trace saw a Python bool (Note [Kind tags])
        int64_t i;
        if (x.dtype == DType::Int64) {
          std::memcpy(&i, x.data, sizeof i);
        } else if (x.dtype == DType::Bool) {
          i = *reinterpret_cast<const uint8_t*>(x.data) != 0;
        } else {
          int32_t j;
          std::memcpy(&j, x.data, sizeof j);
          i = j;
        }
        if (want_int) out.i = i;
        else out.f = static_cast<double>(i);
        return true;
      }
      default: return false;
    }
  }

  void set(int v, const Value& x) {
    if (vals[v].kind != Value::Kind::Empty) host.release(vals[v]);
    vals[v] = x;
  }
};

// The broadcast of the arrays' shapes (the iteration space of the ufuncs a kernel replaces).
bool broadcast_shape(Run& run, const ArrayRef* in, size_t n, int& rank, int64_t* shape) {
  rank = 0;
  for (size_t k = 0; k < n; ++k) rank = std::max(rank, in[k].nd);
  std::fill(shape, shape + rank, 1);
  for (size_t k = 0; k < n; ++k) {
    const ArrayRef& a = in[k];
    for (int d = 0; d < a.nd; ++d) {
      int64_t& s = shape[rank - a.nd + d];
      int64_t dim = a.dims[d];
      if (dim != 1 && s != 1 && dim != s) {
        run.host.fail(RunError::Broadcast, 0);
        return false;
      }
      if (dim != 1) s = dim;
    }
  }
  return true;
}

// An array as a kernel operand over `rank` iteration dims: stride 0 where it is broadcast.
Operand operand_of(const ArrayRef& a, int rank, int64_t* strides) {
  for (int d = 0; d < rank; ++d) {
    int src = d - (rank - a.nd);
    strides[d] = src < 0 || a.dims[src] == 1 ? 0 : a.strides[src];
  }
  return {a.data, strides, a.itemsize};
}

ArrayRef ref_of(const Value& x) { return {x.data, x.nd, x.dims, x.strides, dtype_itemsize(x.dtype)}; }

// Note [Output memory order]
// NumPy's ufuncs allocate their output in the memory order of their inputs (order='K'): an
// F-ordered input gives an F-ordered result. The order is the inputs' (strides 0 where
// broadcast) by Note [Memory order of axes] in runtime/executor.cpp; `outer_first` receives the
// axes from outermost inward. True when that is plain C order.
bool output_order(const Operand* ops, int nin, int rank, int* outer_first) {
  for (int i = 0; i < rank; ++i) outer_first[i] = i;
  memory_order(ops, nin, rank, outer_first);
  bool c_order = true;
  for (int i = 0; i < rank; ++i) c_order = c_order && outer_first[i] == i;
  return c_order;
}

// A step bound to this call's arrays: iteration space, operands, parameters and (for a
// reduction) where results go. ops[k].strides points into `strides`: a Bound is never copied.
struct Bound {
  Bound() {}  // leaves `ops` unconstructed
  Bound(const Bound&) = delete;
  Bound& operator=(const Bound&) = delete;

  int rank = 0;
  int64_t shape[kMaxRank];
  int64_t total = 1;
  int nops = 0;
  // The first nops are assigned by bind_*. In a union so that they are not zeroed (Operand's
  // member initializers) on every launch: a `rep stos` of 384 bytes per small call.
  union {
    Operand ops[kMaxKernelOperands];
  };
  int64_t strides[kMaxKernelOperands][kMaxRank];
  ParamValue params[kMaxKernelParams];
  int nparams = 0;
  // Reductions: where results go (byte strides per iteration dim, 0 along reduced dims), which
  // dims are reduced and how many elements each result combines.
  char* out = nullptr;
  int64_t out_strides[kMaxRank];
  bool reduced[kMaxRank];
  int64_t count = 1;
};

// Reads the layouts of `ids` into `in` (views into `scratch`) and broadcasts them.
bool bind_inputs(Run& run, const std::vector<int>& ids, ArrayRef* in, StepScratch& scratch, Bound& b) {
  for (size_t k = 0; k < ids.size(); ++k)
    if (!run.layout(ids[k], in[k], scratch)) return false;
  if (!broadcast_shape(run, in, ids.size(), b.rank, b.shape)) return false;
  for (int d = 0; d < b.rank; ++d) b.total *= b.shape[d];
  return true;
}

// Note [Output buffer reuse]
// A kernel input that dies at this kernel (no later step reads it, and it is no program output)
// may take the kernel's output when nobody else can observe it (RunHost::is_private: the run
// holds the only reference to memory it owns, C-contiguous and aligned) and it has exactly the
// output's dtype and shape. Element i of the output then overwrites element i of the input, which
// the kernel has already read (every kernel reads an element's inputs before it stores the
// element's outputs). Softmax's division writes into its exp array this way, so the call
// allocates one full-size array instead of two.
int reusable_input(Run& run, const KernelStep& step, const Bound& b, DType dtype, int* taken, int ntaken) {
  for (int v : step.dying) {
    const Value& x = run.vals[v];
    if (!x.is_array() || x.dtype != dtype || x.nd != b.rank || !std::equal(b.shape, b.shape + b.rank, x.dims)) continue;
    if (std::find(taken, taken + ntaken, v) != taken + ntaken) continue;
    if (!run.host.is_private(x)) continue;
    return v;
  }
  return -1;
}

bool bind_kernel(Run& run, const KernelStep& step, Bound& b) {
  const size_t nin = step.inputs.size(), nout = step.outputs.size();
  ArrayRef in[kMaxKernelOperands];
  StepScratch scratch;
  if (!bind_inputs(run, step.inputs, in, scratch, b)) return false;
  for (size_t k = 0; k < nin; ++k) b.ops[k] = operand_of(in[k], b.rank, b.strides[k]);
  int order[kMaxRank];
  const bool c_order = b.rank < 2 || output_order(b.ops, static_cast<int>(nin), b.rank, order);
  // A folded view may read a dying array under another index map: no in-place output then.
  bool reuse = c_order && !step.dying.empty();
  for (int v : step.inputs) reuse = reuse && !run.p.is_folded(v);
  int taken[kMaxKernelOperands];
  int ntaken = 0;
  for (size_t j = 0; j < nout; ++j) {
    const int src = reuse ? reusable_input(run, step, b, step.output_dtypes[j], taken, ntaken) : -1;
    if (src >= 0) {
      taken[ntaken++] = src;
      Value out = run.vals[src];
      run.host.retain(out);
      run.set(step.outputs[j], out);
      continue;
    }
    // Straight into the value's slot: a host writes a Value field by field, and copying one just
    // written as a whole stalls on store forwarding (wide loads over narrower stores).
    run.set(step.outputs[j], Value{});
    if (!run.host.alloc(run.vals[step.outputs[j]], step.output_dtypes[j], b.rank, b.shape, c_order ? nullptr : order))
      return false;  // the slot stays Empty (hosts set `out` only on success)
  }
  b.nops = static_cast<int>(nin + nout);
  for (size_t j = 0; j < nout; ++j)
    b.ops[nin + j] = operand_of(ref_of(run.vals[step.outputs[j]]), b.rank, b.strides[nin + j]);
  b.nparams = static_cast<int>(step.params.size());
  return run.read_params(step.params, step.param_dtypes, b.params);
}

// Every element of the new C-ordered array `v` set to `x` (a sum or product of nothing).
void fill_identity(const Value& v, int x) {
  int64_t n = 1;
  for (int d = 0; d < v.nd; ++d) n *= v.dims[d];
  auto fill = [&](auto one) {
    auto* p = reinterpret_cast<decltype(one)*>(v.data);
    std::fill(p, p + n, one);
  };
  switch (v.dtype) {
    case DType::Float32: fill(static_cast<float>(x)); break;
    case DType::Float64: fill(static_cast<double>(x)); break;
    case DType::Int32: fill(static_cast<int32_t>(x)); break;
    case DType::UInt64: fill(static_cast<uint64_t>(x)); break;
    default: fill(static_cast<int64_t>(x)); break;  // Int64: bool and integer sums
  }
}

bool bind_reduction(Run& run, const ReductionStep& step, Bound& b) {
  const size_t nin = step.inputs.size();
  ArrayRef in[kMaxKernelOperands];
  StepScratch scratch;
  if (!bind_inputs(run, step.inputs, in, scratch, b)) return false;
  if (b.rank != static_cast<int>(step.reduced.size())) {
    run.host.fail(RunError::RankMismatch, 0);
    return false;
  }
  int64_t out_shape[kMaxRank];
  int out_rank = 0;
  b.count = 1;
  for (int d = 0; d < b.rank; ++d) {
    b.reduced[d] = step.reduced[d];
    if (step.reduced[d]) b.count *= b.shape[d];
    if (!step.reduced[d] || step.keepdims) out_shape[out_rank++] = step.reduced[d] ? 1 : b.shape[d];
  }
  if (b.count == 0 && !step.empty_is_identity) {
    // Lowering compiles only sums and products where a count may be zero (sizes 0 and 1 are
    // guarded); should another count still be zero, refuse as the library would.
    run.host.fail(RunError::ZeroSizeReduction, static_cast<int64_t>(step.kind));
    return false;
  }
  for (size_t k = 0; k < nin; ++k) b.ops[k] = operand_of(in[k], b.rank, b.strides[k]);
  // Note [Output memory order]: NumPy's reductions allocate in the input's memory order over the
  // axes they keep (size-1 axes of keepdims included where the input had them); argmax/argmin,
  // and torch's and CuPy's reductions, return C order. A Fortran-order input's result is then
  // written along its adjacent axis, as NumPy's is.
  int order[kMaxRank], input_order[kMaxRank];
  bool c_order = true;
  const bool input_ordered = run.host.reductions_in_input_order();
  if (b.rank >= 2 && !step.arg() && input_ordered &&
      !output_order(b.ops, static_cast<int>(nin), b.rank, input_order)) {
    int out_axis[kMaxRank];
    for (int d = 0, od = 0; d < b.rank; ++d) out_axis[d] = !step.reduced[d] || step.keepdims ? od++ : -1;
    int n = 0;
    for (int i = 0; i < b.rank; ++i)
      if (out_axis[input_order[i]] >= 0) order[n++] = out_axis[input_order[i]];
    for (int i = 0; i < n; ++i) c_order = c_order && order[i] == i;
  }
  Value out;
  if (!run.host.alloc(out, step.output_dtype, out_rank, out_shape, c_order ? nullptr : order)) return false;
  run.set(step.output, out);
  const Value& o = run.vals[step.output];
  // Nothing to launch reads it on the host; a device kernel reduces nothing to the identity itself.
  if (b.count == 0 && step.row->device.type == DeviceType::CPU) fill_identity(o, step.kind == ReduceKind::Prod ? 1 : 0);
  for (int d = 0, od = 0; d < b.rank; ++d) {
    b.out_strides[d] = step.reduced[d] ? 0 : o.strides[od];
    if (!step.reduced[d] || step.keepdims) ++od;
  }
  b.out = o.data;
  b.nops = static_cast<int>(nin);
  if (step.value_output >= 0) {  // operand nops: every element's reduced value
    Value stored;
    // In C order, whatever the inputs' order: the row kernel that stores them writes rows (a
    // Fortran-order softmax's exp values in Fortran order took 3x as long).
    if (!run.host.alloc(stored, step.value_dtype, b.rank, b.shape, nullptr)) return false;
    run.set(step.value_output, stored);
    b.ops[b.nops] = operand_of(ref_of(run.vals[step.value_output]), b.rank, b.strides[b.nops]);
    ++b.nops;
  }
  b.nparams = static_cast<int>(step.params.size());
  return run.read_params(step.params, step.param_dtypes, b.params);
}

// Whether the reduction reduces the last axis and nothing else: then each row is one whole
// reduction and the row kernel can run row by row (what stored values and row blocking need).
bool last_axis_only(const ReductionStep& step) {
  return !step.arg() && !step.scalar_result && step.reduced.size() >= 1 && step.reduced.back() &&
         std::count(step.reduced.begin(), step.reduced.end(), true) == 1;
}

// Note [Pairwise sums]: the dtype of a float sum (sum, mean, var, std), else Bool.
DType pairwise_dtype(const ReductionStep& step) {
  const bool float_sum = step.kind == ReduceKind::Sum &&
                         (step.output_dtype == DType::Float32 || step.output_dtype == DType::Float64);
  return float_sum ? step.output_dtype : DType::Bool;
}

RowLaunch row_launch(const Kernel& kernel, bool reduction, int64_t ddof, const Bound& b) {
  RowLaunch l;
  l.kernel = &kernel;
  l.reduction = reduction;
  l.n = b.shape[b.rank - 1];
  l.num_operands = b.nops;
  l.operands = b.ops;
  l.out = b.out;
  l.out_strides = b.out_strides;
  l.divisor = b.count - ddof;
  l.params = b.params;
  l.num_params = b.nparams;
  return l;
}

void launch_kernel(Run& run, const Kernel& kernel, const Bound& b) {
  if (kernel.device.type == DeviceType::CUDA) {
    Status s = cuda::run_pointwise(kernel, b.rank, b.shape, b.nops, b.ops, b.params, b.nparams);
    if (!s && run.device_error.empty()) run.device_error = s.message();
    return;
  }
  run_pointwise(kernel, b.rank, b.shape, b.nops, b.ops, b.params, b.nparams);
}

void launch_reduction(Run& run, const ReductionStep& step, const Bound& b) {
  const bool device = step.row->device.type == DeviceType::CUDA;
  if (step.value_output >= 0 && !device) {
    // Only the row kernel stores the values: run it row by row, whatever the layout.
    RowLaunch l = row_launch(*step.row, true, step.ddof, b);
    l.pairwise = pairwise_dtype(step);
    run_row_blocked(b.rank - 1, b.shape, &l, 1);
    return;
  }
  ReductionLaunch launch;
  launch.row = step.row.get();
  launch.column = step.column.get();
  launch.arg = step.arg();
  launch.arg_max = step.kind == ReduceKind::ArgMax;
  launch.extreme = step.kind == ReduceKind::Max ? 1 : step.kind == ReduceKind::Min ? -1 : 0;
  launch.product = step.kind == ReduceKind::Prod;
  launch.value_dtype = step.value_dtype;
  launch.pairwise = pairwise_dtype(step);
  launch.ddof = step.ddof;
  launch.rank = b.rank;
  launch.shape = b.shape;
  launch.reduced = b.reduced;
  launch.num_inputs = b.nops;
  launch.inputs = b.ops;
  launch.out = b.out;
  launch.out_strides = b.out_strides;
  launch.params = b.params;
  launch.num_params = b.nparams;
  if (!device) {
    run_reduction(launch);
    return;
  }
  Status s = cuda::run_reduction(launch);
  if (!s && run.device_error.empty()) run.device_error = s.message();
}

// Runs `fn` with the host's lock released when `elements` is worth it.
template <typename Fn>
void maybe_detached(Run& run, int64_t elements, Fn&& fn) {
  if (elements < kDetachElements) {
    fn();
    return;
  }
  void* token = run.host.detach();
  fn();
  run.host.reattach(token);
}

bool finish_reduction(Run& run, const ReductionStep& step) {
  return !step.scalar_result || run.host.to_scalar(run.vals[step.output]);
}

bool finish_kernel(Run& run, const KernelStep& step) {
  for (int v : step.scalar_outputs)
    if (!run.host.to_scalar(run.vals[v])) return false;
  return true;
}

bool run_kernel_step(Run& run, const KernelStep& step) {
  Bound b;
  if (!bind_kernel(run, step, b)) return false;
  maybe_detached(run, b.total, [&] { launch_kernel(run, *step.kernel, b); });
  return run.device_ok() && finish_kernel(run, step);
}

bool run_reduction_step(Run& run, const ReductionStep& step) {
  Bound b;
  if (!bind_reduction(run, step, b)) return false;
  maybe_detached(run, b.total, [&] { launch_reduction(run, step, b); });
  return run.device_ok() && finish_reduction(run, step);
}

// Whether a bound chain can run row block by row block: every part iterates over the same
// leading dims, every reduction reduces only the last axis, and each part reads what earlier
// parts wrote only at its own rows (a chain result broadcast along a leading dim would need every
// row of it first).
bool row_blockable(const Run& run, const ChainStep& chain, const Bound* b) {
  const int rank = b[0].rank;
  if (rank < 2) return false;
  // Device kernels take whole arrays: the blocking is the GPU's own.
  for (const ChainStep::Part& p : chain.parts)
    if ((p.reduction ? p.red.row : p.kernel.kernel)->device.type != DeviceType::CPU) return false;
  int64_t rows = 1;
  for (int d = 0; d < rank - 1; ++d) rows *= b[0].shape[d];
  if (rows < 2 * num_threads()) return false;  // too few rows: split rows instead
  int produced[kMaxChainParts * kMaxKernelOperands];
  int nproduced = 0;
  for (size_t j = 0; j < chain.parts.size(); ++j) {
    const ChainStep::Part& p = chain.parts[j];
    if (b[j].rank != rank || !std::equal(b[j].shape, b[j].shape + rank - 1, b[0].shape)) return false;
    if (p.reduction && !last_axis_only(p.red)) return false;
    for (int v : p.reduction ? p.red.inputs : p.kernel.inputs) {
      const Value& a = run.vals[v];
      if (std::find(produced, produced + nproduced, v) == produced + nproduced) {
        // An input whose rows are not runs in memory (the last axis of a Fortran-order matrix):
        // row by row, each element of a row is on another cache line. Part by part, each part
        // iterates in memory order (column reductions; pointwise kernels by Note [Memory order of
        // axes]), as the same chain over axis 0 of the C-order transpose does.
        const int64_t last = a.nd == rank ? std::abs(a.strides[rank - 1]) : 0;
        for (int d = 0; d + 1 < a.nd && a.nd == rank && a.dims[rank - 1] > 1; ++d)
          if (a.dims[d] > 1 && std::abs(a.strides[d]) < last) return false;
        continue;
      }
      if (a.nd != rank || !std::equal(a.dims, a.dims + rank - 1, b[0].shape)) return false;
    }
    if (p.reduction) {
      produced[nproduced++] = p.red.output;
      if (p.red.value_output >= 0) produced[nproduced++] = p.red.value_output;
    } else {
      for (int v : p.kernel.outputs) produced[nproduced++] = v;
    }
  }
  return true;
}

// Runs a chain's fused device kernel over its bound parts; false (nothing issued) when the layout
// does not fit it. A launch that failed is recorded as the run's device error.
bool run_fused_chain(Run& run, const ChainStep& chain, const Bound* b) {
  const size_t n = chain.parts.size();
  cuda::RowChainPart parts[kMaxChainParts];
  bool forwarded[kMaxChainParts][kMaxKernelOperands] = {};
  for (size_t j = 0; j < n; ++j) {
    const ChainStep::Part& p = chain.parts[j];
    const std::vector<int>& inputs = p.reduction ? p.red.inputs : p.kernel.inputs;
    for (size_t k = 0; k < inputs.size(); ++k) forwarded[j][k] = chain.forwarded[j][k] >= 0;
    cuda::RowChainPart& c = parts[j];
    c.reduction = p.reduction;
    c.rank = b[j].rank;
    c.shape = b[j].shape;
    c.num_inputs = static_cast<int>(inputs.size());
    c.num_operands = b[j].nops;
    c.operands = b[j].ops;
    c.out = b[j].out;
    c.out_strides = b[j].out_strides;
    c.divisor = b[j].count - (p.reduction ? p.red.ddof : 0);
    c.forwarded = forwarded[j];
    c.cached = chain.cached[j].data();
    c.params = b[j].params;
    c.num_params = b[j].nparams;
    // Only last-axis reductions fuse: one that reduces anything else runs part by part.
    if (p.reduction && (b[j].rank < 1 || !b[j].reduced[b[j].rank - 1])) return false;
    for (int d = 0; p.reduction && d + 1 < b[j].rank; ++d)
      if (b[j].reduced[d] && b[j].shape[d] != 1) return false;
  }
  Status s = cuda::run_row_chain(*chain.fused, parts, static_cast<int>(n));
  if (s.code() == StatusCode::Unsupported) return false;
  if (!s && run.device_error.empty()) run.device_error = s.message();
  return true;
}

bool run_chain_step(Run& run, const ChainStep& chain) {
  const size_t n = chain.parts.size();
  auto bind = [&](size_t j, Bound& b) {
    const ChainStep::Part& p = chain.parts[j];
    return p.reduction ? bind_reduction(run, p.red, b) : bind_kernel(run, p.kernel, b);
  };
  auto launch = [&](size_t j, const Bound& b) {
    const ChainStep::Part& p = chain.parts[j];
    if (p.reduction) launch_reduction(run, p.red, b);
    else launch_kernel(run, *p.kernel.kernel, b);
  };
  auto finish = [&] {
    for (const ChainStep::Part& p : chain.parts)
      if (p.reduction ? !finish_reduction(run, p.red) : !finish_kernel(run, p.kernel)) return false;
    return true;
  };
  const ChainStep::Part& first = chain.parts[0];
  int64_t size = 0;
  bool may_copy = false;
  for (const ChainStep::Part& p : chain.parts)
    for (int v : p.reduction ? p.red.inputs : p.kernel.inputs) may_copy = may_copy || run.may_copy(v);
  for (int v : first.reduction ? first.red.inputs : first.kernel.inputs) {
    ArrayRef r;
    LayoutScratch<1> scratch;
    if (!run.layout(v, r, scratch)) return false;
    int64_t s = 1;
    for (int d = 0; d < r.nd; ++d) s *= r.dims[d];
    size = std::max(size, s);
  }
  // A device's one kernel for the chain (Note [Row chains on a device] in jit/schedule), whatever
  // the size: it saves launches as much as memory traffic.
  if (chain.fused && !may_copy) {
    Bound b[kMaxChainParts];
    for (size_t j = 0; j < n; ++j)
      if (!bind(j, b[j])) return false;
    if (run_fused_chain(run, chain, b)) return run.device_ok() && finish();
    for (size_t j = 0; j < n; ++j) launch(j, b[j]);
    return run.device_ok() && finish();
  }
  // Part by part: small data, or a view that the library may have to copy when its remap does
  // not apply (it must read its source after the part computing the source has run).
  if (size < kChainMinElements || may_copy) {
    for (size_t j = 0; j < n; ++j) {
      Bound b;
      if (!bind(j, b)) return false;
      maybe_detached(run, b.total, [&] { launch(j, b); });
      if (!run.device_ok()) return false;
    }
    return finish();
  }
  // Bind every part first (allocating every output with the host's lock held), then run without.
  Bound b[kMaxChainParts];
  for (size_t j = 0; j < n; ++j)
    if (!bind(j, b[j])) return false;
  if (!row_blockable(run, chain, b)) {
    maybe_detached(run, size, [&] {
      for (size_t j = 0; j < n; ++j) launch(j, b[j]);
    });
    return run.device_ok() && finish();
  }
  RowLaunch launches[kMaxChainParts];
  for (size_t j = 0; j < n; ++j) {
    const ChainStep::Part& p = chain.parts[j];
    launches[j] = p.reduction ? row_launch(*p.red.row, true, p.red.ddof, b[j]) : row_launch(*p.kernel.kernel, false, 0, b[j]);
    if (p.reduction) launches[j].pairwise = pairwise_dtype(p.red);
  }
  maybe_detached(run, size, [&] { run_row_blocked(b[0].rank - 1, b[0].shape, launches, static_cast<int>(n)); });
  return finish();
}

// What the GEMM's epilogue callback needs: the kernel and, per operand (inputs, then the output,
// which is C), where the current batch's matrix starts and its row/column strides in bytes.
struct EpilogueContext {
  PointwiseFn fn = nullptr;
  int nops = 0;
  int nin = 0;  // the kernel's buffered inputs (0: its rows run one call each)
  char* base[kMaxKernelOperands] = {};
  int64_t row_stride[kMaxKernelOperands] = {};
  int64_t col_stride[kMaxKernelOperands] = {};
  int itemsize[kMaxKernelOperands] = {};
  PointwiseCall call{};  // contiguity, column strides and parameters, filled once
};

void run_epilogue(void* ctx, void*, int64_t, int64_t m0, int64_t n0, int64_t mb, int64_t nb) {
  const auto* e = static_cast<const EpilogueContext*>(ctx);
  // Few columns (x @ w + b with w of shape (k, 4)): a kernel call per row of C cost 5x the product
  // itself; tiles of rows are a call per 256 (relu(x @ w + b) of (3000, 4): 0.77 -> x NumPy).
  if (nb < kShortRow && mb > 1 && e->nin > 0) {
    char* data[kMaxKernelOperands];
    for (int k = 0; k < e->nops; ++k) data[k] = e->base[k] + m0 * e->row_stride[k] + n0 * e->col_stride[k];
    run_short_row_tiles(e->fn, e->call, e->nops, e->nin, data, e->row_stride, e->col_stride, e->itemsize, mb, nb,
                        kShortRowTile);
    return;
  }
  PointwiseCall call = e->call;
  call.n = nb;
  for (int64_t i = m0; i < m0 + mb; ++i) {
    for (int k = 0; k < e->nops; ++k) call.ptr[k] = e->base[k] + i * e->row_stride[k] + n0 * e->col_stride[k];
    e->fn(&call);
  }
}

// An operand the GEMM's packing code would read through misaligned element pointers (arrays may
// start at any byte offset) is copied into aligned, C-contiguous memory first. Rare, and reading
// a misaligned float through a float* is undefined behaviour (UBSan reports it).
bool is_aligned(const ArrayRef& r) {
  auto misaligned = [&](int64_t v) { return v % r.itemsize != 0; };
  if (misaligned(static_cast<int64_t>(reinterpret_cast<uintptr_t>(r.data)))) return false;
  for (int d = 0; d < r.nd; ++d)
    if (misaligned(r.strides[d])) return false;
  return true;
}

// A C-ordered, aligned copy of `r` into `storage`; `r` then describes the copy.
bool aligned_copy(ArrayRef& r, StridedLayout& layout, std::unique_ptr<char[]>& storage) {
  int64_t total = 1;
  for (int d = 0; d < r.nd; ++d) total *= r.dims[d];
  StridedLayout src;
  src.data = r.data;
  src.nd = r.nd;
  std::copy_n(r.dims, r.nd, src.dims);
  std::copy_n(r.strides, r.nd, src.strides);
  storage.reset(new (std::nothrow) char[static_cast<size_t>(total * r.itemsize) + 64]);
  if (!storage) return false;
  char* dst = storage.get() + (64 - reinterpret_cast<uintptr_t>(storage.get()) % 64) % 64;
  copy_to_c_order(src, r.itemsize, dst);
  layout = src;
  layout.data = dst;
  int64_t stride = r.itemsize;
  for (int d = r.nd - 1; d >= 0; --d) {
    layout.strides[d] = stride;
    stride *= r.dims[d];
  }
  r = {layout.data, layout.nd, layout.dims, layout.strides, r.itemsize};
  return true;
}

// C's shape for A @ B: A's and B's leading (batch) dims broadcast against each other. False with
// the library's error when the inner dims differ (guards make that impossible) or the batch dims do
// not broadcast.
bool product_shape(Run& run, const ArrayRef& a, const ArrayRef& b, int& rank, int64_t* out_shape) {
  const int64_t k = a.dims[a.nd - 1], kb = b.dims[b.nd - 2];
  if (k != kb) {
    run.host.fail(RunError::MatmulCoreDim, 0);
    return false;
  }
  rank = std::max(a.nd, b.nd);
  for (int d = 0; d < rank - 2; ++d) {
    const int da = d - (rank - a.nd), db = d - (rank - b.nd);
    const int64_t sa = da < 0 ? 1 : a.dims[da], sb = db < 0 ? 1 : b.dims[db];
    if (sa != sb && sa != 1 && sb != 1) {
      run.host.fail(RunError::MatmulBatch, 0);
      return false;
    }
    out_shape[d] = sa == 1 ? sb : sa;
  }
  out_shape[rank - 2] = a.dims[a.nd - 2];
  out_shape[rank - 1] = b.dims[b.nd - 1];
  return true;
}

// An operand's byte stride along batch dim d of a product of `rank` dims (0 where it broadcasts).
int64_t batch_stride(const ArrayRef& r, int rank, int d) {
  const int dr = d - (rank - r.nd);
  return dr < 0 || r.dims[dr] == 1 ? 0 : r.strides[dr];
}

// A product's epilogue bound over C's shape: its inputs broadcast to C (C's own array among them),
// then C as the output operand, and its parameters. False with the run's error when an operand
// does not match the product.
bool bind_epilogue(Run& run, const KernelStep& ep, const Value& c, int rank, Bound& eb) {
  ArrayRef in[kMaxKernelOperands];
  StepScratch scratch;
  const size_t nin = ep.inputs.size();
  if (!bind_inputs(run, ep.inputs, in, scratch, eb)) return false;
  if (eb.rank != rank || !std::equal(eb.shape, eb.shape + rank, c.dims)) {
    run.host.fail(RunError::EpilogueShape, 0);
    return false;
  }
  eb.nops = static_cast<int>(nin) + 1;
  for (size_t j = 0; j < nin; ++j) eb.ops[j] = operand_of(in[j], rank, eb.strides[j]);
  eb.ops[nin] = operand_of(ref_of(c), rank, eb.strides[nin]);
  eb.nparams = static_cast<int>(ep.params.size());
  return run.read_params(ep.params, ep.param_dtypes, eb.params);
}

// `src` copied into C order into `dst` (allocated in its shape) by the step's copy kernel, on the
// run's stream: a device product's operand cuBLAS cannot read, a device store's base.
bool copy_on_device(Run& run, const LazyKernel* lazy, const ArrayRef& src, const Value& dst) {
  const Kernel* copy = lazy ? lazy->get() : nullptr;
  if (!copy) {
    if (run.device_error.empty()) run.device_error = "a device array could not be copied (no copy kernel)";
    return run.device_ok();
  }
  int64_t strides[2][kMaxRank];
  Operand ops[2] = {operand_of(src, src.nd, strides[0]), operand_of(ref_of(dst), src.nd, strides[1])};
  Status status = cuda::run_pointwise(*copy, src.nd, src.dims, 2, ops, nullptr, 0);
  if (!status && run.device_error.empty()) run.device_error = status.message();
  return run.device_ok();
}

// A device operand cuBLAS cannot read in place (no unit stride in its matrices, Note [Device
// GEMMs]) as a C-ordered copy made by the step's pack kernel; `r` then describes the copy, which
// `held` keeps until the caller releases it.
bool pack_device_operand(Run& run, const GemmStep& step, ArrayRef& r, Value& held) {
  const int64_t item = dtype_itemsize(step.dtype);
  bool fits = !(reinterpret_cast<uintptr_t>(r.data) % static_cast<uintptr_t>(item));
  for (int d = 0; fits && d < r.nd; ++d) fits = r.strides[d] % item == 0;
  if (fits)
    fits = cuda::blas_layout(r.dims[r.nd - 2], r.dims[r.nd - 1], r.strides[r.nd - 2] / item, r.strides[r.nd - 1] / item);
  if (fits) return true;
  if (!run.host.alloc(held, step.dtype, r.nd, r.dims, nullptr)) return false;
  if (!copy_on_device(run, step.pack.get(), r, held)) return false;
  r = ref_of(held);
  return true;
}

// A product on a device: framejit's small-product kernel with the epilogue inside when C has few
// rows (Note [Small device products] in runtime/cuda/gemm.h), else cuBLASLt over the last two
// dims (Note [Device GEMMs] in runtime/cuda/gemm.cpp), one strided batch over the last batch dim
// per call, then the epilogue as one kernel over all of C, in place. All on the same stream.
bool run_device_gemm_step(Run& run, const GemmStep& step) {
  ArrayRef a, b;
  LayoutScratch<1> a_scratch, b_scratch;
  if (!run.layout(step.a, a, a_scratch) || !run.layout(step.b, b, b_scratch)) return false;
  int rank = 0;
  int64_t out_shape[kMaxRank];
  if (!product_shape(run, a, b, rank, out_shape)) return false;
  const int nbatch = rank - 2;
  const int64_t m = a.dims[a.nd - 2], k = a.dims[a.nd - 1], n = b.dims[b.nd - 1];
  const int64_t item = dtype_itemsize(step.dtype);
  int64_t batches = 1;
  for (int d = 0; d < nbatch; ++d) batches *= out_shape[d];
  // Note [Batched products]: batches whose rows chain in memory (and one B for all) are one
  // product of batches * m rows; `strides` per batch dim, `row` the row stride.
  auto rows_chain = [&](auto&& stride_of, int64_t row) {
    int64_t want = m * row;
    for (int d = nbatch - 1; d >= 0; --d) {
      if (out_shape[d] != 1 && stride_of(d) != want) return false;
      want *= out_shape[d];
    }
    return true;
  };
  bool fold = batches > 1;
  for (int d = 0; fold && d < nbatch; ++d) fold = batch_stride(b, rank, d) == 0 || out_shape[d] == 1;
  fold = fold && rows_chain([&](int d) { return batch_stride(a, rank, d); }, a.strides[a.nd - 2]);
  Value out;
  if (!run.host.alloc(out, step.dtype, rank, out_shape, nullptr)) return false;
  run.set(step.output, out);
  const Value& c = run.vals[step.output];
  const KernelStep& ep = step.epilogue;
  Bound eb;
  const size_t nin = ep.inputs.size();
  if (ep.kernel && !bind_epilogue(run, ep, c, rank, eb)) return false;
  auto finish = [&] {
    if (!run.device_ok()) return false;
    if (ep.kernel) {
      Value alias = c;  // the epilogue's result is C's array, overwritten
      run.host.retain(alias);
      run.set(ep.outputs[0], alias);
    }
    return true;
  };
  if (batches == 0 || m == 0 || n == 0) return finish();  // C is empty

  // ---- few rows: framejit's kernel, epilogue inside --------------------------------------------
  bool small = (batches == 1 || fold) && m * batches <= cuda::kSmallGemmMaxRows && k < (int64_t{1} << 31) &&
               n < (int64_t{1} << 31);
  for (size_t j = 0; small && ep.kernel && j < nin; ++j)
    small = batches == 1 || rows_chain([&](int d) { return eb.strides[j][d]; }, eb.strides[j][rank - 2]);
  const Kernel* small_kernel = small && step.small ? step.small->get() : nullptr;
  if (small_kernel) {
    cuda::SmallGemmCall sg;
    sg.m = m * batches;
    sg.n = n;
    sg.k = k;
    sg.a = a.data;
    sg.a_rs = a.strides[a.nd - 2];
    sg.a_cs = a.strides[a.nd - 1];
    sg.b = b.data;
    sg.b_rs = b.strides[b.nd - 2];
    sg.b_cs = b.strides[b.nd - 1];
    sg.c = c.data;
    sg.ldc = n * item;
    sg.itemsize = static_cast<int>(item);
    if (ep.kernel) {
      sg.num_operands = static_cast<int>(nin);
      for (size_t j = 0; j < nin; ++j) {
        sg.ptr[j] = eb.ops[j].data;
        sg.row_stride[j] = eb.strides[j][rank - 2];
        sg.col_stride[j] = eb.strides[j][rank - 1];
      }
      sg.params = eb.params;
      sg.num_params = eb.nparams;
    }
    Status s = cuda::run_small_gemm(*small_kernel, sg);
    if (!s && run.device_error.empty()) run.device_error = s.message();
    return finish();
  }

  // ---- cuBLASLt, then the epilogue over C ------------------------------------------------------
  Value a_held, b_held;
  struct Release {
    Run& run;
    Value* vals[2];
    ~Release() {
      for (Value* v : vals)
        if (v->kind != Value::Kind::Empty) run.host.release(*v);
    }
  } release{run, {&a_held, &b_held}};
  if (!pack_device_operand(run, step, a, a_held) || !pack_device_operand(run, step, b, b_held)) return false;
  cuda::DeviceGemmCall g;
  g.device = step.device.index;
  g.dtype = step.dtype;
  g.m = m;
  g.n = n;
  g.k = k;
  g.a = {a.data, a.strides[a.nd - 2] / item, a.strides[a.nd - 1] / item, 0};
  g.b = {b.data, b.strides[b.nd - 2] / item, b.strides[b.nd - 1] / item, 0};
  g.c = c.data;
  g.ldc = n;
  g.c_batch_stride = m * n;
  // Rows of a transposed A do not chain; a packed A's do, as long as the taller A is still one
  // cuBLAS reads (a broadcast row does not chain into a matrix).
  fold = batches > 1 && (g.a.col_stride == 1 || k == 1);
  for (int d = 0; fold && d < nbatch; ++d) fold = batch_stride(b, rank, d) == 0 || out_shape[d] == 1;
  fold = fold && rows_chain([&](int d) { return batch_stride(a, rank, d); }, a.strides[a.nd - 2]) &&
         cuda::blas_layout(m * batches, k, g.a.row_stride, g.a.col_stride);
  Status s = Status::ok();
  if (fold || nbatch == 0) {
    g.m = m * batches;
    s = cuda::run_gemm(g);
  } else {
    // One strided batch over the innermost batch dim of more than one matrix whose strides are
    // not negative (C's never are) per call; the other batch dims are a loop.
    int inner = -1;
    for (int d = nbatch - 1; d >= 0 && inner < 0; --d)
      if (out_shape[d] > 1 && batch_stride(a, rank, d) >= 0 && batch_stride(b, rank, d) >= 0) inner = d;
    g.batches = inner >= 0 ? out_shape[inner] : 1;
    g.a.batch_stride = inner >= 0 ? batch_stride(a, rank, inner) / item : 0;
    g.b.batch_stride = inner >= 0 ? batch_stride(b, rank, inner) / item : 0;
    int64_t c_stride[kMaxRank];  // C's batch strides (elements): C is C-ordered
    int64_t step = m * n;
    for (int d = nbatch - 1; d >= 0; --d) {
      c_stride[d] = step;
      step *= out_shape[d];
    }
    if (inner >= 0) g.c_batch_stride = c_stride[inner];
    const int64_t outer = batches / g.batches;
    for (int64_t bi = 0; bi < outer && s; ++bi) {
      int64_t rem = bi, a_off = 0, b_off = 0, c_off = 0;
      for (int d = nbatch - 1; d >= 0; --d) {
        if (d == inner) continue;
        const int64_t idx = rem % out_shape[d];
        a_off += idx * batch_stride(a, rank, d);
        b_off += idx * batch_stride(b, rank, d);
        c_off += idx * c_stride[d];
        rem /= out_shape[d];
      }
      cuda::DeviceGemmCall gi = g;
      gi.a.data = a.data + a_off;
      gi.b.data = b.data + b_off;
      gi.c = c.data + c_off * item;
      s = cuda::run_gemm(gi);
    }
  }
  if (!s && run.device_error.empty()) run.device_error = s.message();
  if (!run.device_ok()) return false;
  if (ep.kernel) launch_kernel(run, *ep.kernel, eb);
  return finish();
}

// Note [Vector products]
// A(m, k) @ v(k) runs as A @ v(k, 1), and v(k) @ B(k, n) as B^T @ v(k, 1) (B's strides swapped):
// both are one-column products, which the GEMM runs as one pass over the matrix (Note
// [Matrix-vector products] in jit/x86/gemv.cpp); as NumPy calls (they were) they cost a call's
// overhead over OpenBLAS's gemv. The result, (m, 1) or (n, 1) C-ordered, is the vector NumPy
// returns, byte for byte, so it is allocated as that vector.
bool run_gemm_step(Run& run, const GemmStep& step) {
  if (step.device.type == DeviceType::CUDA) return run_device_gemm_step(run, step);
  ArrayRef a, b;
  LayoutScratch<1> a_scratch, b_scratch;
  if (!run.layout(step.a, a, a_scratch) || !run.layout(step.b, b, b_scratch)) return false;
  int64_t vm_dims[2], vm_strides[2], vv_dims[2], vv_strides[2];
  if (step.a_vector || step.b_vector) {
    const ArrayRef matrix = step.a_vector ? b : a, vector = step.a_vector ? a : b;
    if (matrix.nd != 2 || vector.nd != 1) {
      run.host.fail(RunError::MatmulCoreDim, 0);
      return false;
    }
    const int mr = step.a_vector ? 1 : 0;  // the matrix's dim that remains
    vm_dims[0] = matrix.dims[mr], vm_dims[1] = matrix.dims[1 - mr];
    vm_strides[0] = matrix.strides[mr], vm_strides[1] = matrix.strides[1 - mr];
    vv_dims[0] = vector.dims[0], vv_dims[1] = 1;
    vv_strides[0] = vector.strides[0], vv_strides[1] = vector.itemsize;
    a = ArrayRef{matrix.data, 2, vm_dims, vm_strides, matrix.itemsize};
    b = ArrayRef{vector.data, 2, vv_dims, vv_strides, vector.itemsize};
  }
  std::unique_ptr<char[]> a_copy, b_copy;
  StridedLayout a_copied, b_copied;
  if ((!is_aligned(a) && !aligned_copy(a, a_copied, a_copy)) || (!is_aligned(b) && !aligned_copy(b, b_copied, b_copy))) {
    run.host.fail(RunError::NoMemory, 0);
    return false;
  }
  int rank = 0;
  int64_t out_shape[kMaxRank], a_bstride[kMaxRank], b_bstride[kMaxRank];
  if (!product_shape(run, a, b, rank, out_shape)) return false;
  const int nbatch = rank - 2;
  const int64_t m = a.dims[a.nd - 2], k = a.dims[a.nd - 1], n = b.dims[b.nd - 1];
  for (int d = 0; d < nbatch; ++d) {
    a_bstride[d] = batch_stride(a, rank, d);
    b_bstride[d] = batch_stride(b, rank, d);
  }
  Value out;
  // A vector product's result drops C's size-1 column (Note [Vector products]).
  if (!run.host.alloc(out, step.dtype, step.a_vector || step.b_vector ? 1 : rank, out_shape, nullptr)) return false;
  run.set(step.output, out);
  const Value& c = run.vals[step.output];
  const int64_t item = dtype_itemsize(step.dtype);
  int64_t batches = 1;
  for (int d = 0; d < nbatch; ++d) batches *= out_shape[d];
  GemmCall g;
  g.dtype = step.dtype;
  g.m = m;
  g.n = n;
  g.k = k;
  g.a_row_stride = a.strides[a.nd - 2] / item;
  g.a_col_stride = a.strides[a.nd - 1] / item;
  g.b_row_stride = b.strides[b.nd - 2] / item;
  g.b_col_stride = b.strides[b.nd - 1] / item;
  g.ldc = n;
  // The epilogue's operands, broadcast to C's shape.
  EpilogueContext ectx;
  Bound eb;
  const KernelStep& ep = step.epilogue;
  if (ep.kernel) {
    if (!bind_epilogue(run, ep, c, rank, eb)) return false;
    std::copy_n(eb.params, eb.nparams, ectx.call.params);
    ectx.fn = reinterpret_cast<PointwiseFn>(ep.kernel->entry);
    ectx.nops = eb.nops;
    ectx.nin = ep.kernel->buffered_inputs;
    ectx.call.contiguous = 1;
    for (int j = 0; j < eb.nops; ++j) {
      ectx.itemsize[j] = eb.ops[j].itemsize;
      ectx.row_stride[j] = eb.strides[j][rank - 2];
      ectx.col_stride[j] = ectx.call.stride[j] = eb.strides[j][rank - 1];
      if (ectx.col_stride[j] != 0 && ectx.col_stride[j] != eb.ops[j].itemsize) ectx.call.contiguous = 0;
    }
    g.epilogue = run_epilogue;
    g.epilogue_ctx = &ectx;
    Value alias = c;  // the epilogue's result is C's array, overwritten
    run.host.retain(alias);
    run.set(ep.outputs[0], alias);
  }
  // Note [Batched products]: a batch of A against one B (x @ W with x of shape (b, t, k), what
  // every linear layer on a sequence is) is one GEMM of b * t rows whenever A's batches and rows
  // step through memory as one row sequence (a contiguous A), and so do the epilogue's operands:
  // one large product parallelizes where b small ones, run one after another, do not (measured
  // on a 16-core host: a GPT block's (4, 128, 256) @ (256, 1024) took 540 us as 4 GEMMs, 300 as 1).
  auto rows_fold = [&](const int64_t* batch_strides, int64_t row_stride) {
    int64_t want = m * row_stride;
    for (int d = nbatch - 1; d >= 0; --d) {
      if (out_shape[d] != 1 && batch_strides[d] != want) return false;
      want *= out_shape[d];
    }
    return true;
  };
  bool fold = nbatch > 0 && batches > 1;
  for (int d = 0; fold && d < nbatch; ++d) fold = b_bstride[d] == 0 || out_shape[d] == 1;
  fold = fold && rows_fold(a_bstride, a.strides[a.nd - 2]);
  for (int j = 0; fold && ep.kernel && j < eb.nops; ++j) fold = rows_fold(eb.strides[j], eb.strides[j][rank - 2]);
  if (fold) {
    g.m = m * batches;
    for (int d = 0; d < nbatch; ++d) a_bstride[d] = b_bstride[d] = 0;
    for (int j = 0; ep.kernel && j < eb.nops; ++j)
      for (int d = 0; d < nbatch; ++d) eb.strides[j][d] = 0;
    batches = 1;
  }
  const Value& cv = run.vals[step.output];
  // Batch bi's operands: offsets into A and B (any strides), the contiguous C and the epilogue's
  // operands. `gc` and `ec` are the caller's copies, so batches can run on different threads.
  auto run_batch = [&](int64_t bi, GemmCall& gc, EpilogueContext& ec) {
    int64_t rem = bi, a_off = 0, b_off = 0;
    for (int j = 0; j < eb.nops; ++j) ec.base[j] = eb.ops[j].data;
    for (int d = nbatch - 1; d >= 0; --d) {
      int64_t idx = rem % out_shape[d];
      a_off += idx * a_bstride[d];
      b_off += idx * b_bstride[d];
      for (int j = 0; j < eb.nops; ++j) ec.base[j] += idx * eb.strides[j][d];
      rem /= out_shape[d];
    }
    gc.a = a.data + a_off;
    gc.b = b.data + b_off;
    gc.c = cv.data + bi * m * n * item;
    if (ep.kernel) gc.epilogue_ctx = &ec;
    step.gemm(gc);
  };
  // Note [Batched products]: one GEMM splits its own C among the threads, but a small one cannot
  // keep them busy (attention's per-head 128x64 @ 64x128 got two or three tasks, and 16 heads ran
  // one after another). Then the batches are the parallel dimension: each runs whole on one thread
  // (the GEMM inside a parallel_for runs as one task), in the same summation order either way.
  const bool by_batch = batches > 1 && (batches >= num_threads() || m * n * k <= kSmallGemmMacs);
  auto body = [&] {
    if (!by_batch) {
      for (int64_t bi = 0; bi < batches; ++bi) run_batch(bi, g, ectx);
      return;
    }
    parallel_for(batches, 1, [&](int64_t begin, int64_t end) {
      GemmCall gc = g;
      EpilogueContext ec = ectx;
      for (int64_t bi = begin; bi < end; ++bi) run_batch(bi, gc, ec);
    });
  };
  // The GEMM parallelizes itself; detach when the product is large enough to matter.
  maybe_detached(run, batches * g.m * n * k >= (int64_t{1} << 18) ? kDetachElements : 0, body);
  return true;
}

// x.shape[d] at run time: a size the program's Python logic or a later view reads.
bool run_size_step(Run& run, const Step& s) {
  ArrayRef r;
  LayoutScratch<1> scratch;
  if (!run.layout(s.node, r, scratch)) return false;
  Value size;
  size.kind = Value::Kind::Number;
  size.is_int = true;
  size.number.i = r.dims[s.dim];
  run.set(s.output, size);
  return true;
}

// The bytes [lo, hi) a layout touches (lo == hi when it has no elements).
void extent(const char* data, int nd, const int64_t* dims, const int64_t* strides, int64_t itemsize, const char*& lo,
            const char*& hi) {
  int64_t low = 0, high = 0;
  for (int d = 0; d < nd; ++d) {
    if (dims[d] == 0) {
      lo = hi = data;
      return;
    }
    (strides[d] < 0 ? low : high) += strides[d] * (dims[d] - 1);
  }
  lo = data + low;
  hi = data + high + itemsize;
}

bool overlap(const ArrayRef& a, const StridedLayout& b, int64_t b_itemsize) {
  const char *alo, *ahi, *blo, *bhi;
  extent(a.data, a.nd, a.dims, a.strides, a.itemsize, alo, ahi);
  extent(b.data, b.nd, b.dims, b.strides, b_itemsize, blo, bhi);
  return alo < ahi && blo < bhi && alo < bhi && blo < ahi;
}

// Note [Stores through a view] (the run-time half of Note [Lowered writes] in jit/schedule):
// the store kernel iterates over the region's shape, reading its inputs broadcast to it (leading
// size-1 dims beyond the region's rank dropped, as NumPy's __setitem__ does) and writing the
// region's strided elements. Written into the base's own memory, an input that shares memory with
// the base is safe only when it reads exactly the element being written (x[i, :] *= 2: every
// element is loaded before it is stored), or when it reads no byte of the region (another row,
// or another column between the written elements); any other overlap (x[1:] = x[:-1]) writes
// into a copy, as NumPy's own overlap handling would, so no element is read after it was
// overwritten.
bool bind_store(Run& run, const StoreStep& st, const ArrayRef* in, const StridedLayout& region, Bound& b) {
  const KernelStep& k = st.kernel;
  const size_t nin = k.inputs.size();
  b.rank = region.nd;
  std::copy_n(region.dims, region.nd, b.shape);
  for (int d = 0; d < b.rank; ++d) b.total *= b.shape[d];
  for (size_t j = 0; j < nin; ++j) {
    const ArrayRef& a = in[j];
    for (int d = 0; d < a.nd; ++d) {
      const int rd = d - (a.nd - b.rank);
      if (a.dims[d] != 1 && (rd < 0 || a.dims[d] != b.shape[rd])) {
        run.host.fail(RunError::Broadcast, 0);
        return false;
      }
    }
    int64_t* strides = b.strides[j];
    for (int d = 0; d < b.rank; ++d) {
      const int src = d - (b.rank - a.nd);
      strides[d] = src < 0 || a.dims[src] == 1 ? 0 : a.strides[src];
    }
    b.ops[j] = {a.data, strides, a.itemsize};
  }
  std::copy_n(region.strides, region.nd, b.strides[nin]);
  b.ops[nin] = {region.data, b.strides[nin], static_cast<int>(dtype_itemsize(k.output_dtypes[0]))};
  b.nops = static_cast<int>(nin) + 1;
  b.nparams = static_cast<int>(k.params.size());
  return run.read_params(k.params, k.param_dtypes, b.params);
}

// Whether input `a`, broadcast over the region as bound, reads memory of `target` other than the
// element the kernel writes at the same index.
bool unsafe_overlap(const ArrayRef& a, const int64_t* a_strides, const StridedLayout& target, int64_t itemsize,
                    const StridedLayout& region) {
  if (!overlap(a, target, itemsize)) return false;
  // Only the region is written: an input whose bytes lie outside its span reads nothing written
  // (y[i, :] = f(y[i - 1, :])).
  if (!overlap(a, region, itemsize)) return false;
  if (a.data != region.data && a.itemsize == itemsize) {
    // A region iterated along one dim, read at the same stride from another start (y[:, j] =
    // f(y[:, j - 1]): element i is read `delta` bytes from the element written at i. The two
    // never share a byte when delta falls between written elements, with room for one on both
    // sides.
    int dim = -1, moving = 0;
    for (int d = 0; d < region.nd; ++d)
      if (region.dims[d] != 1) dim = d, ++moving;
    if (moving == 1 && a_strides[dim] == region.strides[dim] && region.strides[dim] != 0) {
      const int64_t s = region.strides[dim] < 0 ? -region.strides[dim] : region.strides[dim];
      const int64_t delta = reinterpret_cast<intptr_t>(a.data) - reinterpret_cast<intptr_t>(region.data);
      const int64_t r = ((delta % s) + s) % s;
      if (r >= itemsize && s - r >= itemsize) return false;
    }
  }
  if (a.data != region.data || a.itemsize != itemsize) return true;
  for (int d = 0; d < region.nd; ++d)
    if (region.dims[d] != 1 && a_strides[d] != region.strides[d]) return true;
  return false;
}

StridedLayout layout_of(const Value& v) {
  StridedLayout l;
  l.data = v.data;
  l.nd = v.nd;
  std::copy_n(v.dims, v.nd, l.dims);
  std::copy_n(v.strides, v.nd, l.strides);
  return l;
}

// Note [Stores on a device]
// A store on a CUDA device is the same step as on the host: the store kernel is a pointwise
// kernel whose output operand is the region's strided view (the pointwise ABI takes any output
// strides), and the overlap rules of Note [Stores through a view] compare device addresses as
// they compare host ones. Only the copy of the base differs: the step's `copy` kernel writes it in
// C order on the run's stream, before the store kernel on the same stream. The library's own
// calls a store falls back to (an index out of range, copy_into with an overlapping value) are
// the array's own copy and __setitem__, which a CuPy array or a torch CUDA tensor runs on its
// device and the same stream.
bool run_store_step(Run& run, const Step& s) {
  const StoreStep& st = s.store();
  const KernelStep& k = st.kernel;
  const int64_t itemsize = dtype_itemsize(k.output_dtypes[0]);
  ArrayRef base;
  LayoutScratch<1> base_scratch;
  if (!run.layout(st.base, base, base_scratch)) return false;
  ArrayRef in[kMaxKernelOperands];
  StepScratch scratch;
  for (size_t j = 0; j < k.inputs.size(); ++j)
    if (!run.layout(k.inputs[j], in[j], scratch)) return false;
  auto value = [&](int id, int64_t& x) { return run.read_int(id, x); };
  const Value& bv = run.vals[st.base];
  bool own = bv.is_array() && (st.into_base || st.memory == StoreStep::Memory::Always ||
                               (st.memory == StoreStep::Memory::IfPrivate && run.host.is_private(bv)));
  StridedLayout region;
  Bound b;
  if (own) {
    const StridedLayout target = layout_of(bv);
    // An index out of range: the library's own call raises IndexError (nothing was written).
    if (!apply_view(st.region, target, itemsize, value, region)) return run.host.run_extern(s.node, run.vals);
    if (!bind_store(run, st, in, region, b)) return false;
    if (st.into_base && k.inputs.size() == 1 && in[0].data == region.data && in[0].nd == region.nd &&
        std::equal(region.dims, region.dims + region.nd, in[0].dims) &&
        std::equal(region.strides, region.strides + region.nd, in[0].strides)) {
      // The final value already is the input's memory: its writes were made in place.
      Value out = bv;
      run.host.retain(out);
      run.set(st.output, out);
      return true;
    }
    for (size_t j = 0; j < k.inputs.size() && own; ++j)
      own = !unsafe_overlap(in[j], b.strides[j], target, itemsize, region);
    // copy_into cannot write elsewhere: an overlapping value goes through the library's copy.
    if (!own && st.into_base) return run.host.run_extern(s.node, run.vals);
    if (own) {
      Value out = bv;
      run.host.retain(out);
      run.set(st.output, out);
    }
  }
  if (!own) {
    Value fresh;
    if (!run.host.alloc(fresh, k.output_dtypes[0], base.nd, base.dims, nullptr)) return false;
    StridedLayout src;
    src.data = base.data;
    src.nd = base.nd;
    std::copy_n(base.dims, base.nd, src.dims);
    std::copy_n(base.strides, base.nd, src.strides);
    if (k.kernel->device.type == DeviceType::CUDA) {
      // Note [Stores on a device]: the copy is a kernel on the run's stream, ordered before the
      // store kernel that follows it.
      if (!copy_on_device(run, st.copy.get(), base, fresh)) {
        run.host.release(fresh);
        return false;
      }
    } else {
      maybe_detached(run, 0, [&] { copy_to_c_order(src, itemsize, fresh.data); });
    }
    run.set(st.output, fresh);
    const StridedLayout target = layout_of(run.vals[st.output]);
    if (!apply_view(st.region, target, itemsize, value, region)) return run.host.run_extern(s.node, run.vals);
    b.total = 1;
    if (!bind_store(run, st, in, region, b)) return false;
  }
  maybe_detached(run, b.total, [&] { launch_kernel(run, *k.kernel, b); });
  return run.device_ok();
}

// Note [Running element loops]
// Arrays go in as they lie (any strides); a written one is first given its memory: its own when
// the schedule allows (Memory::Always, or IfPrivate and private), else a C-ordered copy of it,
// which then becomes the written array's new value. Numbers go in as int64 or double bits. What
// the loop hands back is set only when it ran to its end; a loop that stops early (IndexError...)
// has written what it wrote before stopping, as CPython's loop would have into the same memory.
// Per-call storage of a loop step: inline for the usual handful of operands (a heap allocation
// per call was a tenth of a short loop's time), on the heap past that.
template <typename T, size_t N>
class SmallBuffer {
public:
  explicit SmallBuffer(size_t n) : data_(n <= N ? inline_ : (heap_.resize(n), heap_.data())) {
    std::fill_n(data_, n, T{});
  }
  T& operator[](size_t i) { return data_[i]; }
  T* data() { return data_; }

private:
  T inline_[N];
  std::vector<T> heap_;
  T* data_;
};

bool run_loop_step(Run& run, const LoopStep& L) {
  const size_t na = L.arrays.size();
  SmallBuffer<ArrayRef, 8> refs(na);
  SmallBuffer<char*, 8> data(na);
  SmallBuffer<const int64_t*, 8> dims(na), strides(na);
  LayoutScratch<kMaxKernelOperands> scratch;
  std::vector<std::unique_ptr<LayoutScratch<1>>> more;  // past kMaxKernelOperands arrays
  FixedVector<Value, 8> held_inline;
  std::vector<Value> held;
  struct Release {
    Run& run;
    FixedVector<Value, 8>& a;
    std::vector<Value>& b;
    ~Release() {
      for (Value& v : a) run.host.release(v);
      for (Value& v : b) run.host.release(v);
    }
  } release{run, held_inline, held};
  size_t out = 0;
  for (size_t k = 0; k < na; ++k) {
    bool ok;
    if (k < static_cast<size_t>(kMaxKernelOperands)) {
      ok = run.layout(L.arrays[k], refs[k], scratch);
    } else {
      more.push_back(std::make_unique<LayoutScratch<1>>());
      ok = run.layout(L.arrays[k], refs[k], *more.back());
    }
    if (!ok) return false;
    if (L.written[k]) {
      const Value& bv = run.vals[L.arrays[k]];
      const bool own = bv.is_array() && (L.memory[k] == StoreStep::Memory::Always ||
                                         (L.memory[k] == StoreStep::Memory::IfPrivate && run.host.is_private(bv)));
      Value result;
      if (own) {
        result = bv;
        run.host.retain(result);
      } else {
        if (!run.host.alloc(result, L.dtypes[k], refs[k].nd, refs[k].dims, nullptr))
          return false;
        StridedLayout src;
        src.data = refs[k].data;
        src.nd = refs[k].nd;
        std::copy_n(refs[k].dims, refs[k].nd, src.dims);
        std::copy_n(refs[k].strides, refs[k].nd, src.strides);
        copy_to_c_order(src, refs[k].itemsize, result.data);
      }
      const int id = L.outputs[out++];
      if (id >= 0) {
        run.set(id, result);
        const Value& r = run.vals[id];
        refs[k] = {r.data, r.nd, r.dims, r.strides, refs[k].itemsize};
      } else {
        // Unused afterwards: the loop still writes it (and may raise), into memory held until then.
        refs[k] = {result.data, result.nd, result.dims, result.strides, refs[k].itemsize};
        if (held_inline.size() < 8) held_inline.push_back(result);
        else held.push_back(result);
      }
    }
    data[k] = refs[k].data;
    dims[k] = refs[k].dims;
    strides[k] = refs[k].strides;
  }
  const size_t np = L.params.size(), nr = L.result_is_int.size();
  SmallBuffer<int64_t, 16> scalars(np + nr);
  for (size_t k = 0; k < np; ++k) {
    ParamValue v = L.param_consts[k];
    const Value& x = L.params[k] >= 0 ? run.vals[L.params[k]] : Value{};
    if (x.kind == Value::Kind::Number && (x.is_int || !L.param_is_int[k])) {
      if (L.param_is_int[k]) v.i = x.number.i;
      else v.f = x.is_int ? static_cast<double>(x.number.i) : x.number.f;
    } else if (L.params[k] >= 0) {
      const DType want = L.param_is_int[k] ? DType::Int64 : DType::Float64;
      if (!run.read_params({L.params[k]}, {want}, &v)) return false;
    }
    if (L.param_is_int[k]) scalars[k] = v.i;
    else std::memcpy(&scalars[k], &v.f, sizeof(double));
  }
  ElementLoopCall call{data.data(), dims.data(), strides.data(), scalars.data(), {0, 0, 0}};
  int32_t err = 0;
  // How long a loop runs is not known; how much data it is given says whether letting other
  // threads run is worth a release of the interpreter lock (a short loop's whole time otherwise).
  int64_t elements = 0;
  for (size_t k = 0; k < na; ++k) {
    int64_t n = 1;
    for (int d = 0; d < refs[k].nd; ++d) n *= refs[k].dims[d];
    elements += n;
  }
  maybe_detached(run, elements, [&] {
    err = L.kernel ? reinterpret_cast<ElementLoopFn>(L.kernel->entry)(&call) : L.interpret(&call);
  });
  if (err != static_cast<int32_t>(LoopError::None)) {
    run.host.fail_loop(static_cast<LoopError>(err), call.detail);
    return false;
  }
  for (size_t k = 0; k < nr; ++k) {
    const int id = L.outputs[out + k];
    if (id < 0) continue;
    int64_t bits = scalars[np + k];
    Value v;
    bool is_int = L.result_is_int[k];
    bool library_scalar = false;
    if (const int tag = L.result_tag[k]; tag >= 0) {
      // Note [Kind tags] in frontend/trace/element_loops.cpp: the object CPython would have.
      const auto t = static_cast<LoopStep::Tag>(scalars[np + tag]);
      const bool want_int = t == LoopStep::Tag::PyInt || t == LoopStep::Tag::Int64;
      if (want_int && !is_int) {  // an int held as a float (exactly)
        double d;
        std::memcpy(&d, &bits, sizeof d);
        bits = static_cast<int64_t>(d);
      } else if (!want_int && is_int) {
        const double d = static_cast<double>(bits);
        std::memcpy(&bits, &d, sizeof d);
      }
      is_int = want_int;
      library_scalar = t == LoopStep::Tag::Int64 || t == LoopStep::Tag::Float64;
    }
    if (L.result_array[k] || library_scalar) {
      const DType dt = library_scalar ? (is_int ? DType::Int64 : DType::Float64) : L.result_dtypes[k];
      if (L.result_scalar[k] || library_scalar) {
        const bool flag = bits != 0;
        if (!run.host.make_scalar(v, dt, dt == DType::Bool ? static_cast<const void*>(&flag) : &bits)) return false;
        run.set(id, v);
        continue;
      }
      if (!run.host.alloc(v, dt, 0, nullptr, nullptr)) return false;
      if (dt == DType::Bool) *reinterpret_cast<bool*>(v.data) = bits != 0;
      else std::memcpy(v.data, &bits, sizeof bits);
      if ((L.result_scalar[k] || library_scalar) && !run.host.to_scalar(v)) {
        run.host.release(v);
        return false;
      }
    } else {
      v.kind = Value::Kind::Number;
      v.is_int = is_int;
      if (v.is_int) v.number.i = bits;
      else std::memcpy(&v.number.f, &bits, sizeof(double));
    }
    run.set(id, v);
  }
  for (auto [alias, of] : L.aliases) {
    Value v = run.vals[of];
    run.host.retain(v);
    run.set(alias, v);
  }
  return true;
}

bool run_step(Run& run, const Step& s) {
  switch (s.kind) {
    case Step::Kind::Loop: return run_loop_step(run, s.loop());
    case Step::Kind::Kernel: return run_kernel_step(run, s.kernel());
    case Step::Kind::Reduction: return run_reduction_step(run, s.reduction());
    case Step::Kind::Chain: return run_chain_step(run, s.chain());
    case Step::Kind::Gemm: return run_gemm_step(run, s.gemm());
    case Step::Kind::Size: return run_size_step(run, s);
    case Step::Kind::Extern: return run.host.run_extern(s.node, run.vals);
    case Step::Kind::Store: return run_store_step(run, s);
  }
  return false;
}

}  // namespace

namespace {

// FRAMEJIT_LOGS=profile: one line per run, each step's index, kind, graph node (extern steps and
// stores), result shape and time,
// so a slow program shows which of its steps is slow (the benchmarks time whole calls).
void profile_step(std::string& line, int index, const Step& s, const Value* values, double us) {
  static const char* const kKinds[] = {"kernel", "reduce", "gemm", "chain", "extern", "size", "store", "loop"};
  char buf[96];
  std::snprintf(buf, sizeof buf, " %d:%s", index, kKinds[static_cast<int>(s.kind)]);
  line += buf;
  if (s.node >= 0) line += "#" + std::to_string(s.node);
  const int out = s.kind == Step::Kind::Gemm ? s.gemm().output : s.output;
  if (out >= 0 && values[out].is_array()) {
    line += "[";
    for (int d = 0; d < values[out].nd; ++d) line += (d ? "," : "") + std::to_string(values[out].dims[d]);
    line += "]";
  }
  std::snprintf(buf, sizeof buf, "=%.1f", us);
  line += buf;
}

}  // namespace

bool run_program(const Program& program, Value* values, RunHost& host) noexcept {
  Run run{program, values, host, {}};
  const bool profile = log_enabled(LogTopic::Profile);
  std::string line;
  // NB: no clock read unless profiling: a third of a microsecond-long call's framework time went to
  // clock_gettime in a VM.
  using Clock = std::chrono::steady_clock;
  const Clock::time_point start = profile ? Clock::now() : Clock::time_point{};
  auto t = start;
  for (size_t i = 0; i < program.steps.size(); ++i) {
    const Step& s = program.steps[i];
    if (!run_step(run, s)) return false;
    if (profile) {
      const auto now = Clock::now();
      profile_step(line, static_cast<int>(i), s, values, std::chrono::duration<double, std::micro>(now - t).count());
      t = now;
    }
    for (int v : s.release)
      if (values[v].kind != Value::Kind::Empty) {
        host.release(values[v]);
        values[v] = Value{};
      }
  }
  if (profile) {
    char total[48];
    std::snprintf(total, sizeof total, "run %.1f us:", std::chrono::duration<double, std::micro>(t - start).count());
    log_write(LogTopic::Profile, total + line);
  }
  return true;
}

}  // namespace framejit::rt
