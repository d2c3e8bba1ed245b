// element_loops.cpp — a `for` loop over a range whose body works on array elements and Python
// numbers, compiled from its bytecode into one jit::ElementLoop node (Note [Element loops]).
#include <Python.h>
#include <opcode.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <optional>
#include <set>

#include "frontend/bytecode/opcode_facts.h"
#include "frontend/interop/array_adapter.h"
#include "frontend/interop/numpy_abi.h"
#include "frontend/trace/op_table.h"
#include "frontend/trace/opcodes.h"
#include "frontend/trace/python_ops.h"
#include "frontend/trace/tracer.h"
#include "jit/ir/element_loop.h"
#include "runtime/log.h"
#include "runtime/program.h"

namespace framejit::frontend {

// Note [Element loops]
// Code written for Numba loops over array elements with Python numbers: `for i in range(n): s +=
// A[i, j] * x[j]`. Unrolled, each iteration is a handful of graph nodes and the trace runs out of
// instructions; run by CPython, each element costs a boxed number. So a `for` over range(...) is
// first offered whole to this compiler, at its GET_ITER: the loop's bytecode (everything up to
// where the loop exits, nested loops, `while`, `if`, break and continue included) is interpreted
// abstractly, once per basic block, into a jit::ElementLoop whose variables are the loop's Python
// locals and temporaries, each of one machine type (Note [Element loop IR]). The loop becomes one
// graph node: its operands are the arrays it touches and the numbers it reads (range bounds and
// sizes stay run-time values: a new n does not recompile), its results the new values of the
// arrays it wrote and of the locals it assigned that the code after the loop reads. The trace
// goes on after the loop, in the same graph. Anything the compiler does not know (a call it does
// not list, slicing, a write through a name bound to an array, a return) makes it give up with a
// reason, logged under FRAMEJIT_LOGS=graph, and the loop is traced as before (unrolled, or broken).
//
// Types follow Python and NumPy, decided here per operation: each value knows which kinds of
// number it may be (a Python int, float or bool; a NumPy int64, float64 or bool_; another NumPy
// scalar read from an array), and an operation is compiled only when every combination means the
// same machine operation: a Python int adds with an overflow check, a NumPy int64 wraps; a Python
// float divided by zero raises ZeroDivisionError, a NumPy float64 gives inf. A value that may be
// either kind where they differ is refused. A Python int is held in 64 bits; one that outgrows
// them stops the loop with a framejit error (CPython would carry on with a big integer): array
// code does not count past 2**63.
//
// Locals are read through liveness: a local the loop assigns is a result only if the code after
// the loop may read it before writing it, and a local that is unbound before the loop and read
// after it (the loop might not run) is refused. Views and aliasing: the arrays the loop writes
// must not be views of, or have views among, the other arrays it reads (a write through one name
// would show through the other); written graph inputs are guarded against sharing memory with
// other inputs as every written input is (Note [Writes into arrays]).

namespace {

// BINARY_OP's arguments (the same on 3.11-3.13; in place: + 13).
enum : int {
  kNbAdd = 0,
  kNbAnd = 1,
  kNbFloorDivide = 2,
  kNbLshift = 3,
  kNbMatrixMultiply = 4,
  kNbMultiply = 5,
  kNbRemainder = 6,
  kNbOr = 7,
  kNbPower = 8,
  kNbRshift = 9,
  kNbSubtract = 10,
  kNbTrueDivide = 11,
  kNbXor = 12,
  kNbInplace = 13,
};

struct Refused {
  std::string why;
};
[[noreturn]] void refuse(std::string why) { throw Refused{std::move(why)}; }

// The kinds of number a value may be (a set).
enum : uint16_t {
  kInt = 1,        // Python int
  kFloat = 2,      // Python float
  kBool = 4,       // Python bool
  kNpInt = 8,      // numpy.int64
  kNpFloat = 16,   // numpy.float64
  kNpBool = 32,    // numpy.bool_
  kNpOther = 64,   // another NumPy scalar (Val::other): compared, converted and stored only
  kUnbound = 128,  // a local not assigned on some path
};
constexpr uint16_t kNumpyKinds = kNpInt | kNpFloat | kNpBool | kNpOther;
constexpr uint16_t kFloatKinds = kFloat | kNpFloat;

// Note [Slices in element loops]
// A slice of an array in a loop body (`A[i, :j]`, `x[k:k + 2]`, a row `A[i]`, a whole 1-d array,
// `np.flip` of one) is a lazy 1-d vector: a VNode tree of views, gathers (`x[cols]`), numbers and
// elementwise + - * / over them, with its length in a variable. Nothing is computed when it is
// made; its consumer emits one inner loop over its elements: np.dot / @ / sum reduce it into a
// number, a slice assignment (`A[i, :j] = ...`, `C[i, :i+1] += ...`) stores it. So `A[i, j] -=
// np.dot(A[i, :j], A[j, :j])` is one fused loop, as Numba makes it. Slice bounds are normalized
// as Python does (negative bounds count from the end, then clamp), a fixed index is checked when
// the view is made (NumPy raises then, even for an empty slice), lengths are checked where NumPy
// checks them (broadcasting a length 1 included), with NumPy's ValueError. A local may hold a
// view (`cols = A_col[a:b]`): a view sees later writes, as NumPy's does; any other vector is a
// new array in NumPy, so only views may be held. A slice assignment stores element by element in
// order, which is what NumPy's computing the whole value first gives when the value reads the
// array it writes only at the elements about to be written (`A[i, :] += ...`), at other rows or
// columns (a fixed index a constant apart), or further along the same row (`A[i, 1:-1] += A[i,
// 2:]`: each read before its write); which is which is decided on Affine forms of the indices
// and bounds. Otherwise (`A[1:] = A[:-1]`, `y[:k] += np.flip(y[:k])`) the value goes into a
// scratch array first (numpy.empty_like of the target, made once before the loop), then is
// copied. Elements are float64 or int64 (a view of another dtype is copied only): NumPy's
// float32 and small-int arithmetic on slices are not compiled.
// Reductions add in order (np.dot calls BLAS, np.sum sums pairwise: the last bits may differ, as
// any other order would).
struct VNode;
using VPtr = std::shared_ptr<const VNode>;

// An Int value as a sum of constant multiples of symbols plus a constant, where a symbol stands
// for a value that is fixed while one block runs (Note [Slices in element loops]: which elements
// two views share). Exact in int64 (wrapping on both sides alike).
struct Affine {
  std::vector<std::pair<int64_t, int64_t>> terms;  // (symbol, coefficient): sorted, no zero coefficient
  int64_t c = 0;
};
using APtr = std::shared_ptr<const Affine>;

APtr affine_combine(const APtr& a, const APtr& b, int64_t sb) {  // a + sb * b
  if (!a || !b) return nullptr;
  auto r = std::make_shared<Affine>();
  r->c = a->c + sb * b->c;
  size_t i = 0, j = 0;
  while (i < a->terms.size() || j < b->terms.size()) {
    if (j == b->terms.size() || (i < a->terms.size() && a->terms[i].first < b->terms[j].first)) {
      r->terms.push_back(a->terms[i++]);
    } else if (i == a->terms.size() || b->terms[j].first < a->terms[i].first) {
      r->terms.push_back({b->terms[j].first, sb * b->terms[j].second});
      ++j;
    } else {
      const int64_t c = a->terms[i].second + sb * b->terms[j].second;
      if (c != 0) r->terms.push_back({a->terms[i].first, c});
      ++i, ++j;
    }
  }
  return r;
}
APtr affine_scale(const APtr& a, int64_t s) {
  if (!a) return nullptr;
  auto r = std::make_shared<Affine>();
  r->c = a->c * s;
  if (s != 0)
    for (auto [sym, c] : a->terms) r->terms.push_back({sym, c * s});
  return r;
}
// a - b when it is a constant.
std::optional<int64_t> affine_diff(const APtr& a, const APtr& b) {
  if (!a || !b || a->terms != b->terms) return std::nullopt;
  return a->c - b->c;
}

struct Val {
  enum class K : uint8_t { Num, Array, Range, Iter, Func, Module, Null, None, Tuple, Shape, Outer, Slice, Vec };
  Val() = default;
  explicit Val(K kind) : k(kind) {}
  K k = K::None;
  uint16_t kinds = 0;                  // Num
  rt::DType other = rt::DType::Int64;  // Num with kNpOther
  int var = -1;                        // Num: its variable; Range: start; Iter: the next value
  int stop = -1;                       // Range, Iter
  int64_t step = 1;                    // Range, Iter
  int array = -1;                      // Array, Shape
  VarPtr obj;                          // Func, Module: the trace's value
  std::vector<Val> items;              // Tuple
  std::optional<int64_t> const_int;    // Num: known at compile time
  std::optional<int64_t> lower;        // Num (Int): a lower bound proved; Range, Iter: the start's
  std::optional<int64_t> upper;        // Num (Int): an upper bound proved (Note [Small NumPy ints])
  int step_var = -1;                   // Range, Iter: a run-time step (known positive), or -1
  std::vector<int> prefix;             // Array: a row A[i] (A[i][j] reads A[i, j]): its leading indices
  VPtr vec;                            // Vec: its elements (Note [Slices in element loops]); var: its length
  APtr aff;                            // Num (Int): its value as an Affine, when known; Vec: its length's key
  std::vector<APtr> prefix_aff;        // Array: prefix's Affines, and whether each is known >= 0
  std::vector<char> prefix_nonneg;
  int method = 0;                      // Func: a method of items[0] (a Vec), by kMethod*

  bool same(const Val& o) const {
    if (k != o.k) return false;
    switch (k) {
      case K::Num:
        return var == o.var;
      case K::Array:
      case K::Shape:
        return array == o.array && prefix == o.prefix;
      case K::Range:
      case K::Iter:
        return var == o.var && stop == o.stop && step == o.step && step_var == o.step_var &&
               items.size() == o.items.size() && (items.empty() || items[0].same(o.items[0]));
      case K::Func:
      case K::Module:
        return obj == o.obj && method == o.method && (method == 0 || items[0].same(o.items[0]));
      case K::Vec:
        return vec == o.vec && var == o.var;
      case K::Tuple:
        if (items.size() != o.items.size()) return false;
        for (size_t i = 0; i < items.size(); ++i)
          if (!items[i].same(o.items[i])) return false;
        return true;
      default:
        return true;
    }
  }
};

enum : int { kMethodSum = 1, kMethodDot = 2, kMethodCopy = 3 };

// One node of a lazy vector (Note [Slices in element loops]); element k of each kind:
struct VNode {
  enum class K : uint8_t {
    View,    // array[index...] with index[axis] = start + k * step (the other indices fixed)
    Gather,  // array[a(k)] (a 1-d array, an index vector a)
    Scalar,  // var, for every k
    Binary,  // op(a(k), b(k)) in `type`
    Neg,     // -a(k)
    Bcast,   // a(k & mask): mask 0 repeats a's one element, -1 passes k through
  };
  K k = K::Scalar;
  jit::EType type = jit::EType::Float;  // the elements' machine type
  int array = -1, axis = -1, start = -1, var = -1, mask = -1;
  int64_t step = 1;
  std::vector<int> index;
  // View, for which elements two views share: each fixed index as an Affine (null at `axis` or
  // when unknown) and whether it is known >= 0; the slice's start and stop as written (null: None
  // or unknown) and whether the start is known >= 0; whether np.flip made it.
  std::vector<APtr> fixed;
  std::vector<char> fixed_nonneg;
  APtr raw_start, raw_stop;
  bool start_none = false, stop_none = false, start_nonneg = false, flipped = false;
  jit::EOp op = jit::EOp::Add;
  rt::DType wrap = rt::DType::Int64;  // Binary of small ints: wrapped to this type (Note [Small NumPy ints])
  VPtr a, b;
};

jit::EType machine(uint16_t kinds, rt::DType other) {
  if (kinds & kFloatKinds) return jit::EType::Float;
  if ((kinds & kNpOther) && rt::dtype_is_float(other)) return jit::EType::Float;
  return jit::EType::Int;
}

std::string kinds_text(uint16_t k) {
  std::string s;
  const std::pair<uint16_t, const char*> names[] = {{kInt, "int"},
                                                    {kFloat, "float"},
                                                    {kBool, "bool"},
                                                    {kNpInt, "numpy.int64"},
                                                    {kNpFloat, "numpy.float64"},
                                                    {kNpBool, "numpy.bool_"},
                                                    {kNpOther, "numpy scalar"},
                                                    {kUnbound, "unbound"}};
  for (auto& [bit, name] : names)
    if (k & bit) s += (s.empty() ? "" : " or ") + std::string(name);
  return s;
}

struct Ins {
  Op op = Op::Unknown;
  int raw = 0;
  int arg = 0;
  int at = 0;    // code unit of the instruction (its EXTENDED_ARGs before it)
  int next = 0;  // code unit after its caches
};

Ins decode(const uint16_t* instrs, int n, int at) {
  Ins i;
  i.at = at;
  int ip = at;
  int raw = instrs[ip] & 0xff, arg = instrs[ip] >> 8;
  ++ip;
  while (raw == EXTENDED_ARG && ip < n) {
    raw = instrs[ip] & 0xff;
    arg = (arg << 8) | (instrs[ip] >> 8);
    ++ip;
  }
  i.raw = raw;
  i.arg = arg;
  i.op = kOpTable[raw].op;
  i.next = ip + kOpTable[raw].cache_entries;
  return i;
}

// Where a jump instruction goes (code units), or -1 for one that does not jump.
int jump_target(const Ins& i) {
  switch (i.op) {
    case Op::JumpForward:
    case Op::PopJumpForwardIfFalse:
    case Op::PopJumpForwardIfTrue:
    case Op::PopJumpForwardIfNone:
    case Op::PopJumpForwardIfNotNone:
    case Op::PopJumpIfFalse:
    case Op::PopJumpIfTrue:
    case Op::PopJumpIfNone:
    case Op::PopJumpIfNotNone:
    case Op::JumpIfFalseOrPop:
    case Op::JumpIfTrueOrPop:
      return i.next + i.arg;
    case Op::JumpBackward:
    case Op::JumpBackwardNoInterrupt:
    case Op::PopJumpBackwardIfFalse:
    case Op::PopJumpBackwardIfTrue:
    case Op::PopJumpBackwardIfNone:
    case Op::PopJumpBackwardIfNotNone:
      return i.next - i.arg;
    case Op::ForIter:
      return i.next + i.arg + kForIterExitSkip;
    default:
      return -1;
  }
}

bool unconditional(const Ins& i) {
  return i.op == Op::JumpForward || i.op == Op::JumpBackward || i.op == Op::JumpBackwardNoInterrupt ||
         i.op == Op::ReturnValue || i.op == Op::ReturnConst || i.op == Op::RaiseVarargs || i.op == Op::Reraise;
}

// Whether local slot `slot` of `code` may be read at code unit `from` before it is written:
// backward liveness over the whole code, exception handlers counting as successors of what they
// cover.
class Liveness {
 public:
  Liveness(const TraceFrame& f) : f_(f) {
    for (int at = 0; at < f.num_instrs;) {
      Ins i = decode(f.instrs, f.num_instrs, at);
      index_[at] = static_cast<int>(ins_.size());
      ins_.push_back(i);
      at = i.next;
    }
  }
  bool live_at(int slot, int from) {
    std::vector<char> seen(ins_.size(), 0);
    std::vector<int> work;
    auto push = [&](int at) {
      auto it = index_.find(at);
      if (it == index_.end() || seen[it->second]) return;
      seen[it->second] = 1;
      work.push_back(it->second);
    };
    push(from);
    while (!work.empty()) {
      const Ins& i = ins_[work.back()];
      work.pop_back();
      for (const auto& h : f_.handlers)
        if (h.start <= i.at && i.at < h.end) push(h.target);
      switch (reads_or_writes(i, slot)) {
        case 1:
          return true;
        case 2:
          continue;  // written first on this path
        default:
          break;
      }
      if (int t = jump_target(i); t >= 0) {
        push(t);
        if (i.op == Op::ForIter) push(i.next + i.arg);  // 3.12+: END_FOR, a no-op here
      }
      if (!unconditional(i)) push(i.next);
    }
    return false;
  }

 private:
  // 1: reads the slot; 2: writes it (without reading); 0: neither.
  static int reads_or_writes(const Ins& i, int slot) {
    switch (i.op) {
      case Op::LoadFast:
      case Op::LoadFastCheck:
      case Op::LoadClosure:
      case Op::LoadFastAndClear:
        return i.arg == slot ? 1 : 0;
      case Op::LoadFastLoadFast:
        return (i.arg >> 4) == slot || (i.arg & 15) == slot ? 1 : 0;
      case Op::StoreFastLoadFast:
        return (i.arg & 15) == slot && (i.arg >> 4) != slot ? 1 : (i.arg >> 4) == slot ? 2 : 0;
      case Op::StoreFast:
      case Op::DeleteFast:
        return i.arg == slot ? 2 : 0;
      case Op::StoreFastStoreFast:
        return (i.arg >> 4) == slot || (i.arg & 15) == slot ? 2 : 0;
      default:
        return 0;
    }
  }
  const TraceFrame& f_;
  std::vector<Ins> ins_;
  std::map<int, int> index_;
};

struct State {
  std::vector<Val> stack;
  std::vector<Val> locals;  // per slot: Outer (not assigned in the loop) or a Num of its variable
};

// The one PyObject a function value stands for (borrowed), or null.
PyObject* object_of(const VarPtr& v) {
  if (!v) return nullptr;
  if (v->kind == VarKind::Builtin) return as<BuiltinVar>(v)->obj.get();
  if (v->kind == VarKind::Module) return as<ModuleVar>(v)->module.get();
  if (v->kind == VarKind::Const) return const_value(v);
  return nullptr;
}

// Whether `obj` is `module.name` (borrowed), for the functions loops call.
bool is_attr(PyObject* obj, const char* module, const char* name) {
  OwnedRef m = OwnedRef::steal(PyImport_ImportModule(module));
  OwnedRef a = m ? OwnedRef::steal(PyObject_GetAttrString(m.get(), name)) : OwnedRef();
  if (!a) PyErr_Clear();
  return a && a.get() == obj;
}

class LoopCompiler {
 public:
  LoopCompiler(Tracer& tx, TraceFrame& f, int get_iter_at, std::vector<VarPtr> bounds, const Tracer::LoopAccess& access,
               VarPtr over_array, VarPtr while_cond)
      : tx_(tx),
        f_(f),
        gi_(get_iter_at),
        bounds_(std::move(bounds)),
        access_(access),
        over_(std::move(over_array)),
        cond_(std::move(while_cond)) {}

  // Compiles the loop; the code unit after it. Throws Refused.
  int run() {
    scan_region();
    for (int attempt = 0;; ++attempt) {
      if (attempt > 16) refuse("the types of the loop's values did not settle");
      restart_ = false;
      compile_once();
      if (!restart_ && finish()) break;
    }
    return exit_;
  }

  std::shared_ptr<jit::ElementLoop> loop;
  std::vector<VarPtr> array_vars;  // per loop array: the trace's value
  std::vector<VarPtr> param_vars;  // per loop parameter: the trace's number
  struct Result {
    int slot;
    uint16_t kinds;
    rt::DType other;
    int tag;  // Note [Kind tags]: the loop result that says which kind it is, or -1
  };
  std::vector<Result> results;  // per loop result: the local it sets

