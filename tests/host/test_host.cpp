// test_host.cpp — framejit::Host and framejit::Tensor (include/framejit/host.h): calls on host
// buffers (no copies, writes visible), results, errors with tracebacks, threads, strided and
// reversed views, and shutdown with tensors outliving the interpreter. One process, one
// interpreter: the tests share a Host and the last one shuts it down.
#include <gtest/gtest.h>

#include <cmath>
#include <stdexcept>
#include <thread>
#include <vector>

#include "framejit/host.h"

namespace {

using framejit::DType;
using framejit::Tensor;

framejit::Host* g_host = nullptr;

class HostEnvironment : public ::testing::Environment {
public:
  void SetUp() override {
    framejit::HostOptions o;
    o.import_paths = {FRAMEJIT_HOST_TEST_DIR};
    g_host = new framejit::Host(o);
  }
};
const auto* const kEnv = ::testing::AddGlobalTestEnvironment(new HostEnvironment);

TEST(Host, Starts) { ASSERT_TRUE(g_host->status()) << g_host->status().message(); }

TEST(Host, CallsAModelOnHostBuffersAndFramejitCompilesIt) {
  std::vector<float> x(4 * 3), w(3 * 2), b(2);
  for (size_t i = 0; i < x.size(); ++i) x[i] = 0.1f * float(i);
  for (size_t i = 0; i < w.size(); ++i) w[i] = 0.2f * float(i) - 0.5f;
  b = {0.25f, -0.25f};
  auto y = g_host->call("models_for_host_test", "affine",
                        {Tensor::from_blob(x.data(), {4, 3}, DType::Float32),
                         Tensor::from_blob(w.data(), {3, 2}, DType::Float32),
                         Tensor::from_blob(b.data(), {2}, DType::Float32)});
  ASSERT_TRUE(y) << y.error().message();
  ASSERT_EQ(y->shape(), (std::vector<int64_t>{4, 2}));
  ASSERT_EQ(y->dtype(), DType::Float32);
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 2; ++j) {
      double s = b[j];
      for (int k = 0; k < 3; ++k) s += double(x[i * 3 + k]) * w[k * 2 + j];
      EXPECT_NEAR(y->data<float>()[i * 2 + j], std::tanh(s), 1e-6);
    }
  auto graphs = g_host->call("models_for_host_test", "captured_graphs", {});
  ASSERT_TRUE(graphs) << graphs.error().message();
  EXPECT_GE(*graphs->data<int64_t>(), 1) << "affine() ran under framejit";
}

TEST(Host, WritesByTheModelReachTheHost) {
  std::vector<int32_t> v = {1, 2, 3};
  auto n = g_host->call("models_for_host_test", "add_one_in_place", {Tensor::from_blob(v.data(), {3}, DType::Int32)});
  ASSERT_TRUE(n) << n.error().message();
  EXPECT_EQ(v, (std::vector<int32_t>{2, 3, 4}));
  EXPECT_EQ(n->ndim(), 0);  // a Python int comes back as a 0-d tensor
  EXPECT_EQ(*n->data<int64_t>(), 3);
}

TEST(Host, TuplesComeBackThroughCallAll) {
  std::vector<double> x = {1, 2, 3, 4};
  Tensor t = Tensor::from_blob(x.data(), {2, 2}, DType::Float64);
  auto all = g_host->call_all("models_for_host_test", "pair", {t});
  ASSERT_TRUE(all) << all.error().message();
  ASSERT_EQ(all->size(), 2u);
  EXPECT_EQ((*all)[0].data<double>()[3], 8.0);
  EXPECT_EQ((*all)[1].data<double>()[1], 7.0);
  auto one = g_host->call("models_for_host_test", "pair", {t});
  ASSERT_FALSE(one);
  EXPECT_NE(one.error().message().find("call_all"), std::string::npos) << one.error().message();
}

