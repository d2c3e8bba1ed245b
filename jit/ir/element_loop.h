// element_loop.h — ElementLoop: a Python loop over array elements, compiled as a loop (issue 15):
// basic blocks of typed scalar instructions over variables, with loads and stores of the elements
// of the arrays it is given. frontend/trace/element_loops.cpp builds one from a loop's bytecode;
// jit/x86/element_loop_codegen.cpp compiles it; run_element_loop interprets it (the reference the
// code generator is tested against, and the way backends without a generator run it).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "framejit/status.h"
#include "runtime/dtype.h"
#include "runtime/element_loop_call.h"

namespace framejit::jit {

// Note [Element loop IR]
// Variables are mutable registers of one machine type each, int64 or float64 (a bool is an Int
// holding 0 or 1): the loop's Python locals become variables assigned on every path, which is
// what a register allocator over a control-flow graph wants (asmjit's), and what an interpreter
// wants too. Blocks end in one terminator (Jump, Branch, Exit); blocks[0] is the entry. Python's
// and NumPy's meanings are decided by the frontend: an operation here has one meaning, chosen by
// its `checked` flag where the two differ (a Python int raises on overflow, a NumPy int64 wraps;
// a Python float raises on division by zero, a NumPy float64 gives inf).
//
// Loads and stores index every axis with an Int variable; a negative index counts from the end
// (once, as NumPy does), and an index outside [-size, size) stops the loop with IndexOutOfBounds.
// A load converts the element to its variable's type (float32 widens exactly, small integers
// extend), a store converts to the array's dtype as NumPy's setitem does (C casts).

enum class EType : uint8_t { Int, Float };

enum class ECond : uint8_t { Lt, Le, Eq, Ne, Gt, Ge };

/// How a checked Call1/Call2 result is checked, after CPython's math module: a NaN from operands
/// that are not NaN is MathDomain; an infinity from finite operands is `inf_error` (MathRange for
/// exp, MathDomain for log(0)), or allowed when inf_error is None.
enum class EOp : uint8_t {
  Const,     // dst = imm (Int) or fimm (Float)
  Mov,       // dst = a
  Add, Sub, Mul,  // dst's type; Int checked: IntOverflow instead of wrapping
  Div,       // Float: a / b; checked: b == 0 raises ZeroDivision (else IEEE); imm 1: of two
             //   Python ints (CPython's message differs)
  FloorDiv,  // floor(a / b). Int: b == 0 is ZeroDivision when checked, 0 otherwise (NumPy);
  Mod,       //   INT64_MIN // -1 is IntOverflow when checked, wraps otherwise. Float: Python's and
             //   NumPy's divmod; checked: b == 0 is ZeroDivision, else NaN as NumPy gives.
             //   a % b takes the sign of b (Int and Float).
  Neg, Abs,  // Int checked: INT64_MIN is IntOverflow
  Min, Max,  // Python's min(a, b) and max(a, b): b < a ? b : a (b > a): a NaN `a` stays
  Minimum, Maximum,  // Float: numpy.minimum and maximum, (a <= b || a is NaN) ? a : b (a >= b): a NaN
                     // on either side is the result
  BitAnd, BitOr, BitXor, Invert,  // Int
  Shl,       // Int a << b; checked: a negative b, or bits shifted out, is IntOverflow; else wraps
  Shr,       // Int a >> b, arithmetic; b >= 64 gives 0 or -1; a negative b is IntOverflow (checked)
  Cmp,       // dst (Int) = a <cond> b, compared as `type` (Float: false if either is NaN, but Ne)
  Not,       // dst (Int) = a is zero (Float: a == 0.0; a NaN is true, so Not gives 0)
  ToFloat,   // dst (Float) = a (Int), rounded to nearest
  ToInt,     // dst (Int) = a (Float) truncated; NaN or out of int64 is FloatToInt
  Sqrt,      // dst (Float) = sqrt(a); checked: a < 0 is MathDomain (NaN stays NaN)
  Call1,     // dst (Float) = fn1(a)       (checked as said above)
  Call2,     // dst (Float) = fn2(a, b)
  Dim,       // dst (Int) = size of `array` along `axis`
  Load,      // dst = array[index...]
  Store,     // array[index...] = a
  Jump,      // to target
  Branch,    // a != 0 (Int) ? target : target2
  Exit,      // done: results hold their values
  Fail,      // stop with the LoopError `imm`, detail[k] = index[k] (up to 3 Int variables)
};

struct EInstr {
  EOp op = EOp::Const;
  EType type = EType::Int;  // the result's; Cmp: the operands'
  ECond cond = ECond::Lt;
  bool checked = false;
  int dst = -1, a = -1, b = -1;
  int array = -1, axis = 0;
  std::vector<int> index;  // Load, Store: one Int variable per axis
  int64_t imm = 0;
  double fimm = 0.0;
  double (*fn1)(double) = nullptr;
  double (*fn2)(double, double) = nullptr;
  std::string fn_name;  // Call1, Call2: for text and the kernel cache key ("math.exp")
  rt::LoopError inf_error = rt::LoopError::None;  // Call1, Call2 (checked)
  int target = -1, target2 = -1;

