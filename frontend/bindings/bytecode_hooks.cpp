// bytecode_hooks.cpp — private _C._bytecode_* test entry points for frontend/bytecode: round
// trips, edits that must not change behaviour, and the tables the tests check against CPython's.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "frontend/bytecode/assemble.h"
#include "frontend/bytecode/break_code.h"
#include "frontend/bytecode/disassemble.h"
#include "frontend/bytecode/locals.h"
#include "frontend/bytecode/opcode_facts.h"
#include "frontend/bytecode/resume.h"

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

// `code` stopped at `offset`: before that instruction (on every path that reaches it, jumps
// included) the value stack is stored into fresh locals ___snap<i> (bottom first; a NULL slot
// leaves its local unbound), each cell variable's cell object into ___cell_<name>, and `exc` is
// raised past every handler. The raising frame's f_locals is then the state a resume function
// needs there: what the frame evaluator hands over at a graph break.
py::object snapshot_at(py::object code, int offset, py::object exc) {
  bc::Bytecode b = disassemble_or_throw(code);
  framejit::Expected<std::vector<bc::ResumePoint>> points = bc::resume_points(b);
  if (!points)
    throw py::value_error("bytecode: " + points.error().message());
  int depth = -1;
  for (const bc::ResumePoint &p : *points)
    if (p.offset == offset)
      depth = p.depth;
  if (depth < 0)
    throw py::value_error("not a resume point");
  const py::tuple cellvars = code.attr("co_cellvars");
  const py::tuple varnames = code.attr("co_varnames");
  // Cell slots in localsplus order, before the new locals shift them.
  std::vector<std::pair<int, std::string>> cells;
  int extra = 0;
  for (py::handle c : cellvars) {
    int at = -1;
    for (size_t j = 0; j < varnames.size(); ++j)
      if (varnames[j].cast<std::string>() == c.cast<std::string>())
        at = static_cast<int>(j);
    if (at < 0)
      at = static_cast<int>(varnames.size()) + extra++;
    cells.emplace_back(at, c.cast<std::string>());
  }
  // New locals go at the end of co_varnames: cell slots (after varnames) move up by one each.
  std::vector<int> snap_slot(static_cast<size_t>(depth));
  for (int i = 0; i < depth; ++i) {
    framejit::Expected<int> at =
        bc::insert_local(b, b.varnames.size(), py::str("___snap" + std::to_string(i)).ptr());
    if (!at)
      throw py::value_error(at.error().message());
    snap_slot[static_cast<size_t>(i)] = *at;
    for (auto &c : cells)
      if (c.first >= *at)
        ++c.first;
  }
  std::vector<int> cell_slot;
  for (size_t i = 0; i < cells.size(); ++i) {
    framejit::Expected<int> at =
        bc::insert_local(b, b.varnames.size(), py::str("___cell_" + cells[i].second).ptr());
    if (!at)
      throw py::value_error(at.error().message());
    cell_slot.push_back(*at);
    for (auto &c : cells)
      if (c.first >= *at)
        ++c.first;
  }
  size_t idx = 0;
  while (b.instructions[idx].offset * 2 != offset)
    ++idx;
  bc::Instruction &ins = b.instructions[idx];
  std::vector<bc::Instruction> add;
  for (int i = depth - 1; i >= 0; --i)
    add.push_back(bc::Instruction::make(STORE_FAST, snap_slot[static_cast<size_t>(i)], ins.pos));
  for (size_t i = 0; i < cells.size(); ++i) {
#if PY_VERSION_HEX >= 0x030D0000
    add.push_back(bc::Instruction::make(LOAD_FAST, cells[i].first, ins.pos));
#else
    add.push_back(bc::Instruction::make(LOAD_CLOSURE, cells[i].first, ins.pos));
#endif
    add.push_back(bc::Instruction::make(STORE_FAST, cell_slot[i], ins.pos));
  }
  add.push_back(bc::Instruction::make(LOAD_CONST, b.add_const(exc.ptr()), ins.pos));
  add.push_back(bc::Instruction::make(RAISE_VARARGS, 1, ins.pos));
#if PY_VERSION_HEX >= 0x030C0000
  const bool pinned = ins.opcode == END_FOR; // FOR_ITER's target (opcode_facts.h)
#else
  const bool pinned = false;
#endif
  if (!pinned)
    std::swap(add.front().label, ins.label);
  b.instructions.insert(b.instructions.begin() + static_cast<std::ptrdiff_t>(idx), add.begin(),
                        add.end());
  return assemble_or_throw(b);
}

py::object make_resume(py::object code, int offset, std::vector<bool> stack_null,
                       std::vector<int> live, bool cells_as_values) {
  bc::ResumeSpec spec;
  spec.offset = offset;
  spec.stack_null = std::move(stack_null);
  spec.live_locals = std::move(live);
  spec.cells_as_values = cells_as_values;
  framejit::Expected<framejit::frontend::OwnedRef> out = bc::make_resume_code(code.ptr(), spec);
  if (!out)
    throw py::value_error(out.error().message());
  return py::reinterpret_steal<py::object>(out->release());
}

