// sym.h — SymInt: integer expressions over symbolic sizes (s0, s1, ...) with trace-time hints.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace framejit::jit {

// Note [Symbolic sizes]
// A graph input's dim that is neither 0 nor 1 becomes a symbol, so a new batch size reuses the
// compiled graph. Everything derived from sizes (a reshape's -1, a flattened length, a broadcast
// result) is a SymInt expression over those symbols. Each symbol carries the value it had when the
// graph was traced (its hint); the tracer uses hints to decide Python control flow and records a
// guard for each decision, so the expression language only needs what array programs compute on
// sizes: + - * // % and constants.

struct SymNode;

/// An immutable integer expression. Cheap to copy (shared tree). Constants fold on construction.
class SymInt {
public:
  enum class Kind : uint8_t { Const, Symbol, Add, Mul, FloorDiv, Mod };

  SymInt() : SymInt(int64_t{0}) {}
  SymInt(int64_t value);  // NOLINT(google-explicit-constructor): constants are SymInts
  static SymInt symbol(int id);

  Kind kind() const;
  bool is_const() const { return kind() == Kind::Const; }
  /// The constant value; only meaningful when is_const().
  int64_t const_value() const;
  /// The symbol id; only meaningful when kind() == Symbol.
  int symbol_id() const;
  const SymInt& lhs() const;
  const SymInt& rhs() const;

  /// The expression with each symbol `id` replaced by `by[id]` where that is set (the result is
  /// simplified as if built that way). Symbols past the end of `by` stay.
  SymInt substitute(const std::vector<std::optional<SymInt>>& by) const;
  /// Evaluate with `values[id]` as the value of symbol `id`. Python semantics for // and %.
  int64_t evaluate(const std::vector<int64_t>& values) const;
  /// Structural equality after the simplifications done on construction.
  bool same_as(const SymInt& other) const;
  /// Symbols are printed as s<id>.
  std::string to_string() const;
  size_t hash() const;

  friend SymInt operator+(const SymInt& a, const SymInt& b);
  friend SymInt operator-(const SymInt& a, const SymInt& b);
  friend SymInt operator*(const SymInt& a, const SymInt& b);
  friend SymInt floordiv(const SymInt& a, const SymInt& b);
  friend SymInt mod(const SymInt& a, const SymInt& b);

private:
  explicit SymInt(std::shared_ptr<const SymNode> node) : node_(std::move(node)) {}
  static SymInt make(Kind kind, SymInt lhs, SymInt rhs);
  std::shared_ptr<const SymNode> node_;
};

/// Python's floor division and modulo on int64.
int64_t py_floordiv(int64_t a, int64_t b);
int64_t py_mod(int64_t a, int64_t b);

}  // namespace framejit::jit