  bool is_terminator() const { return op == EOp::Jump || op == EOp::Branch || op == EOp::Exit || op == EOp::Fail; }
};

/// What an instruction of `op` touches: whether it sets `dst`, reads `a`, reads `b` (indices,
/// a Store's `a` aside, are in `index`).
bool has_dst(EOp op);
bool reads_a(EOp op);
bool reads_b(EOp op);

struct EBlock;
/// The blocks a block's terminator goes to (none for Exit).
std::vector<int> successors(const EBlock& b);

struct EBlock {
  std::vector<EInstr> instrs;  // the last one, and only it, is a terminator
};

/// An array the loop reads or writes, passed by its element (0, ..., 0), sizes and byte strides.
/// A written array shares no memory with the loop's other arrays (the frontend refuses loops
/// where it could): compiled code may reorder accesses to different arrays (Note [Vectorized
/// inner loops] in jit/x86/element_loop_codegen.cpp).
struct ElementArray {
  rt::DType dtype = rt::DType::Float64;
  int rank = 1;
  bool written = false;
};

struct ElementLoop {
  std::vector<EType> vars;
  std::vector<ElementArray> arrays;
  std::vector<int> params;   // variables set from ElementLoopCall::scalars[k] at entry
  std::vector<int> results;  // variables written to scalars[params.size() + k] at Exit
  /// Per result: the index of the result that says which kind of number it is (0: Python's, 1:
  /// NumPy's; Note [Kind tags] in frontend/trace/element_loops.cpp), or -1. Code generators
  /// ignore it; the step that runs the loop reads it.
  std::vector<int> tag_of;
  std::vector<EBlock> blocks;

  int new_var(EType t) {
    vars.push_back(t);
    return static_cast<int>(vars.size()) - 1;
  }
  /// Readable text, one instruction per line; also the kernel cache's key (it names every
  /// function called and every constant exactly).
  std::string to_string() const;
  /// Checks variable and block references, types and terminators.
  Status verify() const;
};

/// Runs `loop` over `call` one instruction at a time: the meaning every compiled form must have.
rt::LoopError run_element_loop(const ElementLoop& loop, rt::ElementLoopCall* call);

/// Rewrites `loop` into an equivalent one that is cheaper to run (Note [Element loop
/// optimization] in element_loop.cpp): threads jumps and merges blocks, forwards copies, reuses
/// values computed earlier on the path, drops checks that cannot fail, moves loop-invariant work
/// to preheaders, unrolls small constant loops, keeps an element a loop stores and reloads in a
/// variable, and deletes what nothing reads. Every error the loop can stop with stays, at the same
/// point (a Load whose value is unused still checks its index); it may add variables and blocks.
/// The result verifies if `loop` did. compile_element_loop runs it on a copy.
void optimize_element_loop(ElementLoop& loop);

/// Whether running `loop` may stop it with an error (an index out of bounds, a checked operation,
/// a Fail): such a loop runs even when nothing reads what it computes, as CPython would run it.
bool element_loop_may_fail(const ElementLoop& loop);

/// Per variable: the Const instruction (in `loop`) that is its only assignment and comes before
/// every read of it on every path, or null. Such a variable holds that constant wherever it is read.
std::vector<const EInstr*> element_loop_constants(const ElementLoop& loop);

/// Per variable: whether it is an Int that never holds a negative value (assigned only values >= 0
/// on every path, a parameter never; a loop counter stepped by 1 after testing it against a
/// bound counts). An index held in one needs no wrapping.
std::vector<char> element_loop_nonnegative(const ElementLoop& loop);

/// The ZeroDivisionMessage of a checked Div, FloorDiv or Mod that divides by zero.
rt::ZeroDivisionMessage zero_division_message(const EInstr& e);

/// Python's float a // b and a % b (CPython's float_divmod); b == 0 gives NumPy's answers, a / b
/// and NaN. Compiled loops call these too, so both forms agree to the bit.
double element_floordiv(double a, double b);
double element_mod(double a, double b);

}  // namespace framejit::jit
