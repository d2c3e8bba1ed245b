// test_element_loop.cpp — element loops (jit/ir/element_loop.h): hand-built programs run by the
// compiled kernel and by run_element_loop, which must agree to the bit, and against expected values.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "jit/ir/element_loop.h"
#include "jit/x86/element_loop_codegen.h"
#include "jit/x86/isa.h"

namespace framejit::jit {
namespace {

using rt::DType;
using rt::LoopError;

constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr int64_t kUnset = -7777;  // detail and result slots the loop did not write

int64_t bits(double v) { return std::bit_cast<int64_t>(v); }
double from_bits(int64_t v) { return std::bit_cast<double>(v); }

double exp_fn(double x) { return std::exp(x); }
double log_fn(double x) { return std::log(x); }
double pow_fn(double x, double y) { return std::pow(x, y); }

// ---- building programs ----

class Builder {
public:
  ElementLoop loop;

  Builder() { loop.blocks.emplace_back(); }

  int block() {
    loop.blocks.emplace_back();
    return static_cast<int>(loop.blocks.size()) - 1;
  }
  void at(int b) { cur_ = b; }
  int var(EType t) { return loop.new_var(t); }
  int param(EType t) {
    const int v = var(t);
    loop.params.push_back(v);
    return v;
  }
  void result(int v) { loop.results.push_back(v); }
  int array(DType t, int rank, bool written = false) {
    loop.arrays.push_back({t, rank, written});
    return static_cast<int>(loop.arrays.size()) - 1;
  }

  EInstr& emit(EOp op, EType t) {
    EInstr e;
    e.op = op;
    e.type = t;
    loop.blocks[cur_].instrs.push_back(e);
    return loop.blocks[cur_].instrs.back();
  }

  // dst = op(a, b) into an existing variable.
  void set(int dst, EOp op, int a, int b = -1, bool checked = false) {
    EInstr& e = emit(op, loop.vars[dst]);
    e.dst = dst;
    e.a = a;
    e.b = b;
    e.checked = checked;
  }
  // A new variable = op(a, b).
  int op(EOp op, int a, int b = -1, bool checked = false) {
    EType t = loop.vars[a];
    if (op == EOp::Not || op == EOp::ToInt) t = EType::Int;
    if (op == EOp::ToFloat) t = EType::Float;
    const int d = var(t);
    set(d, op, a, b, checked);
    return d;
  }
  int cmp(ECond c, int a, int b) {
    EInstr& e = emit(EOp::Cmp, loop.vars[a]);
    e.cond = c;
    e.dst = var(EType::Int);
    e.a = a;
    e.b = b;
    return e.dst;
  }
  void set_int(int dst, int64_t v) {
    EInstr& e = emit(EOp::Const, EType::Int);
    e.dst = dst;
    e.imm = v;
  }
  void set_float(int dst, double v) {
    EInstr& e = emit(EOp::Const, EType::Float);
    e.dst = dst;
    e.fimm = v;
  }
  int iconst(int64_t v) {
    const int d = var(EType::Int);
    set_int(d, v);
    return d;
  }
  int fconst(double v) {
    const int d = var(EType::Float);
    set_float(d, v);
    return d;
  }
  int dim(int array, int axis) {
    EInstr& e = emit(EOp::Dim, EType::Int);
    e.dst = var(EType::Int);
    e.array = array;
    e.axis = axis;
    return e.dst;
  }
  void load_to(int dst, int array, std::vector<int> index) {
    EInstr& e = emit(EOp::Load, loop.vars[dst]);
    e.dst = dst;
    e.array = array;
    e.index = std::move(index);
  }
  int load(int array, std::vector<int> index, EType t) {
    const int d = var(t);
    load_to(d, array, std::move(index));
    return d;
  }
  void store(int array, std::vector<int> index, int v) {
    EInstr& e = emit(EOp::Store, loop.vars[v]);
    e.a = v;
    e.array = array;
    e.index = std::move(index);
  }
  int call1(const char* name, double (*fn)(double), int a, bool checked, LoopError inf_error) {
    EInstr& e = emit(EOp::Call1, EType::Float);
    e.dst = var(EType::Float);
    e.a = a;
    e.fn1 = fn;
    e.fn_name = name;
    e.checked = checked;
    e.inf_error = inf_error;
    return e.dst;
  }
  int call2(const char* name, double (*fn)(double, double), int a, int b, bool checked, LoopError inf_error) {
    EInstr& e = emit(EOp::Call2, EType::Float);
    e.dst = var(EType::Float);
    e.a = a;
    e.b = b;
    e.fn2 = fn;
    e.fn_name = name;
    e.checked = checked;
    e.inf_error = inf_error;
    return e.dst;
  }
  void jump(int b) { emit(EOp::Jump, EType::Int).target = b; }
  void br(int c, int t, int f) {
    EInstr& e = emit(EOp::Branch, EType::Int);
    e.a = c;
    e.target = t;
    e.target2 = f;
  }
  void exit() { emit(EOp::Exit, EType::Int); }

  // for (i = 0; i < n; ++i) { ...emitted between begin_for and end_for... }
  struct For {
    int i, one, head, after;
  };
  For begin_for(int n) {
    For f;
    f.i = iconst(0);
    f.one = iconst(1);
    f.head = block();
    const int body = block();
    f.after = block();
    jump(f.head);
    at(f.head);
    br(cmp(ECond::Lt, f.i, n), body, f.after);
    at(body);
    return f;
  }
  void end_for(const For& f) {
    set(f.i, EOp::Add, f.i, f.one, true);
    jump(f.head);
    at(f.after);
  }

private:
  int cur_ = 0;
};

// ---- running them ----

struct Array {
  std::vector<uint8_t> bytes;
  int64_t origin = 0;                  // byte offset of element (0, ..., 0)
  std::vector<int64_t> dims, strides;  // strides in bytes
};

// A C-contiguous array of `values` shaped `dims` (default: one axis).
template <typename T>
Array array_of(const std::vector<T>& values, std::vector<int64_t> dims = {}) {
  Array a;
  a.bytes.resize(values.size() * sizeof(T));
  if (!values.empty()) std::memcpy(a.bytes.data(), values.data(), a.bytes.size());
  if (dims.empty()) dims = {static_cast<int64_t>(values.size())};
  a.dims = dims;
  a.strides.assign(dims.size(), 0);
  int64_t s = sizeof(T);
  for (size_t k = dims.size(); k-- > 0;) {
    a.strides[k] = s;
    s *= dims[k];
  }
  return a;
}

template <typename T>
std::vector<T> contents(const Array& a) {
  std::vector<T> v(a.bytes.size() / sizeof(T));
  if (!v.empty()) std::memcpy(v.data(), a.bytes.data(), a.bytes.size());
  return v;
}

struct Outcome {
  LoopError error = LoopError::None;
  std::vector<int64_t> results;
  int64_t detail[3] = {kUnset, kUnset, kUnset};
  std::vector<Array> arrays;

  int64_t i(int k) const { return results[k]; }
  double f(int k) const { return from_bits(results[k]); }
};

Outcome execute(const ElementLoop& loop, rt::ElementLoopFn fn, std::vector<Array> arrays,
                const std::vector<int64_t>& params) {
  std::vector<char*> data;
  std::vector<const int64_t*> dims, strides;
  for (Array& a : arrays) {
    data.push_back(reinterpret_cast<char*>(a.bytes.data()) + a.origin);
    dims.push_back(a.dims.data());
    strides.push_back(a.strides.data());
  }
  std::vector<int64_t> scalars = params;
  scalars.resize(params.size() + loop.results.size(), kUnset);
  rt::ElementLoopCall call{data.data(), dims.data(), strides.data(), scalars.data(), {kUnset, kUnset, kUnset}};
  Outcome out;
  out.error = fn ? static_cast<LoopError>(fn(&call)) : run_element_loop(loop, &call);
  out.results.assign(scalars.begin() + static_cast<std::ptrdiff_t>(params.size()), scalars.end());
  std::memcpy(out.detail, call.detail, sizeof out.detail);
  out.arrays = std::move(arrays);
  return out;
}

// Expects the same outcome to the bit; with `any_nan` (the loop), a float result or float64
// element that is NaN in both may differ in its bits. (Of two NaN operands, x86 keeps the first;
// the C++ compiler may give the interpreter's operands in either order.)
void expect_same(const Outcome& got, const Outcome& ref, const char* what, const ElementLoop* any_nan = nullptr) {
  SCOPED_TRACE(what);
  EXPECT_EQ(static_cast<int>(got.error), static_cast<int>(ref.error));
  for (int k = 0; k < 3; ++k) EXPECT_EQ(got.detail[k], ref.detail[k]) << "detail[" << k << "]";
  for (size_t k = 0; k < ref.results.size(); ++k) {
    if (any_nan && any_nan->vars[any_nan->results[k]] == EType::Float && std::isnan(from_bits(got.results[k])) &&
        std::isnan(from_bits(ref.results[k])))
      continue;
    EXPECT_EQ(got.results[k], ref.results[k]) << "result " << k << " (as double: " << from_bits(got.results[k])
                                              << " vs " << from_bits(ref.results[k]) << ")";
  }
  for (size_t j = 0; j < ref.arrays.size(); ++j) {
    if (any_nan && any_nan->arrays[j].dtype == DType::Float64 &&
        got.arrays[j].bytes.size() == ref.arrays[j].bytes.size()) {
      const std::vector<uint8_t>&g = got.arrays[j].bytes, &r = ref.arrays[j].bytes;
      for (size_t k = 0; k + 8 <= r.size(); k += 8) {
        double x, y;
        std::memcpy(&x, g.data() + k, 8);
        std::memcpy(&y, r.data() + k, 8);
        if (!(std::isnan(x) && std::isnan(y))) {
          EXPECT_EQ(std::memcmp(&x, &y, 8), 0) << "array " << j << " byte " << k;
        }
      }
      continue;
    }
    EXPECT_EQ(got.arrays[j].bytes, ref.arrays[j].bytes) << "array " << j;
  }
}

// A loop compiled once; run() runs the kernel, the interpreter, and the interpreter on the loop
// optimize_element_loop makes of it, on copies of the same arguments, expects the same outcome to
// the bit, and returns the kernel's.
class Compiled {
public:
  explicit Compiled(const ElementLoop& loop) : loop_(loop), optimized_(loop) {
    Status s = loop_.verify();
    EXPECT_TRUE(s.is_ok()) << s.message() << "\n" << loop_.to_string();
    optimize_element_loop(optimized_);
    Status o = optimized_.verify();
    EXPECT_TRUE(o.is_ok()) << o.message() << "\n" << optimized_.to_string();
    Expected<rt::KernelPtr> k = x86::compile_element_loop(loop_);
    if (!k) {
      ADD_FAILURE() << k.error().message();
      return;
    }
    kernel_ = *k;
  }

  Outcome run(const std::vector<Array>& arrays, const std::vector<int64_t>& params = {}) const {
    Outcome ref = execute(loop_, nullptr, arrays, params);
    const ElementLoop* loose = any_nan_ ? &loop_ : nullptr;
    expect_same(execute(optimized_, nullptr, arrays, params), ref, "optimized, interpreted", loose);
    if (!kernel_) return ref;
    Outcome jit = execute(loop_, reinterpret_cast<rt::ElementLoopFn>(kernel_->entry), arrays, params);
    expect_same(jit, ref, "compiled", loose);
    return jit;
  }

  const ElementLoop& optimized() const { return optimized_; }
  // NaN results and elements may differ in their bits (expect_same).
  void allow_any_nan() { any_nan_ = true; }

private:
  ElementLoop loop_, optimized_;
  rt::KernelPtr kernel_;
  bool any_nan_ = false;
};

// ---- programs ----

TEST(ElementLoop, SumOfStridedViews) {
  // s = sum(a[i, j] * (i + 1)) over a 2-D float64 view.
  Builder b;
  const int a = b.array(DType::Float64, 2);
  const int n0 = b.dim(a, 0), n1 = b.dim(a, 1);
  const int s = b.fconst(0.0);
  Builder::For fi = b.begin_for(n0);
  const int w = b.op(EOp::ToFloat, b.op(EOp::Add, fi.i, fi.one, true));
  Builder::For fj = b.begin_for(n1);
  const int x = b.load(a, {fi.i, fj.i}, EType::Float);
  b.set(s, EOp::Add, s, b.op(EOp::Mul, x, w));
  b.end_for(fj);
  b.end_for(fi);
  b.exit();
  b.result(s);
  Compiled c(b.loop);

  // A [5, 3] transposed view of a C-contiguous [3, 5] buffer.
  std::vector<double> buf(15);
  for (int k = 0; k < 15; ++k) buf[k] = 0.5 * k - 3.25;
  Array t = array_of(buf, {3, 5});
  t.dims = {5, 3};
  t.strides = {8, 40};
  double want = 0;
  for (int i = 0; i < 5; ++i)
    for (int j = 0; j < 3; ++j) want += buf[j * 5 + i] * (i + 1);
  EXPECT_EQ(c.run({t}).f(0), want);

  // Reversed rows (negative stride, origin at the last row) of a [4, 2] buffer.
  std::vector<double> buf2 = {1, 2, 3, 4, 5, 6, 7, 8};
  Array r = array_of(buf2, {4, 2});
  r.origin = 3 * 16;
  r.strides = {-16, 8};
  want = 0;
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 2; ++j) want += buf2[(3 - i) * 2 + j] * (i + 1);
  EXPECT_EQ(c.run({r}).f(0), want);

