// program.h — rt::Program: a compiled graph as steps over value ids (kernels, reductions, GEMMs,
// chains, sizes and extern steps), and run_program, which executes it with no Python in sight.
#pragma once

#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "runtime/dtype.h"
#include "runtime/element_loop_call.h"
#include "runtime/executor.h"
#include "runtime/kernel_cache.h"
#include "runtime/views.h"

namespace framejit::rt {

// Note [Programs and their host]
// jit/schedule turns a graph plus its compiled kernels into a Program: every graph value (and every
// temporary the schedule adds, var's mean) is a value id, and steps read and write value ids. The
// runtime runs the steps; what it cannot do itself it asks of a RunHost, implemented once per
// embedding: frontend/program for Python (arrays are NumPy arrays or framejit.Tensors, extern
// steps call the library function the user called), or a plain C++ host (tests/cpp). The host
//   - allocates arrays (so outputs are the library's own objects, owned by it),
//   - runs extern steps and makes folded views whose remap does not apply,
//   - says whether an array is private to the run (may be overwritten in place),
//   - releases the run's references, turns full reductions into the library's scalars, reports
//     errors, and lets go of its interpreter lock around long launches.
// The runtime never calls into Python and never throws: a step that fails returns false after the
// host reported the error; run_program then stops and the caller releases what the run holds.

/// One value of a run. Arrays carry their layout (dims and strides borrowed from whatever keeps the
/// memory alive: the host object in `handle`); numbers carry their value.
struct Value {
  enum class Kind : uint8_t { Empty, Array, Number, Object };
  Kind kind = Kind::Empty;
  bool is_int = false;  // Number: an integer (else a float)
  DType dtype = DType::Float32;  // Array
  int nd = 0;
  char* data = nullptr;
  const int64_t* dims = nullptr;
  const int64_t* strides = nullptr;
  ParamValue number{};
  /// The host's object for this value (a reference the run owns, released through the host), or
  /// null for a number the runtime computed (a size) until the host boxes it.
  void* handle = nullptr;