 private:
  // ---- the region -------------------------------------------------------------------------------
  void scan_region() {
    Ins gi = decode(f_.instrs, f_.num_instrs, gi_);
    if (cond_) {  // Note [While loops]: the first test jumps to where the loop exits
      exit_ = jump_target(gi);
    } else {
      Ins fi = decode(f_.instrs, f_.num_instrs, gi.next);
      if (fi.op != Op::ForIter) refuse("the range is not iterated by a for statement");
      exit_ = jump_target(fi);
    }
    find_copied_tails();
    // for ... else: a break jumps past the else block, which then belongs to the loop too.
    int past_else = -1;
    for (int at = gi_; at < exit_;) {
      if (at >= f_.num_instrs) refuse("internal: the loop runs off the code");
      Ins i = decode(f_.instrs, f_.num_instrs, at);
      const int t = target_of(i);
      if (t > exit_) {
        if (past_else >= 0 && t != past_else) refuse("jumps out of the loop to two places");
        past_else = t;
      }
      at = i.next;
    }
    if (past_else >= 0) exit_ = past_else;
    for (int at = gi_; at < exit_;) {
      if (at >= f_.num_instrs) refuse("internal: the loop runs off the code");
      Ins i = decode(f_.instrs, f_.num_instrs, at);
      index_[at] = static_cast<int>(ins_.size());
      ins_.push_back(i);
      at = i.next;
    }
    for (const auto& h : f_.handlers)
      if (h.start < exit_ && gi_ < h.end) refuse("the loop is inside a try or with block");
    // Blocks start at the region's entry, at jump targets and after jumps.
    std::vector<int> leaders{gi_};
    for (const Ins& i : ins_) {
      if (i.op == Op::StoreFast) stored_.insert(i.arg);
      if (i.op == Op::StoreFastStoreFast) stored_.insert({i.arg >> 4, i.arg & 15});
      if (i.op == Op::StoreFastLoadFast) stored_.insert(i.arg >> 4);
      if (i.op == Op::DeleteFast || i.op == Op::LoadFastAndClear || i.op == Op::StoreDeref || i.op == Op::MakeCell)
        refuse("the loop deletes a local or uses a cell");
      const int t = target_of(i);
      if (t < 0 && !ends_block(i)) continue;
      if (t >= 0) {
        if (t != exit_ && (t < gi_ || t > exit_)) refuse("a jump out of the loop other than its end");
        leaders.push_back(t);
      }
      leaders.push_back(i.next);
    }
    std::sort(leaders.begin(), leaders.end());
    leaders.erase(std::unique(leaders.begin(), leaders.end()), leaders.end());
    for (int l : leaders)
      if (l < exit_) {
        if (!index_.count(l)) refuse("internal: a jump into the middle of an instruction");
        block_of_[l] = static_cast<int>(block_start_.size());
        block_start_.push_back(l);
      }
    // Predecessor counts (the exit counts as a block too).
    preds_.assign(block_start_.size() + 1, 0);
    for (size_t b = 0; b < block_start_.size(); ++b) {
      const int end = b + 1 < block_start_.size() ? block_start_[b + 1] : exit_;
      const Ins& last = ins_[index_[prev_at(end)]];
      if (int t = target_of(last); t >= 0) ++preds_[block_id(t)];
      if (!ends_block(last) && end <= exit_) ++preds_[block_id(end)];
    }
  }

  // Note [Copied tails]
  // CPython 3.12 copies a short block that ends the function into the jumps that reach it: a
  // `break` becomes POP_TOP, LOAD_FAST x, RETURN_VALUE right inside the loop (`return s, i`:
  // two loads and a BUILD_TUPLE). The copy is pure loads (and tuples of them) and a return, so it
  // means exactly what the original after the loop means: it is read as a jump there.
  void find_copied_tails() {
    std::vector<Ins> body, after;
    for (int at = gi_; at < exit_ && at < f_.num_instrs;)
      body.push_back(decode(f_.instrs, f_.num_instrs, at)), at = body.back().next;
    for (int at = exit_; at < f_.num_instrs;)
      after.push_back(decode(f_.instrs, f_.num_instrs, at)), at = after.back().next;
    auto pure_load = [](Op op) {
      return op == Op::LoadFast || op == Op::LoadFastCheck || op == Op::LoadConst || op == Op::LoadFastLoadFast ||
             op == Op::BuildTuple;
    };
    for (size_t r = 0; r < body.size(); ++r) {
      if (body[r].op != Op::ReturnValue && body[r].op != Op::ReturnConst) continue;
      size_t first = r;
      while (first > 0 && pure_load(body[first - 1].op)) --first;
      const size_t len = r - first + 1;
      for (size_t t = 0; t + len <= after.size(); ++t) {
        bool same = true;
        for (size_t k = 0; k < len && same; ++k)
          same = after[t + k].op == body[first + k].op && after[t + k].arg == body[first + k].arg;
        if (!same) continue;
        vjump_[body[first].at] = after[t].at;
        break;
      }
    }
  }
  int target_of(const Ins& i) const {
    auto it = vjump_.find(i.at);
    return it != vjump_.end() ? it->second : jump_target(i);
  }
  bool ends_block(const Ins& i) const { return unconditional(i) || vjump_.count(i.at); }
  int prev_at(int end) const {
    auto it = index_.lower_bound(end);
    --it;
    return it->first;
  }
  int block_id(int at) const {
    if (at == exit_) return static_cast<int>(block_start_.size());
    return block_of_.at(at);
  }

  // ---- one pass over the blocks -----------------------------------------------------------------
  void compile_once() {
    loop = std::make_shared<jit::ElementLoop>();
    array_vars.clear();
    param_vars.clear();
    made_arrays_.clear();
    arrays_made_ = 0;
    outer_.clear();
    slot_var_.clear();
    tag_var_.clear();
    next_symbol_ = 0;
    stable_symbols_.clear();
    length_keys_.clear();
    const size_t nb = block_start_.size();
    pending_.assign(nb + 1, std::nullopt);
    processed_.assign(nb + 1, false);
    ir_block_.assign(nb + 1, -1);
    loop->blocks.resize(1);  // the prologue: constants, parameters, the locals' first values
    for (size_t b = 0; b <= nb; ++b) {
      ir_block_[b] = static_cast<int>(loop->blocks.size());
      loop->blocks.emplace_back();
    }
    exit_state_.reset();
    // The entry state: the range on the stack, locals as the trace has them.
    State s;
    s.locals.assign(f_.locals.size(), Val{Val::K::Outer});
    cur_ = 0;
    for (int slot : stored_) {
      Val v = outer_value(slot, /*for_store=*/true);
      if (v.k != Val::K::Num)
        refuse("local '" + local_name(slot) + "' holds " + kind_name(v) + " and the loop assigns it");
      Val slotv = v;
      if (!(v.kinds & kUnbound)) {
        slotv.var = slot_var(slot, loop->vars[v.var]);
        if (loop->vars[slotv.var] != loop->vars[v.var])
          store_widened(slotv.var, v, slot);
        else
          emit_mov(slotv.var, v.var);
      }
      slotv.const_int.reset();
      s.locals[slot] = slotv;
      if (tagged_.count(slot)) {
        tag_var_[slot] = loop->new_var(jit::EType::Int);
        set_tag(slot, v.kinds);
      }
    }
    s.stack.push_back(cond_   ? from_trace(cond_, "the loop's condition")
                      : over_ ? over_array(from_trace(over_, "the array iterated"))
                              : range_from_bounds());
    const int entry = edge(0, block_id(gi_), std::move(s), /*conditional=*/false);
    while (true) {
      int next = -1;
      for (size_t b = 0; b < nb; ++b)
        if (pending_[b] && !processed_[b]) {
          next = static_cast<int>(b);
          break;
        }
      if (next < 0 || restart_) break;
      process(next);
    }
    if (restart_) return;
    loop->blocks[ir_block_[nb]].instrs.push_back(terminator(jit::EOp::Exit));
    // Code no path reaches (3.12's END_FOR after a loop's back jump) still ends its block.
    for (size_t b = 0; b < nb; ++b)
      if (!processed_[b]) loop->blocks[ir_block_[b]].instrs.push_back(terminator(jit::EOp::Exit));
    jit::EInstr j = terminator(jit::EOp::Jump);
    j.target = entry;
    loop->blocks[0].instrs.push_back(j);
  }

  // The state arriving at block `b` from IR block `from`: the jump (or the branch's side) that
  // reaches it is to the IR block returned. Locals already share their variables; values left on
  // the stack meet in fresh variables when the block has other predecessors.
  int edge(int from, int b, State s, bool conditional) {
    (void)from;
    const size_t nb = block_start_.size();
    if (static_cast<size_t>(b) == nb && !s.stack.empty()) refuse("the loop leaves values on the stack");
    std::optional<State>& p = pending_[b];
    std::vector<std::pair<int, int>> movs;  // (dst, src)
    if (!p) {
      for (Val& v : s.stack) {
        if (v.k != Val::K::Num || preds_[b] <= 1) continue;
        const int fresh = loop->new_var(loop->vars[v.var]);
        movs.push_back({fresh, v.var});
        v.var = fresh;
        v.const_int.reset();
      }
      if (auto sd = seed_.find(b); sd != seed_.end()) widen(s, sd->second);
      p = std::move(s);
      if (static_cast<size_t>(b) == nb) exit_state_ = p;
    } else {
      State& have = *p;
      if (have.stack.size() != s.stack.size()) refuse("the stack differs where paths meet");
      bool grew = false;
      for (size_t k = 0; k < s.stack.size(); ++k) {
        Val &h = have.stack[k], &v = s.stack[k];
        if (h.k == Val::K::Num && v.k == Val::K::Num) {
          if (loop->vars[h.var] != loop->vars[v.var]) refuse("an int and a float meet on the stack");
          if (h.var != v.var) movs.push_back({h.var, v.var});
          grew |= (h.kinds | v.kinds) != h.kinds || (v.kinds & kNpOther && v.other != h.other);
          h.kinds |= v.kinds;
          h.const_int.reset();
        } else if (!h.same(v)) {
          refuse("different values meet on the stack");
        }
      }
      for (size_t k = 0; k < s.locals.size(); ++k) {
        Val &h = have.locals[k], &v = s.locals[k];
        if (held_view(h) || held_view(v)) {  // a view held in a local: one view, or none
          if (held_view(h) && held_view(v) && h.same(v)) continue;
          if (h.k == Val::K::Num && h.var < 0 && (h.kinds & kUnbound)) continue;
          h = dead_local();
          grew = true;
          continue;
        }
        if (h.k != Val::K::Num) continue;
        if (h.lower && (!v.lower || *v.lower < *h.lower)) {  // a bound holds where every path has it
          h.lower = v.lower;
          grew = true;
        }
        grew |= (h.kinds | v.kinds) != h.kinds;
        if (v.var >= 0 && h.var < 0) h.var = v.var;
        h.kinds |= v.kinds;
      }
      if (static_cast<size_t>(b) == nb) exit_state_ = have;
      if (grew && processed_[b]) {
        seed_[b] = have;
        restart_ = true;
      }
    }
    if (movs.empty() && !conditional) return ir_block_[b];
    if (movs.empty()) return ir_block_[b];
    const int e = static_cast<int>(loop->blocks.size());
    loop->blocks.emplace_back();
    for (auto [d, src] : movs) loop->blocks[e].instrs.push_back(mov(d, src));
    jit::EInstr j = terminator(jit::EOp::Jump);
    j.target = ir_block_[b];
    loop->blocks[e].instrs.push_back(j);
    return e;
  }

  // A local no value reaches on every path the same (a view on one, another value on another).
  static Val dead_local() {
    Val d{Val::K::Num};
    d.kinds = kUnbound;
    return d;
  }
  void widen(State& s, const State& seed) const {
    for (size_t k = 0; k < s.stack.size() && k < seed.stack.size(); ++k)
      if (s.stack[k].k == Val::K::Num) s.stack[k].kinds |= seed.stack[k].kinds;
    for (size_t k = 0; k < s.locals.size() && k < seed.locals.size(); ++k) {
      Val &l = s.locals[k];
      const Val& w = seed.locals[k];
      if ((held_view(l) || held_view(w)) && !(held_view(l) && held_view(w) && l.same(w))) {
        l = dead_local();
        continue;
      }
      if (l.k != Val::K::Num) continue;
      l.kinds |= w.kinds;
      if (l.lower && (!w.lower || *w.lower < *l.lower)) l.lower = w.lower;
    }
  }

  void process(int b) {
    processed_[b] = true;
    State s = *pending_[b];
    // What the Affines say holds within a block: each Int arrives as a value of its own.
    for (Val& v : s.locals)
      if (v.k == Val::K::Num && v.var >= 0 && loop->vars[v.var] == jit::EType::Int) v.aff = fresh_symbol();
    for (Val& v : s.stack)
      if (v.k == Val::K::Num && v.var >= 0 && loop->vars[v.var] == jit::EType::Int) v.aff = fresh_symbol();
    cur_ = ir_block_[b];
    const int end = static_cast<size_t>(b) + 1 < block_start_.size() ? block_start_[b + 1] : exit_;
    for (int k = index_.at(block_start_[b]); k < static_cast<int>(ins_.size()) && ins_[k].at < end; ++k) {
      const Ins& i = ins_[k];
      at_ = i.at;
      if (step(i, s)) return;  // the block ended in a jump
      if (restart_) return;
    }
    // Falls through into the next block.
    jit::EInstr j = terminator(jit::EOp::Jump);
    const int here = cur_;
    j.target = edge(here, block_id(end), std::move(s), false);
    loop->blocks[here].instrs.push_back(j);
  }

  // ---- values -------------------------------------------------------------------------------------
  std::string local_name(int slot) const {
    PyObject* n = PyTuple_GET_ITEM(f_.code->co_localsplusnames, slot);  // borrowed
    const char* s = PyUnicode_AsUTF8(n);
    return s ? s : "?";
  }
  static std::string kind_name(const Val& v) {
    switch (v.k) {
      case Val::K::Num:
        return kinds_text(v.kinds);
      case Val::K::Array:
        return "an array";
      case Val::K::Range:
        return "a range";
      case Val::K::Iter:
        return "an iterator";
      case Val::K::Func:
        return "a function";
      case Val::K::Module:
        return "a module";
      case Val::K::Tuple:
        return "a tuple";
      case Val::K::Shape:
        return "a shape";
      case Val::K::Slice:
        return "a slice";
      case Val::K::Vec:
        return "an array slice";
      case Val::K::None:
        return "None";
      default:
        return "a value";
    }
  }

  void emit(jit::EInstr i) { loop->blocks[cur_].instrs.push_back(std::move(i)); }
  void emit_prologue(jit::EInstr i) { loop->blocks[0].instrs.push_back(std::move(i)); }
  static jit::EInstr terminator(jit::EOp op) {
    jit::EInstr i;
    i.op = op;
    return i;
  }
  jit::EInstr mov(int dst, int src) const {
    jit::EInstr i;
    i.op = jit::EOp::Mov;
    i.type = loop->vars[dst];
    i.dst = dst;
    i.a = src;
    return i;
  }
  void emit_mov(int dst, int src) {
    if (dst != src) emit_prologue_or_here(mov(dst, src));
  }
  void emit_prologue_or_here(jit::EInstr i) {
    if (cur_ == 0)
      emit_prologue(std::move(i));
    else
      emit(std::move(i));
  }

  // Note [Widened locals]
  // `total = 0` before a loop that adds floats to it: the local is an int, then a float. Numba
  // widens it to a float; so does this compiler, when every int the local is given is a constant
  // a float holds exactly (so no value changes) — an int from elsewhere could be beyond 2**53.
  // Its variable is then a Float whose kinds may still say int; an operation whose meaning for
  // an int differs from a float's (//, %, bit operations, indexing) is refused on it.
  int slot_var(int slot, jit::EType t) {
    if (widened_.count(slot)) t = jit::EType::Float;
    auto it = slot_var_.find(slot);
    if (it != slot_var_.end()) {
      if (loop->vars[it->second] != t) {
        widened_.insert(slot);
        restart_ = true;
      }
      return it->second;
    }
    const int v = loop->new_var(t);
    slot_var_[slot] = v;
    return v;
  }
  // Stores `v` into a widened local's Float variable.
  void store_widened(int var, const Val& v, int slot) {
    if (loop->vars[v.var] == jit::EType::Float) {
      emit_prologue_or_here(mov(var, v.var));
      return;
    }
    constexpr int64_t kExact = int64_t{1} << 53;
    if (!v.const_int || *v.const_int > kExact || *v.const_int < -kExact)
      refuse("local '" + local_name(slot) + "' is given an int that may not be a float exactly, and a float");
    jit::EInstr i;
    i.op = jit::EOp::ToFloat;
    i.type = jit::EType::Float;
    i.dst = var;
    i.a = v.var;
    emit_prologue_or_here(i);
  }

  Val num(uint16_t kinds, jit::EType t, rt::DType other = rt::DType::Int64) {
    Val v;
    v.k = Val::K::Num;
    v.kinds = kinds;
    v.other = other;
    v.var = loop->new_var(t);
    if (t == jit::EType::Int) v.aff = fresh_symbol();
    return v;
  }
  // A value no other is known to equal (fixed while the block runs).
  APtr fresh_symbol() {
    auto a = std::make_shared<Affine>();
    a->terms.push_back({next_symbol_++, 1});
    return a;
  }
  // The same symbol for every read of something fixed for the whole loop (a parameter, a size).
  APtr stable_symbol(int64_t key) {
    auto [it, added] = stable_symbols_.try_emplace(key, nullptr);
    if (added) it->second = fresh_symbol();
    return it->second;
  }
  Val const_int(int64_t x, uint16_t kinds = kInt, bool prologue = true) {
    Val v = num(kinds, jit::EType::Int);
    jit::EInstr i;
    i.op = jit::EOp::Const;
    i.type = jit::EType::Int;
    i.dst = v.var;
    i.imm = x;
    if (prologue)
      emit_prologue(i);
    else
      emit_prologue_or_here(i);
    v.const_int = x;
    v.lower = x;
    v.upper = x;
    auto a = std::make_shared<Affine>();
    a->c = x;
    v.aff = a;
    return v;
  }
  Val const_float(double x, uint16_t kinds = kFloat, bool prologue = true) {
    Val v = num(kinds, jit::EType::Float);
    jit::EInstr i;
    i.op = jit::EOp::Const;
    i.type = jit::EType::Float;
    i.dst = v.var;
    i.fimm = x;
    if (prologue)
      emit_prologue(i);
    else
      emit_prologue_or_here(i);
    return v;
  }

  // A Python constant or a value of the trace as a loop value; Refused for what loops cannot hold.
  Val python_constant(PyObject* c) {  // borrowed
    if (c == Py_None) return Val{Val::K::None};
    if (PyBool_Check(c)) return const_int(c == Py_True, kBool, true);
    if (PyLong_CheckExact(c)) {
      int overflow = 0;
      long long x = PyLong_AsLongLongAndOverflow(c, &overflow);
      if (overflow) refuse("an integer constant beyond 64 bits");
      return const_int(x, kInt, true);
    }
    if (PyFloat_CheckExact(c)) return const_float(PyFloat_AS_DOUBLE(c), kFloat, true);
    if (const NumPyHandles* np = numpy_handles(); np && PyObject_TypeCheck(c, np->generic)) {
      std::optional<rt::DType> dt = numpy_scalar_dtype(np, Py_TYPE(c));
      if (dt == rt::DType::Float64) return const_float(PyFloat_AsDouble(c), kNpFloat, true);
      long long x = 0;
      if (dt == rt::DType::Int64 && numpy_scalar_int(c, &x)) return const_int(x, kNpInt, true);
      if (dt == rt::DType::Bool && numpy_scalar_int(c, &x)) return const_int(x != 0, kNpBool, true);
      refuse(std::string("a ") + Py_TYPE(c)->tp_name + " constant");
    }
    if (PySlice_Check(c)) {
      auto* sl = reinterpret_cast<PySliceObject*>(c);
      return make_slice({python_constant(sl->start), python_constant(sl->stop), python_constant(sl->step)});
    }
    if (PyTuple_CheckExact(c)) {
      Val t{Val::K::Tuple};
      for (Py_ssize_t k = 0; k < PyTuple_GET_SIZE(c); ++k) t.items.push_back(python_constant(PyTuple_GET_ITEM(c, k)));
      return t;
    }
    refuse(std::string("a ") + Py_TYPE(c)->tp_name + " constant");
  }