  // Empty: the loops do not run.
  Array e = array_of(std::vector<double>{}, {0, 3});
  EXPECT_EQ(c.run({e}).f(0), 0.0);
}

TEST(ElementLoop, TriangularSolve) {
  // Forward substitution: x[i] = (rhs[i] - sum(L[i, j] * x[j], j < i)) / L[i, i].
  Builder b;
  const int L = b.array(DType::Float64, 2), rhs = b.array(DType::Float64, 1), xs = b.array(DType::Float64, 1, true);
  const int n = b.dim(rhs, 0);
  Builder::For fi = b.begin_for(n);
  const int s = b.load(rhs, {fi.i}, EType::Float);
  Builder::For fj = b.begin_for(fi.i);
  b.set(s, EOp::Sub, s, b.op(EOp::Mul, b.load(L, {fi.i, fj.i}, EType::Float), b.load(xs, {fj.i}, EType::Float)));
  b.end_for(fj);
  b.store(xs, {fi.i}, b.op(EOp::Div, s, b.load(L, {fi.i, fi.i}, EType::Float), true));
  b.end_for(fi);
  b.exit();
  Compiled c(b.loop);

  const int N = 7;
  std::vector<double> l(N * N, 0.0), r(N), want(N);
  for (int i = 0; i < N; ++i) {
    for (int j = 0; j <= i; ++j) l[i * N + j] = (i == j) ? 2.0 + i : 0.25 * (i - j) - 0.125 * j;
    r[i] = 1.0 + i * 0.75;
  }
  for (int i = 0; i < N; ++i) {
    double s = r[i];
    for (int j = 0; j < i; ++j) s -= l[i * N + j] * want[j];
    want[i] = s / l[i * N + i];
  }
  Outcome o = c.run({array_of(l, {N, N}), array_of(r), array_of(std::vector<double>(N, 0.0))});
  EXPECT_EQ(o.error, LoopError::None);
  EXPECT_EQ(contents<double>(o.arrays[2]), want);

  // A zero on the diagonal: Python's ZeroDivisionError, with the rows before it written.
  l[3 * N + 3] = 0.0;
  o = c.run({array_of(l, {N, N}), array_of(r), array_of(std::vector<double>(N, 0.0))});
  EXPECT_EQ(o.error, LoopError::ZeroDivision);
  EXPECT_EQ(contents<double>(o.arrays[2])[2], want[2]);
  EXPECT_EQ(contents<double>(o.arrays[2])[3], 0.0);
}

TEST(ElementLoop, FloydWarshall) {
  Builder b;
  const int d = b.array(DType::Float64, 2, true);
  const int n = b.dim(d, 0);
  Builder::For fk = b.begin_for(n);
  Builder::For fi = b.begin_for(n);
  Builder::For fj = b.begin_for(n);
  const int t = b.op(EOp::Add, b.load(d, {fi.i, fk.i}, EType::Float), b.load(d, {fk.i, fj.i}, EType::Float));
  const int closer = b.cmp(ECond::Lt, t, b.load(d, {fi.i, fj.i}, EType::Float));
  const int then = b.block(), join = b.block();
  b.br(closer, then, join);
  b.at(then);
  b.store(d, {fi.i, fj.i}, t);
  b.jump(join);
  b.at(join);
  b.end_for(fj);
  b.end_for(fi);
  b.end_for(fk);
  b.exit();
  Compiled c(b.loop);

  const int N = 6;
  std::vector<double> g(N * N, kInf);
  for (int i = 0; i < N; ++i) g[i * N + i] = 0;
  const int edges[][3] = {{0, 1, 7}, {1, 2, 3}, {2, 3, 1}, {3, 0, 2}, {0, 4, 12}, {4, 5, 1}, {2, 5, 9}, {5, 1, 1}};
  for (const auto& e : edges) g[e[0] * N + e[1]] = e[2];
  std::vector<double> want = g;
  for (int k = 0; k < N; ++k)
    for (int i = 0; i < N; ++i)
      for (int j = 0; j < N; ++j)
        if (want[i * N + k] + want[k * N + j] < want[i * N + j]) want[i * N + j] = want[i * N + k] + want[k * N + j];
  EXPECT_EQ(contents<double>(c.run({array_of(g, {N, N})}).arrays[0]), want);
}

TEST(ElementLoop, Crc16) {
  // CRC-16/CCITT-FALSE with Python ints: shifts, xor, and, and a branch on the top bit.
  Builder b;
  const int data = b.array(DType::UInt8, 1);
  const int n = b.dim(data, 0);
  const int crc = b.iconst(0xFFFF), eight = b.iconst(8), mask = b.iconst(0xFFFF), top = b.iconst(0x8000);
  const int poly = b.iconst(0x1021), zero = b.iconst(0);
  Builder::For fi = b.begin_for(n);
  b.set(crc, EOp::BitXor, crc, b.op(EOp::Shl, b.load(data, {fi.i}, EType::Int), eight, true));
  Builder::For fk = b.begin_for(eight);
  const int hi = b.cmp(ECond::Ne, b.op(EOp::BitAnd, crc, top), zero);
  const int then = b.block(), other = b.block(), join = b.block();
  b.br(hi, then, other);
  b.at(then);
  b.set(crc, EOp::BitXor, b.op(EOp::Shl, crc, fk.one, true), poly);
  b.jump(join);
  b.at(other);
  b.set(crc, EOp::Shl, crc, fk.one, true);
  b.jump(join);
  b.at(join);
  b.set(crc, EOp::BitAnd, crc, mask);
  b.end_for(fk);
  b.end_for(fi);
  b.exit();
  b.result(crc);
  Compiled c(b.loop);

  const std::string check = "123456789";
  EXPECT_EQ(c.run({array_of(std::vector<uint8_t>(check.begin(), check.end()))}).i(0), 0x29B1);
  std::vector<uint8_t> bytes(300);
  for (size_t k = 0; k < bytes.size(); ++k) bytes[k] = static_cast<uint8_t>(k * 37 + 11);
  uint32_t want = 0xFFFF;
  for (uint8_t v : bytes) {
    want ^= uint32_t{v} << 8;
    for (int k = 0; k < 8; ++k) want = ((want & 0x8000) ? (want << 1) ^ 0x1021 : want << 1) & 0xFFFF;
  }
  EXPECT_EQ(c.run({array_of(bytes)}).i(0), want);
}

TEST(ElementLoop, Mandelbrot) {
  // out[r, c] = iterations before |z| > 2, with a break out of the inner loop.
  Builder b;
  const int out = b.array(DType::Int32, 2, true);
  const int maxiter = b.param(EType::Int);
  const int h = b.dim(out, 0), w = b.dim(out, 1);
  const int fh = b.op(EOp::ToFloat, h), fw = b.op(EOp::ToFloat, w);
  const int three = b.fconst(3.0), two = b.fconst(2.0), four = b.fconst(4.0);
  const int left = b.fconst(-2.0), bottom = b.fconst(-1.5);
  Builder::For fr = b.begin_for(h);
  Builder::For fc = b.begin_for(w);
  const int cx = b.op(EOp::Add, left, b.op(EOp::Div, b.op(EOp::Mul, three, b.op(EOp::ToFloat, fc.i)), fw, true));
  const int cy = b.op(EOp::Add, bottom, b.op(EOp::Div, b.op(EOp::Mul, three, b.op(EOp::ToFloat, fr.i)), fh, true));
  const int x = b.fconst(0.0), y = b.fconst(0.0), it = b.iconst(0);
  const int head = b.block(), body = b.block(), cont = b.block(), done = b.block();
  b.jump(head);
  b.at(head);
  b.br(b.cmp(ECond::Lt, it, maxiter), body, done);
  b.at(body);
  const int x2 = b.op(EOp::Mul, x, x), y2 = b.op(EOp::Mul, y, y);
  b.br(b.cmp(ECond::Gt, b.op(EOp::Add, x2, y2), four), done, cont);
  b.at(cont);
  b.set(y, EOp::Add, b.op(EOp::Mul, b.op(EOp::Mul, x, y), two), cy);
  b.set(x, EOp::Add, b.op(EOp::Sub, x2, y2), cx);
  b.set(it, EOp::Add, it, fc.one, true);
  b.jump(head);
  b.at(done);
  b.store(out, {fr.i, fc.i}, it);
  b.end_for(fc);
  b.end_for(fr);
  b.exit();
  Compiled c(b.loop);

  const int H = 12, W = 20, M = 50;
  std::vector<int32_t> want(H * W);
  for (int r = 0; r < H; ++r) {
    for (int col = 0; col < W; ++col) {
      const double cx = -2.0 + 3.0 * col / W, cy = -1.5 + 3.0 * r / H;
      double x = 0, y = 0;
      int n = 0;
      for (; n < M; ++n) {
        const double xx = x * x, yy = y * y;
        if (xx + yy > 4.0) break;
        y = x * y * 2.0 + cy;
        x = xx - yy + cx;
      }
      want[r * W + col] = n;
    }
  }
  Outcome o = c.run({array_of(std::vector<int32_t>(H * W, -1), {H, W})}, {M});
  EXPECT_EQ(contents<int32_t>(o.arrays[0]), want);
}

// Loads and stores of every dtype: a1 = a0 through a variable of a0's kind, a2 (float64) = a0 as
// a Float, a3 (bool) = that variable != 0, a4 (float32) = that variable.
template <typename T>
void round_trip(DType dt, const std::vector<T>& values, const std::vector<T>& want_copy) {
  SCOPED_TRACE(std::string(rt::dtype_name(dt)));
  const bool is_float = dt == DType::Float32 || dt == DType::Float64;
  Builder b;
  const int a0 = b.array(dt, 1), a1 = b.array(dt, 1, true), a2 = b.array(DType::Float64, 1, true);
  const int a3 = b.array(DType::Bool, 1, true), a4 = b.array(DType::Float32, 1, true);
  Builder::For f = b.begin_for(b.dim(a0, 0));
  const int v = b.load(a0, {f.i}, is_float ? EType::Float : EType::Int);
  b.store(a1, {f.i}, v);
  b.store(a2, {f.i}, b.load(a0, {f.i}, EType::Float));
  b.store(a3, {f.i}, v);
  b.store(a4, {f.i}, v);
  b.end_for(f);
  b.exit();
  Compiled c(b.loop);

  const size_t n = values.size();
  Outcome o = c.run({array_of(values), array_of(std::vector<T>(n)), array_of(std::vector<double>(n)),
                     array_of(std::vector<uint8_t>(n)), array_of(std::vector<float>(n))});
  ASSERT_EQ(o.error, LoopError::None);
  std::vector<T> copy = contents<T>(o.arrays[1]);
  std::vector<double> as_double = contents<double>(o.arrays[2]);
  std::vector<uint8_t> as_bool = contents<uint8_t>(o.arrays[3]);
  std::vector<float> as_float = contents<float>(o.arrays[4]);
  for (size_t k = 0; k < n; ++k) {
    SCOPED_TRACE(k);
    EXPECT_EQ(std::memcmp(&copy[k], &want_copy[k], sizeof(T)), 0);
    double d;
    float fl;
    bool nonzero;
    if constexpr (std::is_floating_point_v<T>) {
      d = values[k];
      fl = static_cast<float>(d);
      nonzero = d != 0;
    } else {
      // The variable is an int64 (uint64 elements keep their bits), the Float load converts the
      // element's own value.
      const int64_t iv = dt == DType::Bool ? values[k] != 0 : static_cast<int64_t>(values[k]);
      d = dt == DType::Bool ? static_cast<double>(iv) : static_cast<double>(values[k]);
      fl = static_cast<float>(iv);
      nonzero = iv != 0;
    }
    EXPECT_EQ(std::bit_cast<uint64_t>(as_double[k]), std::bit_cast<uint64_t>(d)) << as_double[k] << " vs " << d;
    EXPECT_EQ(std::bit_cast<uint32_t>(as_float[k]), std::bit_cast<uint32_t>(fl)) << as_float[k] << " vs " << fl;
    EXPECT_EQ(as_bool[k], nonzero ? 1 : 0);
  }
}

template <typename T>
void round_trip(DType dt, const std::vector<T>& values) {
  round_trip(dt, values, values);
}

TEST(ElementLoop, EveryDtypeLoadsAndStores) {
  round_trip<double>(DType::Float64, {0.0, -0.0, 1.5, -1e300, 1e-310, kInf, -kInf, kNaN, 3.4028235677973366e38});
  round_trip<float>(DType::Float32, {0.0f, -0.0f, 1.5f, -3.4e38f, 1e-45f, std::numeric_limits<float>::infinity(),
                                     std::numeric_limits<float>::quiet_NaN()});
  round_trip<int64_t>(DType::Int64, {0, 1, -1, kMin, kMax, 9007199254740993, -(int64_t{1} << 62) - 1});
  round_trip<int32_t>(DType::Int32, {0, 1, -1, INT32_MIN, INT32_MAX, 16777217});
  round_trip<int16_t>(DType::Int16, {0, 1, -1, INT16_MIN, INT16_MAX});
  round_trip<int8_t>(DType::Int8, {0, 1, -1, INT8_MIN, INT8_MAX});
  round_trip<uint8_t>(DType::UInt8, {0, 1, 128, 255});
  round_trip<uint16_t>(DType::UInt16, {0, 1, 32768, 65535});
  round_trip<uint32_t>(DType::UInt32, {0, 1, 0x80000000u, 0xFFFFFFFFu});
  round_trip<uint64_t>(DType::UInt64, {0, 1, uint64_t{1} << 63, ~uint64_t{0}, (uint64_t{1} << 63) + 1025,
                                       (uint64_t{1} << 63) + 1024, (uint64_t{1} << 63) + 3072, 9007199254740993});
  // A bool byte other than 0 or 1 loads as True.
  round_trip<uint8_t>(DType::Bool, {0, 1, 2, 255}, {0, 1, 1, 1});
}

TEST(ElementLoop, Float16ArraysAreUnsupported) {
  Builder b;
  const int a = b.array(DType::Float16, 1), out = b.array(DType::Float64, 1, true);
  const int zero = b.iconst(0);
  b.store(out, {zero}, b.load(a, {zero}, EType::Float));
  b.exit();
  Expected<rt::KernelPtr> k = x86::compile_element_loop(b.loop);
  ASSERT_FALSE(k);
  EXPECT_EQ(k.error().code(), StatusCode::Unsupported);
  // The interpreter runs them.
  const uint16_t one_and_half = 0x3E00;
  Outcome o = execute(b.loop, nullptr, {array_of(std::vector<uint16_t>{one_and_half}), array_of(std::vector<double>(1))},
                      {});
  EXPECT_EQ(contents<double>(o.arrays[1])[0], 1.5);
}

TEST(ElementLoop, NegativeIndicesAndBounds) {
  // r0 = a[i], r1 = m[i, j], then m[i, j] = r0 (i, j parameters).
  Builder b;
  const int a = b.array(DType::Int64, 1), m = b.array(DType::Int16, 2, true);
  const int i = b.param(EType::Int), j = b.param(EType::Int);
  const int r0 = b.load(a, {i}, EType::Int), r1 = b.load(m, {i, j}, EType::Int);
  b.store(m, {i, j}, r0);
  b.exit();
  b.result(r0);
  b.result(r1);
  Compiled c(b.loop);

  const std::vector<int64_t> av = {10, 11, 12};
  const std::vector<int16_t> mv = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};  // [3, 4]
  auto run = [&](int64_t ii, int64_t jj) { return c.run({array_of(av), array_of(mv, {3, 4})}, {ii, jj}); };

  Outcome o = run(-1, -1);
  EXPECT_EQ(o.error, LoopError::None);
  EXPECT_EQ(o.i(0), 12);
  EXPECT_EQ(o.i(1), 11);
  EXPECT_EQ(contents<int16_t>(o.arrays[1])[11], 12);
  o = run(-3, -4);
  EXPECT_EQ(o.i(0), 10);
  EXPECT_EQ(o.i(1), 0);
  o = run(1, 2);
  EXPECT_EQ(o.i(0), 11);
  EXPECT_EQ(o.i(1), 6);

  // IndexError: detail = {index, axis, size}; nothing written, no results.
  struct Case {
    int64_t i, j, detail[3];
  };
  const Case cases[] = {{3, 0, {3, 0, 3}},      {-4, 0, {-4, 0, 3}}, {2, 4, {4, 1, 4}},
                        {2, -5, {-5, 1, 4}},    {kMin, 0, {kMin, 0, 3}}, {kMax, 0, {kMax, 0, 3}},
                        {0, kMin, {kMin, 1, 4}}};
  for (const Case& k : cases) {
    SCOPED_TRACE(std::to_string(k.i) + ", " + std::to_string(k.j));
    o = run(k.i, k.j);
    EXPECT_EQ(o.error, LoopError::IndexOutOfBounds);
    EXPECT_EQ(o.detail[0], k.detail[0]);
    EXPECT_EQ(o.detail[1], k.detail[1]);
    EXPECT_EQ(o.detail[2], k.detail[2]);
    EXPECT_EQ(o.i(0), kUnset);
    EXPECT_EQ(contents<int16_t>(o.arrays[1]), mv);
  }
  // An empty axis has no valid index, negative or not.
  o = c.run({array_of(std::vector<int64_t>{}), array_of(mv, {3, 4})}, {-1, 0});
  EXPECT_EQ(o.error, LoopError::IndexOutOfBounds);
  EXPECT_EQ(o.detail[2], 0);
}

