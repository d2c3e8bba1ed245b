// backend.cpp — the CUDA jit::Backend: PTX from jit/cuda's generators, one module per kernel,
// cached by its PTX text.
#include "jit/cuda/backend.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "jit/cuda/gemm_codegen.h"
#include "jit/cuda/pointwise_codegen.h"
#include "jit/cuda/reduction_codegen.h"
#include "jit/cuda/row_chain_codegen.h"
#include "runtime/cuda/driver.h"
#include "runtime/cuda/gemm.h"
#include "runtime/log.h"

namespace framejit::jit::cuda {

// Note [PTX size]
// The driver compiles PTX to machine code when a module loads, and its time follows the PTX's
// length. So the generators keep modules short: framejit's own math routines (a few dozen
// instructions each, no libdevice), loops kept loops where they are not the hot path. Measured
// on the H100 with the driver's cache off (64M float32, 2 x 4 bytes per element, copy 2888 GB/s):
//   kernel                              level 0      1       2       3       4
//   gelu chain (tanh + exp, 362 lines)  JIT ms 144    71      83      54     100
//                                       GB/s   452    2073    2122    2127   2103
//   x*a+b (vector loop, 190 lines)      JIT ms 25     35      40      28      44
//                                       GB/s   2231   2755    2768    2771   2747
// Level 3 compiles fastest of the optimizing levels and runs as fast as 4: it is the default. With
// the driver's disk cache warm, a second process loads each of these in 0.2 ms.
//
// The vector loop's body is emitted four times, once per lane of the 4-element chunk. It was
// once a loop over the lanes (one copy of a math body, the lane picked by predicated moves), for
// compile time; on the H200 (copy 4.06 TB/s) that kernel is bound by instructions, not memory, and
// the lane selection cost 15 of its ~90 per element. The gelu chain of samples/gpu_bench.py,
// flat kernel, H200, driver cache off (tools: a driver-API harness timing PTX variants side by side):
//   lane loop, div.rn (257 lines)                     2171 GB/s  0.53 of copy  JIT 42 ms
//   four copies, div.rn (446 lines)                   2512 GB/s  0.62          JIT 57 ms
//   four copies, div_normal in tanh and sigmoid,
//     1/(1+exp(-x)) as sigmoid (466 lines)            3008 GB/s  0.74          JIT 35 ms
//   lane loop, the same math (262 lines)              2382 GB/s  0.59          JIT 25 ms
//   four copies, + fnma folded, one-scale sigmoid exp 3282 GB/s  0.79          JIT 30 ms
// (div_normal: PtxOps; sigmoid: Note [Sigmoid from its formula] in jit/lower/loop_ir.cpp.) The
// math sequences shrank the module as much as the copies grew it, so four copies it is. What is
// left is instructions: ~70 per element against the ~67 an H200 issues per element at copy speed.
//
// The cache key is the PTX text itself plus the device: two graphs whose kernels generate the same
// code share one module, and nothing but the text decides what the module computes.
//
// Note [Device modules load when needed]
// A kernel's module is loaded (the driver's JIT, tens of milliseconds) when it is first needed,
// not when its PTX is made: a graph also compiles kernels it may never launch — the parts of a
// row chain that run one by one only when a layout does not fit the chain's one kernel (softmax
// made five modules and used one), a product's pack and small-product kernels. At the end of a
// graph's compile, compile_graph asks the backend to prepare() what its program surely launches,
// and those modules load on several threads at once (each JIT runs on one thread); so a module
// the driver rejects is still the graph's compile error. The rest load at their first launch
// (Kernel::ready), where a failure is that run's error.


namespace {

// The driver's JIT optimization level (0-4; FRAMEJIT_PTX_JIT_LEVEL overrides it for measuring):
// 3, by Note [PTX size].
int jit_level() {
  static const int level = [] {
    const char* e = std::getenv("FRAMEJIT_PTX_JIT_LEVEL");
    return e && *e >= '0' && *e <= '4' && !e[1] ? *e - '0' : 3;
  }();
  return level;
}

class CudaBackend final : public Backend {
public:
  explicit CudaBackend(int ordinal) : ordinal_(ordinal), name_("cuda:" + std::to_string(ordinal)) {}

  std::string_view name() const override { return name_; }
  bool supports(const PointwiseKernelIR& ir) const override { return pointwise_supported(ir); }
  bool supports(const ReductionKernelIR& ir) const override { return reduction_supported(ir); }
  rt::GemmFn gemm(DType) const override { return nullptr; }
  rt::Device device() const override { return {rt::DeviceType::CUDA, ordinal_}; }
  Status device_gemm(DType dtype) const override {
    if (dtype != DType::Float32 && dtype != DType::Float64 && !rt::dtype_is_half(dtype))
      return Status::unsupported(std::string("matrix products of ") + std::string(rt::dtype_name(dtype)) + " on " + name_);
    return rt::cuda::gemm_library();
  }
  bool stores_reduction_operands() const override { return false; }
  bool fuses_row_chains() const override { return true; }

