// test_bytecode_tables.cpp — co_exceptiontable and co_linetable encoding (frontend/bytecode):
// every location form and varint width round-trips, and malformed tables are errors, not crashes.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "frontend/bytecode/tables.h"

namespace framejit::frontend::bytecode {
namespace {

const uint8_t *bytes(const std::string &s) { return reinterpret_cast<const uint8_t *>(s.data()); }

TEST(BytecodeTables, ExceptionEntriesRoundTripAtEveryVarintWidth) {
  std::vector<ExceptionEntry> in = {{0, 3, 10, 0, false},
                                    {3, 70, 100, 5, true},
                                    {70, 5000, 5001, 63, false},
                                    {5000, 300000, 300001, 1000, true},
                                    {300000, 20000000, 20000001, 2, false}};
  std::string table;
  for (const auto &e : in)
    encode_exception_entry(table, e);
  Expected<std::vector<ExceptionEntry>> out =
      decode_exception_table(bytes(table), table.size(), 1 << 26);
  ASSERT_TRUE(out) << out.error().message();
  ASSERT_EQ(out->size(), in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    EXPECT_EQ((*out)[i].start, in[i].start);
    EXPECT_EQ((*out)[i].end, in[i].end);
    EXPECT_EQ((*out)[i].target, in[i].target);
    EXPECT_EQ((*out)[i].depth, in[i].depth);
    EXPECT_EQ((*out)[i].lasti, in[i].lasti);
  }
}

TEST(BytecodeTables, ExceptionTableErrors) {
  std::string table;
  encode_exception_entry(table, {0, 4, 2, 1, false});
  EXPECT_FALSE(decode_exception_table(bytes(table), table.size(), 3));     // end past co_code
  EXPECT_FALSE(decode_exception_table(bytes(table), table.size() - 1, 8)); // truncated
  std::string no_marker = table;
  no_marker[0] = static_cast<char>(no_marker[0] & 0x7f);
  EXPECT_FALSE(decode_exception_table(bytes(no_marker), no_marker.size(), 8));
}

// Each position picks a different form: short, one-line (deltas 0-2), no-column, long (negative
// line delta, multi-line span, wide columns), none; runs longer than 8 units are split.
TEST(BytecodeTables, EveryLocationFormRoundTrips) {
  struct Run {
    Position pos;
    int units;
  };
  const std::vector<Run> runs = {
      {{10, 10, 4, 9}, 2},  {{10, 10, 90, 100}, 1}, {{12, 12, 0, 120}, 3},   {{13, 13, -1, -1}, 1},
      {{7, 9, 2, 300}, 20}, {{-1, -1, -1, -1}, 9},  {{200, 200, 79, 94}, 1}, {{201, 203, 0, 0}, 1},
  };
  LocationWriter w(10);
  int units = 0;
  for (const Run &r : runs) {
    w.add(r.pos, r.units);
    units += r.units;
  }
  const std::string table = w.bytes();
  Expected<std::vector<Position>> out = decode_locations(bytes(table), table.size(), 10, units);
  ASSERT_TRUE(out) << out.error().message();
  int u = 0;
  for (const Run &r : runs)
    for (int k = 0; k < r.units; ++k, ++u)
      EXPECT_EQ((*out)[static_cast<size_t>(u)], r.pos) << "unit " << u;
  // The first run is short form: one header (code 0: columns 0-7) and one column byte.
  EXPECT_EQ(static_cast<uint8_t>(table[0]), 0x80 | (0 << 3) | 1);
  EXPECT_EQ(static_cast<uint8_t>(table[1]), (4 << 4) | 5);
}

TEST(BytecodeTables, LocationTableErrors) {
  LocationWriter w(1);
  w.add({1, 1, 0, 3}, 4);
  const std::string table = w.bytes();
  EXPECT_FALSE(decode_locations(bytes(table), table.size(), 1, 3)); // more units than code
  const std::string no_header = "\x01\x02";
  EXPECT_FALSE(decode_locations(bytes(no_header), no_header.size(), 1, 8));
  const std::string cut_long = "\xf0\x41"; // long form, varint cut short
  EXPECT_FALSE(decode_locations(bytes(cut_long), cut_long.size(), 1, 8));
}

} // namespace
} // namespace framejit::frontend::bytecode