TEST(ElementLoop, RankZeroArrays) {
  // s[()] = s[()] + a[()] * 2, r = a[()]
  Builder b;
  const int a = b.array(DType::Int32, 0), s = b.array(DType::Float64, 0, true);
  const int v = b.load(a, {}, EType::Int);
  b.store(s, {}, b.op(EOp::Add, b.load(s, {}, EType::Float), b.op(EOp::ToFloat, b.op(EOp::Mul, v, b.iconst(2)))));
  b.exit();
  b.result(v);
  Compiled c(b.loop);
  Array x = array_of(std::vector<int32_t>{-21}, {}), y = array_of(std::vector<double>{0.5}, {});
  x.dims.clear();
  x.strides.clear();
  y.dims.clear();
  y.strides.clear();
  Outcome o = c.run({x, y});
  EXPECT_EQ(o.i(0), -21);
  EXPECT_EQ(contents<double>(o.arrays[1])[0], -41.5);
}

// ---- scalar operations, over tables of operands ----

// A program computing op(p0, p1) for every op in `ops`, one result each.
Compiled binary_ops(EType t, const std::vector<EOp>& ops, bool checked) {
  Builder b;
  const int x = b.param(t), y = b.param(t);
  std::vector<int> rs;
  for (EOp op : ops) rs.push_back(b.op(op, x, y, checked));
  b.exit();
  for (int r : rs) b.result(r);
  return Compiled(b.loop);
}

// Python's floor division of int64 (b != 0, not INT64_MIN // -1).
int64_t py_floordiv(int64_t a, int64_t b) {
  int64_t q = a / b;
  if (a % b != 0 && ((a % b < 0) != (b < 0))) --q;
  return q;
}
int64_t py_mod(int64_t a, int64_t b) {
  int64_t r = a % b;
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}

TEST(ElementLoop, IntFloorDivMod) {
  Compiled unchecked = binary_ops(EType::Int, {EOp::FloorDiv, EOp::Mod}, false);
  Compiled checked = binary_ops(EType::Int, {EOp::FloorDiv, EOp::Mod}, true);
  const int64_t values[] = {0, 1, -1, 2, -2, 3, -3, 7, -7, 100, -100, kMin, kMax, kMin + 1};
  for (int64_t a : values) {
    for (int64_t d : values) {
      SCOPED_TRACE(std::to_string(a) + " // " + std::to_string(d));
      Outcome u = unchecked.run({}, {a, d});
      Outcome c = checked.run({}, {a, d});
      ASSERT_EQ(u.error, LoopError::None);
      if (d == 0) {  // NumPy: 0 and 0; Python: ZeroDivisionError
        EXPECT_EQ(u.i(0), 0);
        EXPECT_EQ(u.i(1), 0);
        EXPECT_EQ(c.error, LoopError::ZeroDivision);
      } else if (a == kMin && d == -1) {  // NumPy wraps; Python's answer needs 65 bits
        EXPECT_EQ(u.i(0), kMin);
        EXPECT_EQ(u.i(1), 0);
        EXPECT_EQ(c.error, LoopError::IntOverflow);
      } else {
        EXPECT_EQ(u.i(0), py_floordiv(a, d));
        EXPECT_EQ(u.i(1), py_mod(a, d));
        EXPECT_EQ(c.error, LoopError::None);
        EXPECT_EQ(c.results, u.results);
      }
    }
  }
  // INT64_MIN % -1 alone is fine for Python.
  Compiled mod_only = binary_ops(EType::Int, {EOp::Mod}, true);
  Outcome o = mod_only.run({}, {kMin, -1});
  EXPECT_EQ(o.error, LoopError::None);
  EXPECT_EQ(o.i(0), 0);
}

TEST(ElementLoop, FloatFloorDivMod) {
  Compiled unchecked = binary_ops(EType::Float, {EOp::FloorDiv, EOp::Mod, EOp::Div}, false);
  Compiled checked = binary_ops(EType::Float, {EOp::FloorDiv, EOp::Mod, EOp::Div}, true);
  const double values[] = {0.0,  -0.0,  1.0,   -1.0,   7.5,    -7.5, 2.0,   -2.0,
                           0.1,  -0.1,  1e308, -1e308, 5e-324, kInf, -kInf, kNaN};
  for (double a : values) {
    for (double d : values) {
      SCOPED_TRACE(std::to_string(a) + " // " + std::to_string(d));
      Outcome u = unchecked.run({}, {bits(a), bits(d)});
      Outcome c = checked.run({}, {bits(a), bits(d)});
      EXPECT_EQ(c.error, d == 0 ? LoopError::ZeroDivision : LoopError::None);
      if (d == 0) {  // NumPy: a / 0 and NaN
        EXPECT_EQ(bits(u.f(0)), bits(a / d));
        EXPECT_TRUE(std::isnan(u.f(1)));
      } else {
        EXPECT_EQ(c.results, u.results);
      }
    }
  }
  // Python's answers.
  auto check = [&](double a, double d, double q, double r) {
    SCOPED_TRACE(std::to_string(a) + " // " + std::to_string(d));
    Outcome o = checked.run({}, {bits(a), bits(d)});
    EXPECT_EQ(bits(o.f(0)), bits(q)) << o.f(0);
    EXPECT_EQ(bits(o.f(1)), bits(r)) << o.f(1);
  };
  check(7.5, 2.0, 3.0, 1.5);
  check(7.5, -2.0, -4.0, -0.5);
  check(-7.5, 2.0, -4.0, 0.5);
  check(-7.5, -2.0, 3.0, -1.5);
  check(0.0, -2.0, -0.0, -0.0);
  check(-0.0, 2.0, -0.0, 0.0);
  check(6.0, -3.0, -2.0, -0.0);
  check(-5.0, kInf, -1.0, kInf);
  check(5.0, kInf, 0.0, 5.0);
  check(1.0, 0.1, 9.0, 0.09999999999999995);
}

TEST(ElementLoop, IntOverflowAndWrapping) {
  Compiled unchecked = binary_ops(EType::Int, {EOp::Add, EOp::Sub, EOp::Mul, EOp::Shl, EOp::Shr}, false);
  const std::vector<EOp> each = {EOp::Add, EOp::Sub, EOp::Mul, EOp::Shl, EOp::Shr};
  std::vector<Compiled> checked;
  for (EOp op : each) checked.push_back(binary_ops(EType::Int, {op}, true));
  auto wrap = [](int64_t a, int64_t d, EOp op) -> int64_t {
    const uint64_t ua = static_cast<uint64_t>(a), ud = static_cast<uint64_t>(d);
    switch (op) {
      case EOp::Add: return static_cast<int64_t>(ua + ud);
      case EOp::Sub: return static_cast<int64_t>(ua - ud);
      case EOp::Mul: return static_cast<int64_t>(ua * ud);
      case EOp::Shl: return ud < 64 ? static_cast<int64_t>(ua << d) : 0;
      default: return a >> (ud < 64 ? d : 63);
    }
  };
  // Python's answer, or nullopt-like `ok = false` when it leaves 64 bits (or the count is negative).
  auto python = [](int64_t a, int64_t d, EOp op, bool& ok) -> int64_t {
    int64_t r = 0;
    ok = true;
    switch (op) {
      case EOp::Add: ok = !__builtin_add_overflow(a, d, &r); return r;
      case EOp::Sub: ok = !__builtin_sub_overflow(a, d, &r); return r;
      case EOp::Mul: ok = !__builtin_mul_overflow(a, d, &r); return r;
      case EOp::Shl:
        if (d < 0) ok = false;
        else if (d >= 64) ok = a == 0;
        else ok = ((static_cast<int64_t>(static_cast<uint64_t>(a) << d)) >> d) == a;
        return ok ? (d >= 64 ? 0 : static_cast<int64_t>(static_cast<uint64_t>(a) << d)) : 0;
      default:
        if (d < 0) ok = false;
        return ok ? a >> (d >= 64 ? 63 : d) : 0;
    }
  };
  const int64_t values[] = {0, 1, -1, 2, 3, 62, 63, 64, 65, 100, -64, kMin, kMax, int64_t{1} << 32, -(int64_t{1} << 32),
                            0x4000000000000000, -0x4000000000000000};
  for (int64_t a : values) {
    for (int64_t d : values) {
      SCOPED_TRACE(std::to_string(a) + ", " + std::to_string(d));
      Outcome u = unchecked.run({}, {a, d});
      for (size_t k = 0; k < each.size(); ++k) {
        SCOPED_TRACE(static_cast<int>(each[k]));
        EXPECT_EQ(u.i(static_cast<int>(k)), wrap(a, d, each[k]));
        bool ok;
        const int64_t want = python(a, d, each[k], ok);
        Outcome c = checked[k].run({}, {a, d});
        EXPECT_EQ(c.error, ok ? LoopError::None : LoopError::IntOverflow);
        if (ok) {
          EXPECT_EQ(c.i(0), want);
        }
      }
    }
  }
}

TEST(ElementLoop, IntUnaryAndMinMax) {
  Builder b;
  const int x = b.param(EType::Int), y = b.param(EType::Int);
  const int rs[] = {b.op(EOp::Neg, x), b.op(EOp::Abs, x), b.op(EOp::Invert, x), b.op(EOp::Not, x),
                    b.op(EOp::Min, x, y), b.op(EOp::Max, x, y), b.op(EOp::BitAnd, x, y), b.op(EOp::BitOr, x, y),
                    b.op(EOp::ToFloat, x), b.iconst(kMin), b.iconst(-1), b.iconst(0x123456789abcdef)};
  b.exit();
  for (int r : rs) b.result(r);
  Compiled c(b.loop);
  Builder bc;
  const int cx = bc.param(EType::Int);
  const int crs[] = {bc.op(EOp::Neg, cx, -1, true), bc.op(EOp::Abs, cx, -1, true)};
  bc.exit();
  for (int r : crs) bc.result(r);
  Compiled checked(bc.loop);

  const int64_t values[] = {0, 5, -5, kMin, kMax, kMin + 1};
  for (int64_t a : values) {
    SCOPED_TRACE(a);
    Outcome o = c.run({}, {a, 3});
    const int64_t neg = static_cast<int64_t>(0 - static_cast<uint64_t>(a));
    EXPECT_EQ(o.i(0), neg);
    EXPECT_EQ(o.i(1), a < 0 ? neg : a);
    EXPECT_EQ(o.i(2), ~a);
    EXPECT_EQ(o.i(3), a == 0);
    EXPECT_EQ(o.i(4), std::min<int64_t>(a, 3));
    EXPECT_EQ(o.i(5), std::max<int64_t>(a, 3));
    EXPECT_EQ(o.i(6), a & 3);
    EXPECT_EQ(o.i(7), a | 3);
    EXPECT_EQ(o.f(8), static_cast<double>(a));
    EXPECT_EQ(o.i(9), kMin);
    EXPECT_EQ(o.i(10), -1);
    EXPECT_EQ(o.i(11), 0x123456789abcdef);
    Outcome k = checked.run({}, {a});
    EXPECT_EQ(k.error, a == kMin ? LoopError::IntOverflow : LoopError::None);
  }
}

TEST(ElementLoop, FloatToIntAndSqrt) {
  Builder b;
  const int x = b.param(EType::Float);
  const int r = b.op(EOp::ToInt, x);
  b.exit();
  b.result(r);
  Compiled to_int(b.loop);
  struct Case {
    double v;
    LoopError error;
    int64_t value_or_detail;
  };
  const Case cases[] = {{3.9, LoopError::None, 3},
                        {-3.9, LoopError::None, -3},
                        {-0.0, LoopError::None, 0},
                        {-0x1p63, LoopError::None, kMin},
                        {0x1p63 - 1024, LoopError::None, kMax - 1023},
                        {0x1p63, LoopError::FloatToInt, 0},
                        {-0x1p63 - 2048, LoopError::FloatToInt, 0},
                        {1e19, LoopError::FloatToInt, 0},
                        {kInf, LoopError::FloatToInt, 0},
                        {-kInf, LoopError::FloatToInt, 0},
                        {kNaN, LoopError::FloatToInt, 1},
                        {-kNaN, LoopError::FloatToInt, 1}};
  for (const Case& k : cases) {
    SCOPED_TRACE(k.v);
    Outcome o = to_int.run({}, {bits(k.v)});
    EXPECT_EQ(o.error, k.error);
    if (k.error == LoopError::None) {
      EXPECT_EQ(o.i(0), k.value_or_detail);
    } else {
      EXPECT_EQ(o.detail[0], k.value_or_detail);
    }
  }

  Builder s;
  const int y = s.param(EType::Float);
  const int checked = s.op(EOp::Sqrt, y, -1, true), plain = s.op(EOp::Sqrt, y);
  s.exit();
  s.result(checked);
  s.result(plain);
  Compiled roots(s.loop);
  EXPECT_EQ(roots.run({}, {bits(2.25)}).f(0), 1.5);
  EXPECT_EQ(roots.run({}, {bits(-1.0)}).error, LoopError::MathDomain);
  EXPECT_EQ(roots.run({}, {bits(-kInf)}).error, LoopError::MathDomain);
  EXPECT_EQ(bits(roots.run({}, {bits(-0.0)}).f(0)), bits(-0.0));
  EXPECT_TRUE(std::isnan(roots.run({}, {bits(kNaN)}).f(0)));
  EXPECT_EQ(roots.run({}, {bits(kInf)}).f(1), kInf);
}

TEST(ElementLoop, MathCalls) {
  Builder b;
  const int x = b.param(EType::Float), y = b.param(EType::Float);
  const int e = b.call1("math.exp", exp_fn, x, true, LoopError::MathRange);
  const int l = b.call1("math.log", log_fn, x, true, LoopError::MathDomain);
  const int p = b.call2("math.pow", pow_fn, x, y, true, LoopError::MathRange);
  b.exit();
  b.result(e);
  b.result(l);
  b.result(p);
  Compiled c(b.loop);

  Outcome o = c.run({}, {bits(2.0), bits(3.0)});
  EXPECT_EQ(o.error, LoopError::None);
  EXPECT_EQ(o.f(0), std::exp(2.0));
  EXPECT_EQ(o.f(1), std::log(2.0));
  EXPECT_EQ(o.f(2), 8.0);
  EXPECT_EQ(c.run({}, {bits(1000.0), bits(1.0)}).error, LoopError::MathRange);    // exp overflows
  EXPECT_EQ(c.run({}, {bits(-1.0), bits(1.0)}).error, LoopError::MathDomain);     // log(-1)
  EXPECT_EQ(c.run({}, {bits(0.0), bits(1.0)}).error, LoopError::MathDomain);      // log(0) = -inf
  EXPECT_EQ(c.run({}, {bits(10.0), bits(400.0)}).error, LoopError::MathRange);    // pow overflows
  EXPECT_EQ(c.run({}, {bits(8.0), bits(kNaN)}).error, LoopError::None);           // NaN in, NaN out
  o = c.run({}, {bits(kInf), bits(2.0)});  // infinities from infinite operands are fine
  EXPECT_EQ(o.error, LoopError::None);
  EXPECT_EQ(o.f(0), kInf);
  EXPECT_EQ(o.f(1), kInf);
  EXPECT_EQ(o.f(2), kInf);
  o = c.run({}, {bits(kNaN), bits(2.0)});
  EXPECT_EQ(o.error, LoopError::None);
  EXPECT_TRUE(std::isnan(o.f(0)) && std::isnan(o.f(1)) && std::isnan(o.f(2)));

  // Unchecked: IEEE results, and an inf_error of None allows infinities when checked.
  Builder u;
  const int ux = u.param(EType::Float);
  const int ul = u.call1("math.log", log_fn, ux, false, LoopError::MathDomain);
  const int ue = u.call1("math.exp", exp_fn, ux, true, LoopError::None);
  u.exit();
  u.result(ul);
  u.result(ue);
  Compiled cu(u.loop);
  o = cu.run({}, {bits(-1.0)});
  EXPECT_TRUE(std::isnan(o.f(0)));
  o = cu.run({}, {bits(1000.0)});
  EXPECT_EQ(o.error, LoopError::None);
  EXPECT_EQ(o.f(1), kInf);
}

