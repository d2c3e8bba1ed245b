// sym.cpp — SymInt: construction-time simplification, evaluation, printing and hashing.
#include "jit/ir/sym.h"

#include <algorithm>
#include <limits>
#include <utility>

namespace framejit::jit {

// Note [SymInt canonical form]
// Expressions are simplified when built, so that two spellings of one size compare equal with
// same_as() (a reshape's `-1` computed as `s0*4//2` must match `s0*2` from elsewhere). Sums and
// constant multiples are kept as a linear form over opaque "bases" (symbols, products of
// non-constant factors, divisions, modulos):
//
//     t1*c1 + t2*c2 + ... + c        bases sorted, positive coefficients first, constant last
//
// built as a left-leaning Add chain; a constant factor is always the rhs of a Mul and distributes
// over sums. Floor division and modulo by a constant pull out the terms the divisor divides. This
// is not a full normalizer (s0*(s1 + 1) stays as it is), only what size arithmetic needs.
struct SymNode {
  SymInt::Kind kind = SymInt::Kind::Const;
  int64_t value = 0;  // Const: the value; Symbol: the id
  // NB: optional, so that building a leaf does not build its (absent) children, which would be
  // leaves themselves.
  std::optional<SymInt> lhs, rhs;
  size_t hash = 0;
};

namespace {

using Kind = SymInt::Kind;

// Wrapping arithmetic: sizes never get near 2^63, and folding must not be undefined behaviour.
int64_t wrap_add(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
}
int64_t wrap_mul(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b));
}

size_t hash_combine(size_t seed, size_t v) {
  return seed ^ (v + 0x9e3779b97f4a7c15ULL + (seed << 6) + (seed >> 2));
}

bool is_const_value(const SymInt& e, int64_t v) { return e.is_const() && e.const_value() == v; }

// A total order on expressions, used to sort the operands of + and *.
int kind_rank(Kind k) {
  switch (k) {
    case Kind::Symbol:
      return 0;
    case Kind::Mul:
      return 1;
    case Kind::FloorDiv:
      return 2;
    case Kind::Mod:
      return 3;
    case Kind::Add:
      return 4;
    case Kind::Const:
      return 5;
  }
  return 6;
}

int compare(const SymInt& a, const SymInt& b) {
  if (a.kind() != b.kind()) return kind_rank(a.kind()) < kind_rank(b.kind()) ? -1 : 1;
  switch (a.kind()) {
    case Kind::Const:
      return a.const_value() < b.const_value() ? -1 : (a.const_value() > b.const_value() ? 1 : 0);
    case Kind::Symbol:
      return a.symbol_id() < b.symbol_id() ? -1 : (a.symbol_id() > b.symbol_id() ? 1 : 0);
    default:
      if (int c = compare(a.lhs(), b.lhs())) return c;
      return compare(a.rhs(), b.rhs());
  }
}

struct Term {
  SymInt base;
  int64_t coef;
};

/// `sum(base * coef) + constant`; the canonical shape of every Add (see Note [SymInt canonical
/// form]).
struct LinearForm {
  std::vector<Term> terms;
  int64_t constant = 0;

  void add_term(const SymInt& base, int64_t coef) {
    for (Term& t : terms) {
      if (t.base.same_as(base)) {
        t.coef = wrap_add(t.coef, coef);
        return;
      }
    }
    terms.push_back({base, coef});
  }
};

void linearize(const SymInt& e, int64_t scale, LinearForm& out) {
  switch (e.kind()) {
    case Kind::Const:
      out.constant = wrap_add(out.constant, wrap_mul(scale, e.const_value()));
      return;
    case Kind::Add:
      linearize(e.lhs(), scale, out);
      linearize(e.rhs(), scale, out);
      return;
    case Kind::Mul:
      if (e.rhs().is_const()) {
        linearize(e.lhs(), wrap_mul(scale, e.rhs().const_value()), out);
        return;
      }
      break;
    default:
      break;
  }
  out.add_term(e, scale);
}

LinearForm linearize(const SymInt& e) {
  LinearForm f;
  linearize(e, 1, f);
  return f;
}

