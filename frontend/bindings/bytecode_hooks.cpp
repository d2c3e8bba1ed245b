// bytecode_hooks.cpp — private _C._bytecode_* test entry points for frontend/bytecode: round
// trips, edits that must not change behaviour, and the tables the tests check against CPython's.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "frontend/bytecode/assemble.h"
#include "frontend/bytecode/disassemble.h"
#include "frontend/bytecode/locals.h"
#include "frontend/bytecode/opcode_facts.h"

namespace py = pybind11;
namespace bc = framejit::frontend::bytecode;

namespace {

bc::Bytecode disassemble_or_throw(py::handle code) {
  framejit::Expected<bc::Bytecode> b = bc::disassemble(code.ptr());
  if (!b)
    throw py::value_error("bytecode: " + b.error().message());
  return std::move(*b);
}

py::object assemble_or_throw(const bc::Bytecode &b) {
  framejit::Expected<framejit::frontend::OwnedRef> code = bc::assemble(b);
  if (!code)
    throw py::value_error("bytecode: " + code.error().message());
  return py::reinterpret_steal<py::object>(code->release());
}

// Inserts before every `every_n`-th instruction (where the interpreter allows it): a NOP, or
// LOAD_CONST <const>; POP_TOP when `value` is given (a new const unless already present). With
// move_labels, jumps and handlers that went to the instruction now go to the inserted code.
py::object insert_nops(py::object code, int every_n, py::object value, bool move_labels) {
  if (every_n < 1)
    throw py::value_error("every_n must be >= 1");
  bc::Bytecode b = disassemble_or_throw(code);
  std::vector<bc::Instruction> out;
  const int k = value.is_none() ? -1 : b.add_const(value.ptr());
  for (size_t i = 0; i < b.instructions.size(); ++i) {
    bc::Instruction ins = b.instructions[i];
    if (i % static_cast<size_t>(every_n) == 0 && bc::can_insert_before(b, i)) {
      std::vector<bc::Instruction> add;
      if (k < 0) {
        add.push_back(bc::Instruction::make(NOP, 0, ins.pos));
      } else {
        add.push_back(bc::Instruction::make(LOAD_CONST, k, ins.pos));
        add.push_back(bc::Instruction::make(POP_TOP, 0, ins.pos));
      }
      for (auto &a : add)
        a.handler = ins.handler;
#if PY_VERSION_HEX >= 0x030C0000
      const bool pinned = ins.opcode == END_FOR; // FOR_ITER's target (opcode_facts.h)
#else
      const bool pinned = false;
#endif
      if (move_labels && !pinned)
        std::swap(add.front().label, ins.label);
      out.insert(out.end(), add.begin(), add.end());
    }
    out.push_back(ins);
  }
  b.instructions = std::move(out);
  return assemble_or_throw(b);
}

// A function body built from nothing but `code`'s prologue: `return <first argument> + value`,
// value being a const the original did not have.
py::object return_arg_plus(py::object code, py::object value) {
  bc::Bytecode b = disassemble_or_throw(code);
  std::vector<bc::Instruction> out;
  bc::Position pos{b.first_line, b.first_line, 0, 1};
  for (const bc::Instruction &ins : b.instructions) {
    bc::Instruction copy = ins;
    copy.label = bc::kNoLabel;
    copy.target = bc::kNoLabel;
    copy.handler = {};
    out.push_back(copy);
    if (ins.opcode == RESUME)
      break;
  }
  if (out.empty() || out.back().opcode != RESUME)
    throw py::value_error("no RESUME in the prologue");
  out.push_back(bc::Instruction::make(LOAD_FAST, 0, pos));
  out.push_back(bc::Instruction::make(LOAD_CONST, b.add_const(value.ptr()), pos));
  out.push_back(bc::Instruction::make(BINARY_OP, 0 /* NB_ADD */, pos));
  out.push_back(bc::Instruction::make(RETURN_VALUE, 0, pos));
  b.instructions = std::move(out);
  return assemble_or_throw(b);
}

// `code` with a new local `name` at co_varnames[position]; as_arg: also one more positional
// argument (position must then be within the arguments).
py::object insert_local(py::object code, size_t position, py::str name, bool as_arg) {
  bc::Bytecode b = disassemble_or_throw(code);
  framejit::Expected<int> at = bc::insert_local(b, position, name.ptr());
  if (!at)
    throw py::value_error("bytecode: " + at.error().message());
  if (as_arg) {
    const int argcount = code.attr("co_argcount").cast<int>();
    b.overrides.emplace_back("co_argcount",
                             framejit::frontend::OwnedRef::steal(PyLong_FromLong(argcount + 1)));
  }
  return assemble_or_throw(b);
}

// (opcode, oparg, offset, jump target's offset or -1, position, handler (offset, depth, lasti)
// or None) per instruction, offsets in code units as disassembled.
py::list listing(py::object code) {
  bc::Bytecode b = disassemble_or_throw(code);
  py::list out;
  for (const bc::Instruction &ins : b.instructions) {
    const int t = b.index_of(ins.target);
    py::object handler = py::none();
    if (ins.handler.active())
      handler =
          py::make_tuple(b.instructions[static_cast<size_t>(b.index_of(ins.handler.target))].offset,
                         ins.handler.depth, ins.handler.lasti);
    auto opt = [](int v) { return v < 0 ? py::object(py::none()) : py::object(py::int_(v)); };
    out.append(py::make_tuple(ins.opcode, ins.oparg, ins.offset,
                              t < 0 ? -1 : b.instructions[static_cast<size_t>(t)].offset,
                              py::make_tuple(opt(ins.pos.line), opt(ins.pos.end_line),
                                             opt(ins.pos.col), opt(ins.pos.end_col)),
                              handler));
  }
  return out;
}

} // namespace

void bind_bytecode(py::module_ &m) {
  m.def(
      "_bytecode_roundtrip",
      [](py::object code) { return assemble_or_throw(disassemble_or_throw(code)); },
      "code -> disassembled and reassembled code (frontend/bytecode)");
  m.def("_bytecode_insert_nops", &insert_nops, py::arg("code"), py::arg("every_n"),
        py::arg("const") = py::none(), py::arg("move_labels") = false,
        "code -> code with NOP (or LOAD_CONST const; POP_TOP) before every every_n-th instruction");
  m.def("_bytecode_return_arg_plus", &return_arg_plus,
        "code -> code whose body is `return <first argument> + const`");
  m.def("_bytecode_insert_local", &insert_local, py::arg("code"), py::arg("position"),
        py::arg("name"), py::arg("as_arg") = false,
        "code -> code with one more local (or positional argument)");
  m.def("_bytecode_listing", &listing, "code -> the disassembled instructions as tuples");
  m.def("_bytecode_stack_depth", [](py::object code) {
    framejit::Expected<int> d = bc::stack_depth(disassemble_or_throw(code));
    if (!d)
      throw py::value_error("bytecode: " + d.error().message());
    return *d;
  });
  m.def("_bytecode_cache_entries", [] {
    std::vector<int> v(256);
    for (int op = 0; op < 256; ++op)
      v[static_cast<size_t>(op)] = bc::cache_entries(op);
    return v;
  });
}
