// faults.cpp — the fault switches (faults.h).
#include "runtime/faults.h"

#include <atomic>
#include <cstdlib>
#include <string>

namespace framejit::rt {

namespace {

unsigned parse(std::string_view spec) {
  unsigned mask = 0;
  while (!spec.empty()) {
    size_t comma = spec.find(',');
    std::string_view name = spec.substr(0, comma);
    if (name == "codegen") mask |= static_cast<unsigned>(Fault::Codegen);
    if (name == "alloc") mask |= static_cast<unsigned>(Fault::Alloc);
    spec = comma == std::string_view::npos ? std::string_view() : spec.substr(comma + 1);
  }
  return mask;
}

std::atomic<unsigned>& mask() {
  static std::atomic<unsigned> m{[] {
    const char* env = std::getenv("FRAMEJIT_FAULTS");
    return env ? parse(env) : 0u;
  }()};
  return m;
}

}  // namespace

bool fault_active(Fault fault) { return (mask().load(std::memory_order_relaxed) & static_cast<unsigned>(fault)) != 0; }

void set_faults(std::string_view spec) { mask().store(parse(spec), std::memory_order_relaxed); }

}  // namespace framejit::rt
