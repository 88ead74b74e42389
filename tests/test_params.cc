// The parameter registry's check for NODUS_* variables that nodus does not
// know (typos would otherwise be ignored without a word).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "base/params.h"
#include "base/settings.h"
#include "base/size.h"

namespace nodus {
namespace {

bool has(const std::vector<std::string>& v, const std::string& s) { return std::find(v.begin(), v.end(), s) != v.end(); }

TEST(Params, UnknownNodusVariablesAreFoundAndKnownOnesAreNot) {
  setenv("NODUS_SLICES_BYTES", "32768", 1);     // a typo of NODUS_SLICE_BYTES
  setenv("NODUS_SLICE_BYTES", "32768", 1);      // a parameter
  setenv("NODUS_CHUNK_BYTES", "32768", 1);      // its former name, still read
  setenv("NODUS_MPI_TEST_SOMETHING", "1", 1);   // the tests' own
  setenv("NODUSX_OTHER", "1", 1);               // not ours at all
  const std::vector<std::string> unknown = unknownParams();
  EXPECT_TRUE(has(unknown, "NODUS_SLICES_BYTES"));
  EXPECT_FALSE(has(unknown, "NODUS_SLICE_BYTES"));
  EXPECT_FALSE(has(unknown, "NODUS_CHUNK_BYTES"));
  EXPECT_FALSE(has(unknown, "NODUS_MPI_TEST_SOMETHING"));
  EXPECT_FALSE(has(unknown, "NODUSX_OTHER"));
  for (const ParamInfo& p : allParams()) EXPECT_FALSE(has(unknown, p.name)) << p.name;
  for (const char* n : {"NODUS_SLICES_BYTES", "NODUS_SLICE_BYTES", "NODUS_CHUNK_BYTES", "NODUS_MPI_TEST_SOMETHING",
                        "NODUSX_OTHER"})
    unsetenv(n);
  EXPECT_FALSE(has(unknownParams(), "NODUS_SLICES_BYTES"));
}

// Every default is a value its own range accepts, and every parameter has help.
TEST(Params, EveryDefaultIsInItsRange) {
  Settings s;
  for (const ParamInfo& p : allParams()) {
    EXPECT_TRUE(s.set(p, p.defaultValue).isOk()) << p.name << " default " << p.defaultValue << " " << rangeText(p);
    EXPECT_GT(strlen(p.help), 10u) << p.name;
    EXPECT_EQ(findParam(p.name), &p);
    if (p.oldName) {
      EXPECT_EQ(findParam(p.oldName), &p);
    }
  }
}

TEST(Settings, ValuesOutOfRangeAreRefusedNamingVariableValueAndRange) {
  Settings s;
  const Status zero = s.set(param::kTimeoutMs, 0);
  EXPECT_EQ(zero.code(), nodusInvalidArgument);
  EXPECT_EQ(zero.message(), "NODUS_TIMEOUT_MS=0 is outside its range [1, 2147483647]");
  EXPECT_EQ(s.get(param::kTimeoutMs), 300000);  // unchanged
  EXPECT_FALSE(s.given(param::kTimeoutMs));
  const Status word = s.set(param::kSlots.info(), "many");
  EXPECT_NE(word.message().find("NODUS_SLOTS=\"many\" is not an integer"), std::string::npos) << word.message();
  EXPECT_NE(word.message().find("[2, 64]"), std::string::npos) << word.message();
  const Status named = s.set(param::kTimeoutMs, -5, "nodusConfig_t.timeoutMs");
  EXPECT_EQ(named.message(), "nodusConfig_t.timeoutMs=-5 is outside its range [1, 2147483647]");
  EXPECT_EQ(s.set(param::kShmCopy.info(), "fast").message(), "NODUS_SHM_COPY=\"fast\" is not one of auto|cached|streaming");
  ASSERT_TRUE(s.set(param::kShmCopy.info(), "Streaming").isOk());  // choices ignore case
  ASSERT_TRUE(s.set("NODUS_SLOT_BYTES", "256K").isOk());
  EXPECT_EQ(s.get(param::kSlotBytes), 256 << 10);
  EXPECT_TRUE(s.given(param::kSlotBytes));
  s.reset(param::kSlotBytes.info());
  EXPECT_EQ(s.get(param::kSlotBytes), 0);
  EXPECT_FALSE(s.given(param::kSlotBytes));
  EXPECT_EQ(s.set("NODUS_NO_SUCH", "1").code(), nodusInvalidArgument);
}

TEST(Settings, FromTheEnvironmentOnceWithOldNamesAndTheFirstBadValue) {
  setenv("NODUS_CHUNK_BYTES", "16K", 1);
  setenv("NODUS_SLOTS", "1", 1);
  Settings s;
  const Status st = Settings::fromEnvironment(&s);
  EXPECT_EQ(st.code(), nodusInvalidArgument);
  EXPECT_EQ(st.message(), "NODUS_SLOTS=1 is outside its range [2, 64]");
  EXPECT_EQ(s.get(param::kSlots), 8);  // the bad one stays at its default
  EXPECT_EQ(s.get(param::kSliceBytes), 16 << 10);
  setenv("NODUS_SLICE_BYTES", "8K", 1);  // the new name wins over the old one
  unsetenv("NODUS_SLOTS");
  ASSERT_TRUE(Settings::fromEnvironment(&s).isOk());
  EXPECT_EQ(s.get(param::kSliceBytes), 8 << 10);
  // A value read is a value kept: the environment changing later does not move it.
  setenv("NODUS_SLICE_BYTES", "4K", 1);
  EXPECT_EQ(s.get(param::kSliceBytes), 8 << 10);
  unsetenv("NODUS_SLICE_BYTES");
  unsetenv("NODUS_CHUNK_BYTES");
}

TEST(Sizes, OneParserForEverySize) {
  int64_t v = 0;
  EXPECT_TRUE(parseSize("128K", &v) && v == 128 << 10);
  EXPECT_TRUE(parseSize("4m", &v) && v == 4 << 20);
  EXPECT_TRUE(parseSize("1G", &v) && v == int64_t{1} << 30);
  EXPECT_TRUE(parseSize("-1", &v) && v == -1);
  EXPECT_TRUE(parseSize("0x40", &v) && v == 64);
  EXPECT_FALSE(parseSize("", &v));
  EXPECT_TRUE(parseSize("12KB", &v) && v == 12 << 10);
  EXPECT_FALSE(parseSize("12KX", &v));
  EXPECT_TRUE(parseSize("2MiB", &v) && v == 2 << 20);
  EXPECT_TRUE(parseSize("1T", &v) && v == int64_t{1} << 40);
  EXPECT_FALSE(parseSize("2iB", &v));
  EXPECT_FALSE(parseSize("K", &v));
  EXPECT_FALSE(parseSize("9000000000G", &v));  // overflows
  uint64_t u = 0;
  EXPECT_FALSE(parseUnsignedSize("-4K", &u));
  EXPECT_TRUE(parseUnsignedSize("4K", &u) && u == 4096);
}

}  // namespace
}  // namespace nodus
