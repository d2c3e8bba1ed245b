// test_guards.cpp — the guard tree: building, the fast check (slots, symbols), check_verbose and
// describe, over real Python objects in an embedded interpreter.
#include <gtest/gtest.h>

#include <Python.h>

#include "frontend/guards/guards.h"
#include "frontend/interop/numpy_abi.h"

namespace framejit::frontend {
namespace {

// One interpreter for the whole binary: CPython cannot be re-initialized reliably.
class PythonEnv : public ::testing::Environment {
public:
  void SetUp() override {
    if (!Py_IsInitialized()) Py_InitializeEx(0);
    init_numpy_handles();
  }
};
const auto* const kEnv = ::testing::AddGlobalTestEnvironment(new PythonEnv);

OwnedRef eval(const char* expr) {
  static PyObject* globals = [] {
    PyObject* g = PyDict_New();
    PyDict_SetItemString(g, "__builtins__", PyEval_GetBuiltins());
    PyObject* r = PyRun_String("import numpy as np\nclass Obj: pass\n", Py_file_input, g, g);
    Py_XDECREF(r);
    return g;
  }();
  OwnedRef r = OwnedRef::steal(PyRun_String(expr, Py_eval_input, globals, globals));
  if (!r) PyErr_Print();
  return r;
}

struct Frame {
  std::vector<PyObject*> locals;
  OwnedRef globals = OwnedRef::steal(PyDict_New());
  FrameView view() { return FrameView{locals.data(), globals.get(), PyEval_GetBuiltins(), nullptr}; }
};

TensorGuard float32_matrix(int sym0) {
  TensorGuard g;
  g.type = numpy_handles()->ndarray;
  g.type_num = 11;  // NPY_FLOAT
  g.ndim = 2;
  g.sizes = {TensorGuard::kSymbolic, 4};
  g.symbols = {sym0, -1};
  return g;
}

TEST(GuardSet, TensorGuardBindsSymbolsAndFillsSlots) {
  ASSERT_NE(numpy_handles(), nullptr) << "these tests need NumPy";
  OwnedRef x = eval("np.zeros((8, 4), np.float32)");
  Frame f;
  f.locals = {x.get()};
  GuardSet gs;
  SourcePtr src = local_source(0, "x");
  gs.add_tensor(src, float32_matrix(0));
  gs.set_num_symbols(1);
  int slot = gs.slot_for(src);
  EXPECT_EQ(slot, gs.slot_for(local_source(0, "x")));  // same source, same slot

  PyObject* slots[4] = {};
  int64_t syms[4] = {};
  ASSERT_TRUE(gs.check(f.view(), slots, syms));
  EXPECT_EQ(slots[slot], x.get());
  EXPECT_EQ(syms[0], 8);
  EXPECT_EQ(gs.check_verbose(f.view()), "");

  // A new batch size passes; the symbol takes the new value.
  OwnedRef y = eval("np.zeros((16, 4), np.float32)");
  f.locals = {y.get()};
  ASSERT_TRUE(gs.check(f.view(), slots, syms));
  EXPECT_EQ(syms[0], 16);
}

TEST(GuardSet, TensorGuardRejectsDtypeRankSizeLayout) {
  GuardSet gs;
  SourcePtr src = local_source(0, "x");
  gs.add_tensor(src, float32_matrix(0));
  gs.set_num_symbols(1);
  PyObject* slots[4];
  int64_t syms[4];
  struct Case {
    const char* expr;
    const char* why;
  } cases[] = {
      {"np.zeros((8, 4), np.float64)", "dtype changed"},
      {"np.zeros((8, 4, 1), np.float32)", "rank is 3, expected 2"},
      {"np.zeros((8, 5), np.float32)", "size of dim 1 is 5, expected 4"},
      {"np.zeros((1, 4), np.float32)", "size of dim 0 is 1, expected >= 2"},
      {"np.zeros((4, 8), np.float32).T", "no longer C-contiguous"},
      {"[1, 2]", "type is list, expected numpy.ndarray"},
  };
  for (const Case& c : cases) {
    OwnedRef v = eval(c.expr);
    Frame f;
    f.locals = {v.get()};
    EXPECT_FALSE(gs.check(f.view(), slots, syms)) << c.expr;
    std::string why = gs.check_verbose(f.view());
    EXPECT_NE(why.find(c.why), std::string::npos) << c.expr << " -> " << why;
    EXPECT_NE(why.find("L['x']"), std::string::npos) << why;
  }
}

TEST(GuardSet, ShapeRelationsUseBoundSymbols) {
  OwnedRef x = eval("np.zeros((8, 4), np.float32)");
  Frame f;
  f.locals = {x.get()};
  GuardSet gs;
  gs.add_tensor(local_source(0, "x"), float32_matrix(0));
  gs.set_num_symbols(1);
  gs.add_shape({jit::SymInt::symbol(0), CmpOp::Gt, 4, "x.shape[0] > 4"});
  PyObject* slots[2];
  int64_t syms[2];
  EXPECT_TRUE(gs.check(f.view(), slots, syms));
  OwnedRef small = eval("np.zeros((3, 4), np.float32)");
  f.locals = {small.get()};
  EXPECT_FALSE(gs.check(f.view(), slots, syms));
  std::string why = gs.check_verbose(f.view());
  EXPECT_NE(why.find("s0 > 4 failed (s0 = 3"), std::string::npos) << why;
}

TEST(GuardSet, TreeSharesNodesAndChecksChildrenAfterParents) {
  OwnedRef obj = eval("Obj()");
  OwnedRef w = eval("np.ones((3,), np.float32)");
  PyObject_SetAttrString(obj.get(), "w", w.get());
  Frame f;
  f.locals = {obj.get()};
  GuardSet gs;
  SourcePtr self = local_source(0, "self");
  gs.add_type(self, Py_TYPE(obj.get()));
  OwnedRef name = OwnedRef::steal(PyUnicode_FromString("w"));
  SourcePtr attr = child_source(SourceKind::InstanceAttr, self, name.get());
  TensorGuard tg;
  tg.type = numpy_handles()->ndarray;
  tg.type_num = 11;
  tg.ndim = 1;
  tg.sizes = {3};
  tg.symbols = {-1};
  gs.add_tensor(attr, tg);
  int slot = gs.slot_for(attr);
  PyObject* slots[2] = {};
  int64_t syms[1];
  ASSERT_TRUE(gs.check(f.view(), slots, syms));
  EXPECT_EQ(slots[slot], w.get());

  std::vector<std::string> lines = gs.describe();
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0], "type(L['self']) is Obj");
  EXPECT_EQ(lines[1], "L['self'].w: numpy.ndarray float32 shape (3,) C-contiguous");

