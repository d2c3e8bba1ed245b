// element_loop_codegen.cpp — asmjit code generation for element loops (scalar SSE2, x86-64 baseline;
// some inner loops in AVX2 / AVX-512 vectors).
#include "jit/x86/element_loop_codegen.h"

#include <asmjit/x86.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <tuple>
#include <utility>
#include <vector>

#include "jit/x86/body_emitter_p.h"
#include "runtime/element_loop_call.h"

namespace framejit::jit::x86 {

namespace {

using namespace detail;
using rt::ElementLoopCall;
using rt::LoopError;
using CC = ax::CondCode;

// Note [Element loop code]
// A kernel is `int32_t f(rt::ElementLoopCall*)`. The loop is first rewritten by
// optimize_element_loop (Note [Element loop optimization] in jit/ir/element_loop.cpp). Every loop
// variable is then one virtual register (a Gp for Int, an Xmm for Float) and every block one
// label, so the register allocator sees the loop's own control-flow graph and keeps loop-carried
// variables in registers across the back edges. The entry loads what the blocks use once: each
// array's data pointer, its sizes and byte strides, and the parameters.
//
// A variable whose only assignment is a Const that comes before all its reads
// (element_loop_constants) gets no register: its reads are immediates where x86 takes one (add,
// sub, and, or, xor, cmp and imul take an imm32, a compare with 0 is `test`, a shift by a constant
// count needs no range check), a RIP-relative constant for a float operand, else a register loaded
// just before the instruction.
//
// Blocks are laid out greedily from the entry, each followed by a successor not yet placed: the
// one inside the innermost loop of the block when only one is (a loop's body after its header,
// the way round the loop after a `break` test), else the branch's true target, with the condition
// inverted to fall through. A jump back to a loop header that only tests the loop condition
// repeats that test instead, so each iteration takes one branch. A branch whose arms are a few
// instructions that cannot fail, and that meet again at one block, computes both arms into fresh
// registers and picks the Int variables they assign with cmov (if-conversion: no mispredictions).
//
// Everything that leaves the common path is emitted after the last block (the "cold" code):
// negative indices (wrapped, then checked again), every error exit, the divisor special cases of
// integer floor division, the NaN checks of ToInt and math calls. The hot path of a load is
// then one unsigned compare and a not-taken branch per axis, and of checked arithmetic one `jo`.
// An index variable that is never negative (element_loop_nonnegative) has no wrapping path at
// all. An error stops the loop at once: no result is written, and a variable clobbered by the
// failing instruction is never read again, so checked operations may compute straight into their
// dst. Along an extended block (a block and the successors only it leads to), an index checked
// for an array axis, its byte offset, and the address of a row are computed once and reused while
// the index variables keep their values.
//
// Addresses. All blocks are emitted twice: once for arrays whose last axis is contiguous (its
// stride the itemsize, tested at the entry), where an element is [row + index * itemsize], and
// once for any strides, [row + index * stride]. A loop's preheader (the one block outside it that
// leads to its header) computes the rows whose index variables the loop does not assign, with no
// checks: a negative index is wrapped with cmov as a valid one would be, and an invalid one gives
// an address nobody uses, since the loop still checks each index where it uses it.
//
// Versions. An innermost loop whose header only tests `counter < bound` (counter stepped by a
// positive constant once per iteration, bound not assigned in the loop) is emitted a second time without the index
// checks that cannot fail once they pass at the preheader: those of indices the loop does not
// assign (in range now, so on every iteration), and those of the counter plus a constant c (a
// variable the loop only assigns counter + c), in range on every iteration if counter + c >= 0
// at the preheader and bound + c <= the size. The preheader tests these and goes to that version,
// or to the one with every check (which then raises where the loop would). Exits from either
// version go to the same blocks. In that version, a row whose index variables are the counter and
// variables the loop does not assign (A[k, j] for counter k) is an induction pointer: computed
// after the preheader's tests, stepped by step * stride where the counter steps (no imul per
// element). And an element of an array the loop does not store into, at indices it does not
// assign (`a[i - 1]` in a loop over j), is loaded once there (plan_invariant_loads).
//
// Floats compare with ucomisd, which reports "unordered" (a NaN operand) as ZF = PF = CF = 1:
// a < b is `ucomisd b, a; ja`, a <= b `jae` (CF = 0 excludes NaN), a == b is ZF = 1 with PF = 0
// and a != b ZF = 0 or PF = 1. A Branch on a Cmp defined just before it, and read nowhere after
// the branch, jumps on the flags directly.

// Note [Vectorized inner loops]
// With AVX2 or AVX-512 (host_isa), an innermost loop's version without checks may first run W
// iterations at a time (W = 4 doubles in a ymm, 8 in a zmm) while counter + W <= bound, then fall
// into that version, which runs the rest from the counter's new value. It is NumPy's slice
// statement (`B[1:-1] = 0.33333 * (A[:-2] + A[1:-1] + A[2:])` as the frontend lowers it) that
// makes this worth having: scalar, such a loop only matches NumPy. Each element goes through the
// same IEEE operations as in the scalar loop, in the same operand order (of two NaNs the first
// operand's payload is kept; vminpd d, b, a is `b < a ? b : a` exactly as minsd is), never fused
// or reassociated: results are the scalar loop's to the bit. The rules are narrow on purpose; a
// loop that breaks one is emitted as before (vector_plan):
//  - the loop is versioned with a counter stepped by +1, its body (the blocks but the header) is
//    one block of no branch, call or error exit holding the counter's step (counter + 1, or a copy
//    of counter + 1 computed in the body; after it the counter reads as the vector's counter + 1,
//    which the vector loop steps by W at its end), and only the contiguous address version has it;
//  - Float instructions: Const, Mov, Add, Sub, Mul, Div and Sqrt (unchecked), Neg, Abs, Min, Max;
//    Int ones only form last indices: counter, counter + c, c + counter or counter - c, c a
//    constant or a variable the loop does not assign, read only as a last index;
//  - loads and stores of float64 arrays only, their last index such a variable, their other
//    indices variables the loop does not assign (in range: the version's own checks);
//  - a variable the body assigns is assigned before the body reads it and is not live at the
//    header (no value carried across iterations, no reduction, nothing read after the loop);
//    Float values from before the loop are broadcast once;
//  - memory: a vector does access P for all W iterations before the next access Q. Of P before Q
//    in the body on one array, one of them a store, at last indices counter + p and counter + q,
//    Q touches an element first (an earlier iteration) exactly when q > p: legal iff q <= p or
//    q - p >= W. So A[k] = A[k + 1] * 2 is vectorized and A[k + 1] = A[k] * 2 is not. Offsets of
//    two variables are tested before the vector loop (q - p computed then); two accesses to rows
//    given by different variables refuse the loop (they may be one row). Different array slots
//    are different memory: the frontend refuses a loop that writes an array sharing memory with
//    another it reads, and the graph's guards keep written inputs apart from the other inputs.
// Before the vector loop the code tests that every last index stays in [0, size) over the
// iterations it runs: counter + c >= 0 and bound + c <= size, without overflow. The loop without
// checks proves that only for constant c; if a test fails, the scalar loops do all the work, with
// whatever checks they have. vzeroupper follows the vector loop, before the scalar SSE code.

// A condition on the flags: one condition code, or a float == / != (two flags each).
struct Flags {
  enum Kind : uint8_t { Code, FloatEq, FloatNe };
  Kind kind = Code;
  CC code = CC::kNE;

  Flags negated() const {
    if (kind == FloatEq) return {FloatNe, code};
    if (kind == FloatNe) return {FloatEq, code};
    return {Code, ax::negateCond(code)};
  }
};


bool writes_dst(EOp op) { return has_dst(op); }

// Calls f(v) for every variable `e` reads (Exit reads the results).
template <typename F>
void for_each_read(const ElementLoop& loop, const EInstr& e, F&& f) {
  if (reads_a(e.op)) f(e.a);
  if (reads_b(e.op)) f(e.b);
  if (e.op == EOp::Load || e.op == EOp::Store || e.op == EOp::Fail)
    for (int v : e.index) f(v);
  if (e.op == EOp::Exit)
    for (int v : loop.results) f(v);
}

bool reads_var(const ElementLoop& loop, const EInstr& e, int v) {
  bool r = false;
  for_each_read(loop, e, [&](int x) { r |= x == v; });
  return r;
}


// The variables live at the start of each block.
std::vector<std::vector<char>> live_in(const ElementLoop& loop) {
  const size_t nv = loop.vars.size(), nb = loop.blocks.size();
  std::vector<std::vector<char>> use(nb, std::vector<char>(nv)), def(nb, std::vector<char>(nv));
  std::vector<std::vector<int>> succ(nb);
  for (size_t b = 0; b < nb; ++b) {
    for (const EInstr& e : loop.blocks[b].instrs) {
      for_each_read(loop, e, [&](int v) {
        if (!def[b][v]) use[b][v] = 1;
      });
      if (writes_dst(e.op)) def[b][e.dst] = 1;
    }
    succ[b] = successors(loop.blocks[b]);
  }
  std::vector<std::vector<char>> in = use;
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t b = nb; b-- > 0;) {
      for (int s : succ[b]) {
        for (size_t v = 0; v < nv; ++v) {
          if (in[s][v] && !def[b][v] && !in[b][v]) {
            in[b][v] = 1;
            changed = true;
          }
        }
      }
    }
  }
  return in;
}

// Instructions an if-converted arm may hold: cheap, and unable to fail or to touch memory.
bool speculable(const EInstr& e) {
  switch (e.op) {
    case EOp::Const: case EOp::Mov: case EOp::Min: case EOp::Max: case EOp::Minimum: case EOp::Maximum:
    case EOp::BitAnd: case EOp::BitOr:
    case EOp::BitXor: case EOp::Invert: case EOp::Cmp: case EOp::Not: case EOp::ToFloat: case EOp::Dim:
      return true;
    case EOp::Add: case EOp::Sub: case EOp::Mul: case EOp::Neg: case EOp::Abs:
      return !(e.checked && e.type == EType::Int);
    case EOp::Shl: case EOp::Shr: return !e.checked;
    default: return false;
  }
}

constexpr int kMaxArm = 4;       // instructions per if-converted arm
constexpr size_t kMaxHoists = 6;  // row addresses computed before a loop
constexpr size_t kMaxInduced = 3;  // induction pointers of a loop's version without checks
// Code twice as long costs compile time: above these sizes (instructions), one version only.
constexpr size_t kMaxDuplicated = 600;  // the whole loop, for the contiguous-arrays version
constexpr size_t kMaxVersioned = 200;   // an inner loop, for its version without checks

class LoopEmitter {
public:
  LoopEmitter(ax::Compiler& cc, const ElementLoop& loop, Isa isa) : cc_(cc), loop_(loop), isa_(isa) {}

  Error build() {
    FuncNode* fn = cc_.addFunc(FuncSignatureT<int32_t, void*>(CallConvId::kHost));
    call_ = cc_.newIntPtr("call");
    fn->setArg(0, call_);
    // The scalar code is legacy SSE: entered with the upper halves of the vector registers dirty
    // (whatever AVX code ran last without clearing them), every SSE instruction on an Intel core
    // carries a false dependency on them. Free on AMD cores, where that state costs nothing.
    if (isa_ != Isa::Scalar) cc_.vzeroupper();
    const int nv = static_cast<int>(loop_.vars.size());
    const_ = element_loop_constants(loop_);
    nonneg_ = element_loop_nonnegative(loop_);
    gp_.resize(nv);
    xmm_.resize(nv);
    uses_.assign(nv, 0);
    for (int v = 0; v < nv; ++v) {
      if (const_[v]) continue;
      if (loop_.vars[v] == EType::Int) gp_[v] = cc_.newInt64("v%d", v);
      else xmm_[v] = cc_.newXmmSd("v%d", v);
    }
    for (const EBlock& b : loop_.blocks)
      for (const EInstr& e : b.instrs) for_each_read(loop_, e, [&](int v) { ++uses_[v]; });
    live_in_ = live_in(loop_);
    for (const EBlock& b : loop_.blocks) size_ += b.instrs.size();

    plan_if_conversions();
    plan_tests();
    plan_layout();
    plan_hoists();
    plan_versions();
    plan_invariant_loads();
    plan_induced();
    plan_vectors();
    for (const std::optional<VectorPlan>& v : vplans_)
      if (v) set_frame_isa(fn, isa_);

    load_arrays();
    load_params();
    for (size_t v = 0; v < loop_.vars.size(); ++v) {
      if (!live_in_[0][v] || const_[v]) continue;
      if (std::find(loop_.params.begin(), loop_.params.end(), static_cast<int>(v)) != loop_.params.end()) continue;
      // Read before any assignment: the interpreter starts it at 0, so the kernel does too.
      if (loop_.vars[v] == EType::Int) cc_.xor_(gp_[v].r32(), gp_[v].r32());
      else cc_.xorps(xmm_[v], xmm_[v]);
    }
    // Two versions of the blocks: one for arrays whose last axis is contiguous (the element's
    // address scales its index by the itemsize), one for any strides.
    bool versions = false;
    for (size_t j = 0; j < arrays_.size(); ++j) versions |= arrays_[j].data.isValid() && loop_.arrays[j].rank > 0;
    versions &= size_ <= kMaxDuplicated;
    if (versions) {
      Label general = cc_.newLabel();
      for (size_t j = 0; j < arrays_.size(); ++j) {
        const ArrayRegs& ar = arrays_[j];
        if (!ar.data.isValid() || loop_.arrays[j].rank == 0) continue;
        cc_.cmp(ar.stride.back(), static_cast<int32_t>(rt::dtype_itemsize(loop_.arrays[j].dtype)));
        cc_.jne(general);
      }
      emit_version(true);
      cc_.bind(general);
    }
    emit_version(false);
    // Cold code may add more cold code (an error exit on first use): run it by index, moved out.
    in_cold_ = true;
    for (size_t k = 0; k < cold_.size(); ++k) {
      std::function<void()> f = std::move(cold_[k]);
      mat_gp_.clear();
      mat_xmm_.clear();
      f();
    }
    cc_.endFunc();
    return cc_.finalize();
  }

private:
  struct ArrayRegs {
    ax::Gp data;
    std::vector<ax::Gp> dim, stride;  // invalid where unused
  };

  // An if-converted branch: its arms (blocks only it leads to, or -1 for an arm that goes straight
  // to the join) are computed into fresh registers, then the Int variables live at the join that
  // they assign are picked with cmov.
  struct IfConversion {
    int join = -1;
    int arm[2] = {-1, -1};  // the true and the false arm
    std::vector<int> outs;
  };

