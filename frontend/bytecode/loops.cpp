// loops.cpp — the statement that starts the loop around an instruction (Note [Breaks inside loops]).
#include "frontend/bytecode/loops.h"

#include <opcode.h>

#include <algorithm>

#include "frontend/bytecode/assemble.h"
#include "frontend/bytecode/disassemble.h"
#include "frontend/bytecode/resume.h"

namespace framejit::frontend::bytecode {

Expected<int> outer_loop_start(PyObject* code, int offset) {
  Expected<Bytecode> bc = disassemble(code);
  if (!bc) return bc.error();
  const std::vector<Instruction>& ins = bc->instructions;
  // CPython lays a `for` out as GET_ITER, FOR_ITER, the body, a jump back, then the exhaustion
  // target: the body is every instruction between FOR_ITER and that target. (Handlers of a `try`
  // inside the body live at the end of the code; a break there finds no loop, as before.)
  int outer = -1;  // index of the outermost FOR_ITER whose body holds `offset`
  for (size_t i = 0; i < ins.size(); ++i) {
    if (ins[i].opcode != FOR_ITER || ins[i].offset < 0) continue;
    const int exit = bc->index_of(ins[i].target);
    if (exit < 0 || ins[static_cast<size_t>(exit)].offset < 0) continue;
    if (ins[i].offset * 2 <= offset && offset < ins[static_cast<size_t>(exit)].offset * 2) {
      outer = static_cast<int>(i);
      break;  // code order: the first one that contains it is the outermost
    }
  }
  if (outer < 1 || ins[static_cast<size_t>(outer) - 1].opcode != GET_ITER) return -1;
  Expected<std::vector<int>> depths = stack_depths(*bc);
  if (!depths) return depths.error();
  // Walk back from GET_ITER over the iterable's evaluation, straight-line code that only sits
  // above the stack the loop started from, to the instruction where that stack was all there was.
  const size_t get_iter = static_cast<size_t>(outer) - 1;
  const int base = (*depths)[get_iter] - 1;
  if (base < 0) return -1;
  size_t k = get_iter;
  while (true) {
    if ((*depths)[k] == base) break;
    if ((*depths)[k] < base || k == 0 || ins[k].label != kNoLabel) return -1;  // entered by a jump
    --k;
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