  // Note [Flat pointwise kernels]: the flat form, with the strided form as its twin (each module
  // loaded when first launched).
  Expected<KernelArtifact> compile(const PointwiseKernelIR& ir) override {
    const std::string name = "fj_pointwise";
    auto flat = pointwise_ptx(ir, name, true);
    if (!flat) return flat.error();
    auto general = pointwise_ptx(ir, name, false);
    if (!general) return general.error();
    auto strided = load(*general, name);
    if (!strided) return strided.error();
    return load(*flat, name, *strided);
  }
  Expected<ReductionArtifact> compile(const ReductionKernelIR& ir) override {
    const std::string name = "fj_reduce";
    auto ptx = reduction_ptx(ir, name);
    if (!ptx) return ptx.error();
    auto main = load(*ptx, name);
    if (!main) return main.error();
    auto combine = sibling(*main, name + "_combine");
    if (!combine) return combine.error();
    return ReductionArtifact{*main, *combine};
  }
  Expected<KernelArtifact> compile(const GemmKernelIR& g) override {
    const std::string name = "fj_small_gemm";
    auto ptx = small_gemm_ptx(g, name);
    if (!ptx) return ptx.error();
    return load(*ptx, name);
  }
  Expected<KernelArtifact> compile(const RowChainIR& chain) override {
    const std::string name = "fj_row_chain";
    auto ptx = row_chain_ptx(chain, name);
    if (!ptx) return ptx.error();
    return load(*ptx, name);
  }

private:
  Expected<KernelArtifact> load(const std::string& ptx, const std::string& entry, rt::KernelPtr strided = nullptr) {
    if (rt::log_enabled(rt::LogTopic::Ptx)) rt::log_write(rt::LogTopic::Ptx, ptx);
    const std::string key = name_ + "\n" + ptx;
    if (!rt::dump_dir().empty()) {
      char hash[17];
      std::snprintf(hash, sizeof hash, "%016llx", static_cast<unsigned long long>(rt::content_hash(key)));
      rt::dump_write(entry + "-" + hash + ".ptx", ptx);
    }
    const int ordinal = ordinal_;
    rt::KernelPtr k = rt::kernel_cache_get(key, [&]() -> rt::KernelPtr {
      auto kernel = std::make_shared<rt::Kernel>();
      kernel->device = rt::Device{rt::DeviceType::CUDA, ordinal};
      kernel->name = entry;
      kernel->strided = strided;
      if (rt::log_enabled(rt::LogTopic::Kernels) || rt::log_enabled(rt::LogTopic::Ptx)) kernel->listing = ptx;
      // Note [Device modules load when needed]: the driver's JIT runs here, on first use.
      kernel->load = [ptx, entry, ordinal](rt::Kernel& k) -> Status {
        auto ctx = rt::cuda::use_device(ordinal);
        if (!ctx) return ctx.error();
        auto module = rt::cuda::load_ptx(ptx, jit_level());
        if (!module) return module.error();
        auto fn = rt::cuda::function(module->handle, entry.c_str());
        if (!fn) {
          (void)rt::cuda::unload(module->handle);
          return fn.error();
        }
        k.entry = *fn;
        k.module = module->handle;
        CUmoduleHandle handle = module->handle;
        k.release = [handle, ordinal] {
          // The module's context must be current on whichever thread drops the last reference.
          if (rt::cuda::use_device(ordinal)) (void)rt::cuda::unload(handle);
        };
        return Status::ok();
      };
      return kernel;
    });
    if (!k) return Status::internal("CUDA kernel generation failed");
    return k;
  }

  // Another entry of `first`'s module, keeping `first` (and so the module) alive.
  static Expected<KernelArtifact> sibling(const KernelArtifact& first, const std::string& entry) {
    auto kernel = std::make_shared<rt::Kernel>();
    kernel->device = first->device;
    kernel->name = entry;
    kernel->load = [first, entry](rt::Kernel& k) -> Status {
      FJ_PROPAGATE(first->ready());
      auto ctx = rt::cuda::use_device(first->device.index);
      if (!ctx) return ctx.error();
      auto fn = rt::cuda::function(static_cast<rt::cuda::CUmodule>(first->module), entry.c_str());
      if (!fn) return fn.error();
      k.entry = *fn;
      k.module = first->module;
      return Status::ok();
    };
    kernel->release = [first] {};
    return KernelArtifact(kernel);
  }

  // Loads the modules of `kernels` not loaded yet, several at once: the driver's JIT of one module
  // runs on one thread, and a graph's modules are independent.
  Status prepare(const std::vector<rt::KernelPtr>& kernels) override {
    std::vector<const rt::Kernel*> todo;
    for (const rt::KernelPtr& k : kernels)
      if (k && k->load && std::find(todo.begin(), todo.end(), k.get()) == todo.end()) todo.push_back(k.get());
    if (todo.size() <= 1) return todo.empty() ? Status::ok() : todo[0]->ready();
    const size_t workers = std::min<size_t>(todo.size(), std::max(1u, std::min(8u, std::thread::hardware_concurrency())));
    std::atomic<size_t> next{0};
    std::vector<Status> status(todo.size());
    auto work = [&] {
      for (size_t i; (i = next.fetch_add(1)) < todo.size();) status[i] = todo[i]->ready();
    };
    std::vector<std::thread> threads;
    for (size_t t = 1; t < workers; ++t) threads.emplace_back(work);
    work();
    for (std::thread& t : threads) t.join();
    for (const Status& s : status) FJ_PROPAGATE(s);
    return Status::ok();
  }

  using CUmoduleHandle = rt::cuda::CUmodule;
  int ordinal_;
  std::string name_;
};

}  // namespace

Backend& backend(int ordinal) {
  static std::mutex mu;
  static CudaBackend* backends[64] = {};  // NB: immortal, like the kernels' contexts
  std::lock_guard<std::mutex> lock(mu);
  const int i = ordinal >= 0 && ordinal < 64 ? ordinal : 0;
  if (!backends[i]) backends[i] = new CudaBackend(i);
  return *backends[i];
}

}  // namespace framejit::jit::cuda