  // A row address (data plus the byte offsets of the leading axes `vars`) computed before a loop.
  struct Hoist {
    int array;
    std::vector<int> vars;
    bool operator==(const Hoist&) const = default;
  };
  // An index check a loop version without checks may skip: (array, axis, var).
  struct Fact {
    int array, axis, var;
    bool operator==(const Fact&) const = default;
  };
  struct LoopInfo {
    int header;
    std::vector<char> body;  // per block
    int preheader;           // or -1
    std::vector<Hoist> hoists;
    // Versioning (Note [Element loop code]): checks of indices the loop does not assign, and of
    // its counter (counter < bound, counter += 1 its only assignment in the loop).
    bool versioned = false;
    std::vector<Fact> invariant;
    // Checks of the counter plus a constant: the counter itself (or a copy, offset 0), or a
    // variable the loop assigns only `counter + c` (or `counter - c`), where the counter holds the
    // header's value.
    std::vector<std::pair<Fact, int64_t>> counted;
    std::vector<std::pair<int, int64_t>> offsets;  // those variables and their c
    int counter = -1, bound = -1;
    int64_t step = 0;                // what the counter's one assignment adds
    std::vector<char> counter_kept;  // per block: no path from the header to it steps the counter
    std::vector<Hoist> induced;      // rows of the counter and invariant variables, in the fast version
    std::vector<const EInstr*> invariant_loads;  // loaded once before the version without checks
  };

  // A vector loop (Note [Vectorized inner loops]): the body block, its loads and stores in order
  // (last index counter + off, off a constant c or an invariant variable, negated for counter -
  // var), and the Float variables from before the loop that it reads.
  struct VecOffset {
    int var = -1;
    int64_t c = 0;
    bool neg = false;
    bool valid = true;  // false: var + c with c != 0, which the vector loop does not form
    bool operator==(const VecOffset&) const = default;
  };
  struct VecAccess {
    int array;
    std::vector<int> outer;
    VecOffset off;
    bool store;
  };
  struct VectorPlan {
    int body = -1;
    std::vector<VecAccess> accesses;
    std::vector<int> broadcast;
    bool stores = false;
    // Offsets p, q of two accesses P before Q to one row, at least one a store, known only when the
    // loop runs: q - p <= 0 or >= W is tested then.
    std::vector<std::pair<VecOffset, VecOffset>> apart;
  };

  // Array indexing worked out along an extended block: the checked index of an axis (in [0, size)),
  // its byte offset, and the address of the element's row (data plus the offsets of all but the
  // last axis). Valid while the index variables keep their values.
  struct AxisEntry {
    int array, axis, var;
    ax::Gp index, offset;  // invalid until needed
    bool direct = false;   // var itself is in [0, size): it is the index
  };
  struct RowEntry {
    int array;
    std::vector<int> vars;  // the leading index variables
    ax::Gp ptr;
  };
  struct IndexCache {
    std::vector<AxisEntry> axes;
    std::vector<RowEntry> rows;
  };

  // ---- operands ----

  bool is_const(int v) const { return const_[v] != nullptr; }
  bool is_int_const(int v) const { return const_[v] && const_[v]->type == EType::Int; }
  int64_t ival(int v) const { return const_[v]->imm; }
  uint64_t fbits(int v) const { return std::bit_cast<uint64_t>(const_[v]->fimm); }
  // The constant as an imm32 operand, when v is an Int constant that fits one.
  std::optional<int32_t> imm32(int v) const {
    if (!is_int_const(v)) return std::nullopt;
    const int64_t x = ival(v);
    if (x < INT32_MIN || x > INT32_MAX) return std::nullopt;
    return static_cast<int32_t>(x);
  }

  // The register of an Int variable; a constant is loaded into a new one (once per instruction).
  ax::Gp G(int v) {
    if (!const_[v]) return gp_[v];
    for (const auto& [u, r] : mat_gp_)
      if (u == v) return r;
    ax::Gp r = tmp();
    cc_.mov(r, ival(v));  // mov, not xor: keeps the flags
    if (!in_cold_) mat_gp_.push_back({v, r});
    return r;
  }
  ax::Xmm X(int v) {
    if (!const_[v]) return xmm_[v];
    for (const auto& [u, r] : mat_xmm_)
      if (u == v) return r;
    ax::Xmm r = ftmp();
    fconst_into(r, fbits(v));
    if (!in_cold_) mat_xmm_.push_back({v, r});
    return r;
  }
  // A float operand of an SSE2 scalar instruction: the register, or a constant's 8 bytes in memory.
  Operand XO(int v) {
    if (!const_[v]) return xmm_[v];
    return pool(fbits(v));
  }
  ax::Mem pool(uint64_t bits) {
    ax::Mem m = cc_.newConst(ConstPoolScope::kLocal, &bits, 8);
    m.setSize(8);
    return m;
  }

  ax::Gp tmp() { return cc_.newInt64(); }
  ax::Xmm ftmp() { return cc_.newXmmSd(); }
  ax::Mem call_field(size_t offset) const { return ax::qword_ptr(call_, static_cast<int32_t>(offset)); }

  void emit_version(bool contiguous) {
    contiguous_ = contiguous;
    const size_t nb = loop_.blocks.size();
    blocks_.clear();
    for (size_t b = 0; b < nb; ++b) blocks_.push_back(cc_.newLabel());
    cache_at_end_.assign(nb, IndexCache{});
    emitted_.assign(nb, 0);
    hoisted_.assign(loops_.size(), {});
    induced_.assign(loops_.size(), {});
    fast_labels_.assign(loops_.size(), {});
    for (size_t l = 0; l < loops_.size(); ++l)
      if (loops_[l].versioned)
        for (size_t b = 0; b < nb; ++b) fast_labels_[l].push_back(cc_.newLabel());
    for (size_t k = 0; k < order_.size(); ++k) {
      const int b = order_[k];
      const int l = versioned_from(b);
      if (l < 0) {
        emit_block(b, k + 1 < order_.size() ? order_[k + 1] : -1);
        continue;
      }
      // A preheader: the checks, then the loop without them (its blocks in layout order), and on.
      emit_block(b, loops_[l].header);
      std::vector<int> blocks;
      for (int x : order_)
        if (loops_[l].body[x]) blocks.push_back(x);
      fast_loop_ = l;
      for (size_t i = 0; i < blocks.size(); ++i) emit_block(blocks[i], i + 1 < blocks.size() ? blocks[i + 1] : -1);
      fast_loop_ = -1;
      for (int x : blocks) emitted_[x] = 0;
    }
  }

  // The loop whose versioned preheader b is, or -1.
  int versioned_from(int b) const {
    for (size_t l = 0; l < loops_.size(); ++l)
      if (loops_[l].versioned && loops_[l].preheader == b) return static_cast<int>(l);
    return -1;
  }

  Label label_of(int b) const {
    if (fast_loop_ >= 0 && loops_[fast_loop_].body[b]) return fast_labels_[fast_loop_][b];
    return blocks_[b];
  }

  // At the end of a versioned loop's preheader: to the version with the checks unless every
  // check the other one skips passes here (and so on every iteration).
  void version_checks(int l) {
    const LoopInfo& lp = loops_[l];
    const Label checked = blocks_[lp.header];
    mat_gp_.clear();
    for (const Fact& f : lp.invariant) {
      cc_.cmp(G(f.var), arrays_[f.array].dim[f.axis]);
      cc_.jae(checked);
    }
    // counter + c >= 0 now, and bound + c <= each size: counter + c stays in [0, size) inside
    // the loop (c small, size >= 0: size - c does not overflow).
    std::vector<int64_t> lows;
    for (const auto& [f, c] : lp.counted) {
      if (std::find(lows.begin(), lows.end(), c) == lows.end()) {
        lows.push_back(c);
        cc_.cmp(G(lp.counter), static_cast<int32_t>(-c));
        cc_.jl(checked);
      }
      ax::Gp t = tmp();
      cc_.lea(t, ax::ptr(arrays_[f.array].dim[f.axis], static_cast<int32_t>(-c)));
      cc_.cmp(G(lp.bound), t);
      cc_.jg(checked);
    }
  }

  // At the start of a block of the version without checks: the checks it skips, as passed.
  void assume_facts(int b) {
    const LoopInfo& lp = loops_[fast_loop_];
    auto assume = [&](const Fact& f) {
      for (const AxisEntry& a : cache_.axes)
        if (a.array == f.array && a.axis == f.axis && a.var == f.var) return;
      cache_.axes.push_back({f.array, f.axis, f.var, ax::Gp(), ax::Gp(), true});
    };
    for (const Fact& f : lp.invariant) assume(f);
    counter_fresh_ = !lp.counter_kept.empty() && lp.counter_kept[b];
    // A variable holding counter + c that is not live at the header was computed in this
    // iteration, from the header's counter when no block before this one stepped it (a write
    // in this block forgets it again).
    if (counter_fresh_)
      for (const auto& [f, c] : lp.counted)
        if (f.var == lp.counter || !live_in_[lp.header][f.var]) assume(f);
  }

  // After instruction e in the version without checks: a variable holding counter + c with the
  // counter at the header's value passes its checks.
  void assume_after(const EInstr& e) {
    const LoopInfo& lp = loops_[fast_loop_];
    if (!writes_dst(e.op)) return;
    if (e.dst == lp.counter) counter_fresh_ = false;
    if (!counter_fresh_) return;
    for (const auto& [f, c] : lp.counted) {
      if (f.var != e.dst || e.dst == lp.counter) continue;
      bool known = false;
      for (const AxisEntry& a : cache_.axes) known |= a.array == f.array && a.axis == f.axis && a.var == f.var;
      if (!known) cache_.axes.push_back({f.array, f.axis, f.var, ax::Gp(), ax::Gp(), true});
    }
  }

  // ---- planning ----

  // Calls f on every instruction of loop lp: its blocks' and their if-converted arms'.
  template <typename F>
  void for_each_in_loop(const LoopInfo& lp, F&& f) const {
    for (size_t b = 0; b < loop_.blocks.size(); ++b) {
      if (!lp.body[b]) continue;
      for (const EInstr& e : loop_.blocks[b].instrs) f(e);
      if (ifconv_[b])
        for (int x : ifconv_[b]->arm)
          if (x >= 0)
            for (const EInstr& e : loop_.blocks[x].instrs) f(e);
    }
  }

  // `t = x & m; ...; c = t <op> 0` where only c reads t and x keeps its value between: the compare
  // is `test x, m` (the same flags: ZF, SF of x & m, CF = OF = 0) and t is never computed (a CRC's
  // `if crc & 0x8000:`).
  void plan_tests() {
    for (size_t b = 0; b < loop_.blocks.size(); ++b) {
      const std::vector<EInstr>& in = loop_.blocks[b].instrs;
      // Whether t is read after instruction k only once rewritten (in this block or after it).
      auto dead_after = [&](size_t k, int t) {
        for (size_t q = k + 1; q < in.size(); ++q) {
          if (reads_var(loop_, in[q], t)) return false;
          if (writes_dst(in[q].op) && in[q].dst == t) return true;
        }
        for (int s : successors(loop_.blocks[b]))
          if (live_in_[s][t]) return false;
        return true;
      };
      for (size_t k = 0; k < in.size(); ++k) {
        const EInstr& c = in[k];
        if (c.op != EOp::Cmp || c.type != EType::Int) continue;
        int t = c.a;
        if (is_const(t)) t = c.b;
        const int zero = t == c.a ? c.b : c.a;
        if (is_const(t) || !is_int_const(zero) || ival(zero) != 0 || !dead_after(k, t)) continue;
        size_t j = k;
        while (j > 0 && !(writes_dst(in[j - 1].op) && in[j - 1].dst == t)) --j;
        if (j == 0) continue;
        const EInstr& a = in[--j];
        if (a.op != EOp::BitAnd) continue;
        const int x = is_const(a.a) ? a.b : a.a, m = is_const(a.a) ? a.a : a.b;
        const std::optional<int32_t> mask = imm32(m);
        if (is_const(x) || !mask) continue;
        bool kept = true;
        for (size_t q = j + 1; q < k; ++q)
          kept &= !(writes_dst(in[q].op) && in[q].dst == x) && !reads_var(loop_, in[q], t);
        if (!kept) continue;
        tests_[&c] = {x, *mask};
        folded_ands_.push_back(&a);
      }
    }
  }
  bool folded_and(const EInstr& e) const {
    return std::find(folded_ands_.begin(), folded_ands_.end(), &e) != folded_ands_.end();
  }

  void plan_if_conversions() {
    const int nb = static_cast<int>(loop_.blocks.size());
    ifconv_.assign(nb, std::nullopt);
    absorbed_.assign(nb, 0);
    std::vector<std::vector<int>> preds(nb);
    for (int b = 0; b < nb; ++b)
      for (int s : successors(loop_.blocks[b])) preds[s].push_back(b);
    for (int b = 0; b < nb; ++b) {
      const EInstr& br = loop_.blocks[b].instrs.back();
      if (br.op != EOp::Branch || br.target == br.target2 || absorbed_[b]) continue;
      // An arm: x with only b before it, a few speculable instructions, then a jump (its join).
      auto arm_join = [&](int x) -> int {
        if (x == b || preds[x].size() != 1 || absorbed_[x] || ifconv_[x]) return -1;
        const std::vector<EInstr>& in = loop_.blocks[x].instrs;
        if (in.back().op != EOp::Jump || static_cast<int>(in.size()) - 1 > kMaxArm) return -1;
        for (size_t k = 0; k + 1 < in.size(); ++k)
          if (!speculable(in[k])) return -1;
        return in.back().target;
      };
      const int t = br.target, f = br.target2, jt = arm_join(t), jf = arm_join(f);
      IfConversion p;
      if (jt >= 0 && jt == jf && jt != t && jt != f) {
        p = {jt, {t, f}, {}};
      } else if (jt >= 0 && jt == f) {
        p = {f, {t, -1}, {}};
      } else if (jf >= 0 && jf == t) {
        p = {t, {-1, f}, {}};
      } else {
        continue;
      }
      bool ok = true;
      std::vector<char> out(loop_.vars.size(), 0);
      for (int x : p.arm) {
        if (x < 0) continue;
        for (const EInstr& e : loop_.blocks[x].instrs) {
          if (!writes_dst(e.op) || !live_in_[p.join][e.dst] || out[e.dst]) continue;
          if (loop_.vars[e.dst] != EType::Int) ok = false;
          out[e.dst] = 1;
          p.outs.push_back(e.dst);
        }
      }
      if (!ok) continue;
      for (int x : p.arm)
        if (x >= 0) absorbed_[x] = 1;
      ifconv_[b] = p;
    }
  }

  // The successors of b as emitted (an if-converted branch goes to its join).
  std::vector<int> out_edges(int b) const {
    if (ifconv_[b]) return {ifconv_[b]->join};
    return successors(loop_.blocks[b]);
  }

