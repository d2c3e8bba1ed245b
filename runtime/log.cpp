// log.cpp — parsing FRAMEJIT_LOGS and writing log lines.
#include "runtime/log.h"

#include <array>
#include <atomic>
#include <cstdio>
#include <cstdlib>

namespace framejit::rt {
namespace {
constexpr std::array<std::string_view, static_cast<int>(LogTopic::Count)> kTopicNames = {
    "graph", "guards", "recompiles", "breaks", "passes", "kernels", "asm", "ptx"};

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

}  // namespace framejit::rt
