// locals.h — adding a local variable to a Bytecode: co_varnames grows and every instruction that
// names a local or a cell by its index (CPython 3.11+ "localsplus" numbering) is renumbered.
#pragma once

#include <Python.h>

#include <string>
#include <vector>

#include "framejit/status.h"
#include "frontend/bytecode/instruction.h"

namespace framejit::frontend::bytecode {

/// Inserts `name` (a str; borrowed) into co_varnames at `position` (<= the current count) and
/// renumbers LOAD_FAST & co. and the cell/free-variable opcodes (MAKE_CELL, LOAD_DEREF, ...,
/// whose index counts varnames first). 3.13's two-local superinstructions are split where an
/// index no longer fits in 4 bits. To make the new local an argument, insert it within the first
/// co_argcount names and raise co_argcount through Bytecode::overrides. Returns the new index.
Expected<int> insert_local(Bytecode &bc, size_t position, PyObject *name);

/// One of 3.13's two-local superinstructions (LOAD_FAST_LOAD_FAST ...) as two plain ones appended
/// to `out`: `ins` becomes (first, x), then (second, y) follows. The second keeps the position and
/// handler but not the label, so jumps land on the first.
void append_split_pair(std::vector<Instruction> &out, Instruction ins, int first, int x, int second, int y);

/// A code object's (borrowed) tuple of names `attr` ("co_varnames", "co_cellvars", ...), as
/// strings; InvalidArgument naming `who` when it is not a tuple of str.
Expected<std::vector<std::string>> code_names(PyObject *code, const char *attr, const char *who);

/// The three name tuples localsplus is numbered from (varnames, then the cells that are not also
/// varnames, then the free variables), read with code_names.
struct LocalNames {
  std::vector<std::string> var, cell, free;
};
Expected<LocalNames> local_names(PyObject *code, const char *who); // borrowed

} // namespace framejit::frontend::bytecode
