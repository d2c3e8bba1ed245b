// graph.cpp — recording a run's device work and replaying it as a CUDA graph (Note [Replayed
// launches] in graph.h).
#include "runtime/cuda/graph.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/cuda/memory.h"

namespace framejit::rt::cuda {
namespace {

constexpr size_t kMaxInstances = 4;   // shapes of work kept per program
constexpr int kMaxBuilds = 16;        // graphs a program may build before it stops recording
constexpr size_t kMaxChildren = 32;   // captured library calls kept per program
constexpr int kCaptureRelaxed = 2;    // CU_STREAM_CAPTURE_MODE_RELAXED: libraries may allocate
constexpr size_t kArgAlign = 16;      // argument bytes start 16-byte aligned, as in a parameter buffer
constexpr int kMaxDevices = 64;

// One piece of recorded work.
struct Op {
  enum class Kind : uint8_t { Kernel, Memset, Child };
  Kind kind = Kind::Kernel;
  CUfunction function = nullptr;  // Kernel
  Dim3 grid, block;
  unsigned shared = 0;
  uint32_t offset = 0, size = 0;  // Kernel: its parameter's bytes in Work::bytes
  MemsetNodeParams memset{};      // Memset
  uint64_t child_id = 0;          // Child: which capture (GraphCacheState::children)
  CUgraph child = nullptr;        // borrowed from GraphCacheState::children
};

struct Work {
  std::vector<Op> ops;
  std::vector<unsigned char> bytes;
  void clear() {
    ops.clear();
    bytes.clear();
  }
  void* args(const Op& op) const { return const_cast<unsigned char*>(bytes.data() + op.offset); }
};

// Whether a graph node made for `a` can take `b`'s parameters (cuGraphExec*SetParams): the same
// kind of node, a kernel of the same function, block and parameter size, a memset of the same
// dimensions (the driver rejects changed ones). Grids, arguments, memset targets and values, and
// child graphs of the same topology may change.
bool same_node(const Op& a, const Op& b) {
  if (a.kind != b.kind) return false;
  switch (a.kind) {
    case Op::Kind::Kernel:
      return a.function == b.function && a.size == b.size && a.shared == b.shared && a.block.x == b.block.x &&
             a.block.y == b.block.y && a.block.z == b.block.z;
    case Op::Kind::Memset:
      return a.memset.element_size == b.memset.element_size && a.memset.width == b.memset.width &&
             a.memset.height == b.memset.height && a.memset.pitch == b.memset.pitch;
    case Op::Kind::Child: return true;
  }
  return false;
}

KernelNodeParams kernel_params(const Op& op, void** params) {
  KernelNodeParams k{};
  k.func = op.function;
  k.grid_x = op.grid.x, k.grid_y = op.grid.y, k.grid_z = op.grid.z;
  k.block_x = op.block.x, k.block_y = op.block.y, k.block_z = op.block.z;
  k.shared_bytes = op.shared;
  k.params = params;
  return k;
}

struct Instance {
  CUgraph graph = nullptr;
  CUgraphExec exec = nullptr;
  std::vector<CUgraphNode> nodes;  // per op
  Work work;                       // the parameters its nodes hold now
  uint64_t used = 0;               // the serial of the run that last launched it
  ~Instance() {
    auto api = driver();
    if (!api) return;
    // Best effort (the process may be ending); an exec in flight is freed when it completes.
    if (exec) (void)(*api)->GraphExecDestroy(exec);
    if (graph) (void)(*api)->GraphDestroy(graph);
  }
};

struct Child {
  uint64_t id = 0;
  CUgraph graph = nullptr;
  uint64_t used = 0;
};

struct Counters {
  std::atomic<long long> built{0}, replays{0}, patched{0}, flushed{0}, direct{0};
};
Counters& counters() {
  static auto* c = new Counters;  // NB: immortal, as the other runtime statistics
  return *c;
}

}  // namespace

struct GraphCacheState {
  std::mutex mu;  // held by the run recording into it
  // The run recording now.
  int device = -1;
  CUstream stream = nullptr;
  CUcontext ctx = nullptr;
  Work rec;  // NB: reused run after run: recording allocates nothing once warm
  std::vector<void*> deferred;  // device blocks freed during the run
  Status error;                 // the first failure of a flush, reported by finish()
  uint64_t serial = 0;
  // What the program keeps.
  std::vector<std::unique_ptr<Instance>> instances;
  std::map<std::string, Child, std::less<>> children;  // by the library call's key
  uint64_t next_child = 0;
  int builds = 0;
  bool disabled = false;