  void plan_layout() {
    const int nb = static_cast<int>(loop_.blocks.size());
    // Depth-first from the entry: back edges, then each header's natural loop.
    std::vector<char> state(nb, 0);  // 1: on the stack, 2: done
    std::vector<std::pair<int, int>> back;
    std::vector<std::pair<int, size_t>> stack{{0, 0}};
    std::vector<std::vector<int>> out(nb), preds(nb);
    for (int b = 0; b < nb; ++b)
      if (!absorbed_[b]) out[b] = out_edges(b);
    state[0] = 1;
    while (!stack.empty()) {
      auto& [b, k] = stack.back();
      if (k < out[b].size()) {
        const int s = out[b][k++];
        if (state[s] == 1) back.push_back({b, s});
        if (state[s] == 0) {
          state[s] = 1;
          stack.push_back({s, 0});
        }
      } else {
        state[b] = 2;
        stack.pop_back();
      }
    }
    for (int b = 0; b < nb; ++b)
      if (state[b])
        for (int s : out[b]) preds[s].push_back(b);
    preds_ = preds;
    for (const auto& [u, h] : back) {
      auto it = std::find_if(loops_.begin(), loops_.end(), [&](const LoopInfo& l) { return l.header == h; });
      if (it == loops_.end()) {
        loops_.push_back({h, std::vector<char>(nb, 0), -1, {}, false, {}, {}, {}, -1, -1, {}});
        it = loops_.end() - 1;
      }
      std::vector<char>& body = it->body;
      body[h] = 1;
      std::vector<int> work{u};
      while (!work.empty()) {
        const int x = work.back();
        work.pop_back();
        if (body[x]) continue;
        body[x] = 1;
        for (int p : preds[x]) work.push_back(p);
      }
    }
    innermost_.assign(nb, -1);
    std::vector<int> size(loops_.size(), 0);
    for (size_t l = 0; l < loops_.size(); ++l)
      for (int b = 0; b < nb; ++b) size[l] += loops_[l].body[b];
    for (int b = 0; b < nb; ++b)
      for (size_t l = 0; l < loops_.size(); ++l)
        if (loops_[l].body[b] && (innermost_[b] < 0 || size[l] < size[innermost_[b]]))
          innermost_[b] = static_cast<int>(l);
    // The preheader: the one block outside the loop that leads to the header, and only there.
    for (LoopInfo& l : loops_) {
      int p = -1, count = 0;
      for (int x : preds[l.header])
        if (!l.body[x]) {
          p = x;
          ++count;
        }
      if (count == 1 && out[p].size() == 1 && (loop_.blocks[p].instrs.back().op == EOp::Jump || ifconv_[p]))
        l.preheader = p;
    }

    std::vector<char> placed(nb, 0);
    std::vector<int> pending{0};
    while (!pending.empty()) {
      int cur = pending.back();
      pending.pop_back();
      while (cur >= 0 && !placed[cur]) {
        placed[cur] = 1;
        order_.push_back(cur);
        std::vector<int> next;
        for (int s : out[cur])
          if (!placed[s]) next.push_back(s);
        if (next.empty()) break;
        int pick = next[0];
        if (next.size() == 2 && innermost_[cur] >= 0) {
          const std::vector<char>& body = loops_[innermost_[cur]].body;
          if (!body[next[0]] && body[next[1]]) pick = next[1];
        }
        for (size_t k = next.size(); k-- > 0;)
          if (next[k] != pick) pending.push_back(next[k]);
        cur = pick;
      }
    }
  }

  // Which loops get a second version without the index checks that cannot fail once they pass
  // at the loop's entry: innermost loops with a preheader whose header only tests the loop
  // condition.
  void plan_versions() {
    const size_t nv = loop_.vars.size();
    const int nb = static_cast<int>(loop_.blocks.size());
    for (size_t l = 0; l < loops_.size(); ++l) {
      LoopInfo& lp = loops_[l];
      if (lp.preheader < 0 || !test_only(lp.header)) continue;
      size_t body_size = 0;
      for (int b = 0; b < nb; ++b)
        if (lp.body[b]) body_size += loop_.blocks[b].instrs.size();
      if (body_size > kMaxVersioned) continue;
      bool innermost = true;
      for (int b = 0; b < nb; ++b) innermost &= !lp.body[b] || innermost_[b] == static_cast<int>(l);
      if (!innermost) continue;
      std::vector<int> defs(nv, 0);
      std::vector<const EInstr*> def(nv, nullptr);
      auto note_writes = [&](int b) {
        for (const EInstr& e : loop_.blocks[b].instrs)
          if (writes_dst(e.op)) {
            ++defs[e.dst];
            def[e.dst] = &e;
          }
      };
      for (int b = 0; b < nb; ++b) {
        if (!lp.body[b]) continue;
        note_writes(b);
        if (ifconv_[b])
          for (int x : ifconv_[b]->arm)
            if (x >= 0) note_writes(x);
      }
      // The counter: `counter < bound` enters the loop, `counter += 1` is its only assignment.
      const std::vector<EInstr>& hi = loop_.blocks[lp.header].instrs;
      const EInstr& cmp = hi[0];
      const EInstr& br = hi.back();
      // `counter + c` (or `- c`) for a constant c: c, else nullopt.
      auto offset_of = [&](const EInstr& e, int counter) -> std::optional<int64_t> {
        if (e.op != EOp::Add && e.op != EOp::Sub) return std::nullopt;
        int c = -1;
        if (e.a == counter) c = e.b;
        else if (e.op == EOp::Add && e.b == counter) c = e.a;
        if (c < 0 || !is_int_const(c) || ival(c) < -(int64_t{1} << 30) || ival(c) > (int64_t{1} << 30))
          return std::nullopt;
        return e.op == EOp::Add ? ival(c) : -ival(c);
      };
      if (hi.size() == 2 && cmp.type == EType::Int && cmp.cond == ECond::Lt && lp.body[br.target] &&
          !lp.body[br.target2] && defs[cmp.b] == 0 && defs[cmp.a] == 1 && !is_const(cmp.a)) {
        // counter = counter + 1, or counter = next with next = counter + 1 the loop's one `next`,
        // computed before in the same block.
        const EInstr* inc = def[cmp.a];
        if (inc->op == EOp::Mov && defs[inc->a] == 1) {
          const EInstr* next = def[inc->a];
          bool before = false;
          for (int b = 0; b < nb && !before; ++b) {
            if (!lp.body[b]) continue;
            const std::vector<EInstr>& in = loop_.blocks[b].instrs;
            for (size_t k = 0; k < in.size(); ++k) {
              if (&in[k] == inc) break;
              if (&in[k] == next) before = true;
            }
            if (before) {
              // and in the block of the Mov
              bool has_mov = false;
              for (const EInstr& e : in) has_mov |= &e == inc;
              before = has_mov;
            }
          }
          inc = before ? next : nullptr;
        }
        // Any positive constant step: the header's counter still lies in [its value at the
        // preheader, bound) on every iteration, which is all the checks below rely on.
        const std::optional<int64_t> step = inc ? offset_of(*inc, cmp.a) : std::nullopt;
        if (step && *step >= 1) {
          lp.counter = cmp.a;
          lp.bound = cmp.b;
          lp.step = *step;
        }
      }
      if (lp.counter >= 0)
        for (size_t v = 0; v < nv; ++v)
          if (defs[v] == 1 && static_cast<int>(v) != lp.counter && !is_const(static_cast<int>(v)))
            if (std::optional<int64_t> c = offset_of(*def[v], lp.counter))
              lp.offsets.push_back({static_cast<int>(v), *c});
      // Copies of the counter count as the counter (their checks are known where they are copies).
      auto counter_copy = [&](int v) {
        if (v == lp.counter) return true;
        return lp.counter >= 0 && defs[v] == 1 && def[v]->op == EOp::Mov && def[v]->a == lp.counter;
      };
      for (int b = 0; b < nb; ++b) {
        if (!lp.body[b]) continue;
        for (const EInstr& e : loop_.blocks[b].instrs) {
          if (e.op != EOp::Load && e.op != EOp::Store) continue;
          for (size_t k = 0; k < e.index.size(); ++k) {
            const int v = e.index[k];
            if (defs[v] == 0) {
              const Fact f{e.array, static_cast<int>(k), v};
              if (std::find(lp.invariant.begin(), lp.invariant.end(), f) == lp.invariant.end())
                lp.invariant.push_back(f);
            } else {
              std::optional<std::pair<Fact, int64_t>> f;
              if (counter_copy(v)) f = {{e.array, static_cast<int>(k), lp.counter}, 0};
              for (const auto& [w, c] : lp.offsets)
                if (w == v) f = {{e.array, static_cast<int>(k), v}, c};
              if (f && std::find(lp.counted.begin(), lp.counted.end(), *f) == lp.counted.end())
                lp.counted.push_back(*f);
            }
          }
        }
      }
      lp.versioned = !lp.invariant.empty() || !lp.counted.empty();
      if (lp.counter < 0) continue;
      // Where the counter still holds the header's value: no block before (in the iteration)
      // steps it. Every cycle of an innermost loop passes its header.
      std::vector<char> steps(nb, 0);
      for (int b = 0; b < nb; ++b) {
        if (!lp.body[b]) continue;
        auto note = [&](int x) {
          for (const EInstr& e : loop_.blocks[x].instrs) steps[b] |= writes_dst(e.op) && e.dst == lp.counter;
        };
        note(b);
        if (ifconv_[b])
          for (int x : ifconv_[b]->arm)
            if (x >= 0) note(x);
      }
      lp.counter_kept.assign(nb, 1);
      for (bool changed = true; changed;) {
        changed = false;
        for (int b = 0; b < nb; ++b) {
          if (!lp.body[b] || b == lp.header || !lp.counter_kept[b]) continue;
          for (int p : preds_[b]) {
            if (lp.body[p] && (!lp.counter_kept[p] || steps[p])) {
              lp.counter_kept[b] = 0;
              changed = true;
              break;
            }
          }
        }
      }
    }
  }

  // Loads a versioned loop's version without checks makes once, after its preheader's tests
  // (Note [Element loop code]): every index one the loop does not assign (in range, tested there),
  // of an array the loop does not store into, into a variable this load is the loop's only
  // assignment of and that is not live at the header (so nothing reads it before the load in an
  // iteration, or after a loop that never ran it). The element cannot change while the loop runs,
  // and reading it early cannot fail.
  void plan_invariant_loads() {
    const int nb = static_cast<int>(loop_.blocks.size());
    for (LoopInfo& lp : loops_) {
      if (!lp.versioned) continue;
      std::vector<int> defs(loop_.vars.size(), 0);
      std::vector<char> stored(loop_.arrays.size(), 0);
      for_each_in_loop(lp, [&](const EInstr& e) {
        if (writes_dst(e.op)) ++defs[e.dst];
        if (e.op == EOp::Store) stored[e.array] = 1;
      });
      for (int b = 0; b < nb; ++b) {
        if (!lp.body[b]) continue;
        for (const EInstr& e : loop_.blocks[b].instrs) {
          if (e.op != EOp::Load || stored[e.array] || uses_[e.dst] == 0 || defs[e.dst] != 1 ||
              live_in_[lp.header][e.dst] || is_const(e.dst))
            continue;
          bool checked = true;
          for (size_t k = 0; k < e.index.size(); ++k) {
            const Fact f{e.array, static_cast<int>(k), e.index[k]};
            checked &= defs[e.index[k]] == 0 &&
                       std::find(lp.invariant.begin(), lp.invariant.end(), f) != lp.invariant.end();
          }
          if (checked) lp.invariant_loads.push_back(&e);
        }
      }
    }
  }

  bool invariant_load(const EInstr& e) const {
    if (fast_loop_ < 0) return false;
    const std::vector<const EInstr*>& v = loops_[fast_loop_].invariant_loads;
    return std::find(v.begin(), v.end(), &e) != v.end();
  }

  // Rows of a versioned loop that the counter and invariant variables index: induction pointers in
  // its version without checks (Note [Element loop code]). The counter's one assignment must be
  // emitted as a block's instruction (not in an if-converted arm), where the pointers step.
  void plan_induced() {
    const int nb = static_cast<int>(loop_.blocks.size());
    std::vector<char> arm(nb, 0);
    for (int b = 0; b < nb; ++b)
      if (ifconv_[b])
        for (int x : ifconv_[b]->arm)
          if (x >= 0) arm[x] = 1;
    for (LoopInfo& lp : loops_) {
      if (!lp.versioned || lp.counter < 0 || lp.step * 64 > (int64_t{1} << 30)) continue;
      std::vector<char> written(loop_.vars.size(), 0);
      bool stepped_in_block = false;
      for (int b = 0; b < nb; ++b) {
        if (!lp.body[b]) continue;
        for (const EInstr& e : loop_.blocks[b].instrs)
          if (writes_dst(e.op)) {
            written[e.dst] = 1;
            stepped_in_block |= e.dst == lp.counter && !arm[b];
          }
      }
      if (!stepped_in_block) continue;
      for (int b = 0; b < nb; ++b) {
        if (!lp.body[b]) continue;
        for (const EInstr& e : loop_.blocks[b].instrs) {
          if ((e.op != EOp::Load && e.op != EOp::Store) || e.index.size() < 2) continue;
          const std::vector<int> vars(e.index.begin(), e.index.end() - 1);
          bool counted = false, invariant = true;
          for (int v : vars) {
            counted |= v == lp.counter;
            invariant &= v == lp.counter || !written[v];
          }
          Hoist h{e.array, vars};
          if (counted && invariant && std::find(lp.induced.begin(), lp.induced.end(), h) == lp.induced.end() &&
              lp.induced.size() < kMaxInduced)
            lp.induced.push_back(std::move(h));
        }
      }
    }
  }

  // Row addresses a loop uses whose index variables the loop does not assign: computed once in
  // its preheader (Note [Element loop code]).
  void plan_hoists() {
    const size_t nv = loop_.vars.size();
    const int nb = static_cast<int>(loop_.blocks.size());
    for (size_t l = 0; l < loops_.size(); ++l) {
      LoopInfo& lp = loops_[l];
      if (lp.preheader < 0) continue;
      std::vector<char> written(nv, 0);
      for_each_in_loop(lp, [&](const EInstr& e) {
        if (writes_dst(e.op)) written[e.dst] = 1;
      });
      for (int b = 0; b < nb; ++b) {
        if (!lp.body[b] || innermost_[b] != static_cast<int>(l)) continue;
        for (const EInstr& e : loop_.blocks[b].instrs) {
          if (e.op != EOp::Load && e.op != EOp::Store) continue;
          if (e.op == EOp::Load && uses_[e.dst] == 0) continue;
          size_t n = 0;
          while (n < e.index.size() && !written[e.index[n]]) ++n;
          if (n == 0) continue;
          Hoist h{e.array, std::vector<int>(e.index.begin(), e.index.begin() + static_cast<std::ptrdiff_t>(n))};
          if (std::find(lp.hoists.begin(), lp.hoists.end(), h) == lp.hoists.end() && lp.hoists.size() < kMaxHoists)
            lp.hoists.push_back(std::move(h));
        }
      }
    }
  }

  // Which versioned loops also get a vector loop (Note [Vectorized inner loops]): every rule
  // there checked here, on the one body block; anything else refuses.
  void plan_vectors() {
    vplans_.assign(loops_.size(), std::nullopt);
    if (isa_ == Isa::Scalar) return;
    const int64_t width = isa_ == Isa::Avx512 ? 8 : 4;
    const int nb = static_cast<int>(loop_.blocks.size());
    for (size_t l = 0; l < loops_.size(); ++l) {
      const LoopInfo& lp = loops_[l];
      if (!lp.versioned || lp.counter < 0 || lp.step != 1) continue;
      int body = -1, count = 0;
      for (int b = 0; b < nb; ++b)
        if (lp.body[b] && b != lp.header) {
          body = b;
          ++count;
        }
      if (count != 1 || ifconv_[body] || absorbed_[body]) continue;
      const EInstr& br = loop_.blocks[lp.header].instrs.back();
      const std::vector<EInstr>& in = loop_.blocks[body].instrs;
      if (br.target != body || in.back().op != EOp::Jump || in.back().target != lp.header || in.size() < 2) continue;
      if (std::optional<VectorPlan> p = vector_plan(lp, body, width)) vplans_[l] = std::move(p);
    }
  }

