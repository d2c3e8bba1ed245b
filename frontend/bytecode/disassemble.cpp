// disassemble.cpp — code object -> Bytecode (see disassemble.h).
#include "frontend/bytecode/disassemble.h"

#include <string>
#include <vector>

#include "frontend/bytecode/opcode_facts.h"
#include "frontend/bytecode/tables.h"

namespace framejit::frontend::bytecode {

namespace {

// A bytes attribute of the code object. co_code is the deoptimized copy CPython makes for
// Python code (caches zeroed, no specialized or instrumented opcodes), not the live bytecode.
Expected<OwnedRef> bytes_attr(PyObject *code, const char *name) {   // code: borrowed
  OwnedRef v = OwnedRef::steal(PyObject_GetAttrString(code, name)); // new ref
  if (!v)
    return Status::invalid(std::string(name) + ": " + fetch_error_text());
  if (!PyBytes_Check(v.get()))
    return Status::invalid(std::string(name) + " is not bytes");
  return v;
}

Expected<std::vector<OwnedRef>> tuple_attr(PyObject *code, const char *name) { // borrowed
  OwnedRef v = OwnedRef::steal(PyObject_GetAttrString(code, name));            // new ref
  if (!v)
    return Status::invalid(std::string(name) + ": " + fetch_error_text());
  if (!PyTuple_Check(v.get()))
    return Status::invalid(std::string(name) + " is not a tuple");
  std::vector<OwnedRef> out;
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(v.get()); ++i)
    out.push_back(OwnedRef::borrow(PyTuple_GET_ITEM(v.get(), i))); // borrowed -> new ref
  return out;
}

const uint8_t *data_of(const OwnedRef &b) {
  return reinterpret_cast<const uint8_t *>(PyBytes_AS_STRING(b.get()));
}

} // namespace

Expected<Bytecode> disassemble(PyObject *code) { // borrowed
  if (!code || !PyCode_Check(code))
    return Status::invalid("disassemble: not a code object");
  Bytecode bc;
  bc.code = OwnedRef::borrow(code);
  bc.first_line = reinterpret_cast<PyCodeObject *>(code)->co_firstlineno;

  Expected<OwnedRef> raw = bytes_attr(code, "co_code");
  if (!raw)
    return raw.error();
  Expected<OwnedRef> etab = bytes_attr(code, "co_exceptiontable");
  if (!etab)
    return etab.error();
  Expected<OwnedRef> ltab = bytes_attr(code, "co_linetable");
  if (!ltab)
    return ltab.error();
  Expected<std::vector<OwnedRef>> consts = tuple_attr(code, "co_consts");
  if (!consts)
    return consts.error();
  Expected<std::vector<OwnedRef>> names = tuple_attr(code, "co_names");
  if (!names)
    return names.error();
  Expected<std::vector<OwnedRef>> varnames = tuple_attr(code, "co_varnames");
  if (!varnames)
    return varnames.error();
  bc.varnames = std::move(*varnames);
  bc.consts = std::move(*consts);
  bc.names = std::move(*names);

  const Py_ssize_t nbytes = PyBytes_GET_SIZE(raw->get());
  if (nbytes % 2 != 0)
    return Status::invalid("co_code has an odd length");
  const int units = static_cast<int>(nbytes / 2);
  const uint8_t *p = data_of(*raw);

  // Pass 1: instructions, each starting at its first EXTENDED_ARG.
  std::vector<int> instr_at(static_cast<size_t>(units) + 1, -1); // code unit -> instruction index
  std::vector<int> ends;                                         // unit after each one's caches
  int start = 0;
  unsigned ext = 0;
  for (int u = 0; u < units;) {
    const int op = p[2 * u];
    const unsigned arg = (ext << 8) | p[2 * u + 1];
    if (op == EXTENDED_ARG) {
      ext = arg;
      ++u;
      continue;
    }
    int effect;
    if (op == 0 /* CACHE */ || !stack_effect(op, static_cast<int>(arg), false, &effect))
      return Status::invalid("co_code has unknown opcode " + std::to_string(op) + " at unit " +
                             std::to_string(u));
    const int end = u + 1 + cache_entries(op);
    if (end > units)
      return Status::invalid("co_code ends inside an instruction's inline cache");
    Instruction ins = Instruction::make(op, static_cast<int>(arg));
    ins.offset = start;
    instr_at[static_cast<size_t>(start)] = static_cast<int>(bc.instructions.size());
    bc.instructions.push_back(ins);
    ends.push_back(end);
    u = end;
    start = u;
    ext = 0;
  }
  if (start != units)
    return Status::invalid("co_code ends with EXTENDED_ARG");
  instr_at[static_cast<size_t>(units)] = static_cast<int>(bc.instructions.size());

  // Labels: one per instruction something refers to, numbered in order of first reference.
  auto label_for_unit = [&](int unit, Label *out) -> bool {
    if (unit < 0 || unit >= units || instr_at[static_cast<size_t>(unit)] < 0)
      return false;
    *out = bc.label_at(static_cast<size_t>(instr_at[static_cast<size_t>(unit)]));
    return true;
  };

  // Pass 2: jump targets.
  for (size_t i = 0; i < bc.instructions.size(); ++i) {
    Instruction &ins = bc.instructions[i];
    const JumpKind kind = jump_kind(ins.opcode);
    if (kind == JumpKind::None)
      continue;
    const int target = kind == JumpKind::Forward ? ends[i] + ins.oparg : ends[i] - ins.oparg;
    Label l;
    if (!label_for_unit(target, &l))
      return Status::invalid("jump at unit " + std::to_string(ins.offset) +
                             " does not land on an instruction");
    ins.target = l;
  }

  // Pass 3: exception handlers.
  Expected<std::vector<ExceptionEntry>> entries = decode_exception_table(
      data_of(*etab), static_cast<size_t>(PyBytes_GET_SIZE(etab->get())), units);
  if (!entries)
    return entries.error();
  for (const ExceptionEntry &e : *entries) {
    Label handler;
    if (!label_for_unit(e.target, &handler))
      return Status::invalid("exception handler at unit " + std::to_string(e.target) +
                             " is not an instruction");
    const int first = instr_at[static_cast<size_t>(e.start)];
    const int last = instr_at[static_cast<size_t>(e.end)];
    if (first < 0 || last < 0)
      return Status::invalid("exception-table range [" + std::to_string(e.start) + ", " +
                             std::to_string(e.end) + ") splits an instruction");
    for (int k = first; k < last; ++k)
      bc.instructions[static_cast<size_t>(k)].handler = {handler, e.depth, e.lasti};
  }

  // Pass 4: positions, from the first code unit of each instruction.
  Expected<std::vector<Position>> locs = decode_locations(
      data_of(*ltab), static_cast<size_t>(PyBytes_GET_SIZE(ltab->get())), bc.first_line, units);
  if (!locs)
    return locs.error();
  for (Instruction &ins : bc.instructions)
    ins.pos = (*locs)[static_cast<size_t>(ins.offset)];
  return bc;
}

} // namespace framejit::frontend::bytecode
