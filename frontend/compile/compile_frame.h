// compile_frame.h — the cold path of one frame: trace, run the graph passes, hand the graph to the
// backend, and make the cache entry (or a graph-break entry).
#pragma once

#include <Python.h>

#include <memory>

#include "frontend/cache/code_state.h"
#include "frontend/options/config.h"
#include "frontend/guards/source.h"

namespace framejit::frontend {

/// Compiles the frame of `fn` as it is now. Returns the new entry; a trace that broke gives an
/// entry without a program, whose `broke` says why and where. Null with a Python exception set
/// when fullgraph=True forbids the break (framejit.Unsupported; `*broke` is then set to the break
/// when given) — and null without an exception for an internal failure, after warning once (the
/// caller runs the frame in CPython and stops compiling it).
std::unique_ptr<CacheEntry> compile_frame(const CompileConfig& cfg, PyFunctionObject* fn,
                                          const FrameView& view, CodeState& state,
                                          GraphBreak* broke = nullptr);

/// The graph breaks and recompiles seen so far, per function and reason, for the topics
/// FRAMEJIT_LOGS enables (breaks, recompiles); empty when neither is on.
std::string event_summary();

/// The framejit.Unsupported exception type (borrowed); created by the bindings.
PyObject*& unsupported_error();

}  // namespace framejit::frontend