TEST(ElementLoop, ComparisonsWithNaN) {
  const ECond conds[] = {ECond::Lt, ECond::Le, ECond::Eq, ECond::Ne, ECond::Gt, ECond::Ge};
  auto want = [](ECond c, auto a, auto b) {
    switch (c) {
      case ECond::Lt: return a < b;
      case ECond::Le: return a <= b;
      case ECond::Eq: return a == b;
      case ECond::Ne: return a != b;
      case ECond::Gt: return a > b;
      default: return a >= b;
    }
  };
  for (EType t : {EType::Float, EType::Int}) {
    // Per condition: Cmp into a variable, and Branch on a Cmp with the true target next and with
    // the false target next (the flags are used directly then). Float: also min, max and not.
    Builder b;
    const int x = b.param(t), y = b.param(t);
    std::vector<int> rs;
    for (ECond c : conds) {
      rs.push_back(b.cmp(c, x, y));
      for (int variant = 0; variant < 2; ++variant) {
        const int r = b.var(EType::Int);
        const int cond = b.cmp(c, x, y);
        int yes, no;
        if (variant == 0) {
          yes = b.block();
          no = b.block();
        } else {
          no = b.block();
          yes = b.block();
        }
        const int join = b.block();
        b.br(cond, yes, no);
        b.at(yes);
        b.set_int(r, 1);
        b.jump(join);
        b.at(no);
        b.set_int(r, 0);
        b.jump(join);
        b.at(join);
        rs.push_back(r);
      }
    }
    rs.push_back(b.op(EOp::Min, x, y));
    rs.push_back(b.op(EOp::Max, x, y));
    rs.push_back(b.op(EOp::Not, x));
    b.exit();
    for (int r : rs) b.result(r);
    Compiled c(b.loop);

    if (t == EType::Float) {
      const double pairs[][2] = {{kNaN, 1.0}, {1.0, kNaN}, {kNaN, kNaN}, {1.0, 2.0}, {2.0, 1.0}, {1.0, 1.0},
                                 {-0.0, 0.0}, {0.0, -0.0}, {kInf, kInf}, {-kInf, kInf}, {0.0, 0.0}};
      for (const auto& p : pairs) {
        SCOPED_TRACE(std::to_string(p[0]) + ", " + std::to_string(p[1]));
        Outcome o = c.run({}, {bits(p[0]), bits(p[1])});
        for (int k = 0; k < 6; ++k)
          for (int v = 0; v < 3; ++v) EXPECT_EQ(o.i(3 * k + v), want(conds[k], p[0], p[1])) << k << " " << v;
        // Python's min(a, b) = b if b < a else a: a NaN first argument stays.
        EXPECT_EQ(bits(o.f(18)), bits(p[1] < p[0] ? p[1] : p[0]));
        EXPECT_EQ(bits(o.f(19)), bits(p[1] > p[0] ? p[1] : p[0]));
        EXPECT_EQ(o.i(20), p[0] == 0.0);
      }
      EXPECT_TRUE(std::isnan(c.run({}, {bits(kNaN), bits(1.0)}).f(18)));
      EXPECT_EQ(c.run({}, {bits(1.0), bits(kNaN)}).f(19), 1.0);
    } else {
      const int64_t pairs[][2] = {{1, 2}, {2, 1}, {1, 1}, {kMin, kMax}, {kMax, kMin}, {-1, 0}, {0, 0}};
      for (const auto& p : pairs) {
        SCOPED_TRACE(std::to_string(p[0]) + ", " + std::to_string(p[1]));
        Outcome o = c.run({}, {p[0], p[1]});
        for (int k = 0; k < 6; ++k)
          for (int v = 0; v < 3; ++v) EXPECT_EQ(o.i(3 * k + v), want(conds[k], p[0], p[1])) << k << " " << v;
        EXPECT_EQ(o.i(18), std::min(p[0], p[1]));
        EXPECT_EQ(o.i(19), std::max(p[0], p[1]));
      }
    }
  }
}

TEST(ElementLoop, FloatUnaryAndConstants) {
  Builder b;
  const int x = b.param(EType::Float);
  const int rs[] = {b.op(EOp::Neg, x), b.op(EOp::Abs, x), b.fconst(-0.0), b.fconst(0.1), b.fconst(kNaN),
                    b.op(EOp::Mul, x, b.fconst(-2.5))};
  b.exit();
  for (int r : rs) b.result(r);
  Compiled c(b.loop);
  for (double v : {1.5, -1.5, 0.0, -0.0, kInf, kNaN}) {
    SCOPED_TRACE(v);
    Outcome o = c.run({}, {bits(v)});
    EXPECT_EQ(bits(o.f(0)), bits(-v));
    EXPECT_EQ(bits(o.f(1)), bits(std::fabs(v)));
    EXPECT_EQ(bits(o.f(2)), bits(-0.0));
    EXPECT_EQ(o.f(3), 0.1);
    EXPECT_TRUE(std::isnan(o.f(4)));
    EXPECT_EQ(bits(o.f(5)), bits(v * -2.5));
  }
}

TEST(ElementLoop, ManyLiveVariablesAcrossCalls) {
  // More loop-carried variables than registers, each live across a call: spills around the loop.
  Builder b;
  const int a = b.array(DType::Float64, 1);
  std::vector<int> facc, iacc, fk;
  for (int k = 0; k < 20; ++k) {
    facc.push_back(b.fconst(0.0));
    fk.push_back(b.fconst(1.0 + k / 64.0));
  }
  for (int k = 0; k < 16; ++k) iacc.push_back(b.iconst(k));
  const int unset = b.var(EType::Float);  // read before any assignment when the loop does not run
  Builder::For f = b.begin_for(b.dim(a, 0));
  const int v = b.load(a, {f.i}, EType::Float);
  const int e = b.call1("math.exp", exp_fn, v, true, LoopError::MathRange);
  for (int k = 0; k < 20; ++k) b.set(facc[k], EOp::Add, b.op(EOp::Mul, facc[k], fk[k]), e);
  for (int k = 0; k < 16; ++k) b.set(iacc[k], EOp::Add, iacc[k], b.op(EOp::Mul, f.i, iacc[(k + 1) % 16], true), true);
  b.set(unset, EOp::Mov, v);
  b.end_for(f);
  b.exit();
  for (int r : facc) b.result(r);
  for (int r : iacc) b.result(r);
  b.result(unset);
  Compiled c(b.loop);

  Outcome o = c.run({array_of(std::vector<double>{0.5, -1.0, 2.0, 0.0, 1.25})});
  EXPECT_EQ(o.error, LoopError::None);
  double want = 0;
  for (double x : {0.5, -1.0, 2.0, 0.0, 1.25}) want = want * 1.0 + std::exp(x);
  EXPECT_EQ(o.f(0), want);
  EXPECT_EQ(o.f(36), 1.25);
  o = c.run({array_of(std::vector<double>{})});
  EXPECT_EQ(o.f(36), 0.0);
  EXPECT_EQ(c.run({array_of(std::vector<double>{1.0, 800.0})}).error, LoopError::MathRange);
}

// ---- random programs ----

// An array of `values` shaped `dims` whose elements sit `step` items apart along the last axis,
// the axes in reverse memory order when `transposed`, and the first axis running backwards when
// `reversed` (origin at its last row, negative stride). Bytes between elements hold 0xAB.
template <typename T>
Array view_of(const std::vector<T>& values, std::vector<int64_t> dims, int step, bool transposed, bool reversed) {
  const int rank = static_cast<int>(dims.size());
  Array a;
  a.dims = dims;
  a.strides.assign(rank, 0);
  int64_t count = 1;
  for (int64_t d : dims) count *= d;
  a.bytes.assign(static_cast<size_t>(std::max<int64_t>(count, 1) * step * sizeof(T)), 0xAB);
  // Memory order: the last axis innermost, or the first when transposed.
  int64_t s = static_cast<int64_t>(sizeof(T)) * step;
  for (int m = 0; m < rank; ++m) {
    const int k = transposed ? m : rank - 1 - m;
    a.strides[k] = s;
    s *= std::max<int64_t>(dims[k], 1);
  }
  if (reversed && rank > 0 && dims[0] > 0) {
    a.origin = (dims[0] - 1) * a.strides[0];
    a.strides[0] = -a.strides[0];
  }
  // Element (i0, i1, ...) in row-major order of the values.
  for (int64_t flat = 0; flat < count; ++flat) {
    int64_t rest = flat, off = a.origin;
    for (int k = rank - 1; k >= 0; --k) {
      off += (rest % dims[k]) * a.strides[k];
      rest /= dims[k];
    }
    std::memcpy(a.bytes.data() + off, &values[static_cast<size_t>(flat)], sizeof(T));
  }
  return a;
}

// Random structured programs in the frontend's shapes: counted loops (a header testing counter <
// bound, a body that copies the counter and steps it first), if/else with arms of a few
// instructions or more, break, loads and stores whose indices may be negative or out of range,
// and arithmetic of every kind on variables and constants (constants set once in the entry block,
// as the frontend does). Each runs compiled, interpreted, and interpreted after optimization.
class RandomProgram {
public:
  explicit RandomProgram(uint64_t seed) : rng_(seed) {
    m_ = b.array(DType::Float64, 2, true);
    v_ = b.array(DType::Int64, 1, true);
    f_ = b.array(DType::Float32, 1);
    t_ = b.array(DType::Int32, 2);
    u_ = b.array(DType::UInt8, 1, true);
    ints_ = {b.param(EType::Int), b.param(EType::Int)};
    floats_ = {b.param(EType::Float)};
    for (int k = 0; k < 3; ++k) ints_.push_back(iconst(pick<int64_t>({0, 1, 2, -1, 3, 7, -5, 100})));
    floats_.push_back(fconst(pick<double>({0.0, 1.5, -2.0, 0.25})));
    for (int k = 0; k < 2; ++k) ints_.push_back(b.dim(pick({m_, t_}), static_cast<int>(rnd(2))));
    ints_.push_back(b.dim(pick({v_, f_, u_}), 0));
    stmts(0, 6 + static_cast<int>(rnd(6)));
    b.exit();
    for (int k = 0; k < 3; ++k) b.result(pick(ints_));
    for (int k = 0; k < 2; ++k) b.result(pick(floats_));
  }

  Builder b;

  std::vector<Array> arrays(std::mt19937_64& r) const {
    // Sizes mostly one shared size, else 2 to `hi`, now and then 0 or 1.
    const bool shared = r() % 4 != 0;
    const int64_t size = 3 + static_cast<int64_t>(r() % 4);
    auto n = [&](int hi) {
      if (shared) return size;
      if (r() % 8 == 0) return static_cast<int64_t>(r() % 2);
      return 2 + static_cast<int64_t>(r() % static_cast<uint64_t>(hi - 1));
    };
    auto layout = [&](auto values, std::vector<int64_t> dims) {
      const int kind = static_cast<int>(r() % 5);
      return view_of(values, dims, kind == 1 ? 2 : 1, kind == 2 && dims.size() == 2, kind == 3);
    };
    const int64_t r0 = n(5), c0 = n(5), l = n(7), r1 = n(4), c1 = n(4);
    std::vector<double> mv(static_cast<size_t>(r0 * c0));
    for (double& x : mv) x = static_cast<double>(static_cast<int64_t>(r() % 17) - 8) * 0.5;
    std::vector<int64_t> vv(static_cast<size_t>(l));
    for (int64_t& x : vv) x = static_cast<int64_t>(r() % 13) - 6;
    std::vector<float> fv(static_cast<size_t>(n(6)));
    for (float& x : fv) x = static_cast<float>(static_cast<int64_t>(r() % 9) - 4) * 0.75f;
    std::vector<int32_t> tv(static_cast<size_t>(r1 * c1));
    for (int32_t& x : tv) x = static_cast<int32_t>(r() % 11) - 5;
    std::vector<uint8_t> uv(static_cast<size_t>(n(6)));
    for (uint8_t& x : uv) x = static_cast<uint8_t>(r());
    return {layout(mv, {r0, c0}), layout(vv, {l}), layout(fv, {static_cast<int64_t>(fv.size())}),
            layout(tv, {r1, c1}), layout(uv, {static_cast<int64_t>(uv.size())})};
  }

  std::vector<int64_t> params(std::mt19937_64& r) const {
    const int64_t i0 = static_cast<int64_t>(r() % 9) - 2, i1 = static_cast<int64_t>(r() % 70) - 3;
    const double x = r() % 8 == 0 ? kNaN : static_cast<double>(static_cast<int64_t>(r() % 9) - 4) * 0.5;
    return {i0, i1, bits(x)};
  }

private:
  uint64_t rnd(uint64_t n) { return rng_() % n; }
  bool chance(int percent) { return static_cast<int>(rnd(100)) < percent; }
  template <typename T>
  T pick(std::initializer_list<T> xs) {
    return *(xs.begin() + rnd(xs.size()));
  }
  int pick(const std::vector<int>& xs) { return xs[rnd(xs.size())]; }

  // Constants as the frontend writes them: set once at the top of the entry block.
  int iconst(int64_t v) {
    EInstr e;
    e.op = EOp::Const;
    e.type = EType::Int;
    e.dst = b.var(EType::Int);
    e.imm = v;
    std::vector<EInstr>& entry = b.loop.blocks[0].instrs;
    entry.insert(entry.begin(), e);
    return e.dst;
  }
  int fconst(double v) {
    EInstr e;
    e.op = EOp::Const;
    e.type = EType::Float;
    e.dst = b.var(EType::Float);
    e.fimm = v;
    std::vector<EInstr>& entry = b.loop.blocks[0].instrs;
    entry.insert(entry.begin(), e);
    return e.dst;
  }
  int int_operand() {
    if (chance(35))
      return iconst(pick<int64_t>({0, 1, -1, 2, 3, 5, 8, 16, 63, 64, 65, -64, 255, 1000, kMax, kMin, 1LL << 40}));
    return pick(ints_);
  }
  int float_operand() {
    if (chance(30)) return fconst(pick<double>({0.0, -0.0, 1.0, 0.5, -3.0, 9.0, 1e300, kInf, kNaN}));
    return pick(floats_);
  }
  // A variable to assign: a new one, or an old one the loops around do not count with.
  int int_dst() {
    if (chance(60)) {
      const int v = b.var(EType::Int);
      ints_.push_back(v);
      return v;
    }
    for (int tries = 0; tries < 8; ++tries) {
      const int v = pick(ints_);
      if (std::find(protected_.begin(), protected_.end(), v) == protected_.end() &&
          std::find(b.loop.params.begin(), b.loop.params.end(), v) == b.loop.params.end())
        return v;
    }
    const int v = b.var(EType::Int);
    ints_.push_back(v);
    return v;
  }
  int float_dst() {
    if (chance(60) || floats_.size() < 3) {
      const int v = b.var(EType::Float);
      floats_.push_back(v);
      return v;
    }
    return floats_[1 + rnd(floats_.size() - 1)];
  }
  // An index: mostly a loop's variable or a small step from it, else anything.
  int index() {
    if (!loop_vars_.empty() && chance(85)) {
      const int i = pick(loop_vars_);
      if (chance(90)) return i;
      const int d = int_dst();
      b.set(d, chance(50) ? EOp::Add : EOp::Sub, i, iconst(pick<int64_t>({1, 2, -1})), chance(50));
      return d;
    }
    if (chance(85)) return iconst(pick<int64_t>({0, 1, -1, 2}));
    return int_operand();
  }

