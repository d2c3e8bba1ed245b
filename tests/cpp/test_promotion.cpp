// test_promotion.cpp — the native dtype rules (frontend/ops/numpy/promotion.h) on facts from NEP 50 and
// NumPy's ufunc loop tables; tests/python/test_promotion.py checks every case against NumPy itself.
#include <gtest/gtest.h>

#include <vector>

#include "frontend/ops/numpy/promotion.h"

namespace framejit::frontend::ops {
namespace {

using rt::DType;
using Op = PromoOperand;

constexpr DType kB = DType::Bool, kI8 = DType::Int8, kI16 = DType::Int16, kI32 = DType::Int32,
                kI64 = DType::Int64, kU8 = DType::UInt8, kU16 = DType::UInt16, kU32 = DType::UInt32,
                kU64 = DType::UInt64, kF16 = DType::Float16, kF32 = DType::Float32,
                kF64 = DType::Float64;
const std::vector<DType> kComputable = {kB,   kI8,  kI16, kI32, kI64, kU8,
                                        kU16, kU32, kU64, kF32, kF64};

Op T(DType t) { return Op::tensor(t); }

// "ok f32" / "type_error" / ... for compact expectations.
std::string answer(const PromoResult &r) {
  switch (r.status) {
  case PromoStatus::Ok:
    return "ok " + std::string(rt::dtype_short_name(r.dtype));
  case PromoStatus::TypeError:
    return "type_error";
  case PromoStatus::Overflow:
    return "overflow";
  case PromoStatus::Unsupported:
    return "unsupported";
  }
  return "?";
}

std::string bin(std::string_view op, Op a, Op b) { return answer(elementwise_result(op, {a, b})); }
std::string un(std::string_view op, Op a) { return answer(elementwise_result(op, {a})); }

TEST(PromoteTypes, Table) {
  EXPECT_EQ(promote_types(kI8, kU8), kI16);
  EXPECT_EQ(promote_types(kI16, kU16), kI32);
  EXPECT_EQ(promote_types(kI32, kU32), kI64);
  EXPECT_EQ(promote_types(kI64, kU64), kF64);
  EXPECT_EQ(promote_types(kI8, kU64), kF64);
  EXPECT_EQ(promote_types(kI64, kU32), kI64);
  EXPECT_EQ(promote_types(kU8, kI16), kI16);
  EXPECT_EQ(promote_types(kB, kU16), kU16);
  EXPECT_EQ(promote_types(kI16, kF32), kF32);
  EXPECT_EQ(promote_types(kI32, kF32), kF64);
  EXPECT_EQ(promote_types(kU64, kF32), kF64);
  EXPECT_EQ(promote_types(kI8, kF16), kF16);
  EXPECT_EQ(promote_types(kI16, kF16), kF32);
  EXPECT_EQ(promote_types(kF16, kF64), kF64);
  EXPECT_FALSE(promote_types(kF32, DType::Complex64).has_value());
  // Symmetric, and consistent with safe casting: both cast safely to the promoted type.
  for (DType a : kComputable)
    for (DType b : kComputable) {
      EXPECT_EQ(promote_types(a, b), promote_types(b, a));
      EXPECT_TRUE(can_cast_safely(a, *promote_types(a, b)));
      EXPECT_TRUE(can_cast_safely(b, *promote_types(a, b)));
    }
}

TEST(CanCast, SafeAndSameKind) {
  EXPECT_TRUE(can_cast_safely(kI64, kF64));
  EXPECT_FALSE(can_cast_safely(kI32, kF32));
  EXPECT_TRUE(can_cast_safely(kU8, kF16));
  EXPECT_FALSE(can_cast_safely(kI8, kU64));
  EXPECT_TRUE(can_cast_safely(kU32, kI64));
  EXPECT_FALSE(can_cast_safely(kF32, kI64));
  EXPECT_TRUE(can_cast_same_kind(kF64, kF32));
  EXPECT_TRUE(can_cast_same_kind(kU64, kI8));
  EXPECT_FALSE(can_cast_same_kind(kI64, kU8));
  EXPECT_FALSE(can_cast_same_kind(kF64, kI32));
  EXPECT_FALSE(can_cast_same_kind(kI8, kB));
}

// NEP 50: Python scalars never widen the tensor's dtype within its category.
TEST(Elementwise, WeakScalars) {
  EXPECT_EQ(bin("add", T(kI8), Op::py_int()), "ok i8");
  EXPECT_EQ(bin("add", Op::py_int(), T(kU16)), "ok u16");
  EXPECT_EQ(bin("add", T(kB), Op::py_int()), "ok i64");
  EXPECT_EQ(bin("add", T(kI8), Op::py_float()), "ok f64");
  EXPECT_EQ(bin("add", T(kB), Op::py_float()), "ok f64");
  EXPECT_EQ(bin("add", T(kF32), Op::py_float()), "ok f32");
  EXPECT_EQ(bin("add", T(kF32), Op::py_int()), "ok f32");
  EXPECT_EQ(bin("multiply", T(kU64), Op::py_int()), "ok u64");
  // A Python bool is an ordinary bool operand.
  EXPECT_EQ(bin("add", T(kI8), Op::py_bool()), "ok i8");
  EXPECT_EQ(bin("subtract", T(kB), Op::py_bool()), "type_error");
  // Python scalars alone take the default dtypes.
  EXPECT_EQ(bin("add", Op::py_int(), Op::py_int()), "ok i64");
  EXPECT_EQ(bin("add", Op::py_int(), Op::py_float()), "ok f64");
  EXPECT_EQ(bin("add", Op::py_bool(), Op::py_bool()), "ok b8");
  EXPECT_EQ(un("exp", Op::py_int()), "ok f64");
  EXPECT_EQ(un("negative", Op::py_bool()), "type_error");
  // Loop-table ops see the scalar in the tensor's category too.
  EXPECT_EQ(bin("power", T(kI8), Op::py_int()), "ok i8");
  EXPECT_EQ(bin("power", T(kB), Op::py_int()), "ok i64");
  EXPECT_EQ(bin("arctan2", T(kF32), Op::py_float()), "ok f32");
  EXPECT_EQ(bin("arctan2", T(kI32), Op::py_float()), "ok f64");
  EXPECT_EQ(bin("true_divide", T(kI8), Op::py_int()), "ok f64");
  EXPECT_EQ(bin("true_divide", T(kF32), Op::py_int()), "ok f32");
  EXPECT_EQ(bin("floor_divide", T(kU8), Op::py_int()), "ok u8");
}

TEST(Elementwise, OperandDtypesAreTheLoop) {
  PromoResult r = elementwise_result("add", {T(kI8), Op::py_float()});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.operand_dtypes, (std::vector<DType>{kF64, kF64}));
  r = elementwise_result("less", {T(kI64), T(kU64)});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.dtype, kB);
  EXPECT_EQ(r.operand_dtypes, (std::vector<DType>{kI64, kU64})); // exact mixed compare
  r = elementwise_result("where", {T(kF32), Op::py_int(), Op::py_float()});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r.dtype, kF64); // the condition takes no part in the promotion
  EXPECT_EQ(r.operand_dtypes, (std::vector<DType>{kB, kF64, kF64}));
}