  Val from_trace(const VarPtr& v, const std::string& what) {
    switch (v->kind) {
      case VarKind::Const:
        return python_constant(const_value(v));
      case VarKind::Builtin: {
        Val r{Val::K::Func};
        r.obj = v;
        return r;
      }
      case VarKind::Module: {
        Val r{Val::K::Module};
        r.obj = v;
        return r;
      }
      case VarKind::Function: {  // called in the loop: inlined (Note [Calls in element loops])
        Val r{Val::K::Func};
        r.obj = v;
        return r;
      }
      case VarKind::Scalar: {
        auto* s = as<ScalarVar>(v);
        bool carried = s->loop_carried;
        for (auto& d : s->deps) carried = carried || d->loop_carried;
        (void)carried;  // a loop-carried number is a run-time value like any other here
        const jit::TensorMeta& m = tx_.meta(v);
        const uint16_t k = m.dtype == rt::DType::Float64 ? kFloat : m.dtype == rt::DType::Bool ? kBool : kInt;
        return param(v, k, rt::DType::Int64);
      }
      case VarKind::Tensor: {
        const jit::TensorMeta& m = tx_.meta(v);
        if (m.device.type != rt::DeviceType::CPU) refuse(what + " is an array on a device");
        if (m.rank() == 0) {
          if (!m.scalar_object) refuse(what + " is a 0-d array");
          uint16_t k = m.dtype == rt::DType::Float64 ? kNpFloat
                       : m.dtype == rt::DType::Int64 ? kNpInt
                       : m.dtype == rt::DType::Bool  ? kNpBool
                                                     : kNpOther;
          if (m.dtype == rt::DType::UInt64 || rt::dtype_is_half(m.dtype) || rt::dtype_is_complex(m.dtype))
            refuse(what + " is a " + std::string(rt::dtype_name(m.dtype)) + " scalar");
          return param(v, k, m.dtype);
        }
        if (m.dtype == rt::DType::UInt64 || rt::dtype_is_half(m.dtype) || rt::dtype_is_complex(m.dtype))
          refuse(what + " is an array of " + std::string(rt::dtype_name(m.dtype)));
        for (size_t k = 0; k < array_vars.size(); ++k)
          if (array_vars[k] == v) return array_val(static_cast<int>(k));
        array_vars.push_back(v);
        loop->arrays.push_back({m.dtype, m.rank(), false});
        return array_val(static_cast<int>(array_vars.size()) - 1);
      }
      case VarKind::Object:
        if (VarPtr source = tx_.numba_source(v)) return from_trace(source, what);  // Note [Numba dispatchers]
        refuse(what + " is " + var_kind_name(v->kind));
      default:
        refuse(what + " is " + var_kind_name(v->kind));
    }
  }
  static Val array_val(int k) {
    Val r{Val::K::Array};
    r.array = k;
    return r;
  }
  Val param(const VarPtr& v, uint16_t kinds, rt::DType other) {
    for (size_t k = 0; k < param_vars.size(); ++k)
      if (param_vars[k] == v) {
        Val r{Val::K::Num};
        r.kinds = kinds;
        r.other = other;
        r.var = loop->params[k];
        if (loop->vars[r.var] == jit::EType::Int) r.aff = stable_symbol(r.var);
        return r;
      }
    Val r = num(kinds, machine(kinds, other), other);
    param_vars.push_back(v);
    loop->params.push_back(r.var);
    if (loop->vars[r.var] == jit::EType::Int) r.aff = stable_symbol(r.var);
    return r;
  }

  // A slot's value before the loop (converted once per pass).
  Val outer_value(int slot, bool for_store) {
    auto it = outer_.find(slot);
    if (it != outer_.end()) return it->second;
    VarPtr v = (f_.is_root && f_.lazy_args[slot]) || f_.locals[slot] ? access_.load_fast(slot) : nullptr;
    Val r;
    if (!v) {
      if (!for_store) refuse("local '" + local_name(slot) + "' is unbound");
      r.k = Val::K::Num;
      r.kinds = kUnbound;
    } else {
      const int saved = cur_;
      cur_ = 0;
      r = from_trace(v, "local '" + local_name(slot) + "'");
      cur_ = saved;
    }
    outer_[slot] = r;
    return r;
  }

  Val load_local(State& s, int slot) {
    Val& v = s.locals[slot];
    if (v.k == Val::K::Outer) return outer_value(slot, false);
    if (v.kinds & kUnbound) refuse("local '" + local_name(slot) + "' may be unbound in the loop");
    return v;
  }

  // A stack value that reads variable `var` gets its own copy before `var` is assigned.
  void detach(State& s, int var) {
    std::function<void(Val&)> fix = [&](Val& v) {
      if (v.k == Val::K::Num && v.var == var) {
        const int fresh = loop->new_var(loop->vars[var]);
        emit(mov(fresh, var));
        v.var = fresh;
      }
      for (int& p : v.prefix)
        if (p == var) {
          const int fresh = loop->new_var(jit::EType::Int);
          emit(mov(fresh, var));
          p = fresh;
        }
      for (Val& x : v.items) fix(x);
    };
    for (Val& v : s.stack) fix(v);
  }

  // A view a local may hold (Note [Slices in element loops]): a slice, or a row A[i]; or an
  // array the loop made (Note [Arrays made in loops]).
  bool held_view(const Val& v) const {
    return (v.k == Val::K::Vec && v.vec->k == VNode::K::View) || (v.k == Val::K::Array && !v.prefix.empty()) ||
           (v.k == Val::K::Array && made_arrays_.count(v.array));
  }
  void store_local(State& s, int slot, Val v) {
    if (held_view(v)) {
      s.locals[slot] = v;
      return;
    }
    if (v.k == Val::K::Vec)
      refuse("the loop binds local '" + local_name(slot) + "' to a computed array (only views may be held)");
    if (v.k != Val::K::Num) refuse("the loop binds local '" + local_name(slot) + "' to " + kind_name(v));
    const int var = slot_var(slot, loop->vars[v.var]);
    detach(s, var);
    if (loop->vars[var] != loop->vars[v.var])
      store_widened(var, v, slot);
    else if (var != v.var)
      emit(mov(var, v.var));
    if (tagged_.count(slot)) set_tag(slot, v.kinds);
    Val& l = s.locals[slot];
    l.k = Val::K::Num;
    l.var = var;
    l.kinds = v.kinds;
    l.other = v.other;
    l.const_int.reset();
    l.lower = v.lower;
    l.aff = loop->vars[var] == jit::EType::Int ? (v.aff ? v.aff : fresh_symbol()) : nullptr;
  }

  // Note [Kind tags]
  // A local the code after the loop reads may hold a Python float on one path and a NumPy
  // float64 on another (`s = 0.0; for ...: s += x[i]`: NumPy's after one trip, Python's after
  // none); the same for int and int64, and for an int widened to a float (Note [Widened locals]).
  // Each is one machine value; which object CPython would hand on is kept in a tag variable, set
  // at each assignment, and the loop's step makes that object (rt::LoopStep::Tag). The trace goes
  // on with it as a Python number of the variable's type (the values are the same).
  void set_tag(int slot, uint16_t kinds) {
    kinds &= ~kUnbound;
    using T = rt::LoopStep::Tag;
    const T tag = kinds == kInt ? T::PyInt : kinds == kFloat ? T::PyFloat : kinds == kNpInt ? T::Int64 : T::Float64;
    if (kinds != kInt && kinds != kFloat && kinds != kNpInt && kinds != kNpFloat && kinds != 0)
      refuse("local '" + local_name(slot) + "' is assigned a value that may be " + kinds_text(kinds));
    jit::EInstr i;
    i.op = jit::EOp::Const;
    i.type = jit::EType::Int;
    i.dst = tag_var_.at(slot);
    i.imm = static_cast<int64_t>(tag);
    emit_prologue_or_here(i);
  }

  // `for x in a`: range(len(a)) whose values are a's elements (or rows), read as CPython's array
  // iterator reads them, one at a time when the loop gets there.
  Val over_array(const Val& a) {
    if (a.k != Val::K::Array) refuse("iterating over " + kind_name(a));
    const int axis = static_cast<int>(a.prefix.size());
    if (axis >= loop->arrays[a.array].rank) refuse("iterating over a 0-d array");
    Val r = make_range({dim(a.array, axis)});
    r.items.push_back(a);
    return r;
  }
  Val range_from_bounds() {
    std::vector<Val> b;
    for (const VarPtr& v : bounds_) b.push_back(from_trace(v, "a range bound"));
    return make_range(b);
  }

  Val make_range(std::vector<Val> b) {
    if (b.empty() || b.size() > 3) refuse("range() with " + std::to_string(b.size()) + " arguments");
    for (const Val& v : b)
      if (v.k != Val::K::Num || loop->vars[v.var] != jit::EType::Int || (v.kinds & kUnbound))
        refuse("range() of " + kind_name(v));
    Val r{Val::K::Range};
    if (b.size() == 1) b.insert(b.begin(), const_int(0));
    if (b.size() == 3) {
      if (b[2].const_int) {
        if (*b[2].const_int == 0) refuse("range() with a step of 0");
        r.step = *b[2].const_int;
      } else if (b[2].lower && *b[2].lower >= 1) {  // range(i * i, n, i) for an i >= 2
        r.step_var = loop->new_var(jit::EType::Int);
        emit_prologue_or_here(mov(r.step_var, b[2].var));
      } else {
        refuse("range() with a step whose sign is not known when compiling");
      }
    }
    if (r.step > 0) r.lower = b[0].lower;
    else if (b[1].const_int) r.lower = *b[1].const_int + 1;  // counting down to a constant: above it
    // The bounds are read once, when range() is called.
    r.var = loop->new_var(jit::EType::Int);
    emit_prologue_or_here(mov(r.var, b[0].var));
    r.stop = loop->new_var(jit::EType::Int);
    emit_prologue_or_here(mov(r.stop, b[1].var));
    return r;
  }

  // ---- conversions --------------------------------------------------------------------------------
  int as_float(const Val& v) {
    if (loop->vars[v.var] == jit::EType::Float) return v.var;
    const int d = loop->new_var(jit::EType::Float);
    jit::EInstr i;
    i.op = jit::EOp::ToFloat;
    i.type = jit::EType::Float;
    i.dst = d;
    i.a = v.var;
    emit(i);
    return d;
  }
  Val truth(const Val& v) {
    if (v.k == Val::K::None) return const_int(0, kBool);
    if (v.k != Val::K::Num) refuse("the truth value of " + kind_name(v));
    if (loop->vars[v.var] == jit::EType::Int) {
      if (v.kinds & ~(kBool | kNpBool)) {  // not 0/1 already
        Val z = const_int(0);
        return compare(Py_NE, v, z);
      }
      Val r = v;
      r.kinds = kBool;
      return r;
    }
    Val z = const_float(0.0);
    Val r = compare(Py_NE, v, z);
    r.kinds = kBool;
    return r;
  }

  // ---- operations ---------------------------------------------------------------------------------
  Val compare(int op, const Val& a, const Val& b) {
    if (a.k != Val::K::Num || b.k != Val::K::Num) refuse("comparing " + kind_name(a) + " with " + kind_name(b));
    const bool flt = loop->vars[a.var] == jit::EType::Float || loop->vars[b.var] == jit::EType::Float;
    jit::EInstr i;
    i.op = jit::EOp::Cmp;
    i.type = flt ? jit::EType::Float : jit::EType::Int;
    static const jit::ECond conds[] = {jit::ECond::Lt, jit::ECond::Le, jit::ECond::Eq,
                                       jit::ECond::Ne, jit::ECond::Gt, jit::ECond::Ge};
    i.cond = conds[op];
    i.a = flt ? as_float(a) : a.var;
    i.b = flt ? as_float(b) : b.var;
    Val r = num(((a.kinds | b.kinds) & kNumpyKinds) ? kNpBool : kBool, jit::EType::Int);
    i.dst = r.var;
    emit(i);
    r.lower = 0;
    r.upper = 1;
    return r;
  }

  // The meaning of `nb` (0-12, in place or not) on one kind from each side.
  struct Meaning {
    jit::EType type;
    uint16_t kinds;
    bool checked;
    bool ok = true;
    rt::DType wrap = rt::DType::Int64;  // the result wraps to this small int type (Note [Small NumPy ints])
  };
  // Note [Small NumPy ints]
  // An element of an int8 ... uint32 array is a NumPy scalar of that type. NumPy 1 computes it
  // with a Python int (or bool) in int64 (`np.uint8(5) & 0xFF` is a numpy.int64), NumPy 2 in its
  // own type (wrapping at its width); with a NumPy int64 or any float both give int64 or float64.
  // Those cases compute as int64 here. Two of one type (`seq[i] + seq[j]` of an int32 array) give
  // that type in both: + - * & | ^ are computed in int64 and wrapped to its width (NumPy warns
  // when that wraps; a compiled loop does not). Other mixes are refused, and so are small floats
  // (float32 arithmetic).
  static Meaning meaning(int nb, uint16_t a, rt::DType ao, uint16_t b, rt::DType bo) {
    if ((a | b) & kNpOther) {
      const Meaning no{jit::EType::Int, 0, false, false};
      auto small = [](rt::DType d) {
        return rt::dtype_is_integer(d) && d != rt::DType::UInt64 && d != rt::DType::Int64 && d != rt::DType::Bool;
      };
      // (>> of an unsigned type: a count >= 0, the result in range; a count past the width gives 0 as here.)
      const bool wrapping_op = nb == kNbAdd || nb == kNbSubtract || nb == kNbMultiply || nb == kNbAnd || nb == kNbOr ||
                               nb == kNbXor || (nb == kNbRshift && !rt::dtype_is_signed(ao) && !rt::dtype_is_signed(bo));
      // Two of one small type, or one and a numpy.bool_ (which any int type holds): that type.
      if ((a == kNpOther && b == kNpOther && ao == bo && small(ao)) || (a == kNpOther && b == kNpBool && small(ao)))
        return wrapping_op ? Meaning{jit::EType::Int, kNpOther, false, true, ao} : no;
      if (a == kNpBool && b == kNpOther && small(bo)) return wrapping_op ? Meaning{jit::EType::Int, kNpOther, false, true, bo} : no;
      if ((a & kNpOther) && (b & kNpOther)) return no;
      const rt::DType d = (a & kNpOther) ? ao : bo;
      const uint16_t other = (a & kNpOther) ? b : a;
      if (!rt::dtype_is_integer(d) || d == rt::DType::UInt64 || d == rt::DType::Bool || (other & kNpBool)) return no;
      const NumPyHandles* np = numpy_handles();
      if ((other & (kInt | kBool)) && (!np || np->major >= 2)) return no;
      return meaning(nb, (a & kNpOther) ? uint16_t{kNpInt} : a, rt::DType::Int64, (b & kNpOther) ? uint16_t{kNpInt} : b,
                     rt::DType::Int64);
    }
    const bool np = (a | b) & kNumpyKinds;
    const bool flt = (a | b) & kFloatKinds;
    const bool bools = !((a | b) & ~(kBool | kNpBool));
    (void)ao;
    (void)bo;
    switch (nb) {
      case kNbAdd:
      case kNbSubtract:
      case kNbMultiply:
      case kNbFloorDivide:
      case kNbRemainder:
        if (np && bools) return {jit::EType::Int, 0, false, false};  // numpy.bool_ arithmetic
        // A float sum or product raises nothing in Python either: only division checks.
        if (flt)
          return {jit::EType::Float, static_cast<uint16_t>(np ? kNpFloat : kFloat),
                  !np && (nb == kNbFloorDivide || nb == kNbRemainder)};
        return {jit::EType::Int, static_cast<uint16_t>(np ? kNpInt : kInt), !np};
      case kNbTrueDivide:
        if (np && bools) return {jit::EType::Int, 0, false, false};
        return {jit::EType::Float, static_cast<uint16_t>(np ? kNpFloat : kFloat), !np};
      case kNbAnd:
      case kNbOr:
      case kNbXor:
        if (flt) return {jit::EType::Int, 0, false, false};
        if (bools) return {jit::EType::Int, static_cast<uint16_t>(np ? kNpBool : kBool), false};
        return {jit::EType::Int, static_cast<uint16_t>(np ? kNpInt : kInt), false};
      case kNbLshift:
      case kNbRshift:
        if (flt || (np && bools)) return {jit::EType::Int, 0, false, false};
        return {jit::EType::Int, static_cast<uint16_t>(np ? kNpInt : kInt), !np};
      default:
        return {jit::EType::Int, 0, false, false};
    }
  }

  // Under NumPy 2 a Python int (or bool) meets a small NumPy int as that type: when its value is
  // known to fit (else NumPy raises OverflowError), it is taken as one (Note [Small NumPy ints]).
  static Val as_small_int(const Val& py, const Val& small) {
    const NumPyHandles* np = numpy_handles();
    if (np && np->major < 2) return py;
    if (small.kinds != kNpOther || !rt::dtype_is_integer(small.other) || small.other == rt::DType::UInt64 ||
        small.other == rt::DType::Int64 || small.other == rt::DType::Bool || (py.kinds & ~(kInt | kBool)))
      return py;
    const int bits = 8 * rt::dtype_itemsize(small.other);
    const bool sgn = rt::dtype_is_signed(small.other);
    const int64_t lo = sgn ? -(int64_t{1} << (bits - 1)) : 0;
    const int64_t hi = sgn ? (int64_t{1} << (bits - 1)) - 1 : (int64_t{1} << bits) - 1;
    if (!py.lower || !py.upper || *py.lower < lo || *py.upper > hi) return py;
    Val r = py;
    r.kinds = kNpOther;
    r.other = small.other;
    return r;
  }
  Val binary(int nb_full, const Val& a0, const Val& b0) {
    const int nb = nb_full % kNbInplace;
    if (a0.k != Val::K::Num || b0.k != Val::K::Num)
      refuse(std::string("operator ") + nb_op_name(nb_full) + " on " + kind_name(a0) + " and " + kind_name(b0));
    if (nb == kNbPower) {
      if (b0.const_int == 2) return binary(kNbMultiply, a0, a0);
      return float_power(nb_full, a0, b0);
    }
    const Val a = as_small_int(a0, b0), b = as_small_int(b0, a0);
    std::optional<Meaning> m;
    for (uint16_t ka = 1; ka < kUnbound; ka <<= 1) {
      if (!(a.kinds & ka)) continue;
      for (uint16_t kb = 1; kb < kUnbound; kb <<= 1) {
        if (!(b.kinds & kb)) continue;
        Meaning x = meaning(nb, ka, a.other, kb, b.other);
        if (!x.ok)
          refuse(std::string("operator ") + nb_op_name(nb_full) + " on " + kinds_text(ka) + " and " + kinds_text(kb));
        if (!m) {
          m = x;
        } else {
          if (m->type != x.type || m->checked != x.checked || m->wrap != x.wrap)
            refuse(std::string("operator ") + nb_op_name(nb_full) + " on values that may be " + kinds_text(a.kinds) +
                   " and " + kinds_text(b.kinds) + " (the kinds mean different things)");
          m->kinds |= x.kinds;
        }
      }
    }
    if (!m) refuse("an operation on a value of no known kind");
    jit::EInstr i;
    i.type = m->type;
    i.checked = m->checked;
    switch (nb) {
      case kNbAdd:
        i.op = jit::EOp::Add;
        break;
      case kNbSubtract:
        i.op = jit::EOp::Sub;
        break;
      case kNbMultiply:
        i.op = jit::EOp::Mul;
        break;
      case kNbTrueDivide:
        i.op = jit::EOp::Div;
        i.imm = !((a.kinds | b.kinds) & ~(kInt | kBool));  // int / int: CPython's own message
        break;
      case kNbFloorDivide:
        i.op = jit::EOp::FloorDiv;
        break;
      case kNbRemainder:
        i.op = jit::EOp::Mod;
        break;
      case kNbAnd:
        i.op = jit::EOp::BitAnd;
        break;
      case kNbOr:
        i.op = jit::EOp::BitOr;
        break;
      case kNbXor:
        i.op = jit::EOp::BitXor;
        break;
      case kNbLshift:
        i.op = jit::EOp::Shl;
        break;
      case kNbRshift:
        i.op = jit::EOp::Shr;
        break;
    }
    if (m->type == jit::EType::Float) {
      i.a = as_float(a);
      i.b = as_float(b);
    } else {
      if (loop->vars[a.var] == jit::EType::Float || loop->vars[b.var] == jit::EType::Float)
        refuse(std::string("operator ") + nb_op_name(nb_full) + " on an int held as a float (Note [Widened locals])");
      i.a = a.var;
      i.b = b.var;
    }
    Val r = num(m->kinds, m->type);
    if (m->type == jit::EType::Int && a.lower && b.lower && *a.lower >= 0 && *b.lower >= 0 &&
        *a.lower < (int64_t{1} << 31) && *b.lower < (int64_t{1} << 31)) {
      if (nb == kNbAdd) r.lower = *a.lower + *b.lower;
      if (nb == kNbMultiply) r.lower = *a.lower * *b.lower;
    }
    // x & c for a constant c >= 0: in [0, c].
    if (m->type == jit::EType::Int && nb == kNbAnd)
      for (const Val* c : {&a, &b})
        if (c->const_int && *c->const_int >= 0) {
          r.lower = 0;
          r.upper = *c->const_int;
        }
    // i - c for a constant c >= 0: above a's bound less c (no wrap: c is small, a above it).
    if (m->type == jit::EType::Int && nb == kNbSubtract && a.lower && b.const_int && *b.const_int >= 0 &&
        *b.const_int < (int64_t{1} << 31) && *a.lower > -(int64_t{1} << 31) && *a.lower < (int64_t{1} << 31))
      r.lower = *a.lower - *b.const_int;
    i.dst = r.var;
    emit(i);
    if (m->wrap != rt::DType::Int64) {  // Note [Small NumPy ints]: back to the type's width
      r.lower.reset();
      r.other = m->wrap;
      emit(mov(r.var, wrapped(r.var, m->wrap)));
      return r;
    }
    if (m->type == jit::EType::Int && a.aff && b.aff) {
      if (nb == kNbAdd || nb == kNbSubtract) r.aff = affine_combine(a.aff, b.aff, nb == kNbAdd ? 1 : -1);
      if (nb == kNbMultiply && b.aff->terms.empty()) r.aff = affine_scale(a.aff, b.aff->c);
      if (nb == kNbMultiply && a.aff->terms.empty()) r.aff = affine_scale(b.aff, a.aff->c);
    }
    return r;
  }

