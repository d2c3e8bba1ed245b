// test_axis_reductions.cpp — reductions over any dims through the executor: every op (sum, prod,
// max, min, mean, var's finishing division and std's sqrt, argmax, argmin), both kernel forms
// (row: reduced dims innermost; column: kept dims innermost), C, F and strided layouts, sizes 1, 7,
// 33, 1000 (vector tails), NaN, and results that do not depend on the thread count. Each case is
// compared with a double-precision reference walked in logical order.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
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

ReductionKernelIR load_ir(ReduceOp op, DType dt, bool mean = false, int64_t ddof = 0, bool sqrt = false) {
  ReductionKernelIR r;
  r.op = op;
  r.mean = mean;
  r.ddof = ddof;
  r.sqrt = sqrt;
  r.prologue.input_dtypes = {dt};
  r.prologue.body = {{ScalarOp::Load, dt, -1, -1, 0, 0}};
  r.prologue.outputs = {0};
  r.prologue.output_dtypes = {dt};
  return r;
}

struct Kernels {
  rt::KernelPtr row, column;
};

Kernels build(const ReductionKernelIR& ir, Isa isa) {
  Kernels k;
  auto row = x86::generate_reduction(ir, isa, false);
  EXPECT_TRUE(row) << row.error().message();
  if (row) k.row = *row;
  if (x86::has_column_kernel(ir)) {
    auto column = x86::generate_column_reduction(ir, isa, false);
    EXPECT_TRUE(column) << column.error().message();
    if (column) k.column = *column;
  }
  return k;
}

// An input laid out as `c` asks, filled by `gen(flat C-order index)`.
template <typename T>
struct Input {
  std::vector<T> storage;
  std::vector<int64_t> strides;  // bytes
  char* data() { return reinterpret_cast<char*>(storage.data()); }
};

template <typename T, typename Gen>
Input<T> make_input(const Case& c, Gen gen) {
  const int rank = static_cast<int>(c.shape.size());
  Input<T> in;
  in.strides.assign(rank, 0);
  int64_t elems = 1;
  for (int64_t s : c.shape) elems *= s;
  int64_t step = c.layout == Layout::Sliced ? 2 : 1;
  in.storage.assign(std::max<int64_t>(elems * step, 1), T(-777));
  int64_t acc = sizeof(T) * step;
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
  std::vector<int64_t> idx(rank, 0);
  for (int64_t flat = 0; flat < elems; ++flat) {
    int64_t rem = flat, off = 0;
    for (int d = rank - 1; d >= 0; --d) {
      idx[d] = rem % c.shape[d];
      rem /= c.shape[d];
      off += idx[d] * in.strides[d];
    }
    *reinterpret_cast<T*>(in.data() + off) = gen(flat);
  }
  return in;
}

// Runs `k` over the case; the result is C-contiguous over the kept dims (as NumPy allocates it).
template <typename R>
std::vector<R> run(const Kernels& k, const ReductionKernelIR& ir, const Case& c, char* data,
                   const std::vector<int64_t>& strides, int threads) {
  const int rank = static_cast<int>(c.shape.size());
  int64_t outputs = 1;
  for (int d = 0; d < rank; ++d)
    if (!c.reduced[d]) outputs *= c.shape[d];
  std::vector<R> out(std::max<int64_t>(outputs, 1), R(-99));
  std::vector<int64_t> out_strides(rank, 0);
  int64_t acc = sizeof(R);
  for (int d = rank - 1; d >= 0; --d)
    if (!c.reduced[d]) {
      out_strides[d] = acc;
      acc *= c.shape[d];
    }
  rt::Operand in[1] = {{data, strides.data(), static_cast<int>(rt::dtype_itemsize(ir.dtype()))}};
  std::unique_ptr<bool[]> reduced(new bool[rank]);
  for (int d = 0; d < rank; ++d) reduced[d] = c.reduced[d];
  rt::ReductionLaunch l;
  l.row = k.row.get();
  l.column = k.column.get();
  l.arg = is_arg_reduce(ir.op);
  l.arg_max = ir.op == ReduceOp::ArgMax;
  l.extreme = ir.op == ReduceOp::Max ? 1 : ir.op == ReduceOp::Min ? -1 : 0;
  l.product = ir.op == ReduceOp::Prod;
  l.value_dtype = ir.dtype();
  l.ddof = ir.ddof;
  l.rank = rank;
  l.shape = c.shape.data();
  l.reduced = reduced.get();
  l.num_inputs = 1;
  l.inputs = in;
  l.out = reinterpret_cast<char*>(out.data());
  l.out_strides = out_strides.data();
  rt::set_num_threads(threads);
  rt::run_reduction(l);
  rt::set_num_threads(0);
  return out;
}