  void int_op() {
    static const EOp ops[] = {EOp::Add, EOp::Sub, EOp::Mul, EOp::FloorDiv, EOp::Mod, EOp::Min, EOp::Max,
                              EOp::BitAnd, EOp::BitOr, EOp::BitXor, EOp::Shl, EOp::Shr, EOp::Neg, EOp::Abs,
                              EOp::Invert, EOp::Not, EOp::Mov, EOp::Cmp, EOp::ToInt};
    const EOp op = ops[rnd(std::size(ops))];
    const bool checked = chance(30);
    if (op == EOp::Cmp) {
      const ECond c = static_cast<ECond>(rnd(6));
      const int r = chance(50) ? b.cmp(c, int_operand(), int_operand()) : b.cmp(c, float_operand(), float_operand());
      ints_.push_back(r);
      return;
    }
    if (op == EOp::ToInt) {
      const int d = int_dst(), a = float_operand();
      EInstr& e = b.emit(EOp::ToInt, EType::Int);
      e.dst = d;
      e.a = a;
      return;
    }
    if (op == EOp::Not) {
      const int d = int_dst(), a = chance(70) ? int_operand() : float_operand();
      EInstr& e = b.emit(EOp::Not, EType::Int);
      e.dst = d;
      e.a = a;
      return;
    }
    const int d = int_dst();
    const bool unary = op == EOp::Neg || op == EOp::Abs || op == EOp::Invert || op == EOp::Mov;
    b.set(d, op, int_operand(), unary ? -1 : int_operand(), checked && op != EOp::Mov && op != EOp::Invert);
    if (chance(40)) b.set(d, EOp::BitAnd, d, iconst(pick<int64_t>({255, 15, 1023})));  // keep values small
  }

  void float_op() {
    static const EOp ops[] = {EOp::Add, EOp::Sub, EOp::Mul, EOp::Div, EOp::FloorDiv, EOp::Mod, EOp::Min,
                              EOp::Max, EOp::Neg, EOp::Abs, EOp::Sqrt, EOp::Mov, EOp::ToFloat};
    const EOp op = ops[rnd(std::size(ops))];
    const int d = float_dst();
    if (op == EOp::ToFloat) {
      b.set(d, EOp::ToFloat, int_operand());
      return;
    }
    const bool unary = op == EOp::Neg || op == EOp::Abs || op == EOp::Sqrt || op == EOp::Mov;
    b.set(d, op, float_operand(), unary ? -1 : float_operand(),
          chance(40) && (op == EOp::Div || op == EOp::FloorDiv || op == EOp::Mod || op == EOp::Sqrt));
  }

  void load() {
    switch (rnd(5)) {
      case 0: {
        const int d = float_dst();
        b.load_to(d, m_, {index(), index()});
        break;
      }
      case 1: {
        const int d = int_dst();
        b.load_to(d, v_, {index()});
        break;
      }
      case 2: {
        const int d = float_dst();
        b.load_to(d, f_, {index()});
        break;
      }
      case 3: {
        const int d = chance(50) ? int_dst() : float_dst();
        b.load_to(d, t_, {index(), index()});
        break;
      }
      default: {
        const int d = int_dst();
        b.load_to(d, u_, {index()});
        break;
      }
    }
  }

  void store() {
    switch (rnd(3)) {
      case 0: b.store(m_, {index(), index()}, chance(70) ? float_operand() : int_operand()); break;
      case 1: b.store(v_, {index()}, int_operand()); break;
      default: b.store(u_, {index()}, int_operand()); break;
    }
  }

  int condition() {
    if (chance(20)) return pick(ints_);  // any Int: nonzero is true
    const ECond c = static_cast<ECond>(rnd(6));
    const int r = chance(60) ? b.cmp(c, int_operand(), int_operand()) : b.cmp(c, float_operand(), float_operand());
    return r;
  }

  void if_else(int depth) {
    const int c = condition();
    const int yes = b.block(), no = b.block(), join = b.block();
    const bool triangle = chance(30);
    b.br(c, yes, triangle ? join : no);
    const bool small = chance(60);
    b.at(yes);
    if (small) {
      for (int k = 0, n = 1 + static_cast<int>(rnd(3)); k < n; ++k) chance(70) ? int_op() : float_op();
    } else {
      stmts(depth + 1, 1 + static_cast<int>(rnd(3)));
    }
    b.jump(join);
    b.at(no);
    if (small) {
      for (int k = 0, n = static_cast<int>(rnd(3)); k < n; ++k) chance(70) ? int_op() : float_op();
    } else if (!triangle) {
      stmts(depth + 1, 1 + static_cast<int>(rnd(2)));
    }
    b.jump(join);
    b.at(join);
  }

  void counted_loop(int depth) {
    // for i in range(start, bound): the bound a size (at most 6) or a parameter.
    int bound = chance(75) ? pick(std::vector<int>{ints_[5], ints_[6], ints_[7]}) : ints_[0];
    const int capped = b.var(EType::Int);
    b.set(capped, EOp::Min, bound, iconst(6));
    bound = capped;
    const int counter = b.var(EType::Int);
    b.set(counter, EOp::Mov, chance(75) ? iconst(0) : iconst(pick<int64_t>({1, -2})));
    const int head = b.block(), body = b.block(), after = b.block();
    b.jump(head);
    b.at(head);
    b.br(b.cmp(ECond::Lt, counter, bound), body, after);
    b.at(body);
    const int i = b.var(EType::Int);
    b.set(i, EOp::Mov, counter);
    if (chance(80)) b.set(counter, EOp::Add, counter, iconst(1));
    else b.set(counter, EOp::Add, counter, iconst(1), true);
    protected_.push_back(counter);
    protected_.push_back(bound);
    loop_vars_.push_back(i);
    afters_.push_back(after);
    ints_.push_back(i);
    stmts(depth + 1, 2 + static_cast<int>(rnd(5)));
    afters_.pop_back();
    loop_vars_.pop_back();
    protected_.pop_back();
    protected_.pop_back();
    b.jump(head);
    b.at(after);
  }

  void stmts(int depth, int count) {
    for (int k = 0; k < count; ++k) {
      const int r = static_cast<int>(rnd(100));
      if (r < 25) int_op();
      else if (r < 40) float_op();
      else if (r < 58) load();
      else if (r < 70) store();
      else if (r < 80 && depth < 3) if_else(depth);
      else if (r < 92 && depth < 3 && loop_depth() < 3) counted_loop(depth);
      else if (r < 96 && !afters_.empty()) {
        const int c = condition(), cont = b.block();
        b.br(c, afters_.back(), cont);  // break
        b.at(cont);
      } else {
        chance(50) ? int_op() : float_op();
      }
    }
  }
  int loop_depth() const { return static_cast<int>(afters_.size()); }

  std::mt19937_64 rng_;
  int m_, v_, f_, t_, u_;
  std::vector<int> ints_, floats_, protected_, loop_vars_, afters_;
};

TEST(ElementLoop, RandomProgramsAgree) {
  // Compiled, interpreted and optimized-then-interpreted, to the bit, errors and details included.
  // FJ_RANDOM_COUNT=n runs programs 1..n instead of 1..400 (and prints how the runs ended, by
  // LoopError); FJ_RANDOM_SEED=k runs program k only.
  int errors = 0, runs = 0, kinds[8] = {};
  const char* only = std::getenv("FJ_RANDOM_SEED");
  const char* count = std::getenv("FJ_RANDOM_COUNT");
  const uint64_t last = count ? std::strtoull(count, nullptr, 10) : 400;
  for (uint64_t seed = 1; seed <= last; ++seed) {
    if (only && std::strtoull(only, nullptr, 10) != seed) continue;
    if (only) std::fprintf(stderr, "seed %llu\n", static_cast<unsigned long long>(seed));
    RandomProgram p(seed);
    SCOPED_TRACE("seed " + std::to_string(seed) + "\n" + p.b.loop.to_string());
    Compiled c(p.b.loop);
    c.allow_any_nan();
    std::mt19937_64 r(seed * 7919);
    for (int k = 0; k < 12; ++k) {
      Outcome o = c.run(p.arrays(r), p.params(r));
      errors += o.error != LoopError::None;
      ++kinds[static_cast<int>(o.error)];
      ++runs;
    }
    if (::testing::Test::HasFailure()) {
      ADD_FAILURE() << "optimized:\n" << c.optimized().to_string();
      break;
    }
  }
  if (only || count) {
    std::fprintf(stderr, "%d of %d runs stopped with an error:", errors, runs);
    for (int k = 0; k < 8; ++k) std::fprintf(stderr, " %d", kinds[k]);
    std::fprintf(stderr, "\n");
  }
  if (only) return;
  // Both outcomes are common enough to test something.
  EXPECT_GT(errors, runs / 10);
  EXPECT_LT(errors, runs * 9 / 10);
}

// ---- what the optimizer and the code generator do with constants, copies and loops ----

// A constant the frontend's way: a variable set once at the top of the entry block.
int entry_const(Builder& b, EType t, int64_t i, double f) {
  EInstr e;
  e.op = EOp::Const;
  e.type = t;
  e.dst = b.var(t);
  e.imm = i;
  e.fimm = f;
  std::vector<EInstr>& entry = b.loop.blocks[0].instrs;
  entry.insert(entry.begin(), e);
  return e.dst;
}

TEST(ElementLoop, IntConstantOperands) {
  // x op c and c op x for every binary operation, checked and not, with constants the code
  // generator takes as immediates (imm32, 0 as `test`, shift counts), as registers (beyond imm32),
  // or special-cases (powers of two for // and %, 0 and -1 divisors, shift counts out of range).
  const EOp ops[] = {EOp::Add, EOp::Sub,    EOp::Mul,   EOp::FloorDiv, EOp::Mod, EOp::Min, EOp::Max,
                     EOp::BitAnd, EOp::BitOr, EOp::BitXor, EOp::Shl,   EOp::Shr, EOp::Cmp};
  const int64_t constants[] = {0,    1,    -1,   2,   3,  7,  8,  16, 30, 31, 32, 62, 63, 64, 65, -64,
                               1000, int64_t{1} << 31, -(int64_t{1} << 31), (int64_t{1} << 31) - 1,
                               kMin, kMax, int64_t{1} << 40};
  const int64_t xs[] = {0, 1, -1, 5, -5, 100, -7777, int64_t{1} << 32, -(int64_t{1} << 33), kMin, kMax, kMin + 1};
  for (bool checked : {false, true}) {
    for (int64_t c : constants) {
      SCOPED_TRACE("constant " + std::to_string(c) + (checked ? " checked" : ""));
      Builder b;
      const int x = b.param(EType::Int);
      const int k = entry_const(b, EType::Int, c, 0);
      std::vector<int> rs;
      for (EOp op : ops) {
        if (op == EOp::Cmp) {
          for (int cond = 0; cond < 6; ++cond) {
            rs.push_back(b.cmp(static_cast<ECond>(cond), x, k));
            rs.push_back(b.cmp(static_cast<ECond>(cond), k, x));
          }
          continue;
        }
        const bool ck = checked && (op == EOp::Add || op == EOp::Sub || op == EOp::Mul || op == EOp::FloorDiv ||
                                    op == EOp::Mod || op == EOp::Shl || op == EOp::Shr);
        // Each checked operation in its own program would be cleaner; one per program keeps the
        // first error the same in both: so checked ones go into separate programs below.
        if (ck) continue;
        rs.push_back(b.op(op, x, k));
        rs.push_back(b.op(op, k, x));
      }
      for (EOp op : {EOp::Neg, EOp::Abs, EOp::Invert, EOp::Not, EOp::ToFloat}) rs.push_back(b.op(op, k));
      b.exit();
      for (int r : rs) b.result(r);
      Compiled plain(b.loop);
      for (int64_t v : xs) plain.run({}, {v});
      if (!checked) continue;
      for (EOp op : {EOp::Add, EOp::Sub, EOp::Mul, EOp::FloorDiv, EOp::Mod, EOp::Shl, EOp::Shr, EOp::Neg, EOp::Abs}) {
        for (bool constant_first : {false, true}) {
          SCOPED_TRACE(std::string("checked op ") + std::to_string(static_cast<int>(op)) +
                       (constant_first ? " c op x" : " x op c"));
          Builder p;
          const int px = p.param(EType::Int);
          const int pk = entry_const(p, EType::Int, c, 0);
          const bool unary = op == EOp::Neg || op == EOp::Abs;
          const int r = unary            ? p.op(op, pk, -1, true)
                        : constant_first ? p.op(op, pk, px, true)
                                         : p.op(op, px, pk, true);
          p.exit();
          p.result(r);
          Compiled one(p.loop);
          for (int64_t v : xs) one.run({}, {v});
        }
      }
    }
  }
}

TEST(ElementLoop, ShiftsByConstants) {
  // Python's checked a << c (bits shifted out are IntOverflow) for each count, and NumPy's.
  const int64_t counts[] = {-64, -1, 0, 1, 2, 3, 15, 29, 30, 31, 32, 33, 47, 62, 63, 64, 65, 100};
  const int64_t xs[] = {0, 1, -1, 3, -3, 0x7fff, int64_t{1} << 31, int64_t{1} << 32, (int64_t{1} << 62) - 1,
                        int64_t{1} << 62, kMin, kMax, -(int64_t{1} << 62)};
  for (int64_t c : counts) {
    for (bool checked : {false, true}) {
      SCOPED_TRACE(std::to_string(c) + (checked ? " checked" : ""));
      Builder b;
      const int x = b.param(EType::Int);
      const int k = entry_const(b, EType::Int, c, 0);
      const int l = b.op(EOp::Shl, x, k, checked);
      b.exit();
      b.result(l);
      Compiled cl(b.loop);
      Builder r;
      const int rx = r.param(EType::Int);
      const int rk = entry_const(r, EType::Int, c, 0);
      const int sr = r.op(EOp::Shr, rx, rk, checked);
      r.exit();
      r.result(sr);
      Compiled cr(r.loop);
      for (int64_t v : xs) {
        SCOPED_TRACE(v);
        Outcome o = cl.run({}, {v});
        if (checked) {
          const bool ok =
              c >= 0 && (c >= 64 ? v == 0 : (static_cast<int64_t>(static_cast<uint64_t>(v) << c) >> c) == v);
          EXPECT_EQ(o.error, ok ? LoopError::None : LoopError::IntOverflow);
        } else {
          EXPECT_EQ(o.i(0), c >= 0 && c < 64 ? static_cast<int64_t>(static_cast<uint64_t>(v) << c) : 0);
        }
        Outcome q = cr.run({}, {v});
        EXPECT_EQ(q.error, checked && c < 0 ? LoopError::IntOverflow : LoopError::None);
        if (q.error == LoopError::None) {
          EXPECT_EQ(q.i(0), v >> (c >= 0 && c < 64 ? c : 63));
        }
      }
    }
  }
}