  bool is_array() const { return kind == Kind::Array; }
};

/// What a failed step reports (the host turns it into the library's exception and message).
enum class RunError : uint8_t {
  Broadcast,          // operands could not be broadcast together
  RankMismatch,       // a reduction's operands do not have the traced rank
  ZeroSizeReduction,  // detail: the ReduceKind of a reduction without identity
  MatmulCoreDim,      // inner dimensions of a product differ
  MatmulBatch,        // batch dimensions of a product could not be broadcast
  EpilogueShape,      // a GEMM epilogue's operands do not match the product
  NotAnArray,         // detail: the value id read as an array that is not one
  NotComputed,        // detail: the value id read before it was computed
  ParamOverflow,      // an integer parameter does not fit 64 bits
  ParamType,          // a parameter is not a number
  NoMemory,           // scratch memory could not be allocated
  Device,             // a device call failed (RunHost::fail_device carries the driver's words)
  Loop,               // detail: the LoopError a compiled loop stopped with (RunHost::fail_loop)
};

enum class ReduceKind : uint8_t { Sum, Prod, Max, Min, ArgMax, ArgMin };

class RunHost {
public:
  virtual ~RunHost() = default;
  /// A new uninitialized array of `shape` into `out` (kind Array, handle set). Its memory runs
  /// through the axes in `outer_first` order (outermost first), or C order when null. False when
  /// allocation failed (the host reported it and left `out` as it was).
  virtual bool alloc(Value& out, DType dtype, int rank, const int64_t* shape, const int* outer_first) = 0;
  /// Whether array value `v` may be overwritten: nothing outside the run can see its memory
  /// (Note [Output buffer reuse] in runtime/program.cpp), and it is C-contiguous and aligned.
  virtual bool is_private(const Value& v) = 0;
  /// Whether the library's reductions allocate in the input's memory order over the axes they
  /// keep, as NumPy does (Note [Output memory order] in runtime/program.cpp), or in C order.
  virtual bool reductions_in_input_order() const { return false; }
  /// Another reference to `v`'s handle (the run stores the value under a second id).
  virtual void retain(const Value& v) = 0;
  /// Drops the run's reference to `v`'s handle.
  virtual void release(Value& v) = 0;
  /// Computes graph node `node` the library's way into values[node]: an extern step, or a folded
  /// view whose remap does not apply. False with the error reported.
  virtual bool run_extern(int node, Value* values) = 0;
  /// Replaces the 0-d array `v` by the library's scalar (NumPy's float32...). False on failure.
  virtual bool to_scalar(Value& v) = 0;
  /// The library's scalar of `dtype` holding the element at `bytes` into `out` (a compiled loop's
  /// NumPy-scalar result); through a 0-d array unless the host makes scalars directly.
  virtual bool make_scalar(Value& out, DType dtype, const void* bytes) {
    if (!alloc(out, dtype, 0, nullptr, nullptr)) return false;
    std::memcpy(out.data, bytes, dtype_itemsize(dtype));
    if (to_scalar(out)) return true;
    release(out);
    return false;
  }
  /// Reads an Object value as a number (a NumPy scalar where a Python float was traced...).
  virtual bool read_number(const Value& v, bool want_int, ParamValue& out) = 0;
  virtual void fail(RunError error, int64_t detail) = 0;
  /// A device call failed: `message` names the call and the driver's error.
  virtual void fail_device(const std::string& message) {
    (void)message;
    fail(RunError::Device, 0);
  }
  /// A compiled loop stopped with `error` (Note [Element loops] in frontend/trace/element_loops.cpp);
  /// `detail` as rt::ElementLoopCall::detail says.
  virtual void fail_loop(LoopError error, const int64_t* detail) {
    (void)detail;
    fail(RunError::Loop, static_cast<int64_t>(error));
  }
  /// Lets other threads run the host's interpreter during a long launch; returns a token for
  /// reattach. Hosts without a lock return null.
  virtual void* detach() { return nullptr; }
  virtual void reattach(void*) {}
};

/// A fused pointwise kernel: inputs broadcast to one iteration space, outputs allocated.
struct KernelStep {
  KernelPtr kernel;
  std::vector<int> inputs;   // array values read
  std::vector<int> params;   // number values read as kernel parameters
  std::vector<DType> param_dtypes;  // Float64 or Int64
  std::vector<int> outputs;
  std::vector<std::pair<int, int>> aliases;  // (value id, output id it equals): more getitems of one result
  std::vector<DType> output_dtypes;
  /// Inputs whose last use is this kernel: an output may be written into one of them in place
  /// when nothing else can see it (Note [Output buffer reuse]).
  std::vector<int> dying;
  /// 0-d outputs the library hands back as its scalars (RunHost::to_scalar): NumPy scalar
  /// arithmetic, Note [Scalar steps] in jit/schedule/program.cpp.
  std::vector<int> scalar_outputs;
};

/// A reduction with its fused prologue: the prologue's inputs in, one new array out.
struct ReductionStep {
  KernelPtr row;     // the row-form kernel
  KernelPtr column;  // the column-form kernel (null for argmax/argmin)
  std::vector<int> inputs;
  std::vector<int> params;
  std::vector<DType> param_dtypes;
  int output = -1;
  DType value_dtype = DType::Float32;   // the reduced values'
  DType output_dtype = DType::Float32;  // int64 for argmax/argmin
  std::vector<bool> reduced;  // per dim of the iteration space
  bool keepdims = false;
  bool scalar_result = false;  // the library hands back a scalar (RunHost::to_scalar)
  /// A sum or product (no mean): reducing nothing gives 0 or 1, as in NumPy; other reductions of
  /// nothing raise ZeroSizeReduction (lowering keeps them from running on nothing).
  bool empty_is_identity = false;
  ReduceKind kind = ReduceKind::Sum;
  int64_t ddof = 0;
  /// The reduced operand, stored as an array of the iteration shape (or -1). Only for reductions
  /// of the last axis alone, which then run row by row (the form that stores them).
  int value_output = -1;

