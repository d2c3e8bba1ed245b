// torch_array.h — torch.Tensor as the runtime sees it: memory read through DLPack, results
// allocated by torch (Note [Torch arrays]).
#pragma once

#include <Python.h>

#include <optional>

#include "framejit/status.h"
#include "frontend/interop/array_adapter.h"
#include "runtime/dtype.h"

namespace framejit::frontend {

// Note [Torch arrays]
// framejit links no libtorch: torch's C++ ABI differs between releases and builds (Debian's 1.13
// here, a 2.x wheel on the GPU machine), so everything goes through torch's Python surface, read
// once per value and run. A tensor's memory comes from its DLPack export (which, unlike
// `__dlpack__()`, also takes tensors that require grad): data, sizes and element strides
// with no copy. The export's capsule must outlive the fields read from it, so the adapter keeps
// each export, with its strides in bytes, in a small table for the length of a run: a
// ArrayRunScope around the hit path (and any other code that reads fields) clears the table when
// the outermost one ends. Only CPU and CUDA tensors in torch's strided layout are arrays here;
// others are not this adapter's (Note [Torch tensors on a GPU]). The export is torch._C._to_dlpack, the C function under __dlpack__: torch
// 2.x's __dlpack__ is Python code that checks its keyword arguments, several microseconds a tensor.
// Results are torch tensors that torch owns (their storage's deleter frees them); torch allocates
// small ones (torch.empty), and large ones are pool blocks handed over through DLPack (Note [Torch
// results from the pool]). torch.Tensor.permute makes the permuted views of results laid out
// axis-permuted.
// Note [Torch tensors on a GPU]
// A CUDA tensor's export carries its device (kDLCUDA and the ordinal): its graph runs on the CUDA
// backend (Note [One device per graph]). torch orders its work on the current stream of each
// device, and framejit takes part in that order: a program on torch's CUDA tensors issues every
// launch and copy on torch's current stream (read per run through
// torch._C._cuda_getCurrentRawStream, the C function torch.cuda.current_stream() wraps), under a
// rt::cuda::StreamScope, so it sees the inputs torch's earlier kernels wrote and torch's later
// kernels see its results, with no synchronization. Results and intermediates come from torch's
// own caching allocator (torch.empty on the device), which records them against that stream as
// it does for its own ops; the few scratch blocks framejit allocates itself (reduction partials)
// return to framejit's cache under that stream (Note [One stream per device]).
// Nothing imports torch: until the program has imported it, no torch tensor can exist, and the
// handles below stay unset (torch_handles() looks for the module in sys.modules).

constexpr int kMaxTorchDevices = 16;

/// torch's objects, once the process has imported torch; null before.
struct TorchHandles {
  PyObject* module = nullptr;             // torch
  PyTypeObject* tensor_base = nullptr;    // torch._C._TensorBase: every tensor, Parameters included
  PyTypeObject* tensor = nullptr;         // torch.Tensor
  PyObject* empty = nullptr;              // torch.empty
  PyObject* to_dlpack = nullptr;          // torch._C._to_dlpack (Tensor.__dlpack__'s C core)
  PyObject* from_dlpack = nullptr;        // torch._C._from_dlpack
  PyObject* dtypes[rt::kNumDTypes] = {};  // torch.<dtype name>, null where torch has no such type
  PyObject* cpu = nullptr;                // torch.device('cpu')
  PyObject* current_stream = nullptr;     // torch._C._cuda_getCurrentRawStream, or null (no CUDA build)
  PyObject* get_device = nullptr;         // torch._C._cuda_getDevice, or null
  PyObject* empty_strided_cuda = nullptr;  // torch._C._dynamo.guards._empty_strided_cuda (torch >= 2.3), or null
  mutable PyObject* cuda[kMaxTorchDevices] = {};  // torch.device('cuda', i), made on first use
  PyObject* strided = nullptr;            // torch.strided
  PyTypeObject* dtype_type = nullptr;     // torch.dtype
  PyTypeObject* device_type = nullptr;    // torch.device
  // Grad-mode context managers (Note [Grad-mode blocks]) and the switch a run flips.
  PyObject* no_grad = nullptr;            // torch.no_grad
  PyObject* enable_grad = nullptr;        // torch.enable_grad
  PyObject* inference_mode = nullptr;     // torch.inference_mode
  PyObject* set_grad_enabled = nullptr;   // torch._C._set_grad_enabled
  int major = 0;                          // torch.__version__'s major number
};
const TorchHandles* torch_handles();

/// Whether `o` (borrowed) is a torch tensor of any subclass. False before torch is imported.
bool is_torch_tensor(PyObject* o);
/// The DType of a torch.dtype object (borrowed); none for dtypes framejit does not have.
std::optional<rt::DType> dtype_of_torch(PyObject* dtype);

/// torch's current stream on CUDA device `index` (a CUstream; null is the legacy default stream),
/// or an error when torch cannot say (a torch built without CUDA).
Expected<void*> torch_current_stream(int index);

/// torch.is_grad_enabled() (false when it cannot be asked); once per run inside an ArrayRunScope.
bool torch_grad_enabled();

/// Turns torch's grad mode off for its lifetime and back on after, when it was on: a program
/// whose graph reads tensors that require grad runs its torch calls so (Note [Grad-mode blocks]).
class TorchGradOff {
public:
  TorchGradOff();
  ~TorchGradOff();
  TorchGradOff(const TorchGradOff&) = delete;
  TorchGradOff& operator=(const TorchGradOff&) = delete;

private:
  bool restore_ = false;
};

/// What a run reads of a torch tensor, from its one export of the run: its memory and whether it
/// requires grad. None when `o` is not a CPU tensor of a strided layout and a dtype framejit has.
struct TorchTensorFacts {
  ArrayFields fields;
  bool requires_grad = false;
};
std::optional<TorchTensorFacts> torch_tensor_facts(PyObject* o);

/// Registers the torch adapter for ArrayKind::Torch (module init).
void register_torch_adapter();

}  // namespace framejit::frontend