  // a ** b where NumPy computes it: a numpy.float64 on either side (a subclass of float, so its
  // __rpow__ goes first), or a numpy.int64 with a float. NumPy's float64 power is the C library's
  // pow(): inf, NaN or 0 where it overflows, has no real value or divides by zero, with a warning,
  // never an exception. Python's own float ** (a complex result for a negative base, three
  // different exceptions) and integer powers are not compiled.
  Val float_power(int nb_full, const Val& a, const Val& b) {
    auto no = [&] {
      refuse(std::string("operator ") + nb_op_name(nb_full) + " on " + kinds_text(a.kinds) + " and " +
             kinds_text(b.kinds) + " (only NumPy's float powers are compiled)");
    };
    const uint16_t plain = kInt | kFloat | kNpInt | kNpFloat;
    if ((a.kinds & ~plain) || (b.kinds & ~plain)) no();
    for (uint16_t ka = 1; ka < kUnbound; ka <<= 1) {
      if (!(a.kinds & ka)) continue;
      for (uint16_t kb = 1; kb < kUnbound; kb <<= 1) {
        if (!(b.kinds & kb)) continue;
        const uint16_t both = ka | kb;
        if (!(both & kNpFloat) && !((both & kNpInt) && (both & kFloat))) no();
      }
    }
    jit::EInstr i;
    i.op = jit::EOp::Call2;
    i.type = jit::EType::Float;
    i.a = as_float(a);
    i.b = as_float(b);
    i.fn2 = [](double x, double y) { return std::pow(x, y); };
    i.fn_name = "numpy.power";
    Val r = num(kNpFloat, jit::EType::Float);
    i.dst = r.var;
    emit(i);
    return r;
  }

  Val unary(jit::EOp op, const Val& a, const char* what) {
    if (a.k != Val::K::Num || (a.kinds & (kNpOther | kNpBool))) refuse(std::string(what) + " of " + kind_name(a));
    const bool np = a.kinds & kNumpyKinds;
    if (np && (a.kinds & ~kNumpyKinds)) refuse(std::string(what) + " of a value that may be " + kinds_text(a.kinds));
    jit::EInstr i;
    i.op = op;
    i.type = loop->vars[a.var];
    if (op == jit::EOp::Invert && i.type == jit::EType::Float) refuse("~ of a float");
    i.checked = !np && i.type == jit::EType::Int && op != jit::EOp::Invert;
    i.a = a.var;
    uint16_t kinds = a.kinds;
    if (kinds & kBool) kinds = (kinds & ~kBool) | kInt;  // -True is -1
    Val r = num(kinds, i.type);
    i.dst = r.var;
    emit(i);
    if (op == jit::EOp::Neg && a.aff) r.aff = affine_scale(a.aff, -1);
    return r;
  }

  // ---- arrays -------------------------------------------------------------------------------------
  std::vector<int> indices(const Val& arr, const Val& key) {
    const int rank = loop->arrays[arr.array].rank - static_cast<int>(arr.prefix.size());
    std::vector<Val> parts = key.k == Val::K::Tuple ? key.items : std::vector<Val>{key};
    if (static_cast<int>(parts.size()) != rank)
      refuse("indexing a " + std::to_string(rank) + "-d array with " + std::to_string(parts.size()) +
             " integer(s) (slices and views are not compiled in loops yet)");
    std::vector<int> out = arr.prefix;
    for (const Val& p : parts) {
      if (p.k != Val::K::Num || loop->vars[p.var] != jit::EType::Int || (p.kinds & (kBool | kNpBool)))
        refuse("an index that is " + kind_name(p));
      out.push_back(p.var);
    }
    return out;
  }
  Val load(const Val& arr, const Val& key) {
    const jit::ElementArray& a = loop->arrays[arr.array];
    jit::EInstr i;
    i.op = jit::EOp::Load;
    i.array = arr.array;
    i.index = indices(arr, key);
    uint16_t kinds = a.dtype == rt::DType::Float64 ? kNpFloat
                     : a.dtype == rt::DType::Int64 ? kNpInt
                     : a.dtype == rt::DType::Bool  ? kNpBool
                                                   : kNpOther;
    Val r = num(kinds, machine(kinds, a.dtype), a.dtype);
    i.type = loop->vars[r.var];
    i.dst = r.var;
    emit(i);
    return r;
  }
  void store(const Val& arr, const Val& key, const Val& value) {
    jit::ElementArray& a = loop->arrays[arr.array];
    if (value.k != Val::K::Num) refuse("storing " + kind_name(value) + " into an array element");
    if (!rt::dtype_is_float(a.dtype) && loop->vars[value.var] == jit::EType::Float)
      refuse("storing a float into an integer array (NumPy's truncation is not compiled yet)");
    a.written = true;
    jit::EInstr i;
    i.op = jit::EOp::Store;
    i.array = arr.array;
    i.index = indices(arr, key);
    i.a = value.var;
    i.type = loop->vars[value.var];
    emit(i);
  }

  // ---- calls ----------------------------------------------------------------------------------------
  Val call(const Val& fn, std::vector<Val> args) {
    if (fn.k != Val::K::Func) refuse("a call of " + kind_name(fn));
    if (fn.method == kMethodCopy) {
      if (!args.empty()) refuse("copy() with arguments");
      return make_array(fn.items[0], MadeFill::Copy);
    }
    if (fn.method == kMethodSum) {
      if (!args.empty()) refuse("sum() with arguments");
      return vec_reduce(fn.items[0], nullptr, rt::ShapeUse::Dot);
    }
    if (fn.method == kMethodDot) {
      if (args.size() != 1) refuse("dot() arguments");
      return vec_reduce(fn.items[0], &args[0], rt::ShapeUse::Dot);
    }
    if (fn.obj && fn.obj->kind == VarKind::Function) return inline_function(*as<FunctionVar>(fn.obj), std::move(args));
    PyObject* o = object_of(fn.obj);
    PyObject* builtins = f_.builtins.get();  // borrowed
    auto builtin = [&](const char* name) { return o == PyDict_GetItemString(builtins, name); };
    auto nums = [&](const char* what) {
      for (const Val& a : args)
        if (a.k != Val::K::Num) refuse(std::string(what) + " of " + kind_name(a));
    };
    if (builtin("range")) return make_range(args);
    if (is_attr(o, "numpy", "dot") || is_attr(o, "numpy", "sum") || is_attr(o, "numpy", "flip")) {
      const bool dot = is_attr(o, "numpy", "dot");
      if (args.size() != (dot ? 2u : 1u)) refuse("numpy function arguments");
      if (!as_vec(args[0])) refuse("numpy.dot, sum or flip of " + kind_name(args[0]));
      if (dot) return vec_reduce(args[0], &args[1], rt::ShapeUse::Dot);
      if (is_attr(o, "numpy", "sum")) return vec_reduce(args[0], nullptr, rt::ShapeUse::Dot);
      return vec_flip(args[0]);
    }
    for (auto [name, fill] : {std::pair{"copy", MadeFill::Copy}, std::pair{"zeros_like", MadeFill::Zeros},
                              std::pair{"empty_like", MadeFill::None}}) {
      if (!is_attr(o, "numpy", name)) continue;
      if (args.size() != 1) refuse(std::string("numpy.") + name + " arguments");
      return make_array(args[0], fill);
    }
    if (is_attr(o, "numpy", "minimum") || is_attr(o, "numpy", "maximum")) {
      if (args.size() != 2) refuse("numpy.minimum/maximum arguments");
      const jit::EOp op = is_attr(o, "numpy", "minimum") ? jit::EOp::Min : jit::EOp::Max;
      if (as_vec(args[0]) || as_vec(args[1])) return vec_binary(0, args[0], args[1], op);
      return numbers_extreme(op, args[0], args[1]);
    }
    if (builtin("len")) {
      if (args.size() != 1) refuse("len() arguments");
      if (args[0].k == Val::K::Vec) {
        Val n{Val::K::Num};
        n.kinds = kInt;
        n.var = fresh(args[0].var);
        n.lower = 0;
        return n;
      }
      if (args[0].k == Val::K::Tuple) return const_int(static_cast<int64_t>(args[0].items.size()));
      // (len(A[i]) would skip A[i]'s own IndexError.)
      if (args[0].k != Val::K::Array || !args[0].prefix.empty()) refuse("len() of " + kind_name(args[0]));
      return dim(args[0].array, 0);
    }
    if (builtin("min") || builtin("max")) {
      if (args.size() < 2) refuse("min/max of one iterable");
      nums("min/max");
      // Python's min/max hands back one of its arguments, compared as the machine values they are:
      // of one machine type, the result may be any of their kinds (at most one small NumPy int
      // type among them).
      uint16_t kinds = 0;
      std::optional<rt::DType> small;
      for (const Val& a : args) {
        if (loop->vars[a.var] != loop->vars[args[0].var] || (a.kinds & kUnbound))
          refuse("min/max of values of different kinds (" + kinds_text(a.kinds) + ", " + kinds_text(args[0].kinds) +
                 ")");
        if (a.kinds & kNpOther) {
          if (rt::dtype_is_float(a.other) || (small && *small != a.other))
            refuse("min/max of " + std::string(rt::dtype_name(a.other)) + " values with others");
          small = a.other;
        }
        kinds |= a.kinds;
      }
      Val cur = args[0];
      cur.kinds = kinds;
      if (small) cur.other = *small;
      for (size_t k = 1; k < args.size(); ++k) {
        jit::EInstr i;
        i.op = builtin("min") ? jit::EOp::Min : jit::EOp::Max;
        i.type = loop->vars[cur.var];
        i.a = cur.var;
        i.b = args[k].var;
        Val r = num(kinds, i.type, cur.other);
        i.dst = r.var;
        emit(i);
        cur = r;
      }
      return cur;
    }
    if (builtin("abs")) {
      if (args.size() != 1) refuse("abs() arguments");
      return unary(jit::EOp::Abs, args[0], "abs()");
    }
    if (builtin("int")) {
      if (args.size() != 1) refuse("int() arguments");
      nums("int()");
      const Val& a = args[0];
      if (loop->vars[a.var] == jit::EType::Int) {
        Val r = a;
        r.kinds = kInt;
        return r;
      }
      jit::EInstr i;
      i.op = jit::EOp::ToInt;
      i.type = jit::EType::Int;
      i.checked = true;
      i.a = a.var;
      Val r = num(kInt, jit::EType::Int);
      i.dst = r.var;
      emit(i);
      return r;
    }
    if (builtin("float")) {
      if (args.size() != 1) refuse("float() arguments");
      nums("float()");
      Val r = args[0];
      r.var = as_float(args[0]);
      r.kinds = kFloat;
      r.const_int.reset();
      return r;
    }
    if (builtin("bool")) {
      if (args.size() != 1) refuse("bool() arguments");
      return truth(args[0]);
    }
    // math and numpy functions of one float.
    struct MathFn {
      const char* module;
      const char* name;
      double (*fn)(double);
      rt::LoopError inf_error;
      bool to_int;
    };
    static const MathFn fns[] = {
        {"math", "sqrt", nullptr, rt::LoopError::None, false},
        {"math", "exp", [](double x) { return std::exp(x); }, rt::LoopError::MathRange, false},
        {"math", "log", [](double x) { return std::log(x); }, rt::LoopError::MathDomain, false},
        {"math", "sin", [](double x) { return std::sin(x); }, rt::LoopError::None, false},
        {"math", "cos", [](double x) { return std::cos(x); }, rt::LoopError::None, false},
        {"math", "tan", [](double x) { return std::tan(x); }, rt::LoopError::None, false},
        {"math", "atan", [](double x) { return std::atan(x); }, rt::LoopError::None, false},
        {"math", "fabs", nullptr, rt::LoopError::None, false},
        {"math", "floor", [](double x) { return std::floor(x); }, rt::LoopError::None, true},
        {"math", "ceil", [](double x) { return std::ceil(x); }, rt::LoopError::None, true},
        {"numpy", "sqrt", nullptr, rt::LoopError::None, false},
        {"numpy", "exp", [](double x) { return std::exp(x); }, rt::LoopError::None, false},
        {"numpy", "log", [](double x) { return std::log(x); }, rt::LoopError::None, false},
    };
    for (const MathFn& m : fns) {
      if (!is_attr(o, m.module, m.name)) continue;
      if (args.size() != 1) refuse(std::string(m.module) + "." + m.name + "() arguments");
      nums(m.name);
      if (args[0].kinds & kNpOther) refuse(std::string(m.name) + " of a " + std::string(rt::dtype_name(args[0].other)));
      const bool np = std::string(m.module) == "numpy";
      if (np && (args[0].kinds & (kNpBool | kBool))) refuse(std::string("numpy.") + m.name + " of a bool");
      jit::EInstr i;
      i.type = jit::EType::Float;
      i.a = as_float(args[0]);
      i.checked = !np;
      std::string name = std::string(m.name);
      if (name == "sqrt") {
        i.op = jit::EOp::Sqrt;
      } else if (name == "fabs") {
        i.op = jit::EOp::Abs;
        i.checked = false;
      } else {
        i.op = jit::EOp::Call1;
        i.fn1 = m.fn;
        i.fn_name = std::string(m.module) + "." + m.name;
        i.inf_error = m.inf_error;
      }
      Val r = num(np ? kNpFloat : kFloat, jit::EType::Float);
      i.dst = r.var;
      emit(i);
      if (!m.to_int) return r;
      jit::EInstr c;
      c.op = jit::EOp::ToInt;
      c.type = jit::EType::Int;
      c.checked = true;
      c.a = r.var;
      Val ri = num(kInt, jit::EType::Int);
      c.dst = ri.var;
      emit(c);
      return ri;
    }
    const char* name =
        o ? (PyCFunction_Check(o) ? reinterpret_cast<PyCFunctionObject*>(o)->m_ml->ml_name : Py_TYPE(o)->tp_name) : "?";
    refuse(std::string("a call of ") + name);
  }

  Val dim(int array, int axis) {
    if (axis < 0) axis += loop->arrays[array].rank;
    if (axis < 0 || axis >= loop->arrays[array].rank) refuse("shape index out of range");
    jit::EInstr i;
    i.op = jit::EOp::Dim;
    i.type = jit::EType::Int;
    i.array = array;
    i.axis = axis;
    Val r = num(kInt, jit::EType::Int);
    i.dst = r.var;
    emit(i);
    r.aff = stable_symbol(-1 - (int64_t{array} << 8) - axis);
    return r;
  }

  // ---- slices and whole-array statements (Note [Slices in element loops]) -------------------------
  int new_block() {
    loop->blocks.emplace_back();
    return static_cast<int>(loop->blocks.size()) - 1;
  }
  void emit_jump(int target) {
    jit::EInstr j = terminator(jit::EOp::Jump);
    j.target = target;
    emit(j);
  }
  // dst = op(a, b), unchecked (NumPy's meaning; Int indices stay far from 2**63).
  int op2(jit::EOp op, jit::EType t, int a, int b) {
    jit::EInstr i;
    i.op = op;
    i.type = t;
    i.a = a;
    i.b = b;
    i.dst = loop->new_var(op == jit::EOp::Cmp ? jit::EType::Int : t);
    emit(i);
    return i.dst;
  }
  int icmp(jit::ECond c, int a, int b) {
    jit::EInstr i;
    i.op = jit::EOp::Cmp;
    i.type = jit::EType::Int;
    i.cond = c;
    i.a = a;
    i.b = b;
    i.dst = loop->new_var(jit::EType::Int);
    emit(i);
    return i.dst;
  }
  int iconst(int64_t x) { return const_int(x).var; }
  // An int64 computed from small ints of type d, wrapped to d's width (Note [Small NumPy ints]).
  int wrapped(int v, rt::DType d) {
    const int64_t bits = 8 * rt::dtype_itemsize(d);
    if (!rt::dtype_is_signed(d)) return op2(jit::EOp::BitAnd, jit::EType::Int, v, iconst((int64_t{1} << bits) - 1));
    const int up = op2(jit::EOp::Shl, jit::EType::Int, v, iconst(64 - bits));
    return op2(jit::EOp::Shr, jit::EType::Int, up, iconst(64 - bits));
  }
  int fresh(int var) {
    const int d = loop->new_var(loop->vars[var]);
    emit(mov(d, var));
    return d;
  }
  // Goes on in a new block when `ok` is nonzero; stops the loop with `err` (detail: `details`) when not.
  void check_or_fail(int ok, rt::LoopError err, std::vector<int> details) {
    const int bad = new_block(), cont = new_block();
    jit::EInstr br = terminator(jit::EOp::Branch);
    br.a = ok;
    br.target = cont;
    br.target2 = bad;
    emit(br);
    jit::EInstr f = terminator(jit::EOp::Fail);
    f.imm = static_cast<int64_t>(err);
    f.index = std::move(details);
    loop->blocks[bad].instrs.push_back(f);
    cur_ = cont;
  }
  // A new variable of type t set to 0 here (not in the prologue: it changes).
  int zero_here(jit::EType t) {
    jit::EInstr z;
    z.op = jit::EOp::Const;
    z.type = t;
    z.dst = loop->new_var(t);
    emit(z);
    return z.dst;
  }
  // `while k < bound: body(); k += stride` in blocks of its own; emission goes on after it.
  template <typename F>
  void while_below(int k, int bound, int64_t stride, F&& body) {
    const int head = new_block(), b = new_block(), done = new_block();
    emit_jump(head);
    cur_ = head;
    jit::EInstr br = terminator(jit::EOp::Branch);
    br.a = icmp(jit::ECond::Lt, k, bound);
    br.target = b;
    br.target2 = done;
    emit(br);
    cur_ = b;
    body();
    jit::EInstr inc;
    inc.op = jit::EOp::Add;
    inc.type = jit::EType::Int;
    inc.a = k;
    inc.b = iconst(stride);
    inc.dst = k;
    emit(inc);
    emit_jump(head);
    cur_ = done;
  }
  // `for k in range(len): body(k)`.
  template <typename F>
  void counted(int len, F&& body) {
    const int k = zero_here(jit::EType::Int);
    while_below(k, len, 1, [&] { body(k); });
  }

