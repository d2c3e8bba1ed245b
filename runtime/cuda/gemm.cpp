// gemm.cpp — device products through cuBLASLt: finding and loading the library, the row-major
// mapping, cached heuristics and per-stream workspaces (Note [Device GEMMs]).
#include "runtime/cuda/gemm.h"

#include <dlfcn.h>
#include <link.h>

#include <cstdlib>
#include <cstring>
#include <algorithm>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>

#include "runtime/cuda/driver.h"
#include "runtime/cuda/graph.h"
#include "runtime/cuda/launch.h"
#include "runtime/cuda/memory.h"

namespace framejit::rt::cuda {

// Note [Device GEMMs]
// A product on a device is cuBLASLt's: the library every CUDA install and every torch wheel ships
// (torch's links it, so once torch is imported it is already mapped into the process). Like the
// driver it is opened at run time, never linked: FRAMEJIT_CUBLASLT names a file; else a copy the
// process has already loaded (torch's) is used, else libcublasLt.so.13/.12/.11 by soname. Without
// one, a graph with a device product is not compiled (the backend says why) and CPython runs it.
//
// cuBLASLt is column-major, framejit's arrays row-major with any strides. A row-major m x n C is
// the column-major n x m matrix C^T, and C^T = B^T A^T: the product is issued with the operands
// swapped, each described as a column-major matrix with the leading dimension its memory has —
// B with unit column stride is column-major B^T (no transpose), B with unit row stride is B
// column-major (transposed), the same for A. So transposed views (x @ W.T, k.transpose(-2, -1))
// are read in place; an operand with no unit stride is packed into C order first by the caller.
// Batches are strided batches (one batch dim per call; the caller loops over the others), batch
// stride 0 included (one B for every batch).
//
// Compute is in the operands' type, float32 or float64: no TF32, which
// would change float32 results by up to 1e-3 relative (torch's default for matmuls is the same).
// The heuristic's choice depends on the shapes and layouts alone, so it is asked once per
// (device, dtype, m, n, k, layouts, batches) and kept with its descriptors; results are then
// deterministic for a given shape. The workspace (kWorkspaceBytes, what cuBLAS asks for on
// Hopper) is one block per device and stream, never shared by two streams at once.

namespace {

using Status_t = int;  // cublasStatus_t
using Handle = struct cublasLtContext*;
using MatmulDesc = struct cublasLtMatmulDescOpaque*;
using MatrixLayout = struct cublasLtMatrixLayoutOpaque*;
using Preference = struct cublasLtMatmulPreferenceOpaque*;
struct Algo {
  uint64_t data[8];
};
struct HeuristicResult {
  Algo algo;
  size_t workspace_size;
  Status_t state;
  float waves;
  int reserved[4];
};

// The ABI's enum values (cublasLt.h, cublas_api.h, library_types.h spell them).
constexpr Status_t kLtSuccess = 0;
constexpr int kComputeF32 = 68, kComputeF64 = 70;  // CUBLAS_COMPUTE_32F / _64F
constexpr int kR32F = 0, kR64F = 1, kR16F = 2, kR16BF = 14;  // CUDA_R_32F / _64F / _16F / _16BF
constexpr int kOpN = 0, kOpT = 1;
constexpr int kDescTransA = 3, kDescTransB = 4;     // CUBLASLT_MATMUL_DESC_TRANSA / _TRANSB
constexpr int kLayoutBatchCount = 5, kLayoutBatchStride = 6;
constexpr int kPrefMaxWorkspace = 1;
constexpr int kPrefMinAlignmentA = 5;  // ..._B, _C, _D follow: 6, 7, 8
constexpr size_t kWorkspaceBytes = size_t{32} << 20;

struct Lt {
  Status_t (*Create)(Handle*);
  Status_t (*MatmulDescCreate)(MatmulDesc*, int compute, int scale_type);
  Status_t (*MatmulDescSetAttribute)(MatmulDesc, int attr, const void* buf, size_t size);
  Status_t (*MatrixLayoutCreate)(MatrixLayout*, int type, uint64_t rows, uint64_t cols, int64_t ld);
  Status_t (*MatrixLayoutSetAttribute)(MatrixLayout, int attr, const void* buf, size_t size);
  Status_t (*MatmulPreferenceCreate)(Preference*);
  Status_t (*MatmulPreferenceSetAttribute)(Preference, int attr, const void* buf, size_t size);
  Status_t (*MatmulAlgoGetHeuristic)(Handle, MatmulDesc, MatrixLayout, MatrixLayout, MatrixLayout, MatrixLayout,
                                     Preference, int requested, HeuristicResult* results, int* returned);
  Status_t (*Matmul)(Handle, MatmulDesc, const void* alpha, const void* a, MatrixLayout, const void* b, MatrixLayout,
                     const void* beta, const void* c, MatrixLayout, void* d, MatrixLayout, const Algo* algo,
                     void* workspace, size_t workspace_bytes, CUstream stream);
  const char* (*GetStatusString)(Status_t);
  std::string path;
};

// A copy of libcublasLt the process has already mapped (torch's), or "".
std::string loaded_cublaslt() {
  std::string found;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) {
        const std::string_view path = info->dlpi_name ? info->dlpi_name : "";
        const std::string_view file = path.substr(path.rfind('/') + 1);
        auto& f = *static_cast<std::string*>(data);
        if (f.empty() && file.rfind("libcublasLt.so", 0) == 0) f = path;
        return 0;
      },
      &found);
  return found;
}