  std::optional<VectorPlan> vector_plan(const LoopInfo& lp, int body, int64_t width) const {
    const std::vector<EInstr>& in = loop_.blocks[body].instrs;
    const size_t n = in.size() - 1;  // the Jump aside
    const int counter = lp.counter;
    VectorPlan plan;
    plan.body = body;
    std::vector<char> in_body(loop_.vars.size(), 0), done(loop_.vars.size(), 0);
    for (size_t k = 0; k < n; ++k)
      if (writes_dst(in[k].op)) in_body[in[k].dst] = 1;
    auto invariant = [&](int v) { return !in_body[v]; };
    // The counter's one assignment: counter + 1, or a copy of next = counter + 1 (checked below).
    // After it the counter is the vector's counter + 1 (the vector loop steps it at its end).
    size_t step = n;
    for (size_t k = 0; k < n; ++k)
      if (writes_dst(in[k].op) && in[k].dst == counter) step = k;
    if (step == n) return std::nullopt;
    std::map<int, VecOffset> index;  // Int variables holding counter + offset, assigned in the body
    index[counter] = {};
    for (size_t k = 0; k < n; ++k) {
      const EInstr& e = in[k];
      if (k == step) {
        index[counter] = {-1, 1, false};
        continue;
      }
      // A variable the body assigns must be assigned before the body reads it, and read nowhere
      // else: not carried from one iteration to the next, not read after the loop.
      if (writes_dst(e.op) && !is_const(e.dst) &&
          (e.dst == counter || live_in_[lp.header][e.dst] || live_in_[body][e.dst]))
        return std::nullopt;
      bool ok = true;
      auto float_read = [&](int v) { ok &= loop_.vars[v] == EType::Float && (is_const(v) || done[v] || invariant(v)); };
      // The last index counter + offset; the others the same on every iteration.
      auto indexed = [&](const EInstr& m) {
        if (m.index.empty() || loop_.arrays[m.array].dtype != DType::Float64) return false;
        for (size_t a = 0; a + 1 < m.index.size(); ++a)
          if (!invariant(m.index[a])) return false;
        auto it = index.find(m.index.back());
        if (it == index.end()) return false;
        plan.accesses.push_back({m.array, std::vector<int>(m.index.begin(), m.index.end() - 1), it->second,
                                 m.op == EOp::Store});
        return true;
      };
      if (e.type == EType::Int && writes_dst(e.op)) {
        if (is_const(e.dst)) continue;  // nothing emitted: its reads are the constant
        // counter, counter + c, c + counter, counter - c, c a constant or an invariant variable.
        VecOffset o = index[counter];
        if (e.op == EOp::Mov && e.a == counter) {
        } else if ((e.op == EOp::Add || e.op == EOp::Sub) && e.a == counter && e.b != counter && invariant(e.b)) {
          o = shifted(offset_of_var(e.b, e.op == EOp::Sub), o.c);
        } else if (e.op == EOp::Add && e.b == counter && e.a != counter && invariant(e.a)) {
          o = shifted(offset_of_var(e.a, false), o.c);
        } else {
          return std::nullopt;
        }
        if (!o.valid) return std::nullopt;
        if (index.count(e.dst)) return std::nullopt;
        index[e.dst] = o;
        done[e.dst] = 1;
        continue;
      }
      switch (e.op) {
        case EOp::Const:
          break;
        case EOp::Mov: case EOp::Neg: case EOp::Abs:
          float_read(e.a);
          break;
        case EOp::Sqrt:
          ok &= !e.checked;
          float_read(e.a);
          break;
        case EOp::Div:
          ok &= !e.checked;
          [[fallthrough]];
        case EOp::Add: case EOp::Sub: case EOp::Mul: case EOp::Min: case EOp::Max: case EOp::Minimum:
        case EOp::Maximum:
          float_read(e.a);
          float_read(e.b);
          break;
        case EOp::Load:
          ok &= indexed(e);
          break;
        case EOp::Store:
          float_read(e.a);
          ok &= indexed(e);
          break;
        default:
          return std::nullopt;
      }
      if (!ok || (writes_dst(e.op) && e.type != EType::Float)) return std::nullopt;
      if (writes_dst(e.op)) done[e.dst] = 1;
      if (e.op == EOp::Store) plan.stores = true;
      // Float reads of values from before the loop: broadcast once.
      for_each_read(loop_, e, [&](int v) {
        if (loop_.vars[v] == EType::Float && (is_const(v) || invariant(v)) &&
            std::find(plan.broadcast.begin(), plan.broadcast.end(), v) == plan.broadcast.end())
          plan.broadcast.push_back(v);
      });
    }
    // An index variable is read as a last index only (and one as the counter's next value).
    for (size_t k = 0; k < n; ++k) {
      const EInstr& e = in[k];
      const bool at_step = k == step;
      if (at_step) {
        if (e.op == EOp::Add && !is_const(e.dst) &&
            ((e.a == counter && is_int_const(e.b) && ival(e.b) == 1) ||
             (e.b == counter && is_int_const(e.a) && ival(e.a) == 1)))
          continue;
        if (e.op == EOp::Mov) {
          // counter = next, next = counter + 1 (its other reads are last indices, checked below).
          auto it = index.find(e.a);
          if (it != index.end() && it->second.var < 0 && it->second.c == 1) continue;
        }
        return std::nullopt;
      }
      bool bad = false;
      for_each_read(loop_, e, [&](int v) {
        if (!index.count(v)) return;
        const bool as_index = (e.op == EOp::Load || e.op == EOp::Store) && e.index.back() == v;
        const bool forming = e.type == EType::Int && writes_dst(e.op) && v == counter;
        if (!as_index && !forming) bad = true;
      });
      if (bad) return std::nullopt;
    }
    if (!plan.stores) return std::nullopt;
    // Memory: W iterations at once do each access for all W before the next access. Of two
    // accesses P before Q (in the body) to the same element, one a store, at last indices counter
    // + p and counter + q, Q's comes first in the loop exactly when q > p (an earlier iteration);
    // inside a vector that order flips unless q - p >= W.
    for (size_t i = 0; i < plan.accesses.size(); ++i) {
      for (size_t j = i + 1; j < plan.accesses.size(); ++j) {
        const VecAccess &p = plan.accesses[i], &q = plan.accesses[j];
        if (p.array != q.array || (!p.store && !q.store)) continue;
        if (p.outer != q.outer) return std::nullopt;
        if (p.off.var == q.off.var && p.off.neg == q.off.neg) {
          if (q.off.c > p.off.c && q.off.c - p.off.c < width) return std::nullopt;
        } else if (std::find(plan.apart.begin(), plan.apart.end(), std::pair{p.off, q.off}) == plan.apart.end()) {
          plan.apart.push_back({p.off, q.off});  // q - p tested before the vector loop
        }
      }
    }
    return plan;
  }

  // o plus 1 when the counter was stepped already (by = 1): only a constant offset can say so.
  static VecOffset shifted(VecOffset o, int64_t by) {
    if (by == 0) return o;
    if (o.var >= 0) o.valid = false;
    o.c += by;
    return o;
  }
  // An offset of the counter by variable v (negated for counter - v): its value when a constant.
  VecOffset offset_of_var(int v, bool neg) const {
    if (is_int_const(v) && ival(v) >= -(int64_t{1} << 26) && ival(v) <= (int64_t{1} << 26))
      return {-1, neg ? -ival(v) : ival(v), false};
    return {v, 0, neg};
  }

  // ---- entry ----

  void load_arrays() {
    const int na = static_cast<int>(loop_.arrays.size());
    arrays_.resize(na);
    std::vector<bool> indexed(na);
    std::vector<std::vector<bool>> dim_used(na);
    for (int j = 0; j < na; ++j) dim_used[j].assign(loop_.arrays[j].rank, false);
    for (const EBlock& b : loop_.blocks) {
      for (const EInstr& e : b.instrs) {
        if (e.op == EOp::Load || e.op == EOp::Store) {
          indexed[e.array] = true;
          dim_used[e.array].assign(loop_.arrays[e.array].rank, true);
        } else if (e.op == EOp::Dim) {
          dim_used[e.array][e.axis] = true;
        }
      }
    }
    ax::Gp data_base, dims_base, strides_base;
    for (int j = 0; j < na; ++j) {
      ArrayRegs& ar = arrays_[j];
      const int rank = loop_.arrays[j].rank;
      ar.dim.resize(rank);
      ar.stride.resize(rank);
      if (indexed[j]) {
        if (!data_base.isValid()) {
          data_base = cc_.newIntPtr("data_base");
          strides_base = cc_.newIntPtr("strides_base");
          cc_.mov(data_base, call_field(offsetof(ElementLoopCall, data)));
          cc_.mov(strides_base, call_field(offsetof(ElementLoopCall, strides)));
        }
        ar.data = cc_.newIntPtr("data%d", j);
        cc_.mov(ar.data, ax::qword_ptr(data_base, 8 * j));
        if (rank > 0) {
          ax::Gp sp = cc_.newIntPtr("strides%d", j);
          cc_.mov(sp, ax::qword_ptr(strides_base, 8 * j));
          for (int k = 0; k < rank; ++k) {
            ar.stride[k] = cc_.newInt64("stride%d_%d", j, k);
            cc_.mov(ar.stride[k], ax::qword_ptr(sp, 8 * k));
          }
        }
      }
      bool any_dim = false;
      for (bool u : dim_used[j]) any_dim |= u;
      if (!any_dim) continue;
      if (!dims_base.isValid()) {
        dims_base = cc_.newIntPtr("dims_base");
        cc_.mov(dims_base, call_field(offsetof(ElementLoopCall, dims)));
      }
      ax::Gp dp = cc_.newIntPtr("dims%d", j);
      cc_.mov(dp, ax::qword_ptr(dims_base, 8 * j));
      for (int k = 0; k < rank; ++k) {
        if (!dim_used[j][k]) continue;
        ar.dim[k] = cc_.newInt64("dim%d_%d", j, k);
        cc_.mov(ar.dim[k], ax::qword_ptr(dp, 8 * k));
      }
    }
  }

  void load_params() {
    ax::Gp s;
    for (size_t k = 0; k < loop_.params.size(); ++k) {
      const int p = loop_.params[k];
      if (uses_[p] == 0 || !live_in_[0][p]) continue;  // assigned before any read (or never read)
      if (!s.isValid()) {
        s = cc_.newIntPtr("scalars");
        cc_.mov(s, call_field(offsetof(ElementLoopCall, scalars)));
      }
      const ax::Mem m = ax::qword_ptr(s, static_cast<int32_t>(8 * k));
      if (loop_.vars[p] == EType::Int) cc_.mov(gp_[p], m);
      else cc_.movsd(xmm_[p], m);
    }
  }

  // ---- exits ----

  void return_code(LoopError e) {
    ax::Gp r = cc_.newInt32("status");
    cc_.mov(r, static_cast<int32_t>(e));
    cc_.ret(r);
  }

  // A cold exit returning `e` (after detail[0] = detail0 when given), shared by its users.
  Label fail(LoopError e, std::optional<int64_t> detail0 = std::nullopt) {
    const std::tuple<int, bool, int64_t> key{static_cast<int>(e), detail0.has_value(), detail0.value_or(0)};
    auto it = fails_.find(key);
    if (it != fails_.end()) return it->second;
    Label l = cc_.newLabel();
    fails_.emplace(key, l);
    cold_.push_back([this, l, e, detail0] {
      cc_.bind(l);
      if (detail0) cc_.mov(call_field(offsetof(ElementLoopCall, detail)), *detail0);
      return_code(e);
    });
    return l;
  }

  void exit_block() {
    if (!loop_.results.empty()) {
      ax::Gp s = cc_.newIntPtr("scalars");
      cc_.mov(s, call_field(offsetof(ElementLoopCall, scalars)));
      const size_t np = loop_.params.size();
      for (size_t k = 0; k < loop_.results.size(); ++k) {
        const int r = loop_.results[k];
        const ax::Mem m = ax::qword_ptr(s, static_cast<int32_t>(8 * (np + k)));
        if (loop_.vars[r] == EType::Int) {
          if (std::optional<int32_t> i = imm32(r)) cc_.mov(m, *i);
          else cc_.mov(m, G(r));
        } else {
          cc_.movsd(m, X(r));
        }
      }
    }
    return_code(LoopError::None);
  }

  // ---- constants and flags ----

  // A new register holding the double with these bits.
  ax::Xmm fconst(uint64_t bits) {
    ax::Xmm x = ftmp();
    fconst_into(x, bits);
    return x;
  }
  void fconst_into(const ax::Xmm& x, uint64_t bits) {
    if (bits == 0) {
      cc_.xorps(x, x);
      return;
    }
    cc_.movsd(x, pool(bits));
  }
  static constexpr uint64_t kSignBit = uint64_t{1} << 63;
  static constexpr uint64_t kInfinity = 0x7ff0000000000000;

  void jump_if(const Flags& f, const Label& target) {
    if (f.kind == Flags::Code) {
      cc_.j(f.code, target);
    } else if (f.kind == Flags::FloatEq) {
      Label unordered = cc_.newLabel();
      cc_.jp(unordered);
      cc_.je(target);
      cc_.bind(unordered);
    } else {
      cc_.jp(target);
      cc_.jne(target);
    }
  }

  void set_from_flags(const Flags& f, const ax::Gp& d) {
    if (f.kind == Flags::Code) {
      cc_.set(f.code, d.r8());
    } else {
      ax::Gp t = tmp();
      const bool eq = f.kind == Flags::FloatEq;
      cc_.set(eq ? CC::kE : CC::kNE, d.r8());
      cc_.set(eq ? CC::kNP : CC::kP, t.r8());
      if (eq) cc_.and_(d.r8(), t.r8());
      else cc_.or_(d.r8(), t.r8());
    }
    cc_.movzx(d.r32(), d.r8());
  }

  static CC int_cond(ECond c) {
    switch (c) {
      case ECond::Lt: return CC::kL;
      case ECond::Le: return CC::kLE;
      case ECond::Eq: return CC::kE;
      case ECond::Ne: return CC::kNE;
      case ECond::Gt: return CC::kG;
      default: return CC::kGE;
    }
  }
  // b <c> a is a <mirror(c)> b.
  static ECond mirror(ECond c) {
    switch (c) {
      case ECond::Lt: return ECond::Gt;
      case ECond::Le: return ECond::Ge;
      case ECond::Gt: return ECond::Lt;
      case ECond::Ge: return ECond::Le;
      default: return c;
    }
  }