  static bool is_index(const Val& v, const jit::ElementLoop& l) {
    return v.k == Val::K::Num && l.vars[v.var] == jit::EType::Int && !(v.kinds & (kBool | kNpBool | kUnbound)) &&
           !(v.kinds & kFloatKinds);
  }
  // A fixed index of a view, checked now as NumPy checks it when slicing; the index from 0.
  int checked_index(const Val& i, int array, int axis) {
    const int d = dim(array, axis).var;
    int at = i.var;
    const bool nonneg = i.lower && *i.lower >= 0;
    if (!nonneg) at = op2(jit::EOp::Add, jit::EType::Int, at, op2(jit::EOp::Mul, jit::EType::Int, icmp(jit::ECond::Lt, at, iconst(0)), d));
    int ok = icmp(jit::ECond::Lt, at, d);
    if (!nonneg) ok = op2(jit::EOp::BitAnd, jit::EType::Int, ok, icmp(jit::ECond::Ge, at, iconst(0)));
    check_or_fail(ok, rt::LoopError::IndexOutOfBounds, {fresh(i.var), iconst(axis), d});
    return nonneg ? fresh(at) : at;
  }
  // Python's slice.indices() for a constant step: (start, length).
  std::pair<int, int> slice_bounds(const Val& sl, int d, int64_t step) {
    const jit::EType I = jit::EType::Int;
    auto bound = [&](const Val& v, int64_t if_none) -> int {
      if (v.k == Val::K::None) return if_none == -1 ? iconst(-1) : if_none == 0 ? iconst(0) : -2;
      if (!is_index(v, *loop)) refuse("a slice bound that is " + kind_name(v));
      int x = v.var;
      const bool nonneg = v.lower && *v.lower >= 0;
      if (!nonneg) x = op2(jit::EOp::Add, I, x, op2(jit::EOp::Mul, I, icmp(jit::ECond::Lt, x, iconst(0)), d));
      if (step > 0) {
        if (!nonneg) x = op2(jit::EOp::Max, I, x, iconst(0));
        return op2(jit::EOp::Min, I, x, d);
      }
      x = op2(jit::EOp::Max, I, x, iconst(-1));
      return op2(jit::EOp::Min, I, x, op2(jit::EOp::Sub, I, d, iconst(1)));
    };
    int start, stop;
    if (step > 0) {
      start = bound(sl.items[0], 0);
      stop = sl.items[1].k == Val::K::None ? fresh(d) : bound(sl.items[1], 0);
    } else {
      start = sl.items[0].k == Val::K::None ? op2(jit::EOp::Sub, I, d, iconst(1)) : bound(sl.items[0], 0);
      stop = bound(sl.items[1], -1);
    }
    int span = step > 0 ? op2(jit::EOp::Sub, I, stop, start) : op2(jit::EOp::Sub, I, start, stop);
    const int64_t m = step > 0 ? step : -step;
    if (m != 1) span = op2(jit::EOp::FloorDiv, I, op2(jit::EOp::Add, I, span, iconst(m - 1)), iconst(m));
    return {start, op2(jit::EOp::Max, I, span, iconst(0))};
  }
  static uint16_t vec_kinds(rt::DType dt) {
    return dt == rt::DType::Float64 ? kNpFloat : dt == rt::DType::Int64 ? kNpInt : kNpOther;
  }
  Val vec_val(VPtr n, int len, uint16_t kinds, rt::DType other, APtr len_key = nullptr) {
    Val r{Val::K::Vec};
    r.vec = std::move(n);
    r.var = len;
    r.kinds = kinds;
    r.other = other;
    r.lower = 0;
    r.aff = len_key ? len_key : fresh_symbol();
    return r;
  }
  // A key equal for two views exactly when their lengths are provably equal (so operands need no
  // broadcasting, and the views' read orders can be compared). With a step of 1, a start that is
  // None or a constant a >= 0 and a stop that is None or a constant -b < 0, the length is
  // max(0, size - a - b) whatever the size (clamping included): the key is size - a - b. Else
  // equal sizes, steps and bounds as written give equal lengths.
  APtr length_key(const APtr& size, const Val& sl, int64_t step) {
    const Val &a = sl.items[0], &b = sl.items[1];
    const bool front = a.k == Val::K::None || (a.const_int && *a.const_int >= 0);
    const bool back = b.k == Val::K::None || (b.const_int && *b.const_int < 0);
    if (step == 1 && front && back) {
      auto k = std::make_shared<Affine>(*size);
      k->c -= (a.k == Val::K::None ? 0 : *a.const_int) - (b.k == Val::K::None ? 0 : *b.const_int);
      return k;
    }
    auto text = [](const Val& v) {
      if (v.k == Val::K::None) return std::string("None");
      if (!v.aff) return std::string("?");
      std::string s = std::to_string(v.aff->c);
      for (auto [sym, c] : v.aff->terms) s += "+" + std::to_string(c) + "*s" + std::to_string(sym);
      return s;
    };
    if ((a.k != Val::K::None && !a.aff) || (b.k != Val::K::None && !b.aff)) return fresh_symbol();
    const std::string key = std::to_string(size->terms.empty() ? 0 : size->terms[0].first) + "|" +
                            std::to_string(step) + "|" + text(a) + "|" + text(b);
    auto [it, added] = length_keys_.try_emplace(key, nullptr);
    if (added) it->second = fresh_symbol();
    return it->second;
  }
  // The parts of a subscript: the array's row prefix, then the key's items.
  std::vector<Val> key_parts(const Val& arr, const Val& key) {
    std::vector<Val> parts;
    for (size_t k = 0; k < arr.prefix.size(); ++k) {
      Val v{Val::K::Num};
      v.kinds = kInt;
      v.var = arr.prefix[k];
      v.aff = arr.prefix_aff[k];
      if (arr.prefix_nonneg[k]) v.lower = 0;
      parts.push_back(v);
    }
    if (key.k == Val::K::Tuple)
      parts.insert(parts.end(), key.items.begin(), key.items.end());
    else
      parts.push_back(key);
    return parts;
  }
  // Whether arr[key] is a slice (a view), not an element.
  bool is_view_key(const Val& arr, const Val& key) const {
    const int rank = loop->arrays[arr.array].rank;
    const int n = static_cast<int>(arr.prefix.size()) + (key.k == Val::K::Tuple ? static_cast<int>(key.items.size()) : 1);
    if (n < rank) return true;
    auto is_slice = [](const Val& v) { return v.k == Val::K::Slice; };
    return key.k == Val::K::Tuple ? std::any_of(key.items.begin(), key.items.end(), is_slice) : is_slice(key);
  }
  // arr[key] as a 1-d view.
  Val make_view(const Val& arr, const Val& key) {
    const jit::ElementArray& a = loop->arrays[arr.array];
    std::vector<Val> parts = key_parts(arr, key);
    if (static_cast<int>(parts.size()) > a.rank) refuse("too many indices for a " + std::to_string(a.rank) + "-d array");
    while (static_cast<int>(parts.size()) < a.rank) {
      Val all{Val::K::Slice};
      all.items.assign(3, Val{Val::K::None});
      parts.push_back(all);
    }
    int axis = -1;
    for (int k = 0; k < a.rank; ++k) {
      if (parts[k].k == Val::K::Slice) {
        if (axis >= 0) refuse("a slice of more than one axis (only 1-d slices are compiled in loops)");
        axis = k;
      } else if (!is_index(parts[k], *loop)) {
        refuse("an index that is " + kind_name(parts[k]));
      }
    }
    auto n = std::make_shared<VNode>();
    n->k = VNode::K::View;
    n->array = arr.array;
    n->axis = axis;
    n->type = rt::dtype_is_float(a.dtype) ? jit::EType::Float : jit::EType::Int;
    n->index.assign(a.rank, -1);
    n->fixed.assign(a.rank, nullptr);
    n->fixed_nonneg.assign(a.rank, 0);
    for (int k = 0; k < a.rank; ++k) {
      if (k == axis) continue;
      n->index[k] = checked_index(parts[k], arr.array, k);
      n->fixed[k] = parts[k].aff;
      n->fixed_nonneg[k] = parts[k].lower && *parts[k].lower >= 0;
    }
    const Val& sl = parts[axis];
    int64_t step = 1;
    if (sl.items[2].k != Val::K::None) {
      if (!sl.items[2].const_int || *sl.items[2].const_int == 0) refuse("a slice step that is not a nonzero constant");
      step = *sl.items[2].const_int;
    }
    const Val dv = dim(arr.array, axis);
    const int d = dv.var;
    auto [start, len] = slice_bounds(sl, d, step);
    n->start = start;
    n->step = step;
    n->start_none = sl.items[0].k == Val::K::None;
    n->stop_none = sl.items[1].k == Val::K::None;
    n->raw_start = n->start_none ? nullptr : sl.items[0].aff;
    n->raw_stop = n->stop_none ? nullptr : sl.items[1].aff;
    n->start_nonneg = n->start_none || (sl.items[0].lower && *sl.items[0].lower >= 0);
    return vec_val(n, len, vec_kinds(a.dtype), a.dtype, length_key(dv.aff, sl, step));
  }
  // A value used as a vector: a vector, a row, a 1-d array.
  std::optional<Val> as_vec(const Val& v) {
    if (v.k == Val::K::Vec) return v;
    if (v.k == Val::K::Array && loop->arrays[v.array].rank - static_cast<int>(v.prefix.size()) == 1) {
      Val key{Val::K::Slice};
      key.items.assign(3, Val{Val::K::None});
      Val arr = v;
      return make_view(arr, key);
    }
    if (v.k == Val::K::Array) refuse("a " + std::to_string(loop->arrays[v.array].rank - v.prefix.size()) + "-d array in a loop's arithmetic");
    return std::nullopt;
  }
  void need_numeric(const Val& v, const char* what) {
    if (v.kinds & kNpOther)
      refuse(std::string(what) + " of a " + std::string(rt::dtype_name(v.other)) +
             " array slice (only float64 and int64 slices compute in loops)");
  }
  // A number as a vector node of type t.
  VPtr scalar_node(const Val& v, jit::EType t) {
    auto n = std::make_shared<VNode>();
    n->k = VNode::K::Scalar;
    n->type = t;
    n->var = t == jit::EType::Float ? as_float(v) : v.var;
    n->var = fresh(n->var);
    return n;
  }
  // a and b of lengths la and lb as operands of one elementwise operation: NumPy's broadcasting of
  // 1-d shapes; the result's length.
  int broadcast(VPtr& a, int la, VPtr& b, int lb, rt::ShapeUse use) {
    if (la == lb) return la;
    const jit::EType I = jit::EType::Int;
    const int one = iconst(1);
    const int eq = icmp(jit::ECond::Eq, la, lb), a1 = icmp(jit::ECond::Eq, la, one), b1 = icmp(jit::ECond::Eq, lb, one);
    const int ok = op2(jit::EOp::BitOr, I, eq, op2(jit::EOp::BitOr, I, a1, b1));
    check_or_fail(ok, rt::LoopError::ShapeMismatch, {la, lb, iconst(static_cast<int64_t>(use))});
    // length: lb where a has one element, else la
    const int len = op2(jit::EOp::Add, I, la, op2(jit::EOp::Mul, I, a1, op2(jit::EOp::Sub, I, lb, la)));
    auto wrap = [&](VPtr& x, int x1) {
      auto n = std::make_shared<VNode>();
      n->k = VNode::K::Bcast;
      n->type = x->type;
      n->a = x;
      // keep k unless x has one element (then every k reads element 0)
      n->mask = op2(jit::EOp::Sub, I, iconst(0), op2(jit::EOp::Sub, I, one, x1));
      x = n;
    };
    wrap(a, a1);
    wrap(b, b1);
    return len;
  }
  // Two of one small int type (int8 ... uint32, as a vector or a number): that type, computed in
  // int64 and wrapped to its width as for numbers (Note [Small NumPy ints]); else nothing.
  static std::optional<rt::DType> small_pair(const Val& a, const Val& b) {
    if (a.kinds != kNpOther || b.kinds != kNpOther || a.other != b.other) return std::nullopt;
    const rt::DType d = a.other;
    if (!rt::dtype_is_integer(d) || d == rt::DType::Int64 || d == rt::DType::UInt64 || d == rt::DType::Bool)
      return std::nullopt;
    return d;
  }
  // Elementwise a <nb> b where one side is a vector; with `extreme` (Min or Max), numpy.minimum or
  // numpy.maximum (of floats: Minimum or Maximum, a NaN from either side).
  Val vec_binary(int nb_full, const Val& a0, const Val& b0, std::optional<jit::EOp> extreme = std::nullopt) {
    const int nb = nb_full % kNbInplace;
    const std::string what = extreme ? std::string(*extreme == jit::EOp::Min ? "numpy.minimum" : "numpy.maximum")
                                     : std::string("operator ") + nb_op_name(nb_full);
    if (!extreme && nb != kNbAdd && nb != kNbSubtract && nb != kNbMultiply && nb != kNbTrueDivide)
      refuse(what + " on an array slice");
    std::optional<Val> av = as_vec(a0), bv = as_vec(b0);
    const Val& a = av ? *av : a0;
    const Val& b = bv ? *bv : b0;
    const std::optional<rt::DType> small = extreme || nb != kNbTrueDivide ? small_pair(a, b) : std::nullopt;
    auto elem_type = [&](const Val& v) -> jit::EType {
      if (v.k == Val::K::Vec) {
        if (!small) need_numeric(v, "arithmetic");
        return v.vec->type;
      }
      if (v.k != Val::K::Num || (v.kinds & (kBool | kNpBool | kUnbound)) || ((v.kinds & kNpOther) && !small))
        refuse(what + " on an array slice and " + kind_name(v));
      const jit::EType t = loop->vars[v.var];
      if ((v.kinds & kFloatKinds) ? t != jit::EType::Float : t != jit::EType::Int || (v.kinds & kFloatKinds))
        refuse("a number of mixed kinds with an array slice");
      return t;
    };
    const jit::EType ta = elem_type(a), tb = elem_type(b);
    const jit::EType t = nb == kNbTrueDivide || ta == jit::EType::Float || tb == jit::EType::Float ? jit::EType::Float
                                                                                                   : jit::EType::Int;
    VPtr na = a.k == Val::K::Vec ? a.vec : scalar_node(a, ta);
    VPtr nbn = b.k == Val::K::Vec ? b.vec : scalar_node(b, tb);
    int len;
    APtr key;
    if (a.k == Val::K::Vec && b.k == Val::K::Vec && affine_diff(a.aff, b.aff) != std::optional<int64_t>(0)) {
      len = broadcast(na, a.var, nbn, b.var, rt::ShapeUse::Broadcast);
    } else {
      len = a.k == Val::K::Vec ? a.var : b.var;
      key = a.k == Val::K::Vec ? a.aff : b.aff;
    }
    auto n = std::make_shared<VNode>();
    n->k = VNode::K::Binary;
    n->type = t;
    n->op = extreme              ? numpy_extreme(*extreme, t)
            : nb == kNbAdd      ? jit::EOp::Add
            : nb == kNbSubtract ? jit::EOp::Sub
            : nb == kNbMultiply ? jit::EOp::Mul
                                : jit::EOp::Div;
    // (min and max of two values of one small type stay in it.)
    if (small && !extreme) n->wrap = *small;
    n->a = na;
    n->b = nbn;
    if (small) return vec_val(n, len, kNpOther, *small, key);
    return vec_val(n, len, t == jit::EType::Float ? kNpFloat : kNpInt, rt::DType::Int64, key);
  }
  // numpy.minimum/maximum as the loop IR's op for elements of type t: Python's min/max on
  // integers, NaN-propagating Minimum/Maximum on floats.
  static jit::EOp numpy_extreme(jit::EOp min_or_max, jit::EType t) {
    if (t == jit::EType::Int) return min_or_max;
    return min_or_max == jit::EOp::Min ? jit::EOp::Minimum : jit::EOp::Maximum;
  }
  // numpy.minimum/maximum of two numbers: a numpy.float64 (a float on either side) or numpy.int64.
  Val numbers_extreme(jit::EOp op, const Val& a, const Val& b) {
    const uint16_t ok = kInt | kFloat | kNpInt | kNpFloat;
    for (const Val* v : {&a, &b})
      if (v->k != Val::K::Num || (v->kinds & ~ok))
        refuse("numpy.minimum/maximum of " + kind_name(*v) + " (" + kinds_text(v->kinds) + ")");
    const bool flt = ((a.kinds | b.kinds) & kFloatKinds) || loop->vars[a.var] == jit::EType::Float ||
                     loop->vars[b.var] == jit::EType::Float;
    const jit::EType t = flt ? jit::EType::Float : jit::EType::Int;
    jit::EInstr i;
    i.op = numpy_extreme(op, t);
    i.type = t;
    i.a = flt ? as_float(a) : a.var;
    i.b = flt ? as_float(b) : b.var;
    Val r = num(flt ? kNpFloat : kNpInt, t);
    i.dst = r.var;
    emit(i);
    return r;
  }
  Val vec_neg(const Val& v0) {
    Val v = *as_vec(v0);
    need_numeric(v, "unary -");
    auto n = std::make_shared<VNode>();
    n->k = VNode::K::Neg;
    n->type = v.vec->type;
    n->a = v.vec;
    return vec_val(n, v.var, v.kinds, v.other, v.aff);
  }
  // x[idx] for a 1-d array x and an integer vector idx (a copy in NumPy: not a view).
  Val vec_gather(const Val& arr, const Val& idx) {
    const jit::ElementArray& a = loop->arrays[arr.array];
    if (a.rank != 1 || !arr.prefix.empty()) refuse("indexing a " + std::to_string(a.rank) + "-d array with an array");
    const bool int_index = idx.vec->type == jit::EType::Int && (idx.kinds & (kNpInt | kNpOther)) &&
                           !(idx.kinds & kNpOther && (rt::dtype_is_float(idx.other) || idx.other == rt::DType::Bool));
    if (!int_index) refuse("indexing with an array that is not of integers");
    auto n = std::make_shared<VNode>();
    n->k = VNode::K::Gather;
    n->array = arr.array;
    n->type = rt::dtype_is_float(a.dtype) ? jit::EType::Float : jit::EType::Int;
    n->a = idx.vec;
    return vec_val(n, idx.var, vec_kinds(a.dtype), a.dtype, idx.aff);
  }
  // np.flip of a view: the same elements, last first.
  Val vec_flip(const Val& v0) {
    Val v = *as_vec(v0);
    if (v.vec->k != VNode::K::View) refuse("numpy.flip of a computed array");
    auto n = std::make_shared<VNode>(*v.vec);
    const jit::EType I = jit::EType::Int;
    // start + (len - 1) * step; for an empty view the start is never read.
    n->start = op2(jit::EOp::Add, I, v.vec->start,
                   op2(jit::EOp::Mul, I, op2(jit::EOp::Sub, I, v.var, iconst(1)), iconst(v.vec->step)));
    n->step = -v.vec->step;
    n->flipped = true;
    return vec_val(n, v.var, v.kinds, v.other, v.aff);
  }
  // Element k of a vector node, into a variable of the node's type.
  int elem(const VNode& n, int k) {
    const jit::EType I = jit::EType::Int;
    switch (n.k) {
      case VNode::K::Scalar:
        return n.var;
      case VNode::K::View: {
        std::vector<int> index = n.index;
        int off = n.step == 1 ? k : op2(jit::EOp::Mul, I, k, iconst(n.step));
        index[n.axis] = op2(jit::EOp::Add, I, n.start, off);
        jit::EInstr i;
        i.op = jit::EOp::Load;
        i.array = n.array;
        i.index = std::move(index);
        i.type = n.type;
        i.dst = loop->new_var(n.type);
        emit(i);
        return i.dst;
      }
      case VNode::K::Gather: {
        jit::EInstr i;
        i.op = jit::EOp::Load;
        i.array = n.array;
        i.index = {elem(*n.a, k)};
        i.type = n.type;
        i.dst = loop->new_var(n.type);
        emit(i);
        return i.dst;
      }
      case VNode::K::Bcast:
        return elem(*n.a, op2(jit::EOp::BitAnd, I, k, n.mask));
      case VNode::K::Neg: {
        jit::EInstr i;
        i.op = jit::EOp::Neg;
        i.type = n.type;
        i.a = elem(*n.a, k);
        i.dst = loop->new_var(n.type);
        emit(i);
        return i.dst;
      }
      case VNode::K::Binary: {
        int x = elem(*n.a, k), y = elem(*n.b, k);
        if (n.type == jit::EType::Float) {
          x = to_float_var(x);
          y = to_float_var(y);
        }
        const int r = op2(n.op, n.type, x, y);
        return n.wrap == rt::DType::Int64 ? r : wrapped(r, n.wrap);
      }
    }
    return -1;
  }
  int to_float_var(int v) {
    if (loop->vars[v] == jit::EType::Float) return v;
    jit::EInstr i;
    i.op = jit::EOp::ToFloat;
    i.type = jit::EType::Float;
    i.a = v;
    i.dst = loop->new_var(jit::EType::Float);
    emit(i);
    return i.dst;
  }
  // np.dot(a, b), a @ b, np.sum(a), a.sum(): one loop, a number (NumPy's scalar) out.
  Val vec_reduce(const Val& a0, const Val* b0, rt::ShapeUse use) {
    Val a = *as_vec(a0);
    need_numeric(a, "a sum or product");
    std::optional<Val> b;
    if (b0) {
      b = as_vec(*b0);
      if (!b) refuse("numpy.dot of an array slice and a number");
      need_numeric(*b, "a product");
      check_or_fail(icmp(jit::ECond::Eq, a.var, b->var), rt::LoopError::ShapeMismatch,
                    {a.var, b->var, iconst(static_cast<int64_t>(use))});
    }
    const jit::EType t = a.vec->type == jit::EType::Float || (b && b->vec->type == jit::EType::Float) ? jit::EType::Float
                                                                                                      : jit::EType::Int;
    auto term = [&](int k) {
      int x = elem(*a.vec, k);
      if (t == jit::EType::Float) x = to_float_var(x);
      if (!b) return x;
      int y = elem(*b->vec, k);
      if (t == jit::EType::Float) y = to_float_var(y);
      return op2(jit::EOp::Mul, t, x, y);
    };
    auto add_into = [&](int acc, int x) {
      jit::EInstr add;
      add.op = jit::EOp::Add;
      add.type = t;
      add.a = acc;
      add.b = x;
      add.dst = acc;
      emit(add);
    };
    Val r = num(t == jit::EType::Float ? kNpFloat : kNpInt, t);
    if (t == jit::EType::Int) {  // one add a cycle: no dependency chain to break
      r.var = zero_here(t);
      counted(a.var, [&](int k) { add_into(r.var, term(k)); });
      return r;
    }
    // Float: four running sums, so four additions are in flight instead of one (a float add's
    // latency is four of its throughput), the last few elements into s0; (s0 + s1) + (s2 + s3).
    const int s[4] = {zero_here(t), zero_here(t), zero_here(t), zero_here(t)};
    const int k = zero_here(jit::EType::Int);
    const int last4 = op2(jit::EOp::Sub, jit::EType::Int, a.var, iconst(3));
    while_below(k, last4, 4, [&] {
      for (int j = 0; j < 4; ++j) add_into(s[j], term(j == 0 ? k : op2(jit::EOp::Add, jit::EType::Int, k, iconst(j))));
    });
    while_below(k, a.var, 1, [&] { add_into(s[0], term(k)); });
    jit::EInstr sum;
    sum.op = jit::EOp::Add;
    sum.type = t;
    sum.a = op2(jit::EOp::Add, t, s[0], s[1]);
    sum.b = op2(jit::EOp::Add, t, s[2], s[3]);
    sum.dst = r.var;
    emit(sum);
    return r;
  }
  static bool reads_array(const VNode& n, int array) {
    if ((n.k == VNode::K::View || n.k == VNode::K::Gather) && n.array == array) return true;
    return (n.a && reads_array(*n.a, array)) || (n.b && reads_array(*n.b, array));
  }
  // Which elements two views of one array share, from how they were written. Each view is one
  // line of the array (its fixed indices pick the line) and a range along its axis; two views
  // along the same axis with the same step and bounds as written therefore hold either the same
  // elements in the same order (the same line) or none in common (another line), whatever their
  // fixed indices are (`path[i, :]` and `path[k, :]`, i == k or not): a store of one in order
  // reads the other's element k before writing it, or never. Likewise r reads target's element
  // k or one after it, or nothing of it, when r's start is a constant distance at or after
  // target's along the same axis and positive step (both >= 0: clamping keeps the order). Other
  // views along other axes share nothing when a fixed index differs by a constant (both >= 0).
  static bool same_bound(const APtr& a, bool a_none, const APtr& b, bool b_none) {
    if (a_none || b_none) return a_none && b_none;
    return affine_diff(a, b) == std::optional<int64_t>(0);
  }
  static bool same_elements_or_none(const VNode& r, const VNode& t) {
    if (r.axis != t.axis || r.step != t.step || r.flipped || t.flipped) return false;
    return same_bound(r.raw_start, r.start_none, t.raw_start, t.start_none) &&
           same_bound(r.raw_stop, r.stop_none, t.raw_stop, t.stop_none);
  }
  static bool disjoint(const VNode& r, const VNode& t) {
    for (size_t k = 0; k < r.fixed.size(); ++k) {
      if (static_cast<int>(k) == r.axis || static_cast<int>(k) == t.axis || !r.fixed_nonneg[k] || !t.fixed_nonneg[k])
        continue;
      const std::optional<int64_t> d = affine_diff(r.fixed[k], t.fixed[k]);
      if (d && *d != 0) return true;
    }
    return false;
  }
  static bool read_ahead(const VNode& r, const VNode& t) {
    if (r.axis != t.axis || r.step != t.step || r.step <= 0 || r.flipped || t.flipped || !r.start_nonneg ||
        !t.start_nonneg)
      return false;
    auto zero = std::make_shared<Affine>();
    const std::optional<int64_t> d =
        affine_diff(r.start_none ? zero : r.raw_start, t.start_none ? zero : t.raw_start);
    return d && *d >= 0;
  }
  // Whether a store of view `target`, in order, could read an element of it node n reads after
  // writing it. Under a broadcast (`bcast`) every k may read element 0.
  static bool reads_elsewhere(const VNode& n, const VNode& target, bool bcast = false) {
    switch (n.k) {
      case VNode::K::View:
        if (n.array != target.array) return false;
        return !(same_elements_or_none(n, target) || disjoint(n, target) || (!bcast && read_ahead(n, target)));
      case VNode::K::Gather:
        return n.array == target.array || reads_elsewhere(*n.a, target, bcast);
      case VNode::K::Scalar:
        return false;
      case VNode::K::Bcast:
        // Element 0 for every k only where the operand has one element and the result more: a
        // view of the same elements then has one, the stored value more, and the store fails
        // before it writes.
        return reads_elsewhere(*n.a, target, true);
      default:
        return reads_elsewhere(*n.a, target, bcast) || (n.b && reads_elsewhere(*n.b, target, bcast));
    }
  }
  // arr[key] = value for a key that makes a view.
  void vec_store(const Val& arr, const Val& key, const Val& value) {
    jit::ElementArray& a = loop->arrays[arr.array];
    Val target = make_view(arr, key);
    std::optional<Val> v = as_vec(value);
    int src_len = -1;
    VPtr src;
    bool through_scratch = false;
    if (v) {
      src = v->vec;
      src_len = v->var;
      if (src->type == jit::EType::Float && !rt::dtype_is_float(a.dtype))
        refuse("storing floats into an integer array slice (NumPy's truncation is not compiled yet)");
      // NumPy computes the whole value before it writes: so does the loop, into a scratch array
      // shaped like the target, when the value reads the target elsewhere than where it writes.
      through_scratch = reads_elsewhere(*src, *target.vec);
    } else {
      if (value.k != Val::K::Num || (value.kinds & kUnbound)) refuse("storing " + kind_name(value) + " into an array slice");
      if (value.kinds & kNpOther) refuse("storing a " + std::string(rt::dtype_name(value.other)) + " into an array slice");
      if (!rt::dtype_is_float(a.dtype) && loop->vars[value.var] == jit::EType::Float)
        refuse("storing a float into an integer array (NumPy's truncation is not compiled yet)");
    }
    a.written = true;
    int broadcast = -1;  // nonzero when the source is one element, broadcast along the target
    if (v && src_len != target.var && affine_diff(v->aff, target.aff) != std::optional<int64_t>(0)) {
      const jit::EType I = jit::EType::Int;
      const int one = iconst(1);
      broadcast = icmp(jit::ECond::Eq, src_len, one);
      const int ok = op2(jit::EOp::BitOr, I, icmp(jit::ECond::Eq, src_len, target.var), broadcast);
      check_or_fail(ok, rt::LoopError::ShapeMismatch, {src_len, target.var, iconst(static_cast<int64_t>(rt::ShapeUse::Assign))});
    }
    const int scalar = v ? -1 : fresh(value.var);
    const VNode& t = *target.vec;
    auto at = [&](int k) {
      std::vector<int> index = t.index;
      const int off = t.step == 1 ? k : op2(jit::EOp::Mul, jit::EType::Int, k, iconst(t.step));
      index[t.axis] = op2(jit::EOp::Add, jit::EType::Int, t.start, off);
      return index;
    };
    auto store_at = [&](int array, std::vector<int> index, int x) {
      jit::EInstr i;
      i.op = jit::EOp::Store;
      i.array = array;
      i.index = std::move(index);
      i.a = x;
      i.type = loop->vars[x];
      emit(i);
    };
    const int scratch = through_scratch ? scratch_like(arr.array) : -1;
    auto store_loop = [&](bool one_element) {
      counted(target.var, [&](int k) {
        const int x = !v ? scalar : elem(*src, one_element ? iconst(0) : k);
        store_at(scratch >= 0 ? scratch : arr.array, at(k), x);
      });
    };
    if (broadcast < 0) {
      store_loop(false);
    } else {
      // A loop for each case: where the lengths match (the common case), the source's indices
      // stay the counter plus constants, which the code generator versions and steps as pointers.
      const int one_element = new_block(), same_length = new_block(), done = new_block();
      jit::EInstr br = terminator(jit::EOp::Branch);
      br.a = broadcast;
      br.target = one_element;
      br.target2 = same_length;
      emit(br);
      cur_ = same_length;
      store_loop(false);
      emit_jump(done);
      cur_ = one_element;
      store_loop(true);
      emit_jump(done);
      cur_ = done;
    }
    if (scratch < 0) return;
    counted(target.var, [&](int k) {
      std::vector<int> index = at(k);
      jit::EInstr i;
      i.op = jit::EOp::Load;
      i.array = scratch;
      i.index = index;
      i.type = rt::dtype_is_float(loop->arrays[scratch].dtype) ? jit::EType::Float : jit::EType::Int;
      i.dst = loop->new_var(i.type);
      emit(i);
      store_at(arr.array, std::move(index), i.dst);
    });
  }
  // The trace's numpy.empty_like(of): a graph node before the loop node (unused, it goes with dead
  // code if the loop is refused).
  VarPtr empty_like(const VarPtr& of) {
    OwnedRef np = OwnedRef::steal(PyImport_ImportModule("numpy"));
    OwnedRef fn = np ? OwnedRef::steal(PyObject_GetAttrString(np.get(), "empty_like")) : OwnedRef();
    if (!fn) {
      PyErr_Clear();
      refuse("internal: numpy.empty_like");
    }
    return tx_.call(std::make_shared<BuiltinVar>(fn), {of}, {});
  }
  // Note [Arrays made in loops]
  // `un = u.copy()` (numpy.copy, zeros_like, empty_like) of a whole array in a loop body makes a new
  // array each time it runs. The loop gives each such call one array instead, made once before it
  // (a graph node numpy.empty_like(u)), and refills it each time: that is what NumPy's new arrays
  // would hold as long as nothing still sees the array made the time before. Nothing can: a local
  // holds it as it holds a view, and where paths meet holding different ones it is no longer bound
  // — at a loop's head the array of the trip before meets none (a loop's locals enter it holding
  // numbers), so reading one there (`b = a` kept from the trip before) refuses the loop — and the
  // code after the loop never sees it (only numbers leave a loop). Each call is interpreted once
  // per pass, and the n-th array made in a pass is the same array in every pass. Copies of slices
  // or rows (another shape) and arguments (dtype=, order=) are not compiled: the loop is traced as
  // before.
  enum class MadeFill : uint8_t { None, Zeros, Copy };
  Val make_array(const Val& src, MadeFill fill) {
    if (src.k != Val::K::Array || !src.prefix.empty())
      refuse("a new array like " + kind_name(src) + " (only whole arrays are copied in loops)");
    const VarPtr& of = array_vars[src.array];
    auto it = made_vars_.find({of.get(), arrays_made_});
    if (it == made_vars_.end()) it = made_vars_.emplace(std::pair{of.get(), arrays_made_}, empty_like(of)).first;
    ++arrays_made_;
    const Val a = from_trace(it->second, "an array made in the loop");
    loop->arrays[a.array].written = true;
    made_arrays_.insert(a.array);
    if (fill == MadeFill::None) return a;
    const int rank = loop->arrays[a.array].rank;
    std::vector<int> dims(rank), at(rank);
    for (int d = 0; d < rank; ++d) dims[d] = dim(src.array, d).var;
    const int zero = fill == MadeFill::Zeros ? zero_here(rt::dtype_is_float(loop->arrays[a.array].dtype)
                                                             ? jit::EType::Float
                                                             : jit::EType::Int)
                                             : -1;
    std::function<void(int)> nest = [&](int d) {
      if (d < rank) {
        counted(dims[d], [&](int k) {
          at[d] = k;
          nest(d + 1);
        });
        return;
      }
      int x = zero;
      if (fill == MadeFill::Copy) {
        jit::EInstr ld;
        ld.op = jit::EOp::Load;
        ld.array = src.array;
        ld.index = at;
        ld.type = rt::dtype_is_float(loop->arrays[src.array].dtype) ? jit::EType::Float : jit::EType::Int;
        ld.dst = x = loop->new_var(ld.type);
        emit(ld);
      }
      jit::EInstr st;
      st.op = jit::EOp::Store;
      st.array = a.array;
      st.index = at;
      st.a = x;
      st.type = loop->vars[x];
      emit(st);
    };
    nest(0);
    return a;
  }