TEST(Elementwise, ArrayPairs) {
  EXPECT_EQ(bin("add", T(kI8), T(kU8)), "ok i16");
  EXPECT_EQ(bin("add", T(kB), T(kB)), "ok b8");
  EXPECT_EQ(bin("add", T(kI64), T(kU64)), "ok f64");
  EXPECT_EQ(bin("true_divide", T(kI8), T(kI8)), "ok f64");
  EXPECT_EQ(bin("true_divide", T(kB), T(kB)), "ok f64");
  EXPECT_EQ(bin("true_divide", T(kI8), T(kF32)), "ok f32");
  EXPECT_EQ(bin("true_divide", T(kI32), T(kF32)), "ok f64");
  EXPECT_EQ(bin("floor_divide", T(kB), T(kB)), "ok i8");
  EXPECT_EQ(bin("remainder", T(kB), T(kB)), "ok i8");
  EXPECT_EQ(bin("power", T(kB), T(kB)), "ok i8");
  EXPECT_EQ(bin("fmod", T(kI64), T(kU64)), "ok f64");
  EXPECT_EQ(bin("arctan2", T(kI8), T(kU8)), "unsupported"); // float16 in NumPy
  EXPECT_EQ(bin("arctan2", T(kI16), T(kU8)), "ok f32");
  EXPECT_EQ(bin("hypot", T(kB), T(kB)), "unsupported");
  EXPECT_EQ(bin("copysign", T(kI64), T(kU64)), "ok f64");
  EXPECT_EQ(bin("maximum", T(kB), T(kB)), "ok b8");
  EXPECT_EQ(bin("fmin", T(kI64), T(kU64)), "ok f64");
  EXPECT_EQ(bin("subtract", T(kB), T(kB)), "type_error");
  EXPECT_EQ(bin("subtract", T(kB), T(kI8)), "ok i8");
  for (const char *cmp : {"equal", "not_equal", "less", "less_equal", "greater", "greater_equal"})
    for (DType a : kComputable)
      for (DType b : kComputable)
        EXPECT_EQ(bin(cmp, T(a), T(b)), "ok b8");
  for (const char *lg : {"logical_and", "logical_or", "logical_xor"})
    EXPECT_EQ(bin(lg, T(kF32), Op::py_int()), "ok b8");
  EXPECT_EQ(bin("bitwise_and", T(kB), T(kB)), "ok b8");
  EXPECT_EQ(bin("bitwise_or", T(kI8), T(kU8)), "ok i16");
  EXPECT_EQ(bin("bitwise_xor", T(kI64), T(kU64)), "type_error");
  EXPECT_EQ(bin("bitwise_and", T(kF32), T(kI8)), "type_error");
  EXPECT_EQ(bin("left_shift", T(kB), T(kB)), "ok i8");
  EXPECT_EQ(bin("right_shift", T(kF64), Op::py_int()), "type_error");
  EXPECT_EQ(bin("add", T(kF16), T(kF32)), "unsupported");
  EXPECT_EQ(bin("add", T(DType::Complex64), T(kF32)), "unsupported");
}

