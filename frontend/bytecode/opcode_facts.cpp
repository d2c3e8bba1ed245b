// opcode_facts.cpp — per-version opcode facts for the assembler (see opcode_facts.h).
#include "frontend/bytecode/opcode_facts.h"

#include <climits>

#include "frontend/bytecode/instruction.h"

namespace framejit::frontend::bytecode {

namespace {

constexpr std::array<uint8_t, 256> make_cache_table() {
  std::array<uint8_t, 256> t{};
#if PY_VERSION_HEX < 0x030C0000 // 3.11: Lib/opcode.py _cache_format
  t[BINARY_SUBSCR] = 4;
  t[STORE_SUBSCR] = 1;
  t[UNPACK_SEQUENCE] = 1;
  t[STORE_ATTR] = 4;
  t[LOAD_ATTR] = 4;
  t[COMPARE_OP] = 2;
  t[LOAD_GLOBAL] = 5;
  t[BINARY_OP] = 1;
  t[LOAD_METHOD] = 10;
  t[PRECALL] = 1;
  t[CALL] = 4;
#elif PY_VERSION_HEX < 0x030D0000 // 3.12
  t[BINARY_SUBSCR] = 1;
  t[STORE_SUBSCR] = 1;
  t[UNPACK_SEQUENCE] = 1;
  t[FOR_ITER] = 1;
  t[STORE_ATTR] = 4;
  t[LOAD_ATTR] = 9;
  t[COMPARE_OP] = 1;
  t[LOAD_GLOBAL] = 4;
  t[BINARY_OP] = 1;
  t[SEND] = 1;
  t[LOAD_SUPER_ATTR] = 1;
  t[CALL] = 3;
#else                             // 3.13
  t[LOAD_GLOBAL] = 4;
  t[BINARY_OP] = 1;
  t[UNPACK_SEQUENCE] = 1;
  t[COMPARE_OP] = 1;
  t[CONTAINS_OP] = 1;
  t[BINARY_SUBSCR] = 1;
  t[FOR_ITER] = 1;
  t[LOAD_SUPER_ATTR] = 1;
  t[LOAD_ATTR] = 9;
  t[STORE_ATTR] = 4;
  t[CALL] = 3;
  t[STORE_SUBSCR] = 1;
  t[SEND] = 1;
  t[JUMP_BACKWARD] = 1;
  t[TO_BOOL] = 3;
  t[POP_JUMP_IF_TRUE] = 1;
  t[POP_JUMP_IF_FALSE] = 1;
  t[POP_JUMP_IF_NONE] = 1;
  t[POP_JUMP_IF_NOT_NONE] = 1;
#endif
  return t;
}

constexpr std::array<uint8_t, 256> kCaches = make_cache_table();

} // namespace

int cache_entries(int opcode) { return opcode >= 0 && opcode < 256 ? kCaches[opcode] : 0; }

JumpKind jump_kind(int opcode) {
  switch (opcode) {
  case JUMP_FORWARD:
  case FOR_ITER:
  case SEND:
#if PY_VERSION_HEX < 0x030C0000
  case POP_JUMP_FORWARD_IF_FALSE:
  case POP_JUMP_FORWARD_IF_TRUE:
  case POP_JUMP_FORWARD_IF_NONE:
  case POP_JUMP_FORWARD_IF_NOT_NONE:
  case JUMP_IF_FALSE_OR_POP:
  case JUMP_IF_TRUE_OR_POP:
#else
  case POP_JUMP_IF_FALSE:
  case POP_JUMP_IF_TRUE:
  case POP_JUMP_IF_NONE:
  case POP_JUMP_IF_NOT_NONE:
#endif
    return JumpKind::Forward;
  case JUMP_BACKWARD:
  case JUMP_BACKWARD_NO_INTERRUPT:
#if PY_VERSION_HEX < 0x030C0000
  case POP_JUMP_BACKWARD_IF_FALSE:
  case POP_JUMP_BACKWARD_IF_TRUE:
  case POP_JUMP_BACKWARD_IF_NONE:
  case POP_JUMP_BACKWARD_IF_NOT_NONE:
#endif
    return JumpKind::Backward;
  default:
    return JumpKind::None;
  }
}

int jump_reversed(int opcode) {
  switch (opcode) {
  case JUMP_FORWARD:
    return JUMP_BACKWARD;
  case JUMP_BACKWARD:
    return JUMP_FORWARD;
#if PY_VERSION_HEX < 0x030C0000
  case POP_JUMP_FORWARD_IF_FALSE:
    return POP_JUMP_BACKWARD_IF_FALSE;
  case POP_JUMP_BACKWARD_IF_FALSE:
    return POP_JUMP_FORWARD_IF_FALSE;
  case POP_JUMP_FORWARD_IF_TRUE:
    return POP_JUMP_BACKWARD_IF_TRUE;
  case POP_JUMP_BACKWARD_IF_TRUE:
    return POP_JUMP_FORWARD_IF_TRUE;
  case POP_JUMP_FORWARD_IF_NONE:
    return POP_JUMP_BACKWARD_IF_NONE;
  case POP_JUMP_BACKWARD_IF_NONE:
    return POP_JUMP_FORWARD_IF_NONE;
  case POP_JUMP_FORWARD_IF_NOT_NONE:
    return POP_JUMP_BACKWARD_IF_NOT_NONE;
  case POP_JUMP_BACKWARD_IF_NOT_NONE:
    return POP_JUMP_FORWARD_IF_NOT_NONE;
#endif
  default:
    return -1;
  }
}

bool is_terminator(int opcode) {
  switch (opcode) {
  case RETURN_VALUE:
#if PY_VERSION_HEX >= 0x030C0000
  case RETURN_CONST:
#endif
  case RAISE_VARARGS:
  case RERAISE:
  case JUMP_FORWARD:
  case JUMP_BACKWARD:
  case JUMP_BACKWARD_NO_INTERRUPT:
    return true;
  default:
    return false;
  }
}

bool stack_effect(int opcode, int oparg, bool jump, int *effect) {
  if (opcode <= 0 || opcode >= 256 || opcode == EXTENDED_ARG)
    return false;
  int e = PyCompile_OpcodeStackEffectWithJump(opcode, oparg, jump ? 1 : 0);
  // NB: some versions raise ValueError for an unknown opcode, others only return the marker.
  if (PyErr_Occurred())
    PyErr_Clear();
  if (e == PY_INVALID_STACK_EFFECT || e == INT_MAX)
    return false;
  *effect = e;
  return true;
}

bool can_insert_before(const Bytecode &bc, size_t index) {
  const auto &ins = bc.instructions;
  if (index >= ins.size())
    return true;
  const int op = ins[index].opcode;
  if (op == RESUME)
    return false;
  if (index == 0)
    return true;
  const int prev = ins[index - 1].opcode;
#if PY_VERSION_HEX < 0x030C0000
  if (prev == PRECALL && op == CALL)
    return false;
  if (prev == KW_NAMES && (op == PRECALL || op == CALL))
    return false;
#elif PY_VERSION_HEX < 0x030D0000
  if (prev == KW_NAMES && op == CALL)
    return false;
#else
  if (prev == END_FOR && op == POP_TOP)
    return false;
#endif
  return true;
}

int break_inputs(int op, int oparg) {
  switch (op) {
    case CALL:
      return oparg + 2;
    case CALL_FUNCTION_EX:
      return 3 + (oparg & 1);
    case BINARY_OP:
    case BINARY_SUBSCR:
    case COMPARE_OP:
    case CONTAINS_OP:
    case IS_OP:
    case DELETE_SUBSCR:
    case STORE_ATTR:
      return 2;
    case STORE_SUBSCR:
      return 3;
    case UNARY_NEGATIVE:
    case UNARY_NOT:
    case UNARY_INVERT:
    case GET_ITER:
    case LOAD_ATTR:
    case UNPACK_SEQUENCE:
    case UNPACK_EX:
    case STORE_GLOBAL:
    case DELETE_ATTR:
    case FOR_ITER:
    case BEFORE_WITH:
      return 1;
    case LOAD_GLOBAL:
      return 0;
    case RAISE_VARARGS:
      return oparg;
#if PY_VERSION_HEX < 0x030C0000
    case UNARY_POSITIVE:
    case LOAD_METHOD:
    case JUMP_IF_TRUE_OR_POP:
    case JUMP_IF_FALSE_OR_POP:
    case POP_JUMP_FORWARD_IF_FALSE:
    case POP_JUMP_FORWARD_IF_TRUE:
    case POP_JUMP_FORWARD_IF_NONE:
    case POP_JUMP_FORWARD_IF_NOT_NONE:
    case POP_JUMP_BACKWARD_IF_FALSE:
    case POP_JUMP_BACKWARD_IF_TRUE:
    case POP_JUMP_BACKWARD_IF_NONE:
    case POP_JUMP_BACKWARD_IF_NOT_NONE:
      return 1;
#else
    case POP_JUMP_IF_FALSE:
    case POP_JUMP_IF_TRUE:
    case POP_JUMP_IF_NONE:
    case POP_JUMP_IF_NOT_NONE:
      return 1;
    case BINARY_SLICE:
      return 3;
    case STORE_SLICE:
      return 4;
#endif
#if PY_VERSION_HEX < 0x030D0000
    case FORMAT_VALUE:
      return (oparg & 4) ? 2 : 1;
#else
    case CALL_KW:
      return oparg + 3;
    case TO_BOOL:
    case FORMAT_SIMPLE:
      return 1;
    case FORMAT_WITH_SPEC:
      return 2;
#endif
    default:
      return -1;
  }
}

} // namespace framejit::frontend::bytecode