  // Emits the comparison of Cmp `e`; returns the flags that hold when it is true.
  Flags compare(const EInstr& e) {
    int a = e.a, b = e.b;
    ECond c = e.cond;
    if (e.type == EType::Int) {
      if (is_const(a) && !is_const(b)) {
        std::swap(a, b);
        c = mirror(c);
      }
      if (std::optional<int32_t> i = imm32(b)) {
        // test sets OF = 0, so every signed condition against 0 reads the same from it.
        if (auto t = tests_.find(&e); *i == 0 && t != tests_.end()) cc_.test(G(t->second.first), t->second.second);
        else if (*i == 0) cc_.test(G(a), G(a));
        else cc_.cmp(G(a), *i);
      } else {
        cc_.cmp(G(a), G(b));
      }
      return {Flags::Code, int_cond(c)};
    }
    // ucomisd's first operand is a register; the second may be a constant in memory.
    auto ucomisd = [&](int x, int y) { cc_.emit(ax::Inst::kIdUcomisd, X(x), XO(y)); };
    switch (c) {
      case ECond::Lt: ucomisd(b, a); return {Flags::Code, CC::kA};
      case ECond::Le: ucomisd(b, a); return {Flags::Code, CC::kAE};
      case ECond::Gt: ucomisd(a, b); return {Flags::Code, CC::kA};
      case ECond::Ge: ucomisd(a, b); return {Flags::Code, CC::kAE};
      default:
        if (is_const(a) && !is_const(b)) std::swap(a, b);
        ucomisd(a, b);
        return {c == ECond::Eq ? Flags::FloatEq : Flags::FloatNe};
    }
  }

  // The flags of `v != 0` (Int).
  Flags test_var(int v) {
    const ax::Gp g = G(v);
    cc_.test(g, g);
    return {Flags::Code, CC::kNZ};
  }

  // Jumps to `x == 0.0` (not NaN) errors: the checked float divisions. Nothing for a constant
  // divisor that is not zero.
  void fail_if_zero(const EInstr& e) {
    if (is_const(e.b) && const_[e.b]->fimm != 0.0) return;
    ax::Xmm z = fconst(0);
    cc_.ucomisd(X(e.b), z);
    jump_if({Flags::FloatEq}, fail(LoopError::ZeroDivision, static_cast<int64_t>(zero_division_message(e))));
  }

  // ---- blocks ----

  // A Branch on the Cmp just before it, whose result nothing else reads.
  bool fused(const EInstr& cmp, const EInstr& br) const {
    if (cmp.op != EOp::Cmp || br.op != EOp::Branch || br.a != cmp.dst) return false;
    if (uses_[cmp.dst] == 1) return true;
    // Read elsewhere too (copies of a block): not after this branch.
    return !live_in_[br.target][cmp.dst] && !live_in_[br.target2][cmp.dst];
  }

  // A block that only tests a condition and branches (a loop header).
  bool test_only(int b) const {
    if (ifconv_[b]) return false;
    const std::vector<EInstr>& in = loop_.blocks[b].instrs;
    if (in.back().op != EOp::Branch) return false;
    return in.size() == 1 || (in.size() == 2 && fused(in[0], in[1]));
  }

  // The condition of b's branch (b's other instructions emitted).
  Flags branch_flags(int b) {
    const std::vector<EInstr>& in = loop_.blocks[b].instrs;
    const size_t n = in.size();
    mat_gp_.clear();
    mat_xmm_.clear();
    if (n >= 2 && fused(in[n - 2], in[n - 1])) return compare(in[n - 2]);
    return test_var(in[n - 1].a);
  }

  // At the end of a preheader: the row addresses its loop has hoisted, computed without the checks
  // (the loop checks each index where it uses it), a negative index wrapped as a valid one would.
  void emit_hoists(int b) {
    for (size_t l = 0; l < loops_.size(); ++l) {
      if (loops_[l].preheader != b) continue;
      for (const Hoist& h : loops_[l].hoists) {
        mat_gp_.clear();
        const ArrayRegs& ar = arrays_[h.array];
        const int rank = loop_.arrays[h.array].rank;
        const uint32_t size = static_cast<uint32_t>(rt::dtype_itemsize(loop_.arrays[h.array].dtype));
        ax::Gp p = ar.data;
        for (size_t k = 0; k < h.vars.size(); ++k) {
          const ax::Gp i = G(h.vars[k]), n = ar.dim[k];
          ax::Gp t = tmp();
          cc_.mov(t, i);
          if (!nonneg_[h.vars[k]]) {
            ax::Gp u = tmp();
            cc_.lea(u, ax::ptr(i, n));
            cc_.test(i, i);
            cc_.cmovs(t, u);
          }
          ax::Gp q = cc_.newIntPtr("hoist%d", static_cast<int>(k));
          if (contiguous_ && static_cast<int>(k) == rank - 1) {
            cc_.lea(q, ax::ptr(p, t, std::countr_zero(size)));
          } else {
            cc_.imul(t, ar.stride[k]);
            cc_.lea(q, ax::ptr(p, t));
          }
          p = q;
        }
        hoisted_[l].push_back(p);
      }
    }
  }

  // After a versioned loop's preheader passed its tests (the indices are in range): its induction
  // pointers and their steps.
  void emit_induced(int l) {
    const LoopInfo& lp = loops_[l];
    for (const Hoist& h : lp.induced) {
      mat_gp_.clear();
      const ArrayRegs& ar = arrays_[h.array];
      ax::Gp p = cc_.newIntPtr("induced"), t = tmp();
      cc_.mov(p, ar.data);
      Induced d{h, p, ax::Gp()};
      for (size_t k = 0; k < h.vars.size(); ++k) {
        cc_.mov(t, G(h.vars[k]));
        cc_.imul(t, ar.stride[k]);
        cc_.add(p, t);
        if (h.vars[k] == lp.counter) {
          d.step = cc_.newInt64("step");
          cc_.mov(d.step, ar.stride[k]);
          if (lp.step != 1) cc_.imul(d.step, d.step, static_cast<int32_t>(lp.step));
        }
      }
      induced_[l].push_back(d);
    }
  }

  // After a versioned loop's preheader passed its tests: its invariant loads, their indices known in
  // range (the facts the version without checks assumes).
  void emit_invariant_loads(int l) {
    if (loops_[l].invariant_loads.empty()) return;
    const IndexCache saved = cache_;
    const int block = cur_block_;
    fast_loop_ = l;
    cur_block_ = loops_[l].header;
    cache_ = {};
    assume_facts(loops_[l].header);
    for (const EInstr* e : loops_[l].invariant_loads) {
      mat_gp_.clear();
      mat_xmm_.clear();
      load(*e);
    }
    fast_loop_ = -1;
    cur_block_ = block;
    cache_ = saved;
    mat_gp_.clear();
    mat_xmm_.clear();
  }

  // After a versioned loop's preheader passed its tests, in the contiguous version: its vector
  // loop, W iterations at a time while counter + W <= bound, when it has one; the loop without
  // checks then runs the rest from the counter's new value (Note [Vectorized inner loops]).
  void emit_vector_loop(int l) {
    if (!contiguous_ || !vplans_[l]) return;
    const VectorPlan& plan = *vplans_[l];
    const LoopInfo& lp = loops_[l];
    const bool zmm = isa_ == Isa::Avx512;
    const int width = zmm ? 8 : 4;
    const uint32_t bytes = static_cast<uint32_t>(8 * width);
    auto newv = [&]() -> ax::Vec { return zmm ? ax::Vec(cc_.newZmm()) : ax::Vec(cc_.newYmm()); };
    mat_gp_.clear();
    mat_xmm_.clear();
    const ax::Gp counter = gp_[lp.counter], bound = G(lp.bound);
    Label skip = cc_.newLabel(), top = cc_.newLabel();
    // The last counter value a vector starts at: bound - W (none below INT64_MIN).
    ax::Gp limit = cc_.newInt64("vlimit");
    cc_.mov(limit, bound);
    cc_.sub(limit, width);
    cc_.jo(skip);
    cc_.cmp(counter, limit);
    cc_.jg(skip);
    // Every last index counter + offset stays in [0, size): counter + offset >= 0 and bound +
    // offset <= size (without overflow), as the loop without checks knows only for constant
    // offsets. Else the scalar loop does it all, with its checks.
    auto add_offset = [&](const ax::Gp& r, const VecOffset& o) {
      if (o.var < 0) {
        cc_.add(r, static_cast<int32_t>(o.c));
      } else if (o.neg) {
        cc_.sub(r, G(o.var));
      } else {
        cc_.add(r, G(o.var));
      }
      cc_.jo(skip);
    };
    std::vector<std::pair<int, VecOffset>> checked;
    for (const VecAccess& a : plan.accesses) {
      bool seen = false;
      for (const auto& [array, o] : checked) seen |= array == a.array && o == a.off;
      if (seen) continue;
      checked.push_back({a.array, a.off});
      ax::Gp lo = tmp(), hi = tmp();
      cc_.mov(lo, counter);
      add_offset(lo, a.off);
      cc_.test(lo, lo);
      cc_.js(skip);
      cc_.mov(hi, bound);
      add_offset(hi, a.off);
      cc_.cmp(hi, arrays_[a.array].dim.back());
      cc_.jg(skip);
    }
    auto offset_value = [&](const ax::Gp& r, const VecOffset& o) {
      if (o.var < 0) {
        cc_.mov(r, o.c);
        return;
      }
      cc_.mov(r, G(o.var));
      if (o.neg) {
        cc_.neg(r);
        cc_.jo(skip);
      }
    };
    for (const auto& [p, q] : plan.apart) {
      Label ok = cc_.newLabel();
      ax::Gp d = tmp(), t = tmp();
      offset_value(d, q);
      offset_value(t, p);
      cc_.sub(d, t);
      cc_.jo(skip);
      cc_.cmp(d, 0);
      cc_.jle(ok);
      cc_.cmp(d, width);
      cc_.jl(skip);
      cc_.bind(ok);
    }
    // Each access's address less counter * 8: the row (its leading indices are in range, checked
    // at the preheader), plus a variable offset * 8 in a register and a constant one as the
    // displacement, so a stencil's loads of one row share one register.
    std::vector<std::pair<ax::Gp, int32_t>> address;
    std::vector<std::pair<const VecAccess*, ax::Gp>> bases;
    for (const VecAccess& a : plan.accesses) {
      const int32_t disp = static_cast<int32_t>(8 * a.off.c);  // |c| <= 2^26 + 1 (offset_of_var)
      ax::Gp p;
      for (const auto& [b, r] : bases)
        if (b->array == a.array && b->outer == a.outer && b->off.var == a.off.var && b->off.neg == a.off.neg) p = r;
      if (!p.isValid()) {
        const ArrayRegs& ar = arrays_[a.array];
        p = cc_.newIntPtr("vbase");
        cc_.mov(p, ar.data);
        for (size_t k = 0; k < a.outer.size(); ++k) {
          ax::Gp t = tmp();
          cc_.mov(t, G(a.outer[k]));
          cc_.imul(t, ar.stride[k]);
          cc_.add(p, t);
        }
        if (a.off.var >= 0) {
          ax::Gp t = tmp();
          cc_.mov(t, G(a.off.var));
          if (a.off.neg) cc_.neg(t);
          cc_.lea(p, ax::ptr(p, t, 3));
        }
        bases.push_back({&a, p});
      }
      address.push_back({p, disp});
    }
    // Values from before the loop, in every lane; the constants of the body's Const, Neg and Abs.
    std::map<int, ax::Vec> vec;
    for (int v : plan.broadcast) {
      ax::Vec r = newv();
      if (is_const(v)) cc_.vbroadcastsd(r, pool(fbits(v)));
      else cc_.vbroadcastsd(r, xmm_[v]);
      vec[v] = r;
    }
    const std::vector<EInstr>& in = loop_.blocks[plan.body].instrs;
    std::map<uint64_t, ax::Vec> consts;
    auto vconst = [&](uint64_t bits) {
      auto it = consts.find(bits);
      if (it != consts.end()) return it->second;
      ax::Vec r = newv();
      cc_.vbroadcastsd(r, pool(bits));
      consts.emplace(bits, r);
      return r;
    };
    for (const EInstr& e : in) {
      if (e.op == EOp::Const && e.type == EType::Float && !is_const(e.dst)) vconst(std::bit_cast<uint64_t>(e.fimm));
      if (e.type == EType::Float && e.op == EOp::Neg) vconst(kSignBit);
      if (e.type == EType::Float && e.op == EOp::Abs) vconst(~kSignBit);
    }
    cc_.align(AlignMode::kCode, 16);
    cc_.bind(top);
    size_t access = 0;
    for (const EInstr& e : in) {
      if (e.op == EOp::Load || e.op == EOp::Store) {
        const auto& [p, disp] = address[access++];
        const ax::Mem m = ax::ptr(p, counter, 3, disp, bytes);
        if (e.op == EOp::Load) {
          ax::Vec r = newv();
          cc_.vmovupd(r, m);
          vec[e.dst] = r;
        } else {
          cc_.vmovupd(m, vec.at(e.a));
        }
        continue;
      }
      if (e.type != EType::Float || !writes_dst(e.op) || is_const(e.dst)) continue;  // indices
      // A fresh register per assignment: a later one leaves the value earlier reads saw.
      ax::Vec d = newv();
      switch (e.op) {
        case EOp::Const: d = vconst(std::bit_cast<uint64_t>(e.fimm)); break;
        case EOp::Mov: d = vec.at(e.a); break;
        // The same operand order as the scalar forms: of two NaNs, the first operand's is kept;
        // vminpd d, b, a is `b < a ? b : a` as minsd is (Note [Element loop IR]'s min).
        case EOp::Add: cc_.vaddpd(d, vec.at(e.a), vec.at(e.b)); break;
        case EOp::Sub: cc_.vsubpd(d, vec.at(e.a), vec.at(e.b)); break;
        case EOp::Mul: cc_.vmulpd(d, vec.at(e.a), vec.at(e.b)); break;
        case EOp::Div: cc_.vdivpd(d, vec.at(e.a), vec.at(e.b)); break;
        case EOp::Min: cc_.vminpd(d, vec.at(e.b), vec.at(e.a)); break;
        case EOp::Max: cc_.vmaxpd(d, vec.at(e.b), vec.at(e.a)); break;
        case EOp::Minimum: case EOp::Maximum: {
          // a where a <= b (a >= b) or a is NaN, else b.
          const ax::Vec a = vec.at(e.a), b = vec.at(e.b);
          const uint32_t keep_a = e.op == EOp::Minimum ? 2 : 13;  // LE_OS, GE_OS
          if (zmm) {
            ax::KReg k = cc_.newKq(), nan = cc_.newKq();
            cc_.vcmppd(k, a, b, keep_a);
            cc_.vcmppd(nan, a, a, 3);  // UNORD_Q
            cc_.korw(k, k, nan);
            cc_.k(k).vblendmpd(d, b, a);
          } else {
            ax::Vec m = newv(), nan = newv();
            cc_.vcmppd(m, a, b, keep_a);
            cc_.vcmppd(nan, a, a, 3);
            cc_.vorpd(m, m, nan);
            cc_.vblendvpd(d, b, a, m);
          }
          break;
        }
        case EOp::Neg: cc_.vxorpd(d, vec.at(e.a), vconst(kSignBit)); break;
        case EOp::Abs: cc_.vandpd(d, vec.at(e.a), vconst(~kSignBit)); break;
        case EOp::Sqrt: cc_.vsqrtpd(d, vec.at(e.a)); break;
        default: break;  // vector_plan admits no other
      }
      vec[e.dst] = d;
    }
    cc_.add(counter, width);
    cc_.cmp(counter, limit);
    cc_.jle(top);
    cc_.bind(skip);
    // Clean upper halves before the scalar SSE code (no transition penalty or false dependency).
    cc_.vzeroupper();
    forget(lp.counter);
    mat_gp_.clear();
  }

