// assemble.cpp — Bytecode -> co_code, co_exceptiontable, co_linetable, co_stacksize and a new
// code object (see assemble.h).
#include "frontend/bytecode/assemble.h"

#include <algorithm>
#include <string>
#include <unordered_map>
#include <vector>

#include "frontend/bytecode/opcode_facts.h"
#include "frontend/bytecode/tables.h"

namespace framejit::frontend::bytecode {

namespace {

int ext_units(unsigned arg) { return arg > 0xFFFFFF ? 3 : arg > 0xFFFF ? 2 : arg > 0xFF ? 1 : 0; }

std::string where(const Bytecode &bc, size_t i) {
  return "instruction " + std::to_string(i) + " (opcode " +
         std::to_string(bc.instructions[i].opcode) + ")";
}

// Label -> instruction index, and every label referenced checked to exist.
Expected<std::unordered_map<Label, int>> resolve_labels(const Bytecode &bc) {
  std::unordered_map<Label, int> at;
  for (size_t i = 0; i < bc.instructions.size(); ++i) {
    const Label l = bc.instructions[i].label;
    if (l == kNoLabel)
      continue;
    if (!at.emplace(l, static_cast<int>(i)).second)
      return Status::invalid("label " + std::to_string(l) + " is on two instructions");
  }
  for (size_t i = 0; i < bc.instructions.size(); ++i) {
    const Instruction &ins = bc.instructions[i];
    if (ins.target != kNoLabel && !at.count(ins.target))
      return Status::invalid(where(bc, i) + " jumps to label " + std::to_string(ins.target) +
                             ", which is on no instruction");
    if (ins.handler.active() && !at.count(ins.handler.target))
      return Status::invalid(where(bc, i) + " has handler label " +
                             std::to_string(ins.handler.target) + ", which is on no instruction");
    if (ins.handler.active() && ins.handler.depth < 0)
      return Status::invalid(where(bc, i) + " has a negative handler depth");
  }
  return at;
}

// The laid-out form: final opcodes (jump directions chosen), opargs and unit offsets.
struct Layout {
  std::vector<int> opcode, oparg, target, offset; // target: instruction index or -1
  int units = 0;
};

Expected<Layout> lay_out(const Bytecode &bc, const std::unordered_map<Label, int> &at) {
  const size_t n = bc.instructions.size();
  Layout L;
  L.opcode.resize(n);
  L.oparg.resize(n);
  L.target.assign(n, -1);
  L.offset.resize(n + 1);
  for (size_t i = 0; i < n; ++i) {
    const Instruction &ins = bc.instructions[i];
    int op = ins.opcode;
    int effect;
    if (op <= 0 || op >= 256 || op == EXTENDED_ARG ||
        !stack_effect(op, std::max(ins.oparg, 0), false, &effect))
      return Status::invalid(where(bc, i) + " is not an instruction of this interpreter");
    const JumpKind kind = jump_kind(op);
    if (kind == JumpKind::None) {
      if (ins.target != kNoLabel)
        return Status::invalid(where(bc, i) + " is not a jump but has a target");
      if (ins.oparg < 0)
        return Status::invalid(where(bc, i) + " has a negative oparg");
      L.oparg[i] = ins.oparg;
    } else {
      if (ins.target == kNoLabel)
        return Status::invalid(where(bc, i) + " is a jump without a target");
      const int t = at.at(ins.target);
      const bool backward = t <= static_cast<int>(i);
      if (backward != (kind == JumpKind::Backward)) {
        op = jump_reversed(op);
        if (op < 0)
          return Status::invalid(where(bc, i) + " cannot jump " +
                                 (backward ? "backward" : "forward"));
      }
      L.target[i] = t;
      L.oparg[i] = 0;
#if PY_VERSION_HEX >= 0x030C0000
      // An exhausted FOR_ITER skips its target by offset (END_FOR, and 3.13's POP_TOP after it).
      if (op == FOR_ITER) {
        const auto &ti = bc.instructions[static_cast<size_t>(t)];
        if (ti.opcode != END_FOR)
          return Status::invalid(where(bc, i) + ": FOR_ITER must jump to an END_FOR");
#if PY_VERSION_HEX >= 0x030D0000
        if (static_cast<size_t>(t) + 1 >= n ||
            bc.instructions[static_cast<size_t>(t) + 1].opcode != POP_TOP)
          return Status::invalid(where(bc, i) + ": FOR_ITER's END_FOR must be followed by POP_TOP");
#endif
      }
#endif
    }
    L.opcode[i] = op;
  }
  // Jump opargs depend on offsets, which depend on EXTENDED_ARG prefixes, which depend on jump
  // opargs: iterate. Prefixes only grow, so distances only grow and this settles quickly.
  for (int round = 0;; ++round) {
    if (round > 8)
      return Status::internal("jump layout did not settle");
    int off = 0;
    for (size_t i = 0; i < n; ++i) {
      L.offset[i] = off;
      off += ext_units(static_cast<unsigned>(L.oparg[i])) + 1 + cache_entries(L.opcode[i]);
    }
    L.offset[n] = off;
    L.units = off;
    bool grew = false;
    for (size_t i = 0; i < n; ++i) {
      if (L.target[i] < 0)
        continue;
      const int end = L.offset[i + 1];
      const int dest = L.offset[static_cast<size_t>(L.target[i])];
      const int arg = jump_kind(L.opcode[i]) == JumpKind::Forward ? dest - end : end - dest;
      if (arg < 0)
        return Status::internal(where(bc, i) + ": negative jump distance");
      if (ext_units(static_cast<unsigned>(arg)) > ext_units(static_cast<unsigned>(L.oparg[i])))
        grew = true;
      if (ext_units(static_cast<unsigned>(arg)) < ext_units(static_cast<unsigned>(L.oparg[i])))
        return Status::internal("jump layout shrank"); // unreachable: distances never shrink
      L.oparg[i] = arg;
    }
    if (!grew)
      break;
  }
  return L;
}

} // namespace

Expected<int> stack_depth(const Bytecode &bc) {
  int max_depth = 0;
  Expected<std::vector<int>> depths = stack_depths(bc, &max_depth);
  if (!depths)
    return depths.error();
  return max_depth;
}

Expected<std::vector<int>> stack_depths(const Bytecode &bc, int *max_out) {
  Expected<std::unordered_map<Label, int>> at = resolve_labels(bc);
  if (!at)
    return at.error();
  const size_t n = bc.instructions.size();
  std::vector<int> depth(n, -1);
  std::vector<size_t> work;
  int max_depth = 0;
  // Reaching an instruction with a depth: record it, or check it agrees with the one recorded.
  auto reach = [&](size_t i, int d) -> Status {
    if (i >= n)
      return Status::invalid("control falls off the end of the code");
    if (d < 0)
      return Status::invalid(where(bc, i) + " is reached with a negative stack depth");
    max_depth = std::max(max_depth, d);
    if (depth[i] < 0) {
      depth[i] = d;
      work.push_back(i);
    } else if (depth[i] != d) {
      return Status::invalid(where(bc, i) + " is reached with stack depths " +
                             std::to_string(depth[i]) + " and " + std::to_string(d));
    }
    return Status::ok();
  };
  if (n == 0) {
    if (max_out)
      *max_out = 0;
    return depth;
  }
  FJ_PROPAGATE(reach(0, 0));
  while (!work.empty()) {
    size_t i = work.back();
    work.pop_back();
    // Walk straight-line code from i until a terminator or an instruction already visited.
    for (;;) {
      const Instruction &ins = bc.instructions[i];
      const int d = depth[i];
      if (ins.handler.active()) // the handler starts with [depth items, lasti?, exception]
        FJ_PROPAGATE(reach(static_cast<size_t>(at->at(ins.handler.target)),
                           ins.handler.depth + (ins.handler.lasti ? 1 : 0) + 1));
      int fall;
      if (!stack_effect(ins.opcode, ins.oparg, false, &fall))
        return Status::invalid(where(bc, i) + " has no known stack effect");
      // NB: the compiler counts RETURN_GENERATOR as 0 because it adds the prologue after its
      // stack analysis; the generator's first resumption pushes the value sent (None), which
      // the POP_TOP after it discards.
      if (ins.opcode == RETURN_GENERATOR)
        fall = 1;
      if (jump_kind(ins.opcode) != JumpKind::None) {
        int taken;
        if (!stack_effect(ins.opcode, ins.oparg, true, &taken))
          return Status::invalid(where(bc, i) + " has no known stack effect");
        FJ_PROPAGATE(reach(static_cast<size_t>(at->at(ins.target)), d + taken));
      }
      if (is_terminator(ins.opcode))
        break;
      if (i + 1 >= n)
        return Status::invalid("control falls off the end of the code");
      const bool seen = depth[i + 1] >= 0;
      if (d + fall < 0)
        return Status::invalid(where(bc, i) + " pops more than the stack holds");
      max_depth = std::max(max_depth, d + fall);
      if (seen) {
        FJ_PROPAGATE(reach(i + 1, d + fall));
        break;
      }
      depth[i + 1] = d + fall;
      ++i;
    }
  }
  if (max_out)
    *max_out = max_depth;
  return depth;
}

Expected<Assembled> assemble_tables(const Bytecode &bc) {
  Expected<std::unordered_map<Label, int>> at = resolve_labels(bc);
  if (!at)
    return at.error();
  Expected<Layout> lay = lay_out(bc, *at);
  if (!lay)
    return lay.error();
  const Layout &L = *lay;
  const size_t n = bc.instructions.size();
  Assembled out;

  out.code.reserve(static_cast<size_t>(L.units) * 2);
  for (size_t i = 0; i < n; ++i) {
    const unsigned arg = static_cast<unsigned>(L.oparg[i]);
    for (int k = ext_units(arg); k > 0; --k) {
      out.code.push_back(static_cast<char>(EXTENDED_ARG));
      out.code.push_back(static_cast<char>((arg >> (8 * k)) & 0xff));
    }
    out.code.push_back(static_cast<char>(L.opcode[i]));
    out.code.push_back(static_cast<char>(arg & 0xff));
    out.code.append(static_cast<size_t>(cache_entries(L.opcode[i])) * 2, '\0'); // CACHE 0
  }

  // One entry per maximal run of instructions sharing a handler, as the compiler writes them.
  for (size_t i = 0; i < n;) {
    const ExceptHandler &h = bc.instructions[i].handler;
    size_t j = i + 1;
    while (j < n && bc.instructions[j].handler == h)
      ++j;
    if (h.active())
      encode_exception_entry(out.exception_table,
                             {L.offset[i], L.offset[j],
                              L.offset[static_cast<size_t>(at->at(h.target))], h.depth, h.lasti});
    i = j;
  }

  // Entries of at most 8 units: one run per instruction on 3.11, per maximal span of equal
  // positions on 3.12+ (what each compiler writes, so unedited code round-trips byte for byte).
  LocationWriter lw(bc.first_line);
  for (size_t i = 0; i < n;) {
    size_t j = i + 1;
#if PY_VERSION_HEX >= 0x030C0000
    while (j < n && bc.instructions[j].pos == bc.instructions[i].pos)
      ++j;
#endif
    lw.add(bc.instructions[i].pos, L.offset[j] - L.offset[i]);
    i = j;
  }
  out.line_table = std::move(lw.bytes());

  Expected<int> depth = stack_depth(bc);
  if (!depth)
    return depth.error();
  out.stack_size = *depth;
  return out;
}

Expected<OwnedRef> assemble(const Bytecode &bc) {
  if (!bc.code || !PyCode_Check(bc.code.get()))
    return Status::invalid("assemble: no code object to replace");
  Expected<Assembled> a = assemble_tables(bc);
  if (!a)
    return a.error();
  auto tuple_of = [](const std::vector<OwnedRef> &items) {
    OwnedRef t = OwnedRef::steal(PyTuple_New(static_cast<Py_ssize_t>(items.size()))); // new ref
    if (!t)
      return t;
    for (size_t i = 0; i < items.size(); ++i) {
      Py_INCREF(items[i].get());
      PyTuple_SET_ITEM(t.get(), static_cast<Py_ssize_t>(i), items[i].get()); // steals
    }
    return t;
  };
  // Cold path: code.replace() validates the fields and builds localsplus for us.
  OwnedRef kwargs = OwnedRef::steal(PyDict_New()); // new ref
  if (!kwargs)
    return Status::internal(fetch_error_text());
  auto put = [&](const char *key, OwnedRef value) -> bool {
    return value && PyDict_SetItemString(kwargs.get(), key, value.get()) == 0;
  };
  bool ok =
      put("co_code", OwnedRef::steal(PyBytes_FromStringAndSize(
                         a->code.data(), static_cast<Py_ssize_t>(a->code.size())))) &&
      put("co_exceptiontable",
          OwnedRef::steal(PyBytes_FromStringAndSize(
              a->exception_table.data(), static_cast<Py_ssize_t>(a->exception_table.size())))) &&
      put("co_linetable",
          OwnedRef::steal(PyBytes_FromStringAndSize(
              a->line_table.data(), static_cast<Py_ssize_t>(a->line_table.size())))) &&
      put("co_stacksize", OwnedRef::steal(PyLong_FromLong(a->stack_size))) &&
      put("co_consts", tuple_of(bc.consts)) && put("co_names", tuple_of(bc.names)) &&
      put("co_varnames", tuple_of(bc.varnames)) &&
      put("co_nlocals",
          OwnedRef::steal(PyLong_FromSsize_t(static_cast<Py_ssize_t>(bc.varnames.size())))) &&
      put("co_firstlineno", OwnedRef::steal(PyLong_FromLong(bc.first_line)));
  for (const auto &[key, value] : bc.overrides)
    ok = ok && put(key.c_str(), value);
  if (!ok)
    return Status::internal("assemble: " + fetch_error_text());
  OwnedRef replace = OwnedRef::steal(PyObject_GetAttrString(bc.code.get(), "replace")); // new ref
  if (!replace)
    return Status::internal("assemble: " + fetch_error_text());
  OwnedRef args = OwnedRef::steal(PyTuple_New(0)); // new ref
  OwnedRef result = OwnedRef::steal(args ? PyObject_Call(replace.get(), args.get(), kwargs.get())
                                         : nullptr); // new ref
  if (!result)
    return Status::invalid("assemble: code.replace: " + fetch_error_text());
  return result;
}

} // namespace framejit::frontend::bytecode