Expected<Lt> load_lt() {
  std::string tried;
  void* lib = nullptr;
  std::string path;
  auto attempt = [&](const std::string& p) {
    if (lib || p.empty()) return;
    lib = dlopen(p.c_str(), RTLD_NOW | RTLD_LOCAL);  // NB: never closed, like the driver
    if (lib) {
      path = p;
    } else {
      const char* e = dlerror();
      tried += (tried.empty() ? "" : "; ") + p + ": " + (e ? e : "not found");
    }
  };
  if (const char* env = std::getenv("FRAMEJIT_CUBLASLT"); env && *env) {
    attempt(env);
  } else {
    attempt(loaded_cublaslt());
    for (const char* name : {"libcublasLt.so.13", "libcublasLt.so.12", "libcublasLt.so.11", "libcublasLt.so"}) attempt(name);
  }
  if (!lib) return Status::unsupported("no cuBLASLt library for matrix products on a GPU (" + tried + ")");
  Lt lt{};
  lt.path = path;
  bool missing = false;
  std::string which;
  auto sym = [&](auto& fn, const char* name) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(lib, name));
    if (!fn && !missing) {
      missing = true;
      which = name;
    }
  };
  sym(lt.Create, "cublasLtCreate");
  sym(lt.MatmulDescCreate, "cublasLtMatmulDescCreate");
  sym(lt.MatmulDescSetAttribute, "cublasLtMatmulDescSetAttribute");
  sym(lt.MatrixLayoutCreate, "cublasLtMatrixLayoutCreate");
  sym(lt.MatrixLayoutSetAttribute, "cublasLtMatrixLayoutSetAttribute");
  sym(lt.MatmulPreferenceCreate, "cublasLtMatmulPreferenceCreate");
  sym(lt.MatmulPreferenceSetAttribute, "cublasLtMatmulPreferenceSetAttribute");
  sym(lt.MatmulAlgoGetHeuristic, "cublasLtMatmulAlgoGetHeuristic");
  sym(lt.Matmul, "cublasLtMatmul");
  sym(lt.GetStatusString, "cublasLtGetStatusString");
  if (missing) return Status::unsupported("the cuBLASLt in " + path + " has no " + which + " (older than CUDA 11.4)");
  return lt;
}

// What one product is described by: its heuristics and descriptors are made once per plan.
struct PlanKey {
  int device;
  DType dtype;
  int64_t m, n, k, batches;
  int op_a, op_b;  // cuBLAS's operands: ours swapped (B first)
  int64_t ld_a, ld_b, ldc;
  int64_t stride_a, stride_b, stride_c;
  uint32_t align_a, align_b, align_c;  // bytes every pointer of the call is aligned to (up to 256)
  auto tie() const {
    return std::tie(device, dtype, m, n, k, batches, op_a, op_b, ld_a, ld_b, ldc, stride_a, stride_b, stride_c, align_a,
                    align_b, align_c);
  }
  bool operator<(const PlanKey& o) const { return tie() < o.tie(); }
};

struct Plan {
  MatmulDesc desc = nullptr;
  MatrixLayout a = nullptr, b = nullptr, c = nullptr;
  Algo algo{};
};

