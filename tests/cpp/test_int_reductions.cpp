// test_int_reductions.cpp — reductions of bool, int32, int64 and uint8 values through the executor
// (Note [Integer reductions] in jit/x86/reduction_codegen.cpp): every op (sum and prod in the
// platform integer with wrap-around, max/min in the input type, mean in float64, argmax/argmin)
// in every form (row, column, single-axis and flattened arg), C, F and strided layouts, sizes 1, 7,
// 33 and 1000 (vector tails), against an exact reference. Results must be identical bit for bit,
// and identical for any thread count.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "jit/x86/reduction_codegen.h"
#include "runtime/executor.h"
#include "runtime/threads.h"

namespace framejit::jit {
namespace {

using x86::Isa;

std::vector<Isa> host_isas() {
  std::vector<Isa> out{Isa::Scalar};
  if (x86::cpu_isa() >= Isa::Avx2) out.push_back(Isa::Avx2);
  if (x86::cpu_isa() >= Isa::Avx512) out.push_back(Isa::Avx512);
  return out;
}

const DType kInts[] = {DType::Bool, DType::Int32, DType::Int64, DType::UInt8};

// The type NumPy 1.24 combines `in` in for `op` (mean: float64).
DType value_dtype(ReduceOp op, DType in, bool mean) {
  if (mean) return DType::Float64;
  if (op == ReduceOp::Sum || op == ReduceOp::Prod) return in == DType::UInt8 ? DType::UInt64 : DType::Int64;
  return in;
}

// load(in) [-> cast to the value dtype], as fusion builds it.
ReductionKernelIR int_ir(ReduceOp op, DType in, bool mean = false) {
  ReductionKernelIR r;
  r.op = op;
  r.mean = mean;
  r.prologue.input_dtypes = {in};
  r.prologue.body = {{ScalarOp::Load, in, -1, -1, 0, 0}};
  const DType v = value_dtype(op, in, mean);
  if (v != in) r.prologue.body.push_back({ScalarOp::Cast, v, 0, -1, -1, 0});
  r.prologue.outputs = {static_cast<int>(r.prologue.body.size()) - 1};
  r.prologue.output_dtypes = {v};
  return r;
}

// Elements as int64: the dtype's value (uint8/bool zero-extended, int32 sign-extended; uint64 and
// int64 as their bits).
void write_elem(char* p, DType t, int64_t v) { std::memcpy(p, &v, rt::dtype_itemsize(t)); }
int64_t read_elem(const char* p, DType t) {
  switch (t) {
    case DType::Bool:
    case DType::UInt8: return static_cast<uint8_t>(*p);
    case DType::Int32: {
      int32_t v;
      std::memcpy(&v, p, 4);
      return v;
    }
    default: {
      int64_t v;
      std::memcpy(&v, p, 8);
      return v;
    }
  }
}

enum class Layout { C, F, Sliced };  // Sliced: C order with every other element of the last dim

struct Case {
  std::vector<int64_t> shape;
  std::vector<bool> reduced;
  Layout layout = Layout::C;
};

std::string describe(const Case& c) {
  std::string s = "shape (";
  for (size_t d = 0; d < c.shape.size(); ++d)
    s += std::to_string(c.shape[d]) + (c.reduced[d] ? "r" : "") + (d + 1 < c.shape.size() ? ", " : "");
  return s + ") layout " + std::to_string(static_cast<int>(c.layout));
}

std::vector<Case> cases() {
  std::vector<Case> cs;
  for (int64_t n : {1, 7, 33, 1000}) {
    for (Layout lay : {Layout::C, Layout::F, Layout::Sliced}) {
      cs.push_back({{n}, {true}, lay});                      // everything
      cs.push_back({{5, n}, {true, false}, lay});            // axis 0: columns (C)
      cs.push_back({{5, n}, {false, true}, lay});            // axis 1: rows (C)
      cs.push_back({{n, 3}, {true, false}, lay});            // axis 0, few outputs
      cs.push_back({{3, n, 4}, {true, false, true}, lay});   // axes (0, 2)
      cs.push_back({{2, 3, n}, {false, true, false}, lay});  // middle axis, kept inner
      cs.push_back({{2, 3, n}, {true, true, true}, lay});    // everything, 3-D
    }
  }
  cs.push_back({{4, 1, 6}, {false, true, false}, Layout::C});  // a reduced dim of size 1
  cs.push_back({{300, 70}, {true, false}, Layout::C});         // many rows
  cs.push_back({{3, 9000}, {true, false}, Layout::C});         // kept dim split to feed threads
  return cs;
}

// An input of dtype t laid out as `c` asks, element (flat C-order index) from `values`.
struct Input {
  std::vector<char> storage;
  std::vector<int64_t> strides;  // bytes
};

Input make_input(const Case& c, DType t, const std::vector<int64_t>& values) {
  const int rank = static_cast<int>(c.shape.size());
  const int item = rt::dtype_itemsize(t);
  Input in;
  in.strides.assign(rank, 0);
  int64_t elems = 1;
  for (int64_t s : c.shape) elems *= s;
  const int64_t step = c.layout == Layout::Sliced ? 2 : 1;
  in.storage.assign(std::max<int64_t>(elems * step, 1) * item, static_cast<char>(0x5a));
  int64_t acc = item * step;
  if (c.layout == Layout::F) {
    for (int d = 0; d < rank; ++d) {
      in.strides[d] = acc;
      acc *= c.shape[d];
    }
  } else {
    for (int d = rank - 1; d >= 0; --d) {
      in.strides[d] = acc;
      acc *= c.shape[d];
    }
  }
  for (int64_t flat = 0; flat < elems; ++flat) {
    int64_t rem = flat, off = 0;
    for (int d = rank - 1; d >= 0; --d) {
      off += (rem % c.shape[d]) * in.strides[d];
      rem /= c.shape[d];
    }
    write_elem(in.storage.data() + off, t, values[flat]);
  }
  return in;
}

struct Kernels {
  rt::KernelPtr row, column;
};

Kernels build(const ReductionKernelIR& ir, Isa isa) {
  EXPECT_TRUE(x86::reduction_supported(ir, isa)) << ir.to_string();
  Kernels k;
  auto row = x86::generate_reduction(ir, isa, false);
  EXPECT_TRUE(row) << row.error().message();
  if (row) k.row = *row;
  if (!is_arg_reduce(ir.op)) {
    auto column = x86::generate_column_reduction(ir, isa, false);
    EXPECT_TRUE(column) << column.error().message();
    if (column) k.column = *column;
  }
  return k;
}

// The results' bytes (C-contiguous over the kept dims, as NumPy allocates them).
std::vector<char> run(const Kernels& k, const ReductionKernelIR& ir, const Case& c, DType in_dtype, Input& in,
                      int threads) {
  const int rank = static_cast<int>(c.shape.size());
  const int item = rt::dtype_itemsize(ir.result_dtype());
  int64_t outputs = 1;
  for (int d = 0; d < rank; ++d)
    if (!c.reduced[d]) outputs *= c.shape[d];
  std::vector<char> out(std::max<int64_t>(outputs, 1) * item, static_cast<char>(0x77));
  std::vector<int64_t> out_strides(rank, 0);
  int64_t acc = item;
  for (int d = rank - 1; d >= 0; --d)
    if (!c.reduced[d]) {
      out_strides[d] = acc;
      acc *= c.shape[d];
    }
  rt::Operand op[1] = {{in.storage.data(), in.strides.data(), rt::dtype_itemsize(in_dtype)}};
  std::unique_ptr<bool[]> reduced(new bool[rank]);
  for (int d = 0; d < rank; ++d) reduced[d] = c.reduced[d];
  rt::ReductionLaunch l;
  l.row = k.row.get();
  l.column = k.column.get();
  l.arg = is_arg_reduce(ir.op);
  l.arg_max = ir.op == ReduceOp::ArgMax;
  // How split rows' partial results join (Note [Split column rows]), as rt::Program sets them.
  l.extreme = ir.op == ReduceOp::Max ? 1 : ir.op == ReduceOp::Min ? -1 : 0;
  l.product = ir.op == ReduceOp::Prod;
  l.value_dtype = ir.dtype();
  l.rank = rank;
  l.shape = c.shape.data();
  l.reduced = reduced.get();
  l.num_inputs = 1;
  l.inputs = op;
  l.out = out.data();
  l.out_strides = out_strides.data();
  rt::set_num_threads(threads);
  rt::run_reduction(l);
  rt::set_num_threads(0);
  return out;
}

// The exact reference, per output (kept dims in C order) over its elements in C order: sums and
// products modulo 2**64 (then truncated to the result's width by the comparison), max/min and the
// arg forms on the values, means in double (the test values keep every partial sum exact).
std::vector<char> reference(const ReductionKernelIR& ir, const Case& c, const std::vector<int64_t>& values) {
  const int rank = static_cast<int>(c.shape.size());
  const DType rt_ = ir.result_dtype();
  int64_t outputs = 1, count = 1, elems = 1;
  for (int d = 0; d < rank; ++d) {
    (c.reduced[d] ? count : outputs) *= c.shape[d];
    elems *= c.shape[d];
  }
  std::vector<uint64_t> acc(outputs);
  std::vector<int64_t> best(outputs), index(outputs);
  std::vector<double> sum(outputs, 0);
  std::vector<bool> seen(outputs, false);
  for (int64_t flat = 0; flat < elems; ++flat) {
    int64_t rem = flat, o = 0, o_mul = 1, r = 0, r_mul = 1;
    for (int d = rank - 1; d >= 0; --d) {
      const int64_t i = rem % c.shape[d];
      rem /= c.shape[d];
      if (c.reduced[d]) {
        r += i * r_mul;
        r_mul *= c.shape[d];
      } else {
        o += i * o_mul;
        o_mul *= c.shape[d];
      }
    }
    const int64_t v = values[flat];
    const bool first = !seen[o];
    seen[o] = true;
    sum[o] += static_cast<double>(v);
    switch (ir.op) {
      case ReduceOp::Sum: acc[o] = (first ? 0 : acc[o]) + static_cast<uint64_t>(v); break;
      case ReduceOp::Prod: acc[o] = (first ? 1 : acc[o]) * static_cast<uint64_t>(v); break;
      case ReduceOp::Max:
      case ReduceOp::ArgMax:
        if (first || v > best[o]) best[o] = v, index[o] = r;
        break;
      case ReduceOp::Min:
      case ReduceOp::ArgMin:
        if (first || v < best[o]) best[o] = v, index[o] = r;
        break;
    }
  }
  const int item = rt::dtype_itemsize(rt_);
  std::vector<char> out(outputs * item);
  for (int64_t o = 0; o < outputs; ++o) {
    char* p = out.data() + o * item;
    if (ir.mean) {
      const double m = sum[o] / static_cast<double>(count);
      std::memcpy(p, &m, 8);
    } else if (is_arg_reduce(ir.op)) {
      write_elem(p, rt_, index[o]);
    } else if (ir.op == ReduceOp::Max || ir.op == ReduceOp::Min) {
      write_elem(p, rt_, best[o]);
    } else {
      write_elem(p, rt_, static_cast<int64_t>(acc[o]));
    }
  }
  return out;
}

// Values of `t` for `op`: the full range for sums and products (they wrap), a few distinct ones
// for the arg forms (ties), small ones for means (exact float64 sums).
std::vector<int64_t> make_values(DType t, ReduceOp op, bool mean, int64_t elems, uint32_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<int64_t> v(elems);
  for (auto& x : v) {
    const uint64_t bits = rng();
    switch (t) {
      case DType::Bool: x = static_cast<int64_t>(bits >> 63); break;
      case DType::UInt8: x = static_cast<int64_t>(bits >> 56); break;
      case DType::Int32: x = static_cast<int32_t>(bits >> 32); break;
      default: x = static_cast<int64_t>(bits); break;
    }
    if (mean && t != DType::Bool && t != DType::UInt8) x %= 1 << 20;
    if (is_arg_reduce(op) && t != DType::Bool) x %= 5;  // ties
  }
  return v;
}

void check_case(Isa isa, const ReductionKernelIR& ir, DType in_dtype, const Case& c, uint32_t seed) {
  int64_t elems = 1;
  for (int64_t s : c.shape) elems *= s;
  std::vector<int64_t> values = make_values(in_dtype, ir.op, ir.mean, elems, seed);
  Input in = make_input(c, in_dtype, values);
  const Kernels k = build(ir, isa);
  const std::vector<char> want = reference(ir, c, values);
  const std::string what = std::string(x86::isa_name(isa)) + " " + ir.to_string() + " " + describe(c);
  const std::vector<char> got = run(k, ir, c, in_dtype, in, 2);
  const int item = rt::dtype_itemsize(ir.result_dtype());
  for (size_t o = 0; o * item < want.size(); ++o)
    ASSERT_EQ(read_elem(got.data() + o * item, ir.result_dtype()), read_elem(want.data() + o * item, ir.result_dtype()))
        << what << " output " << o;
  for (int threads : {1, 4})
    ASSERT_EQ(run(k, ir, c, in_dtype, in, threads), got) << what << ": depends on the thread count " << threads;
}

class IntReductions : public ::testing::TestWithParam<Isa> {};

TEST_P(IntReductions, SumProdMaxMinEveryDtypeAndForm) {
  uint32_t seed = 1;
  for (DType t : kInts)
    for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Prod, ReduceOp::Max, ReduceOp::Min})
      for (const Case& c : cases()) check_case(GetParam(), int_ir(op, t), t, c, seed++);
}

