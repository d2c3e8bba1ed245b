// opcodes.h — the per-CPython-version bytecode facts the tracer needs: which opcode number is which
// instruction, how many inline cache units follow it, and how the instructions whose meaning
// changed between 3.11, 3.12 and 3.13 lay out their arguments and stack. The translator switches
// on the version-neutral `Op` and reads the facts below; it has no version #ifs of its own.
// Opcode numbers come from the interpreter's own <opcode.h>.
#pragma once

#include <Python.h>
#include <opcode.h>

#include <array>
#include <cstdint>

#if PY_VERSION_HEX < 0x030B0000 || PY_VERSION_HEX >= 0x030E0000
#error "framejit's tracer supports CPython 3.11, 3.12 and 3.13"
#endif

namespace framejit::frontend {

/// Every instruction the tracer interprets, on any supported version. Unknown: anything else (the
/// tracer breaks the graph on it, naming CPython's opcode).
enum class Op : uint8_t {
  Unknown,
  // -- every version --
  Cache, Nop, Resume, ExtendedArg, PopTop, PushNull, Copy, Swap,
  LoadConst, LoadFast, StoreFast, DeleteFast, LoadGlobal, StoreGlobal, DeleteGlobal,
  MakeCell, CopyFreeVars, LoadDeref, StoreDeref, LoadAttr, StoreAttr, DeleteAttr,
  BinarySubscr, StoreSubscr, DeleteSubscr, BinaryOp, CompareOp, IsOp, ContainsOp,
  UnaryNegative, UnaryInvert, UnaryNot,
  BuildTuple, BuildList, ListAppend, ListExtend, BuildMap, BuildConstKeyMap, MapAdd, DictUpdate,
  DictMerge, BuildSet, SetAdd, SetUpdate, BuildSlice, BuildString, UnpackSequence, UnpackEx,
  Call, CallFunctionEx, MakeFunction, ReturnValue, JumpForward, JumpBackward,
  JumpBackwardNoInterrupt, GetIter, ForIter,
  PushExcInfo, PopExcept, CheckExcMatch, Reraise, WithExceptStart, CheckEgMatch, RaiseVarargs,
  LoadAssertionError, ReturnGenerator, YieldValue, Send, GetAwaitable, BeforeWith, ImportName,
  ImportFrom,
  // -- 3.11 and 3.12 --
  LoadClosure, KwNames, FormatValue,
  // -- 3.11 only --
  Precall, LoadMethod, UnaryPositive, ListToTuple, PrepReraiseStar, JumpIfFalseOrPop,
  JumpIfTrueOrPop, PopJumpForwardIfFalse, PopJumpForwardIfTrue, PopJumpBackwardIfFalse,
  PopJumpBackwardIfTrue, PopJumpForwardIfNone, PopJumpForwardIfNotNone, PopJumpBackwardIfNone,
  PopJumpBackwardIfNotNone,
  // -- 3.12 and 3.13 --
  PopJumpIfFalse, PopJumpIfTrue, PopJumpIfNone, PopJumpIfNotNone, ReturnConst, BinarySlice,
  StoreSlice, LoadFastCheck, LoadFastAndClear, CallIntrinsic1, LoadSuperAttr,
  // -- 3.13 only --
  ToBool, LoadFastLoadFast, StoreFastStoreFast, StoreFastLoadFast, CallKw, SetFunctionAttribute,
  FormatSimple, FormatWithSpec, ConvertValue,
};

// FJ_OPCODES(X) lists this interpreter's instructions as X(CPython name, Op, inline cache units),
// the cache sizes being the version's _PyOpcode_Caches (Lib/opcode.py's _inline_cache_entries).
// Instructions with no cache in any version come first.
#define FJ_OPCODES_UNCACHED(X)                                                                   \
  X(CACHE, Cache, 0) X(NOP, Nop, 0) X(RESUME, Resume, 0) X(EXTENDED_ARG, ExtendedArg, 0)         \
  X(POP_TOP, PopTop, 0) X(PUSH_NULL, PushNull, 0) X(COPY, Copy, 0) X(SWAP, Swap, 0)              \
  X(LOAD_CONST, LoadConst, 0) X(LOAD_FAST, LoadFast, 0) X(STORE_FAST, StoreFast, 0)              \
  X(DELETE_FAST, DeleteFast, 0) X(STORE_GLOBAL, StoreGlobal, 0)                                  \
  X(DELETE_GLOBAL, DeleteGlobal, 0) X(MAKE_CELL, MakeCell, 0) X(COPY_FREE_VARS, CopyFreeVars, 0) \
  X(LOAD_DEREF, LoadDeref, 0) X(STORE_DEREF, StoreDeref, 0) X(DELETE_ATTR, DeleteAttr, 0)        \
  X(DELETE_SUBSCR, DeleteSubscr, 0) X(IS_OP, IsOp, 0) X(UNARY_NEGATIVE, UnaryNegative, 0)        \
  X(UNARY_INVERT, UnaryInvert, 0) X(UNARY_NOT, UnaryNot, 0) X(BUILD_TUPLE, BuildTuple, 0)        \
  X(BUILD_LIST, BuildList, 0) X(LIST_APPEND, ListAppend, 0) X(LIST_EXTEND, ListExtend, 0)        \
  X(BUILD_MAP, BuildMap, 0) X(BUILD_CONST_KEY_MAP, BuildConstKeyMap, 0) X(MAP_ADD, MapAdd, 0)    \
  X(DICT_UPDATE, DictUpdate, 0) X(DICT_MERGE, DictMerge, 0) X(BUILD_SET, BuildSet, 0)            \
  X(SET_ADD, SetAdd, 0) X(SET_UPDATE, SetUpdate, 0) X(BUILD_SLICE, BuildSlice, 0)                \
  X(BUILD_STRING, BuildString, 0) X(UNPACK_EX, UnpackEx, 0)                                      \
  X(CALL_FUNCTION_EX, CallFunctionEx, 0) X(MAKE_FUNCTION, MakeFunction, 0)                       \
  X(RETURN_VALUE, ReturnValue, 0) X(JUMP_FORWARD, JumpForward, 0)                                \
  X(JUMP_BACKWARD_NO_INTERRUPT, JumpBackwardNoInterrupt, 0) X(GET_ITER, GetIter, 0)              \
  X(PUSH_EXC_INFO, PushExcInfo, 0) X(POP_EXCEPT, PopExcept, 0)                                   \
  X(CHECK_EXC_MATCH, CheckExcMatch, 0) X(RERAISE, Reraise, 0)                                    \
  X(WITH_EXCEPT_START, WithExceptStart, 0) X(CHECK_EG_MATCH, CheckEgMatch, 0)                    \
  X(RAISE_VARARGS, RaiseVarargs, 0) X(LOAD_ASSERTION_ERROR, LoadAssertionError, 0)               \
  X(RETURN_GENERATOR, ReturnGenerator, 0) X(YIELD_VALUE, YieldValue, 0)                          \
  X(GET_AWAITABLE, GetAwaitable, 0) X(BEFORE_WITH, BeforeWith, 0) X(IMPORT_NAME, ImportName, 0)  \
  X(IMPORT_FROM, ImportFrom, 0)

#if PY_VERSION_HEX < 0x030C0000  // ---- 3.11 ----------------------------------------------------
#define FJ_OPCODES(X)                                                                             \
  FJ_OPCODES_UNCACHED(X)                                                                          \
  X(BINARY_SUBSCR, BinarySubscr, 4) X(STORE_SUBSCR, StoreSubscr, 1)                               \
  X(UNPACK_SEQUENCE, UnpackSequence, 1) X(STORE_ATTR, StoreAttr, 4) X(LOAD_ATTR, LoadAttr, 4)     \
  X(COMPARE_OP, CompareOp, 2) X(LOAD_GLOBAL, LoadGlobal, 5) X(BINARY_OP, BinaryOp, 1)             \
  X(LOAD_METHOD, LoadMethod, 10) X(PRECALL, Precall, 1) X(CALL, Call, 4)                          \
  X(CONTAINS_OP, ContainsOp, 0) X(FOR_ITER, ForIter, 0) X(SEND, Send, 0)                          \
  X(JUMP_BACKWARD, JumpBackward, 0) X(LOAD_CLOSURE, LoadClosure, 0) X(KW_NAMES, KwNames, 0)       \
  X(FORMAT_VALUE, FormatValue, 0) X(UNARY_POSITIVE, UnaryPositive, 0)                             \
  X(LIST_TO_TUPLE, ListToTuple, 0) X(PREP_RERAISE_STAR, PrepReraiseStar, 0)                       \
  X(JUMP_IF_FALSE_OR_POP, JumpIfFalseOrPop, 0) X(JUMP_IF_TRUE_OR_POP, JumpIfTrueOrPop, 0)         \
  X(POP_JUMP_FORWARD_IF_FALSE, PopJumpForwardIfFalse, 0)                                          \
  X(POP_JUMP_FORWARD_IF_TRUE, PopJumpForwardIfTrue, 0)                                            \
  X(POP_JUMP_BACKWARD_IF_FALSE, PopJumpBackwardIfFalse, 0)                                        \
  X(POP_JUMP_BACKWARD_IF_TRUE, PopJumpBackwardIfTrue, 0)                                          \
  X(POP_JUMP_FORWARD_IF_NONE, PopJumpForwardIfNone, 0)                                            \
  X(POP_JUMP_FORWARD_IF_NOT_NONE, PopJumpForwardIfNotNone, 0)                                     \
  X(POP_JUMP_BACKWARD_IF_NONE, PopJumpBackwardIfNone, 0)                                          \
  X(POP_JUMP_BACKWARD_IF_NOT_NONE, PopJumpBackwardIfNotNone, 0)

#elif PY_VERSION_HEX < 0x030D0000  // ---- 3.12 ------------------------------------------------
#define FJ_OPCODES(X)                                                                             \
  FJ_OPCODES_UNCACHED(X)                                                                          \
  X(BINARY_SUBSCR, BinarySubscr, 1) X(STORE_SUBSCR, StoreSubscr, 1)                               \
  X(UNPACK_SEQUENCE, UnpackSequence, 1) X(STORE_ATTR, StoreAttr, 4) X(LOAD_ATTR, LoadAttr, 9)     \
  X(COMPARE_OP, CompareOp, 1) X(LOAD_GLOBAL, LoadGlobal, 4) X(BINARY_OP, BinaryOp, 1)             \
  X(CALL, Call, 3) X(CONTAINS_OP, ContainsOp, 0) X(FOR_ITER, ForIter, 1) X(SEND, Send, 1)         \
  X(JUMP_BACKWARD, JumpBackward, 0) X(LOAD_SUPER_ATTR, LoadSuperAttr, 1)                          \
  X(LOAD_CLOSURE, LoadClosure, 0) X(KW_NAMES, KwNames, 0) X(FORMAT_VALUE, FormatValue, 0)         \
  X(POP_JUMP_IF_FALSE, PopJumpIfFalse, 0) X(POP_JUMP_IF_TRUE, PopJumpIfTrue, 0)                   \
  X(POP_JUMP_IF_NONE, PopJumpIfNone, 0) X(POP_JUMP_IF_NOT_NONE, PopJumpIfNotNone, 0)              \
  X(RETURN_CONST, ReturnConst, 0) X(BINARY_SLICE, BinarySlice, 0) X(STORE_SLICE, StoreSlice, 0)   \
  X(LOAD_FAST_CHECK, LoadFastCheck, 0) X(LOAD_FAST_AND_CLEAR, LoadFastAndClear, 0)                \
  X(CALL_INTRINSIC_1, CallIntrinsic1, 0)

#else  // ---- 3.13 ----------------------------------------------------------------------------
// NB: LOAD_CLOSURE is a pseudo-instruction in 3.13 (assembled as LOAD_FAST), and so are
// JUMP_IF_* and the other names above 255 in <opcode_ids.h>: they never reach the tracer.
#define FJ_OPCODES(X)                                                                             \
  FJ_OPCODES_UNCACHED(X)                                                                          \
  X(BINARY_SUBSCR, BinarySubscr, 1) X(STORE_SUBSCR, StoreSubscr, 1)                               \
  X(UNPACK_SEQUENCE, UnpackSequence, 1) X(STORE_ATTR, StoreAttr, 4) X(LOAD_ATTR, LoadAttr, 9)     \
  X(COMPARE_OP, CompareOp, 1) X(LOAD_GLOBAL, LoadGlobal, 4) X(BINARY_OP, BinaryOp, 1)             \
  X(CALL, Call, 3) X(CONTAINS_OP, ContainsOp, 1) X(FOR_ITER, ForIter, 1) X(SEND, Send, 1)         \
  X(JUMP_BACKWARD, JumpBackward, 1) X(LOAD_SUPER_ATTR, LoadSuperAttr, 1)                          \
  X(POP_JUMP_IF_FALSE, PopJumpIfFalse, 1) X(POP_JUMP_IF_TRUE, PopJumpIfTrue, 1)                   \
  X(POP_JUMP_IF_NONE, PopJumpIfNone, 1) X(POP_JUMP_IF_NOT_NONE, PopJumpIfNotNone, 1)              \
  X(RETURN_CONST, ReturnConst, 0) X(BINARY_SLICE, BinarySlice, 0) X(STORE_SLICE, StoreSlice, 0)   \
  X(LOAD_FAST_CHECK, LoadFastCheck, 0) X(LOAD_FAST_AND_CLEAR, LoadFastAndClear, 0)                \
  X(CALL_INTRINSIC_1, CallIntrinsic1, 0) X(TO_BOOL, ToBool, 3)                                    \
  X(LOAD_FAST_LOAD_FAST, LoadFastLoadFast, 0) X(STORE_FAST_STORE_FAST, StoreFastStoreFast, 0)     \
  X(STORE_FAST_LOAD_FAST, StoreFastLoadFast, 0) X(CALL_KW, CallKw, 0)                             \
  X(SET_FUNCTION_ATTRIBUTE, SetFunctionAttribute, 0) X(FORMAT_SIMPLE, FormatSimple, 0)            \
  X(FORMAT_WITH_SPEC, FormatWithSpec, 0) X(CONVERT_VALUE, ConvertValue, 0)
#endif

/// What the tracer knows of one opcode number.
struct OpInfo {
  Op op = Op::Unknown;
  uint8_t cache_entries = 0;  // code units of inline cache after the instruction
};

namespace detail {
constexpr std::array<OpInfo, 256> make_op_table() {
  std::array<OpInfo, 256> t{};
#define FJ_OP_ENTRY(name, op, caches) t[name] = OpInfo{Op::op, caches};
  FJ_OPCODES(FJ_OP_ENTRY)
#undef FJ_OP_ENTRY
  return t;
}
}  // namespace detail

/// Decodes a (deoptimized) opcode number of this interpreter.
inline constexpr std::array<OpInfo, 256> kOpTable = detail::make_op_table();

// ---- instructions whose argument or stack layout changed ---------------------------------------

#if PY_VERSION_HEX < 0x030C0000
constexpr int kCompareOpShift = 0;
constexpr bool kLoadAttrHasMethodBit = false;
constexpr bool kNullAboveCallable = false;
constexpr int kForIterExitSkip = 0;
constexpr bool kMakeFunctionHasFlags = true;
#elif PY_VERSION_HEX < 0x030D0000
constexpr int kCompareOpShift = 4;
constexpr bool kLoadAttrHasMethodBit = true;
constexpr bool kNullAboveCallable = false;
constexpr int kForIterExitSkip = 1;
constexpr bool kMakeFunctionHasFlags = true;
#else
constexpr int kCompareOpShift = 5;
constexpr bool kLoadAttrHasMethodBit = true;
constexpr bool kNullAboveCallable = true;
constexpr int kForIterExitSkip = 2;
constexpr bool kMakeFunctionHasFlags = false;
#endif

// kCompareOpShift: COMPARE_OP compares with `arg >> kCompareOpShift` (Py_LT ... Py_GE). 3.12 keeps
//   a specialization mask in the low 4 bits; 3.13 adds bit 4, "convert the result to bool",
//   which changes nothing for the values the tracer compares.
// kLoadAttrHasMethodBit: LOAD_ATTR's name index is `arg >> 1` and bit 0 asks for the method form
//   (3.12+), which 3.11 spells LOAD_METHOD.
// kNullAboveCallable: where LOAD_GLOBAL (bit 0), LOAD_ATTR's and LOAD_SUPER_ATTR's method forms
//   and PUSH_NULL put the NULL that CALL pairs with a callable: below it (3.11, 3.12: CALL takes
//   `null_or_method, callable_or_self, args`) or above it (3.13: `callable, self_or_null, args`).
// kForIterExitSkip: code units FOR_ITER jumps past its target when the iterator is exhausted.
//   3.12 ends a loop with END_FOR (pops iterator and value), 3.13 with END_FOR + POP_TOP; an
//   exhausted FOR_ITER pops the iterator itself and skips them, so they are never run.
// kMakeFunctionHasFlags: MAKE_FUNCTION's argument says which of defaults, kwdefaults, annotations
//   and closure sit under the code object (up to 3.12); 3.13's MAKE_FUNCTION takes only the code
//   and SET_FUNCTION_ATTRIBUTE sets each one.

/// LOAD_SUPER_ATTR (3.12+): name index `arg >> 2`; bit 0 asks for the method form (bit 1 says
/// the call was `super()` without arguments, which leaves the stack the same).
constexpr int kLoadSuperAttrNameShift = 2;
/// SET_FUNCTION_ATTRIBUTE's argument and MAKE_FUNCTION's flags (Include/internal/
/// pycore_opcode_utils.h MAKE_FUNCTION_*).
constexpr int kFunctionDefaults = 0x01, kFunctionKwDefaults = 0x02, kFunctionAnnotations = 0x04,
              kFunctionClosure = 0x08;
/// CALL_INTRINSIC_1's arguments the tracer runs (Include/internal/pycore_intrinsics.h, 3.12+).
constexpr int kIntrinsicUnaryPositive = 5, kIntrinsicListToTuple = 6;
/// FORMAT_VALUE's (3.11, 3.12) conversion bits and CONVERT_VALUE's argument (3.13).
constexpr int kConvertStr = 1, kConvertRepr = 2, kConvertAscii = 3;

}  // namespace framejit::frontend
