// faults.h — switches that make a stage fail on purpose, so tests can check that failures are
// handled (the function runs in CPython; MemoryError reaches the caller; nothing is corrupted).
#pragma once

#include <string_view>

namespace framejit::rt {

enum class Fault : unsigned {
  Codegen = 1u << 0,  // jit::compile_graph fails as if the code generator had
  Alloc = 1u << 1,    // allocating a kernel's output array fails as if memory had run out
};

/// Whether `fault` is switched on: by FRAMEJIT_FAULTS (comma-separated: codegen, alloc), read once,
/// or by set_faults. One relaxed atomic load.
bool fault_active(Fault fault);
/// Replaces the active faults ("" switches all off). Unknown names are ignored.
void set_faults(std::string_view spec);

}  // namespace framejit::rt