  // A loop array shaped like array k, made once per loop (empty_like).
  int scratch_like(int k) {
    const VarPtr& of = array_vars[k];
    auto it = scratch_vars_.find(of.get());
    if (it == scratch_vars_.end()) it = scratch_vars_.emplace(of.get(), empty_like(of)).first;
    const Val s = from_trace(it->second, "a scratch array");
    loop->arrays[s.array].written = true;
    return s.array;
  }
  Val make_slice(std::vector<Val> b) {
    Val s{Val::K::Slice};
    s.items = std::move(b);
    if (s.items.size() == 2) s.items.push_back(Val{Val::K::None});
    for (const Val& v : s.items)
      if (v.k != Val::K::None && !is_index(v, *loop)) refuse("a slice bound that is " + kind_name(v));
    return s;
  }
  // obj[key], for every kind of key.
  Val subscript(const Val& obj, const Val& key) {
    if (obj.k == Val::K::Array && key.k == Val::K::Vec) return vec_gather(obj, key);
    if (obj.k == Val::K::Vec) {
      if (key.k == Val::K::Num) refuse("indexing an array slice (index the array itself)");
      refuse("slicing an array slice");
    }
    if (obj.k == Val::K::Array && is_view_key(obj, key)) return make_view(obj, key);
    refuse("indexing " + kind_name(obj) + " with " + kind_name(key));
  }

  // ---- calls of Python functions (Note [Calls in element loops]) -----------------------------------
  // Note [Calls in element loops]
  // A Python function the loop calls (`match(seq[i], seq[j])`, a helper written for Numba's
  // njit) is inlined: its bytecode is interpreted abstractly like the loop's own, its blocks in
  // order (its jumps must go forward: no loops in it), its locals its own, its arguments the
  // caller's values; each `return` hands its value to one variable and goes on after the call.
  // It must read the caller's globals (the module's own helpers), take plain positional
  // arguments (defaults filled in), close over nothing, and not raise through a handler; what
  // it calls is held to the loop's own rules. Calls nest a few deep.
  struct InlineCtx {
    PyCodeObject* code = nullptr;
    OwnedRef code_bytes;
    std::vector<Ins> ins;
    std::map<int, int> block_of;     // code unit of a block's start -> block
    std::vector<int> block_start;    // per block: its first code unit
    std::vector<int> preds;          // per block
    std::vector<int> ir;             // per block: its IR block
    std::vector<std::optional<State>> state;  // per block: what arrives (merged)
    int cont = -1;                   // the IR block after the call
    int result = -1;                 // the returned value's variable
    Val returned;                    // kinds of every return
  };
  PyCodeObject* code() const { return inl_ ? inl_->code : f_.code; }