TEST(Elementwise, Unary) {
  EXPECT_EQ(un("negative", T(kB)), "type_error");
  EXPECT_EQ(un("positive", T(kB)), "type_error");
  EXPECT_EQ(un("sign", T(kB)), "type_error");
  EXPECT_EQ(un("negative", T(kU8)), "ok u8");
  EXPECT_EQ(un("absolute", T(kB)), "ok b8");
  EXPECT_EQ(un("abs", T(kI16)), "ok i16");
  EXPECT_EQ(un("square", T(kB)), "ok i8");
  EXPECT_EQ(un("reciprocal", T(kB)), "ok i8");
  EXPECT_EQ(un("invert", T(kB)), "ok b8");
  EXPECT_EQ(un("invert", T(kF32)), "type_error");
  EXPECT_EQ(un("logical_not", T(kF64)), "ok b8");
  // Float functions: the smallest float holding the input (int8 -> float16: unsupported).
  for (const char *f : {"sqrt", "exp", "log", "sin", "tanh", "arccosh", "cbrt", "rint", "fabs",
                        "deg2rad", "rad2deg", "exp2", "log1p"}) {
    EXPECT_EQ(un(f, T(kB)), "unsupported") << f;
    EXPECT_EQ(un(f, T(kI8)), "unsupported") << f;
    EXPECT_EQ(un(f, T(kU8)), "unsupported") << f;
    EXPECT_EQ(un(f, T(kI16)), "ok f32") << f;
    EXPECT_EQ(un(f, T(kU16)), "ok f32") << f;
    EXPECT_EQ(un(f, T(kI32)), "ok f64") << f;
    EXPECT_EQ(un(f, T(kU64)), "ok f64") << f;
    EXPECT_EQ(un(f, T(kF32)), "ok f32") << f;
  }
  // NumPy >= 2.1: floor/ceil/trunc keep integer and bool dtypes.
  for (const char *f : {"floor", "ceil", "trunc"})
    for (DType t : kComputable)
      EXPECT_EQ(un(f, T(t)), "ok " + std::string(rt::dtype_short_name(t))) << f;
  for (const char *f : {"isnan", "isinf", "isfinite", "signbit"})
    for (DType t : kComputable)
      EXPECT_EQ(un(f, T(t)), "ok b8") << f;
  PromoResult r = elementwise_result("signbit", {T(kI8)});
  EXPECT_EQ(r.operand_dtypes, std::vector<DType>{kI8});
}