// The reference: per output (kept dims in C order), the reduced elements in C order.
template <typename T>
std::vector<double> reference(const ReductionKernelIR& ir, const Case& c, const std::vector<T>& flat_values,
                              std::vector<double>* abs_sums) {
  const int rank = static_cast<int>(c.shape.size());
  int64_t outputs = 1, count = 1, elems = 1;
  for (int d = 0; d < rank; ++d) {
    (c.reduced[d] ? count : outputs) *= c.shape[d];
    elems *= c.shape[d];
  }
  std::vector<double> acc(outputs), best(outputs);
  std::vector<int64_t> seen(outputs, 0);
  abs_sums->assign(outputs, 0);
  for (int64_t flat = 0; flat < elems; ++flat) {
    int64_t rem = flat, o = 0, o_mul = 1, r = 0, r_mul = 1;
    for (int d = rank - 1; d >= 0; --d) {
      int64_t i = rem % c.shape[d];
      rem /= c.shape[d];
      if (c.reduced[d]) {
        r += i * r_mul;
        r_mul *= c.shape[d];
      } else {
        o += i * o_mul;
        o_mul *= c.shape[d];
      }
    }
    double v = flat_values[flat];
    (*abs_sums)[o] += std::fabs(v);
    bool first = seen[o]++ == 0;
    switch (ir.op) {
      case ReduceOp::Sum: acc[o] = first ? v : acc[o] + v; break;
      case ReduceOp::Prod: acc[o] = first ? v : acc[o] * v; break;
      case ReduceOp::Max:
      case ReduceOp::Min: {
        bool better = ir.op == ReduceOp::Max ? v > acc[o] : v < acc[o];
        if (first || std::isnan(v) || (!std::isnan(acc[o]) && better)) acc[o] = v;
        break;
      }
      case ReduceOp::ArgMax:
      case ReduceOp::ArgMin: {
        bool better = ir.op == ReduceOp::ArgMax ? v > best[o] : v < best[o];
        if (first || (!std::isnan(best[o]) && (std::isnan(v) || better))) {
          best[o] = v;
          acc[o] = static_cast<double>(r);
        }
        break;
      }
    }
  }
  for (double& a : acc) {
    if (ir.mean) a /= static_cast<double>(count - ir.ddof);
    if (ir.sqrt) a = std::sqrt(a);
  }
  return acc;
}

template <typename T>
void check_case(Isa isa, const ReductionKernelIR& ir, const Case& c, uint32_t seed, bool with_nan = false,
                bool squared = false) {
  const bool arg = is_arg_reduce(ir.op);
  int64_t elems = 1;
  for (int64_t s : c.shape) elems *= s;
  std::mt19937 rng(seed);
  // Products stay near 1; arg inputs get ties (few distinct values).
  std::uniform_real_distribution<double> dist(ir.op == ReduceOp::Prod ? 0.9 : -3, ir.op == ReduceOp::Prod ? 1.1 : 3);
  std::vector<T> values(elems);
  for (auto& v : values) v = static_cast<T>(arg ? std::round(dist(rng)) : dist(rng));
  if (with_nan && elems > 3) values[elems / 3] = values[elems / 2] = NAN;
  Input<T> in = make_input<T>(c, [&](int64_t flat) { return values[flat]; });
  Kernels k = build(ir, isa);
  std::vector<double> abs_sums;
  std::vector<T> reduced_values = values;  // what the prologue computes
  if (squared)
    for (auto& v : reduced_values) v = v * v;
  std::vector<double> want = reference(ir, c, reduced_values, &abs_sums);
  std::string what = std::string(x86::isa_name(isa)) + " " + ir.to_string().substr(0, 24) + " " + describe(c);
  if (arg) {
    auto got = run<int64_t>(k, ir, c, in.data(), in.strides, 2);
    for (size_t o = 0; o < want.size(); ++o) ASSERT_EQ(got[o], static_cast<int64_t>(want[o])) << what << " output " << o;
    return;
  }
  auto got = run<T>(k, ir, c, in.data(), in.strides, 2);
  auto got1 = run<T>(k, ir, c, in.data(), in.strides, 1);
  auto got4 = run<T>(k, ir, c, in.data(), in.strides, 4);
  ASSERT_EQ(std::memcmp(got.data(), got1.data(), got.size() * sizeof(T)), 0) << what << ": depends on threads";
  ASSERT_EQ(std::memcmp(got.data(), got4.data(), got.size() * sizeof(T)), 0) << what << ": depends on threads";
  const double eps = sizeof(T) == 4 ? 6e-8 : 1.2e-16;
  for (size_t o = 0; o < want.size(); ++o) {
    if (std::isnan(want[o])) {
      ASSERT_TRUE(std::isnan(got[o])) << what << " output " << o;
      continue;
    }
    // Sums: the rounding of any order is bounded by count * eps * sum|x| (we allow 4x that);
    // products near 1: count * eps relative; max/min are exact.
    double count = static_cast<double>(elems) / static_cast<double>(want.size());
    double tol = 0;
    if (ir.op == ReduceOp::Sum) tol = 4 * count * eps * abs_sums[o] / (ir.mean ? count - ir.ddof : 1.0);
    if (ir.op == ReduceOp::Prod) tol = 4 * count * eps * std::fabs(want[o]);
    if (ir.sqrt) tol = std::sqrt(tol) + 4 * eps;
    tol += 2 * eps * std::fabs(want[o]);
    if (ir.op == ReduceOp::Max || ir.op == ReduceOp::Min) tol = 0;
    ASSERT_NEAR(got[o], want[o], tol) << what << " output " << o;
  }
}