  // The IR block an edge into callee block `t` with state `s` jumps to.
  int inline_edge(int t, State s) {
    InlineCtx& c = *inl_;
    if (t >= static_cast<int>(c.ir.size())) refuse("internal: a jump past a called function");
    if (c.preds[t] <= 1) {
      c.state[t] = std::move(s);
      return c.ir[t];
    }
    auto fresh_vars = [&](Val& v) {
      if (v.k == Val::K::Num && v.var >= 0) v.var = loop->new_var(loop->vars[v.var]);
      v.const_int.reset();
    };
    if (!c.state[t]) {
      State m = s;
      for (Val& v : m.locals) fresh_vars(v);
      for (Val& v : m.stack) fresh_vars(v);
      c.state[t] = std::move(m);
    }
    State& m = *c.state[t];
    if (m.stack.size() != s.stack.size()) refuse("the stack differs where paths meet in a called function");
    const int e = new_block();
    auto meet = [&](Val& h, const Val& v) {
      if (h.k == Val::K::Num && v.k == Val::K::Num) {
        if (h.var < 0 && v.var >= 0) {  // unbound on the path that came first
          h.var = loop->new_var(loop->vars[v.var]);
        }
        if (h.var >= 0 && v.var >= 0) {
          if (loop->vars[h.var] != loop->vars[v.var]) refuse("an int and a float meet in a called function");
          loop->blocks[e].instrs.push_back(mov(h.var, v.var));
        }
        if (h.var >= 0 && v.var < 0) h.kinds |= kUnbound;
        h.kinds |= v.kinds;
        if (h.lower && (!v.lower || *v.lower < *h.lower)) h.lower = v.lower;
        if (h.upper && (!v.upper || *v.upper > *h.upper)) h.upper = v.upper;
        if (v.kinds & kNpOther && h.other != v.other) refuse("two small NumPy int types meet in a called function");
        return;
      }
      if (!h.same(v)) refuse("different values meet in a called function");
    };
    for (size_t k = 0; k < m.locals.size(); ++k) meet(m.locals[k], s.locals[k]);
    for (size_t k = 0; k < m.stack.size(); ++k) meet(m.stack[k], s.stack[k]);
    jit::EInstr j = terminator(jit::EOp::Jump);
    j.target = c.ir[t];
    loop->blocks[e].instrs.push_back(j);
    return e;
  }
  int callee_block(int at) const {
    auto it = inl_->block_of.find(at);
    if (it == inl_->block_of.end()) refuse("internal: a jump into the middle of a called function's block");
    return it->second;
  }
  void inline_return(const Val& v) {
    InlineCtx& c = *inl_;
    if (v.k != Val::K::Num || (v.kinds & kUnbound)) refuse("a called function returns " + kind_name(v));
    if (c.result < 0) {
      c.result = loop->new_var(loop->vars[v.var]);
      c.returned = v;
      c.returned.var = c.result;
      c.returned.const_int.reset();
    } else {
      if (loop->vars[c.result] != loop->vars[v.var])
        refuse("a called function returns an int on one path and a float on another");
      if ((v.kinds & kNpOther) && c.returned.other != v.other) refuse("a called function returns two small int types");
      c.returned.kinds |= v.kinds;
      if (c.returned.lower && (!v.lower || *v.lower < *c.returned.lower)) c.returned.lower = v.lower;
      if (c.returned.upper && (!v.upper || *v.upper > *c.returned.upper)) c.returned.upper = v.upper;
    }
    emit(mov(c.result, v.var));
    emit_jump(c.cont);
  }
  // The inline-mode meaning of i (locals, jumps, returns); nullopt for what step() does alike.
  std::optional<bool> inline_step(const Ins& i, State& s) {
    const int arg = i.arg;
    auto local = [&](int slot) {
      const Val& v = s.locals[slot];
      if (v.k == Val::K::Num && (v.kinds & kUnbound)) refuse("a called function reads a local that may be unbound");
      return v;
    };
    auto jump = [&](int target) {
      if (target <= i.at) refuse("a loop in a called function");
      jit::EInstr j = terminator(jit::EOp::Jump);
      const int here = cur_;
      j.target = inline_edge(callee_block(target), std::move(s));
      loop->blocks[here].instrs.push_back(j);
      return true;
    };
    auto branch = [&](const Val& cond, bool jump_if, int target, State other) {
      if (target <= i.at) refuse("a loop in a called function");
      Val t = truth(cond);
      const int here = cur_;
      jit::EInstr br = terminator(jit::EOp::Branch);
      br.a = t.var;
      const int to_target = inline_edge(callee_block(target), s);
      const int to_next = inline_edge(callee_block(i.next), std::move(other));
      br.target = jump_if ? to_target : to_next;
      br.target2 = jump_if ? to_next : to_target;
      loop->blocks[here].instrs.push_back(br);
      return true;
    };
    switch (i.op) {
      case Op::LoadFast:
      case Op::LoadFastCheck:
        s.stack.push_back(local(arg));
        return false;
      case Op::LoadFastLoadFast:
        s.stack.push_back(local(arg >> 4));
        s.stack.push_back(local(arg & 15));
        return false;
      case Op::StoreFast:
        s.locals[arg] = pop(s);
        return false;
      case Op::StoreFastStoreFast:
        s.locals[arg >> 4] = pop(s);
        s.locals[arg & 15] = pop(s);
        return false;
      case Op::StoreFastLoadFast:
        s.locals[arg >> 4] = pop(s);
        s.stack.push_back(local(arg & 15));
        return false;
      case Op::ReturnValue:
        inline_return(pop(s));
        return true;
      case Op::ReturnConst:
        inline_return(python_constant(PyTuple_GET_ITEM(code()->co_consts, arg)));
        return true;
      case Op::JumpForward:
        return jump(jump_target(i));
      case Op::PopJumpIfFalse:
      case Op::PopJumpForwardIfFalse:
      case Op::PopJumpIfTrue:
      case Op::PopJumpForwardIfTrue: {
        Val c = pop(s);
        const bool jump_if = i.op == Op::PopJumpIfTrue || i.op == Op::PopJumpForwardIfTrue;
        State other = s;
        return branch(c, jump_if, jump_target(i), std::move(other));
      }
      case Op::PopJumpIfNone:
      case Op::PopJumpForwardIfNone:
      case Op::PopJumpIfNotNone:
      case Op::PopJumpForwardIfNotNone: {
        Val c = pop(s);
        const bool want_none = i.op == Op::PopJumpIfNone || i.op == Op::PopJumpForwardIfNone;
        return (c.k == Val::K::None) == want_none ? jump(jump_target(i)) : jump(i.next);
      }
      case Op::JumpIfFalseOrPop:
      case Op::JumpIfTrueOrPop: {
        if (s.stack.empty()) refuse("a called function pops what is not its own");
        const Val c = s.stack.back();
        State popped = s;
        popped.stack.pop_back();
        return branch(c, i.op == Op::JumpIfTrueOrPop, jump_target(i), std::move(popped));
      }
      case Op::JumpBackward:
      case Op::JumpBackwardNoInterrupt:
      case Op::PopJumpBackwardIfFalse:
      case Op::PopJumpBackwardIfTrue:
      case Op::PopJumpBackwardIfNone:
      case Op::PopJumpBackwardIfNotNone:
      case Op::GetIter:
      case Op::ForIter:
        refuse("a loop in a called function");
      default:
        return std::nullopt;
    }
  }
  Val inline_function(const FunctionVar& fv, std::vector<Val> args) {
    constexpr int kMaxDepth = 4, kMaxUnits = 600;
    if (inline_depth_ >= kMaxDepth) refuse("calls nested too deep in the loop");
    auto* co = reinterpret_cast<PyCodeObject*>(fv.code.get());
    const std::string name = PyUnicode_AsUTF8(co->co_name) ? PyUnicode_AsUTF8(co->co_name) : "?";
    if (co->co_flags & (CO_GENERATOR | CO_COROUTINE | CO_ASYNC_GENERATOR | CO_VARARGS | CO_VARKEYWORDS))
      refuse("a call of '" + name + "' (a generator, or *args/**kwargs)");
    if (co->co_kwonlyargcount != 0 || !fv.closure.empty() || fv.globals_base || fv.globals.get() != f_.globals.get())
      refuse("a call of '" + name + "' (keyword-only arguments, a closure, or other globals)");
    const int nargs = co->co_argcount;
    if (static_cast<int>(args.size()) > nargs) refuse("a call of '" + name + "' with too many arguments");
    const int missing = nargs - static_cast<int>(args.size());
    // Defaults: the trace's values, or a real function's own (constants).
    PyObject* real_defaults = fv.real && PyFunction_Check(fv.real.get()) ? PyFunction_GET_DEFAULTS(fv.real.get()) : nullptr;
    const int ndef = !fv.defaults.empty() ? static_cast<int>(fv.defaults.size())
                     : real_defaults     ? static_cast<int>(PyTuple_GET_SIZE(real_defaults))
                                         : 0;
    if (missing > ndef) refuse("a call of '" + name + "' with too few arguments");
    for (int k = ndef - missing; k < ndef; ++k) {
      if (!fv.defaults.empty()) {
        args.push_back(from_trace(fv.defaults[k], "a default of '" + name + "'"));
      } else {
        // Read through the function's source, so a new __defaults__ fails the guards.
        if (!fv.source) refuse("a call of '" + name + "' whose defaults cannot be guarded");
        VarPtr d = tx_.wrap(PyTuple_GET_ITEM(real_defaults, k), child_source(SourceKind::FuncDefault, fv.source, k));
        args.push_back(from_trace(d, "a default of '" + name + "'"));
      }
    }
    OwnedRef bytes = OwnedRef::steal(PyCode_GetCode(co));
    if (!bytes) {
      PyErr_Clear();
      refuse("internal: the code of '" + name + "'");
    }
    if (PyBytes_GET_SIZE(co->co_exceptiontable) > 0) refuse("a call of '" + name + "', which handles exceptions");
    // co_localsplusnames: locals, then cells and free variables (none here).
    if (co->co_ncellvars != 0 || co->co_nfreevars != 0) refuse("a call of '" + name + "', which has cells");
    const int nlocals = static_cast<int>(PyTuple_GET_SIZE(co->co_localsplusnames));
    InlineCtx c;
    c.code = co;
    c.code_bytes = bytes;
    const auto* units = reinterpret_cast<const uint16_t*>(PyBytes_AS_STRING(bytes.get()));
    const int n = static_cast<int>(PyBytes_GET_SIZE(bytes.get()) / 2);
    if (n > kMaxUnits) refuse("a call of '" + name + "', too long to inline");
    std::set<int> leaders{0};
    for (int at = 0; at < n;) {
      Ins x = decode(units, n, at);
      c.ins.push_back(x);
      if (int t = jump_target(x); t >= 0) {
        leaders.insert(t);
        leaders.insert(x.next);
      }
      if (unconditional(x)) leaders.insert(x.next);
      at = x.next;
    }
    for (int l : leaders)
      if (l < n) {
        c.block_of[l] = static_cast<int>(c.block_start.size());
        c.block_start.push_back(l);
      }
    const int nb = static_cast<int>(c.block_start.size());
    c.preds.assign(nb + 1, 0);
    c.preds[0] = 1;
    for (size_t k = 0; k < c.ins.size(); ++k) {
      const Ins& x = c.ins[k];
      const bool last = k + 1 == c.ins.size() || c.block_of.count(c.ins[k + 1].at);
      if (int t = jump_target(x); t >= 0 && c.block_of.count(t)) ++c.preds[c.block_of[t]];
      if (last && !unconditional(x) && k + 1 < c.ins.size()) ++c.preds[c.block_of[c.ins[k + 1].at]];
    }
    for (int b = 0; b < nb; ++b) c.ir.push_back(new_block());
    c.state.assign(nb, std::nullopt);
    c.cont = new_block();
    State entry;
    entry.locals.assign(nlocals, dead_local());
    for (size_t k = 0; k < args.size(); ++k) {
      if (args[k].k == Val::K::Null) refuse("internal: a NULL argument");
      entry.locals[k] = args[k];
    }
    InlineCtx* saved = inl_;
    inl_ = &c;
    ++inline_depth_;
    c.state[0] = std::move(entry);
    emit_jump(c.ir[0]);
    for (int b = 0; b < nb; ++b) {
      cur_ = c.ir[b];
      if (!c.state[b]) {  // no path reaches it
        emit(terminator(jit::EOp::Exit));
        continue;
      }
      State s = *c.state[b];
      for (Val& v : s.locals)
        if (v.k == Val::K::Num && v.var >= 0 && loop->vars[v.var] == jit::EType::Int) v.aff = fresh_symbol();
      const int end = b + 1 < nb ? c.block_start[b + 1] : n;
      bool ended = false;
      for (const Ins& x : c.ins) {
        if (x.at < c.block_start[b] || x.at >= end) continue;
        if (step(x, s)) {
          ended = true;
          break;
        }
      }
      if (!ended) {
        if (b + 1 >= nb) refuse("a called function runs off its end");
        jit::EInstr j = terminator(jit::EOp::Jump);
        const int here = cur_;
        j.target = inline_edge(b + 1, std::move(s));
        loop->blocks[here].instrs.push_back(j);
      }
    }
    inl_ = saved;
    --inline_depth_;
    if (c.result < 0) refuse("a called function that never returns");
    cur_ = c.cont;
    Val r = c.returned;
    r.aff = loop->vars[r.var] == jit::EType::Int ? fresh_symbol() : nullptr;
    return r;
  }

  // ---- one instruction; true when it ended the block ---------------------------------------------
  Val pop(State& s) {
    if (s.stack.empty()) refuse("the loop pops what was on the stack before it");
    Val v = std::move(s.stack.back());
    s.stack.pop_back();
    return v;
  }
  void push_with_null(State& s, Val v) {
    if (!kNullAboveCallable) s.stack.push_back(Val{Val::K::Null});
    s.stack.push_back(std::move(v));
    if (kNullAboveCallable) s.stack.push_back(Val{Val::K::Null});
  }

  void branch_on(State& s, const Val& cond, bool jump_if, int target, int fallthrough) {
    Val t = truth(cond);
    const int here = cur_;
    jit::EInstr br = terminator(jit::EOp::Branch);
    br.a = t.var;
    const int to_target = edge(here, block_id(target), s, true);
    const int to_next = edge(here, block_id(fallthrough), s, true);
    br.target = jump_if ? to_target : to_next;
    br.target2 = jump_if ? to_next : to_target;
    loop->blocks[here].instrs.push_back(br);
  }

  bool step(const Ins& i, State& s) {
    const int arg = i.arg;
    if (inl_) {
      if (std::optional<bool> ended = inline_step(i, s)) return *ended;
    } else if (auto vj = vjump_.find(i.at); vj != vjump_.end()) {  // Note [Copied tails]
      const int here = cur_;
      jit::EInstr j = terminator(jit::EOp::Jump);
      j.target = edge(here, block_id(vj->second), std::move(s), false);
      loop->blocks[here].instrs.push_back(j);
      return true;
    }
    switch (i.op) {
      case Op::Nop:
      case Op::Resume:
      case Op::Cache:
      case Op::Precall:
        return false;
      case Op::PopTop:
        pop(s);
        return false;
      case Op::PushNull:
        s.stack.push_back(Val{Val::K::Null});
        return false;
      case Op::Copy:
        if (arg > static_cast<int>(s.stack.size())) refuse("COPY below the loop's stack");
        s.stack.push_back(s.stack[s.stack.size() - arg]);
        return false;
      case Op::Swap:
        if (arg > static_cast<int>(s.stack.size())) refuse("SWAP below the loop's stack");
        std::swap(s.stack.back(), s.stack[s.stack.size() - arg]);
        return false;
      case Op::LoadConst:
        s.stack.push_back(python_constant(PyTuple_GET_ITEM(code()->co_consts, arg)));
        return false;
      case Op::LoadFast:
      case Op::LoadFastCheck:
        s.stack.push_back(load_local(s, arg));
        return false;
      case Op::LoadFastLoadFast:
        s.stack.push_back(load_local(s, arg >> 4));
        s.stack.push_back(load_local(s, arg & 15));
        return false;
      case Op::StoreFast:
        store_local(s, arg, pop(s));
        return false;
      case Op::StoreFastStoreFast:
        store_local(s, arg >> 4, pop(s));
        store_local(s, arg & 15, pop(s));
        return false;
      case Op::StoreFastLoadFast:
        store_local(s, arg >> 4, pop(s));
        s.stack.push_back(load_local(s, arg & 15));
        return false;
      case Op::LoadGlobal: {
        PyObject* name = PyTuple_GET_ITEM(code()->co_names, arg >> 1);
        Val v = from_trace(access_.load_global(name), std::string("global '") + PyUnicode_AsUTF8(name) + "'");
        if (arg & 1)
          push_with_null(s, std::move(v));
        else
          s.stack.push_back(std::move(v));
        return false;
      }
      case Op::LoadAttr:
      case Op::LoadMethod: {
        const bool method = i.op == Op::LoadMethod || (kLoadAttrHasMethodBit && (arg & 1));
        PyObject* name = PyTuple_GET_ITEM(code()->co_names, kLoadAttrHasMethodBit ? arg >> 1 : arg);
        Val obj = pop(s);
        Val r;
        const std::string n = PyUnicode_AsUTF8(name);
        if (obj.k == Val::K::Module) {
          r = from_trace(tx_.load_attr(obj.obj, name), "attribute " + n);
        } else if (obj.k == Val::K::Array && n == "shape" && obj.prefix.empty()) {
          r = Val{Val::K::Shape};
          r.array = obj.array;
        } else if (obj.k == Val::K::Array && n == "ndim" && obj.prefix.empty()) {
          r = const_int(loop->arrays[obj.array].rank);
        } else if (obj.k == Val::K::Array && obj.prefix.empty() && n == "copy" && method) {
          r = Val{Val::K::Func};
          r.method = kMethodCopy;
          r.items.push_back(obj);
        } else if ((obj.k == Val::K::Vec || obj.k == Val::K::Array) && (n == "sum" || n == "dot") && method) {
          r = Val{Val::K::Func};
          r.method = n == "sum" ? kMethodSum : kMethodDot;
          r.items.push_back(*as_vec(obj));
        } else {
          refuse("attribute '" + n + "' of " + kind_name(obj));
        }
        if (method)
          push_with_null(s, std::move(r));
        else
          s.stack.push_back(std::move(r));
        return false;
      }
      case Op::BinarySubscr: {
        Val key = pop(s), obj = pop(s);
        if (obj.k == Val::K::Array && key.k == Val::K::Num &&
            loop->arrays[obj.array].rank - static_cast<int>(obj.prefix.size()) > 1) {
          // A row, indexed again at once (A[i][j]): its index joins the element's.
          if (loop->vars[key.var] != jit::EType::Int || (key.kinds & (kBool | kNpBool)))
            refuse("an index that is " + kind_name(key));
          Val row = obj;
          row.prefix.push_back(key.var);
          row.prefix_aff.push_back(key.aff);
          row.prefix_nonneg.push_back(key.lower && *key.lower >= 0);
          s.stack.push_back(row);
        } else if (obj.k == Val::K::Vec || key.k == Val::K::Vec ||
                   (obj.k == Val::K::Array && is_view_key(obj, key))) {  // Note [Slices in element loops]
          s.stack.push_back(subscript(obj, key));
        } else if (obj.k == Val::K::Array) {
          s.stack.push_back(load(obj, key));
        } else if ((obj.k == Val::K::Shape || obj.k == Val::K::Tuple) && key.k == Val::K::Num && key.const_int) {
          if (obj.k == Val::K::Shape) {
            s.stack.push_back(dim(obj.array, static_cast<int>(*key.const_int)));
          } else {
            int64_t k = *key.const_int;
            if (k < 0) k += static_cast<int64_t>(obj.items.size());
            if (k < 0 || k >= static_cast<int64_t>(obj.items.size())) refuse("tuple index out of range");
            s.stack.push_back(obj.items[k]);
          }
        } else {
          refuse("indexing " + kind_name(obj) + " with " + kind_name(key));
        }
        return false;
      }
      case Op::StoreSubscr: {
        Val key = pop(s), obj = pop(s), value = pop(s);
        if (obj.k != Val::K::Array) refuse("item assignment into " + kind_name(obj));
        if (key.k == Val::K::Vec) refuse("assignment through an index array");
        if (is_view_key(obj, key))
          vec_store(obj, key, value);
        else
          store(obj, key, value);
        return false;
      }
      case Op::BuildSlice: {
        if (arg != 2 && arg != 3) refuse("BUILD_SLICE of " + std::to_string(arg));
        std::vector<Val> parts(s.stack.end() - arg, s.stack.end());
        s.stack.resize(s.stack.size() - arg);
        s.stack.push_back(make_slice(std::move(parts)));
        return false;
      }
      case Op::BinarySlice: {  // (container, start, stop -- value) 3.12+
        Val stop = pop(s), start = pop(s), obj = pop(s);
        s.stack.push_back(subscript(obj, make_slice({start, stop})));
        return false;
      }
      case Op::StoreSlice: {  // (value, container, start, stop --) 3.12+
        Val stop = pop(s), start = pop(s), obj = pop(s), value = pop(s);
        if (obj.k != Val::K::Array) refuse("slice assignment into " + kind_name(obj));
        vec_store(obj, make_slice({start, stop}), value);
        return false;
      }
      case Op::BinaryOp: {
        Val b = pop(s), a = pop(s);
        const bool vec = a.k == Val::K::Vec || b.k == Val::K::Vec || a.k == Val::K::Array || b.k == Val::K::Array;
        if (vec && arg % kNbInplace == kNbMatrixMultiply) {
          if (arg >= kNbInplace) refuse("@= in a loop");
          s.stack.push_back(vec_reduce(a, &b, rt::ShapeUse::Matmul));
        } else if (vec) {
          s.stack.push_back(vec_binary(arg, a, b));
        } else {
          s.stack.push_back(binary(arg, a, b));
        }
        return false;
      }
      case Op::CompareOp: {
        Val b = pop(s), a = pop(s);
        const int op = arg >> kCompareOpShift;
        if (op < Py_LT || op > Py_GE) refuse("comparison operator");
        Val r = compare(op, a, b);
        s.stack.push_back(r);
        return false;
      }
      case Op::UnaryNegative: {
        Val a = pop(s);
        s.stack.push_back(a.k == Val::K::Vec || a.k == Val::K::Array ? vec_neg(a) : unary(jit::EOp::Neg, a, "unary -"));
        return false;
      }
      case Op::UnaryInvert:
        s.stack.push_back(unary(jit::EOp::Invert, pop(s), "~"));
        return false;
      case Op::UnaryPositive: {
        Val a = pop(s);
        if (a.k != Val::K::Num) refuse("unary + of " + kind_name(a));
        s.stack.push_back(a);
        return false;
      }
      case Op::UnaryNot: {
        Val t = truth(pop(s));
        jit::EInstr n;
        n.op = jit::EOp::Not;
        n.type = jit::EType::Int;
        n.a = t.var;
        Val r = num(kBool, jit::EType::Int);
        n.dst = r.var;
        emit(n);
        s.stack.push_back(r);
        return false;
      }
      case Op::ToBool:
        s.stack.push_back(truth(pop(s)));
        return false;
      case Op::BuildTuple: {
        if (arg > static_cast<int>(s.stack.size())) refuse("BUILD_TUPLE below the loop's stack");
        Val t{Val::K::Tuple};
        t.items.assign(s.stack.end() - arg, s.stack.end());
        s.stack.resize(s.stack.size() - arg);
        s.stack.push_back(std::move(t));
        return false;
      }
      case Op::UnpackSequence: {
        Val t = pop(s);
        std::vector<Val> items;
        if (t.k == Val::K::Tuple) {
          items = t.items;
        } else if (t.k == Val::K::Shape) {
          for (int d = 0; d < loop->arrays[t.array].rank; ++d) items.push_back(dim(t.array, d));
        } else {
          refuse("unpacking " + kind_name(t));
        }
        if (static_cast<int>(items.size()) != arg) refuse("unpacking a sequence of another length");
        for (auto it = items.rbegin(); it != items.rend(); ++it) s.stack.push_back(*it);
        return false;
      }
      case Op::Call: {
        if (arg > static_cast<int>(s.stack.size())) refuse("CALL below the loop's stack");
        std::vector<Val> args(s.stack.end() - arg, s.stack.end());
        s.stack.resize(s.stack.size() - arg);
        Val upper = pop(s), lower = pop(s);
        Val fn;
        if (lower.k == Val::K::Null) {
          fn = upper;
        } else {
          fn = lower;
          if (upper.k != Val::K::Null) args.insert(args.begin(), upper);
        }
        s.stack.push_back(call(fn, std::move(args)));
        return false;
      }
      case Op::GetIter: {
        Val r = pop(s);
        if (r.k == Val::K::Array) r = over_array(r);
        if (r.k != Val::K::Range) refuse("iterating over " + kind_name(r));
        r.k = Val::K::Iter;
        s.stack.push_back(r);
        return false;
      }
      case Op::ForIter: {
        if (s.stack.empty() || s.stack.back().k != Val::K::Iter) refuse("FOR_ITER on " + kind_name(s.stack.back()));
        const Val it = s.stack.back();
        jit::EInstr c;
        c.op = jit::EOp::Cmp;
        c.type = jit::EType::Int;
        c.cond = it.step > 0 ? jit::ECond::Lt : jit::ECond::Gt;
        c.a = it.var;
        c.b = it.stop;
        c.dst = loop->new_var(jit::EType::Int);
        emit(c);
        const int here = cur_;
        // Exhausted: the iterator is popped, and the loop's exit follows.
        State done = s;
        done.stack.pop_back();
        const int to_exit = edge(here, block_id(jump_target(i)), std::move(done), true);
        // Another value: taken from the iterator in a block of its own.
        const int take = static_cast<int>(loop->blocks.size());
        loop->blocks.emplace_back();
        cur_ = take;
        Val v = num(kInt, jit::EType::Int);
        v.lower = it.lower;
        emit(mov(v.var, it.var));
        jit::EInstr inc;
        inc.op = jit::EOp::Add;
        inc.type = jit::EType::Int;
        inc.a = it.var;
        inc.b = it.step_var >= 0 ? it.step_var : const_int(it.step).var;
        inc.dst = it.var;
        emit(inc);
        State body = s;
        if (it.items.empty()) {
          body.stack.push_back(v);
        } else {  // over an array: its element (or row) v
          const Val& arr = it.items[0];
          if (static_cast<int>(arr.prefix.size()) + 1 < loop->arrays[arr.array].rank) {
            Val row = arr;
            row.prefix.push_back(v.var);
            row.prefix_aff.push_back(v.aff);
            row.prefix_nonneg.push_back(1);
            body.stack.push_back(row);
          } else {
            body.stack.push_back(load(arr, v));
          }
        }
        jit::EInstr j = terminator(jit::EOp::Jump);
        j.target = edge(take, block_id(i.next), std::move(body), false);
        loop->blocks[take].instrs.push_back(j);
        jit::EInstr br = terminator(jit::EOp::Branch);
        br.a = c.dst;
        br.target = take;
        br.target2 = to_exit;
        loop->blocks[here].instrs.push_back(br);
        return true;
      }
      case Op::JumpForward:
      case Op::JumpBackward:
      case Op::JumpBackwardNoInterrupt: {
        const int here = cur_;
        jit::EInstr j = terminator(jit::EOp::Jump);
        j.target = edge(here, block_id(jump_target(i)), std::move(s), false);
        loop->blocks[here].instrs.push_back(j);
        return true;
      }
      case Op::PopJumpIfFalse:
      case Op::PopJumpForwardIfFalse:
      case Op::PopJumpBackwardIfFalse:
      case Op::PopJumpIfTrue:
      case Op::PopJumpForwardIfTrue:
      case Op::PopJumpBackwardIfTrue: {
        Val c = pop(s);
        const bool jump_if =
            i.op == Op::PopJumpIfTrue || i.op == Op::PopJumpForwardIfTrue || i.op == Op::PopJumpBackwardIfTrue;
        branch_on(s, c, jump_if, jump_target(i), i.next);
        return true;
      }
      case Op::PopJumpIfNone:
      case Op::PopJumpForwardIfNone:
      case Op::PopJumpBackwardIfNone:
      case Op::PopJumpIfNotNone:
      case Op::PopJumpForwardIfNotNone:
      case Op::PopJumpBackwardIfNotNone: {
        Val c = pop(s);
        const bool is_none = c.k == Val::K::None;
        const bool want_none =
            i.op == Op::PopJumpIfNone || i.op == Op::PopJumpForwardIfNone || i.op == Op::PopJumpBackwardIfNone;
        const int here = cur_;
        jit::EInstr j = terminator(jit::EOp::Jump);
        j.target = edge(here, block_id(is_none == want_none ? jump_target(i) : i.next), std::move(s), false);
        loop->blocks[here].instrs.push_back(j);
        return true;
      }
      case Op::JumpIfFalseOrPop:
      case Op::JumpIfTrueOrPop: {
        // (cond -- cond if jumping): the value stays on the jumping side only.
        if (s.stack.empty()) refuse("the loop pops what was on the stack before it");
        Val t = truth(s.stack.back());
        const int here = cur_;
        State popped = s;
        popped.stack.pop_back();
        const int to_target = edge(here, block_id(jump_target(i)), s, true);
        const int to_next = edge(here, block_id(i.next), std::move(popped), true);
        jit::EInstr br = terminator(jit::EOp::Branch);
        br.a = t.var;
        const bool jump_if = i.op == Op::JumpIfTrueOrPop;
        br.target = jump_if ? to_target : to_next;
        br.target2 = jump_if ? to_next : to_target;
        loop->blocks[here].instrs.push_back(br);
        return true;
      }
      default: {
        refuse("instruction " + std::to_string(i.raw) + " (" + opcode_name(i.raw) + ") in the loop");
      }
    }
  }