  // Replacing the attribute is seen on the next check; a missing one fails without raising.
  OwnedRef w2 = eval("np.ones((3,), np.float64)");
  PyObject_SetAttrString(obj.get(), "w", w2.get());
  EXPECT_FALSE(gs.check(f.view(), slots, syms));
  PyObject_DelAttrString(obj.get(), "w");
  EXPECT_FALSE(gs.check(f.view(), slots, syms));
  EXPECT_FALSE(PyErr_Occurred());
  EXPECT_NE(gs.check_verbose(f.view()).find("is missing"), std::string::npos);
}

TEST(GuardSet, ConstantsLengthsKeysAndRanges) {
  OwnedRef n = eval("3");
  OwnedRef xs = eval("[1.0, 2.0]");
  OwnedRef d = eval("{'a': 1, 'b': 2}");
  OwnedRef lr = eval("0.5");
  Frame f;
  f.locals = {n.get(), xs.get(), d.get(), lr.get()};
  GuardSet gs;
  gs.add_equals(local_source(0, "n"), n.get());
  gs.add_length(local_source(1, "xs"), 2);
  OwnedRef keys = eval("('a', 'b')");
  gs.add_dict_keys(local_source(2, "d"), keys.get());
  RangeGuard r;
  r.is_float = true;
  r.flo = -10;
  r.fhi = 10;
  gs.add_range(local_source(3, "lr"), r);
  PyObject* slots[1];
  int64_t syms[1];
  EXPECT_TRUE(gs.check(f.view(), slots, syms));

  OwnedRef other = eval("4");
  f.locals[0] = other.get();
  EXPECT_FALSE(gs.check(f.view(), slots, syms));
  EXPECT_NE(gs.check_verbose(f.view()).find("is 4, expected 3"), std::string::npos);
  f.locals[0] = n.get();

  OwnedRef big = eval("20.0");
  f.locals[3] = big.get();
  EXPECT_FALSE(gs.check(f.view(), slots, syms));
  OwnedRef inside = eval("-9.5");
  f.locals[3] = inside.get();
  EXPECT_TRUE(gs.check(f.view(), slots, syms));

  OwnedRef d2 = eval("{'b': 2, 'a': 1}");  // same keys, other order: a different dict to trace
  f.locals[2] = d2.get();
  EXPECT_FALSE(gs.check(f.view(), slots, syms));
}