TEST(Elementwise, PythonIntRange) {
  auto I = [](int64_t v) { return Op::py_int(PyIntValue::of(v)); };
  EXPECT_EQ(bin("add", T(kI8), I(127)), "ok i8");
  EXPECT_EQ(bin("add", T(kI8), I(-128)), "ok i8");
  EXPECT_EQ(bin("add", T(kI8), I(128)), "overflow");
  EXPECT_EQ(bin("add", T(kI8), I(-129)), "overflow");
  EXPECT_EQ(bin("add", T(kU8), I(-1)), "overflow");
  EXPECT_EQ(bin("add", T(kU8), I(255)), "ok u8");
  EXPECT_EQ(bin("power", T(kI16), I(40000)), "overflow");
  EXPECT_EQ(bin("add", T(kU64), Op::py_int(PyIntValue::of_unsigned(~uint64_t(0)))), "ok u64");
  EXPECT_EQ(bin("add", T(kI64), Op::py_int(PyIntValue::of_unsigned(uint64_t(1) << 63))),
            "overflow");
  EXPECT_EQ(bin("add", T(kU64), Op::py_int(PyIntValue::huge(false))), "overflow");
  EXPECT_EQ(bin("add", T(kB), Op::py_int(PyIntValue::huge(true))), "overflow"); // via int64
  EXPECT_EQ(bin("add", T(kF32), Op::py_int(PyIntValue::huge(false))), "ok f32");
  EXPECT_EQ(bin("true_divide", T(kI8), I(1000)), "ok f64"); // computed in float64
  EXPECT_EQ(bin("logical_and", T(kI8), I(1000)), "ok b8");
  // ... but a logical op reads a Python int as a C long first: past int64 NumPy 2 raises.
  EXPECT_EQ(bin("logical_or", T(kU64), Op::py_int(PyIntValue::of_unsigned(uint64_t(1) << 63))),
            "overflow");
  EXPECT_EQ(bin("logical_xor", Op::py_int(PyIntValue::huge(true)), T(kF32)), "overflow");
  // NumPy 2 compares integer arrays with any Python int exactly (a constant result): refused.
  EXPECT_EQ(bin("less", T(kI8), I(1000)), "unsupported");
  EXPECT_EQ(bin("less", T(kI8), I(100)), "ok b8");
  EXPECT_EQ(bin("equal", T(kB), Op::py_int(PyIntValue::huge(false))), "overflow");
  // clip drops a bound outside an integer array's range (NumPy >= 2.1): refused.
  EXPECT_EQ(answer(elementwise_result("clip", {T(kI8), I(0), I(1000)})), "unsupported");
  EXPECT_EQ(answer(elementwise_result("clip", {T(kI8), T(kI16), I(1000)})), "unsupported");
  EXPECT_EQ(answer(elementwise_result("clip", {T(kI8), I(0), I(100)})), "ok i8");
  EXPECT_EQ(answer(elementwise_result("clip", {T(kB), I(0), I(1000)})), "ok i64");
  EXPECT_EQ(answer(elementwise_result("where", {T(kB), T(kI8), I(1000)})), "unsupported");
}

TEST(Elementwise, ClipAndWhere) {
  EXPECT_EQ(answer(elementwise_result("clip", {T(kI8), T(kU8), T(kI16)})), "ok i16");
  EXPECT_EQ(answer(elementwise_result("clip", {T(kB), T(kB), T(kB)})), "ok b8");
  EXPECT_EQ(answer(elementwise_result("clip", {T(kI8), Op::py_int(), Op::py_float()})), "ok f64");
  EXPECT_EQ(answer(elementwise_result("clip", {T(kF32), Op::py_int(), Op::py_float()})), "ok f32");
  EXPECT_EQ(answer(elementwise_result("where", {T(kB), T(kI8), T(kU8)})), "ok i16");
  EXPECT_EQ(answer(elementwise_result("where", {T(kF32), T(kI8), T(kI8)})), "ok i8");
  EXPECT_EQ(answer(elementwise_result("where", {T(kB), T(kI8), Op::py_int()})), "ok i8");
  EXPECT_EQ(answer(elementwise_result("where", {T(kB), Op::py_int(), Op::py_int()})), "ok i64");
}

TEST(Elementwise, NamesAndArity) {
  EXPECT_EQ(bin("divide", T(kI8), T(kI8)), "ok f64");
  EXPECT_EQ(bin("mod", T(kI8), T(kI8)), "ok i8");
  EXPECT_EQ(bin("pow", T(kI8), T(kI8)), "ok i8");
  EXPECT_EQ(bin("atan2", T(kF32), T(kF32)), "ok f32");
  EXPECT_EQ(un("bitwise_not", T(kU8)), "ok u8");
  EXPECT_EQ(un("acos", T(kF32)), "ok f32");
  EXPECT_EQ(un("frexp", T(kF32)), "unsupported");
  EXPECT_EQ(un("add", T(kF32)), "unsupported");
}

