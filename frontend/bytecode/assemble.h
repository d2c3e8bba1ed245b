// assemble.h — an edited Bytecode back into a code object.
#pragma once

#include <Python.h>

#include <string>
#include <vector>

#include "framejit/status.h"
#include "frontend/bytecode/instruction.h"
#include "frontend/cpython/pyref.h"

namespace framejit::frontend::bytecode {

/// The four fields the assembler computes.
struct Assembled {
  std::string code;            // co_code: instructions, EXTENDED_ARG prefixes, zeroed caches
  std::string exception_table; // co_exceptiontable
  std::string line_table;      // co_linetable
  int stack_size = 0;          // co_stacksize
};

/// Lays out `bc`: picks jump opargs (and 3.11's jump directions) until every EXTENDED_ARG
/// prefix is stable, then writes the tables and computes the stack depth.
Expected<Assembled> assemble_tables(const Bytecode &bc);

/// The deepest value stack any path reaches, exception handlers included (the compiler's
/// stackdepth() over the final instructions). Fails on inconsistent or negative depths.
Expected<int> stack_depth(const Bytecode &bc);

/// The value-stack depth on entry to each instruction of `bc` (-1: unreachable from the entry or
/// from a reachable instruction's handler), and the deepest one in `*max_depth` if given.
Expected<std::vector<int>> stack_depths(const Bytecode &bc, int *max_depth = nullptr);

/// A new code object: `bc.code.replace(co_code=..., co_consts=..., co_names=..., co_varnames=...,
/// co_nlocals=..., co_exceptiontable=..., co_linetable=..., co_stacksize=..., co_firstlineno=...,
/// **bc.overrides)`.
Expected<OwnedRef> assemble(const Bytecode &bc);

} // namespace framejit::frontend::bytecode
