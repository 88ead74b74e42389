// The parameter registry's check for NODUS_* variables that nodus does not
// know (typos would otherwise be ignored without a word).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

#include "base/params.h"

namespace nodus {
namespace {

bool has(const std::vector<std::string>& v, const std::string& s) { return std::find(v.begin(), v.end(), s) != v.end(); }

TEST(Params, UnknownNodusVariablesAreFoundAndKnownOnesAreNot) {
  setenv("NODUS_SLICE_BYTES", "32768", 1);      // a typo of NODUS_CHUNK_BYTES
  setenv("NODUS_CHUNK_BYTES", "32768", 1);      // a parameter
  setenv("NODUS_MPI_TEST_SOMETHING", "1", 1);   // the tests' own
  setenv("NODUSX_OTHER", "1", 1);               // not ours at all
  const std::vector<std::string> unknown = unknownParams();
  EXPECT_TRUE(has(unknown, "NODUS_SLICE_BYTES"));
  EXPECT_FALSE(has(unknown, "NODUS_CHUNK_BYTES"));
  EXPECT_FALSE(has(unknown, "NODUS_MPI_TEST_SOMETHING"));
  EXPECT_FALSE(has(unknown, "NODUSX_OTHER"));
  for (const ParamInfo& p : allParams()) EXPECT_FALSE(has(unknown, p.name)) << p.name;
  for (const char* n : {"NODUS_SLICE_BYTES", "NODUS_CHUNK_BYTES", "NODUS_MPI_TEST_SOMETHING", "NODUSX_OTHER"}) unsetenv(n);
  EXPECT_FALSE(has(unknownParams(), "NODUS_SLICE_BYTES"));
}

}  // namespace
}  // namespace nodus
