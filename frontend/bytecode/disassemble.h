// disassemble.h — a code object taken apart into an editable Bytecode.
#pragma once

#include <Python.h>

#include "framejit/status.h"
#include "frontend/bytecode/instruction.h"

namespace framejit::frontend::bytecode {

/// Decodes `code` (a code object; borrowed) from its deoptimized co_code: EXTENDED_ARG folded
/// into opargs, CACHE units dropped, jump offsets turned into labels, co_exceptiontable into
/// per-instruction handlers and co_linetable into per-instruction positions. Malformed input of
/// any kind is an InvalidArgument Status, never a crash.
Expected<Bytecode> disassemble(PyObject *code);

} // namespace framejit::frontend::bytecode