TEST(Host, StridedAndReversedViewsArriveAsTheSameView) {
  std::vector<float> m(3 * 4);
  for (size_t i = 0; i < m.size(); ++i) m[i] = float(i);
  // Column 1 of a 3x4 matrix read bottom-up: strides in bytes, negative along rows.
  Tensor col = Tensor::from_blob(m.data() + 2 * 4 + 1, {3}, DType::Float32, {-16});
  auto d = g_host->call("models_for_host_test", "describe", {col});
  ASSERT_TRUE(d) << d.error().message();
  const double* v = d->data<double>();
  EXPECT_EQ(v[0], -16);
  EXPECT_EQ(v[1], 9);
  EXPECT_EQ(v[2], 5);
  EXPECT_EQ(v[3], 1);
  Tensor transposed = Tensor::from_blob(m.data(), {4, 3}, DType::Float32, {4, 16});
  EXPECT_FALSE(transposed.is_contiguous());
  auto dt = g_host->call("models_for_host_test", "describe", {transposed});
  ASSERT_TRUE(dt) << dt.error().message();
  EXPECT_EQ(dt->data<double>()[2], 0);  // element (0, 0)
  EXPECT_EQ(dt->data<double>()[3], 4);  // element (0, 1) = m[1][0]
}

TEST(Host, PythonErrorsCarryTheirTraceback) {
  std::vector<float> x(6);
  auto r = g_host->call("models_for_host_test", "fail", {Tensor::from_blob(x.data(), {2, 3}, DType::Float32)});
  ASSERT_FALSE(r);
  const std::string& m = r.error().message();
  EXPECT_NE(m.find("Traceback"), std::string::npos) << m;
  EXPECT_NE(m.find("helper_that_raises"), std::string::npos) << m;
  EXPECT_NE(m.find("ValueError: bad input of shape (2, 3)"), std::string::npos) << m;
  auto missing = g_host->call("no_such_module_here", "f", {});
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error().message().find("ModuleNotFoundError"), std::string::npos) << missing.error().message();
  auto no_fn = g_host->call("models_for_host_test", "nope", {});
  ASSERT_FALSE(no_fn);
  EXPECT_NE(no_fn.error().message().find("AttributeError"), std::string::npos);
}

TEST(Host, TensorMisuseIsAClearError) {
  float v = 1;
  Tensor t = Tensor::from_blob(&v, {1}, DType::Float32);
  EXPECT_THROW(t.data<double>(), std::invalid_argument);
  EXPECT_THROW(Tensor::from_blob(&v, {-1}, DType::Float32), std::invalid_argument);
  EXPECT_THROW(Tensor::from_blob(&v, {1, 1}, DType::Float32, {4}), std::invalid_argument);
  EXPECT_THROW(Tensor().shape(), std::logic_error);
  EXPECT_EQ(t.to_string(), "float32[1]");
}

TEST(Host, ManyThreadsCallAtOnce) {
  constexpr int kThreads = 4, kCalls = 40;
  std::vector<int> bad(kThreads, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([t, &bad] {
      std::vector<double> x(5 * (t + 2));  // a different shape per thread
      for (size_t i = 0; i < x.size(); ++i) x[i] = double(i + t);
      Tensor tx = Tensor::from_blob(x.data(), {5, t + 2}, DType::Float64);
      for (int c = 0; c < kCalls; ++c) {
        auto r = g_host->call_all("models_for_host_test", "pair", {tx});
        if (!r || (*r)[0].data<double>()[1] != 2.0 * (1 + t)) ++bad[t];
      }
    });
  for (auto& th : threads) th.join();
  EXPECT_EQ(bad, std::vector<int>(kThreads, 0));
}

// Must stay the last test: it shuts the interpreter down.
TEST(Host, ResultsOutliveTheHostAndTheInterpreterDoesNotRestart) {
  std::vector<double> x = {1, 2, 3, 4};
  auto kept = g_host->call_all("models_for_host_test", "pair", {Tensor::from_blob(x.data(), {2, 2}, DType::Float64)});
  ASSERT_TRUE(kept);
  delete g_host;  // the last Host: CPython is finalized here
  g_host = nullptr;
  EXPECT_EQ((*kept)[0].data<double>()[3], 8.0) << "a result keeps its memory after the interpreter is gone";
  framejit::Host again;
  ASSERT_FALSE(again.status());
  EXPECT_NE(again.status().message().find("cannot be started twice"), std::string::npos) << again.status().message();
  EXPECT_FALSE(again.call("models_for_host_test", "pair", {}));
  kept->clear();  // releasing results after shutdown is safe (they leak their Python object)
}

}  // namespace