  static std::string opcode_name(int raw) {
    OwnedRef dis = OwnedRef::steal(PyImport_ImportModule("opcode"));
    if (dis) {
      OwnedRef names = OwnedRef::steal(PyObject_GetAttrString(dis.get(), "opname"));
      if (names && PyList_Check(names.get()) && raw < PyList_GET_SIZE(names.get()))
        if (const char* s = PyUnicode_AsUTF8(PyList_GET_ITEM(names.get(), raw))) return s;
    }
    PyErr_Clear();
    return "?";
  }

  // ---- results ------------------------------------------------------------------------------------
  // Whether the code after the loop loads locals and constants (into a tuple) and returns them.
  bool only_returned_after() const {
    for (int at = exit_; at < f_.num_instrs;) {
      const Ins i = decode(f_.instrs, f_.num_instrs, at);
      switch (i.op) {
        case Op::LoadFast: case Op::LoadFastCheck: case Op::LoadFastLoadFast: case Op::LoadConst:
        case Op::BuildTuple: case Op::Nop: case Op::Cache: case Op::ExtendedArg:
          at = i.next;
          continue;
        case Op::ReturnValue: case Op::ReturnConst: return true;
        default: return false;
      }
    }
    return false;
  }

  // The loop's results; false when a local needs a kind tag first (the pass is made again).
  bool finish() {
    if (!exit_state_) refuse("the loop never ends (no path reaches its end)");
    Liveness live(f_);
    loop->results.clear();
    loop->tag_of.clear();
    results.clear();
    for (int slot : stored_) {
      if (!live.live_at(slot, exit_)) continue;
      const Val& v = exit_state_->locals[slot];
      if (v.k != Val::K::Num) refuse("local '" + local_name(slot) + "' is read after the loop and holds " + kind_name(v));
      if (v.kinds & kUnbound)
        refuse("local '" + local_name(slot) + "' is read after the loop, which may not assign it");
      const uint16_t k = v.kinds;
      // Several kinds, or an int held as a float: the kind travels in a tag.
      const bool mixed =
          !(k & ~(kInt | kFloat | kNpInt | kNpFloat)) && ((k & (k - 1)) || loop->vars[v.var] != machine(k, v.other));
      if (k != kInt && k != kFloat && k != kNpInt && k != kNpFloat && k != kNpBool && !mixed)
        refuse("local '" + local_name(slot) + "' is read after the loop and may be " + kinds_text(k));
      // NumPy 2 promotes a NumPy scalar strongly and a Python number weakly: the trace, which goes
      // on with a Python number (Note [Kind tags]), would give the code after the loop NumPy 1's
      // dtypes where CPython has a numpy.float64.
      // Code after the loop that only returns locals (`return s`, `return s, i`) hands back the
      // object itself, made by its tag: nothing is promoted.
      const NumPyHandles* np = numpy_handles();
      if (mixed && (k & kNumpyKinds) && (k & ~kNumpyKinds) && (!np || np->major >= 2) && !only_returned_after())
        refuse("local '" + local_name(slot) + "' is read after the loop and may be " + kinds_text(k) +
               ", which NumPy 2 promotes differently");
      if (mixed && !tagged_.count(slot)) {
        tagged_.insert(slot);  // Note [Kind tags]
        return false;
      }
      loop->results.push_back(v.var);
      results.push_back({slot, k, v.other, mixed ? static_cast<int>(loop->results.size()) : -1});
      loop->tag_of.push_back(results.back().tag);
      if (mixed) {
        loop->results.push_back(tag_var_.at(slot));
        loop->tag_of.push_back(-1);
      }
    }
    if (Status st = loop->verify(); !st.is_ok()) refuse("internal: " + st.message());
    return true;
  }

  Tracer& tx_;
  TraceFrame& f_;
  int gi_;
  std::vector<VarPtr> bounds_;
  const Tracer::LoopAccess& access_;
  VarPtr over_;  // `for x in over_`: the array iterated, else null (a range)
  VarPtr cond_;  // a `while` loop: its first test's value (Note [While loops])

  std::vector<Ins> ins_;
  std::map<int, int> index_;  // code unit -> ins_ index
  int exit_ = -1;
  std::vector<int> block_start_;
  std::map<int, int> block_of_;
  std::vector<int> preds_;
  std::set<int> stored_;
  std::map<int, int> vjump_;  // Note [Copied tails]: code unit -> where the copied tail came from

  // Per pass.
  std::vector<std::optional<State>> pending_;
  std::vector<bool> processed_;
  std::vector<int> ir_block_;
  std::map<int, Val> outer_;
  std::map<int, int> slot_var_;
  std::optional<State> exit_state_;
  int cur_ = 0;  // the IR block being emitted
  int at_ = 0;
  bool restart_ = false;
  std::map<int, State> seed_;   // kinds a block's entry must allow (kept across passes)
  std::set<int> tagged_;        // locals with a kind tag (kept across passes)
  std::set<int> widened_;       // int locals held as floats (Note [Widened locals]; kept across passes)
  std::map<int, int> tag_var_;  // per pass: their tags' variables
  std::map<const Var*, VarPtr> scratch_vars_;  // scratch_like's arrays (kept across passes)
  // Note [Arrays made in loops]: per (array copied, n-th made in a pass), its array (kept across
  // passes); which loop arrays they are in this pass, and how many were made in it.
  std::map<std::pair<const Var*, int>, VarPtr> made_vars_;
  std::set<int> made_arrays_;
  int arrays_made_ = 0;
  InlineCtx* inl_ = nullptr;               // the function being inlined (Note [Calls in element loops])
  int inline_depth_ = 0;
  int64_t next_symbol_ = 0;                // per pass: Affine symbols
  std::map<int64_t, APtr> stable_symbols_;  // per pass: parameters' and sizes'
  std::map<std::string, APtr> length_keys_;  // per pass: views' (length_key)
};

}  // namespace

namespace {

// Note [Short loops that branch]
// A loop over a constant range of at most kUnrolledTrips trips is unrolled: each trip's
// whole-array statements join one graph, with the loop variable a constant in each. Unrolled, an
// `if` on an element (`for i in range(10): if x[i] > 0.5: ...`) is a branch on data: a graph break
// that sends the whole loop to CPython. So a short loop whose body branches (any conditional jump
// before its exit: if, while, and/or, break under a condition) is offered to the element-loop
// compiler like a long one; what it refuses (whole-array statements on 2-d arrays, ...) is
// unrolled as before.
constexpr int64_t kUnrolledTrips = 16;

// Whether the `for` loop whose GET_ITER is at code unit `get_iter` of `f` has a conditional jump
// in its body.
bool loop_body_branches(const TraceFrame& f, int get_iter) {
  const uint16_t* code = f.instrs;
  Ins it = decode(code, f.num_instrs, get_iter);
  if (it.next >= f.num_instrs) return false;
  const Ins head = decode(code, f.num_instrs, it.next);
  if (head.op != Op::ForIter) return false;
  const int exit = jump_target(head);
  for (int at = head.next; at < exit && at < f.num_instrs;) {
    const Ins i = decode(code, f.num_instrs, at);
    if (jump_target(i) >= 0 && !unconditional(i) && i.op != Op::ForIter) return true;
    at = i.next;
  }
  return false;
}

}  // namespace

VarPtr Tracer::pending_range_for(const std::vector<VarPtr>& args) {
  if (!cfg_.element_loops || in_body() || !current_ || args.empty() || args.size() > 3) return nullptr;
  if (out_.array_kind != ArrayKind::None && out_.array_kind != ArrayKind::NumPy) return nullptr;
  if (under_handler()) return nullptr;  // what the loop raises must meet the handler: CPython runs it
  const TraceFrame& f = *current_;
  if (f.ip >= f.num_instrs || (f.instrs[f.ip] & 0xff) != GET_ITER) return nullptr;
  bool runtime = false;
  OwnedRef values = OwnedRef::steal(PyTuple_New(static_cast<Py_ssize_t>(args.size())));
  for (size_t k = 0; k < args.size(); ++k) {
    PyObject* x = nullptr;  // borrowed
    if (args[k]->kind == VarKind::Const) {
      x = const_value(args[k]);
    } else if (args[k]->kind == VarKind::Scalar) {
      auto* s = as<ScalarVar>(args[k]);
      bool carried = s->loop_carried;
      for (auto& d : s->deps) carried = carried || d->loop_carried;
      if (carried) return nullptr;
      x = s->hint.get();
      runtime = true;
    }
    if (!x || !PyLong_CheckExact(x)) return nullptr;
    PyTuple_SET_ITEM(values.get(), static_cast<Py_ssize_t>(k), Py_NewRef(x));
  }
  OwnedRef r = OwnedRef::steal(PyObject_Call(reinterpret_cast<PyObject*>(&PyRange_Type), values.get(), nullptr));
  if (!r) {
    PyErr_Clear();
    return nullptr;
  }
  const Py_ssize_t trips = PyObject_Length(r.get());
  if (trips < 0) PyErr_Clear();
  if (!runtime && trips >= 0 && trips <= kUnrolledTrips && !loop_body_branches(f, f.ip)) return nullptr;
  VarPtr v = wrap_const(r.get());
  pending_range_ = PendingRange{r, args};
  return v;
}

// Note [While loops]
// `while cond:` compiles (3.11-3.13) to a first test, a conditional jump forward to the code after
// the loop, then the body, which ends in a jump back to its own start (conditional on 3.11, after
// the test again on 3.12+). Reached with the first test's value popped, such a loop is offered to
// the element-loop compiler whole, as a `for` is at its GET_ITER: the region is the first test up
// to where it jumps, the value the entry's stack. So a loop that runs until its data says so
// (`while err > tol:`), a branch on data at every trip when unrolled, is one Loop node; what the
// compiler refuses is traced as before.
bool Tracer::offers_while_loop(const TraceFrame& f) {
  if (!cfg_.element_loops || in_body() || under_handler()) return false;
  if (out_.array_kind != ArrayKind::None && out_.array_kind != ArrayKind::NumPy) return false;
  const Ins test = decode(f.instrs, f.num_instrs, f.cur_offset);
  const int exit = jump_target(test);
  if (exit <= test.next || unconditional(test) || exit > f.num_instrs) return false;
  Ins last;
  for (int at = test.next; at < exit;) {
    last = decode(f.instrs, f.num_instrs, at);
    at = last.next;
  }
  return last.next == exit && jump_target(last) == test.next;
}

bool Tracer::offers_array_loop(const VarPtr& v) {
  if (!cfg_.element_loops || in_body() || !current_ || !v || v->kind != VarKind::Tensor) return false;
  if (out_.array_kind != ArrayKind::None && out_.array_kind != ArrayKind::NumPy) return false;
  if (under_handler()) return false;
  const jit::TensorMeta& m = meta(v);
  if (m.rank() == 0 || m.device.type != rt::DeviceType::CPU || m.scalar_object) return false;
  return !m.shape[0].is_const() || m.shape[0].const_value() > kUnrolledTrips ||
         loop_body_branches(*current_, current_->cur_offset);
}

int Tracer::compile_element_loop(TraceFrame& f, int get_iter_at, const std::vector<VarPtr>& bounds,
                                 const LoopAccess& access, std::string* why, const VarPtr& over_array,
                                 const VarPtr& while_cond) {
  if (out_.device.type != rt::DeviceType::CPU) {
    *why = "the graph runs on a device";
    return -1;
  }
  LoopCompiler c(*this, f, get_iter_at, bounds, access, over_array, while_cond);
  int exit = -1;
  try {
    exit = c.run();
  } catch (const Refused& r) {
    *why = r.why;
    return -1;
  } catch (const GraphBreak& b) {
    if (PyErr_Occurred()) PyErr_Clear();
    *why = b.reason;
    return -1;
  }
  if (PyErr_Occurred()) PyErr_Clear();
  const jit::ElementLoop& L = *c.loop;
  if (!L.arrays.empty() && out_.array_kind != ArrayKind::NumPy) {
    *why = "the loop's arrays are not NumPy arrays (their elements are other objects)";
    return -1;
  }
  // Arrays written through one name and read through another that shares its memory.
  auto related = [&](const VarPtr& a, const VarPtr& b) {
    for (const Var* x = a.get(); x;
         x = x->kind == VarKind::Tensor ? static_cast<const TensorVar*>(x)->base.get() : nullptr)
      for (const Var* y = b.get(); y;
           y = y->kind == VarKind::Tensor ? static_cast<const TensorVar*>(y)->base.get() : nullptr)
        if (x == y) return true;
    return false;
  };
  try {
    for (size_t k = 0; k < L.arrays.size(); ++k) {
      if (!L.arrays[k].written) continue;
      for (size_t j = 0; j < L.arrays.size(); ++j)
        if (j != k && related(c.array_vars[k], c.array_vars[j])) {
          *why = "the loop writes an array that shares memory with another array it reads";
          return -1;
        }
      if (as<TensorVar>(c.array_vars[k])->has_live_views()) {
        *why = "the loop writes an array that has views";
        return -1;
      }
      check_assignable(c.array_vars[k], "a write in a compiled loop");
    }
  } catch (const GraphBreak& b) {
    if (PyErr_Occurred()) PyErr_Clear();
    *why = b.reason;
    return -1;
  }
  // The node and its results.
  std::vector<jit::Arg> args;
  for (const VarPtr& v : c.array_vars) args.push_back(to_arg(v));
  for (const VarPtr& v : c.param_vars) args.push_back(to_arg(v));
  jit::OpAttrs attrs;
  attrs.element_loop = c.loop;
  jit::TensorMeta tuple;
  tuple.kind = jit::ValueKind::Object;
  const int node =
      out_.graph.add_call(jit::OpKind::Loop, std::move(attrs), "framejit.loop", std::move(args), {}, tuple);
  int k = 0;
  for (size_t a = 0; a < L.arrays.size(); ++a) {
    if (!L.arrays[a].written) continue;
    jit::TensorMeta m = meta(c.array_vars[a]);
    const int r =
        out_.graph.add_call(jit::OpKind::Extern, {}, "getitem", {jit::Arg::node(node), jit::Arg::integer(k++)}, {}, m);
    assign_array(c.array_vars[a], r, "a write in a compiled loop");
  }
  for (const auto& res : c.results) {
    jit::TensorMeta m;
    VarPtr v;
    const bool np = (res.kinds & kNumpyKinds) && res.tag < 0;  // Note [Kind tags]: a Python number
    m.dtype = (res.kinds & (kFloat | kNpFloat)) ? rt::DType::Float64
              : (res.kinds & (kBool | kNpBool)) ? rt::DType::Bool
                                                : rt::DType::Int64;
    if (np) {
      m.kind = jit::ValueKind::Tensor;
      m.scalar_object = true;
    } else {
      m.kind = jit::ValueKind::Scalar;
    }
    const int r =
        out_.graph.add_call(jit::OpKind::Extern, {}, "getitem", {jit::Arg::node(node), jit::Arg::integer(k++)}, {}, m);
    if (np) {
      v = std::make_shared<TensorVar>(r);
    } else {
      OwnedRef hint = OwnedRef::steal(m.dtype == rt::DType::Float64 ? PyFloat_FromDouble(0.0)
                                      : m.dtype == rt::DType::Bool  ? Py_NewRef(Py_False)
                                                                    : PyLong_FromLong(0));
      auto s = std::make_shared<ScalarVar>(r, std::move(hint));
      s->loop_carried = true;  // Note [Loop-carried numbers]: no trace-time value
      v = std::move(s);
    }
    v->scope = out_.scope();
    if (res.tag >= 0) ++k;  // the tag: the loop's step reads it
    f.locals[res.slot] = std::move(v);
    if (f.is_root) f.lazy_args[res.slot] = false;
  }
  out_.saw_tensor = true;
  if (rt::log_enabled(rt::LogTopic::Graph))
    rt::log_write(rt::LogTopic::Graph, "compiled loop at " + location() + ":\n" + L.to_string());
  return exit;
}

}  // namespace framejit::frontend
