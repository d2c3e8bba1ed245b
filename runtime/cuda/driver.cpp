// driver.cpp — loading libcuda.so.1, resolving its entry points, and the checked calls on top.
#include "runtime/cuda/driver.h"

#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <mutex>
#include <string>
#include <type_traits>
#include <vector>

namespace framejit::rt::cuda {
namespace {

// Note [Loading the driver]
// The driver is a shared library every machine with an NVIDIA GPU has (the toolkit is another
// matter), so framejit opens it at run time and links against nothing CUDA: a build without
// CUDA installed runs on a GPU machine, and a CPU machine never pays for it. Entry points come
// from cuGetProcAddress (CUDA >= 11.3) rather than dlsym: asked for an ABI version, it returns the
// matching variant of each function (cuMemAlloc's 64-bit _v2, which cuda.h selects by macro), and
// the per-thread-stream variants are never picked by accident. kAbiVersion is the version whose
// signatures Api declares.
constexpr int kAbiVersion = 12000;
// cuGetProcAddress_v2 (CUDA 12) adds a status out-parameter; the first version (11.3) has none.
using GetProcAddressV2 = CUresult (*)(const char*, void**, int, uint64_t, int*);
using GetProcAddressV1 = CUresult (*)(const char*, void**, int, uint64_t);

struct Driver {
  std::mutex mu;
  bool tried = false;
  int pid = 0;  // the process that loaded it (Note [CUDA and fork])
  Api api{};
  Status status;
  int version = 0;
  // Primary contexts retained by use_device, per ordinal (released by the driver at exit).
  std::vector<CUcontext> contexts;
};

// The entry points once loaded() has succeeded in this process (never unset: they stay valid).
std::atomic<const Api*> g_loaded_api{nullptr};

Driver& state() {
  static Driver* d = new Driver;  // NB: never destroyed: kernels may be unloaded at exit
  return *d;
}

std::string dl_error() {
  const char* e = dlerror();
  return e ? e : "unknown error";
}

Status load(Driver& d) {
  const char* env = std::getenv("FRAMEJIT_CUDA_DRIVER");
  const std::string path = env && *env ? env : "libcuda.so.1";
  // NB: never closed: module handles and contexts live as long as the process.
  void* lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!lib) return Status::unsupported("no CUDA driver: cannot load " + path + " (" + dl_error() + ")");
  auto v2 = reinterpret_cast<GetProcAddressV2>(dlsym(lib, "cuGetProcAddress_v2"));
  auto v1 = v2 ? nullptr : reinterpret_cast<GetProcAddressV1>(dlsym(lib, "cuGetProcAddress"));
  if (!v2 && !v1)
    return Status::unsupported("the CUDA driver in " + path + " is older than CUDA 11.3 (it has no cuGetProcAddress)");
  Status missing = Status::ok();
  auto resolve = [&](auto& fn, const char* name) {
    void* p = nullptr;
    int found = 0;
    const CUresult r = v2 ? v2(name, &p, kAbiVersion, 0, &found) : v1(name, &p, kAbiVersion, 0);
    if (r != kSuccess || !p) {
      if (missing.is_ok()) missing = Status::unsupported("the CUDA driver in " + path + " has no " + name);
      return;
    }
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(p);
  };
  Api& a = d.api;
  resolve(a.Init, "cuInit");
  resolve(a.DriverGetVersion, "cuDriverGetVersion");
  resolve(a.GetErrorName, "cuGetErrorName");
  resolve(a.GetErrorString, "cuGetErrorString");
  resolve(a.DeviceGetCount, "cuDeviceGetCount");
  resolve(a.DeviceGet, "cuDeviceGet");
  resolve(a.DeviceGetName, "cuDeviceGetName");
  resolve(a.DeviceGetAttribute, "cuDeviceGetAttribute");
  resolve(a.DeviceTotalMem, "cuDeviceTotalMem");
  resolve(a.DevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
  resolve(a.CtxSetCurrent, "cuCtxSetCurrent");
  resolve(a.CtxGetCurrent, "cuCtxGetCurrent");
  resolve(a.CtxSynchronize, "cuCtxSynchronize");
  resolve(a.ModuleLoadDataEx, "cuModuleLoadDataEx");
  resolve(a.ModuleUnload, "cuModuleUnload");
  resolve(a.ModuleGetFunction, "cuModuleGetFunction");
  resolve(a.LaunchKernel, "cuLaunchKernel");
  resolve(a.MemAlloc, "cuMemAlloc");
  resolve(a.MemFree, "cuMemFree");
  resolve(a.MemcpyHtoD, "cuMemcpyHtoD");
  resolve(a.MemcpyDtoH, "cuMemcpyDtoH");
  resolve(a.MemcpyHtoDAsync, "cuMemcpyHtoDAsync");
  resolve(a.MemcpyDtoHAsync, "cuMemcpyDtoHAsync");
  resolve(a.MemcpyDtoDAsync, "cuMemcpyDtoDAsync");
  resolve(a.MemsetD8Async, "cuMemsetD8Async");
  resolve(a.MemsetD16Async, "cuMemsetD16Async");
  resolve(a.MemsetD32Async, "cuMemsetD32Async");
  resolve(a.MemsetD2D32Async, "cuMemsetD2D32Async");
  resolve(a.StreamCreate, "cuStreamCreate");
  resolve(a.StreamDestroy, "cuStreamDestroy");
  resolve(a.StreamSynchronize, "cuStreamSynchronize");
  resolve(a.EventCreate, "cuEventCreate");
  resolve(a.EventDestroy, "cuEventDestroy");
  resolve(a.EventRecord, "cuEventRecord");
  resolve(a.EventSynchronize, "cuEventSynchronize");
  resolve(a.EventElapsedTime, "cuEventElapsedTime");
  resolve(a.StreamBeginCapture, "cuStreamBeginCapture");  // _v2 at kAbiVersion: it takes a mode
  resolve(a.StreamEndCapture, "cuStreamEndCapture");
  resolve(a.GraphCreate, "cuGraphCreate");
  resolve(a.GraphDestroy, "cuGraphDestroy");
  resolve(a.GraphAddKernelNode, "cuGraphAddKernelNode");  // _v2: KernelNodeParams
  resolve(a.GraphAddMemsetNode, "cuGraphAddMemsetNode");
  resolve(a.GraphAddChildGraphNode, "cuGraphAddChildGraphNode");
  resolve(a.GraphInstantiateWithFlags, "cuGraphInstantiateWithFlags");
  resolve(a.GraphExecDestroy, "cuGraphExecDestroy");
  resolve(a.GraphLaunch, "cuGraphLaunch");
  resolve(a.GraphExecKernelNodeSetParams, "cuGraphExecKernelNodeSetParams");  // _v2
  resolve(a.GraphExecMemsetNodeSetParams, "cuGraphExecMemsetNodeSetParams");
  resolve(a.GraphExecChildGraphNodeSetParams, "cuGraphExecChildGraphNodeSetParams");
  FJ_PROPAGATE(missing);
  FJ_PROPAGATE(check(a.Init(0), "cuInit"));
  FJ_PROPAGATE(check(a.DriverGetVersion(&d.version), "cuDriverGetVersion"));
  return Status::ok();
}

// Note [CUDA and fork]
// A CUDA context does not survive fork(): the child of a process that initialized the driver
// must not call it (the driver's documented rule; calls fail or hang). So the driver is loaded
// per process, and a child whose parent had loaded it gets a clear error instead of a call.
Expected<Driver*> loaded() {
  Driver& d = state();
  std::lock_guard<std::mutex> lock(d.mu);
  const int pid = static_cast<int>(getpid());
  if (d.tried && d.pid != pid) {
    if (d.status.is_ok())
      return Status::unsupported("CUDA was initialized before this process was forked; a forked child cannot use it");
    d.tried = false;  // the parent never got a driver: this process may try on its own
  }
  if (!d.tried) {
    d.tried = true;
    d.pid = pid;
    d.api = Api{};
    d.status = load(d);
  }
  if (!d.status.is_ok()) return d.status;
  g_loaded_api.store(&d.api, std::memory_order_release);
  return &d;
}

}  // namespace

Expected<const Api*> driver() {
  auto d = loaded();
  if (!d) return d.error();
  return &(*d)->api;
}

Status check(CUresult result, std::string_view what) {
  if (result == kSuccess) return Status::ok();
  const Api& a = state().api;  // NB: the names resolve before cuInit, so they explain its failure too
  const char* name = nullptr;
  const char* text = nullptr;
  if (a.GetErrorName) a.GetErrorName(result, &name);
  if (a.GetErrorString) a.GetErrorString(result, &text);
  std::string m(what);
  m += ": ";
  m += name ? name : "CUDA error " + std::to_string(result);
  if (text) m += std::string(" (") + text + ")";
  return Status::internal(std::move(m));
}

Expected<int> device_count() {
  auto api = driver();
  if (!api) return api.error();
  int n = 0;
  FJ_PROPAGATE(check((*api)->DeviceGetCount(&n), "cuDeviceGetCount"));
  return n;
}

namespace {

Expected<CUdevice> device_of(const Api& a, int ordinal) {
  int n = 0;
  FJ_PROPAGATE(check(a.DeviceGetCount(&n), "cuDeviceGetCount"));
  if (ordinal < 0 || ordinal >= n)
    return Status::invalid("no CUDA device " + std::to_string(ordinal) + " (the driver sees " + std::to_string(n) + ")");
  CUdevice dev = 0;
  FJ_PROPAGATE(check(a.DeviceGet(&dev, ordinal), "cuDeviceGet"));
  return dev;
}

}  // namespace

Expected<DeviceInfo> device_info(int ordinal) {
  auto d = loaded();
  if (!d) return d.error();
  const Api& a = (*d)->api;
  auto dev = device_of(a, ordinal);
  if (!dev) return dev.error();
  DeviceInfo info;
  info.ordinal = ordinal;
  info.driver_version = (*d)->version;
  char name[256] = {};
  FJ_PROPAGATE(check(a.DeviceGetName(name, sizeof name - 1, *dev), "cuDeviceGetName"));
  info.name = name;
  // CU_DEVICE_ATTRIBUTE_*: MULTIPROCESSOR_COUNT 16, COMPUTE_CAPABILITY_MAJOR 75, _MINOR 76,
  // MAX_SHARED_MEMORY_PER_MULTIPROCESSOR 81.
  FJ_PROPAGATE(check(a.DeviceGetAttribute(&info.multiprocessors, 16, *dev), "cuDeviceGetAttribute"));
  FJ_PROPAGATE(check(a.DeviceGetAttribute(&info.shared_per_multiprocessor, 81, *dev), "cuDeviceGetAttribute"));
  FJ_PROPAGATE(check(a.DeviceGetAttribute(&info.cc_major, 75, *dev), "cuDeviceGetAttribute"));
  FJ_PROPAGATE(check(a.DeviceGetAttribute(&info.cc_minor, 76, *dev), "cuDeviceGetAttribute"));
  FJ_PROPAGATE(check(a.DeviceTotalMem(&info.memory_bytes, *dev), "cuDeviceTotalMem"));
  return info;
}

Expected<CUcontext> use_device(int ordinal) {
  auto d = loaded();
  if (!d) return d.error();
  Driver& drv = **d;
  const Api& a = drv.api;
  CUcontext ctx = nullptr;
  {
    std::lock_guard<std::mutex> lock(drv.mu);
    if (ordinal >= 0 && ordinal < static_cast<int>(drv.contexts.size())) ctx = drv.contexts[ordinal];
    if (!ctx) {
      auto dev = device_of(a, ordinal);
      if (!dev) return dev.error();
      // Retained once for the process, never released: compiled kernels live in it until exit.
      FJ_PROPAGATE(check(a.DevicePrimaryCtxRetain(&ctx, *dev), "cuDevicePrimaryCtxRetain"));
      if (static_cast<int>(drv.contexts.size()) <= ordinal) drv.contexts.resize(ordinal + 1, nullptr);
      drv.contexts[ordinal] = ctx;
    }
  }
  CUcontext current = nullptr;
  FJ_PROPAGATE(check(a.CtxGetCurrent(&current), "cuCtxGetCurrent"));
  if (current != ctx) FJ_PROPAGATE(check(a.CtxSetCurrent(ctx), "cuCtxSetCurrent"));
  return ctx;
}

ContextScope::ContextScope() {
  // Every device run makes one: the entry points loaded() published, without its lock and getpid.
  api_ = g_loaded_api.load(std::memory_order_acquire);
  if (api_ && api_->CtxGetCurrent(&saved_) != kSuccess) saved_ = nullptr;
}

ContextScope::~ContextScope() {
  if (!saved_) return;  // the thread had none (or no driver): ours may stay
  CUcontext now = nullptr;
  if (api_->CtxGetCurrent(&now) == kSuccess && now != saved_) (void)api_->CtxSetCurrent(saved_);
}

namespace {
std::mutex g_module_mu;
ModuleStats g_modules;
}  // namespace

ModuleStats module_stats() {
  std::lock_guard<std::mutex> lock(g_module_mu);
  return g_modules;
}

Expected<Module> load_ptx(std::string_view ptx, int opt_level) {
  auto api = driver();
  if (!api) return api.error();
  const Api& a = **api;
  const std::string image(ptx);  // the driver reads a NUL-terminated string
  std::vector<char> log(16 << 10, '\0');
  // CUjit_option: ERROR_LOG_BUFFER 5, ERROR_LOG_BUFFER_SIZE_BYTES 6, OPTIMIZATION_LEVEL 7.
  int options[] = {5, 6, 7};
  void* values[] = {log.data(), reinterpret_cast<void*>(static_cast<uintptr_t>(log.size() - 1)),
                    reinterpret_cast<void*>(static_cast<uintptr_t>(std::clamp(opt_level, 0, 4)))};
  Module m;
  const auto t0 = std::chrono::steady_clock::now();
  const CUresult r = a.ModuleLoadDataEx(&m.handle, image.c_str(), 3, options, values);
  m.jit_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  if (r != kSuccess) {
    Status s = check(r, "cuModuleLoadDataEx");
    const std::string text(log.data());
    return Status::internal(s.message() + (text.empty() ? "" : "\n" + text));
  }
  std::lock_guard<std::mutex> lock(g_module_mu);
  ++g_modules.loaded;
  ++g_modules.live;
  g_modules.jit_ms += m.jit_ms;
  return m;
}

Status unload(CUmodule module) {
  auto api = driver();
  if (!api) return api.error();
  {
    std::lock_guard<std::mutex> lock(g_module_mu);
    --g_modules.live;
  }
  return check((*api)->ModuleUnload(module), "cuModuleUnload");
}

Expected<CUfunction> function(CUmodule module, const char* name) {
  auto api = driver();
  if (!api) return api.error();
  CUfunction f = nullptr;
  FJ_PROPAGATE(check((*api)->ModuleGetFunction(&f, module, name), std::string("cuModuleGetFunction ") + name));
  return f;
}

Status launch(CUfunction f, Dim3 grid, Dim3 block, unsigned shared_bytes, CUstream stream, void** params) {
  auto api = driver();
  if (!api) return api.error();
  return check((*api)->LaunchKernel(f, grid.x, grid.y, grid.z, block.x, block.y, block.z, shared_bytes, stream,
                                    params, nullptr),
               "cuLaunchKernel");
}

Status issue_memset(const MemsetNodeParams& m, CUstream stream) {
  auto api = driver();
  if (!api) return api.error();
  const Api& a = **api;
  if (m.height > 1) {
    if (m.element_size != 4) return Status::internal("a 2-D memset of other than 4-byte elements");
    return check(a.MemsetD2D32Async(m.dst, m.pitch, m.value, m.width, m.height, stream), "cuMemsetD2D32Async");
  }
  switch (m.element_size) {
    case 1:
      return check(a.MemsetD8Async(m.dst, static_cast<unsigned char>(m.value), m.width, stream), "cuMemsetD8Async");
    case 2:
      return check(a.MemsetD16Async(m.dst, static_cast<unsigned short>(m.value), m.width, stream), "cuMemsetD16Async");
    case 4: return check(a.MemsetD32Async(m.dst, m.value, m.width, stream), "cuMemsetD32Async");
    default: return Status::internal("a memset of " + std::to_string(m.element_size) + "-byte elements");
  }
}

}  // namespace framejit::rt::cuda
