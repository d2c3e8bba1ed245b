// guards.h — the GuardSet: a tree of accessors keyed by Source with leaf checks, plus relations
// between symbolic sizes. check() is the hot path; check_verbose() explains a failure.
#pragma once

#include <Python.h>

#include <memory>
#include <string>
#include <vector>

#include "frontend/cpython/pyref.h"
#include "frontend/guards/source.h"
#include "jit/ir/sym.h"
#include "runtime/dtype.h"

namespace framejit::frontend {

/// What a tensor guard pins down about one array. Sizes not pinned are symbols (bound on check).
struct TensorGuard {
  /// What `type` is, so the check reads the right fields without testing the type again.
  enum class Kind : uint8_t { NdArray, NumPyScalar, Tensor, Torch, CuPy } kind = Kind::NdArray;
  PyTypeObject* type = nullptr;  // exact type (numpy.ndarray, a NumPy scalar type or
                                 // framejit.Tensor); borrowed, kept alive by the owning leaf
  int type_num = -1;             // NumPy's type number; for a framejit.Tensor, torch or CuPy array its rt::DType
  int ndim = 0;
  /// Per dim: >= 0 a static size; kSymbolic: any size >= 2, bound to symbols[dim].
  std::vector<int64_t> sizes;
  std::vector<int> symbols;  // symbol id per dim, -1 for static dims
  bool c_contiguous = true;
  rt::Device device;  // Tensor: where its data lives (a cuda tensor never passes a cpu guard)
  bool writeable = false;  // NdArray: the graph writes into it, so it must still be writeable
  bool requires_grad = false;  // Torch: as traced; true also needs the caller's grad mode to be
  bool grad_enabled = false;   // this one, as traced (Note [Torch values], Note [Grad-mode blocks])
  static constexpr int64_t kSymbolic = -2;
};

/// The values of a Python number for which NumPy's value-based casting gives the same result type.
struct RangeGuard {
  bool is_float = true;
  double flo = 0, fhi = 0;      // floats: flo < v < fhi
  bool nonfinite_ok = false;    // floats: inf and nan also pass
  int64_t ilo = 0, ihi = 0;     // ints: ilo <= v <= ihi
};

enum class CmpOp : uint8_t { Eq, Ne, Lt, Le, Gt, Ge };

/// One relation between symbolic sizes that the traced program's Python logic relied on.
struct ShapeGuard {
  jit::SymInt lhs;
  CmpOp op;
  int64_t rhs;
  std::string why;  // e.g. "x.shape[0] > 4 at model.py:12"
};

struct GuardLeaf;
struct GuardNode;
struct ShapeInstr;

/// Whether two NumPy arrays (borrowed) share no memory, judged by the bytes their elements span
/// (conservative: overlapping extents are not disjoint). False for anything but ndarrays.
bool arrays_disjoint(PyObject* a, int itemsize_a, PyObject* b, int itemsize_b);

/// A set of guards over a frame. Built once at trace time, then checked on every call.
class GuardSet {
public:
  GuardSet();
  ~GuardSet();
  GuardSet(GuardSet&&) noexcept;
  GuardSet& operator=(GuardSet&&) noexcept;

  // -- building (trace time, GIL held) --
  void add_type(const SourcePtr& src, PyTypeObject* type);
  void add_identity(const SourcePtr& src, PyObject* obj);
  /// Equality with a constant of an immutable builtin type (None, bool, int, float, str, bytes,
  /// tuple of those). Checks the exact type too.
  void add_equals(const SourcePtr& src, PyObject* value);
  void add_tensor(const SourcePtr& src, TensorGuard g);
  void add_range(const SourcePtr& src, RangeGuard g);
  /// The object's own __dict__ does not hold `name` (a class attribute, e.g. a method, is not
  /// shadowed by an instance attribute).
  void add_no_instance_attr(const SourcePtr& src, PyObject* name);
  void add_length(const SourcePtr& src, Py_ssize_t n);
  /// Exact dict with exactly these keys in this order.
  void add_dict_keys(const SourcePtr& src, PyObject* keys_tuple);
  void add_shape(ShapeGuard g);
  /// The arrays in guard slots `a` and `b` share no memory (a graph writes into one of them and
  /// reads the other as a separate value). Conservative: overlapping extents fail.
  void add_disjoint(int a, int b, int itemsize_a, int itemsize_b);
  /// The tensor guard of `src` (added already) also requires a writeable array.
  void require_writeable(const SourcePtr& src);
  /// The source whose value check() leaves in `slot`, as text.
  std::string slot_source_text(int slot) const;
  /// The value of `src` is written to slots[result] by check(). Same source → same slot.
  int slot_for(const SourcePtr& src);
  void set_num_symbols(int n) { num_symbols_ = n; }

  int num_slots() const { return num_slots_; }
  /// The largest fast-local index any guard reads (-1: none).
  int max_local() const { return max_local_; }
  int num_symbols() const { return num_symbols_; }

  // -- checking (every call) --
  /// True when every guard passes. Fills slots (borrowed) and symbol values. Never raises, never
  /// mutates the guard set, never runs user code.
  bool check(const FrameView& frame, PyObject** slots, int64_t* symbols) const noexcept;
  /// The first failing guard as text, or "" when all pass. Slower; used for recompile reasons.
  std::string check_verbose(const FrameView& frame) const;
  /// Every guard as a line of text (for explain() and FRAMEJIT_LOGS=guards).
  std::vector<std::string> describe() const;

private:
  GuardNode* node_for(const SourcePtr& src);
  std::vector<std::unique_ptr<GuardNode>> roots_;
  struct Disjoint {
    int a, b;                  // guard slots of two NumPy arrays
    int itemsize_a, itemsize_b;
  };
  std::vector<Disjoint> disjoint_;  // slot pairs whose arrays must not overlap
  std::vector<ShapeGuard> shape_guards_;  // as built: describe() and check_verbose() read these
  /// shape_guards_ flattened into one postfix program (Note [Shape guards as a program]).
  std::vector<ShapeInstr> shape_code_;
  bool shape_code_complete_ = true;  // false: a guard too deep for the program's stack
  int num_slots_ = 0;
  int max_local_ = -1;
  int num_symbols_ = 0;
};

}  // namespace framejit::frontend