TEST(Inplace, SameKindCast) {
  auto ip = [](std::string_view op, Op a, Op b) { return answer(inplace_result(op, {a, b})); };
  EXPECT_EQ(ip("add", T(kI8), Op::py_float()), "type_error");
  EXPECT_EQ(ip("add", T(kI8), Op::py_int()), "ok i8");
  EXPECT_EQ(ip("add", T(kF32), T(kF64)), "ok f32");
  EXPECT_EQ(ip("add", T(kI8), T(kU64)), "type_error"); // float64 result
  EXPECT_EQ(ip("add", T(kU8), T(kI8)), "type_error");  // int16 result: signed to unsigned
  EXPECT_EQ(ip("true_divide", T(kI32), T(kI32)), "type_error");
  EXPECT_EQ(ip("add", T(kB), T(kB)), "ok b8");
  EXPECT_EQ(ip("add", T(kB), Op::py_int()), "type_error");
}

TEST(Reductions, Dtypes) {
  auto red = [](std::string_view op, DType t, std::optional<DType> kw = std::nullopt) {
    return answer(reduction_result(op, t, kw));
  };
  for (const char *op : {"sum", "prod"}) {
    EXPECT_EQ(red(op, kB), "ok i64");
    EXPECT_EQ(red(op, kI8), "ok i64");
    EXPECT_EQ(red(op, kI32), "ok i64");
    EXPECT_EQ(red(op, kU8), "ok u64");
    EXPECT_EQ(red(op, kU64), "ok u64");
    EXPECT_EQ(red(op, kF32), "ok f32");
    EXPECT_EQ(red(op, kF32, kI8), "ok i8");
    EXPECT_EQ(red(op, kI8, kB), "ok b8");
    EXPECT_EQ(red(op, kI8, kF16), "unsupported");
  }
  for (const char *op : {"mean", "var", "std"}) {
    EXPECT_EQ(red(op, kB), "ok f64");
    EXPECT_EQ(red(op, kU64), "ok f64");
    EXPECT_EQ(red(op, kF32), "ok f32");
    EXPECT_EQ(red(op, kI8, kF32), "ok f32");
    EXPECT_EQ(red(op, kF64, kF32), "ok f32");
    EXPECT_EQ(red(op, kI8, kI32), "unsupported");
  }
  for (const char *op : {"max", "min", "amax", "amin"}) {
    EXPECT_EQ(red(op, kB), "ok b8");
    EXPECT_EQ(red(op, kU16), "ok u16");
    EXPECT_EQ(red(op, kU16, kF64), "type_error");
  }
  EXPECT_EQ(red("argmax", kF32), "ok i64");
  EXPECT_EQ(red("argmin", kB), "ok i64");
  EXPECT_EQ(red("any", kF32), "ok b8");
  EXPECT_EQ(red("all", kI8), "ok b8");
  EXPECT_EQ(red("sum", kF16), "unsupported");
  EXPECT_EQ(red("median", kF32), "unsupported");
}

TEST(Matmul, Promotion) {
  EXPECT_EQ(answer(matmul_result(kB, kB)), "ok b8");
  EXPECT_EQ(answer(matmul_result(kI8, kU8)), "ok i16");
  EXPECT_EQ(answer(matmul_result(kI64, kU64)), "ok f64");
  EXPECT_EQ(answer(matmul_result(kI16, kF32)), "ok f32");
  EXPECT_EQ(answer(matmul_result(kF16, kF32)), "unsupported");
}

TEST(Operators, UfuncNames) {
  EXPECT_EQ(ufunc_for_operator("add"), "add");
  EXPECT_EQ(ufunc_for_operator("sub"), "subtract");
  EXPECT_EQ(ufunc_for_operator("truediv"), "true_divide");
  EXPECT_EQ(ufunc_for_operator("mod"), "remainder");
  EXPECT_EQ(ufunc_for_operator("and_"), "bitwise_and");
  EXPECT_EQ(ufunc_for_operator("neg"), "negative");
  EXPECT_EQ(ufunc_for_operator("invert"), "invert");
  EXPECT_EQ(ufunc_for_operator("inv"), "invert");
  EXPECT_EQ(ufunc_for_operator("abs"), "absolute");
  EXPECT_EQ(ufunc_for_operator("matmul"), "matmul");
  EXPECT_EQ(ufunc_for_operator("iadd"), "add");
  EXPECT_EQ(ufunc_for_operator("iand"), "bitwise_and");
  EXPECT_EQ(ufunc_for_operator("ifloordiv"), "floor_divide");
  EXPECT_EQ(ufunc_for_operator("ineg"), std::nullopt);
  EXPECT_EQ(ufunc_for_operator("getitem"), std::nullopt);
}

} // namespace
} // namespace framejit::frontend::ops