TEST_P(IntReductions, MeansInFloat64) {
  uint32_t seed = 100;
  for (DType t : kInts)
    for (const Case& c : cases()) check_case(GetParam(), int_ir(ReduceOp::Sum, t, true), t, c, seed++);
}

TEST_P(IntReductions, ArgMaxArgMinSingleAxisAndFlattened) {
  uint32_t seed = 200;
  for (DType t : kInts)
    for (ReduceOp op : {ReduceOp::ArgMax, ReduceOp::ArgMin})
      for (const Case& c : cases()) {
        int nred = 0;
        for (bool r : c.reduced) nred += r;
        if (nred != 1 && nred != static_cast<int>(c.shape.size())) continue;  // one axis, or all of them
        check_case(GetParam(), int_ir(op, t), t, c, seed++);
      }
}

// Overflow wraps: int64 sums past 2**63, int32 values summed without int32 overflow (they
// accumulate in int64), uint8 products modulo 2**64 in uint64.
TEST_P(IntReductions, WrapAround) {
  const Case c{{1000}, {true}, Layout::C};
  auto one = [&](ReduceOp op, DType t, int64_t fill, int64_t want) {
    std::vector<int64_t> values(1000, fill);
    Input in = make_input(c, t, values);
    const ReductionKernelIR ir = int_ir(op, t);
    const std::vector<char> got = run(build(ir, GetParam()), ir, c, t, in, 2);
    EXPECT_EQ(read_elem(got.data(), ir.result_dtype()), want) << ir.to_string();
  };
  one(ReduceOp::Sum, DType::Int64, int64_t{1} << 62, 0);                                    // 1000 * 2**62
  one(ReduceOp::Sum, DType::Int32, INT32_MAX, int64_t{1000} * INT32_MAX);                   // no int32 wrap
  one(ReduceOp::Sum, DType::UInt8, 255, 255000);                                            // no uint8 wrap
  one(ReduceOp::Prod, DType::UInt8, 2, 0);                                                  // 2**1000
  one(ReduceOp::Prod, DType::Int32, -1, 1);                                                 // (-1)**1000
  one(ReduceOp::Prod, DType::Int64, 3, static_cast<int64_t>(0x5616937bd3b85b21ull));        // 3**1000 mod 2**64
  one(ReduceOp::Max, DType::Int64, INT64_MIN, INT64_MIN);
  one(ReduceOp::Min, DType::Int64, INT64_MAX, INT64_MAX);
  one(ReduceOp::Min, DType::UInt8, 255, 255);
  one(ReduceOp::Max, DType::Int32, INT32_MIN, INT32_MIN);
}

