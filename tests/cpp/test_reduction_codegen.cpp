// test_reduction_codegen.cpp — row reductions (sum, mean, max, min) with a fused prologue:
// generate → run through the executor → compare with a double-precision reference, over row
// lengths (1, tails, long rows), contiguous and strided rows, and every ISA the host has.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "jit/x86/reduction_codegen.h"
#include "runtime/executor.h"

namespace framejit::jit {
namespace {

using x86::Isa;

std::vector<Isa> host_isas() {
  std::vector<Isa> out{Isa::Scalar};
  if (x86::cpu_isa() >= Isa::Avx2) out.push_back(Isa::Avx2);
  if (x86::cpu_isa() >= Isa::Avx512) out.push_back(Isa::Avx512);
  return out;
}

// reduce((x - p0)^2) over each row.
ReductionKernelIR squared_deviation(ReduceOp op, bool mean, DType dt) {
  ReductionKernelIR r;
  r.op = op;
  r.mean = mean;
  r.prologue.input_dtypes = {dt};
  r.prologue.param_dtypes = {DType::Float64};
  r.prologue.body = {{ScalarOp::Load, dt, -1, -1, 0, 0},
                     {ScalarOp::Param, dt, -1, -1, 0, 0},
                     {ScalarOp::Sub, dt, 0, 1, -1, 0},
                     {ScalarOp::Mul, dt, 2, 2, -1, 0}};
  r.prologue.outputs = {3};
  r.prologue.output_dtypes = {dt};
  return r;
}

// The old row-kernel entry: reduce the last of two dims, out strided over the first.
void run_rows(const rt::Kernel& k, const int64_t* shape, const rt::Operand* in, int nin, char* out, int64_t out_stride,
              const rt::ParamValue* p, int np, DType dt, ReduceOp op) {
  bool reduced[2] = {false, true};
  int64_t os[2] = {out_stride, 0};
  rt::ReductionLaunch l;
  l.row = &k;
  // How split rows' partial results join (Note [Split column rows]), as rt::Program sets them.
  l.extreme = op == ReduceOp::Max ? 1 : op == ReduceOp::Min ? -1 : 0;
  l.product = op == ReduceOp::Prod;
  l.value_dtype = dt;
  l.rank = 2;
  l.shape = shape;
  l.reduced = reduced;
  l.num_inputs = nin;
  l.inputs = in;
  l.out = out;
  l.out_strides = os;
  l.params = p;
  l.num_params = np;
  rt::run_reduction(l);
}

template <typename T>
void check(Isa isa, ReduceOp op, bool mean, int64_t rows, int64_t cols, bool transposed) {
  DType dt = sizeof(T) == 4 ? DType::Float32 : DType::Float64;
  auto k = x86::generate_reduction(squared_deviation(op, mean, dt), isa, false);
  ASSERT_TRUE(k) << k.error().message();
  std::mt19937 rng(5);
  std::uniform_real_distribution<double> dist(-3, 3);
  std::vector<T> x(rows * cols);
  for (auto& v : x) v = static_cast<T>(dist(rng));
  std::vector<T> out(rows, T(-99));
  const int it = sizeof(T);
  int64_t shape[2] = {rows, cols};
  int64_t sx[2] = {transposed ? it : cols * it, transposed ? rows * it : it};
  int64_t so[1] = {it};
  rt::Operand in[1] = {{reinterpret_cast<char*>(x.data()), sx, it}};
  rt::ParamValue p[1];
  p[0].f = 0.5;
  (void)so;
  run_rows(**k, shape, in, 1, reinterpret_cast<char*>(out.data()), it, p, 1, dt, op);
  for (int64_t r = 0; r < rows; ++r) {
    double acc = op == ReduceOp::Sum ? 0 : (op == ReduceOp::Max ? -INFINITY : INFINITY);
    for (int64_t c = 0; c < cols; ++c) {
      T xv = transposed ? x[c * rows + r] : x[r * cols + c];
      T v = (xv - T(0.5)) * (xv - T(0.5));
      acc = op == ReduceOp::Sum ? acc + v : op == ReduceOp::Max ? std::max<double>(acc, v) : std::min<double>(acc, v);
    }
    if (mean) acc /= static_cast<double>(cols);
    double tol = (sizeof(T) == 4 ? 1e-6 : 1e-14) * std::max(1.0, std::fabs(acc)) * std::sqrt(static_cast<double>(cols));
    ASSERT_NEAR(out[r], acc, tol) << x86::isa_name(isa) << " op " << reduce_op_name(op) << " mean " << mean << " cols "
                                  << cols << " transposed " << transposed << " row " << r;
  }
}

class ReductionCodegen : public ::testing::TestWithParam<Isa> {};

TEST_P(ReductionCodegen, OpsRowLengthsAndLayouts) {
  for (auto [op, mean] : std::vector<std::pair<ReduceOp, bool>>{
           {ReduceOp::Sum, false}, {ReduceOp::Sum, true}, {ReduceOp::Max, false}, {ReduceOp::Min, false}})
    for (int64_t cols : {1, 3, 8, 31, 64, 1000})
      for (bool tr : {false, true}) {
        check<float>(GetParam(), op, mean, 5, cols, tr);
        check<double>(GetParam(), op, mean, 5, cols, tr);
      }
}

TEST_P(ReductionCodegen, MaxPropagatesNaNAndSumKeepsNegativeZero) {
  ReductionKernelIR r;
  r.op = ReduceOp::Max;
  r.prologue.input_dtypes = {DType::Float32};
  r.prologue.body = {{ScalarOp::Load, DType::Float32, -1, -1, 0, 0}};
  r.prologue.outputs = {0};
  r.prologue.output_dtypes = {DType::Float32};
  auto kmax = x86::generate_reduction(r, GetParam(), false);
  r.op = ReduceOp::Sum;
  auto ksum = x86::generate_reduction(r, GetParam(), false);
  ASSERT_TRUE(kmax && ksum);
  float x[2][19];
  for (int c = 0; c < 19; ++c) {
    x[0][c] = static_cast<float>(c);
    x[1][c] = -0.0f;
  }
  x[0][13] = NAN;
  float out[2];
  int64_t shape[2] = {2, 19}, sx[2] = {19 * 4, 4}, so[1] = {4};
  rt::Operand in[1] = {{reinterpret_cast<char*>(x), sx, 4}};
  (void)so;
  run_rows(**kmax, shape, in, 1, reinterpret_cast<char*>(out), 4, nullptr, 0, DType::Float32, ReduceOp::Max);
  EXPECT_TRUE(std::isnan(out[0]));
  EXPECT_EQ(out[1], 0.0f);
  run_rows(**ksum, shape, in, 1, reinterpret_cast<char*>(out), 4, nullptr, 0, DType::Float32, ReduceOp::Sum);
  EXPECT_TRUE(std::isnan(out[0]));
  EXPECT_TRUE(std::signbit(out[1])) << "a sum of -0.0 stays -0.0, as in NumPy";
}

// store_value: the kernel also writes every element's prologue value (operand 1), contiguous and
// strided, and row-blocked execution (rt::run_row_blocked) gives the same results as one launch,
// also when it copies strided rows (a Fortran-order input, strided values: Note [Buffered strided
// rows]). The values are exact in float32, so every summation order gives the same sums.
TEST_P(ReductionCodegen, StoresItsValuesAndRunsRowBlocked) {
  ReductionKernelIR r = squared_deviation(ReduceOp::Sum, false, DType::Float32);
  r.store_value = true;
  auto k = x86::generate_reduction(r, GetParam(), false);
  ASSERT_TRUE(k) << k.error().message();
  for (int64_t cols : {1, 7, 8, 33, 1000})
    for (auto [strided_values, fortran] : {std::pair{false, false}, {true, false}, {false, true}, {true, true}}) {
      const int64_t rows = 37;
      std::vector<float> x(rows * cols), values(rows * cols * 2, -99.0f), sums(rows), blocked_sums(rows);
      std::vector<float> blocked_values(rows * cols * 2, -99.0f);
      for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 97) * 0.25f - 7.0f;
      int64_t shape[2] = {rows, cols};
      int64_t sx[2] = {fortran ? 4 : cols * 4, fortran ? rows * 4 : 4};
      auto x_at = [&](int64_t row, int64_t c) { return x[(row * sx[0] + c * sx[1]) / 4]; };
      // Strided values: every other float of a buffer twice as long.
      int64_t sv[2] = {cols * 4 * (strided_values ? 2 : 1), strided_values ? 8 : 4};
      int64_t so[1] = {4};
      rt::ParamValue p[1];
      p[0].f = 0.5;
      // One kernel call per row, by hand (Note [Reduction kernel ABI], row form).
      auto fn = reinterpret_cast<rt::ReductionFn>((*k)->entry);
      for (int64_t row = 0; row < rows; ++row) {
        rt::ReductionCall call;
        call.n = cols;
        call.contiguous = !strided_values && !fortran;
        call.ptr[0] = reinterpret_cast<char*>(x.data()) + row * sx[0];
        call.stride[0] = sx[1];
        call.ptr[1] = reinterpret_cast<char*>(values.data()) + row * sv[0];
        call.stride[1] = sv[1];
        call.out = reinterpret_cast<char*>(&sums[row]);
        call.params[0] = p[0];
        call.finish = 1;
        fn(&call);
      }
      rt::Operand bops[2] = {{reinterpret_cast<char*>(x.data()), sx, 4},
                             {reinterpret_cast<char*>(blocked_values.data()), sv, 4}};
      rt::RowLaunch launch;
      launch.kernel = k->get();
      launch.reduction = true;
      launch.n = cols;
      launch.num_operands = 2;
      launch.operands = bops;
      launch.out = reinterpret_cast<char*>(blocked_sums.data());
      launch.out_strides = so;
      launch.params = p;
      launch.num_params = 1;
      rt::run_row_blocked(1, shape, &launch, 1);
      for (int64_t row = 0; row < rows; ++row) {
        double acc = 0;
        for (int64_t c = 0; c < cols; ++c) {
          float v = (x_at(row, c) - 0.5f) * (x_at(row, c) - 0.5f);
          acc += v;
          int64_t at = (row * sv[0] + c * sv[1]) / 4;
          ASSERT_EQ(values[at], v) << "cols " << cols << " row " << row << " col " << c;
          ASSERT_EQ(blocked_values[at], v) << "cols " << cols << " row " << row << " col " << c
                                           << " fortran " << fortran;
        }
        ASSERT_NEAR(sums[row], acc, 1e-6 * std::max(1.0, acc) * std::sqrt(static_cast<double>(cols)));
        ASSERT_EQ(blocked_sums[row], sums[row]) << "blocking must not change a row's result";
      }
      if (strided_values) {  // the gaps between strided values are untouched
        for (int64_t i = 1; i < rows * cols * 2; i += 2) ASSERT_EQ(values[i], -99.0f);
        for (int64_t i = 1; i < rows * cols * 2; i += 2) ASSERT_EQ(blocked_values[i], -99.0f);
      }
    }
}

// Every row length up to three vectors and a NaN at every position: the masked tail (Avx512) and
// the lane folds keep NumPy's max/min (NaN wins wherever it is; else the extreme), and the stored
// values of a max are written for the tail's elements only (the word past the row is untouched).
TEST_P(ReductionCodegen, MaxMinTailsAndFoldsSeeEveryPosition) {
  ReductionKernelIR r;
  r.prologue.input_dtypes = {DType::Float32};
  r.prologue.body = {{ScalarOp::Load, DType::Float32, -1, -1, 0, 0}};
  r.prologue.outputs = {0};
  r.prologue.output_dtypes = {DType::Float32};
  for (ReduceOp op : {ReduceOp::Max, ReduceOp::Min})
    for (bool store : {false, true}) {
      r.op = op;
      r.store_value = store;
      auto k = x86::generate_reduction(r, GetParam(), false);
      ASSERT_TRUE(k) << k.error().message();
      auto fn = reinterpret_cast<rt::ReductionFn>((*k)->entry);
      for (int n = 1; n <= 50; ++n)
        for (int nan_at = -1; nan_at < n; ++nan_at) {
          std::vector<float> x(n + 1), values(n + 1, -99.0f);
          for (int i = 0; i < n; ++i) x[i] = static_cast<float>((i * 37) % 53) - 20.0f;
          x[n] = op == ReduceOp::Max ? 1e30f : -1e30f;  // past the row: must not be read
          if (nan_at >= 0) x[nan_at] = NAN;
          float out = -1.0f;
          rt::ReductionCall call;
          call.n = n;
          call.contiguous = 1;
          call.ptr[0] = reinterpret_cast<char*>(x.data());
          call.stride[0] = 4;
          call.ptr[1] = reinterpret_cast<char*>(values.data());
          call.stride[1] = 4;
          call.out = reinterpret_cast<char*>(&out);
          call.finish = 1;
          fn(&call);
          float want = x[0];
          for (int i = 1; i < n; ++i) want = op == ReduceOp::Max ? std::max(want, x[i]) : std::min(want, x[i]);
          if (nan_at >= 0) ASSERT_TRUE(std::isnan(out)) << "n " << n << " NaN at " << nan_at;
          else ASSERT_EQ(out, want) << reduce_op_name(op) << " n " << n;
          if (!store) continue;
          for (int i = 0; i < n; ++i)
            if (i != nan_at) ASSERT_EQ(values[i], x[i]) << "n " << n << " i " << i;
          ASSERT_EQ(values[n], -99.0f) << "n " << n;
        }
    }
}

// call->rows > 1 (Note [Reduction kernel ABI]): one call over several rows gives each output what a
// call per row gives, for the row kernel (with mean's finish and with accumulate) and the arg
// kernel, rows strided in both directions, outputs strided, contiguous and strided rows; the
// outputs between them are untouched.
TEST_P(ReductionCodegen, SeveralRowsPerCall) {
  for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Max, ReduceOp::ArgMax, ReduceOp::ArgMin})
    for (bool mean : {false, true}) {
      if (mean && op != ReduceOp::Sum) continue;
      ReductionKernelIR r = squared_deviation(op, mean, DType::Float64);
      auto k = x86::generate_reduction(r, GetParam(), false);
      ASSERT_TRUE(k) << k.error().message();
      auto fn = reinterpret_cast<rt::ReductionFn>((*k)->entry);
      const bool arg = op == ReduceOp::ArgMax || op == ReduceOp::ArgMin;
      for (int64_t cols : {1, 5, 17, 100})
        for (bool strided : {false, true})
          for (int64_t accumulate : {0, 1}) {
            if (arg && accumulate) continue;
            const int64_t rows = 7, step = strided ? 2 : 1;
            std::vector<double> x(rows * cols * step);
            for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<double>((i * 7919) % 101) * 0.125;
            std::vector<double> one(3 * rows, 5.0), all(3 * rows, 5.0);  // outputs 3 apart
            rt::ReductionCall call;
            call.n = cols;
            call.contiguous = !strided;
            call.stride[0] = 8 * step;
            call.params[0].f = 0.5;
            call.accumulate = accumulate;
            call.finish = 1;
            call.divisor = cols;
            for (int64_t row = 0; row < rows; ++row) {  // a call per row
              call.ptr[0] = reinterpret_cast<char*>(x.data()) + row * cols * step * 8;
              call.out = reinterpret_cast<char*>(&one[3 * row]);
              fn(&call);
            }
            // Rows from the last to the first: a negative row stride, and out_stride 24 bytes.
            call.rows = rows;
            call.ptr[0] = reinterpret_cast<char*>(x.data()) + (rows - 1) * cols * step * 8;
            call.row_stride[0] = -cols * step * 8;
            call.out = reinterpret_cast<char*>(&all[3 * (rows - 1)]);
            call.out_stride = -24;
            fn(&call);
            for (int64_t i = 0; i < 3 * rows; ++i)
              ASSERT_EQ(std::memcmp(&one[i], &all[i], 8), 0)
                  << reduce_op_name(op) << " mean " << mean << " cols " << cols << " strided " << strided
                  << " accumulate " << accumulate << " at " << i;
          }
    }
}

INSTANTIATE_TEST_SUITE_P(Isas, ReductionCodegen, ::testing::ValuesIn(host_isas()),
                         [](const auto& info) { return std::string(x86::isa_name(info.param)); });

}  // namespace
}  // namespace framejit::jit