TEST(ElementLoop, FloatConstantOperands) {
  // x op c and c op x with constants from memory (RIP-relative), and compares against constant
  // NaN, zeros and infinities, both as values and as branches, in every operand order.
  const double constants[] = {0.0, -0.0, 1.0, -1.5, 0.1, 1e300, kInf, -kInf, kNaN, -kNaN};
  const double xs[] = {0.0, -0.0, 1.0, -1.5, 2.5, 0.1, 1e-310, kInf, -kInf, kNaN};
  const EOp ops[] = {EOp::Add, EOp::Sub,      EOp::Mul, EOp::Div,     EOp::Min,
                     EOp::Max, EOp::FloorDiv, EOp::Mod, EOp::Minimum, EOp::Maximum};
  const ECond conds[] = {ECond::Lt, ECond::Le, ECond::Eq, ECond::Ne, ECond::Gt, ECond::Ge};
  for (double c : constants) {
    SCOPED_TRACE("constant " + std::to_string(c));
    Builder b;
    const int x = b.param(EType::Float);
    const int k = entry_const(b, EType::Float, 0, c);
    std::vector<int> rs;
    for (EOp op : ops) {
      rs.push_back(b.op(op, x, k));
      rs.push_back(b.op(op, k, x));
    }
    for (EOp op : {EOp::Neg, EOp::Abs, EOp::Sqrt, EOp::Not}) rs.push_back(b.op(op, k));
    rs.push_back(b.op(EOp::Sqrt, x, -1, false));
    for (ECond cond : conds) {
      for (bool constant_first : {false, true}) {
        rs.push_back(constant_first ? b.cmp(cond, k, x) : b.cmp(cond, x, k));
        // As a branch (the compare fuses with it).
        const int r = b.var(EType::Int);
        const int t = constant_first ? b.cmp(cond, k, x) : b.cmp(cond, x, k);
        const int yes = b.block(), no = b.block(), join = b.block();
        b.br(t, yes, no);
        b.at(yes);
        b.set_int(r, 1);
        b.jump(join);
        b.at(no);
        b.set_int(r, 0);
        b.jump(join);
        b.at(join);
        rs.push_back(r);
      }
    }
    b.exit();
    for (int r : rs) b.result(r);
    Compiled cc(b.loop);
    for (double v : xs) {
      if (std::isnan(v) && std::isnan(c)) continue;  // two NaNs: which one x86 keeps is its own affair
      SCOPED_TRACE(v);
      Outcome o = cc.run({}, {bits(v)});
      const size_t first_cmp = 2 * std::size(ops) + 5;
      for (size_t n = 0; n < std::size(conds); ++n) {
        for (int order = 0; order < 2; ++order) {
          const double a = order ? c : v, bb = order ? v : c;
          bool want;
          switch (conds[n]) {
            case ECond::Lt: want = a < bb; break;
            case ECond::Le: want = a <= bb; break;
            case ECond::Eq: want = a == bb; break;
            case ECond::Ne: want = a != bb; break;
            case ECond::Gt: want = a > bb; break;
            default: want = a >= bb; break;
          }
          EXPECT_EQ(o.i(static_cast<int>(first_cmp + 4 * n + 2 * order)), want) << n << " " << order;
          EXPECT_EQ(o.i(static_cast<int>(first_cmp + 4 * n + 2 * order + 1)), want) << n << " " << order << " branch";
        }
      }
    }
    // Checked division by the constant: ZeroDivision exactly when it is a zero.
    Builder d;
    const int dx = d.param(EType::Float);
    const int dk = entry_const(d, EType::Float, 0, c);
    const int q = d.op(EOp::Div, dx, dk, true);
    d.exit();
    d.result(q);
    Compiled cd(d.loop);
    EXPECT_EQ(cd.run({}, {bits(1.0)}).error, c == 0 ? LoopError::ZeroDivision : LoopError::None);
  }
}

TEST(ElementLoop, CopiesAcrossBlocks) {
  // d = mov s, then s assigned on one path only, d read after the join; a copy of a loop
  // counter read after the counter steps; a copy of a copy.
  Builder b;
  const int a = b.array(DType::Int64, 1, true);
  const int p = b.param(EType::Int), q = b.param(EType::Int);
  const int s = b.var(EType::Int), d = b.var(EType::Int), e = b.var(EType::Int);
  b.set(s, EOp::Mov, p);
  b.set(d, EOp::Mov, s);
  b.set(e, EOp::Mov, d);
  const int yes = b.block(), join = b.block();
  b.br(b.cmp(ECond::Gt, q, entry_const(b, EType::Int, 0, 0)), yes, join);
  b.at(yes);
  b.set(s, EOp::Add, s, q);
  b.jump(join);
  b.at(join);
  const int sum = b.op(EOp::Add, d, s);
  // for i in range(n): x = i; i += 1; a[x] = x * 10 + e
  const int n = b.dim(a, 0), i = b.var(EType::Int), one = entry_const(b, EType::Int, 1, 0);
  b.set(i, EOp::Mov, entry_const(b, EType::Int, 0, 0));
  const int head = b.block(), body = b.block(), after = b.block();
  b.jump(head);
  b.at(head);
  b.br(b.cmp(ECond::Lt, i, n), body, after);
  b.at(body);
  const int x = b.var(EType::Int);
  b.set(x, EOp::Mov, i);
  b.set(i, EOp::Add, i, one);
  b.store(a, {x}, b.op(EOp::Add, b.op(EOp::Mul, x, entry_const(b, EType::Int, 10, 0)), e));
  b.jump(head);
  b.at(after);
  b.exit();
  b.result(sum);
  b.result(d);
  b.result(e);
  b.result(x);
  Compiled c(b.loop);
  for (int64_t qv : {-3, 0, 4}) {
    Outcome o = c.run({array_of(std::vector<int64_t>(4, 0))}, {7, qv});
    EXPECT_EQ(o.i(0), 7 + (qv > 0 ? 7 + qv : 7));
    EXPECT_EQ(o.i(1), 7);
    EXPECT_EQ(o.i(2), 7);
    EXPECT_EQ(o.i(3), 3);
    EXPECT_EQ(contents<int64_t>(o.arrays[0]), (std::vector<int64_t>{7, 17, 27, 37}));
  }
  // The optimizer left no copy of a copy.
  int movs = 0;
  for (const EBlock& blk : c.optimized().blocks)
    for (const EInstr& in : blk.instrs) movs += in.op == EOp::Mov;
  EXPECT_LE(movs, 2) << c.optimized().to_string();
}

TEST(ElementLoop, UnusedLoadStillRaises) {
  // for i in range(n + k): v = a[i]  (v unused): IndexError at i == size, with its detail.
  Builder b;
  const int a = b.array(DType::Float64, 1), m = b.array(DType::Int32, 2);
  const int k = b.param(EType::Int), j = b.param(EType::Int);
  const int n = b.op(EOp::Add, b.dim(a, 0), k, true);
  Builder::For f = b.begin_for(n);
  b.load(a, {f.i}, EType::Float);
  b.load(m, {j, f.i}, EType::Int);
  b.end_for(f);
  b.exit();
  Compiled c(b.loop);
  bool loads = false;
  for (const EBlock& blk : c.optimized().blocks)
    for (const EInstr& in : blk.instrs) loads |= in.op == EOp::Load;
  EXPECT_TRUE(loads) << c.optimized().to_string();
  const Array av = array_of(std::vector<double>(5, 1.0));
  const Array mv = array_of(std::vector<int32_t>(12, 0), {2, 6});
  EXPECT_EQ(c.run({av, mv}, {0, 1}).error, LoopError::None);
  Outcome o = c.run({av, mv}, {1, 1});
  EXPECT_EQ(o.error, LoopError::IndexOutOfBounds);
  EXPECT_EQ(o.detail[0], 5);
  EXPECT_EQ(o.detail[1], 0);
  EXPECT_EQ(o.detail[2], 5);
  o = c.run({av, mv}, {0, -3});  // the second load's row
  EXPECT_EQ(o.error, LoopError::IndexOutOfBounds);
  EXPECT_EQ(o.detail[0], -3);
  EXPECT_EQ(o.detail[1], 0);
  EXPECT_EQ(c.run({av, mv}, {0, -2}).error, LoopError::None);  // wraps to row 0
}

TEST(ElementLoop, FailStopsWithItsDetail) {
  // for i in range(n): a[i] = i; if i == k: fail ShapeMismatch {i, n, 2}. The stores before the
  // failure stay (as CPython's loop would have made them); the results are not written.
  Builder b;
  const int a = b.array(DType::Float64, 1, true);
  const int k = b.param(EType::Int);
  const int n = b.dim(a, 0);
  Builder::For f = b.begin_for(n);
  b.store(a, {f.i}, f.i);
  const int bad = b.block(), ok = b.block();
  b.br(b.cmp(ECond::Eq, f.i, k), bad, ok);
  b.at(bad);
  const int two = b.iconst(2);
  EInstr& fail = b.emit(EOp::Fail, EType::Int);
  fail.imm = static_cast<int64_t>(LoopError::ShapeMismatch);
  fail.index = {f.i, n, two};
  b.at(ok);
  b.end_for(f);
  b.exit();
  ASSERT_TRUE(b.loop.verify().is_ok()) << b.loop.verify().message();
  EXPECT_NE(b.loop.to_string().find("fail ShapeMismatch"), std::string::npos) << b.loop.to_string();
  Compiled c(b.loop);
  const Array av = array_of(std::vector<double>(6, -1.0));
  EXPECT_EQ(c.run({av}, {7}).error, LoopError::None);
  Outcome o = c.run({av}, {3});
  EXPECT_EQ(o.error, LoopError::ShapeMismatch);
  EXPECT_EQ(o.detail[0], 3);
  EXPECT_EQ(o.detail[1], 6);
  EXPECT_EQ(o.detail[2], 2);
  EXPECT_EQ(contents<double>(o.arrays[0]), (std::vector<double>{0, 1, 2, 3, -1, -1}));
}

TEST(ElementLoop, CountersSteppedByFourAreVersioned) {
  // k = 0; while k < m - 3: s += a[k] * b[k + 3]; k += 4 (m a parameter, maybe past the sizes):
  // the version without checks is taken only when every index stays in range; else the checks
  // raise where the interpreter does.
  Builder b;
  const int a = b.array(DType::Float64, 1), c = b.array(DType::Float64, 1);
  const int m = b.param(EType::Int);
  const int s = b.fconst(0.0), k = b.iconst(0), four = b.iconst(4), three = b.iconst(3);
  const int bound = b.op(EOp::Sub, m, three, false);
  const int head = b.block(), body = b.block(), done = b.block();
  b.jump(head);
  b.at(head);
  b.br(b.cmp(ECond::Lt, k, bound), body, done);
  b.at(body);
  const int x = b.load(a, {k}, EType::Float);
  const int y = b.load(c, {b.op(EOp::Add, k, three, false)}, EType::Float);
  b.set(s, EOp::Add, s, b.op(EOp::Mul, x, y, false), false);
  b.set(k, EOp::Add, k, four, false);
  b.jump(head);
  b.at(done);
  b.result(s);
  b.exit();
  Compiled comp(b.loop);
  std::vector<double> av(13), cv(16);
  for (size_t i = 0; i < av.size(); ++i) av[i] = 0.5 + static_cast<double>(i);
  for (size_t i = 0; i < cv.size(); ++i) cv[i] = 1.0 / (1.0 + static_cast<double>(i));
  for (int64_t n : {0, 3, 7, 13, 16, 17, 20}) {
    Outcome o = comp.run({array_of(av), array_of(cv)}, {n});
    if (n < 20) EXPECT_EQ(o.error, LoopError::None) << n;  // k = 16 is the first past a's 13
    else EXPECT_EQ(o.error, LoopError::IndexOutOfBounds) << n;
  }
}

TEST(ElementLoop, IfConvertedBranches) {
  // Small arms that meet again pick their Int results with cmov: on Int and Float (NaN)
  // conditions, diamonds and triangles, arms reading what the other assigns.
  Builder b;
  const int x = b.param(EType::Int), y = b.param(EType::Int), f = b.param(EType::Float);
  const int r1 = b.var(EType::Int), r2 = b.var(EType::Int), r3 = b.var(EType::Int);
  b.set(r1, EOp::Mov, x);
  b.set(r2, EOp::Mov, y);
  b.set(r3, EOp::Mov, entry_const(b, EType::Int, 0, 0));
  for (int variant = 0; variant < 4; ++variant) {
    int c;
    if (variant == 0) c = b.cmp(ECond::Lt, x, y);
    else if (variant == 1) c = b.cmp(ECond::Eq, f, entry_const(b, EType::Float, 0, 1.5));
    else if (variant == 2) c = b.cmp(ECond::Ne, f, f);  // NaN
    else c = b.op(EOp::BitAnd, x, entry_const(b, EType::Int, 1, 0));
    const int yes = b.block(), no = b.block(), join = b.block();
    b.br(c, yes, variant == 3 ? join : no);
    b.at(yes);
    b.set(r1, EOp::Add, r1, r2);
    b.set(r2, EOp::Sub, r1, entry_const(b, EType::Int, variant + 1, 0));
    b.jump(join);
    b.at(no);
    b.set(r3, EOp::BitXor, r3, r1);
    b.set(r1, EOp::Mov, entry_const(b, EType::Int, 10 * variant, 0));
    b.jump(join);
    b.at(join);
  }
  b.exit();
  b.result(r1);
  b.result(r2);
  b.result(r3);
  Compiled c(b.loop);
  for (int64_t xv : {-3, 0, 5})
    for (int64_t yv : {-3, 4})
      for (double fv : {1.5, 0.0, kNaN}) c.run({}, {xv, yv, bits(fv)});
}

TEST(ElementLoop, VersionedLoopsKeepTheirErrors) {
  // Loops whose index checks the code generator moves before the loop (indices the loop does not
  // assign, the counter and counter +- 1): on arrays where every check passes, where a negative
  // index wraps, where the bound passes the size (the error at its iteration, the earlier stores
  // made), contiguous or strided.
  Builder b;
  const int m = b.array(DType::Float64, 2, true), v = b.array(DType::Int64, 1, true);
  const int row = b.param(EType::Int), n = b.param(EType::Int);
  const int one = entry_const(b, EType::Int, 1, 0);
  const int i = b.var(EType::Int);
  b.set(i, EOp::Mov, one);
  const int head = b.block(), body = b.block(), after = b.block();
  b.jump(head);
  b.at(head);
  b.br(b.cmp(ECond::Lt, i, n), body, after);
  b.at(body);
  const int x = b.var(EType::Int);
  b.set(x, EOp::Mov, i);
  const int next = b.op(EOp::Add, i, one);
  const int prev = b.op(EOp::Sub, x, one);
  // m[row, x] = m[row, x - 1] + m[row, x + 1] + v[x]
  const int s = b.op(EOp::Add, b.load(m, {row, prev}, EType::Float), b.load(m, {row, next}, EType::Float));
  b.store(m, {row, x}, b.op(EOp::Add, s, b.op(EOp::ToFloat, b.load(v, {x}, EType::Int))));
  b.store(v, {x}, b.op(EOp::Mul, x, x));
  b.set(i, EOp::Mov, next);
  b.jump(head);
  b.at(after);
  b.exit();
  Compiled c(b.loop);
  std::vector<double> mv(4 * 6);
  for (size_t k = 0; k < mv.size(); ++k) mv[k] = 0.5 * static_cast<double>(k);
  const std::vector<int64_t> vv = {1, 2, 3, 4, 5, 6};
  for (int64_t r : {0, 3, -1, -4, 4, -5}) {
    for (int64_t bound : {0, 1, 5, 6, 7}) {
      SCOPED_TRACE(std::to_string(r) + ", " + std::to_string(bound));
      for (int layout = 0; layout < 3; ++layout) {
        Array ma = layout == 0 ? array_of(mv, {4, 6}) : view_of(mv, {4, 6}, layout == 1 ? 2 : 1, false, layout == 2);
        c.run({ma, array_of(vv)}, {r, bound});
      }
    }
  }
}

