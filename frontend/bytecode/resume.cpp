// resume.cpp — resume functions (see resume.h, Note [Resume functions]).
#include "frontend/bytecode/resume.h"

#include <opcode.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <tuple>
#include <unordered_map>
#include <unordered_set>

#include "frontend/bytecode/assemble.h"
#include "frontend/bytecode/disassemble.h"
#include "frontend/bytecode/locals.h"
#include "frontend/bytecode/opcode_facts.h"

namespace framejit::frontend::bytecode {

namespace {

// CPython's co_flags bits (Include/cpython/code.h); spelled out because 3.13 moved the header.
constexpr int kVarargs = 0x0004;
constexpr int kVarkeywords = 0x0008;
constexpr int kGeneratorLike = 0x0020 | 0x0080 | 0x0100 | 0x0200; // gen, coro, iter coro, agen

enum LocalKind : uint8_t { kLocal = 1, kCell = 2, kFree = 4 };

// The code's localsplus numbering (varnames, then cells that are not also varnames, then free
// variables), which is what LOAD_FAST/MAKE_CELL/LOAD_DEREF opargs index.
struct LocalsPlus {
  std::vector<std::string> names;
  std::vector<uint8_t> kinds;
};


Expected<LocalsPlus> locals_plus(PyObject *code) { // borrowed
  auto names = local_names(code, "resume");
  if (!names)
    return names.error();
  const std::vector<std::string>* var = &names->var;
  const std::vector<std::string>* cell = &names->cell;
  const std::vector<std::string>* free = &names->free;
  LocalsPlus lp;
  for (const std::string &n : *var) {
    lp.names.push_back(n);
    lp.kinds.push_back(kLocal);
  }
  for (const std::string &n : *cell) {
    auto it = std::find(var->begin(), var->end(), n);
    if (it != var->end()) {
      lp.kinds[static_cast<size_t>(it - var->begin())] |= kCell;
    } else {
      lp.names.push_back(n);
      lp.kinds.push_back(kCell);
    }
  }
  for (const std::string &n : *free) {
    lp.names.push_back(n);
    lp.kinds.push_back(kFree);
  }
  return lp;
}

// What resume_points() and build_resume_code() both need to know about each instruction.
struct Analysis {
  int resume_index = -1;       // the prologue's RESUME
  std::vector<int> depth;      // stack depth on entry, -1 unreachable
  std::vector<uint64_t> lasti; // bit p: stack slot p may hold an exception-table lasti
};

// Which stack slots may hold the lasti an exception-table entry pushed, per instruction: the
// slot is marked at the handler's entry and stays marked on every path until the stack
// shrinks to it. Conservative for instructions that shuffle slots (COPY/SWAP): the slot's
// old position stays marked, and the cleanup code that shuffles it also pops it.
Expected<Analysis> analyse(const Bytecode &bc) {
  Analysis a;
  Expected<std::vector<int>> depths = stack_depths(bc);
  if (!depths)
    return depths.error();
  a.depth = std::move(*depths);
  const size_t n = bc.instructions.size();
  for (size_t i = 0; i < n; ++i)
    if (bc.instructions[i].opcode == RESUME) {
      a.resume_index = static_cast<int>(i);
      break;
    }
  if (a.resume_index < 0)
    return Status::invalid("resume: the code has no RESUME");
  std::unordered_map<Label, size_t> index;
  for (size_t i = 0; i < n; ++i)
    if (bc.instructions[i].label != kNoLabel)
      index[bc.instructions[i].label] = i;
  auto low = [](int d) { return d >= 64 ? ~uint64_t{0} : (uint64_t{1} << std::max(d, 0)) - 1; };
  a.lasti.assign(n, 0);
  std::vector<char> queued(n, 0);
  std::vector<size_t> work;
  auto flow = [&](size_t to, uint64_t mask) {
    if (to >= n || a.depth[to] < 0)
      return;
    mask &= low(a.depth[to]);
    if ((a.lasti[to] | mask) != a.lasti[to] || !queued[to]) {
      a.lasti[to] |= mask;
      queued[to] = 1;
      work.push_back(to);
    }
  };
  for (size_t i = 0; i < n; ++i)
    if (a.depth[i] >= 0)
      flow(i, 0);
  while (!work.empty()) {
    const size_t i = work.back();
    work.pop_back();
    const Instruction &ins = bc.instructions[i];
    const int d = a.depth[i];
    const uint64_t m = a.lasti[i];
    if (ins.handler.active()) {
      auto h = index.find(ins.handler.target);
      if (h != index.end()) {
        uint64_t hm = m & low(ins.handler.depth);
        if (ins.handler.lasti && ins.handler.depth < 64)
          hm |= uint64_t{1} << ins.handler.depth;
        flow(h->second, hm);
      }
    }
    if (ins.target != kNoLabel) {
      auto t = index.find(ins.target);
      if (t != index.end())
        flow(t->second, m & low(std::min(d, a.depth[t->second])));
    }
    if (!is_terminator(ins.opcode) && i + 1 < n && a.depth[i + 1] >= 0)
      flow(i + 1, m & low(std::min(d, a.depth[i + 1])));
  }
  return a;
}

// Why make_resume_code refuses instruction i, or "" if it accepts it.
std::string refusal(const Bytecode &bc, const Analysis &a, size_t i) {
  if (static_cast<int>(i) <= a.resume_index)
    return "is in the interpreter's prologue (at or before RESUME)";
  if (a.depth[i] < 0)
    return "is unreachable";
  if (!can_insert_before(bc, i))
    return "is the second half of an instruction pair the interpreter runs together";
  if (a.lasti[i] != 0)
    return "is in exception cleanup code (the stack holds an exception-table lasti)";
  return "";
}

#if PY_VERSION_HEX >= 0x030C0000
bool is_plain_load(int op) { return op == LOAD_FAST; }
#endif

// 3.12+: loads of locals the resume function may not have bound become checked loads; 3.13's
// pairs that contain such a load are split first.
void check_unbound_loads(Bytecode &bc, const std::vector<bool> &bound) {
#if PY_VERSION_HEX >= 0x030C0000
  auto is_bound = [&](int slot) {
    return slot >= 0 && static_cast<size_t>(slot) < bound.size() && bound[slot];
  };
  std::vector<Instruction> out;
  out.reserve(bc.instructions.size());
  for (Instruction &ins : bc.instructions) {
#if PY_VERSION_HEX >= 0x030D0000
    const int hi = ins.oparg >> 4, lo = ins.oparg & 15;
    if ((ins.opcode == LOAD_FAST_LOAD_FAST && (!is_bound(hi) || !is_bound(lo))) ||
        (ins.opcode == STORE_FAST_LOAD_FAST && !is_bound(lo))) {
      const int first = ins.opcode == STORE_FAST_LOAD_FAST ? STORE_FAST : is_bound(hi) ? LOAD_FAST : LOAD_FAST_CHECK;
      append_split_pair(out, ins, first, hi, is_bound(lo) ? LOAD_FAST : LOAD_FAST_CHECK, lo);
      continue;
    }
#endif
    if (is_plain_load(ins.opcode) && !is_bound(ins.oparg))
      ins.opcode = LOAD_FAST_CHECK;
    out.push_back(ins);
  }
  bc.instructions = std::move(out);
#else
  (void)bc; // 3.11's LOAD_FAST always checks
  (void)bound;
#endif
}

OwnedRef py_int(long v) { return OwnedRef::steal(PyLong_FromLong(v)); } // new ref

} // namespace

Expected<std::vector<ResumePoint>> resume_points(const Bytecode &bc) {
  Expected<Analysis> a = analyse(bc);
  if (!a)
    return a.error();
  std::vector<ResumePoint> out;
  for (size_t i = 0; i < bc.instructions.size(); ++i)
    if (refusal(bc, *a, i).empty() && bc.instructions[i].offset >= 0)
      out.push_back({bc.instructions[i].offset * 2, a->depth[i]});
  return out;
}

Expected<OwnedRef> build_resume_code(Bytecode bc, const ResumeSpec &spec) {
  PyObject *code = bc.code.get(); // borrowed (bc holds it)
  const int flags = reinterpret_cast<PyCodeObject *>(code)->co_flags;
  if (flags & kGeneratorLike)
    return Status::unsupported("resume: generators and coroutines are not supported");
  Expected<Analysis> a = analyse(bc);
  if (!a)
    return a.error();
  const std::string at = "resume: offset " + std::to_string(spec.offset);
  size_t idx = bc.instructions.size();
  if (spec.offset >= 0 && spec.offset % 2 == 0)
    for (size_t i = 0; i < bc.instructions.size(); ++i)
      if (bc.instructions[i].offset * 2 == spec.offset) {
        idx = i;
        break;
      }
  if (idx == bc.instructions.size())
    return Status::invalid(at + " is not the start of an instruction");
  if (spec.lasti_slot >= 0) {
    // Only the one slot the handler's own entry pushed may hold a lasti.
    if (spec.lasti_slot >= 64 || static_cast<size_t>(spec.lasti_slot) >= spec.stack_null.size() ||
        spec.stack_null[static_cast<size_t>(spec.lasti_slot)] ||
        a->lasti[idx] != (uint64_t{1} << spec.lasti_slot))
      return Status::invalid(at + ": stack slot " + std::to_string(spec.lasti_slot) +
                             " is not the only one holding a lasti there");
    a->lasti[idx] = 0;
  }
  if (std::string why = refusal(bc, *a, idx); !why.empty())
    return Status::invalid(at + " " + why);
  if (static_cast<int>(spec.stack_null.size()) != a->depth[idx])
    return Status::invalid(at + ": the stack there holds " + std::to_string(a->depth[idx]) +
                           " values, " + std::to_string(spec.stack_null.size()) + " given");

  Expected<LocalsPlus> lp = locals_plus(code);
  if (!lp)
    return lp.error();
  std::vector<bool> live(lp->names.size(), false);
  for (int slot : spec.live_locals) {
    if (slot < 0 || static_cast<size_t>(slot) >= lp->names.size())
      return Status::invalid("resume: live local " + std::to_string(slot) + " out of range");
    if (lp->kinds[static_cast<size_t>(slot)] & kFree)
      return Status::invalid("resume: live local " + lp->names[static_cast<size_t>(slot)] +
                             " is a free variable (it comes with the closure)");
    if (live[static_cast<size_t>(slot)])
      return Status::invalid("resume: live local " + lp->names[static_cast<size_t>(slot)] +
                             " given twice");
    live[static_cast<size_t>(slot)] = true;
  }

  // The new arguments' names: ___stack<i> per non-NULL slot, ___live<j> per live local, with
  // more leading underscores should the function already use such a name.
  std::unordered_set<std::string> taken(lp->names.begin(), lp->names.end());
  std::string prefix = "___";
  auto clashes = [&](const std::string &p) {
    for (const std::string &n : taken)
      if (n.compare(0, p.size(), p) == 0)
        return true;
    return false;
  };
  while (clashes(prefix + "stack") || clashes(prefix + "live"))
    prefix += "_";
  std::vector<std::string> arg_names;
  std::vector<int> stack_arg(spec.stack_null.size(), -1);
  for (size_t i = 0; i < spec.stack_null.size(); ++i)
    if (!spec.stack_null[i] && static_cast<int>(i) != spec.lasti_slot) {
      stack_arg[i] = static_cast<int>(arg_names.size());
      arg_names.push_back(prefix + "stack" + std::to_string(i));
    }
  const int first_live_arg = static_cast<int>(arg_names.size());
  for (size_t j = 0; j < spec.live_locals.size(); ++j)
    arg_names.push_back(prefix + "live" + std::to_string(j));
  const int k = static_cast<int>(arg_names.size());

  const Label target = bc.label_at(idx);
  const Position pos = bc.instructions[static_cast<size_t>(a->resume_index)].pos;
  for (int p = 0; p < k; ++p) {
    OwnedRef name =
        OwnedRef::steal(PyUnicode_FromString(arg_names[static_cast<size_t>(p)].c_str()));
    if (!name)
      return Status::internal(fetch_error_text());
    Expected<int> added = insert_local(bc, static_cast<size_t>(p), name.get());
    if (!added)
      return added.error();
  }
  // From here on an original localsplus index i is i + k.
  std::vector<bool> bound(static_cast<size_t>(k) + lp->names.size(), false);
  for (int p = 0; p < k; ++p)
    bound[static_cast<size_t>(p)] = true;
  for (size_t i = 0; i < live.size(); ++i)
    bound[i + static_cast<size_t>(k)] = live[i] || (lp->kinds[i] & (kCell | kFree));
  check_unbound_loads(bc, bound);

  std::vector<Instruction> pro;
  auto emit = [&](int op, int arg) { pro.push_back(Instruction::make(op, arg, pos)); };
  for (size_t j = 0; j < spec.live_locals.size(); ++j) {
    const int arg = first_live_arg + static_cast<int>(j);
    const int slot = spec.live_locals[j] + k;
    const bool cell = lp->kinds[static_cast<size_t>(spec.live_locals[j])] & kCell;
    emit(LOAD_FAST, arg);
    // A cell object goes into the slot itself (LOAD_DEREF reads through it); a value goes into
    // the fresh cell MAKE_CELL made.
    emit(cell && spec.cells_as_values ? STORE_DEREF : STORE_FAST, slot);
    emit(DELETE_FAST, arg);
  }
  for (size_t i = 0; i < spec.stack_null.size(); ++i) {
    if (static_cast<int>(i) == spec.lasti_slot) {
      OwnedRef lasti = py_int(bc.instructions[idx].offset); // the entry's own offset, before the prologue
      if (!lasti)
        return Status::internal(fetch_error_text());
      emit(LOAD_CONST, bc.add_const(lasti.get()));
      continue;
    }
    emit(spec.stack_null[i] ? PUSH_NULL : LOAD_FAST, spec.stack_null[i] ? 0 : stack_arg[i]);
  }
  for (size_t i = 0; i < spec.stack_null.size(); ++i)
    if (stack_arg[i] >= 0)
      emit(DELETE_FAST, stack_arg[i]);
  pro.push_back(Instruction::jump(JUMP_FORWARD, target, pos));
  int resume_at = -1;
  for (size_t i = 0; i < bc.instructions.size(); ++i)
    if (bc.instructions[i].opcode == RESUME) {
      resume_at = static_cast<int>(i);
      break;
    }
  bc.instructions.insert(bc.instructions.begin() + resume_at + 1, pro.begin(), pro.end());

  OwnedRef qualname = OwnedRef::steal(PyObject_GetAttrString(code, "co_qualname")); // new ref
  if (!qualname)
    return Status::internal(fetch_error_text());
  OwnedRef new_qualname = OwnedRef::steal(
      PyUnicode_FromFormat("%U.<resume at %d>", qualname.get(), spec.offset)); // new ref
  bc.overrides.emplace_back("co_argcount", py_int(k));
  bc.overrides.emplace_back("co_posonlyargcount", py_int(0));
  bc.overrides.emplace_back("co_kwonlyargcount", py_int(0));
  bc.overrides.emplace_back("co_flags", py_int(flags & ~(kVarargs | kVarkeywords)));
  bc.overrides.emplace_back("co_qualname", std::move(new_qualname));
  for (const auto &o : bc.overrides)
    if (!o.second)
      return Status::internal(fetch_error_text());
  return assemble(bc);
}

namespace {

using CacheKey = std::tuple<uintptr_t, int, std::vector<bool>, std::vector<int>, bool, int>;
struct CacheEntry {
  OwnedRef code;   // keeps the key's code object (and so its address) alive
  OwnedRef resume; // the resume code
};
// Never destroyed: its references must not be released after the interpreter finalizes.
std::map<CacheKey, CacheEntry> &cache() {
  static auto *c = new std::map<CacheKey, CacheEntry>();
  return *c;
}

} // namespace

Expected<OwnedRef> make_resume_code(PyObject *code, const ResumeSpec &spec) { // borrowed
  if (!code || !PyCode_Check(code))
    return Status::invalid("resume: not a code object");
  CacheKey key{reinterpret_cast<uintptr_t>(code), spec.offset, spec.stack_null, spec.live_locals,
               spec.cells_as_values, spec.lasti_slot};
  auto it = cache().find(key);
  if (it != cache().end())
    return OwnedRef::borrow(it->second.resume.get());
  Expected<Bytecode> bc = disassemble(code);
  if (!bc)
    return bc.error();
  Expected<OwnedRef> out = build_resume_code(std::move(*bc), spec);
  if (!out)
    return out.error();
  cache().emplace(std::move(key), CacheEntry{OwnedRef::borrow(code), OwnedRef::borrow(out->get())});
  return out;
}

size_t resume_cache_size() { return cache().size(); }

void clear_resume_cache() { cache().clear(); }

} // namespace framejit::frontend::bytecode