  bool arg() const { return kind == ReduceKind::ArgMax || kind == ReduceKind::ArgMin; }
};

/// A kernel made by `make` on its first use (once, thread-safe) and kept: code a step needs only
/// for some layouts or sizes, so graphs that never meet them never compile it.
class LazyKernel {
public:
  explicit LazyKernel(std::function<KernelPtr()> make) : make_(std::move(make)) {}
  /// The kernel, or null when it could not be made (not tried again).
  const Kernel* get() const {
    std::call_once(once_, [this] { kernel_ = make_(); });
    return kernel_.get();
  }

private:
  std::function<KernelPtr()> make_;
  mutable std::once_flag once_;
  mutable KernelPtr kernel_;
};

/// C = A @ B through the backend's GEMM (batch dims of A and B broadcast against each other).
struct GemmStep {
  int a = -1, b = -1, output = -1;
  bool a_vector = false, b_vector = false;  // Note [Vector products] (host only)
  DType dtype = DType::Float32;
  GemmFn gemm = nullptr;  // host products
  /// Where the product runs. On a CUDA device: framejit's own kernel with the epilogue inside
  /// (`small`) for products of few rows (Note [Small device products] in runtime/cuda/gemm.h),
  /// else cuBLASLt's, whose operands without a unit stride the `pack` kernel copies into C order
  /// first (one input, one output of `dtype`).
  Device device;
  std::shared_ptr<const LazyKernel> small, pack;
  /// A pointwise kernel run on each finished block of C (on a device: over all of C, after the
  /// product), in place: its inputs include `output`,
  /// and its one result, C's array itself, becomes the value `epilogue.outputs[0]`. None when
  /// epilogue.kernel is null.
  KernelStep epilogue;
};

/// Consecutive kernel and reduction steps run as one: row block by row block when they share
/// their leading dims and the data is large (run_row_blocked), part by part otherwise. Softmax
/// and layernorm become one pass over memory plus re-reads from cache.
struct ChainStep {
  struct Part {
    bool reduction = false;
    KernelStep kernel;  // !reduction
    ReductionStep red;  // reduction
  };
  std::vector<Part> parts;  // at most kMaxChainParts
  /// A device backend's one kernel for the whole chain (jit's RowChainIR), or null. Used when the
  /// bound layout fits it (rt::cuda::run_row_chain), else the parts run one by one.
  KernelPtr fused;
  /// With `fused`: per part, per input, the earlier reduction part whose result the kernel takes
  /// for it (or -1), and the row cache it reads (or -1).
  std::vector<std::vector<int>> forwarded, cached;
};
constexpr int kMaxChainParts = kMaxRowLaunches;

/// A write (jit's index_put and copy_into, Note [Lowered writes] in jit/schedule/program.cpp): the
/// kernel's one output is stored through `region` (an Index view of the written array) into the
/// base's own memory or into a C-ordered copy of it, and the written array becomes `output`.
struct StoreStep {
  enum class Memory : uint8_t {
    Copy,       // a copy of the base, always (the base is read later)
    IfPrivate,  // the base's memory when RunHost::is_private says nothing else can see it
    Always,     // the base's memory: the schedule proved no one reads its old contents
  };
  int base = -1;
  int output = -1;
  ViewOp region;
  Memory memory = Memory::Copy;
  /// copy_into: the base is a graph input whose memory takes the value; nothing is written when
  /// the value already is that memory (a chain of writes made in place).
  bool into_base = false;
  KernelStep kernel;  // inputs and params; outputs {output}, iterating over the region's shape
  /// On a device: the kernel that copies the base into C order when the write cannot go into the
  /// base's own memory (one input, one output of the base's dtype); on the host, copy_to_c_order.
  std::shared_ptr<const LazyKernel> copy;
};

/// A compiled Python loop over array elements (jit::ElementLoop): its arrays and numbers in, the
/// new values of the arrays it writes and the numbers it hands back out. A written array is
/// written where it lies or in a C-ordered copy of it, as a store's base is (StoreStep::Memory).
struct LoopStep {
  KernelPtr kernel;  // an rt::ElementLoopFn; null: `interpret` runs it
  std::function<int32_t(ElementLoopCall*)> interpret;
  std::vector<int> arrays;
  std::vector<DType> dtypes;                   // per array
  std::vector<bool> written;                   // per array
  std::vector<StoreStep::Memory> memory;       // per array (written ones)
  std::vector<int> params;               // value ids, or -1 for a constant
  std::vector<ParamValue> param_consts;  // the constants
  std::vector<bool> param_is_int;
  /// Per written array, then per number handed back: the value id it becomes, or -1 when unused.
  std::vector<int> outputs;
  std::vector<std::pair<int, int>> aliases;  // (value id, output id it equals): more getitems of one result
  std::vector<bool> result_is_int;   // per number handed back
  std::vector<DType> result_dtypes;  // per number: Int64, Float64 or Bool
  std::vector<bool> result_array;    // per number: a 0-d array (a NumPy scalar), not a Number
  std::vector<bool> result_scalar;   // per number: a 0-d array handed to the library as its scalar
  /// Per number: the number that says which object it is (a Tag), or -1 when its kind is fixed.
  std::vector<int> result_tag;
  enum class Tag : int64_t { PyInt = 0, PyFloat = 1, Int64 = 2, Float64 = 3 };  // the library's: 2, 3
};

struct Step {
  enum class Kind : uint8_t { Kernel, Reduction, Gemm, Chain, Extern, Size, Store, Loop } kind = Kind::Extern;
  int node = -1;  // Extern, Store: the graph node the host computes (a Store whose region does not
                  // apply runs it the library's way, which raises as eager code does); Size: the
                  // value whose size is read
  int dim = 0;    // Size
  int output = -1;  // Extern, Size
  std::vector<int> release;  // values whose last use is this step

