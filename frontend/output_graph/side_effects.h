// side_effects.h — stores the traced code makes outside its frame (attributes, globals, closure
// cells, outside lists and dicts): logged while tracing, replayed after the graph runs.
#pragma once

#include <Python.h>

#include <cstdint>
#include <vector>

#include "frontend/cpython/pyref.h"
#include "frontend/guards/source.h"
#include "frontend/output_graph/output_graph.h"
#include "frontend/variables/variables.h"

namespace framejit::frontend {

// Note [Side effects]
// A store into something that existed before the call (`self.m = ...`, `global n; n += 1`,
// `nonlocal c`, `xs.append(v)`, `d[k] = v`, `xs[i] = v` on an argument) is not performed while
// tracing: the tracer logs it (Tracer::effects_) and answers later reads in the same trace from
// the log (read-after-write), so the trace sees what eager code would. When the trace ends — at
// its return or at a graph break — every logged store becomes a Replay: its target is how the hit
// path finds the object (a guard slot, the frame's globals or closure, or an object the entry
// holds because a guard pins it), its value an OutputSpec over the graph's outputs (arrays and
// numbers computed by the graph come out of it; constants are constants; lists, tuples and dicts
// made by the trace are rebuilt). The hit path replays them in program order right after the
// program runs: before the return value is built on the normal path, and before the break code
// runs at a graph break, so the instruction CPython runs there sees exactly eager's state.
// A store made inside the instruction that breaks (an inlined call that breaks after storing) is
// dropped: CPython runs that whole instruction again.
// Replays borrow the program's outputs: an output the return value also uses is the same object
// in both places (`self.m = m; return m`), and outputs only replays use are released after.

enum class EffectKind : uint8_t {
  SetAttr,     // setattr(target, key, value)
  SetItem,     // target[key] = value (an outside list or dict; the global dict for globals)
  SetCell,     // target.cell_contents = value
  ListAppend,  // target.append(value)
};

/// Where a replay finds the object it stores into.
struct EffectTarget {
  enum class Kind : uint8_t {
    Slot,         // the guard slot `index` (an object read from a source)
    Held,         // `obj`, which a guard pins (an inlined function's globals dict or cell)
    RootGlobals,  // the frame's globals dict
    RootCell,     // the frame function's closure cell `index`
  };
  Kind kind = Kind::Slot;
  int index = -1;
  OwnedRef obj;
};

/// One store as the tracer logged it.
struct LoggedEffect {
  EffectKind kind = EffectKind::SetAttr;
  EffectTarget target;
  OwnedRef key;   // SetAttr: the name; SetItem: the key (a constant)
  VarPtr value;
};

/// One store as the hit path replays it.
struct Replay {
  EffectKind kind = EffectKind::SetAttr;
  EffectTarget target;
  OwnedRef key;
  OutputSpec value;  // Value items borrow the program's outputs (Note [Side effects])
};

struct Replays {
  std::vector<Replay> steps;      // in program order
  std::vector<int> own_outputs;   // program outputs that only the replays use
  bool empty() const { return steps.empty(); }
};

/// Replays `r` after a program whose outputs are `outputs` (new refs, not consumed here), with the
/// frame's guard slots and view. False with a Python exception set when a store raised (the
/// stores before it stay done, as in eager code). Never throws.
bool replay_effects(const Replays& r, PyObject* const* outputs, PyObject* const* slots,
                    const FrameView& view) noexcept;

/// Releases the outputs that only the replays used (after the return value took its own).
void release_replay_outputs(const Replays& r, PyObject** outputs) noexcept;

}  // namespace framejit::frontend
