// source.h — where a traced value came from (a local, a global, an attribute of ...), and how to
// fetch it again from a frame without running user code.
#pragma once

#include <Python.h>

#include <cstdint>
#include <memory>
#include <string>

#include "frontend/cpython/dict_version.h"
#include "frontend/cpython/pyref.h"

namespace framejit::frontend {

/// The parts of a frame that sources are rooted in. All borrowed.
struct FrameView {
  PyObject** localsplus = nullptr;  // fast locals, as the frame holds them
  PyObject* globals = nullptr;
  PyObject* builtins = nullptr;
  PyObject* closure = nullptr;  // the function's closure tuple of cells, or nullptr
};

enum class SourceKind : uint8_t {
  Local,         // localsplus[index]; name = the variable's name
  Global,        // globals[key], else builtins[key] (LOAD_GLOBAL's lookup order)
  Closure,       // closure[index].cell_contents (the frame function's free variables)
  ModuleAttr,    // base.__dict__[key] for a module
  InstanceAttr,  // base.__dict__[key] for an ordinary object
  TypeAttr,      // lookup of key along type(base)'s MRO, or base's own MRO when base is a class
  DictItem,      // base[key] for an exact dict
  SeqItem,       // base[index] for an exact list or tuple
  FuncDefault,   // base.__defaults__[index]
  FuncKwDefault, // base.__kwdefaults__[key]
  FuncCell,      // base.__closure__[index].cell_contents
  FuncGlobal,    // base.__globals__[key], else base's builtins[key] (an inlined function's globals)
  SuperAttr,     // super(key[0], base).key[1] unbound: key[1] along type(base)'s MRO after key[0]
  MethodSelf,    // base.__self__ of a bound method
  MethodFunc,    // base.__func__ of a bound method
};

/// An immutable chain of accessors from a frame root to a value.
struct Source {
  SourceKind kind;
  std::shared_ptr<const Source> base;  // null for roots
  int index = -1;
  OwnedRef key;      // attribute name (str) or dict key (str/int)
  std::string name;  // a local's name, used in printing

  /// Dynamo-like text: L['x'], G['np'], C['w'], L['self'].w, L['d']['k'], L['xs'][0].
  std::string to_string() const;
  /// Identity of one accessor step (kind + index/key), for sharing guard-tree nodes.
  bool same_step(const Source& o) const;
  bool same_as(const Source& o) const;
};
using SourcePtr = std::shared_ptr<const Source>;

SourcePtr local_source(int index, std::string name);
SourcePtr global_source(PyObject* name);  // borrowed
SourcePtr closure_source(int index, std::string name);
SourcePtr child_source(SourceKind kind, SourcePtr base, PyObject* key);  // key borrowed
SourcePtr child_source(SourceKind kind, SourcePtr base, int index);

/// Fetches one accessor step from `base` (borrowed result, or nullptr when absent). Never runs user
/// code and never leaves an exception set. For roots, `base` is ignored and `frame` is used.
PyObject* fetch_step(const Source& step, const FrameView& frame, PyObject* base);
/// `name` in the classes after `start` in `type`'s MRO (borrowed, or nullptr): what
/// super(start, obj).name finds, before binding. A builtin (static) type on the way is looked up
/// with its own whole MRO, which can only stop the search early, never pick a wrong Python class.
PyObject* super_lookup(PyTypeObject* type, PyObject* start, PyObject* name);

/// Fetches a whole chain.
PyObject* fetch_source(const Source& src, const FrameView& frame);

}  // namespace framejit::frontend
