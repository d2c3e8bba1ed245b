// opcodes.h — the per-CPython-version opcode facts the tracer needs (inline cache sizes, jump
// directions). Opcode numbers come from the interpreter's own <opcode.h>.
#pragma once

#include <Python.h>
#include <opcode.h>

namespace framejit::frontend {

#if PY_VERSION_HEX >= 0x030B0000 && PY_VERSION_HEX < 0x030C0000
/// Code units of inline cache that follow an instruction (CPython 3.11's _PyOpcode_Caches).
constexpr int inline_cache_entries(int op) {
  switch (op) {
    case BINARY_SUBSCR: return 4;
    case STORE_SUBSCR: return 1;
    case UNPACK_SEQUENCE: return 1;
    case STORE_ATTR: return 4;
    case LOAD_ATTR: return 4;
    case COMPARE_OP: return 2;
    case LOAD_GLOBAL: return 5;
    case BINARY_OP: return 1;
    case LOAD_METHOD: return 10;
    case PRECALL: return 1;
    case CALL: return 4;
    default: return 0;
  }
}
#else
#error "framejit's tracer supports CPython 3.11 (3.12 and 3.13 tables come with their own issue)"
#endif

}  // namespace framejit::frontend