TEST(ElementLoop, CarriedElements) {
  // A[i, j] -= A[i, k] * A[k, j] for k in range(j) (the load in the loop's header) and in
  // range(kn) (in its body), k reaching j too: the value stored by one iteration is the next one's.
  for (DType dt : {DType::Float64, DType::Float32}) {
    for (int shape = 0; shape < 2; ++shape) {
      SCOPED_TRACE(std::string(rt::dtype_name(dt)) + " shape " + std::to_string(shape));
      Builder b;
      const int a = b.array(dt, 2, true);
      const int i = b.param(EType::Int), j = b.param(EType::Int), kn = b.param(EType::Int);
      const int k = b.var(EType::Int), zero = entry_const(b, EType::Int, 0, 0), one = entry_const(b, EType::Int, 1, 0);
      b.set(k, EOp::Mov, zero);
      const int head = b.block(), body = b.block(), after = b.block();
      b.jump(head);
      b.at(head);
      int cur = -1;
      if (shape == 0) cur = b.load(a, {i, j}, EType::Float);
      b.br(b.cmp(ECond::Lt, k, shape == 0 ? j : kn), body, after);
      b.at(body);
      if (shape == 1) cur = b.load(a, {i, j}, EType::Float);
      const int kk = b.var(EType::Int);
      b.set(kk, EOp::Mov, k);
      b.set(k, EOp::Add, k, one);
      const int t = b.op(EOp::Mul, b.load(a, {i, kk}, EType::Float), b.load(a, {kk, j}, EType::Float));
      b.store(a, {i, j}, b.op(EOp::Sub, cur, t));
      b.jump(head);
      b.at(after);
      b.exit();
      Compiled c(b.loop);
      std::vector<double> v(5 * 5);
      for (size_t q = 0; q < v.size(); ++q) v[q] = 0.25 * static_cast<double>(q % 7) - 0.5;
      std::vector<float> vf(v.begin(), v.end());
      for (int64_t iv : {0, 2, 4, -1})
        for (int64_t jv : {0, 1, 3, 4, 5})
          for (int64_t kv : {0, 2, 5, 6}) {
            Array arr = dt == DType::Float64 ? array_of(v, {5, 5}) : array_of(vf, {5, 5});
            c.run({arr}, {iv, jv, kv});
          }
    }
  }
}

TEST(ElementLoop, UnrolledLoops) {
  // for t in range(s, e) with constant bounds runs as copies of its body; a break keeps the loop.
  for (int64_t s : {0, 2, 5}) {
    for (int64_t e : {0, 3, 8, 17}) {
      for (bool with_break : {false, true}) {
        SCOPED_TRACE(std::to_string(s) + ".." + std::to_string(e) + (with_break ? " break" : ""));
        Builder b;
        const int a = b.array(DType::Int64, 1, true);
        const int x = b.param(EType::Int);
        const int acc = b.var(EType::Int), t = b.var(EType::Int);
        b.set(acc, EOp::Mov, x);
        b.set(t, EOp::Mov, entry_const(b, EType::Int, s, 0));
        const int one = entry_const(b, EType::Int, 1, 0);
        const int head = b.block(), body = b.block(), after = b.block();
        b.jump(head);
        b.at(head);
        b.br(b.cmp(ECond::Lt, t, entry_const(b, EType::Int, e, 0)), body, after);
        b.at(body);
        const int tt = b.var(EType::Int);
        b.set(tt, EOp::Mov, t);
        b.set(t, EOp::Add, t, one);
        const int odd = b.op(EOp::BitAnd, acc, one);
        const int yes = b.block(), no = b.block(), join = b.block();
        b.br(odd, yes, no);
        b.at(yes);
        b.set(acc, EOp::BitXor, b.op(EOp::Shl, acc, one, true), entry_const(b, EType::Int, 0x1021, 0));
        b.jump(join);
        b.at(no);
        b.set(acc, EOp::Add, acc, tt, true);
        b.jump(join);
        b.at(join);
        b.store(a, {tt}, acc);
        if (with_break) {
          const int cont = b.block();
          b.br(b.cmp(ECond::Gt, acc, entry_const(b, EType::Int, 1000, 0)), after, cont);
          b.at(cont);
        }
        b.jump(head);
        b.at(after);
        b.exit();
        b.result(acc);
        b.result(t);
        Compiled c(b.loop);
        for (int64_t xv : {int64_t{0}, int64_t{1}, int64_t{6}, int64_t{77}, kMax / 2, kMax})
          for (int64_t size : {4, 20}) c.run({array_of(std::vector<int64_t>(static_cast<size_t>(size), -1))}, {xv});
      }
    }
  }
}

TEST(ElementLoop, LongLoops) {
  // Loops too long to be emitted twice (once for contiguous arrays, once without checks): one
  // version, still right for every layout and every error.
  Builder b;
  const int a = b.array(DType::Float64, 2), v = b.array(DType::Int64, 1, true);
  const int s = b.fconst(0.0), t = b.iconst(0);
  Builder::For fi = b.begin_for(b.dim(v, 0));
  for (int k = 0; k < 260; ++k) {
    const int x = b.load(a, {fi.i, b.iconst(k % 3)}, EType::Float);
    b.set(s, EOp::Add, s, b.op(EOp::Mul, x, b.fconst(0.5 + k)));
    b.set(t, EOp::BitXor, t, b.op(EOp::Mul, fi.i, b.iconst(k + 1), true));
  }
  b.store(v, {fi.i}, t);
  b.end_for(fi);
  b.exit();
  b.result(s);
  b.result(t);
  Compiled c(b.loop);
  std::vector<double> av(4 * 3);
  for (size_t k = 0; k < av.size(); ++k) av[k] = 0.25 * static_cast<double>(k) - 1.0;
  for (int layout = 0; layout < 3; ++layout) {
    for (int64_t rows : {4, 6}) {  // 6: more rows in v than in a: IndexError at row 4
      Array m = layout == 0 ? array_of(av, {4, 3}) : view_of(av, {4, 3}, layout == 1 ? 2 : 1, layout == 2, false);
      Outcome o = c.run({m, array_of(std::vector<int64_t>(static_cast<size_t>(rows), 0))});
      EXPECT_EQ(o.error, rows == 4 ? LoopError::None : LoopError::IndexOutOfBounds);
    }
  }
}

TEST(ElementLoop, OptimizerCleansFrontendShapes) {
  // The frontend's loop: constants set once at entry, the counter copied into the loop variable
  // through jump-only blocks. After optimization: no jump-only block, no copy of a constant, the
  // copy of the counter gone.
  Builder b;
  const int a = b.array(DType::Float64, 1);
  const int n = b.param(EType::Int);
  const int zero = entry_const(b, EType::Int, 0, 0), one = entry_const(b, EType::Int, 1, 0);
  const int s = b.var(EType::Float), i = b.var(EType::Int), bound = b.var(EType::Int);
  b.set(s, EOp::Mov, entry_const(b, EType::Float, 0, 0.0));
  b.set(i, EOp::Mov, zero);
  b.set(bound, EOp::Mov, n);
  const int pre = b.block(), head = b.block(), body = b.block(), step = b.block(), latch = b.block(), after = b.block();
  b.jump(pre);
  b.at(pre);
  b.jump(head);
  b.at(head);
  b.br(b.cmp(ECond::Lt, i, bound), step, after);
  b.at(step);
  const int x = b.var(EType::Int), y = b.var(EType::Int);
  b.set(x, EOp::Mov, i);
  b.set(i, EOp::Add, i, one);
  b.jump(body);
  b.at(body);
  b.set(y, EOp::Mov, x);
  const int v = b.load(a, {y}, EType::Float);
  const int t = b.op(EOp::Add, s, v);
  b.set(s, EOp::Mov, t);
  b.jump(latch);
  b.at(latch);
  b.jump(head);
  b.at(after);
  b.exit();
  b.result(s);
  Compiled c(b.loop);
  EXPECT_EQ(c.run({array_of(std::vector<double>{1.5, 2.5, 4.0})}, {3}).f(0), 8.0);
  EXPECT_EQ(c.run({array_of(std::vector<double>{1.5, 2.5, 4.0})}, {4}).error, LoopError::IndexOutOfBounds);
  const ElementLoop& o = c.optimized();
  const std::vector<const EInstr*> consts = element_loop_constants(o);
  int movs = 0;
  for (size_t k = 0; k < o.blocks.size(); ++k) {
    const EBlock& blk = o.blocks[k];
    EXPECT_FALSE(k > 0 && blk.instrs.size() == 1 && blk.instrs[0].op == EOp::Jump) << "b" << k << "\n" << o.to_string();
    for (const EInstr& in : blk.instrs) {
      if (in.op != EOp::Mov) continue;
      ++movs;
      EXPECT_EQ(consts[in.a], nullptr) << "a copy of a constant\n" << o.to_string();
    }
  }
  EXPECT_EQ(movs, 0) << o.to_string();
  EXPECT_LE(o.blocks.size(), 4u) << o.to_string();
}

// ---- text and verification ----

TEST(ElementLoop, TextNamesEverything) {
  Builder b;
  const int a = b.array(DType::Float32, 2, true);
  const int x = b.param(EType::Float), i = b.param(EType::Int);
  const int y = b.op(EOp::Add, x, b.fconst(0.1));
  const int z = b.op(EOp::Add, i, i, true);
  b.store(a, {i, z}, y);
  const int l = b.call1("math.exp", exp_fn, y, true, LoopError::MathRange);
  const int body = b.block(), done = b.block();
  b.br(b.cmp(ECond::Le, x, l), body, done);
  b.at(body);
  b.jump(done);
  b.at(done);
  b.exit();
  b.result(z);
  const std::string text = b.loop.to_string();
  for (const char* part : {"float32", "written", "0.10000000000000001", "add.checked", "math.exp", "MathRange",
                           "cmp.le:f", "br v", "store a0[v1, v", "params v0 v1", "results v"})
    EXPECT_NE(text.find(part), std::string::npos) << part << " in\n" << text;

  // Every field that changes the meaning changes the text.
  auto changed = [&](auto mutate) {
    Builder c = b;
    mutate(c.loop);
    return c.loop.to_string() != text;
  };
  EXPECT_TRUE(changed([](ElementLoop& p) { p.blocks[0].instrs[0].fimm = std::nextafter(0.1, 1.0); }));
  EXPECT_TRUE(changed([](ElementLoop& p) { p.blocks[0].instrs[2].checked = false; }));
  EXPECT_TRUE(changed([](ElementLoop& p) { p.blocks[0].instrs[4].fn_name = "math.expm1"; }));
  EXPECT_TRUE(changed([](ElementLoop& p) { p.blocks[0].instrs[4].inf_error = LoopError::None; }));
  EXPECT_TRUE(changed([](ElementLoop& p) { p.blocks[0].instrs[5].cond = ECond::Lt; }));
  EXPECT_TRUE(changed([](ElementLoop& p) { p.arrays[0].dtype = DType::Float64; }));
  EXPECT_TRUE(changed([](ElementLoop& p) { p.arrays[0].written = false; }));
  EXPECT_TRUE(changed([](ElementLoop& p) { std::swap(p.params[0], p.params[1]); }));
  EXPECT_TRUE(changed([](ElementLoop& p) { p.blocks[0].instrs.back().target2 = 1; }));
  ElementLoop zero = b.loop, negative_zero = b.loop;
  zero.blocks[0].instrs[0].fimm = 0.0;
  negative_zero.blocks[0].instrs[0].fimm = -0.0;
  EXPECT_NE(zero.to_string(), negative_zero.to_string());
  EXPECT_TRUE(b.loop.verify().is_ok()) << b.loop.verify().message();
}

TEST(ElementLoop, VerifyRejectsMalformedPrograms) {
  Builder b;
  const int a = b.array(DType::Int32, 2), w = b.array(DType::Float64, 1, true);
  const int i = b.param(EType::Int), x = b.param(EType::Float);
  const int v = b.load(a, {i, i}, EType::Int);
  b.store(w, {v}, x);
  const int next = b.block();
  b.jump(next);
  b.at(next);
  b.exit();
  ASSERT_TRUE(b.loop.verify().is_ok()) << b.loop.verify().message();

  auto rejects = [&](const char* what, auto mutate) {
    ElementLoop p = b.loop;
    mutate(p);
    Status s = p.verify();
    EXPECT_EQ(s.code(), StatusCode::InvalidArgument) << what;
    Expected<rt::KernelPtr> k = x86::compile_element_loop(p);
    EXPECT_FALSE(k) << what;
    if (!k) {
      EXPECT_EQ(k.error().code(), StatusCode::InvalidArgument) << what;
    }
  };
  auto e = [](ElementLoop& p, int blk, int k) -> EInstr& { return p.blocks[blk].instrs[k]; };
  rejects("variable out of range", [&](ElementLoop& p) { e(p, 0, 0).dst = 99; });
  rejects("result out of range", [&](ElementLoop& p) { p.results.push_back(-1); });
  rejects("operand types", [&](ElementLoop& p) {
    EInstr add;
    add.op = EOp::Add;
    add.type = EType::Int;
    add.dst = v;
    add.a = i;
    add.b = x;
    p.blocks[1].instrs.insert(p.blocks[1].instrs.begin(), add);
  });
  rejects("Int Div", [&](ElementLoop& p) {
    EInstr div;
    div.op = EOp::Div;
    div.type = EType::Int;
    div.dst = v;
    div.a = i;
    div.b = i;
    p.blocks[1].instrs.insert(p.blocks[1].instrs.begin(), div);
  });
  rejects("no terminator", [&](ElementLoop& p) { p.blocks[0].instrs.pop_back(); });
  rejects("terminator inside", [&](ElementLoop& p) {
    EInstr ex;
    ex.op = EOp::Exit;
    p.blocks[0].instrs.insert(p.blocks[0].instrs.begin(), ex);
  });
  rejects("empty block", [&](ElementLoop& p) { p.blocks.emplace_back(); });
  rejects("target out of range", [&](ElementLoop& p) { e(p, 0, 2).target = 2; });
  rejects("index count", [&](ElementLoop& p) { e(p, 0, 0).index.pop_back(); });
  rejects("Float index", [&](ElementLoop& p) { e(p, 0, 1).index[0] = x; });
  rejects("store to a read-only array", [&](ElementLoop& p) { p.arrays[1].written = false; });
  rejects("Float into an integer element", [&](ElementLoop& p) { p.arrays[1].dtype = DType::Int64; });
  rejects("float element into an Int", [&](ElementLoop& p) { p.arrays[0].dtype = DType::Float32; });
  rejects("complex arrays", [&](ElementLoop& p) { p.arrays[0].dtype = DType::Complex64; });
  rejects("Dim axis", [&](ElementLoop& p) {
    EInstr d;
    d.op = EOp::Dim;
    d.dst = v;
    d.array = 0;
    d.axis = 2;
    p.blocks[1].instrs.insert(p.blocks[1].instrs.begin(), d);
  });
  rejects("Branch on a Float", [&](ElementLoop& p) {
    EInstr& j = e(p, 0, 2);
    j.op = EOp::Branch;
    j.a = x;
    j.target = j.target2 = 1;
  });
  rejects("Call1 without a function", [&](ElementLoop& p) {
    EInstr c;
    c.op = EOp::Call1;
    c.type = EType::Float;
    c.dst = x;
    c.a = x;
    c.fn_name = "math.exp";
    p.blocks[1].instrs.insert(p.blocks[1].instrs.begin(), c);
  });
  rejects("no blocks", [&](ElementLoop& p) { p.blocks.clear(); });
}


// ---- vectorized inner loops (Note [Vectorized inner loops] in jit/x86/element_loop_codegen.cpp) ----

