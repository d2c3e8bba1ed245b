// config.h — compile options of one framejit.compile()/install(), global settings and counters.
#pragma once

#include <Python.h>

#include <string>
#include <utility>
#include <vector>

#include "frontend/cpython/pyref.h"

namespace framejit::frontend {

/// One graph break as explain() reports it (frontend/trace/graph_break.h has the whole record).
struct ExplainBreak {
  std::string kind;    // break_kind_name()
  std::string reason;  // the message, with file:line when located
  OwnedRef exc_type;   // the exception CPython raises there, or null
  OwnedRef filename;   // str, or null
  int lineno = -1;
  int offset = -1;                 // byte offset of the root frame's instruction
  std::vector<std::string> stack;  // the root frame's stack at that instruction, bottom first
  std::vector<std::pair<std::string, std::string>> locals;  // its bound locals: name, what it is
  bool resumed = false;   // the graph before it ran and a resume function took over after it
  std::string no_resume;  // else why the whole frame ran in CPython (empty: nothing to say)
};

/// What explain() collects while it runs a function.
struct ExplainRecord {
  std::vector<std::string> graphs;        // printed graphs
  std::vector<std::string> break_reasons;
  std::vector<ExplainBreak> breaks;  // the same breaks, as data
  std::vector<std::string> guards;
  int op_count = 0;
};

/// Options of one framejit.compile() wrapper or of install(). Immutable once made; cache entries
/// remember which config's backend made them.
struct CompileConfig {
  OwnedRef backend;       // "jit", "eager" or a callable
  bool fullgraph = false;
  bool dynamic = true;    // dynamic=None and True: sizes other than 0/1 are symbolic
  PyObject* root_code = nullptr;  // borrowed (the wrapper holds the function): traced even if it is
                                  // library code, because the user asked for it by name
  ExplainRecord* explain = nullptr;  // set: trace every frame afresh, record, do not cache
  /// mode="reduce-overhead": device programs replay their launches as CUDA graphs (Note [Replayed
  /// launches] in runtime/cuda/graph.h). The cache entry is the same as without it: the mode is
  /// read when a program runs.
  bool reduce_overhead = false;
  bool partial_graphs = true;  // a break keeps the graph before it (Note [Break entries]); Tensor
                               // ops, which run whole or on NumPy, turn it off
  bool is_callable_backend() const { return backend && !PyUnicode_Check(backend.get()); }
};

struct Settings {
  int recompile_limit = 8;
};
Settings& settings();

struct Stats {
  long long frames = 0;        // frames the hook considered
  long long captured = 0;      // graphs compiled
  long long cache_hits = 0;
  long long cache_misses = 0;
  long long recompiles = 0;    // compiles of a code object that already had an entry
  long long graph_breaks = 0;
  long long unsupported_frames = 0;  // frames that ran in CPython past the recompile limit
  long long skipped_codes = 0;  // code objects that touched no arrays: never traced again
  double compile_ms = 0;       // cumulative: trace + passes + backend
  double trace_ms = 0;
  long long ops = 0;           // call nodes in compiled graphs
  // "jit" backend: how the graphs' nodes run.
  long long kernels = 0;       // fused pointwise kernels
  long long reductions = 0;    // row-reduction kernels
  long long gemms = 0;         // matrix products on framejit's GEMM
  long long loops = 0;         // Python loops compiled as loops (Note [Element loops])
  long long extern_calls = 0;  // nodes run one by one through NumPy (the last resort)
};
Stats& stats();

}  // namespace framejit::frontend
