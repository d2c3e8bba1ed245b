// tables.h — CPython's two side tables of a code object, decoded and encoded exactly as the
// 3.11-3.13 compiler writes them: co_exceptiontable (Objects/exception_handling_notes.txt) and
// co_linetable (Objects/locations.md, PEP 626/657).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "framejit/status.h"
#include "frontend/bytecode/instruction.h"

namespace framejit::frontend::bytecode {

/// One exception-table entry; offsets in code units, [start, end).
struct ExceptionEntry {
  int start = 0;
  int end = 0;
  int target = 0;
  int depth = 0;
  bool lasti = false;
};

/// Every entry of a co_exceptiontable, checked to lie within `code_units`.
Expected<std::vector<ExceptionEntry>> decode_exception_table(const uint8_t *data, size_t size,
                                                             int code_units);
/// Appends one entry (start marker, size, target, depth/lasti; 6-bit big-endian varints).
void encode_exception_entry(std::string &out, const ExceptionEntry &e);

/// The location of every code unit (co_positions(), one Position per unit).
Expected<std::vector<Position>> decode_locations(const uint8_t *data, size_t size, int first_line,
                                                 int code_units);

/// Writes co_linetable entries for a run of `units` code units sharing `pos`, as the compiler
/// does (entries of at most 8 units; the shortest form that fits). `line` is the encoder's
/// running line, starting at co_firstlineno.
class LocationWriter {
public:
  explicit LocationWriter(int first_line) : line_(first_line) {}
  void add(const Position &pos, int units);
  std::string &bytes() { return out_; }

private:
  void entry(const Position &pos, int units);
  void header(int code, int units) {
    out_.push_back(static_cast<char>(0x80 | (code << 3) | (units - 1)));
  }
  void varint(unsigned v);
  void svarint(int v) {
    varint(v < 0 ? (static_cast<unsigned>(-v) << 1) | 1u : static_cast<unsigned>(v) << 1);
  }
  std::string out_;
  int line_;
};

} // namespace framejit::frontend::bytecode
