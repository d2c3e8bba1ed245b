// op_table.cpp — the registered op tables (Note [Op tables]).
#include "frontend/trace/op_table.h"

#include <algorithm>
#include <array>

namespace framejit::frontend {

namespace {

// Indexed by ArrayKind. Written once at module init, under the GIL, before any trace.
std::array<OpTable*, kArrayKinds> g_tables{};

}  // namespace

void register_op_table(ArrayKind kind, OpTable* table) { g_tables[static_cast<size_t>(kind)] = table; }

OpTable& array_op_table(ArrayKind kind) {
  OpTable* t = g_tables[static_cast<size_t>(kind)];
  BREAK_IF(t == nullptr, BreakKind::Internal, "no op table for this graph's arrays");
  return *t;
}

OpTable& Tracer::array_ops() { return array_op_table(out_.array_kind); }

OpTable* op_table_owning(PyObject* callable) {
  for (size_t i = 0; i < g_tables.size(); ++i) {
    OpTable* t = g_tables[i];
    bool seen = false;  // a table registered for several kinds is asked once
    for (size_t j = 0; j < i; ++j) seen = seen || g_tables[j] == t;
    if (t && !seen && t->owns(callable)) return t;
  }
  return nullptr;
}

namespace {

template <typename Fn>
VarPtr first_answer(Fn&& ask) {
  for (size_t i = 0; i < g_tables.size(); ++i) {
    OpTable* t = g_tables[i];
    bool seen = false;  // a table registered for several kinds is asked once
    for (size_t j = 0; j < i; ++j) seen = seen || g_tables[j] == t;
    if (!t || seen) continue;
    if (VarPtr r = ask(*t)) return r;
  }
  return nullptr;
}

}  // namespace

VarPtr tables_object_call(Tracer& tx, const VarPtr& obj, std::vector<VarPtr>& args, KwArgs& kwargs) {
  return first_answer([&](OpTable& t) { return t.object_call(tx, obj, args, kwargs); });
}

VarPtr tables_object_attr(Tracer& tx, const VarPtr& obj, const std::string& name) {
  return first_answer([&](OpTable& t) { return t.object_attr(tx, obj, name); });
}

std::vector<std::string> supported_ops() {
  std::vector<std::string> all;
  for (OpTable* t : g_tables)
    if (t)
      for (std::string& s : t->supported()) all.push_back(std::move(s));
  std::sort(all.begin(), all.end());
  all.erase(std::unique(all.begin(), all.end()), all.end());
  return all;
}

}  // namespace framejit::frontend
