// kernel_step.cpp — binding NumPy arrays to a fused kernel's operands and launching it.
#include "frontend/backends/kernel_step.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>

#include "frontend/backends/arrays.h"
#include "frontend/numpy_abi.h"
#include "frontend/pooled_array.h"
#include "frontend/tensor_object.h"
#include "frontend/pyref.h"
#include "jit/x86/gemm.h"
#include "runtime/executor.h"
#include "runtime/faults.h"
#include "runtime/threads.h"

namespace framejit::frontend {

namespace {
constexpr int kMaxRank = 32;
// Below this many elements, releasing and re-taking the GIL costs more than it frees.
constexpr int64_t kReleaseGilElements = 1 << 16;
// A value's layout and element size: an ndarray's own, or a folded view's (ValueStore).
struct ArrayRef {
  jit::StridedLayout layout;
  int itemsize = 0;
};

bool refs_of(ValueStore& values, const std::vector<int>& inputs, ArrayRef* out) {
  for (size_t k = 0; k < inputs.size(); ++k)
    if (!values.layout(inputs[k], out[k].layout, out[k].itemsize)) return false;
  return true;
}

// The broadcast of the arrays' shapes (the iteration space of the ufuncs a kernel replaces).
bool broadcast_shape(const ArrayRef* in, size_t n, int& rank, int64_t* shape) {
  rank = 0;
  for (size_t k = 0; k < n; ++k) rank = std::max(rank, in[k].layout.nd);
  std::fill(shape, shape + rank, 1);
  for (size_t k = 0; k < n; ++k) {
    const jit::StridedLayout& a = in[k].layout;
    for (int d = 0; d < a.nd; ++d) {
      int64_t& s = shape[rank - a.nd + d];
      int64_t dim = a.dims[d];
      if (dim != 1 && s != 1 && dim != s) {
        PyErr_SetString(PyExc_ValueError, "framejit: operands could not be broadcast together");
        return false;
      }
      if (dim != 1) s = dim;
    }
  }
  return true;
}

// An array as a kernel operand over `rank` iteration dims: stride 0 where it is broadcast.
rt::Operand operand_of(const ArrayRef& r, int rank, int64_t* strides) {
  const jit::StridedLayout& a = r.layout;
  for (int d = 0; d < rank; ++d) {
    int src = d - (rank - a.nd);
    strides[d] = src < 0 || a.dims[src] == 1 ? 0 : a.strides[src];
  }
  return {a.data, strides, r.itemsize};
}

ArrayRef ref_of_array(PyObject* arr) {  // an array framejit allocated (native dtype)
  ArrayFields a = array_fields(arr);
  ArrayRef r;
  r.layout = layout_of(a);
  r.itemsize = rt::dtype_itemsize(a.dtype);
  return r;
}

// Note [Output memory order]
// NumPy's ufuncs allocate their output in the memory order of their inputs (order='K'): an
// F-ordered input gives an F-ordered result. The rule, applied here to a kernel's operand strides
// (0 where broadcast): axes are ordered from innermost outward by insertion, and an axis moves
// inside another when every input that steps along both does so with a smaller stride there;
// inputs that disagree leave C order. `outer_first` receives the axes from outermost inward.
// True when that is plain C order.
bool output_order(const rt::Operand* ops, int nin, int rank, int* outer_first) {
  int inner_first[kMaxRank];
  for (int i = 0; i < rank; ++i) inner_first[i] = rank - 1 - i;
  for (int i = 1; i < rank; ++i) {
    const int axis = inner_first[i];
    int pos = i;
    for (int j = i - 1; j >= 0; --j) {
      const int other = inner_first[j];
      bool decided = false, inside = false;
      for (int k = 0; k < nin; ++k) {
        const int64_t sa = std::abs(ops[k].strides[axis]), so = std::abs(ops[k].strides[other]);
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
  bool c_order = true;
  for (int i = 0; i < rank; ++i) {
    outer_first[i] = inner_first[rank - 1 - i];
    c_order = c_order && outer_first[i] == i;
  }
  return c_order;
}

// A new array of `shape` whose memory runs through the axes in `outer_first` order.
PyObject* new_array_in_order(const int64_t* shape, int rank, rt::DType dtype, const int* outer_first,
                             bool tensors) {  // new ref
  int64_t permuted[kMaxRank];
  for (int i = 0; i < rank; ++i) permuted[i] = shape[outer_first[i]];
  OwnedRef base = OwnedRef::steal(new_array(permuted, rank, dtype, tensors));
  if (!base) return nullptr;
  return permuted_view(base.get(), outer_first, rank);
}

bool read_params(PyObject** vals, const std::vector<int>& params, const std::vector<rt::DType>& dtypes,
                 rt::ParamValue* out) {
  for (size_t p = 0; p < params.size(); ++p) {
    PyObject* v = vals[params[p]];
    if (dtypes[p] == rt::DType::Int64) {
      int overflow = 0;
      out[p].i = PyLong_AsLongLongAndOverflow(v, &overflow);
      if (overflow) {
        PyErr_SetString(PyExc_OverflowError, "framejit: integer parameter does not fit 64 bits");
        return false;
      }
    } else {
      out[p].f = PyFloat_AsDouble(v);
    }
    if (PyErr_Occurred()) return false;
  }
  return true;
}

// A step bound to this call's arrays: iteration space, operands, parameters and (for a
// reduction) where results go. ops[k].strides points into `strides`: a Bound is never copied.
struct Bound {
  Bound() = default;
  Bound(const Bound&) = delete;
  Bound& operator=(const Bound&) = delete;

  int rank = 0;
  int64_t shape[kMaxRank];
  int64_t total = 1;
  int nops = 0;
  rt::Operand ops[rt::kMaxKernelOperands];
  int64_t strides[rt::kMaxKernelOperands][kMaxRank];
  rt::ParamValue params[rt::kMaxKernelParams];
  int nparams = 0;
  // Reductions: where results go (byte strides per iteration dim, 0 along reduced dims), which
  // dims are reduced and how many elements each result combines.
  char* out = nullptr;
  int64_t out_strides[kMaxRank];
  bool reduced[kMaxRank];
  int64_t count = 1;
};

// Note [Output buffer reuse]
// A kernel input that dies at this kernel (no later instruction reads it, and it is no graph
// output) may take the kernel's output when nobody else can observe it: the program holds its
// only reference, it is a plain ndarray owning C-contiguous aligned writable data (its own, or a
// pool block only it uses: Note [Pooled arrays]), and it has
// exactly the output's dtype and shape. Element i of the output then overwrites element i of the
// input, which the kernel has already read (every kernel reads an element's inputs before it
// stores the element's outputs). Softmax's division writes into its exp array this way, so the
// call allocates one full-size array instead of two.
PyObject* reusable_input(const KernelStep& step, PyObject** vals, const Bound& b, rt::DType dtype,
                         std::vector<int>& taken) {  // borrowed, or null
  const NumPyHandles* np = numpy_handles();
  for (int v : step.dying) {
    PyObject* obj = vals[v];
    if (!obj || Py_REFCNT(obj) != 1) continue;
    if (std::find(taken.begin(), taken.end(), v) != taken.end()) continue;
    if (is_tensor(obj)) {
      if (!tensor_is_private(obj) || !(as_tensor(obj)->flags & kTensorCContiguous)) continue;
    } else {
      if (!np || Py_TYPE(obj) != np->ndarray) continue;
      NdArrayFields* a = as_ndarray(obj);
      constexpr int kNeed = kNpyAligned | kNpyWriteable | kNpyCContiguous;
      const bool owns = a->base ? is_private_pool_block(a->base) : (a->flags & kNpyOwnData) != 0;
      if (!owns || (a->flags & kNeed) != kNeed) continue;
    }
    ArrayFields f = array_fields(obj);
    if (!f.ok || f.dtype != dtype || f.nd != b.rank || !std::equal(b.shape, b.shape + b.rank, f.dims)) continue;
    taken.push_back(v);
    return obj;
  }
  return nullptr;
}

bool bind_kernel(const KernelStep& step, ValueStore& values, Bound& b) {
  PyObject** vals = values.vals;
  const size_t nin = step.inputs.size(), nout = step.outputs.size();
  ArrayRef in[rt::kMaxKernelOperands];
  if (!refs_of(values, step.inputs, in) || !broadcast_shape(in, nin, b.rank, b.shape)) return false;
  for (int d = 0; d < b.rank; ++d) b.total *= b.shape[d];
  for (size_t k = 0; k < nin; ++k) b.ops[k] = operand_of(in[k], b.rank, b.strides[k]);
  int order[kMaxRank];
  const bool c_order = b.rank < 2 || output_order(b.ops, static_cast<int>(nin), b.rank, order);
  // A folded view may read a dying array under another index map: no in-place output then.
  bool reuse = c_order && !step.dying.empty();
  for (int v : step.inputs) reuse = reuse && !values.is_folded(v);
  std::vector<int> taken;
  for (size_t j = 0; j < nout; ++j) {
    PyObject* out = reuse ? reusable_input(step, vals, b, step.output_dtypes[j], taken) : nullptr;
    if (out) Py_INCREF(out);
    else if (c_order) out = new_array(b.shape, b.rank, step.output_dtypes[j], values.tensors);
    else out = new_array_in_order(b.shape, b.rank, step.output_dtypes[j], order, values.tensors);
    if (!out) return false;
    Py_XSETREF(vals[step.outputs[j]], out);  // new ref owned by vals
  }
  b.nops = static_cast<int>(nin + nout);
  for (size_t j = 0; j < nout; ++j)
    b.ops[nin + j] = operand_of(ref_of_array(vals[step.outputs[j]]), b.rank, b.strides[nin + j]);
  b.nparams = static_cast<int>(step.params.size());
  return read_params(vals, step.params, step.param_dtypes, b.params);
}

bool bind_reduction(const ReductionStep& step, ValueStore& values, Bound& b) {
  PyObject** vals = values.vals;
  const size_t nin = step.inputs.size();
  ArrayRef in[rt::kMaxKernelOperands];
  if (!refs_of(values, step.inputs, in) || !broadcast_shape(in, nin, b.rank, b.shape)) return false;
  if (b.rank != static_cast<int>(step.reduced.size())) {
    PyErr_SetString(PyExc_RuntimeError, "framejit: reduction operands do not have the traced rank");
    return false;
  }
  int64_t out_shape[kMaxRank];
  int out_rank = 0;
  b.count = 1;
  for (int d = 0; d < b.rank; ++d) {
    b.total *= b.shape[d];
    b.reduced[d] = step.reduced[d];
    if (step.reduced[d]) b.count *= b.shape[d];
    if (!step.reduced[d] || step.keepdims) out_shape[out_rank++] = step.reduced[d] ? 1 : b.shape[d];
  }
  if (b.count == 0) {
    // Lowering only compiles reductions whose counts cannot be zero (sizes 0 and 1 are guarded);
    // should a count still be zero, refuse as NumPy would rather than return garbage.
    PyErr_Format(PyExc_ValueError, "zero-size array to reduction operation %s which has no identity",
                 step.numpy_name);
    return false;
  }
  PyObject* out = new_array(out_shape, out_rank, step.output_dtype, values.tensors);
  if (!out) return false;
  Py_XSETREF(vals[step.output], out);
  ArrayFields o = array_fields(out);
  for (int d = 0, od = 0; d < b.rank; ++d) {
    b.out_strides[d] = step.reduced[d] ? 0 : o.strides[od];
    if (!step.reduced[d] || step.keepdims) ++od;
  }
  b.out = o.data;
  b.nops = static_cast<int>(nin);
  for (size_t k = 0; k < nin; ++k) b.ops[k] = operand_of(in[k], b.rank, b.strides[k]);
  if (step.value_output >= 0) {  // operand nops: every element's reduced value
    PyObject* stored = new_array(b.shape, b.rank, step.value_dtype, values.tensors);
    if (!stored) return false;
    Py_XSETREF(vals[step.value_output], stored);
    b.ops[b.nops] = operand_of(ref_of_array(stored), b.rank, b.strides[b.nops]);
    ++b.nops;
  }
  b.nparams = static_cast<int>(step.params.size());
  return read_params(vals, step.params, step.param_dtypes, b.params);
}

// Whether the reduction reduces the last axis and nothing else: then each row is one whole
// reduction and the row kernel can run row by row (what stored values and row blocking need).
bool last_axis_only(const ReductionStep& step) {
  return !step.arg && !step.numpy_scalar && step.reduced.size() >= 1 && step.reduced.back() &&
         std::count(step.reduced.begin(), step.reduced.end(), true) == 1;
}

rt::RowLaunch row_launch(const rt::Kernel& kernel, bool reduction, int64_t ddof, const Bound& b) {
  rt::RowLaunch l;
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

void launch_kernel(const rt::Kernel& kernel, const Bound& b) {
  rt::run_pointwise(kernel, b.rank, b.shape, b.nops, b.ops, b.params, b.nparams);
}

void launch_reduction(const ReductionStep& step, const Bound& b) {
  if (step.value_output >= 0) {
    // Only the row kernel stores the values: run it row by row, whatever the layout.
    rt::RowLaunch l = row_launch(*step.row, true, step.ddof, b);
    rt::run_row_blocked(b.rank - 1, b.shape, &l, 1);
    return;
  }
  rt::ReductionLaunch launch;
  launch.row = step.row.get();
  launch.column = step.column.get();
  launch.arg = step.arg;
  launch.arg_max = step.arg_max;
  launch.value_dtype = step.value_dtype;
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
  rt::run_reduction(launch);
}

// NumPy hands back a scalar (numpy.float32, numpy.int64...) for a full reduction: arr[()].
bool to_numpy_scalar(const ReductionStep& step, PyObject** vals) {
  if (!step.numpy_scalar) return true;
  OwnedRef empty = OwnedRef::steal(PyTuple_New(0));
  PyObject* scalar = empty ? PyObject_GetItem(vals[step.output], empty.get()) : nullptr;  // new ref
  if (!scalar) return false;
  Py_SETREF(vals[step.output], scalar);
  return true;
}

// Runs `fn` without the GIL when `elements` is worth it.
template <typename Fn>
void maybe_without_gil(int64_t elements, Fn&& fn) {
  if (elements >= kReleaseGilElements) {
    Py_BEGIN_ALLOW_THREADS;
    fn();
    Py_END_ALLOW_THREADS;
  } else {
    fn();
  }
}

// Whether a bound chain can run row block by row block: every part iterates over the same
// leading dims, every reduction reduces only the last axis, and each part reads what earlier
// parts wrote only at its own rows (a chain result broadcast along a leading dim would need every
// row of it first).
bool row_blockable(const ChainStep& chain, PyObject** vals, const Bound* b) {  // produced values are arrays
  const int rank = b[0].rank;
  if (rank < 2) return false;
  int64_t rows = 1;
  for (int d = 0; d < rank - 1; ++d) rows *= b[0].shape[d];
  if (rows < 2 * rt::num_threads()) return false;  // too few rows: split rows instead
  std::vector<int> produced;
  for (size_t j = 0; j < chain.parts.size(); ++j) {
    const ChainStep::Part& p = chain.parts[j];
    if (b[j].rank != rank || !std::equal(b[j].shape, b[j].shape + rank - 1, b[0].shape)) return false;
    if (p.reduction && !last_axis_only(p.red)) return false;
    const std::vector<int>& inputs = p.reduction ? p.red.inputs : p.kernel.inputs;
    for (int v : inputs) {
      if (std::find(produced.begin(), produced.end(), v) == produced.end()) continue;
      ArrayFields a = array_fields(vals[v]);
      if (a.nd != rank || !std::equal(a.dims, a.dims + rank - 1, b[0].shape)) return false;
    }
    if (p.reduction) {
      produced.push_back(p.red.output);
      if (p.red.value_output >= 0) produced.push_back(p.red.value_output);
    } else {
      produced.insert(produced.end(), p.kernel.outputs.begin(), p.kernel.outputs.end());
    }
  }
  return true;
}

// Below this many elements in the chain's first input, a chain runs part by part (the data is in
// cache anyway and blocking costs per-row calls).
constexpr int64_t kChainMinElements = 1 << 15;

}  // namespace

bool run_kernel_step(const KernelStep& step, ValueStore& values) {
  Bound b;
  if (!bind_kernel(step, values, b)) return false;
  maybe_without_gil(b.total, [&] { launch_kernel(*step.kernel, b); });
  return true;
}

bool run_reduction_step(const ReductionStep& step, ValueStore& values) {
  Bound b;
  if (!bind_reduction(step, values, b)) return false;
  maybe_without_gil(b.total, [&] { launch_reduction(step, b); });
  return to_numpy_scalar(step, values.vals);
}

bool run_chain_step(const ChainStep& chain, ValueStore& values) {
  PyObject** vals = values.vals;
  const size_t n = chain.parts.size();
  auto bind = [&](size_t j, Bound& b) {
    const ChainStep::Part& p = chain.parts[j];
    return p.reduction ? bind_reduction(p.red, values, b) : bind_kernel(p.kernel, values, b);
  };
  auto launch = [&](size_t j, const Bound& b) {
    const ChainStep::Part& p = chain.parts[j];
    if (p.reduction) launch_reduction(p.red, b);
    else launch_kernel(*p.kernel.kernel, b);
  };
  auto finish = [&] {
    for (const ChainStep::Part& p : chain.parts)
      if (p.reduction && !to_numpy_scalar(p.red, vals)) return false;
    return true;
  };
  const std::vector<int>& first_inputs = chain.parts[0].reduction ? chain.parts[0].red.inputs : chain.parts[0].kernel.inputs;
  int64_t size = 0;
  bool may_copy = false;
  for (const ChainStep::Part& p : chain.parts)
    for (int v : p.reduction ? p.red.inputs : p.kernel.inputs) may_copy = may_copy || values.may_copy(v);
  for (int v : first_inputs) {
    ArrayRef r;
    if (!values.layout(v, r.layout, r.itemsize)) return false;
    int64_t s = 1;
    for (int d = 0; d < r.layout.nd; ++d) s *= r.layout.dims[d];
    size = std::max(size, s);
  }
  // Part by part: small data, or a view that NumPy may have to copy when its remap does not
  // apply (it must read its source after the part computing the source has run).
  if (size < kChainMinElements || may_copy) {
    for (size_t j = 0; j < n; ++j) {
      Bound b;
      if (!bind(j, b)) return false;
      maybe_without_gil(b.total, [&] { launch(j, b); });
    }
    return finish();
  }
  // Bind every part first (allocating all outputs with the GIL held), then run without it.
  std::unique_ptr<Bound[]> b(new Bound[n]);
  for (size_t j = 0; j < n; ++j)
    if (!bind(j, b[j])) return false;
  if (!row_blockable(chain, vals, b.get())) {
    maybe_without_gil(size, [&] {
      for (size_t j = 0; j < n; ++j) launch(j, b[j]);
    });
    return finish();
  }
  std::vector<rt::RowLaunch> launches(n);
  for (size_t j = 0; j < n; ++j) {
    const ChainStep::Part& p = chain.parts[j];
    launches[j] = p.reduction ? row_launch(*p.red.row, true, p.red.ddof, b[j]) : row_launch(*p.kernel.kernel, false, 0, b[j]);
  }
  maybe_without_gil(size, [&] { rt::run_row_blocked(b[0].rank - 1, b[0].shape, launches.data(), static_cast<int>(n)); });
  return finish();
}

namespace {

// What the GEMM's epilogue callback needs: the kernel and, per operand (inputs, then the output,
// which is C), where the current batch's matrix starts and its row/column strides in bytes.
struct EpilogueContext {
  rt::PointwiseFn fn = nullptr;
  int nops = 0;
  char* base[rt::kMaxKernelOperands] = {};
  int64_t row_stride[rt::kMaxKernelOperands] = {};
  int64_t col_stride[rt::kMaxKernelOperands] = {};
  rt::PointwiseCall call;  // contiguity, column strides and parameters, filled once
};

void run_epilogue(void* ctx, void*, int64_t, int64_t m0, int64_t n0, int64_t mb, int64_t nb) {
  const auto* e = static_cast<const EpilogueContext*>(ctx);
  rt::PointwiseCall call = e->call;
  call.n = nb;
  for (int64_t i = m0; i < m0 + mb; ++i) {
    for (int k = 0; k < e->nops; ++k) call.ptr[k] = e->base[k] + i * e->row_stride[k] + n0 * e->col_stride[k];
    e->fn(&call);
  }
}

}  // namespace

namespace {

// An operand the GEMM's C++ packing code would read through misaligned element pointers (NumPy
// allows arrays at any byte offset): copied into aligned, C-contiguous memory first. Rare, and
// reading a misaligned float through a float* is undefined behaviour (UBSan reports it).
bool is_aligned(const ArrayRef& r) {
  auto misaligned = [&](int64_t v) { return v % r.itemsize != 0; };
  if (misaligned(static_cast<int64_t>(reinterpret_cast<uintptr_t>(r.layout.data)))) return false;
  for (int d = 0; d < r.layout.nd; ++d)
    if (misaligned(r.layout.strides[d])) return false;
  return true;
}

void aligned_copy(ArrayRef& r, std::vector<char>& storage) {
  int64_t total = 1;
  for (int d = 0; d < r.layout.nd; ++d) total *= r.layout.dims[d];
  storage.assign(static_cast<size_t>(total * r.itemsize) + 64, 0);
  char* dst = storage.data() + (64 - reinterpret_cast<uintptr_t>(storage.data()) % 64) % 64;
  copy_to_c_order(r.layout, r.itemsize, dst);
  r.layout.data = dst;
  int64_t stride = r.itemsize;
  for (int d = r.layout.nd - 1; d >= 0; --d) {
    r.layout.strides[d] = stride;
    stride *= r.layout.dims[d];
  }
}

}  // namespace

bool run_gemm_step(const GemmStep& step, ValueStore& values) {
  PyObject** vals = values.vals;
  ArrayRef ar, br;
  if (!values.layout(step.a, ar.layout, ar.itemsize) || !values.layout(step.b, br.layout, br.itemsize)) return false;
  std::vector<char> a_copy, b_copy;
  if (!is_aligned(ar)) aligned_copy(ar, a_copy);
  if (!is_aligned(br)) aligned_copy(br, b_copy);
  const jit::StridedLayout& a = ar.layout;
  const jit::StridedLayout& b = br.layout;
  const int64_t m = a.dims[a.nd - 2], k = a.dims[a.nd - 1];
  const int64_t kb = b.dims[b.nd - 2], n = b.dims[b.nd - 1];
  if (k != kb) {  // guards make this impossible; NumPy's own message if it ever happens
    PyErr_SetString(PyExc_ValueError, "matmul: Input operand 1 has a mismatch in its core dimension 0");
    return false;
  }
  // Batch dims: A's and B's leading dims broadcast against each other (stride 0 where size 1).
  const int rank = std::max(a.nd, b.nd), nbatch = rank - 2;
  int64_t out_shape[kMaxRank], a_bstride[kMaxRank], b_bstride[kMaxRank];
  for (int d = 0; d < nbatch; ++d) {
    const int da = d - (rank - a.nd), db = d - (rank - b.nd);
    const int64_t sa = da < 0 ? 1 : a.dims[da], sb = db < 0 ? 1 : b.dims[db];
    if (sa != sb && sa != 1 && sb != 1) {
      PyErr_SetString(PyExc_ValueError, "framejit: matmul batch dimensions could not be broadcast together");
      return false;
    }
    out_shape[d] = sa == 1 ? sb : sa;
    a_bstride[d] = sa == 1 ? 0 : a.strides[da];
    b_bstride[d] = sb == 1 ? 0 : b.strides[db];
  }
  out_shape[rank - 2] = m;
  out_shape[rank - 1] = n;
  PyObject* out = new_array(out_shape, rank, step.dtype, values.tensors);
  if (!out) return false;
  Py_XSETREF(vals[step.output], out);
  ArrayFields c = array_fields(out);
  const int64_t item = rt::dtype_itemsize(step.dtype);
  int64_t batches = 1;
  for (int d = 0; d < nbatch; ++d) batches *= out_shape[d];
  jit::x86::GemmArgs g;
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
    const size_t nin = ep.inputs.size();
    ArrayRef in[rt::kMaxKernelOperands];
    if (!refs_of(values, ep.inputs, in) || !broadcast_shape(in, nin, eb.rank, eb.shape)) return false;
    if (eb.rank != rank || !std::equal(eb.shape, eb.shape + rank, c.dims)) {
      PyErr_SetString(PyExc_ValueError, "framejit: GEMM epilogue operands do not match the product's shape");
      return false;
    }
    eb.nops = static_cast<int>(nin) + 1;
    for (size_t j = 0; j < nin; ++j) eb.ops[j] = operand_of(in[j], rank, eb.strides[j]);
    eb.ops[nin] = operand_of(ref_of_array(out), rank, eb.strides[nin]);
    if (!read_params(vals, ep.params, ep.param_dtypes, ectx.call.params)) return false;
    ectx.fn = reinterpret_cast<rt::PointwiseFn>(ep.kernel->entry);
    ectx.nops = eb.nops;
    ectx.call.contiguous = 1;
    for (int j = 0; j < eb.nops; ++j) {
      ectx.row_stride[j] = eb.strides[j][rank - 2];
      ectx.col_stride[j] = ectx.call.stride[j] = eb.strides[j][rank - 1];
      if (ectx.col_stride[j] != 0 && ectx.col_stride[j] != eb.ops[j].itemsize) ectx.call.contiguous = 0;
    }
    g.epilogue = run_epilogue;
    g.epilogue_ctx = &ectx;
    Py_INCREF(out);
    Py_XSETREF(vals[ep.outputs[0]], out);  // the epilogue's result is C's array, overwritten
  }
  auto run = [&] {
    for (int64_t bi = 0; bi < batches; ++bi) {
      // Offset of batch bi in A and B (any strides), in the contiguous C and in the epilogue
      // operands.
      int64_t rem = bi, a_off = 0, b_off = 0;
      for (int j = 0; j < eb.nops; ++j) ectx.base[j] = eb.ops[j].data;
      for (int d = nbatch - 1; d >= 0; --d) {
        int64_t idx = rem % out_shape[d];
        a_off += idx * a_bstride[d];
        b_off += idx * b_bstride[d];
        for (int j = 0; j < eb.nops; ++j) ectx.base[j] += idx * eb.strides[j][d];
        rem /= out_shape[d];
      }
      g.a = a.data + a_off;
      g.b = b.data + b_off;
      g.c = c.data + bi * m * n * item;
      jit::x86::gemm(g);
    }
  };
  if (batches * m * n * k >= (int64_t{1} << 18)) {
    Py_BEGIN_ALLOW_THREADS;
    run();
    Py_END_ALLOW_THREADS;
  } else {
    run();
  }
  return true;
}

}  // namespace framejit::frontend
