// opcode_facts.h — what the assembler must know of this interpreter's opcodes: inline cache
// sizes, which ones jump and which way, which end a block, stack effects and the instruction
// pairs CPython runs as one (where nothing may be inserted between them).
#pragma once

#include <Python.h>
#include <opcode.h>

#include <array>
#include <cstdint>

#if PY_VERSION_HEX < 0x030B0000 || PY_VERSION_HEX >= 0x030E0000
#error "frontend/bytecode supports CPython 3.11, 3.12 and 3.13"
#endif

namespace framejit::frontend::bytecode {

struct Bytecode;

/// How an opcode's argument relates to its jump target. Relative jumps count code units from
/// the end of the instruction (after its inline caches); Forward adds the oparg, Backward
/// subtracts it.
enum class JumpKind : uint8_t { None, Forward, Backward };

/// Code units of inline cache after `opcode` (CPython's _PyOpcode_Caches, which the interpreter
/// does not export: the table is spelled out per version and checked against
/// `opcode._inline_cache_entries` by tests/python/test_bytecode_assembler.py).
int cache_entries(int opcode);
/// Whether `opcode` is a jump, and in which direction its oparg counts.
JumpKind jump_kind(int opcode);
/// The same jump going the other way (3.11's POP_JUMP_FORWARD_IF_X <-> POP_JUMP_BACKWARD_IF_X,
/// JUMP_FORWARD <-> JUMP_BACKWARD on every version), or -1 when the opcode only goes one way.
int jump_reversed(int opcode);
/// Control never falls through to the next instruction (return, raise, unconditional jump).
bool is_terminator(int opcode);
/// Net value-stack effect, `jump` selecting the taken branch of a jump; the interpreter's own
/// PyCompile_OpcodeStackEffectWithJump. Returns false for an opcode it does not know.
bool stack_effect(int opcode, int oparg, bool jump, int *effect);
/// How many stack values an instruction a graph break may stop at pops (a group, PRECALL|CALL or
/// KW_NAMES|CALL, by its last instruction); -1 for the opcodes the break code does not copy.
int break_inputs(int opcode, int oparg);
/// Whether an instruction may be inserted before instructions[index] (index == size: at the end).
/// False inside pairs the interpreter runs together: YIELD_VALUE|RESUME and the prologue's
/// RESUME (generators find the yield by looking one unit ahead), 3.11's PRECALL|CALL (a
/// specialized PRECALL skips its CALL by offset), KW_NAMES|CALL, 3.13's END_FOR|POP_TOP (an
/// exhausted FOR_ITER skips both by offset).
bool can_insert_before(const Bytecode &bc, size_t index);

/// The version's opcode numbers the version-neutral code below needs.
#if PY_VERSION_HEX < 0x030C0000
constexpr int kPopJumpIfFalse = POP_JUMP_FORWARD_IF_FALSE;
constexpr int kPopJumpIfTrue = POP_JUMP_FORWARD_IF_TRUE;
#else
constexpr int kPopJumpIfFalse = POP_JUMP_IF_FALSE;
constexpr int kPopJumpIfTrue = POP_JUMP_IF_TRUE;
#endif

} // namespace framejit::frontend::bytecode