  // The block an innermost loop's back edge jumps to: the header's successor in the loop when the
  // header only tests (its test is repeated at the latch), else the header.
  bool loop_top(int b) const {
    for (size_t l = 0; l < loops_.size(); ++l) {
      const LoopInfo& lp = loops_[l];
      if (!lp.body[b] || innermost_[b] != static_cast<int>(l)) continue;
      bool inner = true;
      for (size_t x = 0; x < lp.body.size(); ++x) inner &= !lp.body[x] || innermost_[x] == static_cast<int>(l);
      if (!inner) return false;
      if (!test_only(lp.header)) return b == lp.header;
      const EInstr& br = loop_.blocks[lp.header].instrs.back();
      return b == (lp.body[br.target] ? br.target : br.target2);
    }
    return false;
  }

  void emit_block(int b, int next) {
    cur_block_ = b;
    if (loop_top(b)) cc_.align(AlignMode::kCode, 16);
    cc_.bind(label_of(b));
    // The index cache carries over from the only block before this one, when that is done.
    cache_ = {};
    if (preds_[b].size() == 1 && preds_[b][0] != b && emitted_[preds_[b][0]]) {
      // Not out of a versioned loop: it comes from either version.
      const int p = preds_[b][0];
      bool both = false;
      for (const LoopInfo& l : loops_) both |= l.versioned && l.body[p] && !l.body[b];
      if (!both) cache_ = cache_at_end_[p];
    }
    if (fast_loop_ >= 0) assume_facts(b);
    const std::vector<EInstr>& instrs = loop_.blocks[b].instrs;
    const size_t n = instrs.size();
    const bool fuse = n >= 2 && fused(instrs[n - 2], instrs[n - 1]);
    for (size_t k = 0; k < n; ++k) {
      const EInstr& e = instrs[k];
      if (fuse && k + 2 == n) continue;  // emitted by the Branch
      if (e.op == EOp::Branch) {
        if (ifconv_[b]) {
          if_converted(b, *ifconv_[b]);
          emit_hoists(b);
          if (fast_loop_ < 0 && versioned_from(b) >= 0) {
            version_checks(versioned_from(b));
            emit_vector_loop(versioned_from(b));
            emit_induced(versioned_from(b));
            emit_invariant_loads(versioned_from(b));
          }
          jump(ifconv_[b]->join, next, b);
        } else {
          branch(branch_flags(b), e.target, e.target2, next, b);
        }
        continue;
      }
      if (e.op == EOp::Jump) {
        emit_hoists(b);
        if (fast_loop_ < 0 && versioned_from(b) >= 0) {
          version_checks(versioned_from(b));
          emit_vector_loop(versioned_from(b));
          emit_induced(versioned_from(b));
          emit_invariant_loads(versioned_from(b));
        }
        jump(e.target, next, b);
        continue;
      }
      if (invariant_load(e)) continue;  // loaded before the loop
      if (folded_and(e)) continue;      // its compare tests the operand (plan_tests)
      mat_gp_.clear();
      mat_xmm_.clear();
      instr(e);
      if (writes_dst(e.op)) forget(e.dst);
      if (fast_loop_ >= 0 && writes_dst(e.op) && e.dst == loops_[fast_loop_].counter)
        for (const Induced& d : induced_[fast_loop_]) cc_.add(d.ptr, d.step);
      if (fast_loop_ >= 0) assume_after(e);
      if (e.op == EOp::Mov && e.dst != e.a && !is_const(e.dst)) {
        // The copy passes the checks its source passed.
        std::vector<AxisEntry> copied;
        for (const AxisEntry& a : cache_.axes) {
          if (a.var != e.a) continue;
          const bool own = !is_const(e.a) && a.index.isValid() && a.index.id() == gp_[e.a].id();
          copied.push_back({a.array, a.axis, e.dst, own ? gp_[e.dst] : a.index, a.offset, a.direct});
        }
        cache_.axes.insert(cache_.axes.end(), copied.begin(), copied.end());
      }
    }
    cache_at_end_[b] = cache_;
    emitted_[b] = 1;
  }

  // A jump from `from` to `target`; a loop header that only tests its condition is repeated here.
  void jump(int target, int next, int from) {
    if (target == next) return;
    if (target != from && test_only(target)) {
      repeat_test(target, next);
      return;
    }
    cc_.jmp(label_of(target));
  }

  // A branch from `from` on f to target, else to target2. A loop header that only tests its
  // condition, as either target, has its test repeated here (so a way round the loop does not go
  // through the header), unless this is such a copy already (`repeat` false).
  void branch(Flags f, int target, int target2, int next, int from, bool repeat = true) {
    if (target == target2) {
      if (repeat) jump(target, next, from);
      else if (target != next) cc_.jmp(label_of(target));
      return;
    }
    if (target == next) {
      std::swap(target, target2);
      f = f.negated();
    }
    if (repeat && target2 != next && target2 != from && test_only(target2)) {
      jump_if(f, label_of(target));
      repeat_test(target2, next);
      return;
    }
    if (repeat && target2 == next && target != from && test_only(target)) {
      jump_if(f.negated(), label_of(next));  // over the copy of the test
      repeat_test(target, next);
      return;
    }
    jump_if(f, label_of(target));
    if (target2 != next) cc_.jmp(label_of(target2));
  }

  void repeat_test(int header, int next) {
    const EInstr& br = loop_.blocks[header].instrs.back();
    branch(branch_flags(header), br.target, br.target2, next, header, false);
  }

  void if_converted(int b, const IfConversion& p) {
    const std::vector<ax::Gp> saved_gp = gp_;
    const std::vector<ax::Xmm> saved_xmm = xmm_;
    std::vector<ax::Gp> result[2];
    std::vector<int> written;
    for (int side = 0; side < 2; ++side) {
      const int x = p.arm[side];
      if (x >= 0) {
        std::vector<char> renamed(loop_.vars.size(), 0);
        const std::vector<EInstr>& in = loop_.blocks[x].instrs;
        for (size_t k = 0; k + 1 < in.size(); ++k) {
          const EInstr& e = in[k];
          mat_gp_.clear();
          mat_xmm_.clear();
          if (writes_dst(e.op) && !renamed[e.dst]) {
            const int w = e.dst;
            renamed[w] = 1;
            written.push_back(w);
            if (loop_.vars[w] == EType::Int) {
              ax::Gp r = tmp();
              if (reads_var(loop_, e, w)) cc_.mov(r, gp_[w]);
              gp_[w] = r;
            } else {
              ax::Xmm r = ftmp();
              if (reads_var(loop_, e, w)) cc_.movapd(r, xmm_[w]);
              xmm_[w] = r;
            }
          }
          instr(e);
        }
      }
      for (int w : p.outs) result[side].push_back(gp_[w]);
      gp_ = saved_gp;
      xmm_ = saved_xmm;
    }
    const Flags f = branch_flags(b);
    for (size_t k = 0; k < p.outs.size(); ++k) {
      const ax::Gp d = gp_[p.outs[k]], t = result[0][k], e = result[1][k];
      const bool t_same = t.id() == d.id(), e_same = e.id() == d.id();
      if (t_same && e_same) continue;
      if (f.kind == Flags::Code) {
        if (e_same) {
          cc_.cmov(f.code, d, t);
        } else if (t_same) {
          cc_.cmov(ax::negateCond(f.code), d, e);
        } else {
          cc_.mov(d, e);
          cc_.cmov(f.code, d, t);
        }
      } else {
        ax::Gp r = tmp();
        cc_.mov(r, e);
        cc_.cmov(f.kind == Flags::FloatEq ? CC::kE : CC::kNE, r, t);
        cc_.cmovp(r, f.kind == Flags::FloatEq ? e : t);
        cc_.mov(d, r);
      }
    }
    for (int w : written) forget(w);
  }

  // dst = a op b with a two-operand instruction `op(dst, src)`; src an imm32 when b is one.
  void int_binary(const EInstr& e, InstId id) {
    int a = e.a, b = e.b;
    if (commutes(e.op) && is_int_const(a) && !is_int_const(b)) std::swap(a, b);
    const ax::Gp d = G(e.dst);
    if (std::optional<int32_t> i = imm32(b)) {
      if (id == ax::Inst::kIdImul) {
        cc_.imul(d, G(a), *i);
        return;
      }
      if (e.dst != a) cc_.mov(d, G(a));
      cc_.emit(id, d, Imm(*i));
      return;
    }
    if (e.dst == b && e.dst != a) {
      ax::Gp t = tmp();
      cc_.mov(t, G(a));
      cc_.emit(id, t, G(b));
      cc_.mov(d, t);  // keeps the flags of `op`
    } else {
      if (e.dst != a) cc_.mov(d, G(a));
      cc_.emit(id, d, G(b));
    }
  }
  static bool commutes(EOp op) {
    return op == EOp::Add || op == EOp::Mul || op == EOp::BitAnd || op == EOp::BitOr || op == EOp::BitXor;
  }

  // dst = a op b with an SSE2 scalar instruction; b may be a constant in memory. Float a + b and
  // a * b commute exactly unless both are NaN (which payload wins): a constant first operand that
  // is not NaN moves second.
  void float_binary(const EInstr& e, InstId id) {
    int a = e.a, b = e.b;
    if ((e.op == EOp::Add || e.op == EOp::Mul) && is_const(a) && !is_const(b) && !std::isnan(const_[a]->fimm))
      std::swap(a, b);
    const ax::Xmm d = X(e.dst);
    if (isa_ != Isa::Scalar) {
      // With AVX, the three-operand form: no copy of a into d first (a scalar VEX instruction
      // keeps the upper halves clean, so it mixes with the SSE code at no cost).
      const InstId vex = id == ax::Inst::kIdAddsd   ? ax::Inst::kIdVaddsd
                         : id == ax::Inst::kIdSubsd ? ax::Inst::kIdVsubsd
                         : id == ax::Inst::kIdMulsd ? ax::Inst::kIdVmulsd
                                                    : ax::Inst::kIdVdivsd;
      cc_.emit(vex, d, X(a), XO(b));
      return;
    }
    if (e.dst == b && e.dst != a) {
      ax::Xmm t = ftmp();
      cc_.movapd(t, X(a));
      cc_.emit(id, t, XO(b));
      cc_.movapd(d, t);
    } else {
      if (e.dst != a) {
        if (is_const(a)) fconst_into(d, fbits(a));
        else cc_.movapd(d, X(a));
      }
      cc_.emit(id, d, XO(b));
    }
  }