// A prologue wider than the reduced value: (x > 0) of float64 x, summed (cast to int64) and
// argmax'ed as bool (a bool value in an 8-byte-wide vector loop: lanes past the count are
// don't-care and must not be picked).
TEST_P(IntReductions, ComparisonPrologues) {
  auto prologue = [](ReduceOp op) {
    ReductionKernelIR r;
    r.op = op;
    r.prologue.input_dtypes = {DType::Float64};
    r.prologue.body = {{ScalarOp::Load, DType::Float64, -1, -1, 0, 0},
                       {ScalarOp::Const, DType::Float64, -1, -1, -1, 0.5},
                       {ScalarOp::Gt, DType::Bool, 0, 1, -1, 0}};
    DType v = DType::Bool;
    if (op == ReduceOp::Sum) {
      r.prologue.body.push_back({ScalarOp::Cast, DType::Int64, 2, -1, -1, 0});
      v = DType::Int64;
    }
    r.prologue.outputs = {static_cast<int>(r.prologue.body.size()) - 1};
    r.prologue.output_dtypes = {v};
    return r;
  };
  for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Max, ReduceOp::Min, ReduceOp::ArgMax, ReduceOp::ArgMin}) {
    const ReductionKernelIR ir = prologue(op);
    const Kernels k = build(ir, GetParam());
    for (int64_t n : {1, 7, 33, 1000})
      for (int64_t hit : {int64_t{-1}, n - 1, n / 2, int64_t{0}}) {
        // x[i] = 1.0 at i == hit (or nowhere), 0 elsewhere; argmin sees the complement.
        const Case c{{n}, {true}, Layout::C};
        std::vector<double> x(n, op == ReduceOp::ArgMin ? 1.0 : 0.0);
        if (hit >= 0) x[hit] = op == ReduceOp::ArgMin ? 0.0 : 1.0;
        Input in;
        in.storage.assign(reinterpret_cast<char*>(x.data()), reinterpret_cast<char*>(x.data() + n));
        in.strides = {8};
        const std::vector<char> got = run(k, ir, c, DType::Float64, in, 1);
        const int64_t v = read_elem(got.data(), ir.result_dtype());
        const int64_t ones = op == ReduceOp::ArgMin ? n - (hit >= 0) : (hit >= 0);
        switch (op) {
          case ReduceOp::Sum: EXPECT_EQ(v, ones) << n << " " << hit; break;
          case ReduceOp::Max: EXPECT_EQ(v, hit >= 0 ? 1 : 0) << n << " " << hit; break;
          case ReduceOp::Min: EXPECT_EQ(v, n == 1 && hit >= 0 ? 1 : 0) << n << " " << hit; break;
          default: EXPECT_EQ(v, hit >= 0 ? hit : 0) << n << " " << hit; break;
        }
      }
  }
}