struct State {
  std::mutex mu;
  bool tried = false;
  Status status;
  Lt lt{};
  std::map<int, Handle> handles;                           // per device
  std::map<std::pair<int, CUstream>, void*> workspaces;   // per device and stream
  std::map<PlanKey, Plan> plans;
};
State& state() {
  static auto* s = new State;  // NB: immortal: no library calls during static destruction
  return *s;
}

Status lt_check(const State& s, Status_t r, std::string_view what) {
  if (r == kLtSuccess) return Status::ok();
  const char* text = s.lt.GetStatusString ? s.lt.GetStatusString(r) : nullptr;
  return Status::internal(std::string(what) + ": " + (text ? text : "cuBLAS status " + std::to_string(r)));
}

// The library, loaded once (the caller holds s.mu).
Status loaded(State& s) {
  if (!s.tried) {
    s.tried = true;
    auto lt = load_lt();
    s.status = lt ? Status::ok() : lt.error();
    if (lt) s.lt = std::move(*lt);
  }
  return s.status;
}

int data_type(DType t) {
  switch (t) {
    case DType::Float64: return kR64F;
    case DType::Float16: return kR16F;
    case DType::BFloat16: return kR16BF;
    default: return kR32F;
  }
}

// One operand as cuBLAS reads it: its op and the column-major matrix stored (rows x cols, leading
// dimension ld).
struct LtOperand {
  int op;
  int64_t ld;
  uint64_t rows, cols;
};
// Our row-major rows x cols matrix X as cuBLAS reads X^T (Note [Device GEMMs]), or none when it
// has no unit stride. A size-1 dim's stride is free: chosen so that a layout fits.
std::optional<LtOperand> as_transposed(int64_t rows, int64_t cols, int64_t row_stride, int64_t col_stride) {
  if (cols == 1) col_stride = 1;
  if (rows == 1) row_stride = col_stride == 1 ? cols : 1;
  const auto r = static_cast<uint64_t>(rows), c = static_cast<uint64_t>(cols);
  // Unit column stride: X^T is stored column-major, rows row_stride apart; no transpose.
  if (col_stride == 1 && row_stride >= cols && row_stride >= 1) return LtOperand{kOpN, row_stride, c, r};
  // Unit row stride: X itself is stored column-major; cuBLAS transposes it.
  if (row_stride == 1 && col_stride >= rows && col_stride >= 1) return LtOperand{kOpT, col_stride, r, c};
  return std::nullopt;
}