  void instr(const EInstr& e) {
    const bool is_int = e.type == EType::Int;
    if (writes_dst(e.op) && is_const(e.dst)) return;  // its reads are the constant
    switch (e.op) {
      case EOp::Const:
        if (is_int) cc_.mov(G(e.dst), e.imm);
        else fconst_into(X(e.dst), std::bit_cast<uint64_t>(e.fimm));
        return;
      case EOp::Mov:
        if (e.dst == e.a) return;
        if (is_int) {
          if (is_int_const(e.a)) cc_.mov(G(e.dst), ival(e.a));
          else cc_.mov(G(e.dst), G(e.a));
        } else {
          if (is_const(e.a)) fconst_into(X(e.dst), fbits(e.a));
          else cc_.movapd(X(e.dst), X(e.a));
        }
        return;
      case EOp::Add: case EOp::Sub: case EOp::Mul:
        if (is_int) {
          int_binary(e, e.op == EOp::Add ? ax::Inst::kIdAdd : e.op == EOp::Sub ? ax::Inst::kIdSub : ax::Inst::kIdImul);
          if (e.checked) cc_.jo(fail(LoopError::IntOverflow));
        } else {
          float_binary(e, e.op == EOp::Add   ? ax::Inst::kIdAddsd
                          : e.op == EOp::Sub ? ax::Inst::kIdSubsd
                                             : ax::Inst::kIdMulsd);
        }
        return;
      case EOp::Div:
        if (e.checked) fail_if_zero(e);
        float_binary(e, ax::Inst::kIdDivsd);
        return;
      case EOp::FloorDiv: case EOp::Mod:
        if (is_int) {
          int_floor_div_mod(e);
        } else {
          if (e.checked) fail_if_zero(e);
          double (*fn)(double, double) = e.op == EOp::FloorDiv ? element_floordiv : element_mod;
          const ax::Xmm b = X(e.b);
          invoke(reinterpret_cast<uint64_t>(fn), X(e.dst), X(e.a), &b);
        }
        return;
      case EOp::Neg:
        if (is_int) {
          if (e.dst != e.a) cc_.mov(G(e.dst), G(e.a));
          cc_.neg(G(e.dst));
          if (e.checked) cc_.jo(fail(LoopError::IntOverflow));
        } else {
          ax::Xmm sign = fconst(kSignBit);
          if (e.dst != e.a) cc_.movapd(X(e.dst), X(e.a));
          cc_.xorpd(X(e.dst), sign);
        }
        return;
      case EOp::Abs:
        if (is_int) {
          ax::Gp t = tmp();
          const ax::Gp a = G(e.a);
          cc_.mov(t, a);
          cc_.neg(t);
          if (e.checked) cc_.jo(fail(LoopError::IntOverflow));
          cc_.cmovs(t, a);  // -a < 0: a was positive (or INT64_MIN, which wraps to itself)
          cc_.mov(G(e.dst), t);
        } else {
          ax::Xmm mask = fconst(~kSignBit);
          if (e.dst != e.a) cc_.movapd(X(e.dst), X(e.a));
          cc_.andpd(X(e.dst), mask);
        }
        return;
      case EOp::Min: case EOp::Max:
        if (is_int) {
          ax::Gp t = tmp();
          const ax::Gp a = G(e.a), b = G(e.b);
          cc_.mov(t, a);
          cc_.cmp(b, a);
          cc_.cmov(e.op == EOp::Min ? CC::kL : CC::kG, t, b);
          cc_.mov(G(e.dst), t);
        } else {
          // minsd d, s gives s when either is NaN or both are zero: with d = b, s = a that is
          // Python's `b < a ? b : a` (and `b > a ? b : a` for maxsd) exactly.
          const InstId id = e.op == EOp::Min ? ax::Inst::kIdMinsd : ax::Inst::kIdMaxsd;
          if (e.dst == e.a && e.dst != e.b) {
            ax::Xmm t = ftmp();
            cc_.movapd(t, X(e.b));
            cc_.emit(id, t, XO(e.a));
            cc_.movapd(X(e.dst), t);
          } else {
            if (e.dst != e.b) {
              if (is_const(e.b)) fconst_into(X(e.dst), fbits(e.b));
              else cc_.movapd(X(e.dst), X(e.b));
            }
            cc_.emit(id, X(e.dst), XO(e.a));
          }
        }
        return;
      case EOp::Minimum: case EOp::Maximum: {
        // a where a <= b (b <= a for maximum) or a is NaN, else b: two compare masks, or-ed,
        // select a over b.
        ax::Xmm keep = ftmp(), nan = ftmp(), r = ftmp();
        cc_.movapd(keep, X(e.op == EOp::Minimum ? e.a : e.b));
        cc_.cmpsd(keep, X(e.op == EOp::Minimum ? e.b : e.a), 2);  // LE
        cc_.movapd(nan, X(e.a));
        cc_.cmpsd(nan, X(e.a), 3);  // UNORD
        cc_.orpd(keep, nan);
        cc_.movapd(r, X(e.a));
        cc_.andpd(r, keep);
        cc_.andnpd(keep, X(e.b));
        cc_.orpd(r, keep);
        cc_.movapd(X(e.dst), r);
        return;
      }
      case EOp::BitAnd: int_binary(e, ax::Inst::kIdAnd); return;
      case EOp::BitOr: int_binary(e, ax::Inst::kIdOr); return;
      case EOp::BitXor: int_binary(e, ax::Inst::kIdXor); return;
      case EOp::Invert:
        if (e.dst != e.a) cc_.mov(G(e.dst), G(e.a));
        cc_.not_(G(e.dst));
        return;
      case EOp::Shl: shl(e); return;
      case EOp::Shr: shr(e); return;
      case EOp::Cmp: {
        // setcc writes a byte: zero the register before the compare (no partial-register merge).
        const ax::Gp d = G(e.dst);
        if (e.dst != e.a && e.dst != e.b) {
          cc_.xor_(d.r32(), d.r32());
          const Flags f = compare(e);
          if (f.kind == Flags::Code) {
            cc_.set(f.code, d.r8());
            return;
          }
          set_from_flags(f, d);
          return;
        }
        set_from_flags(compare(e), d);
        return;
      }
      case EOp::Not:
        if (loop_.vars[e.a] == EType::Int) {
          const ax::Gp a = G(e.a);
          cc_.test(a, a);
          set_from_flags({Flags::Code, CC::kE}, G(e.dst));
        } else {
          ax::Xmm z = fconst(0);
          cc_.ucomisd(X(e.a), z);
          set_from_flags({Flags::FloatEq}, G(e.dst));
        }
        return;
      case EOp::ToFloat:
        cc_.xorps(X(e.dst), X(e.dst));  // cvtsi2sd keeps the upper lane: no false dependency
        cc_.cvtsi2sd(X(e.dst), G(e.a));
        return;
      case EOp::ToInt: to_int(e); return;
      case EOp::Sqrt:
        if (e.checked) {
          ax::Xmm z = fconst(0);
          cc_.ucomisd(z, X(e.a));
          cc_.ja(fail(LoopError::MathDomain));  // 0 > a (a NaN is unordered: not taken)
        }
        cc_.emit(ax::Inst::kIdSqrtsd, X(e.dst), XO(e.a));
        return;
      case EOp::Call1: case EOp::Call2: math_call(e); return;
      case EOp::Dim: cc_.mov(G(e.dst), arrays_[e.array].dim[e.axis]); return;
      case EOp::Load: load(e); return;
      case EOp::Store: store(e); return;
      case EOp::Exit: exit_block(); return;
      case EOp::Fail: {
        const size_t detail = offsetof(ElementLoopCall, detail);
        for (size_t k = 0; k < e.index.size(); ++k) {
          const int v = e.index[k];
          if (std::optional<int32_t> i = imm32(v)) cc_.mov(call_field(detail + 8 * k), *i);
          else cc_.mov(call_field(detail + 8 * k), G(v));
        }
        return_code(static_cast<LoopError>(e.imm));
        return;
      }
      case EOp::Jump: case EOp::Branch: return;  // emit_block
    }
  }

  // ---- integer operations ----

  // Python's floor division and modulo; idiv truncates, so a nonzero remainder of the other sign
  // than the divisor moves one step. b == 0 and b == -1 go apart (idiv faults on INT64_MIN / -1);
  // a constant divisor needs neither test, and a positive power of two none of idiv.
  void int_floor_div_mod(const EInstr& e) {
    const bool want_q = e.op == EOp::FloorDiv, checked = e.checked;
    if (is_int_const(e.b)) {
      const int64_t c = ival(e.b);
      if (c > 0 && (c & (c - 1)) == 0 && (want_q || c - 1 <= INT32_MAX)) {
        const int shift = std::countr_zero(static_cast<uint64_t>(c));
        if (e.dst != e.a) cc_.mov(G(e.dst), G(e.a));
        if (want_q) {
          if (shift) cc_.sar(G(e.dst), shift);  // floor(a / 2^k)
        } else {
          cc_.and_(G(e.dst), static_cast<int32_t>(c - 1));  // in [0, 2^k), as Python's
        }
        return;
      }
    }
    const bool const_divisor = is_int_const(e.b) && ival(e.b) != 0 && ival(e.b) != -1;
    const ax::Gp a = G(e.a), b = G(e.b);
    ax::Gp q = cc_.newInt64("q"), r = cc_.newInt64("r"), t = tmp();
    const ax::Gp result = want_q ? q : r;
    Label zero = cc_.newLabel(), minus_one = cc_.newLabel(), done = cc_.newLabel();
    if (!const_divisor) {
      cc_.test(b, b);
      cc_.jz(zero);
      cc_.cmp(b, -1);
      cc_.je(minus_one);
    }
    cc_.mov(q, a);
    cc_.cqo(r, q);
    cc_.idiv(r, q, b);
    cc_.test(r, r);
    cc_.jz(done);
    cc_.mov(t, r);
    cc_.xor_(t, b);
    cc_.jns(done);  // a nonzero remainder with the divisor's sign is already floored
    if (want_q) cc_.dec(q);
    else cc_.add(r, b);
    cc_.bind(done);
    cc_.mov(G(e.dst), result);
    if (const_divisor) return;
    cold_.push_back([=, this] {
      cc_.bind(zero);
      if (checked) {
        cc_.jmp(fail(LoopError::ZeroDivision, static_cast<int64_t>(zero_division_message(e))));
      } else {
        cc_.xor_(result.r32(), result.r32());  // NumPy: x // 0 == x % 0 == 0
        cc_.jmp(done);
      }
    });
    cold_.push_back([=, this] {
      cc_.bind(minus_one);
      if (want_q) {
        cc_.mov(q, a);
        cc_.neg(q);
        if (checked) cc_.jo(fail(LoopError::IntOverflow));
      } else {
        cc_.xor_(r.r32(), r.r32());
      }
      cc_.jmp(done);
    });
  }

  void shl(const EInstr& e) {
    if (is_int_const(e.b)) {
      const int64_t c = ival(e.b);
      const ax::Gp d = G(e.dst);
      if (!e.checked) {
        // NumPy: a count outside [0, 64) gives 0.
        if (c < 0 || c >= 64) {
          cc_.mov(d, 0);
          return;
        }
        if (e.dst != e.a) cc_.mov(d, G(e.a));
        if (c) cc_.shl(d, static_cast<int>(c));
        return;
      }
      if (c == 0) {
        if (e.dst != e.a) cc_.mov(d, G(e.a));
        return;
      }
      if (c == 1) {  // a + a overflows exactly when a << 1 loses a bit
        if (e.dst != e.a) cc_.mov(d, G(e.a));
        cc_.add(d, d);
        cc_.jo(fail(LoopError::IntOverflow));
        return;
      }
      if (c >= 2 && c <= 30) {  // a * 2^c overflows exactly when a << c loses a bit
        cc_.imul(d, G(e.a), static_cast<int32_t>(int64_t{1} << c));
        cc_.jo(fail(LoopError::IntOverflow));
        return;
      }
      if (c >= 31 && c < 64) {
        const ax::Gp a = G(e.a);
        ax::Gp t = tmp(), back = tmp();
        cc_.mov(t, a);
        cc_.shl(t, static_cast<int>(c));
        cc_.mov(back, t);
        cc_.sar(back, static_cast<int>(c));
        cc_.cmp(back, a);
        cc_.jne(fail(LoopError::IntOverflow));
        cc_.mov(d, t);
        return;
      }
      // A negative count, or one of 64 or more: the general code.
    }
    const ax::Gp a = G(e.a), b = G(e.b);
    ax::Gp n = cc_.newInt64("count"), t = tmp();
    cc_.mov(n, b);
    cc_.mov(t, a);
    if (!e.checked) {
      // NumPy: a count outside [0, 64) gives 0 (shl itself would take it modulo 64).
      ax::Gp zero = tmp();
      cc_.shl(t, n.r8());
      cc_.xor_(zero.r32(), zero.r32());
      cc_.cmp(b, 63);
      cc_.cmova(t, zero);
      cc_.mov(G(e.dst), t);
      return;
    }
    Label wide = cc_.newLabel(), done = cc_.newLabel();
    cc_.cmp(b, 63);
    cc_.ja(wide);  // unsigned: b < 0 or b >= 64
    cc_.shl(t, n.r8());
    ax::Gp back = tmp();
    cc_.mov(back, t);
    cc_.sar(back, n.r8());
    cc_.cmp(back, a);
    cc_.jne(fail(LoopError::IntOverflow));  // bits shifted out
    cc_.bind(done);
    cc_.mov(G(e.dst), t);
    cold_.push_back([=, this] {
      cc_.bind(wide);
      cc_.test(b, b);
      cc_.js(fail(LoopError::IntOverflow));
      cc_.test(a, a);
      cc_.jnz(fail(LoopError::IntOverflow));
      cc_.xor_(t.r32(), t.r32());  // 0 << b
      cc_.jmp(done);
    });
  }

  void shr(const EInstr& e) {
    if (is_int_const(e.b) && (ival(e.b) >= 0 || !e.checked)) {
      // A count outside [0, 64) keeps only the sign: sar by 63 (NumPy's npy_rshift).
      const int64_t c = ival(e.b);
      const int count = c >= 0 && c < 64 ? static_cast<int>(c) : 63;
      if (e.dst != e.a) cc_.mov(G(e.dst), G(e.a));
      if (count) cc_.sar(G(e.dst), count);
      return;
    }
    const ax::Gp a = G(e.a), b = G(e.b);
    if (e.checked) {
      cc_.test(b, b);
      cc_.js(fail(LoopError::IntOverflow));
    }
    ax::Gp n = cc_.newInt64("count"), max = tmp(), t = tmp();
    cc_.mov(n, b);
    cc_.mov(max, 63);
    cc_.cmp(n, max);
    cc_.cmova(n, max);
    cc_.mov(t, a);
    cc_.sar(t, n.r8());
    cc_.mov(G(e.dst), t);
  }

  // ---- float operations ----

  // cvttsd2si gives INT64_MIN for NaN and out-of-range values, and for -2^63 itself.
  void to_int(const EInstr& e) {
    const ax::Gp d = G(e.dst);
    const ax::Xmm a = X(e.a);
    Label check = cc_.newLabel(), ok = cc_.newLabel();
    cc_.cvttsd2si(d, a);
    cc_.cmp(d, 1);
    cc_.jo(check);  // d - 1 overflows only for INT64_MIN
    cc_.bind(ok);
    cold_.push_back([=, this] {
      cc_.bind(check);
      cc_.ucomisd(a, a);
      cc_.jp(fail(LoopError::FloatToInt, 1));
      ax::Xmm min = fconst(std::bit_cast<uint64_t>(-0x1p63));
      cc_.ucomisd(a, min);
      cc_.je(ok);
      cc_.jmp(fail(LoopError::FloatToInt, 0));
    });
  }

  void invoke(uint64_t fn, const ax::Xmm& ret, const ax::Xmm& a, const ax::Xmm* b) {
    InvokeNode* node = nullptr;
    if (b) {
      cc_.invoke(&node, fn, FuncSignatureT<double, double, double>(CallConvId::kHost));
      node->setArg(0, a);
      node->setArg(1, *b);
    } else {
      cc_.invoke(&node, fn, FuncSignatureT<double, double>(CallConvId::kHost));
      node->setArg(0, a);
    }
    node->setRet(0, ret);
  }

  // CPython's math_1 / math_2 checks when `checked`: a NaN from operands that are not NaN is
  // MathDomain; an infinity from finite operands is inf_error (unless None).
  void math_call(const EInstr& e) {
    const bool two = e.op == EOp::Call2;
    const ax::Xmm a = X(e.a), b = two ? X(e.b) : ax::Xmm();
    const uint64_t fn = two ? reinterpret_cast<uint64_t>(e.fn2) : reinterpret_cast<uint64_t>(e.fn1);
    if (!e.checked) {
      invoke(fn, X(e.dst), a, two ? &b : nullptr);
      return;
    }
    // The result goes to dst only once checked against the operands, which dst may be.
    ax::Xmm r = ftmp();
    invoke(fn, r, a, two ? &b : nullptr);
    Label nan = cc_.newLabel(), inf = cc_.newLabel(), ok = cc_.newLabel();
    cc_.ucomisd(r, r);
    cc_.jp(nan);
    const bool check_inf = e.inf_error != LoopError::None;
    const LoopError inf_error = e.inf_error;
    if (check_inf) {
      ax::Xmm t = ftmp(), mask = fconst(~kSignBit), infinity = fconst(kInfinity);
      cc_.movapd(t, r);
      cc_.andpd(t, mask);
      cc_.ucomisd(t, infinity);
      cc_.je(inf);  // |r| == inf (r is not NaN here)
    }
    cc_.bind(ok);
    cc_.movapd(X(e.dst), r);
    cold_.push_back([=, this] {
      cc_.bind(nan);
      cc_.ucomisd(a, a);
      cc_.jp(ok);
      if (two) {
        cc_.ucomisd(b, b);
        cc_.jp(ok);
      }
      cc_.jmp(fail(LoopError::MathDomain));
    });
    if (!check_inf) return;
    cold_.push_back([=, this] {
      cc_.bind(inf);
      ax::Xmm mask = fconst(~kSignBit), infinity = fconst(kInfinity);
      for (const ax::Xmm& x : two ? std::vector<ax::Xmm>{a, b} : std::vector<ax::Xmm>{a}) {
        ax::Xmm t = ftmp();
        cc_.movapd(t, x);
        cc_.andpd(t, mask);
        cc_.ucomisd(infinity, t);
        cc_.jbe(ok);  // not inf > |x|: x is infinite or NaN, the infinity is allowed
      }
      cc_.jmp(fail(inf_error));
    });
  }

  // ---- elements ----

