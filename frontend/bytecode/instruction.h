// instruction.h — an editable CPython 3.11-3.13 function body: instructions with label jump
// targets, source positions and exception-table membership (Note [Editable bytecode]).
#pragma once

#include <Python.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "frontend/cpython/pyref.h"

namespace framejit::frontend::bytecode {

// Note [Editable bytecode]
// CPython stores a function as bytes (co_code) plus two side tables keyed by byte offset: the
// exception table and the location table. Any edit shifts every offset after it, so offsets are
// not what the list holds. Instead:
//   - a jump's target and an exception handler are Labels: ids that name an instruction by its
//     `label` field, whatever index it ends up at;
//   - inline CACHE units and EXTENDED_ARG prefixes are not instructions: the assembler derives
//     both from the opcode and the final oparg;
//   - each instruction carries its own Position and ExceptHandler, so an instruction inserted
//     anywhere is located and protected by copying them from a neighbour.
// assemble() turns the list back into co_code, co_exceptiontable, co_linetable and co_stacksize,
// choosing jump opargs (and the 3.11 forward/backward jump variants) from the final layout.

/// Names an instruction for jumps and exception handlers; kNoLabel names none.
using Label = int32_t;
constexpr Label kNoLabel = -1;

/// A source span, CPython's co_positions() entry. line < 0: no location (CPython's None).
/// col < 0: the line is known but not the columns.
struct Position {
  int line = -1;
  int end_line = -1;
  int col = -1;
  int end_col = -1;

  bool has_line() const { return line >= 0; }
  bool operator==(const Position &o) const {
    return line == o.line && end_line == o.end_line && col == o.col && end_col == o.end_col;
  }
  bool operator!=(const Position &o) const { return !(*this == o); }
};

/// Which handler catches an exception raised by an instruction (an exception-table entry that
/// covers it): the handler's label, the value-stack depth the handler starts from (items below
/// the exception) and whether the offset of the raising instruction is pushed too (lasti).
struct ExceptHandler {
  Label target = kNoLabel;
  int depth = 0;
  bool lasti = false;

  bool active() const { return target != kNoLabel; }
  bool operator==(const ExceptHandler &o) const {
    return target == o.target && depth == o.depth && lasti == o.lasti;
  }
  bool operator!=(const ExceptHandler &o) const { return !(*this == o); }
};

/// One instruction: this interpreter's opcode number (<opcode.h>) and its full argument.
/// For a jump, `target` says where it goes and `oparg` is ignored: the assembler computes it.
struct Instruction {
  int opcode = 0;
  int oparg = 0;
  Label target = kNoLabel; // jumps only
  Label label = kNoLabel;  // this instruction's own name, if anything refers to it
  Position pos;
  ExceptHandler handler;
  int offset = -1; // code unit it started at when disassembled; -1 for new ones

  static Instruction make(int opcode, int oparg = 0, Position pos = {}) {
    Instruction i;
    i.opcode = opcode;
    i.oparg = oparg;
    i.pos = pos;
    return i;
  }
  static Instruction jump(int opcode, Label target, Position pos = {}) {
    Instruction i = make(opcode, 0, pos);
    i.target = target;
    return i;
  }
};

/// A code object taken apart: its instructions plus the tables instructions index into
/// (co_consts, co_names, co_varnames), all growable. `code` is the original code object; assemble()
/// builds the new one as `code.replace(...)`, so everything not listed here (varnames, freevars,
/// flags, argcount, name, qualname, firstlineno) is kept unless `overrides` names it.
struct Bytecode {
  OwnedRef code; // the code object this came from (new ref held)
  std::vector<Instruction> instructions;
  std::vector<OwnedRef> consts;   // co_consts, in order (new refs held)
  std::vector<OwnedRef> names;    // co_names, in order (new refs held)
  std::vector<OwnedRef> varnames; // co_varnames (locals, arguments first); see locals.h
  int first_line = 0;             // co_firstlineno: line positions are absolute, not relative
  /// Extra keyword arguments for code.replace(), e.g. {"co_name", PyUnicode}. Applied last.
  std::vector<std::pair<std::string, OwnedRef>> overrides;

  /// A fresh label, not yet on any instruction.
  Label new_label() { return next_label_++; }
  /// The label of instructions[index], giving it one if it has none.
  Label label_at(size_t index);
  /// Index of `value` in consts: an existing entry if it is the very same object, else appended.
  int add_const(PyObject *value); // borrowed
  /// Index of the str `name` in names, appended if absent (compared by value, as CPython does).
  int add_name(PyObject *name); // borrowed
  int add_name(const char *name);
  /// Index of the instruction carrying `label`, or -1.
  int index_of(Label label) const;

  // For the disassembler: labels it hands out continue after the ones it used.
  void reserve_labels(Label next) { next_label_ = next; }

private:
  Label next_label_ = 0;
};

} // namespace framejit::frontend::bytecode