  // What a kernel, reduction, GEMM, chain or store step runs; made on first use.
  KernelStep& kernel() { return detail().kernel; }
  ReductionStep& reduction() { return detail().reduction; }
  GemmStep& gemm() { return detail().gemm; }
  ChainStep& chain() { return detail().chain; }
  StoreStep& store() { return detail().store; }
  LoopStep& loop() { return detail().loop; }
  const KernelStep& kernel() const { return detail_->kernel; }
  const ReductionStep& reduction() const { return detail_->reduction; }
  const GemmStep& gemm() const { return detail_->gemm; }
  const ChainStep& chain() const { return detail_->chain; }
  const StoreStep& store() const { return detail_->store; }
  const LoopStep& loop() const { return detail_->loop; }

  Step() = default;
  Step(Step&&) = default;
  Step& operator=(Step&&) = default;
  Step(const Step& o) : kind(o.kind), node(o.node), dim(o.dim), output(o.output), release(o.release) {
    if (o.detail_) detail_ = std::make_unique<Detail>(*o.detail_);
  }
  Step& operator=(const Step& o) { return *this = Step(o); }

private:
  // Out of line: an unrolled loop's program is thousands of extern steps, and a step holding every
  // kind's fields inline was most of a kilobyte, so walking the steps missed the cache at each.
  struct Detail {
    KernelStep kernel;
    ReductionStep reduction;
    GemmStep gemm;
    ChainStep chain;
    StoreStep store;
    LoopStep loop;
  };
  Detail& detail() {
    if (!detail_) detail_ = std::make_unique<Detail>();
    return *detail_;
  }
  std::unique_ptr<Detail> detail_;
};

struct Program {
  int num_values = 0;
  std::vector<int> inputs;   // the value id of each graph input, in order
  std::vector<int> outputs;
  std::vector<std::pair<int, int>> aliases;  // (value id, output id it equals): more getitems of one result  // values the caller reads after the run (never released by it)
  std::vector<Step> steps;
  /// Folded views (Note [Folded views] in jit/schedule): per value its remap in `views`, or -1.
  /// Read through the source's layout; made by the host only when a remap does not apply.
  std::vector<int> view_of;
  std::vector<ViewOp> views;
  int extern_steps = 0;

  bool is_folded(int v) const { return v < static_cast<int>(view_of.size()) && view_of[v] >= 0; }
};

/// Runs `program` over `values` (num_values entries: the inputs set, the rest Empty). On success
/// the output values are set; on failure the host has reported the error. Either way the caller
/// releases what is left in `values`. Never throws.
bool run_program(const Program& program, Value* values, RunHost& host) noexcept;

}  // namespace framejit::rt