// A recipe from its Python spelling: ("out", k), ("const", obj), ("local", i), ("global", name),
// ("null",), ("attr", recipe, name), ("item", recipe, key).
bc::Recipe recipe_from(py::handle h) {
  if (!py::isinstance<py::tuple>(h) || py::len(h) < 1)
    throw py::value_error("recipe: a tuple (kind, ...) expected");
  py::tuple t = py::reinterpret_borrow<py::tuple>(h);
  const std::string kind = py::str(t[0]);
  auto want = [&](size_t n) {
    if (t.size() != n)
      throw py::value_error("recipe " + kind + ": " + std::to_string(n - 1) + " fields expected");
  };
  if (kind == "out") {
    want(2);
    return bc::Recipe::graph_output(t[1].cast<int>());
  }
  if (kind == "const") {
    want(2);
    return bc::Recipe::constant(t[1].ptr());
  }
  if (kind == "local") {
    want(2);
    return bc::Recipe::local(t[1].cast<int>());
  }
  if (kind == "global") {
    want(2);
    return bc::Recipe::global(t[1].ptr());
  }
  if (kind == "null") {
    want(1);
    return bc::Recipe::null();
  }
  if (kind == "attr") {
    want(3);
    return bc::Recipe::attr_of(recipe_from(t[1]), t[2].ptr());
  }
  if (kind == "item") {
    want(3);
    return bc::Recipe::item_of(recipe_from(t[1]), t[2].ptr());
  }
  throw py::value_error("recipe: unknown kind " + kind);
}

// (code, "copied" | "in_resume", why, [resume offsets]).
py::tuple make_break_code(py::object code, int offset, py::object graph, py::list inputs,
                          py::list stack, py::list stores, std::vector<int> live) {
  bc::BreakSpec spec;
  spec.offset = offset;
  if (!graph.is_none())
    spec.graph = framejit::frontend::OwnedRef::borrow(graph.ptr());
  for (py::handle r : inputs)
    spec.inputs.push_back(recipe_from(r));
  for (py::handle r : stack)
    spec.stack.push_back(recipe_from(r));
  for (py::handle s : stores) {
    py::tuple t = py::cast<py::tuple>(s);
    if (t.size() != 2)
      throw py::value_error("store: (local index, recipe) expected");
    spec.stores.push_back({t[0].cast<int>(), recipe_from(t[1])});
  }
  spec.live_locals = std::move(live);
  framejit::Expected<bc::BreakCode> out = bc::make_break_code(code.ptr(), spec);
  if (!out)
    throw py::value_error(out.error().message());
  const bool copied = out->kind == bc::BreakCode::Kind::Copied;
  return py::make_tuple(py::reinterpret_steal<py::object>(out->code.release()),
                        copied ? "copied" : "in_resume", out->why_in_resume,
                        out->resume_offsets);
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
  m.def("_make_resume", &make_resume, py::arg("code"), py::arg("offset"), py::arg("stack_null"),
        py::arg("live_locals"), py::arg("cells_as_values") = false,
        "code, offset, [slot is NULL per stack slot], [localsplus index] -> resume code "
        "(frontend/bytecode/resume.h); arguments: the non-NULL slots, then the live locals");
  m.def(
      "_resume_points",
      [](py::object code) {
        framejit::Expected<std::vector<bc::ResumePoint>> p =
            bc::resume_points(disassemble_or_throw(code));
        if (!p)
          throw py::value_error(p.error().message());
        std::vector<std::pair<int, int>> out;
        for (const bc::ResumePoint &r : *p)
          out.emplace_back(r.offset, r.depth);
        return out;
      },
      "code -> [(offset, stack depth)] where _make_resume accepts to start");
  m.def("_make_break_code", &make_break_code, py::arg("code"), py::arg("offset"),
        py::arg("graph"), py::arg("inputs"), py::arg("stack"), py::arg("stores"),
        py::arg("live_locals"),
        "code, offset, graph callable or None, [input recipe], [stack recipe], [(local, recipe)], "
        "[live local] -> (code, 'copied'|'in_resume', why, [resume offsets]) "
        "(frontend/bytecode/break_code.h)");
  m.def("_resume_cache_size", &bc::resume_cache_size);
  m.def("_resume_cache_clear", &bc::clear_resume_cache);
  m.def("_bytecode_snapshot_at", &snapshot_at, py::arg("code"), py::arg("offset"), py::arg("exc"),
        "code -> code that raises exc at offset with its stack and cells stored in locals");
  m.def("_bytecode_cache_entries", [] {
    std::vector<int> v(256);
    for (int op = 0; op < 256; ++op)
      v[static_cast<size_t>(op)] = bc::cache_entries(op);
    return v;
  });
}
