// test_driver.cpp — the CUDA driver layer on a real GPU (skipped without one), and the PTX it
// loads assembled by ptxas wherever the toolkit's ptxas is (CI has it, and no GPU).
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "runtime/cuda/driver.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/gpu/ptx_samples.h"

namespace framejit::rt::cuda {
namespace {

TEST(CudaDriver, DescribesTheDevice) {
  REQUIRE_GPU();
  auto info = device_info(0);
  ASSERT_TRUE(info) << info.error().message();
  EXPECT_FALSE(info->name.empty());
  EXPECT_GE(info->cc_major, 5);
  EXPECT_GT(info->multiprocessors, 0);
  EXPECT_GT(info->memory_bytes, size_t{1} << 30);
  EXPECT_GE(info->driver_version, 11030);
  std::printf("device 0: %s, sm_%d%d, %d SMs, %.1f GiB, driver %d\n", info->name.c_str(), info->cc_major,
              info->cc_minor, info->multiprocessors, info->memory_bytes / double(1 << 30), info->driver_version);
  auto missing = device_info(1 << 20);
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error().message().find("no CUDA device"), std::string::npos) << missing.error().message();
}

TEST(CudaDriver, LoadsPtxAndLaunchesIt) {
  REQUIRE_GPU();
  auto info = device_info(0);
  ASSERT_TRUE(info) << info.error().message();
  auto ctx = use_device(0);
  ASSERT_TRUE(ctx) << ctx.error().message();
  auto mod = load_ptx(test::add_one_ptx(test::sm_target(*info)), 4);
  ASSERT_TRUE(mod) << mod.error().message();
  EXPECT_GT(mod->jit_ms, 0.0);
  std::printf("add_one: PTX loaded in %.2f ms\n", mod->jit_ms);
  auto fn = function(mod->handle, "add_one");
  ASSERT_TRUE(fn) << fn.error().message();

  const Api& a = **driver();
  constexpr unsigned n = 100003;  // not a multiple of the block: the guard in the kernel matters
  std::vector<float> x(n), y(n, -7.f);
  for (unsigned i = 0; i < n; ++i) x[i] = 0.5f * static_cast<float>(i);
  CUdeviceptr dx = 0, dy = 0;
  ASSERT_TRUE(check(a.MemAlloc(&dx, n * sizeof(float)), "cuMemAlloc"));
  ASSERT_TRUE(check(a.MemAlloc(&dy, n * sizeof(float)), "cuMemAlloc"));
  ASSERT_TRUE(check(a.MemcpyHtoD(dx, x.data(), n * sizeof(float)), "cuMemcpyHtoD"));
  unsigned count = n;
  void* params[] = {&dx, &dy, &count};
  Status s = launch(*fn, {(n + 255) / 256}, {256}, 0, nullptr, params);
  ASSERT_TRUE(s) << s.message();
  ASSERT_TRUE(check(a.MemcpyDtoH(y.data(), dy, n * sizeof(float)), "cuMemcpyDtoH"));
  for (unsigned i = 0; i < n; ++i) ASSERT_EQ(y[i], x[i] + 1.f) << "at " << i;

  // A launch the device refuses is an error that names it, not a crash.
  Status bad = launch(*fn, {1}, {4096}, 0, nullptr, params);
  EXPECT_FALSE(bad);
  EXPECT_NE(bad.message().find("cuLaunchKernel: CUDA_ERROR_"), std::string::npos) << bad.message();

  EXPECT_TRUE(check(a.MemFree(dx), "cuMemFree"));
  EXPECT_TRUE(check(a.MemFree(dy), "cuMemFree"));
  EXPECT_TRUE(unload(mod->handle));
}

TEST(CudaDriver, RejectedPtxCarriesTheDriversLog) {
  REQUIRE_GPU();
  auto info = device_info(0);
  ASSERT_TRUE(info);
  ASSERT_TRUE(use_device(0));
  auto mod = load_ptx(test::broken_ptx(test::sm_target(*info)));
  ASSERT_FALSE(mod);
  const std::string& m = mod.error().message();
  EXPECT_NE(m.find("cuModuleLoadDataEx: CUDA_ERROR_"), std::string::npos) << m;
  EXPECT_NE(m.find("f1"), std::string::npos) << "the driver's log names the bad register:\n" << m;
}

TEST(Ptx, SamplesAssembleWithPtxas) {
  const std::string tool = test::find_ptxas();
  if (tool.empty()) GTEST_SKIP() << "no ptxas on this machine";
  std::string log;
  EXPECT_EQ(test::ptxas(tool, test::add_one_ptx("sm_90"), "sm_90", log), 0) << log;
  EXPECT_NE(test::ptxas(tool, test::broken_ptx("sm_90"), "sm_90", log), 0) << "ptxas must reject it";
}

}  // namespace
}  // namespace framejit::rt::cuda
