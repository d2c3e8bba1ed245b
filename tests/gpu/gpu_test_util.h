// gpu_test_util.h — what the GPU tests share: skipping without a device, and ptxas (the CI
// machines have CUDA's ptxas and no GPU, so every PTX a test makes is assembled there).
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "runtime/cuda/driver.h"

// Skips the test where there is no usable GPU, saying why.
#define REQUIRE_GPU()                                                                 \
  do {                                                                                \
    auto n_ = ::framejit::rt::cuda::device_count();                                   \
    if (!n_) GTEST_SKIP() << n_.error().message();                                    \
    if (*n_ == 0) GTEST_SKIP() << "the CUDA driver sees no device";                   \
  } while (0)

namespace framejit::test {

inline std::string sm_target(const rt::cuda::DeviceInfo& d) {
  return "sm_" + std::to_string(d.cc_major * 10 + d.cc_minor);
}

/// The toolkit's ptxas, where installed (CI machines: /usr/local/cuda/bin; FRAMEJIT_PTXAS names
/// another), else empty.
inline std::string find_ptxas() {
  if (const char* e = std::getenv("FRAMEJIT_PTXAS")) return e;
  for (const char* p : {"/usr/local/cuda/bin/ptxas"})
    if (access(p, X_OK) == 0) return p;
  return std::system("command -v ptxas >/dev/null 2>&1") == 0 ? "ptxas" : "";
}

/// Assembles `ptx` for `arch`; returns ptxas's exit status and leaves its messages in `log`.
inline int ptxas(const std::string& tool, const std::string& ptx, const std::string& arch, std::string& log) {
  char dir[] = "/tmp/framejit-ptxas-XXXXXX";
  if (!mkdtemp(dir)) return -1;
  const std::string in = std::string(dir) + "/m.ptx", out = std::string(dir) + "/m.cubin",
                    msgs = std::string(dir) + "/log.txt";
  std::ofstream(in) << ptx;
  const int rc = std::system((tool + " -arch=" + arch + " " + in + " -o " + out + " > " + msgs + " 2>&1").c_str());
  std::ifstream f(msgs);
  log.assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
  std::filesystem::remove_all(dir);
  return rc;
}

}  // namespace framejit::test
