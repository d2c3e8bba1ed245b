// graph.h — a run's device work recorded and issued as one CUDA graph launch, the graph kept per
// program and patched run by run (mode="reduce-overhead").
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "framejit/status.h"
#include "runtime/cuda/driver.h"
#include "runtime/function_ref.h"

namespace framejit::rt::cuda {

// Note [Replayed launches]
// A small program on a GPU is bound by the host: each kernel launch is some microseconds of
// driver work, and a run of a dozen kernels costs more on the CPU than on the device. With
// mode="reduce-overhead" a run records what it would issue on its stream — framejit's kernel
// launches with their argument bytes, driver memsets (creations, small uploads), and library
// calls (cuBLASLt's products, captured by stream capture into a child graph once per distinct
// call) — and at its end issues all of it as one cuGraphLaunch. The graph is built once per
// program (a cache entry) and per shape of its work (up to kMaxInstances), and a later run
// compares its recording with it node by node and patches only the nodes whose arguments differ
// (new input or output pointers, sizes, scalar values) with cuGraphExec*SetParams. Nothing is
// copied into static buffers, unlike torch.compile's CUDA graphs (which copy inputs into the
// graph's memory and hand back outputs the next replay overwrites): inputs are read where they
// lie, outputs are the library's fresh arrays, as without graphs.
//
// Deferring the issue is sound only while nothing can observe the device between recording and
// replay:
//  - work that is not recorded (an extern step's library call, a copy to the host, another stream
//    or device, a nested program) first issues what was recorded, in order, as plain launches
//    (flush_recording), and the rest of the run issues directly: correct, just not replayed;
//  - memory a recorded node may touch is not given back before the replay is issued: device
//    blocks freed during the run (device_free) and the library's arrays the run releases (the
//    host defers them while recording()) go back after it, so no allocator hands them out, trims
//    or unmaps them under nodes that have not run. The price: intermediates are not reused
//    within a run;
//  - a program's graphs serve one run at a time (graph objects are not thread-safe): a run that
//    finds them busy issues directly.
// A program whose work changes shape run after run stops recording after kMaxBuilds graphs:
// building and instantiating one costs more than the launches it saves.

struct GraphCacheState;

/// The CUDA graphs of one program: destroyed with it.
class GraphCache {
public:
  GraphCache();
  ~GraphCache();
  GraphCache(const GraphCache&) = delete;
  GraphCache& operator=(const GraphCache&) = delete;

private:
  friend class GraphRun;
  std::unique_ptr<GraphCacheState> state_;
};

/// One run's recording. While alive and active(), the device work this thread issues for
/// (device, stream) through framejit's launch layer is recorded; finish() issues it. Runs do not
/// nest: a recording already active on the thread is flushed first, and this one stays inactive.
class GraphRun {
public:
  GraphRun(GraphCache& cache, int device, CUstream stream);
  ~GraphRun();  // finish()es if the caller did not (errors are then lost: call finish())
  GraphRun(const GraphRun&) = delete;
  GraphRun& operator=(const GraphRun&) = delete;
  bool active() const { return state_ != nullptr; }
  /// Issues what was recorded — one graph launch, or plain launches when no graph can take it —
  /// then gives back the memory freed during the run.
  Status finish();

private:
  GraphCacheState* state_ = nullptr;  // non-null while recording (the cache's lock held)
};

/// Whether this thread is recording device work (hosts then defer releasing their arrays).
bool recording();
/// Issues what this thread has recorded, in order, as plain launches, and stops recording for the
/// rest of the run. Ok when nothing is recorded.
Status flush_recording();

// The launch layer's side.
/// Whether work for (device, stream) is to be recorded. A recording for another device or stream
/// is flushed first (the work then issues directly, in order).
bool records(int device, CUstream stream);
/// Records a launch of `f` whose one kernel parameter is the `size` bytes at `args`.
Status record_kernel(CUfunction f, Dim3 grid, Dim3 block, unsigned shared_bytes, const void* args, size_t size);
/// Records a memset (the driver's cuMemsetD*: `width` elements of `element_size` bytes per row,
/// `height` rows `pitch` bytes apart).
Status record_memset(const MemsetNodeParams& params);
/// Runs a library call that issues its work on the stream it is given: on `stream`, or, when
/// records(device, stream), captured into a child graph of the recording — once per distinct
/// `key` (the `key_size` bytes at `key`: everything the call's work depends on), reused after.
Status issue_library_call(int device, CUstream stream, const void* key, size_t key_size,
                          FunctionRef<Status(CUstream)> issue);
/// Gives `p` (a device_alloc block) back after the recording's replay is issued; false when this
/// thread is not recording (the caller frees it now).
bool defer_free(void* p);

struct GraphStats {
  long long built = 0;          // graphs instantiated
  long long replays = 0;        // runs issued as one graph launch
  long long patched_nodes = 0;  // nodes whose parameters a replay changed
  long long flushed = 0;        // runs that issued directly from a point on (unrecordable work)
  long long direct = 0;         // runs recorded but issued as plain launches (no graph would take them)
};
GraphStats graph_stats();

}  // namespace framejit::rt::cuda
