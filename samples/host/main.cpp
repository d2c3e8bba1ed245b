// host_sample — runs models/mlp_model.py's forward() on this program's own buffers, from two
// threads at once, through framejit::Host; checks every result against a C++ reference and prints
// the time per call. `host_sample [--backend jit|eager|none] [--calls N]` (none: plain CPython,
// the baseline `make bench` compares with).
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <random>
#include <thread>
#include <vector>

#include "framejit/host.h"

namespace {

constexpr int kBatch = 32, kIn = 256, kHidden = 512, kOut = 64;

float gelu(float x) { return 0.5f * x * (1.0f + std::tanh(0.7978845608f * (x + 0.044715f * x * x * x))); }

// out = gelu(x @ w1 + b1) @ w2 + b2, in double precision.
std::vector<double> reference(const std::vector<float>& x, const std::vector<float>& w1, const std::vector<float>& b1,
                              const std::vector<float>& w2, const std::vector<float>& b2) {
  std::vector<double> h(kBatch * kHidden), out(kBatch * kOut);
  for (int i = 0; i < kBatch; ++i)
    for (int j = 0; j < kHidden; ++j) {
      double s = b1[j];
      for (int k = 0; k < kIn; ++k) s += double(x[i * kIn + k]) * w1[k * kHidden + j];
      h[i * kHidden + j] = gelu(float(s));
    }
  for (int i = 0; i < kBatch; ++i)
    for (int j = 0; j < kOut; ++j) {
      double s = b2[j];
      for (int k = 0; k < kHidden; ++k) s += h[i * kHidden + k] * w2[k * kOut + j];
      out[i * kOut + j] = s;
    }
  return out;
}

std::vector<float> random_vector(size_t n, float scale, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  framejit::HostOptions options;
  int calls = 50;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--backend") == 0) options.backend = argv[i + 1];
    if (std::strcmp(argv[i], "--calls") == 0) calls = std::atoi(argv[i + 1]);
  }
  framejit::Host host(options);
  if (!host.status()) {
    std::fprintf(stderr, "host: %s\n", host.status().message().c_str());
    return 1;
  }
  if (framejit::Status st = host.add_import_path(MODELS_DIR); !st) {
    std::fprintf(stderr, "host: %s\n", st.message().c_str());
    return 1;
  }

  using framejit::DType;
  using framejit::Tensor;
  std::vector<float> w1 = random_vector(kIn * kHidden, 0.06f, 1), b1 = random_vector(kHidden, 0.1f, 2);
  std::vector<float> w2 = random_vector(kHidden * kOut, 0.04f, 3), b2 = random_vector(kOut, 0.1f, 4);
  // Views of this program's memory: no copies on the way in.
  Tensor tw1 = Tensor::from_blob(w1.data(), {kIn, kHidden}, DType::Float32);
  Tensor tb1 = Tensor::from_blob(b1.data(), {kHidden}, DType::Float32);
  Tensor tw2 = Tensor::from_blob(w2.data(), {kHidden, kOut}, DType::Float32);
  Tensor tb2 = Tensor::from_blob(b2.data(), {kOut}, DType::Float32);

  int failures = 0;
  auto worker = [&](unsigned seed, int calls) {
    std::vector<float> x = random_vector(kBatch * kIn, 1.0f, seed);
    std::vector<double> want = reference(x, w1, b1, w2, b2);
    Tensor tx = Tensor::from_blob(x.data(), {kBatch, kIn}, DType::Float32);
    for (int c = 0; c < calls; ++c) {
      framejit::Expected<Tensor> y = host.call("mlp_model", "forward", {tx, tw1, tb1, tw2, tb2});
      if (!y) {
        std::fprintf(stderr, "forward failed:\n%s\n", y.error().message().c_str());
        ++failures;
        return;
      }
      const float* out = y->data<float>();  // the result keeps its NumPy array alive
      for (int i = 0; i < kBatch * kOut; ++i)
        if (std::fabs(out[i] - want[i]) > 1e-3 * (1.0 + std::fabs(want[i]))) {
          std::fprintf(stderr, "thread %u call %d: out[%d] = %g, want %g\n", seed, c, i, out[i], want[i]);
          ++failures;
          return;
        }
    }
  };
  worker(9u, 2);  // first calls: imports, and framejit compiles forward()
  const auto t0 = std::chrono::steady_clock::now();
  std::thread a(worker, 10u, calls), b(worker, 11u, calls);
  a.join();
  b.join();
  const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();

  // Python exceptions arrive with their traceback.
  framejit::Expected<Tensor> bad = host.call("mlp_model", "forward", {tw1, tw1, tb1, tw2, tb2});
  std::printf("a shape error comes back as: %s\n", bad ? "no error?!" : "an error with a traceback");
  if (bad) ++failures;

  // The model writes into the host's buffer.
  std::vector<float> ones(8, 1.0f);
  float factor_value = 3.0f;
  auto s = host.call("mlp_model", "scale_in_place",
                     {Tensor::from_blob(ones.data(), {8}, DType::Float32), Tensor::from_blob(&factor_value, {}, DType::Float32)});
  if (!s || ones[0] != 3.0f || *s->data<float>() != 24.0f) ++failures;

  std::printf("%s: 2 threads x %d calls of mlp_model.forward on host buffers\n", failures ? "FAILED" : "ok", calls);
  std::printf("backend %s: %.1f us per call (2 threads)\n", options.backend.c_str(), us / (2.0 * calls));
  return failures ? 1 : 0;
}
