// log.cpp — parsing FRAMEJIT_LOGS and writing log lines.
#include "runtime/log.h"

#include <array>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace framejit::rt {
namespace {
constexpr std::array<std::string_view, static_cast<int>(LogTopic::Count)> kTopicNames = {
    "graph", "guards", "recompiles", "breaks", "passes", "kernels", "asm", "ptx", "profile"};

uint32_t parse(std::string_view spec) {
  uint32_t mask = 0;
  size_t pos = 0;
  while (pos <= spec.size()) {
    size_t end = spec.find(',', pos);
    if (end == std::string_view::npos) end = spec.size();
    std::string_view word = spec.substr(pos, end - pos);
    while (!word.empty() && (word.front() == ' ' || word.front() == '+')) word.remove_prefix(1);
    while (!word.empty() && word.back() == ' ') word.remove_suffix(1);
    if (word == "all") mask = ~0u;
    for (size_t i = 0; i < kTopicNames.size(); ++i)
      if (word == kTopicNames[i]) mask |= 1u << i;
    pos = end + 1;
  }
  return mask;
}

std::atomic<uint32_t> g_mask{0};
std::atomic<bool> g_initialized{false};
}  // namespace

void set_log_spec(std::string_view spec) {
  g_mask.store(parse(spec), std::memory_order_relaxed);
  g_initialized.store(true, std::memory_order_release);
}

bool log_enabled(LogTopic topic) {
  if (!g_initialized.load(std::memory_order_acquire)) {
    const char* env = std::getenv("FRAMEJIT_LOGS");
    set_log_spec(env ? env : "");
  }
  return (g_mask.load(std::memory_order_relaxed) >> static_cast<int>(topic)) & 1u;
}

void log_write(LogTopic topic, std::string_view text) {
  std::fprintf(stderr, "[framejit:%.*s] %.*s\n",
               static_cast<int>(kTopicNames[static_cast<int>(topic)].size()),
               kTopicNames[static_cast<int>(topic)].data(), static_cast<int>(text.size()),
               text.data());
}

const std::string& dump_dir() {
  static const std::string dir = [] {
    const char* env = std::getenv("FRAMEJIT_DUMP_DIR");
    return std::string(env ? env : "");
  }();
  return dir;
}

void dump_write(std::string_view name, std::string_view text) {
  const std::string& dir = dump_dir();
  if (dir.empty()) return;
  static std::atomic<bool> warned{false};
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  std::ofstream f(std::filesystem::path(dir) / std::string(name), std::ios::binary);
  f.write(text.data(), static_cast<std::streamsize>(text.size()));
  if (!f && !warned.exchange(true))
    std::fprintf(stderr, "[framejit] warning: cannot write to FRAMEJIT_DUMP_DIR=%s; kernels are not dumped\n", dir.c_str());
}

}  // namespace framejit::rt
