// instruction.cpp — the growable tables and labels of a Bytecode (see instruction.h).
#include "frontend/bytecode/instruction.h"

namespace framejit::frontend::bytecode {

Label Bytecode::label_at(size_t index) {
  Instruction &ins = instructions[index];
  if (ins.label == kNoLabel)
    ins.label = new_label();
  return ins.label;
}

int Bytecode::index_of(Label label) const {
  if (label == kNoLabel)
    return -1;
  for (size_t i = 0; i < instructions.size(); ++i)
    if (instructions[i].label == label)
      return static_cast<int>(i);
  return -1;
}

int Bytecode::add_const(PyObject *value) { // borrowed
  // NB: identity, not equality: 1 == 1.0 == True, and LOAD_CONST must load exactly this object.
  for (size_t i = 0; i < consts.size(); ++i)
    if (consts[i].get() == value)
      return static_cast<int>(i);
  consts.push_back(OwnedRef::borrow(value));
  return static_cast<int>(consts.size() - 1);
}

int Bytecode::add_name(PyObject *name) { // borrowed
  for (size_t i = 0; i < names.size(); ++i) {
    int eq = PyObject_RichCompareBool(names[i].get(), name, Py_EQ);
    if (eq < 0)
      PyErr_Clear();
    if (eq > 0)
      return static_cast<int>(i);
  }
  names.push_back(OwnedRef::borrow(name));
  return static_cast<int>(names.size() - 1);
}

int Bytecode::add_name(const char *name) {
  OwnedRef s = OwnedRef::steal(PyUnicode_InternFromString(name)); // new ref
  if (!s) {
    PyErr_Clear();
    return -1;
  }
  return add_name(s.get());
}

} // namespace framejit::frontend::bytecode
