// loops.cpp — the statement that starts the loop around an instruction (Note [Breaks inside loops]).
#include "frontend/bytecode/loops.h"

#include <opcode.h>

#include <algorithm>

#include "frontend/bytecode/assemble.h"
#include "frontend/bytecode/disassemble.h"
#include "frontend/bytecode/opcode_facts.h"
#include "frontend/bytecode/resume.h"

namespace framejit::frontend::bytecode {

Expected<int> outer_loop_start(PyObject* code, int offset) {
  Expected<Bytecode> bc = disassemble(code);
  if (!bc) return bc.error();
  const std::vector<Instruction>& ins = bc->instructions;
  // Every loop CPython compiles ends in a jump back to its head (FOR_ITER for a `for`; the body
  // or the condition for a `while`): the loop is every instruction from that target to the jump.
  // (Handlers of a `try` inside the body live at the end of the code; a break there finds no loop.)
  int head = -1;  // index of the outermost loop's head whose body holds `offset`
  for (size_t j = 0; j < ins.size(); ++j) {
    if (jump_kind(ins[j].opcode) != JumpKind::Backward || ins[j].offset < 0) continue;
    const int t = bc->index_of(ins[j].target);
    if (t < 0 || ins[static_cast<size_t>(t)].offset < 0) continue;
    if (ins[static_cast<size_t>(t)].offset * 2 <= offset && offset <= ins[j].offset * 2 && (head < 0 || t < head))
      head = t;
  }
  if (head < 0) return -1;
  Expected<std::vector<int>> depths = stack_depths(*bc);
  if (!depths) return depths.error();
  size_t k = static_cast<size_t>(head);
  if (ins[k].opcode == FOR_ITER) {
    // A `for`: walk back from GET_ITER over the iterable's evaluation, straight-line code that
    // only sits above the stack the loop started from, to where that stack was all there was.
    if (k < 1 || ins[k - 1].opcode != GET_ITER) return -1;
    const size_t get_iter = k - 1;
    const int base = (*depths)[get_iter] - 1;
    if (base < 0) return -1;
    k = get_iter;
    while ((*depths)[k] != base) {
      if ((*depths)[k] < base || k == 0 || ins[k].label != kNoLabel) return -1;  // entered by a jump
      --k;
    }
  }
  if (ins[k].offset < 0) return -1;
  const int start = ins[k].offset * 2;
  // It must be a place a resume function can start from (not the prologue, no lasti below).
  Expected<std::vector<ResumePoint>> points = resume_points(*bc);
  if (!points) return points.error();
  for (const ResumePoint& p : *points)
    if (p.offset == start) return start;
  return -1;
}

}  // namespace framejit::frontend::bytecode