  ~GraphCacheState() {
    instances.clear();
    auto api = driver();
    if (!api) return;
    for (auto& [key, c] : children) (void)(*api)->GraphDestroy(c.graph);
  }
};

namespace {

thread_local GraphCacheState* t_rec = nullptr;  // the recording active on this thread

// Issues `op` as it would have been without a recording.
Status issue_op(const GraphCacheState& s, const Work& w, const Op& op) {
  const Api& api = **driver();
  switch (op.kind) {
    case Op::Kind::Kernel: {
      void* params[] = {w.args(op)};
      return launch(op.function, op.grid, op.block, op.shared, s.stream, params);
    }
    case Op::Kind::Memset: return issue_memset(op.memset, s.stream);
    case Op::Kind::Child: {
      // A captured library call outside a graph: its own executable graph, launched once (an exec
      // destroyed in flight is freed when it completes).
      CUgraphExec exec = nullptr;
      FJ_PROPAGATE(check(api.GraphInstantiateWithFlags(&exec, op.child, 0), "cuGraphInstantiateWithFlags"));
      const Status launched = check(api.GraphLaunch(exec, s.stream), "cuGraphLaunch");
      (void)api.GraphExecDestroy(exec);
      return launched;
    }
  }
  return Status::ok();
}

Status issue_all(const GraphCacheState& s) {
  for (const Op& op : s.rec.ops) FJ_PROPAGATE(issue_op(s, s.rec, op));
  return Status::ok();
}

void free_deferred(GraphCacheState& s) {
  for (void* p : s.deferred) device_free(p);  // NB: t_rec no longer points at s: freed now
  s.deferred.clear();
}

// Sets the nodes of `inst` whose parameters differ from the recording's; an error when the driver
// refuses an update (the caller rebuilds).
Status patch(const GraphCacheState& s, Instance& inst) {
  const Api& api = **driver();
  long long patched = 0;
  for (size_t i = 0; i < s.rec.ops.size(); ++i) {
    const Op& r = s.rec.ops[i];
    const Op& o = inst.work.ops[i];
    switch (r.kind) {
      case Op::Kind::Kernel: {
        if (r.grid.x == o.grid.x && r.grid.y == o.grid.y && r.grid.z == o.grid.z &&
            std::memcmp(s.rec.args(r), inst.work.args(o), r.size) == 0)
          continue;
        void* params[] = {s.rec.args(r)};
        const KernelNodeParams k = kernel_params(r, params);
        FJ_PROPAGATE(check(api.GraphExecKernelNodeSetParams(inst.exec, inst.nodes[i], &k),
                           "cuGraphExecKernelNodeSetParams"));
        break;
      }
      case Op::Kind::Memset:
        if (r.memset.dst == o.memset.dst && r.memset.value == o.memset.value) continue;
        FJ_PROPAGATE(check(api.GraphExecMemsetNodeSetParams(inst.exec, inst.nodes[i], &r.memset, s.ctx),
                           "cuGraphExecMemsetNodeSetParams"));
        break;
      case Op::Kind::Child:
        if (r.child_id == o.child_id) continue;
        FJ_PROPAGATE(check(api.GraphExecChildGraphNodeSetParams(inst.exec, inst.nodes[i], r.child),
                           "cuGraphExecChildGraphNodeSetParams"));
        break;
    }
    ++patched;
  }
  counters().patched += patched;
  if (patched) {
    inst.work.ops = s.rec.ops;  // NB: same sizes, so the same offsets: capacity reused
    inst.work.bytes = s.rec.bytes;
  }
  return Status::ok();
}

// A graph of the recording: its nodes in a chain, in the order they were issued (a stream's order).
Expected<std::unique_ptr<Instance>> build(const GraphCacheState& s) {
  const Api& api = **driver();
  auto inst = std::make_unique<Instance>();
  FJ_PROPAGATE(check(api.GraphCreate(&inst->graph, 0), "cuGraphCreate"));
  inst->nodes.reserve(s.rec.ops.size());
  CUgraphNode prev = nullptr;
  for (const Op& op : s.rec.ops) {
    CUgraphNode node = nullptr;
    const size_t deps = prev ? 1 : 0;
    switch (op.kind) {
      case Op::Kind::Kernel: {
        void* params[] = {s.rec.args(op)};
        const KernelNodeParams k = kernel_params(op, params);
        FJ_PROPAGATE(check(api.GraphAddKernelNode(&node, inst->graph, &prev, deps, &k), "cuGraphAddKernelNode"));
        break;
      }
      case Op::Kind::Memset:
        FJ_PROPAGATE(check(api.GraphAddMemsetNode(&node, inst->graph, &prev, deps, &op.memset, s.ctx),
                           "cuGraphAddMemsetNode"));
        break;
      case Op::Kind::Child:
        FJ_PROPAGATE(check(api.GraphAddChildGraphNode(&node, inst->graph, &prev, deps, op.child),
                           "cuGraphAddChildGraphNode"));
        break;
    }
    inst->nodes.push_back(node);
    prev = node;
  }
  FJ_PROPAGATE(check(api.GraphInstantiateWithFlags(&inst->exec, inst->graph, 0), "cuGraphInstantiateWithFlags"));
  inst->work = s.rec;
  return inst;
}

Status replay(GraphCacheState& s) {
  Instance* inst = nullptr;
  for (auto& i : s.instances) {
    if (i->work.ops.size() != s.rec.ops.size()) continue;
    bool same = true;
    for (size_t k = 0; k < s.rec.ops.size() && same; ++k) same = same_node(i->work.ops[k], s.rec.ops[k]);
    if (same) {
      inst = i.get();
      break;
    }
  }
  if (inst && !patch(s, *inst).is_ok()) {  // refused: build it afresh
    s.instances.erase(std::find_if(s.instances.begin(), s.instances.end(), [&](auto& i) { return i.get() == inst; }));
    inst = nullptr;
  }
  if (!inst) {
    Expected<std::unique_ptr<Instance>> built =
        s.builds < kMaxBuilds ? build(s) : Status::unsupported("the program's work changes shape from run to run");
    if (!built) {  // no graph takes it: plain launches, now and from now on
      s.disabled = true;
      ++counters().direct;
      return issue_all(s);
    }
    ++s.builds;
    ++counters().built;
    if (s.instances.size() >= kMaxInstances)
      s.instances.erase(std::min_element(s.instances.begin(), s.instances.end(),
                                         [](auto& a, auto& b) { return a->used < b->used; }));
    s.instances.push_back(std::move(*built));
    inst = s.instances.back().get();
  }
  inst->used = s.serial;
  ++counters().replays;
  return check((*driver())->GraphLaunch(inst->exec, s.stream), "cuGraphLaunch");
}

// A stream per device that only ever captures (never runs work): library calls are captured there.
Expected<CUstream> capture_stream(int device) {
  static std::mutex mu;
  static CUstream streams[kMaxDevices] = {};
  if (device < 0 || device >= kMaxDevices)
    return Status::invalid("CUDA device " + std::to_string(device) + " is out of range");
  std::lock_guard<std::mutex> lock(mu);
  if (!streams[device]) {
    constexpr unsigned kNonBlocking = 1;
    FJ_PROPAGATE(check((*driver())->StreamCreate(&streams[device], kNonBlocking), "cuStreamCreate"));
  }
  return streams[device];
}

}  // namespace

GraphCache::GraphCache() : state_(std::make_unique<GraphCacheState>()) {}
GraphCache::~GraphCache() = default;

GraphRun::GraphRun(GraphCache& cache, int device, CUstream stream) {
  if (t_rec) {  // runs do not nest: what the outer one recorded issues first, then this one directly
    (void)flush_recording();  // NB: a failure is the outer run's to report (GraphCacheState::error)
    return;
  }
  GraphCacheState& s = *cache.state_;
  if (s.disabled || !s.mu.try_lock()) return;
  auto api = driver();
  CUcontext ctx = nullptr;
  if (!api || (*api)->CtxGetCurrent(&ctx) != kSuccess || !ctx) {
    s.mu.unlock();
    return;
  }
  s.device = device;
  s.stream = stream;
  s.ctx = ctx;
  s.rec.clear();
  s.error = Status::ok();
  ++s.serial;
  t_rec = &s;
  state_ = &s;
}

GraphRun::~GraphRun() { (void)finish(); }

Status GraphRun::finish() {
  GraphCacheState* s = state_;
  if (!s) return Status::ok();
  state_ = nullptr;
  const bool flushed = t_rec != s;
  if (!flushed) t_rec = nullptr;
  Status st = s->error;
  if (st.is_ok() && !flushed && !s->rec.ops.empty()) st = replay(*s);
  s->rec.clear();
  free_deferred(*s);
  s->error = Status::ok();
  s->mu.unlock();
  return st;
}

bool recording() { return t_rec != nullptr; }

Status flush_recording() {
  GraphCacheState* s = t_rec;
  if (!s) return Status::ok();
  t_rec = nullptr;
  ++counters().flushed;
  Status st = issue_all(*s);
  s->rec.clear();
  free_deferred(*s);  // issued in order: the stream's order protects them from here on
  if (!st.is_ok() && s->error.is_ok()) s->error = st;
  return st;
}

bool records(int device, CUstream stream) {
  GraphCacheState* s = t_rec;
  if (!s) return false;
  if (s->device == device && s->stream == stream) return true;
  (void)flush_recording();  // NB: a failure is reported by the run's finish()
  return false;
}

Status record_kernel(CUfunction f, Dim3 grid, Dim3 block, unsigned shared_bytes, const void* args, size_t size) {
  Work& w = t_rec->rec;
  Op op;
  op.kind = Op::Kind::Kernel;
  op.function = f;
  op.grid = grid;
  op.block = block;
  op.shared = shared_bytes;
  op.offset = static_cast<uint32_t>((w.bytes.size() + kArgAlign - 1) / kArgAlign * kArgAlign);
  op.size = static_cast<uint32_t>(size);
  w.bytes.resize(op.offset + size);
  std::memcpy(w.bytes.data() + op.offset, args, size);
  w.ops.push_back(op);
  return Status::ok();
}

Status record_memset(const MemsetNodeParams& params) {
  Op op;
  op.kind = Op::Kind::Memset;
  op.memset = params;
  t_rec->rec.ops.push_back(op);
  return Status::ok();
}

Status issue_library_call(int device, CUstream stream, const void* key, size_t key_size,
                          FunctionRef<Status(CUstream)> issue) {
  if (!records(device, stream)) return issue(stream);
  GraphCacheState& s = *t_rec;
  const std::string_view k(static_cast<const char*>(key), key_size);
  auto it = s.children.find(k);
  if (it == s.children.end()) {
    const Api& api = **driver();
    Expected<CUstream> cs = capture_stream(device);
    CUgraph g = nullptr;
    bool captured = false;
    if (cs && api.StreamBeginCapture(*cs, kCaptureRelaxed) == kSuccess) {
      const Status issued = issue(*cs);
      captured = api.StreamEndCapture(*cs, &g) == kSuccess && g && issued.is_ok();
    }
    if (!captured) {  // the library would not be captured: what was recorded, then the call, directly
      if (g) (void)api.GraphDestroy(g);
      FJ_PROPAGATE(flush_recording());
      return issue(stream);
    }
    if (s.children.size() >= kMaxChildren) {  // forget captures no run used lately (none of this one's)
      for (auto c = s.children.begin(); c != s.children.end();) {
        if (c->second.used == s.serial) {
          ++c;
          continue;
        }
        (void)api.GraphDestroy(c->second.graph);
        c = s.children.erase(c);
      }
    }
    it = s.children.emplace(std::string(k), Child{++s.next_child, g, s.serial}).first;
  }
  it->second.used = s.serial;
  Op op;
  op.kind = Op::Kind::Child;
  op.child_id = it->second.id;
  op.child = it->second.graph;
  s.rec.ops.push_back(op);
  return Status::ok();
}

bool defer_free(void* p) {
  if (!t_rec) return false;
  t_rec->deferred.push_back(p);
  return true;
}

GraphStats graph_stats() {
  Counters& c = counters();
  return {c.built.load(), c.replays.load(), c.patched.load(), c.flushed.load(), c.direct.load()};
}

}  // namespace framejit::rt::cuda