// int64 -> float64 in a mean's prologue rounds once, as cvtsi2sd does (AVX2 has no instruction
// for it: body_emitter_int.cpp composes it from the two halves). A column mean over one row
// converts every element alone: out[j] = double(x[j]) / 1.
TEST_P(IntReductions, Int64ToFloat64RoundsOnce) {
  std::vector<int64_t> x = {INT64_MIN, INT64_MAX, (int64_t{1} << 53) + 1, (int64_t{1} << 53) + 3,
                            -(int64_t{1} << 53) - 1, INT64_MAX - 1024, INT64_MAX - 1025, -1, 0,
                            int64_t{1} << 32, -(int64_t{1} << 32), (int64_t{1} << 32) - 1};
  std::mt19937_64 rng(3);
  while (x.size() < 1000) x.push_back(static_cast<int64_t>(rng() >> (rng() % 64)) * (rng() % 2 ? 1 : -1));
  const int64_t n = static_cast<int64_t>(x.size());
  const Case c{{1, n}, {true, false}, Layout::C};
  Input in = make_input(c, DType::Int64, x);
  const ReductionKernelIR ir = int_ir(ReduceOp::Sum, DType::Int64, true);
  const std::vector<char> got = run(build(ir, GetParam()), ir, c, DType::Int64, in, 1);
  for (int64_t j = 0; j < n; ++j) {
    double g;
    std::memcpy(&g, got.data() + 8 * j, 8);
    ASSERT_EQ(g, static_cast<double>(x[j])) << x[j];
  }
}

