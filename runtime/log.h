// log.h — the FRAMEJIT_LOGS / FRAMEJIT_DUMP_DIR debug knobs, read once per process.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace framejit::rt {

enum class LogTopic : uint8_t { Graph, Guards, Recompiles, Breaks, Passes, Kernels, Asm, Ptx, Profile, Count };

/// True when FRAMEJIT_LOGS names the topic (comma-separated, or "all").
bool log_enabled(LogTopic topic);
/// Writes "[framejit:<topic>] <text>" to stderr.
void log_write(LogTopic topic, std::string_view text);
/// Overrides FRAMEJIT_LOGS (the Python API and tests use it).
void set_log_spec(std::string_view spec);
/// The folder named by FRAMEJIT_DUMP_DIR, or empty.
const std::string& dump_dir();
/// Writes `text` to dump_dir()/name (creating the folder). Does nothing without FRAMEJIT_DUMP_DIR;
/// a folder that cannot be written gets one warning on stderr, never an error.
void dump_write(std::string_view name, std::string_view text);

}  // namespace framejit::rt