// The ISAs with vector loops this CPU runs.
std::vector<x86::Isa> vector_isas() {
  std::vector<x86::Isa> isas;
  if (x86::cpu_isa() >= x86::Isa::Avx2) isas.push_back(x86::Isa::Avx2);
  if (x86::cpu_isa() >= x86::Isa::Avx512) isas.push_back(x86::Isa::Avx512);
  return isas;
}
int isa_width(x86::Isa isa) { return isa == x86::Isa::Avx512 ? 8 : 4; }

// `loop` compiled for the scalar ISA and for each vector one: the interpreter and the scalar kernel
// agree (NaN bits aside when `any_nan`), and each vector kernel gives the scalar one's outcome to
// the bit. Reports per vector ISA whether its code has a vector loop (vmovupd).
class Vectorized {
public:
  explicit Vectorized(const ElementLoop& loop, bool any_nan = false) : loop_(loop), any_nan_(any_nan) {
    Status s = loop.verify();
    EXPECT_TRUE(s.is_ok()) << s.message() << "\n" << loop.to_string();
    for (x86::Isa isa : {x86::Isa::Scalar, x86::Isa::Avx2, x86::Isa::Avx512}) {
      if (isa != x86::Isa::Scalar && x86::cpu_isa() < isa) continue;
      Expected<rt::KernelPtr> k = x86::generate_element_loop(loop, isa, true);
      if (!k) {
        ADD_FAILURE() << x86::isa_name(isa) << ": " << k.error().message();
        continue;
      }
      kernels_.push_back({isa, *k});
    }
  }

  bool vector_loop(x86::Isa isa) const { return listing(isa).find("vmovupd") != std::string::npos; }
  // The optimized loop and its code.
  std::string listing(x86::Isa isa) const {
    for (const auto& [i, k] : kernels_)
      if (i == isa) return k->listing;
    return "";
  }

  Outcome run(const std::vector<Array>& arrays, const std::vector<int64_t>& params = {}) const {
    Outcome ref = execute(loop_, nullptr, arrays, params);
    Outcome scalar = ref;
    for (const auto& [isa, k] : kernels_) {
      Outcome o = execute(loop_, reinterpret_cast<rt::ElementLoopFn>(k->entry), arrays, params);
      if (isa == x86::Isa::Scalar) {
        expect_same(o, ref, "scalar kernel", any_nan_ ? &loop_ : nullptr);
        scalar = o;
      } else {
        expect_same(o, scalar, x86::isa_name(isa));
      }
    }
    return scalar;
  }

private:
  ElementLoop loop_;
  bool any_nan_;
  std::vector<std::pair<x86::Isa, rt::KernelPtr>> kernels_;
};

// k = 0; while k < m: body(k); k += 1 (the frontend's shape of a counted inner loop).
template <typename Body>
void counted_loop(Builder& b, int m, Body&& body) {
  const int k = b.var(EType::Int), one = entry_const(b, EType::Int, 1, 0);
  b.set(k, EOp::Mov, entry_const(b, EType::Int, 0, 0));
  const int head = b.block(), inner = b.block(), after = b.block();
  b.jump(head);
  b.at(head);
  b.br(b.cmp(ECond::Lt, k, m), inner, after);
  b.at(inner);
  body(k);
  b.set(k, EOp::Add, k, one, true);
  b.jump(head);
  b.at(after);
}

TEST(ElementLoop, VectorizedJacobiRows) {
  // B[r, o + k] = 0.33333 * (A[r, k] + A[r, k + 1] + A[r, k + 2]) and the other float operations,
  // for every trip count up to 3W + 1, offsets and rows as parameters, contiguous and strided rows,
  // bounds past the sizes (the IndexError where the scalar loop raises, its stores made).
  Builder b;
  const int a = b.array(DType::Float64, 2), out = b.array(DType::Float64, 2, true);
  const int out2 = b.array(DType::Float64, 1, true);
  const int r = b.param(EType::Int), o = b.param(EType::Int), m = b.param(EType::Int), f = b.param(EType::Float);
  counted_loop(b, m, [&](int k) {
    const int k1 = b.op(EOp::Add, k, entry_const(b, EType::Int, 1, 0));
    const int k2 = b.op(EOp::Add, entry_const(b, EType::Int, 2, 0), k);
    const int x = b.load(a, {r, k}, EType::Float), y = b.load(a, {r, k1}, EType::Float);
    const int z = b.load(a, {r, k2}, EType::Float);
    const int s = b.op(EOp::Mul, entry_const(b, EType::Float, 0, 0.33333), b.op(EOp::Add, b.op(EOp::Add, x, y), z));
    const int mn = b.op(EOp::Min, x, y), mx = b.op(EOp::Max, y, z);
    const int q = b.op(EOp::Div, b.op(EOp::Sub, mn, f), b.op(EOp::Sqrt, b.op(EOp::Abs, mx)));
    const int t0 = b.op(EOp::Add, b.op(EOp::Neg, q), b.op(EOp::Mul, s, b.fconst(-0.0)));
    // numpy.minimum/maximum: a NaN from either side.
    const int t = b.op(EOp::Add, t0, b.op(EOp::Sub, b.op(EOp::Minimum, x, z), b.op(EOp::Maximum, z, y)));
    b.store(out, {r, b.op(EOp::Add, k, o)}, s);
    b.store(out2, {b.op(EOp::Add, k, o)}, t);
  });
  b.exit();
  Vectorized c(b.loop, true);
  for (x86::Isa isa : vector_isas()) EXPECT_TRUE(c.vector_loop(isa)) << x86::isa_name(isa) << c.listing(isa);
  const double specials[] = {kNaN, -0.0, 0.0, kInf, -kInf, -1.5, 3.0};
  for (int64_t n = 0; n <= 3 * 8 + 1; ++n) {
    std::vector<double> av(3 * static_cast<size_t>(n + 2)), ov(3 * static_cast<size_t>(n + 3), 7.0);
    for (size_t q = 0; q < av.size(); ++q)
      av[q] = q % 5 == 3 ? specials[(q / 5) % 7] : 0.125 * static_cast<double>(q * q % 17) - 0.9;
    for (int64_t row : {1, 2, -1}) {
      for (int64_t off : {0, 1}) {
        SCOPED_TRACE(std::to_string(n) + " " + std::to_string(row) + " " + std::to_string(off));
        for (int layout = 0; layout < 2; ++layout) {
          Array aa = layout == 0 ? array_of(av, {3, n + 2}) : view_of(av, {3, n + 2}, 2, false, false);
          c.run({aa, array_of(ov, {3, n + 3}), array_of(std::vector<double>(static_cast<size_t>(n + 1), 5.0))},
                {row, off, n, bits(0.75)});
        }
      }
    }
    // m past the rows: the scalar loop's error, after its stores.
    Outcome e = c.run({array_of(av, {3, n + 2}), array_of(ov, {3, n + 3}), array_of(std::vector<double>(1, 5.0))},
                      {1, 2, n + 1, bits(0.75)});
    EXPECT_EQ(e.error, LoopError::IndexOutOfBounds);
  }
}

TEST(ElementLoop, VectorizedStoresAndLoadsOfOneArray) {
  // x[k + s] = x[k + l] * 2 + 1: in vectors only when no iteration reads what an earlier one of the
  // same vector stored, s <= l or s - l >= W; else (x[k + 1] = x[k] * 2 among them) the sequential
  // result, scalar. Two stores likewise: the later one wins as in the loop.
  for (int64_t sl : {-3, -1, 0, 1, 3, 4, 5, 8, 9}) {
    SCOPED_TRACE(sl);
    Builder b;
    const int x = b.array(DType::Float64, 1, true);
    const int m = b.param(EType::Int);
    const int base = 3;
    counted_loop(b, m, [&](int k) {
      const int lk = b.op(EOp::Add, k, entry_const(b, EType::Int, base, 0));
      const int sk = b.op(EOp::Add, k, entry_const(b, EType::Int, base + sl, 0));
      const int v = b.op(EOp::Add, b.op(EOp::Mul, b.load(x, {lk}, EType::Float), b.fconst(2.0)), b.fconst(1.0));
      b.store(x, {sk}, v);
    });
    b.exit();
    Vectorized c(b.loop);
    for (x86::Isa isa : vector_isas())
      EXPECT_EQ(c.vector_loop(isa), sl <= 0 || sl >= isa_width(isa)) << x86::isa_name(isa);
    for (int64_t n = 0; n <= 3 * 8 + 1; ++n) {
      std::vector<double> xv(static_cast<size_t>(n + 12));
      for (size_t q = 0; q < xv.size(); ++q) xv[q] = 0.5 * static_cast<double>(q) - 2.0;
      c.run({array_of(xv)}, {n});
    }
  }
  // (At x[k + 1] the optimizer indexes with the counter stepped before the stores.)
  for (int64_t first : {1, 3}) {
    for (int64_t second : {-1, 0, 1, 4, 8}) {
      SCOPED_TRACE("stores " + std::to_string(first) + " " + std::to_string(second));
      Builder b;
      const int x = b.array(DType::Float64, 1, true), y = b.array(DType::Float64, 1);
      const int m = b.param(EType::Int);
      counted_loop(b, m, [&](int k) {
        const int v = b.load(y, {k}, EType::Float);
        b.store(x, {b.op(EOp::Add, k, entry_const(b, EType::Int, first, 0))}, v);
        b.store(x, {b.op(EOp::Add, k, entry_const(b, EType::Int, first + second, 0))}, b.op(EOp::Neg, v));
      });
      b.exit();
      Vectorized c(b.loop);
      for (x86::Isa isa : vector_isas())
        EXPECT_EQ(c.vector_loop(isa), second <= 0 || second >= isa_width(isa)) << x86::isa_name(isa) << c.listing(isa);
      for (int64_t n = 0; n <= 3 * 8 + 1; ++n) {
        std::vector<double> xv(static_cast<size_t>(n + 10), 9.0), yv(static_cast<size_t>(n));
        for (size_t q = 0; q < yv.size(); ++q) yv[q] = 1.0 + static_cast<double>(q);
        c.run({array_of(xv), array_of(yv)}, {n});
      }
    }
  }
}

TEST(ElementLoop, VectorizedOffsetsKnownAtRunTime) {
  // x[s + k] = x[k - l] * 2 + y[k] with s and l parameters: the vector loop runs only when s + l
  // <= 0 or s + l >= W, tested before it; else the scalar loop gives the sequential result. (y[k]
  // gives the loop its version without checks, which the vector loop comes with.)
  Builder b;
  const int x = b.array(DType::Float64, 1, true), y = b.array(DType::Float64, 1);
  const int m = b.param(EType::Int), sp = b.param(EType::Int), lp = b.param(EType::Int);
  counted_loop(b, m, [&](int k) {
    const int v = b.op(EOp::Add, b.op(EOp::Mul, b.load(x, {b.op(EOp::Sub, k, lp)}, EType::Float), b.fconst(2.0)),
                       b.load(y, {k}, EType::Float));
    b.store(x, {b.op(EOp::Add, sp, k)}, v);
  });
  b.exit();
  Vectorized c(b.loop);
  for (x86::Isa isa : vector_isas()) EXPECT_TRUE(c.vector_loop(isa)) << x86::isa_name(isa) << c.listing(isa);
  for (int64_t n : {0, 3, 8, 13, 25}) {
    std::vector<double> xv(static_cast<size_t>(n + 24));
    for (size_t q = 0; q < xv.size(); ++q) xv[q] = 0.5 * static_cast<double>(q) - 2.0;
    for (int64_t sv : {0, 1, 3, 9, 12})
      for (int64_t lv : {-12, -9, -5, -3, -1, 0})
        c.run({array_of(xv), array_of(std::vector<double>(static_cast<size_t>(n), 0.25))}, {n, sv, lv});
  }
}

TEST(ElementLoop, VectorizedRowsOfOneArray) {
  // A[i, k] = A[i, k] + A[j, k + 1]: rows i and j may be one row, so only i == j's own rule could
  // allow it; with different variables the loop stays scalar. A[i, k] = A[i, k + 1] * 0.5 is
  // vectorized. Negative rows take the version with checks.
  for (int shape = 0; shape < 2; ++shape) {
    SCOPED_TRACE(shape);
    Builder b;
    const int a = b.array(DType::Float64, 2, true);
    const int i = b.param(EType::Int), j = b.param(EType::Int), m = b.param(EType::Int);
    counted_loop(b, m, [&](int k) {
      const int k1 = b.op(EOp::Add, k, entry_const(b, EType::Int, 1, 0));
      const int v = shape == 0 ? b.op(EOp::Add, b.load(a, {i, k}, EType::Float), b.load(a, {j, k1}, EType::Float))
                               : b.op(EOp::Mul, b.load(a, {i, k1}, EType::Float), b.fconst(0.5));
      b.store(a, {i, k}, v);
    });
    b.exit();
    Vectorized c(b.loop);
    for (x86::Isa isa : vector_isas()) EXPECT_EQ(c.vector_loop(isa), shape == 1) << x86::isa_name(isa);
    std::vector<double> av(4 * 20);
    for (size_t q = 0; q < av.size(); ++q) av[q] = 0.25 * static_cast<double>(q % 13) + 1.0;
    for (int64_t iv : {0, 2, -1})
      for (int64_t jv : {0, 2, 3})
        for (int64_t n : {0, 5, 17, 19, 20}) c.run({array_of(av, {4, 20})}, {iv, jv, n});
  }
}

TEST(ElementLoop, RefusedLoopsStayScalar) {
  // A sum carried across iterations, a float read before the body assigns it, a branch, a float32
  // array, an index read as a value, a float read after the loop: no vector loop, same results.
  for (int variant = 0; variant < 6; ++variant) {
    SCOPED_TRACE(variant);
    Builder b;
    const int x = b.array(DType::Float64, 1, true), f = b.array(DType::Float32, 1, true);
    const int m = b.param(EType::Int);
    const int s = b.var(EType::Float);
    b.set(s, EOp::Mov, entry_const(b, EType::Float, 0, 0.5));
    counted_loop(b, m, [&](int k) {
      const int v = b.load(x, {k}, EType::Float);
      switch (variant) {
        case 0: b.set(s, EOp::Add, s, v); b.store(x, {k}, s); break;
        case 1: b.store(x, {k}, b.op(EOp::Mul, s, v)); b.set(s, EOp::Mov, v); break;
        case 2: {
          const int yes = b.block(), join = b.block();
          b.br(b.cmp(ECond::Lt, v, entry_const(b, EType::Float, 0, 1.0)), yes, join);
          b.at(yes);
          b.store(x, {k}, b.op(EOp::Neg, v));
          b.jump(join);
          b.at(join);
          break;
        }
        case 3: b.store(f, {k}, b.op(EOp::Add, b.load(f, {k}, EType::Float), v)); break;
        case 4: b.store(x, {k}, b.op(EOp::Add, v, b.op(EOp::ToFloat, k))); break;
        default: b.set(s, EOp::Mul, v, v); b.store(x, {k}, s); break;
      }
    });
    b.result(s);
    b.exit();
    Vectorized c(b.loop);
    for (x86::Isa isa : vector_isas()) EXPECT_FALSE(c.vector_loop(isa)) << x86::isa_name(isa);
    for (int64_t n : {0, 3, 9, 17}) {
      std::vector<double> xv(static_cast<size_t>(n));
      std::vector<float> fv(static_cast<size_t>(n));
      for (size_t q = 0; q < xv.size(); ++q) xv[q] = fv[q] = 0.75f * static_cast<float>(q) - 3.0f;
      c.run({array_of(xv), array_of(fv)}, {n});
    }
  }
}

}  // namespace
}  // namespace framejit::jit