// Shape guards run as a flat postfix program (Note [Shape guards as a program]), or, past the
// program's stack depth, as trees: both must agree with SymInt::evaluate on every size.
TEST(GuardSet, ShapeProgramAgreesWithTreeEvaluation) {
  using jit::SymInt;
  SymInt s0 = SymInt::symbol(0), s1 = SymInt::symbol(1);
  // Right-nested: each level needs one more stack entry; 40 levels is past the program's stack.
  SymInt deep = s0;
  for (int i = 0; i < 40; ++i) deep = (i % 2 ? mod(s1 + SymInt(i), deep) : floordiv(s0 * SymInt(3), deep)) + s1;
  struct Case {
    SymInt lhs;
    CmpOp op;
    int64_t rhs;
  };
  const std::vector<Case> shallow = {
      {s0 * s1, CmpOp::Ge, 12},       {floordiv(s0, SymInt(3)), CmpOp::Ne, 2},
      {mod(s0 + s1, SymInt(4)), CmpOp::Lt, 3}, {s0 - s1, CmpOp::Le, 5},
      {floordiv(s0 * s1 + SymInt(7), s1), CmpOp::Gt, 3},
  };
  for (bool with_deep : {false, true}) {
    GuardSet gs;
    TensorGuard g;
    g.type = numpy_handles()->ndarray;
    g.type_num = 11;  // NPY_FLOAT
    g.ndim = 2;
    g.sizes = {TensorGuard::kSymbolic, TensorGuard::kSymbolic};
    g.symbols = {0, 1};
    gs.add_tensor(local_source(0, "x"), g);
    gs.set_num_symbols(2);
    std::vector<Case> cases = shallow;
    if (with_deep) cases.push_back({deep, CmpOp::Ne, 17});
    for (const Case& c : cases) gs.add_shape({c.lhs, c.op, c.rhs, ""});
    int passed = 0, failed = 0;
    for (int n = 2; n <= 12; ++n)
      for (int m = 2; m <= 12; ++m) {
        std::string expr = "np.zeros((" + std::to_string(n) + ", " + std::to_string(m) + "), np.float32)";
        OwnedRef x = eval(expr.c_str());
        Frame f;
        f.locals = {x.get()};
        bool want = true;
        for (const Case& c : cases) {
          int64_t v = c.lhs.evaluate({n, m});
          bool ok = c.op == CmpOp::Ge ? v >= c.rhs : c.op == CmpOp::Ne ? v != c.rhs : c.op == CmpOp::Lt ? v < c.rhs
                  : c.op == CmpOp::Le ? v <= c.rhs : c.op == CmpOp::Gt ? v > c.rhs : v == c.rhs;
          want = want && ok;
        }
        PyObject* slots[2];
        int64_t syms[2];
        EXPECT_EQ(gs.check(f.view(), slots, syms), want) << "shape (" << n << ", " << m << ") deep=" << with_deep;
        EXPECT_EQ(gs.check_verbose(f.view()).empty(), want) << "shape (" << n << ", " << m << ")";
        (want ? passed : failed)++;
      }
    // The cases must split the sizes, or the test could not tell a wrong evaluator from a right one.
    EXPECT_GT(passed, 5);
    EXPECT_GT(failed, 5);
  }
}

}  // namespace
}  // namespace framejit::frontend