std::vector<Case> cases() {
  std::vector<Case> cs;
  for (int64_t n : {1, 7, 33, 1000}) {
    for (Layout lay : {Layout::C, Layout::F, Layout::Sliced}) {
      cs.push_back({{n}, {true}, lay});                           // everything
      cs.push_back({{5, n}, {true, false}, lay});                 // axis 0: columns (C)
      cs.push_back({{5, n}, {false, true}, lay});                 // axis 1: rows (C)
      cs.push_back({{n, 3}, {true, false}, lay});                 // axis 0, few outputs
      cs.push_back({{3, n, 4}, {true, false, true}, lay});        // axes (0, 2)
      cs.push_back({{2, 3, n}, {false, true, false}, lay});       // middle axis, kept inner
      cs.push_back({{2, 3, n}, {true, true, true}, lay});         // everything, 3-D
    }
  }
  cs.push_back({{4, 1, 6}, {false, true, false}, Layout::C});  // a reduced dim of size 1
  cs.push_back({{0, 5}, {false, true}, Layout::C});            // no outputs
  cs.push_back({{2100, 3}, {false, true}, Layout::F});         // long kept dim, strided rows
  cs.push_back({{300, 700}, {true, false}, Layout::C});        // many rows
  cs.push_back({{3, 9000}, {true, false}, Layout::C});         // kept dim split to feed threads
  cs.push_back({{2, 20000}, {true, false}, Layout::C});        // more outputs than one chunk
  cs.push_back({{100, 2}, {false, true}, Layout::C});          // short rows: column form, strided outputs
  cs.push_back({{1000, 8}, {false, true}, Layout::C});
  cs.push_back({{70, 300}, {false, true}, Layout::F});         // argmax: column form over the adjacent kept dim
  cs.push_back({{3, 70, 5}, {false, false, true}, Layout::F});
  return cs;
}

class AxisReductions : public ::testing::TestWithParam<Isa> {};

TEST_P(AxisReductions, SumProdMaxMinMean) {
  for (const Case& c : cases())
    for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Prod, ReduceOp::Max, ReduceOp::Min}) {
      check_case<float>(GetParam(), load_ir(op, DType::Float32), c, 1);
      check_case<double>(GetParam(), load_ir(op, DType::Float64), c, 2);
    }
  for (const Case& c : cases()) {
    check_case<float>(GetParam(), load_ir(ReduceOp::Sum, DType::Float32, true), c, 3);
    check_case<double>(GetParam(), load_ir(ReduceOp::Sum, DType::Float64, true), c, 4);
  }
}

