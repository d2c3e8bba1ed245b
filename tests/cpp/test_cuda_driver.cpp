// test_cuda_driver.cpp — the CUDA driver layer where there may be no GPU: errors, never crashes.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>

#include "runtime/cuda/driver.h"

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

}  // namespace framejit::rt::cuda
