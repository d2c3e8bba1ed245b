// tables.cpp — co_exceptiontable and co_linetable, decoded and encoded (see tables.h).
#include "frontend/bytecode/tables.h"

namespace framejit::frontend::bytecode {

// ---- exception table ----------------------------------------------------------------------------
// Each entry is four varints: start (its first byte has bit 7 set, marking the entry), size,
// target, depth << 1 | lasti. A varint is 6-bit groups, most significant first, bit 6 meaning
// "more follows".

namespace {

class Reader {
public:
  Reader(const uint8_t *data, size_t size) : p_(data), end_(data + size) {}
  bool done() const { return p_ >= end_; }
  bool next(uint8_t *b) {
    if (p_ >= end_)
      return false;
    *b = *p_++;
    return true;
  }

private:
  const uint8_t *p_;
  const uint8_t *end_;
};

bool read_except_item(Reader &r, int *value, bool first) {
  uint8_t b;
  if (!r.next(&b))
    return false;
  if (((b & 0x80) != 0) != first)
    return false; // a start marker where none belongs, or missing
  int64_t v = b & 0x3f;
  while (b & 0x40) {
    if (!r.next(&b) || (b & 0x80))
      return false;
    v = (v << 6) | (b & 0x3f);
    if (v > (1 << 30))
      return false;
  }
  *value = static_cast<int>(v);
  return true;
}

void write_except_item(std::string &out, int value, int msb) {
  // The compiler's own width steps, so tables round-trip byte for byte.
  for (int shift : {24, 18, 12, 6}) {
    if (value >= (1 << shift)) {
      out.push_back(static_cast<char>(((value >> shift) & 0x3f) | 0x40 | msb));
      msb = 0;
    }
  }
  out.push_back(static_cast<char>((value & 0x3f) | msb));
}

} // namespace

Expected<std::vector<ExceptionEntry>> decode_exception_table(const uint8_t *data, size_t size,
                                                             int code_units) {
  std::vector<ExceptionEntry> entries;
  Reader r(data, size);
  while (!r.done()) {
    int start, length, target, dl;
    if (!read_except_item(r, &start, true) || !read_except_item(r, &length, false) ||
        !read_except_item(r, &target, false) || !read_except_item(r, &dl, false))
      return Status::invalid("malformed co_exceptiontable entry " + std::to_string(entries.size()));
    ExceptionEntry e{start, start + length, target, dl >> 1, (dl & 1) != 0};
    if (length <= 0 || e.end > code_units || target >= code_units)
      return Status::invalid("co_exceptiontable entry " + std::to_string(entries.size()) +
                             " lies outside co_code");
    entries.push_back(e);
  }
  return entries;
}

void encode_exception_entry(std::string &out, const ExceptionEntry &e) {
  write_except_item(out, e.start, 0x80);
  write_except_item(out, e.end - e.start, 0);
  write_except_item(out, e.target, 0);
  write_except_item(out, (e.depth << 1) | (e.lasti ? 1 : 0), 0);
}

// ---- location table -----------------------------------------------------------------------------
// An entry covers 1-8 code units. Its first byte is 1, a 4-bit form code and (units - 1); its
// varints are 6-bit groups, least significant first, bit 6 meaning "more follows".
//   0-9   short: same line; columns in the next byte (code*8 + hi nibble's 3 bits, + lo nibble)
//   10-12 one line: line += code - 10; start and end columns are the next two bytes
//   13    no columns: line += svarint
//   14    long: line += svarint; end line = line + varint; columns are varint - 1 (0 = none)
//   15    none: no location; the running line is unchanged

namespace {

bool read_varint(Reader &r, unsigned *out) {
  uint8_t b;
  if (!r.next(&b) || (b & 0x80))
    return false;
  unsigned v = b & 0x3f;
  int shift = 0;
  while (b & 0x40) {
    if (!r.next(&b) || (b & 0x80))
      return false;
    shift += 6;
    if (shift > 30)
      return false;
    v |= static_cast<unsigned>(b & 0x3f) << shift;
  }
  *out = v;
  return true;
}

bool read_svarint(Reader &r, int *out) {
  unsigned u;
  if (!read_varint(r, &u))
    return false;
  *out = (u & 1) ? -static_cast<int>(u >> 1) : static_cast<int>(u >> 1);
  return true;
}

} // namespace

Expected<std::vector<Position>> decode_locations(const uint8_t *data, size_t size, int first_line,
                                                 int code_units) {
  std::vector<Position> out(static_cast<size_t>(code_units));
  Reader r(data, size);
  int line = first_line;
  int unit = 0;
  auto bad = [&] {
    return Status::invalid("malformed co_linetable at code unit " + std::to_string(unit));
  };
  while (!r.done()) {
    uint8_t b;
    if (!r.next(&b) || !(b & 0x80))
      return bad();
    const int code = (b >> 3) & 15;
    const int units = (b & 7) + 1;
    Position pos;
    if (code == 15) {
      // no location
    } else if (code == 14) {
      int dl;
      unsigned end_delta, col, end_col;
      if (!read_svarint(r, &dl) || !read_varint(r, &end_delta) || !read_varint(r, &col) ||
          !read_varint(r, &end_col))
        return bad();
      line += dl;
      pos = {line, line + static_cast<int>(end_delta), static_cast<int>(col) - 1,
             static_cast<int>(end_col) - 1};
    } else if (code == 13) {
      int dl;
      if (!read_svarint(r, &dl))
        return bad();
      line += dl;
      pos = {line, line, -1, -1};
    } else if (code >= 10) {
      uint8_t col, end_col;
      if (!r.next(&col) || !r.next(&end_col) || (col & 0x80) || (end_col & 0x80))
        return bad();
      line += code - 10;
      pos = {line, line, col, end_col};
    } else {
      uint8_t second;
      if (!r.next(&second) || (second & 0x80))
        return bad();
      const int col = code * 8 + ((second >> 4) & 7);
      pos = {line, line, col, col + (second & 15)};
    }
    if (unit + units > code_units)
      return bad();
    for (int i = 0; i < units; ++i)
      out[static_cast<size_t>(unit + i)] = pos;
    unit += units;
  }
  return out;
}

void LocationWriter::varint(unsigned v) {
  while (v >= 64) {
    out_.push_back(static_cast<char>(0x40 | (v & 0x3f)));
    v >>= 6;
  }
  out_.push_back(static_cast<char>(v));
}

void LocationWriter::add(const Position &pos, int units) {
  while (units > 8) {
    entry(pos, 8);
    units -= 8;
  }
  if (units > 0)
    entry(pos, units);
}

void LocationWriter::entry(const Position &pos, int units) {
  if (!pos.has_line()) {
    header(15, units);
    return;
  }
  const int line_delta = pos.line - line_;
  const int end_line_delta = pos.end_line - pos.line;
  const int col = pos.col, end_col = pos.end_col;
  line_ = pos.line;
  if (col < 0 || end_line_delta < 0) {
    header(13, units);
    svarint(line_delta);
    return;
  }
  if (end_line_delta == 0 && end_col >= 0) {
    if (line_delta == 0 && col < 80 && end_col - col < 16 && end_col >= col) {
      header(col / 8, units);
      out_.push_back(static_cast<char>(((col % 8) << 4) | (end_col - col)));
      return;
    }
    if (line_delta >= 0 && line_delta < 3 && col < 128 && end_col < 128) {
      header(10 + line_delta, units);
      out_.push_back(static_cast<char>(col));
      out_.push_back(static_cast<char>(end_col));
      return;
    }
  }
  header(14, units);
  svarint(line_delta);
  varint(static_cast<unsigned>(end_line_delta));
  varint(static_cast<unsigned>(col + 1));
  varint(static_cast<unsigned>(end_col + 1));
}

} // namespace framejit::frontend::bytecode