Expected<Plan*> plan_of(State& s, const PlanKey& key, const LtOperand& la, const LtOperand& lb) {
  auto it = s.plans.find(key);
  if (it != s.plans.end()) return &it->second;
  const Lt& lt = s.lt;
  Plan p;
  const bool f64 = key.dtype == DType::Float64;
  FJ_PROPAGATE(lt_check(s, lt.MatmulDescCreate(&p.desc, f64 ? kComputeF64 : kComputeF32, f64 ? kR64F : kR32F),
                        "cublasLtMatmulDescCreate"));
  FJ_PROPAGATE(lt_check(s, lt.MatmulDescSetAttribute(p.desc, kDescTransA, &la.op, sizeof(int)), "cublasLtMatmulDescSetAttribute"));
  FJ_PROPAGATE(lt_check(s, lt.MatmulDescSetAttribute(p.desc, kDescTransB, &lb.op, sizeof(int)), "cublasLtMatmulDescSetAttribute"));
  const int type = data_type(key.dtype);
  FJ_PROPAGATE(lt_check(s, lt.MatrixLayoutCreate(&p.a, type, la.rows, la.cols, la.ld), "cublasLtMatrixLayoutCreate"));
  FJ_PROPAGATE(lt_check(s, lt.MatrixLayoutCreate(&p.b, type, lb.rows, lb.cols, lb.ld), "cublasLtMatrixLayoutCreate"));
  FJ_PROPAGATE(lt_check(s, lt.MatrixLayoutCreate(&p.c, type, static_cast<uint64_t>(key.n), static_cast<uint64_t>(key.m), key.ldc),
                        "cublasLtMatrixLayoutCreate"));
  if (key.batches > 1) {
    const int32_t count = static_cast<int32_t>(key.batches);
    const std::pair<MatrixLayout, int64_t> batched[] = {{p.a, key.stride_a}, {p.b, key.stride_b}, {p.c, key.stride_c}};
    for (const auto& [layout, stride] : batched) {
      FJ_PROPAGATE(lt_check(s, lt.MatrixLayoutSetAttribute(layout, kLayoutBatchCount, &count, sizeof count),
                            "cublasLtMatrixLayoutSetAttribute"));
      FJ_PROPAGATE(lt_check(s, lt.MatrixLayoutSetAttribute(layout, kLayoutBatchStride, &stride, sizeof stride),
                            "cublasLtMatrixLayoutSetAttribute"));
    }
  }
  Preference pref = nullptr;
  FJ_PROPAGATE(lt_check(s, lt.MatmulPreferenceCreate(&pref), "cublasLtMatmulPreferenceCreate"));
  const uint64_t ws = kWorkspaceBytes;
  FJ_PROPAGATE(lt_check(s, lt.MatmulPreferenceSetAttribute(pref, kPrefMaxWorkspace, &ws, sizeof ws),
                        "cublasLtMatmulPreferenceSetAttribute"));
  // The heuristic assumes 256-byte aligned operands unless told otherwise: views (x[:, 1:]) and
  // batches past the first are not (C is D here).
  const uint32_t align[] = {key.align_a, key.align_b, key.align_c, key.align_c};
  for (int i = 0; i < 4; ++i)
    FJ_PROPAGATE(lt_check(s, lt.MatmulPreferenceSetAttribute(pref, kPrefMinAlignmentA + i, &align[i], sizeof align[i]),
                          "cublasLtMatmulPreferenceSetAttribute"));
  HeuristicResult result{};
  int returned = 0;
  FJ_PROPAGATE(lt_check(s,
                        lt.MatmulAlgoGetHeuristic(s.handles.at(key.device), p.desc, p.a, p.b, p.c, p.c, pref, 1, &result,
                                                  &returned),
                        "cublasLtMatmulAlgoGetHeuristic"));
  // NB: the preference and, on failure, the descriptors are left to the process's end: a
  // handful of bytes, and the library has no destroy entry points loaded here.
  if (returned < 1 || result.state != kLtSuccess)
    return Status::unsupported("cuBLASLt has no algorithm for a " + std::to_string(key.m) + "x" + std::to_string(key.k) +
                               " @ " + std::to_string(key.k) + "x" + std::to_string(key.n) + " product");
  p.algo = result.algo;
  return &s.plans.emplace(key, p).first->second;
}

}  // namespace

bool blas_layout(int64_t rows, int64_t cols, int64_t row_stride, int64_t col_stride) {
  return as_transposed(rows, cols, row_stride, col_stride).has_value();
}

Status gemm_library() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  return loaded(s);
}