  // Forgets what the index cache knows through variable v (just assigned).
  void forget(int v) {
    std::erase_if(cache_.axes, [&](const AxisEntry& a) { return a.var == v; });
    std::erase_if(cache_.rows, [&](const RowEntry& r) {
      return std::find(r.vars.begin(), r.vars.end(), v) != r.vars.end();
    });
  }

  // Checks the index on axis k of `e`: in [0, size) passes one unsigned compare; the cold path
  // accepts a negative one that wraps into range (Note [Element loop IR]), then comes back. With
  // `wrapped`, also the index in [0, size) as a register (the cold path wraps it).
  AxisEntry& axis_entry(const EInstr& e, int k, bool wrapped = true) {
    const int v = e.index[k];
    const ArrayRegs& ar = arrays_[e.array];
    const ax::Gp n = ar.dim[k];
    for (AxisEntry& a : cache_.axes) {
      if (a.array != e.array || a.axis != k || a.var != v) continue;
      if (wrapped && !a.index.isValid() && a.direct) {
        a.index = G(v);
      } else if (wrapped && !a.index.isValid()) {
        // Checked already: wrap without a branch.
        const ax::Gp i = G(v);
        ax::Gp t = cc_.newInt64("i%d", k), u = tmp();
        cc_.mov(t, i);
        cc_.lea(u, ax::ptr(i, n));
        cc_.test(i, i);
        cc_.cmovs(t, u);
        a.index = t;
      }
      return a;
    }
    const ax::Gp i = G(v);
    if (nonneg_[v]) {
      // Never negative: in range or out, no wrapping; the index is the variable.
      Label bad = cc_.newLabel();
      cc_.cmp(i, n);
      cc_.jae(bad);
      cold_.push_back([=, this] {
        cc_.bind(bad);
        bad_index(i, k, n);
      });
      cache_.axes.push_back({e.array, k, v, i, ax::Gp(), true});
      return cache_.axes.back();
    }
    ax::Gp t = wrapped ? cc_.newInt64("i%d", k) : ax::Gp();
    Label ok = cc_.newLabel(), wrap = cc_.newLabel();
    cc_.cmp(i, n);
    cc_.jae(wrap);
    if (wrapped) cc_.mov(t, i);
    cc_.bind(ok);
    cold_.push_back([=, this] {
      Label bad = cc_.newLabel();
      cc_.bind(wrap);
      cc_.test(i, i);
      cc_.jns(bad);
      ax::Gp w = wrapped ? t : tmp();
      cc_.mov(w, i);
      cc_.add(w, n);
      cc_.cmp(w, n);
      cc_.jb(ok);
      cc_.bind(bad);
      bad_index(i, k, n);
    });
    cache_.axes.push_back({e.array, k, v, t, ax::Gp()});
    return cache_.axes.back();
  }

  // The IndexOutOfBounds exit: detail = {index, axis, size}.
  void bad_index(const ax::Gp& i, int k, const ax::Gp& n) {
    const size_t detail = offsetof(ElementLoopCall, detail);
    cc_.mov(call_field(detail), i);
    cc_.mov(call_field(detail + 8), k);
    cc_.mov(call_field(detail + 16), n);
    cc_.jmp(fail(LoopError::IndexOutOfBounds));
  }

  // The byte offset of axis k of `e` (index checked).
  ax::Gp axis_offset(const EInstr& e, int k) {
    AxisEntry& a = axis_entry(e, k);
    if (!a.offset.isValid()) {
      ax::Gp o = cc_.newInt64("off%d", k);
      cc_.mov(o, a.index);
      cc_.imul(o, arrays_[e.array].stride[k]);
      a.offset = o;
    }
    return a.offset;
  }

  // data plus the offsets of the first `count` axes of `e`, those indices checked.
  ax::Gp row(const EInstr& e, int count) {
    const ArrayRegs& ar = arrays_[e.array];
    if (count == 0) return ar.data;
    const std::vector<int> vars(e.index.begin(), e.index.begin() + count);
    for (const RowEntry& r : cache_.rows)
      if (r.array == e.array && r.vars == vars) return r.ptr;
    ax::Gp p;
    if (fast_loop_ >= 0)
      for (const Induced& d : induced_[fast_loop_])
        if (d.row.array == e.array && d.row.vars == vars) {
          for (int k = 0; k < count; ++k) axis_entry(e, k, false);
          p = d.ptr;
        }
    const int l = innermost_[cur_block_];
    if (!p.isValid() && l >= 0 && !hoisted_[l].empty()) {
      const std::vector<Hoist>& hs = loops_[l].hoists;
      for (size_t h = 0; h < hs.size() && h < hoisted_[l].size(); ++h) {
        if (hs[h].array == e.array && hs[h].vars == vars) {
          for (int k = 0; k < count; ++k) axis_entry(e, k, false);
          p = hoisted_[l][h];
          break;
        }
      }
    }
    if (!p.isValid()) {
      const ax::Gp base = row(e, count - 1);
      p = cc_.newIntPtr("row%d", count);
      if (contiguous_ && count == static_cast<int>(e.index.size())) {
        const uint32_t size = static_cast<uint32_t>(rt::dtype_itemsize(loop_.arrays[e.array].dtype));
        cc_.lea(p, ax::ptr(base, axis_entry(e, count - 1).index, std::countr_zero(size)));
      } else {
        cc_.lea(p, ax::ptr(base, axis_offset(e, count - 1)));
      }
    }
    cache_.rows.push_back({e.array, vars, p});
    return p;
  }

  // The element `e` indexes, after the bounds checks.
  ax::Mem element(const EInstr& e) {
    const ArrayRegs& ar = arrays_[e.array];
    const uint32_t size = static_cast<uint32_t>(rt::dtype_itemsize(loop_.arrays[e.array].dtype));
    const int rank = static_cast<int>(e.index.size());
    if (rank == 0) return ax::ptr(ar.data, 0, size);
    // The whole address, when a loop hoisted it or this extended block has it.
    const std::vector<int> vars(e.index.begin(), e.index.end());
    bool known = false;
    for (const RowEntry& r : cache_.rows) known |= r.array == e.array && r.vars == vars;
    const int l = innermost_[cur_block_];
    if (l >= 0)
      for (size_t h = 0; h < hoisted_[l].size(); ++h) known |= loops_[l].hoists[h] == Hoist{e.array, vars};
    if (known) return ax::ptr(row(e, rank), 0, size);
    const ax::Gp base = row(e, rank - 1);
    if (contiguous_) return ax::ptr(base, axis_entry(e, rank - 1).index, std::countr_zero(size), 0, size);
    return ax::ptr(base, axis_offset(e, rank - 1), 0, 0, size);
  }

  // d (Int) = the element at m, extended (bool: its byte != 0).
  void load_int(DType t, const ax::Mem& m, const ax::Gp& d) {
    switch (t) {
      case DType::Bool:
        cc_.cmp(m, 0);
        cc_.setne(d.r8());
        cc_.movzx(d.r32(), d.r8());
        break;
      case DType::Int8: case DType::Int16: cc_.movsx(d, m); break;
      case DType::Int32: cc_.movsxd(d, m); break;
      case DType::UInt8: case DType::UInt16: cc_.movzx(d.r32(), m); break;
      case DType::UInt32: cc_.mov(d.r32(), m); break;
      default: cc_.mov(d, m); break;  // Int64, UInt64
    }
  }

  // d = g converted to double, rounded once (g read as unsigned when `is_unsigned`).
  void int_to_float(const ax::Xmm& d, const ax::Gp& g, bool is_unsigned) {
    cc_.xorps(d, d);
    if (!is_unsigned) {
      cc_.cvtsi2sd(d, g);
      return;
    }
    Label high = cc_.newLabel(), done = cc_.newLabel();
    cc_.test(g, g);
    cc_.js(high);
    cc_.cvtsi2sd(d, g);
    cc_.bind(done);
    cold_.push_back([=, this] {
      // g >= 2^63: halve it keeping the low bit sticky (so the one rounding is still correct),
      // convert, double.
      cc_.bind(high);
      ax::Gp h = tmp(), low = tmp();
      cc_.mov(h, g);
      cc_.shr(h, 1);
      cc_.mov(low, g);
      cc_.and_(low, 1);
      cc_.or_(h, low);
      cc_.cvtsi2sd(d, h);
      cc_.addsd(d, d);
      cc_.jmp(done);
    });
  }

  void load(const EInstr& e) {
    if (uses_[e.dst] == 0) {
      // Nothing reads the value: only the index checks remain.
      for (size_t k = 0; k < e.index.size(); ++k) axis_entry(e, static_cast<int>(k), false);
      return;
    }
    const DType t = loop_.arrays[e.array].dtype;
    const ax::Mem m = element(e);
    if (e.type == EType::Int) {
      load_int(t, m, G(e.dst));
      return;
    }
    const ax::Xmm d = X(e.dst);
    if (t == DType::Float64) {
      cc_.movsd(d, m);
    } else if (t == DType::Float32) {
      cc_.xorps(d, d);
      cc_.cvtss2sd(d, m);
    } else {
      ax::Gp g = tmp();
      load_int(t, m, g);
      int_to_float(d, g, t == DType::UInt64);
    }
  }

  void store(const EInstr& e) {
    const DType t = loop_.arrays[e.array].dtype;
    const ax::Mem m = element(e);
    if (loop_.vars[e.a] == EType::Int) {
      if (std::optional<int32_t> i = imm32(e.a)) {
        // A constant: written as it converts.
        const int64_t c = *i;
        switch (t) {
          case DType::Bool: cc_.mov(m.cloneResized(1), c != 0); return;
          case DType::Int8: case DType::UInt8: cc_.mov(m.cloneResized(1), static_cast<int8_t>(c)); return;
          case DType::Int16: case DType::UInt16: cc_.mov(m.cloneResized(2), static_cast<int16_t>(c)); return;
          case DType::Int32: case DType::UInt32: cc_.mov(m.cloneResized(4), static_cast<int32_t>(c)); return;
          case DType::Int64: case DType::UInt64: cc_.mov(m.cloneResized(8), static_cast<int32_t>(c)); return;
          default: break;
        }
      }
      const ax::Gp v = G(e.a);
      switch (t) {
        case DType::Bool: {
          ax::Gp b = tmp();
          cc_.test(v, v);
          cc_.setne(b.r8());
          cc_.mov(m, b.r8());
          break;
        }
        case DType::Int8: case DType::UInt8: cc_.mov(m, v.r8()); break;
        case DType::Int16: case DType::UInt16: cc_.mov(m, v.r16()); break;
        case DType::Int32: case DType::UInt32: cc_.mov(m, v.r32()); break;
        case DType::Float64: case DType::Float32: {
          ax::Xmm x = ftmp();
          cc_.xorps(x, x);
          if (t == DType::Float64) {
            cc_.cvtsi2sd(x, v);
            cc_.movsd(m, x);
          } else {
            cc_.cvtsi2ss(x, v);  // one rounding, as C's (float)int64
            cc_.movss(m, x);
          }
          break;
        }
        default: cc_.mov(m, v); break;  // Int64, UInt64
      }
      return;
    }
    const ax::Xmm v = X(e.a);
    if (t == DType::Float64) {
      cc_.movsd(m, v);
    } else if (t == DType::Float32) {
      ax::Xmm x = ftmp();
      cc_.xorps(x, x);
      cc_.cvtsd2ss(x, v);
      cc_.movss(m, x);
    } else {  // Bool (verify rejects integer elements): v != 0.0, a NaN is true
      ax::Xmm z = fconst(0);
      ax::Gp b = tmp();
      cc_.ucomisd(v, z);
      set_from_flags({Flags::FloatNe}, b);
      cc_.mov(m, b.r8());
    }
  }

  ax::Compiler& cc_;
  const ElementLoop& loop_;
  const Isa isa_;
  ax::Gp call_;
  std::vector<const EInstr*> const_;  // per variable: its Const, when it is a constant
  std::vector<char> nonneg_;          // per variable: never negative
  std::vector<ax::Gp> gp_;            // Int variables (invalid for constants)
  std::vector<ax::Xmm> xmm_;          // Float variables
  std::vector<int> uses_;             // reads of each variable
  std::vector<std::vector<char>> live_in_;
  std::vector<std::optional<IfConversion>> ifconv_;  // per block ending in an if-converted branch
  std::vector<char> absorbed_;                       // arms of if-converted branches
  std::vector<std::vector<int>> preds_;              // as emitted
  std::vector<int> order_;                           // the blocks emitted, in order
  std::vector<LoopInfo> loops_;
  std::vector<std::optional<VectorPlan>> vplans_;  // per loop: its vector loop, when it has one
  std::vector<int> innermost_;                       // per block: its innermost loop, or -1
  std::map<const EInstr*, std::pair<int, int32_t>> tests_;  // compares made `test x, mask` (plan_tests)
  std::vector<const EInstr*> folded_ands_;                  // the ands they replace
  std::vector<std::vector<ax::Gp>> hoisted_;         // per loop: its hoists' registers (this version)
  // An induction pointer of a loop's version without checks, and what it steps by.
  struct Induced {
    Hoist row;
    ax::Gp ptr, step;
  };
  std::vector<std::vector<Induced>> induced_;  // per loop (this address version)
  bool contiguous_ = false;                          // the version for contiguous last axes
  std::vector<std::vector<Label>> fast_labels_;      // per versioned loop: its blocks' labels without checks
  int fast_loop_ = -1;                               // the loop being emitted without checks
  bool counter_fresh_ = false;                       // its counter holds the header's value here
  int cur_block_ = 0;
  size_t size_ = 0;  // instructions in the loop
  std::vector<char> emitted_;
  std::vector<Label> blocks_;
  std::vector<ArrayRegs> arrays_;
  IndexCache cache_;
  std::vector<IndexCache> cache_at_end_;
  std::vector<std::pair<int, ax::Gp>> mat_gp_;  // constants loaded for the current instruction
  std::vector<std::pair<int, ax::Xmm>> mat_xmm_;
  bool in_cold_ = false;
  std::vector<std::function<void()>> cold_;
  std::map<std::tuple<int, bool, int64_t>, Label> fails_;
};

}  // namespace

Expected<rt::KernelPtr> compile_element_loop(const ElementLoop& loop) {
  FJ_PROPAGATE(loop.verify());
  for (const ElementArray& a : loop.arrays)
    if (rt::dtype_is_half(a.dtype))
      return Status::unsupported(std::string("element loop: ") + std::string(rt::dtype_name(a.dtype)) + " arrays");
  const std::string text = loop.to_string();
  return cached_kernel("element_loop\n" + text, [&](Isa isa, bool want_listing) -> Expected<rt::KernelPtr> {
    return generate_element_loop(loop, isa, want_listing);
  });
}

Expected<rt::KernelPtr> generate_element_loop(const ElementLoop& loop, Isa isa, bool want_listing) {
  FJ_PROPAGATE(loop.verify());
  ElementLoop optimized = loop;
  optimize_element_loop(optimized);
  FJ_PROPAGATE(optimized.verify());
  return assemble("element_loop", optimized.to_string(), want_listing,
                  [&](ax::Compiler& cc) { return LoopEmitter(cc, optimized, isa).build(); });
}

}  // namespace framejit::jit::x86
