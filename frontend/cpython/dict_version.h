// dict_version.h — a dict's version tag: the cheap "has this dict changed" test hot-path caches use.
#pragma once

#include <Python.h>

#include <cstdint>

namespace framejit::frontend {

// Note [Dict version tags]
// CPython 3.11-3.13 give every dict a version tag, unique in the interpreter, on creation and on
// every change of an entry (storing the value an entry already holds is no change). So an
// unchanged (address, tag) pair is the same live dict with the same entries, and a value looked
// up in it earlier is still there, alive. Caches on the hot path (guard lookups of globals and
// module attributes, NumPy 1's error state) answer from that pair instead of a lookup. 3.12
// deprecates the field (PEP 699) and 3.14 drops it; there the caches are compiled out.
#if PY_VERSION_HEX < 0x030E0000
#define FRAMEJIT_HAVE_DICT_VERSION 1
/// `dict`'s version tag (Note [Dict version tags]). `dict` must be a dict.
inline uint64_t dict_version_tag(PyObject* dict) {
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
  return reinterpret_cast<PyDictObject*>(dict)->ma_version_tag;
#pragma GCC diagnostic pop
}
#endif

}  // namespace framejit::frontend