Status run_gemm(const DeviceGemmCall& call) {
  // Half types accumulate in float32, with float32 scales (Note [Half types] in jit/lower/loop_ir.h).
  if (call.dtype != DType::Float32 && call.dtype != DType::Float64 && !dtype_is_half(call.dtype))
    return Status::unsupported(std::string("device products of ") + std::string(dtype_name(call.dtype)));
  if (call.m == 0 || call.n == 0 || call.batches == 0) return Status::ok();
  auto st = stream(call.device);  // the context made current, and the stream to issue on
  if (!st) return st.error();
  if (call.k == 0) {  // sums of nothing: cuBLAS may leave C as it was (torch's empty memory)
    const size_t bytes = static_cast<size_t>((call.batches - 1) * call.c_batch_stride + (call.m - 1) * call.ldc + call.n) *
                         static_cast<size_t>(dtype_itemsize(call.dtype));
    if (call.ldc != call.n || (call.batches > 1 && call.c_batch_stride != call.m * call.n))
      return Status::internal("a device product of k = 0 into a C with gaps");
    return fill_on_device(call.device, call.c, 0, 1, bytes);
  }
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  FJ_PROPAGATE(loaded(s));
  auto h = s.handles.find(call.device);
  if (h == s.handles.end()) {
    Handle handle = nullptr;
    FJ_PROPAGATE(lt_check(s, s.lt.Create(&handle), "cublasLtCreate"));
    h = s.handles.emplace(call.device, handle).first;
  }
  void*& workspace = s.workspaces[{call.device, *st}];
  if (!workspace) {
    auto block = device_alloc(call.device, kWorkspaceBytes);
    if (!block) return block.error();
    workspace = *block;
  }
  // cuBLAS computes C^T (n x m) = B^T (n x k) A^T (k x m): its first operand is our B.
  const std::optional<LtOperand> la = as_transposed(call.k, call.n, call.b.row_stride, call.b.col_stride);
  const std::optional<LtOperand> lb = as_transposed(call.m, call.k, call.a.row_stride, call.a.col_stride);
  if (!la || !lb) return Status::internal("a device product's operand has no unit stride (it should have been packed)");
  // The alignment every matrix of an operand has: its pointer's, its leading dimension's and batch
  // stride's in bytes (cuBLAS's first operand is our B).
  const int64_t item = dtype_itemsize(call.dtype);
  auto alignment = [&](const void* p, int64_t ld, int64_t batch_stride) {
    uint64_t bits = reinterpret_cast<uintptr_t>(p) | static_cast<uint64_t>(ld * item) | 256;
    if (call.batches > 1) bits |= static_cast<uint64_t>(batch_stride * item);
    return static_cast<uint32_t>(bits & (~bits + 1));  // the lowest set bit
  };
  const int64_t ldc = std::max<int64_t>(call.ldc, call.n);
  const PlanKey key{call.device, call.dtype, call.m, call.n, call.k, call.batches, la->op, lb->op, la->ld, lb->ld, ldc,
                    call.b.batch_stride, call.a.batch_stride, call.c_batch_stride,
                    alignment(call.b.data, la->ld, call.b.batch_stride), alignment(call.a.data, lb->ld, call.a.batch_stride),
                    alignment(call.c, ldc, call.c_batch_stride)};
  auto plan = plan_of(s, key, *la, *lb);
  if (!plan) return plan.error();
  const Plan& p = **plan;
  // alpha = 1, beta = 0 in the scale type (float, or double for float64).
  const float one_f = 1, zero_f = 0;
  const double one_d = 1, zero_d = 0;
  const bool f64 = call.dtype == DType::Float64;
  const void* alpha = f64 ? static_cast<const void*>(&one_d) : &one_f;
  const void* beta = f64 ? static_cast<const void*>(&zero_d) : &zero_f;
  // Everything the call's work depends on (Note [Replayed launches]: the key of its capture).
  const void* capture_key[] = {h->second, &p, call.a.data, call.b.data, call.c, workspace};
  return issue_library_call(call.device, *st, capture_key, sizeof capture_key, [&](CUstream on) {
    return lt_check(s,
                    s.lt.Matmul(h->second, p.desc, alpha, call.b.data, p.a, call.a.data, p.b, beta, call.c, p.c, call.c,
                                p.c, &p.algo, workspace, kWorkspaceBytes, on),
                    "cublasLtMatmul");
  });
}

Status run_small_gemm(const Kernel& kernel, const SmallGemmCall& call) {
  if (call.m == 0 || call.n == 0) return Status::ok();
  if (call.m > int64_t{1} << 31 || call.n > int64_t{1} << 31 || call.k >= int64_t{1} << 31)
    return Status::unsupported("a small device product past 2^31 in one dim");
  auto st = stream(kernel.device.index);
  if (!st) return st.error();
  SmallGemmArgs args;
  std::memset(&args, 0, sizeof args);
  args.m = static_cast<uint32_t>(call.m);
  args.n = static_cast<uint32_t>(call.n);
  args.k = static_cast<uint32_t>(call.k);
  constexpr int tile_cols = kSmallGemmWarps;
  args.a = reinterpret_cast<uint64_t>(call.a);
  args.b = reinterpret_cast<uint64_t>(call.b);
  args.c = reinterpret_cast<uint64_t>(call.c);
  args.a_rs = call.a_rs;
  args.a_cs = call.a_cs;
  args.b_rs = call.b_rs;
  args.b_cs = call.b_cs;
  args.ldc = call.ldc;
  for (int j = 0; j < call.num_operands; ++j) {
    args.ptr[j] = reinterpret_cast<uint64_t>(call.ptr[j]);
    args.row_stride[j] = call.row_stride[j];
    args.col_stride[j] = call.col_stride[j];
  }
  std::copy_n(call.params, call.num_params, args.params);
  const int64_t blocks = (call.n + tile_cols - 1) / tile_cols;
  if (blocks > 0x7FFFFFFF) return Status::unsupported("a small device product with too many columns");
  return launch(kernel, Dim3{static_cast<unsigned>(blocks)}, Dim3{static_cast<unsigned>(kSmallGemmThreads)}, 0, *st,
                &args, sizeof args);
}

}  // namespace framejit::rt::cuda