INSTANTIATE_TEST_SUITE_P(Isas, IntReductions, ::testing::ValuesIn(host_isas()),
                         [](const auto& info) { return std::string(x86::isa_name(info.param)); });

// Every integer form at every ISA, also those the host cannot run (AVX-512 is then assembled
// only), and what stays unsupported.
TEST(IntReductionsCodegen, EveryFormAssemblesAtEveryIsa) {
  for (DType t : kInts)
    for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Prod, ReduceOp::Max, ReduceOp::Min, ReduceOp::ArgMax, ReduceOp::ArgMin})
      for (bool mean : {false, true}) {
        if (mean && op != ReduceOp::Sum) continue;
        const ReductionKernelIR ir = int_ir(op, t, mean);
        for (Isa isa : {Isa::Scalar, Isa::Avx2, Isa::Avx512}) {
          ASSERT_TRUE(x86::reduction_supported(ir, isa)) << ir.to_string();
          auto row = x86::generate_reduction(ir, isa, true);
          ASSERT_TRUE(row) << x86::isa_name(isa) << ": " << row.error().message() << "\n" << ir.to_string();
          if (is_arg_reduce(op)) continue;
          auto column = x86::generate_column_reduction(ir, isa, true);
          ASSERT_TRUE(column) << x86::isa_name(isa) << ": " << column.error().message() << "\n" << ir.to_string();
        }
      }
  // Combinations Note [Integer reductions] leaves out.
  ReductionKernelIR bool_sum = int_ir(ReduceOp::Max, DType::Bool);
  bool_sum.op = ReduceOp::Sum;  // bool sums accumulate in int64
  EXPECT_FALSE(x86::reduction_supported(bool_sum, Isa::Avx2));
  ReductionKernelIR int_mean = int_ir(ReduceOp::Sum, DType::Int32);
  int_mean.mean = true;  // means convert to float64 first
  EXPECT_FALSE(x86::reduction_supported(int_mean, Isa::Avx2));
  ReductionKernelIR u64_max = int_ir(ReduceOp::Sum, DType::UInt8);
  u64_max.op = ReduceOp::Max;  // no unsigned 64-bit compares
  EXPECT_FALSE(x86::reduction_supported(u64_max, Isa::Avx2));
}

}  // namespace
}  // namespace framejit::jit