// Printing: Python precedence levels.
constexpr int kPrecAdd = 1;    // + -
constexpr int kPrecMul = 2;    // * // %
constexpr int kPrecUnary = 3;  // -x
constexpr int kPrecAtom = 4;

std::string print(const SymInt& e, int* prec);

std::string print_at_least(const SymInt& e, int min_prec) {
  int p = 0;
  std::string s = print(e, &p);
  return p >= min_prec ? s : "(" + s + ")";
}

std::string print(const SymInt& e, int* prec) {
  switch (e.kind()) {
    case Kind::Const:
      *prec = e.const_value() < 0 ? kPrecUnary : kPrecAtom;
      return std::to_string(e.const_value());
    case Kind::Symbol:
      *prec = kPrecAtom;
      return "s" + std::to_string(e.symbol_id());
    case Kind::Add: {
      *prec = kPrecAdd;
      std::string s = print_at_least(e.lhs(), kPrecAdd);
      const SymInt& r = e.rhs();
      constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
      // Subtraction is stored as adding a negative multiple; print it the way it was written.
      if (r.is_const() && r.const_value() < 0 && r.const_value() != kMin)
        return s + " - " + std::to_string(-r.const_value());
      if (r.kind() == Kind::Mul && r.rhs().is_const() && r.rhs().const_value() < 0 &&
          r.rhs().const_value() != kMin) {
        int64_t c = -r.rhs().const_value();
        if (c == 1) return s + " - " + print_at_least(r.lhs(), kPrecMul);
        return s + " - " + print_at_least(r.lhs(), kPrecMul) + "*" + std::to_string(c);
      }
      return s + " + " + print_at_least(r, kPrecMul);
    }
    case Kind::Mul:
      if (is_const_value(e.rhs(), -1)) {
        *prec = kPrecUnary;
        return "-" + print_at_least(e.lhs(), kPrecUnary);
      }
      [[fallthrough]];
    case Kind::FloorDiv:
    case Kind::Mod: {
      *prec = kPrecMul;
      const char* op = e.kind() == Kind::Mul ? "*" : (e.kind() == Kind::FloorDiv ? "//" : "%");
      // Left-associative: the rhs needs parentheses at the same level, the lhs does not.
      return print_at_least(e.lhs(), kPrecMul) + op + print_at_least(e.rhs(), kPrecUnary);
    }
  }
  *prec = kPrecAtom;
  return "?";
}

}  // namespace

