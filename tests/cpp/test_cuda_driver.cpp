// test_cuda_driver.cpp — the CUDA driver layer where there may be no GPU: errors, never crashes.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdint>
#include <cstdlib>
#include <random>

#include "runtime/cuda/driver.h"
#include "runtime/cuda/launch.h"

namespace framejit::rt::cuda {
namespace {

TEST(CudaDriver, AMissingLibraryIsAClearError) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");  // a fresh process: the driver is loaded once per process
  EXPECT_EXIT(
      {
        setenv("FRAMEJIT_CUDA_DRIVER", "/nonexistent/libcuda.so.1", 1);
        auto d = driver();
        std::fprintf(stderr, "%s\n", d ? "loaded" : d.error().message().c_str());
        auto n = device_count();
        std::exit(!d && !n && n.error().message() == d.error().message() ? 0 : 1);
      },
      testing::ExitedWithCode(0), "no CUDA driver: cannot load /nonexistent/libcuda.so.1");
}

TEST(CudaDriver, LoadsOrSaysWhyNot) {
  auto d = driver();
  if (d) {
    auto n = device_count();
    ASSERT_TRUE(n) << n.error().message();
    EXPECT_GE(*n, 0);
  } else {
    EXPECT_FALSE(d.error().message().empty());
    EXPECT_FALSE(use_device(0));
    EXPECT_FALSE(load_ptx(".version 8.0\n"));
  }
}

TEST(CudaDriver, CheckNamesTheCallAndTheError) {
  EXPECT_TRUE(check(kSuccess, "cuInit"));
  Status s = check(999, "cuLaunchKernel");
  ASSERT_FALSE(s);
  EXPECT_EQ(s.message().rfind("cuLaunchKernel: ", 0), 0u) << s.message();
}

}  // namespace

// Note [Division by a run-time size]: the multiply and shift give x / d for every dividend a
// kernel divides (below 2^31), at the edges and at random.
TEST(CudaLaunch, FastDivisionIsExactBelow2To31) {
  using framejit::rt::cuda::fast_div;
  std::mt19937 rng(3);
  std::uniform_int_distribution<uint32_t> any_x(0, 0x7FFFFFFFu);
  auto check = [](uint32_t d, uint32_t x) {
    const auto f = fast_div(d);
    const uint32_t q = static_cast<uint32_t>((uint64_t{x} * f.magic) >> f.shift);
    ASSERT_EQ(q, x / d) << x << " / " << d;
  };
  std::vector<uint32_t> divisors = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 12, 100, 127, 128, 129, 255, 256, 1000, 4095, 4096,
                                    65535, 65536, 65537, 1u << 30, (1u << 30) + 1, 0x7FFFFFFFu, 0x80000000u};
  for (int i = 0; i < 2000; ++i) divisors.push_back(1 + any_x(rng) % (i % 2 ? 1000 : 0x7FFFFFFF));
  for (uint32_t d : divisors) {
    for (uint32_t x : {0u, 1u, d - 1, d, d + 1, 2 * d - 1, 0x7FFFFFFFu, 0x7FFFFFFEu}) check(d, x & 0x7FFFFFFFu);
    for (int k = 0; k < 200; ++k) check(d, any_x(rng));
    const uint32_t top = 0x7FFFFFFFu / d * d;  // the largest multiple below 2^31 and its neighbour
    check(d, top);
    if (top) check(d, top - 1);
  }
}

}  // namespace framejit::rt::cuda
