// code_state.cpp — CodeState on co_extra, the registry of live states.
#include "frontend/cache/code_state.h"

#include "frontend/cache/code_extra.h"

#include <string>
#include <unordered_set>

namespace framejit::frontend {

namespace {

std::unordered_set<CodeState*>& live_states() {
  static auto* s = new std::unordered_set<CodeState*>();  // NB: immortal; freed states unregister
  return *s;
}

void free_code_state(void* p) {  // called by CPython when the code object dies (GIL held)
  CodeState* cs = untag(p);
  live_states().erase(cs);
  delete cs;
}

Py_ssize_t extra_index() {
  static Py_ssize_t index = request_code_extra_index(free_code_state);
  return index;
}

}  // namespace

Py_ssize_t code_extra_index() { return extra_index(); }

CodeState* code_state(PyCodeObject* code) {
  Py_ssize_t index = extra_index();
  if (index < 0) return nullptr;
  void* p = nullptr;
  if (get_code_extra(reinterpret_cast<PyObject*>(code), index, &p) < 0) {
    PyErr_Clear();
    return nullptr;
  }
  if (p) return untag(p);
  auto* cs = new CodeState();
  cs->code = code;
  if (set_code_extra(reinterpret_cast<PyObject*>(code), index, cs) < 0) {
    PyErr_Clear();
    delete cs;
    return nullptr;
  }
  live_states().insert(cs);
  return cs;
}

void reset_all_code_states() {
  for (CodeState* cs : live_states()) {
    cs->entries.clear();
    cs->held_sizes.clear();
    cs->failed = false;
    cs->no_arrays = false;
    cs->gave_up = false;
    cs->budget_failures = 0;
    cs->last_failure.clear();
    cs->misses_past_limit = 0;
    cs->gave_up_reason.clear();
    cs->update_never();
    cs->limit_reported = false;
  }
}

void CodeState::update_never() {
  never = skip || failed || no_arrays || gave_up;
  void* tagged =
      reinterpret_cast<void*>(reinterpret_cast<uintptr_t>(this) | ((failed || no_arrays || gave_up) ? kNeverTag : 0));
  // NB: not set_code_extra, which would free the state it replaces (this very object).
  retag_code_extra(code, extra_index(), tagged);
}

void CodeState::give_up(std::string reason) {
  gave_up = true;
  gave_up_reason = std::move(reason);
  update_never();
}

long long count_cache_entries() {
  long long n = 0;
  for (CodeState* cs : live_states()) n += static_cast<long long>(cs->entries.size());
  return n;
}

}  // namespace framejit::frontend