int64_t py_floordiv(int64_t a, int64_t b) {
  // NB: callers leave x//0 unfolded; returning 0 here keeps evaluation from trapping.
  if (b == 0) return 0;
  if (b == -1) return wrap_mul(a, -1);  // INT64_MIN / -1 traps on x86
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

int64_t py_mod(int64_t a, int64_t b) {
  if (b == 0 || b == -1) return 0;
  int64_t r = a % b;
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}

SymInt::SymInt(int64_t value) {
  auto n = std::make_shared<SymNode>();
  n->kind = Kind::Const;
  n->value = value;
  n->hash = hash_combine(std::hash<int64_t>()(value), static_cast<size_t>(Kind::Const));
  node_ = std::move(n);
}

SymInt SymInt::symbol(int id) {
  auto n = std::make_shared<SymNode>();
  n->kind = Kind::Symbol;
  n->value = id;
  n->hash = hash_combine(std::hash<int64_t>()(id), static_cast<size_t>(Kind::Symbol));
  return SymInt(std::shared_ptr<const SymNode>(std::move(n)));
}

SymInt::Kind SymInt::kind() const { return node_->kind; }
int64_t SymInt::const_value() const { return node_->value; }
int SymInt::symbol_id() const { return static_cast<int>(node_->value); }

const SymInt& SymInt::lhs() const {
  static const SymInt kZero;
  return node_->lhs ? *node_->lhs : kZero;
}
const SymInt& SymInt::rhs() const {
  static const SymInt kZero;
  return node_->rhs ? *node_->rhs : kZero;
}

SymInt SymInt::make(Kind kind, SymInt a, SymInt b) {
  // A node exactly as given, no simplification.
  auto raw = [](Kind k, SymInt l, SymInt r) {
    auto n = std::make_shared<SymNode>();
    n->kind = k;
    n->hash = hash_combine(hash_combine(static_cast<size_t>(k) * 31 + 7, l.hash()), r.hash());
    n->lhs = std::move(l);
    n->rhs = std::move(r);
    return SymInt(std::shared_ptr<const SymNode>(std::move(n)));
  };
  // Rebuilds a linear form in canonical order (Note [SymInt canonical form]).
  auto build = [&](LinearForm f) {
    std::erase_if(f.terms, [](const Term& t) { return t.coef == 0; });
    std::sort(f.terms.begin(), f.terms.end(), [](const Term& x, const Term& y) {
      if ((x.coef < 0) != (y.coef < 0)) return x.coef > 0;
      return compare(x.base, y.base) < 0;
    });
    std::optional<SymInt> sum;
    for (const Term& t : f.terms) {
      SymInt term = t.coef == 1 ? t.base : raw(Kind::Mul, t.base, SymInt(t.coef));
      sum = sum ? raw(Kind::Add, *sum, term) : term;
    }
    if (!sum) return SymInt(f.constant);
    return f.constant == 0 ? *sum : raw(Kind::Add, *sum, SymInt(f.constant));
  };

  switch (kind) {
    case Kind::Add: {
      if (a.is_const() && b.is_const()) return SymInt(wrap_add(a.const_value(), b.const_value()));
      if (is_const_value(b, 0)) return a;  // operands are already canonical
      if (is_const_value(a, 0)) return b;
      LinearForm f = linearize(a);
      linearize(b, 1, f);
      return build(std::move(f));
    }
    case Kind::Mul: {
      if (a.is_const() && b.is_const()) return SymInt(wrap_mul(a.const_value(), b.const_value()));
      if (is_const_value(b, 1)) return a;
      if (is_const_value(a, 1)) return b;
      // Flatten both sides into non-constant factors and one constant.
      std::vector<SymInt> factors;
      int64_t c = 1;
      std::vector<SymInt> stack = {b, a};
      while (!stack.empty()) {
        SymInt e = std::move(stack.back());
        stack.pop_back();
        if (e.is_const()) {
          c = wrap_mul(c, e.const_value());
        } else if (e.kind() == Kind::Mul) {
          stack.push_back(e.rhs());
          stack.push_back(e.lhs());
        } else {
          factors.push_back(std::move(e));
        }
      }
      if (c == 0 || factors.empty()) return SymInt(c);
      // A constant times a sum distributes, keeping sums linear.
      if (factors.size() == 1 && factors[0].kind() == Kind::Add) {
        LinearForm f;
        linearize(factors[0], c, f);
        return build(std::move(f));
      }
      std::sort(factors.begin(), factors.end(),
                [](const SymInt& x, const SymInt& y) { return compare(x, y) < 0; });
      SymInt prod = factors[0];
      for (size_t i = 1; i < factors.size(); ++i) prod = raw(Kind::Mul, prod, factors[i]);
      return c == 1 ? prod : raw(Kind::Mul, prod, SymInt(c));
    }
    case Kind::FloorDiv: {
      if (!b.is_const() || b.const_value() == 0) return raw(kind, a, b);
      int64_t c = b.const_value();
      if (a.is_const()) return SymInt(py_floordiv(a.const_value(), c));
      if (c == 1) return a;
      if (c == -1) return make(Kind::Mul, a, SymInt(-1));
      // (c*k + r)//c == k + r//c for integer k: pull out every term c divides.
      LinearForm f = linearize(a), whole, rest;
      for (const Term& t : f.terms) {
        if (t.coef % c == 0)
          whole.add_term(t.base, t.coef / c);
        else
          rest.add_term(t.base, t.coef);
      }
      whole.constant = py_floordiv(f.constant, c);
      rest.constant = py_mod(f.constant, c);
      if (!whole.terms.empty() || whole.constant != 0)
        return make(Kind::Add, build(std::move(whole)), make(Kind::FloorDiv, build(rest), b));
      // (x//c1)//c2 == x//(c1*c2) for positive divisors.
      if (a.kind() == Kind::FloorDiv && a.rhs().is_const() && a.rhs().const_value() > 0 && c > 0) {
        int64_t c12 = 0;
        if (!__builtin_mul_overflow(a.rhs().const_value(), c, &c12))
          return make(Kind::FloorDiv, a.lhs(), SymInt(c12));
      }
      return raw(kind, a, b);
    }
    case Kind::Mod: {
      if (!b.is_const() || b.const_value() == 0) return raw(kind, a, b);
      int64_t c = b.const_value();
      if (a.is_const()) return SymInt(py_mod(a.const_value(), c));
      if (c == 1 || c == -1) return SymInt(0);
      // (c*k + r) % c == r % c: drop every term c divides.
      LinearForm f = linearize(a), rest;
      bool changed = false;
      for (const Term& t : f.terms) {
        if (t.coef % c == 0)
          changed = true;
        else
          rest.add_term(t.base, t.coef);
      }
      rest.constant = py_mod(f.constant, c);
      changed |= rest.constant != f.constant;
      if (changed) return make(Kind::Mod, build(std::move(rest)), b);
      return raw(kind, a, b);
    }
    case Kind::Const:
    case Kind::Symbol:
      break;
  }
  return a;  // unreachable for the binary kinds
}

SymInt operator+(const SymInt& a, const SymInt& b) { return SymInt::make(SymInt::Kind::Add, a, b); }
SymInt operator-(const SymInt& a, const SymInt& b) {
  if (a.is_const() && b.is_const())
    return SymInt(static_cast<int64_t>(static_cast<uint64_t>(a.const_value()) -
                                       static_cast<uint64_t>(b.const_value())));
  return SymInt::make(SymInt::Kind::Add, a, SymInt::make(SymInt::Kind::Mul, b, SymInt(-1)));
}
SymInt operator*(const SymInt& a, const SymInt& b) { return SymInt::make(SymInt::Kind::Mul, a, b); }
SymInt floordiv(const SymInt& a, const SymInt& b) {
  return SymInt::make(SymInt::Kind::FloorDiv, a, b);
}
SymInt mod(const SymInt& a, const SymInt& b) { return SymInt::make(SymInt::Kind::Mod, a, b); }

int64_t SymInt::evaluate(const std::vector<int64_t>& values) const {
  switch (kind()) {
    case Kind::Const:
      return const_value();
    case Kind::Symbol: {
      int id = symbol_id();
      return id >= 0 && static_cast<size_t>(id) < values.size() ? values[id] : 0;
    }
    case Kind::Add:
      return wrap_add(lhs().evaluate(values), rhs().evaluate(values));
    case Kind::Mul:
      return wrap_mul(lhs().evaluate(values), rhs().evaluate(values));
    case Kind::FloorDiv:
      return py_floordiv(lhs().evaluate(values), rhs().evaluate(values));
    case Kind::Mod:
      return py_mod(lhs().evaluate(values), rhs().evaluate(values));
  }
  return 0;
}

SymInt SymInt::substitute(const std::vector<std::optional<SymInt>>& by) const {
  switch (kind()) {
    case Kind::Const:
      return *this;
    case Kind::Symbol: {
      const int id = symbol_id();
      return id >= 0 && static_cast<size_t>(id) < by.size() && by[id] ? *by[id] : *this;
    }
    case Kind::Add:
    case Kind::Mul:
    case Kind::FloorDiv:
    case Kind::Mod:
      return make(kind(), lhs().substitute(by), rhs().substitute(by));
  }
  return *this;
}

bool SymInt::same_as(const SymInt& other) const {
  if (node_ == other.node_) return true;
  if (node_->hash != other.node_->hash || kind() != other.kind()) return false;
  if (kind() == Kind::Const || kind() == Kind::Symbol) return node_->value == other.node_->value;
  return lhs().same_as(other.lhs()) && rhs().same_as(other.rhs());
}

std::string SymInt::to_string() const {
  int prec = 0;
  return print(*this, &prec);
}

size_t SymInt::hash() const { return node_->hash; }

}  // namespace framejit::jit