// One long sum's blocks are summed by the threads and combined in one order, one long max's or
// min's pieces combined NaN first: the same result on 1, 2 or 4 threads (check_case compares them
// bit for bit), within the pairwise bound for sums, exact for max and min.
TEST_P(AxisReductions, LongRowsSplitAcrossThreads) {
  for (const Case& c : {Case{{200003}, {true}, Layout::C}, Case{{3, 70001}, {true, true}, Layout::C},
                        Case{{100001}, {true}, Layout::Sliced}}) {
    check_case<float>(GetParam(), load_ir(ReduceOp::Sum, DType::Float32), c, 12);
    check_case<double>(GetParam(), load_ir(ReduceOp::Sum, DType::Float64, true), c, 13);
    for (ReduceOp op : {ReduceOp::Max, ReduceOp::Min})
      for (bool nan : {false, true}) {
        check_case<float>(GetParam(), load_ir(op, DType::Float32), c, 14, nan);
        check_case<double>(GetParam(), load_ir(op, DType::Float64), c, 15, nan);
      }
  }
}

// Note [Split column rows]: few outputs over many rows split the rows into parts fixed by the
// sizes; the same result on 1, 2 or 4 threads (bit for bit), within the sum's bound, exact for
// max and min (NaN included), with mean's division and std's root after the parts join, for C,
// Fortran-order and sliced inputs.
TEST_P(AxisReductions, ColumnRowsSplitIntoParts) {
  for (const Case& c : {Case{{4000, 37}, {true, false}, Layout::C}, Case{{700, 500}, {false, true}, Layout::F},
                        Case{{3000, 45}, {true, false}, Layout::Sliced}}) {
    for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Prod, ReduceOp::Max, ReduceOp::Min})
      for (bool nan : {false, true}) {
        if (nan && (op == ReduceOp::Sum || op == ReduceOp::Prod)) continue;
        check_case<float>(GetParam(), load_ir(op, DType::Float32), c, 21, nan);
        check_case<double>(GetParam(), load_ir(op, DType::Float64), c, 22, nan);
      }
    check_case<float>(GetParam(), load_ir(ReduceOp::Sum, DType::Float32, true), c, 23);
    ReductionKernelIR ir = load_ir(ReduceOp::Sum, DType::Float64, true, 1, false);
    ir.prologue.body.push_back({ScalarOp::Mul, DType::Float64, 0, 0, -1, 0});
    ir.prologue.outputs = {1};
    ir.sqrt = true;
    check_case<double>(GetParam(), ir, c, 24, false, true);
  }
}

// var's second pass divides by count - ddof; std takes the square root (of non-negative values here).
TEST_P(AxisReductions, FinishingDivisionAndSqrt) {
  for (const Case& c : cases()) {
    int64_t count = 1;
    for (size_t d = 0; d < c.shape.size(); ++d)
      if (c.reduced[d]) count *= c.shape[d];
    if (count < 2) continue;
    ReductionKernelIR ir = load_ir(ReduceOp::Sum, DType::Float64, true, 1, false);
    // The value reduced is x*x, so the sqrt is of a non-negative sum.
    ir.prologue.body.push_back({ScalarOp::Mul, DType::Float64, 0, 0, -1, 0});
    ir.prologue.outputs = {1};
    check_case<double>(GetParam(), ir, c, 5, false, true);
    ir.sqrt = true;
    check_case<double>(GetParam(), ir, c, 6, false, true);
  }
}

TEST_P(AxisReductions, ArgMaxArgMinSingleAxisAndFlattened) {
  std::vector<Case> cs = cases();
  // Note [Long and strided arg rows]: a row long enough to split across threads (ties between
  // the pieces: the first wins), and long strided rows buffered in blocks.
  cs.push_back({{300001}, {true}, Layout::C});
  cs.push_back({{2, 5001}, {false, true}, Layout::F});
  for (const Case& c : cs) {
    int nred = 0;
    for (bool r : c.reduced) nred += r;
    if (nred != 1 && nred != static_cast<int>(c.shape.size())) continue;  // one axis, or all of them
    for (ReduceOp op : {ReduceOp::ArgMax, ReduceOp::ArgMin}) {
      for (bool nan : {false, true}) {
        check_case<float>(GetParam(), load_ir(op, DType::Float32), c, 7, nan);
        check_case<double>(GetParam(), load_ir(op, DType::Float64), c, 8, nan);
      }
      check_case<int32_t>(GetParam(), load_ir(op, DType::Int32), c, 10);
      check_case<int64_t>(GetParam(), load_ir(op, DType::Int64), c, 11);
    }
  }
}

TEST_P(AxisReductions, MaxMinPropagateNaNInBothForms) {
  for (const Case& c : cases())
    for (ReduceOp op : {ReduceOp::Max, ReduceOp::Min}) check_case<float>(GetParam(), load_ir(op, DType::Float32), c, 9, true);
}

