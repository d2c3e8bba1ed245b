// locals.cpp — insert_local and code_names (see locals.h).
#include "frontend/bytecode/locals.h"

#include <opcode.h>

#include <string>
#include <vector>

#include "frontend/cpython/pyref.h"

namespace framejit::frontend::bytecode {

namespace {

// Opcodes whose oparg is one localsplus index.
bool names_one_local(int op) {
  switch (op) {
  case LOAD_FAST:
  case STORE_FAST:
  case DELETE_FAST:
  case MAKE_CELL:
  case LOAD_DEREF:
  case STORE_DEREF:
  case DELETE_DEREF:
#if PY_VERSION_HEX < 0x030C0000
  case LOAD_CLASSDEREF:
#else
  case LOAD_FAST_CHECK:
  case LOAD_FAST_AND_CLEAR:
  case LOAD_FROM_DICT_OR_DEREF:
#endif
#if PY_VERSION_HEX < 0x030D0000
  case LOAD_CLOSURE:
#endif
    return true;
  default:
    return false;
  }
}

#if PY_VERSION_HEX >= 0x030D0000
// 3.13's pairs: oparg = first << 4 | second. Returns the two single opcodes, or false.
bool split_pair(int op, int *first, int *second) {
  switch (op) {
  case LOAD_FAST_LOAD_FAST:
    *first = LOAD_FAST;
    *second = LOAD_FAST;
    return true;
  case STORE_FAST_STORE_FAST:
    *first = STORE_FAST;
    *second = STORE_FAST;
    return true;
  case STORE_FAST_LOAD_FAST:
    *first = STORE_FAST;
    *second = LOAD_FAST;
    return true;
  default:
    return false;
  }
}
#endif

} // namespace

void append_split_pair(std::vector<Instruction> &out, Instruction ins, int first, int x, int second, int y) {
  Instruction tail = ins;
  tail.opcode = second;
  tail.oparg = y;
  tail.label = kNoLabel;
  tail.offset = -1;
  ins.opcode = first;
  ins.oparg = x;
  out.push_back(ins);
  out.push_back(tail);
}

Expected<int> insert_local(Bytecode &bc, size_t position, PyObject *name) { // name: borrowed
  if (!name || !PyUnicode_Check(name))
    return Status::invalid("insert_local: the name must be a str");
  if (position > bc.varnames.size())
    return Status::invalid("insert_local: position past co_varnames");
  for (const OwnedRef &v : bc.varnames) {
    int eq = PyObject_RichCompareBool(v.get(), name, Py_EQ);
    if (eq < 0)
      PyErr_Clear();
    if (eq > 0)
      return Status::invalid("insert_local: the code already has a local of that name");
  }
  const int at = static_cast<int>(position);
  auto shift = [at](int index) { return index >= at ? index + 1 : index; };
  std::vector<Instruction> out;
  out.reserve(bc.instructions.size());
  for (Instruction &ins : bc.instructions) {
    if (names_one_local(ins.opcode)) {
      ins.oparg = shift(ins.oparg);
#if PY_VERSION_HEX >= 0x030D0000
    } else if (int a, b; split_pair(ins.opcode, &a, &b)) {
      const int x = shift(ins.oparg >> 4), y = shift(ins.oparg & 15);
      if (x < 16 && y < 16) {
        ins.oparg = x << 4 | y;
      } else {
        append_split_pair(out, ins, a, x, b, y);
        continue;
      }
#endif
    }
    out.push_back(ins);
  }
  bc.instructions = std::move(out);
  bc.varnames.insert(bc.varnames.begin() + static_cast<std::ptrdiff_t>(position),
                     OwnedRef::borrow(name));
  return at;
}

Expected<std::vector<std::string>> code_names(PyObject *code, const char *attr, const char *who) { // borrowed
  OwnedRef t = OwnedRef::steal(PyObject_GetAttrString(code, attr)); // new ref
  if (!t || !PyTuple_Check(t.get())) {
    PyErr_Clear();
    return Status::invalid(std::string(who) + ": code has no tuple " + attr);
  }
  std::vector<std::string> out;
  for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(t.get()); ++i) {
    const char *s = PyUnicode_AsUTF8(PyTuple_GET_ITEM(t.get(), i)); // borrowed buffer
    if (!s)
      return Status::invalid(std::string(who) + ": " + fetch_error_text());
    out.emplace_back(s);
  }
  return out;
}

Expected<LocalNames> local_names(PyObject *code, const char *who) { // borrowed
  LocalNames n;
  for (auto [attr, out] : {std::pair{"co_varnames", &n.var}, std::pair{"co_cellvars", &n.cell},
                           std::pair{"co_freevars", &n.free}}) {
    auto names = code_names(code, attr, who);
    if (!names)
      return names.error();
    *out = std::move(*names);
  }
  return n;
}

} // namespace framejit::frontend::bytecode
