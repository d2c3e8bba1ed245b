// driver.h — the CUDA driver API, dlopen'ed: its entry points, one error check, devices, the
// primary context, PTX modules and launches. Nothing from the CUDA toolkit is needed to build or
// run this: the few types the driver's ABI uses are declared here.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "framejit/status.h"

namespace framejit::rt::cuda {

// The driver's ABI types (cuda.h spells them the same; handles are opaque pointers).
using CUresult = int;
using CUdevice = int;
using CUdeviceptr = uint64_t;
using CUcontext = struct CUctx_st*;
using CUmodule = struct CUmod_st*;
using CUfunction = struct CUfunc_st*;
using CUstream = struct CUstream_st*;
using CUevent = struct CUevent_st*;
using CUgraph = struct CUgraph_st*;
using CUgraphNode = struct CUgraphNode_st*;
using CUgraphExec = struct CUgraphExec_st*;
constexpr CUresult kSuccess = 0;

// CUDA_KERNEL_NODE_PARAMS (_v2, CUDA 12) and CUDA_MEMSET_NODE_PARAMS as cuda.h lays them out.
struct KernelNodeParams {
  CUfunction func;
  unsigned grid_x, grid_y, grid_z;
  unsigned block_x, block_y, block_z;
  unsigned shared_bytes;
  void** params;
  void** extra;
  void* kern;  // CUkernel: unused (func is set)
  CUcontext ctx;
};
struct MemsetNodeParams {
  CUdeviceptr dst;
  size_t pitch;
  unsigned value;
  unsigned element_size;  // 1, 2 or 4
  size_t width;           // elements
  size_t height;          // rows
};

/// The entry points framejit calls, each resolved through cuGetProcAddress at the ABI version
/// named in driver.cpp (so cuMemAlloc is the 64-bit `_v2` one, whatever the header macros say).
struct Api {
  CUresult (*Init)(unsigned flags);
  CUresult (*DriverGetVersion)(int* version);
  CUresult (*GetErrorName)(CUresult error, const char** name);
  CUresult (*GetErrorString)(CUresult error, const char** text);
  CUresult (*DeviceGetCount)(int* count);
  CUresult (*DeviceGet)(CUdevice* device, int ordinal);
  CUresult (*DeviceGetName)(char* name, int length, CUdevice device);
  CUresult (*DeviceGetAttribute)(int* value, int attribute, CUdevice device);
  CUresult (*DeviceTotalMem)(size_t* bytes, CUdevice device);
  CUresult (*DevicePrimaryCtxRetain)(CUcontext* context, CUdevice device);
  CUresult (*CtxSetCurrent)(CUcontext context);
  CUresult (*CtxGetCurrent)(CUcontext* context);
  CUresult (*CtxSynchronize)();
  CUresult (*ModuleLoadDataEx)(CUmodule* module, const void* image, unsigned num_options, int* options,
                               void** values);
  CUresult (*ModuleUnload)(CUmodule module);
  CUresult (*ModuleGetFunction)(CUfunction* function, CUmodule module, const char* name);
  CUresult (*LaunchKernel)(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                           unsigned bz, unsigned shared_bytes, CUstream stream, void** params, void** extra);
  CUresult (*MemAlloc)(CUdeviceptr* ptr, size_t bytes);
  CUresult (*MemFree)(CUdeviceptr ptr);
  CUresult (*MemcpyHtoD)(CUdeviceptr dst, const void* src, size_t bytes);
  CUresult (*MemcpyDtoH)(void* dst, CUdeviceptr src, size_t bytes);
  CUresult (*MemcpyHtoDAsync)(CUdeviceptr dst, const void* src, size_t bytes, CUstream stream);
  CUresult (*MemcpyDtoHAsync)(void* dst, CUdeviceptr src, size_t bytes, CUstream stream);
  CUresult (*MemcpyDtoDAsync)(CUdeviceptr dst, CUdeviceptr src, size_t bytes, CUstream stream);
  CUresult (*MemsetD8Async)(CUdeviceptr dst, unsigned char value, size_t bytes, CUstream stream);
  CUresult (*MemsetD16Async)(CUdeviceptr dst, unsigned short value, size_t count, CUstream stream);
  CUresult (*MemsetD32Async)(CUdeviceptr dst, unsigned value, size_t count, CUstream stream);
  CUresult (*MemsetD2D32Async)(CUdeviceptr dst, size_t pitch, unsigned value, size_t width, size_t height,
                               CUstream stream);
  CUresult (*StreamCreate)(CUstream* stream, unsigned flags);
  CUresult (*StreamDestroy)(CUstream stream);
  CUresult (*StreamSynchronize)(CUstream stream);
  CUresult (*EventCreate)(CUevent* event, unsigned flags);
  CUresult (*EventDestroy)(CUevent event);
  CUresult (*EventRecord)(CUevent event, CUstream stream);
  CUresult (*EventSynchronize)(CUevent event);
  CUresult (*EventElapsedTime)(float* ms, CUevent start, CUevent end);
  // CUDA graphs (Note [Replayed launches] in runtime/cuda/graph.h).
  CUresult (*StreamBeginCapture)(CUstream stream, int mode);
  CUresult (*StreamEndCapture)(CUstream stream, CUgraph* graph);
  CUresult (*GraphCreate)(CUgraph* graph, unsigned flags);
  CUresult (*GraphDestroy)(CUgraph graph);
  CUresult (*GraphAddKernelNode)(CUgraphNode* node, CUgraph graph, const CUgraphNode* deps, size_t num_deps,
                                 const KernelNodeParams* params);
  CUresult (*GraphAddMemsetNode)(CUgraphNode* node, CUgraph graph, const CUgraphNode* deps, size_t num_deps,
                                 const MemsetNodeParams* params, CUcontext ctx);
  CUresult (*GraphAddChildGraphNode)(CUgraphNode* node, CUgraph graph, const CUgraphNode* deps, size_t num_deps,
                                     CUgraph child);
  CUresult (*GraphInstantiateWithFlags)(CUgraphExec* exec, CUgraph graph, unsigned long long flags);
  CUresult (*GraphExecDestroy)(CUgraphExec exec);
  CUresult (*GraphLaunch)(CUgraphExec exec, CUstream stream);
  CUresult (*GraphExecKernelNodeSetParams)(CUgraphExec exec, CUgraphNode node, const KernelNodeParams* params);
  CUresult (*GraphExecMemsetNodeSetParams)(CUgraphExec exec, CUgraphNode node, const MemsetNodeParams* params,
                                           CUcontext ctx);
  CUresult (*GraphExecChildGraphNodeSetParams)(CUgraphExec exec, CUgraphNode node, CUgraph child);
};

/// The driver, loaded and initialized on first use (once per process, thread-safe; a fork()
/// child of a process that loaded it gets an error, Note [CUDA and fork]). Never crashes: without libcuda.so.1 (FRAMEJIT_CUDA_DRIVER names another
/// file), with a driver too old for an entry point, or when cuInit fails (no device, no
/// permission), the error says which, in the driver's own words where it has some.
Expected<const Api*> driver();

/// Ok for CUDA_SUCCESS; otherwise an internal error "<what>: CUDA_ERROR_<NAME> (<the driver's
/// text>)". Every driver call goes through it.
Status check(CUresult result, std::string_view what);

struct DeviceInfo {
  int ordinal = 0;
  std::string name;
  int cc_major = 0, cc_minor = 0;  // compute capability: 9.0 for H100 / H200
  int multiprocessors = 0;
  int shared_per_multiprocessor = 0;  // bytes of shared memory an SM has for its blocks
  size_t memory_bytes = 0;
  int driver_version = 0;  // 13000 for CUDA 13.0
};
/// How many devices the driver sees (an error when it cannot be loaded).
Expected<int> device_count();
Expected<DeviceInfo> device_info(int ordinal);

/// Device `ordinal`'s primary context — the one the runtime API, PyTorch and CuPy use — retained
/// once for the process and made current on the calling thread.
Expected<CUcontext> use_device(int ordinal);

// Note [Whose current context]
// The calling thread's current context is shared state: the CUDA runtime, and so torch and CuPy,
// take it as the thread's current device (torch.cuda.set_device makes a primary context current).
// So framejit never trusts that the context it made current is still current (the stream lookup
// checks it on every call), and a run on a device puts back, when it ends, the context the caller
// had: a framejit call on cuda:0 does not move torch's current device from cuda:1.
class ContextScope {
public:
  ContextScope();  // records the current context (the driver must be loaded)
  ~ContextScope();  // makes it current again if it changed
  ContextScope(const ContextScope&) = delete;
  ContextScope& operator=(const ContextScope&) = delete;

private:
  const Api* api_ = nullptr;
  CUcontext saved_ = nullptr;
};

/// A PTX module loaded by the driver's JIT (cuModuleLoadDataEx). `jit_ms` is the load's wall time:
/// PTX-to-SASS, or a hit in the driver's disk cache.
struct Module {
  CUmodule handle = nullptr;
  double jit_ms = 0;
};
/// Loads `ptx` (the text of a whole module) into the current context with JIT optimization level
/// `opt_level` (0–4). A rejected module's error carries the driver's error log.
Expected<Module> load_ptx(std::string_view ptx, int opt_level = 4);
Status unload(CUmodule module);
/// Modules loaded by load_ptx in this process and their total JIT time (framejit.stats()).
struct ModuleStats {
  long long loaded = 0;
  long long live = 0;
  double jit_ms = 0;
};
ModuleStats module_stats();
Expected<CUfunction> function(CUmodule module, const char* name);

struct Dim3 {
  unsigned x = 1, y = 1, z = 1;
};
/// Launches `f` on `stream` (null: the legacy default stream) with kernel parameters `params`
/// (cuLaunchKernel's array of pointers to each argument).
Status launch(CUfunction f, Dim3 grid, Dim3 block, unsigned shared_bytes, CUstream stream, void** params);
/// Issues the memset `m` describes on `stream` (cuMemsetD8/D16/D32Async, or cuMemsetD2D32Async
/// for more than one row, whose elements must be 4 bytes): the same work as a graph node of it.
Status issue_memset(const MemsetNodeParams& m, CUstream stream);

}  // namespace framejit::rt::cuda