// (x - m)^2 with m broadcast along the reduced dim: var's second pass, in both forms.
TEST_P(AxisReductions, PrologueWithBroadcastOperand) {
  const DType dt = DType::Float32;
  ReductionKernelIR ir;
  ir.op = ReduceOp::Sum;
  ir.mean = true;
  ir.prologue.input_dtypes = {dt, dt};
  ir.prologue.body = {{ScalarOp::Load, dt, -1, -1, 0, 0},
                      {ScalarOp::Load, dt, -1, -1, 1, 0},
                      {ScalarOp::Sub, dt, 0, 1, -1, 0},
                      {ScalarOp::Mul, dt, 2, 2, -1, 0}};
  ir.prologue.outputs = {3};
  ir.prologue.output_dtypes = {dt};
  Kernels k = build(ir, GetParam());
  for (int axis : {0, 1}) {
    const int64_t rows = 37, cols = 45;
    std::vector<float> x(rows * cols), m(axis == 0 ? cols : rows);
    std::mt19937 rng(11);
    std::uniform_real_distribution<float> dist(-2, 2);
    for (auto& v : x) v = dist(rng);
    for (auto& v : m) v = dist(rng);
    int64_t shape[2] = {rows, cols};
    bool reduced[2] = {axis == 0, axis == 1};
    int64_t sx[2] = {cols * 4, 4};
    int64_t sm[2] = {axis == 0 ? 0 : 4, axis == 0 ? 4 : 0};
    int64_t so[2] = {axis == 0 ? 0 : 4, axis == 0 ? 4 : 0};
    std::vector<float> out(m.size());
    rt::Operand in[2] = {{reinterpret_cast<char*>(x.data()), sx, 4}, {reinterpret_cast<char*>(m.data()), sm, 4}};
    rt::ReductionLaunch l;
    l.row = k.row.get();
    l.column = k.column.get();
    l.value_dtype = dt;
    l.rank = 2;
    l.shape = shape;
    l.reduced = reduced;
    l.num_inputs = 2;
    l.inputs = in;
    l.out = reinterpret_cast<char*>(out.data());
    l.out_strides = so;
    rt::run_reduction(l);
    for (size_t o = 0; o < out.size(); ++o) {
      double acc = 0;
      int64_t count = axis == 0 ? rows : cols;
      for (int64_t r = 0; r < count; ++r) {
        double v = axis == 0 ? x[r * cols + o] : x[o * cols + r];
        acc += (v - m[o]) * (v - m[o]);
      }
      ASSERT_NEAR(out[o], acc / count, 1e-5 * acc / count) << "axis " << axis << " output " << o;
    }
  }
}

// Every kernel form at every ISA, also those the host cannot run (AVX-512 is then assembled only).
TEST(AxisReductionsCodegen, EveryFormAssemblesAtEveryIsa) {
  for (DType dt : {DType::Float32, DType::Float64})
    for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Prod, ReduceOp::Max, ReduceOp::Min, ReduceOp::ArgMax, ReduceOp::ArgMin})
      for (int variant = 0; variant < 3; ++variant) {
        const bool arg = is_arg_reduce(op);
        if (arg && variant > 0) continue;
        ReductionKernelIR ir = load_ir(op, dt, variant == 1, 0, variant == 1);
        ir.store_value = variant == 2;
        for (Isa isa : {Isa::Scalar, Isa::Avx2, Isa::Avx512}) {
          auto row = x86::generate_reduction(ir, isa, true);
          ASSERT_TRUE(row) << x86::isa_name(isa) << ": " << row.error().message() << "\n" << ir.to_string();
          EXPECT_NE((*row)->listing.find(isa == Isa::Avx512 ? "zmm" : isa == Isa::Avx2 ? "ymm" : "xmm"), std::string::npos);
          if (!x86::has_column_kernel(ir)) continue;
          auto column = x86::generate_column_reduction(ir, isa, true);
          ASSERT_TRUE(column) << x86::isa_name(isa) << ": " << column.error().message() << "\n" << ir.to_string();
        }
      }
}

INSTANTIATE_TEST_SUITE_P(Isas, AxisReductions, ::testing::ValuesIn(host_isas()),
                         [](const auto& info) { return std::string(x86::isa_name(info.param)); });

}  // namespace
}  // namespace framejit::jit
