// Settings: one typed value of every registered parameter (base/params.h).
// Read from the environment once (Settings::fromEnvironment) and passed
// explicitly to whatever needs it; a tool, the simulator or a per-
// communicator config (nodusConfig_t) changes a value with set(), checked
// exactly as the environment's is, rather than changing the process environment.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/params.h"
#include "base/status.h"

namespace nodus {

class Settings {
 public:
  Settings();  // every parameter at its default

  // The environment as it is now. A value that does not parse or is out of
  // its range fails with nodusInvalidArgument naming the variable, the value
  // and the range (the first such; the others stay at their defaults, which
  // is what `out` holds for them). A variable set under a parameter's old
  // name is taken, with one WARN line per process.
  static Status fromEnvironment(Settings* out);

  // One parameter from text, checked as the environment's is. `source` is
  // how errors name where the value came from (default: the variable).
  Status set(const ParamInfo& p, const std::string& text, const std::string& source = "");
  Status set(const std::string& name, const std::string& text);  // by name (or old name)
  Status set(const IntParam& p, int64_t value, const std::string& source = "");
  // Back to the default, as if never set.
  void reset(const ParamInfo& p);

  int64_t get(const IntParam& p) const { return ints_[static_cast<size_t>(p.index())]; }
  const std::string& get(const StringParam& p) const { return strings_[static_cast<size_t>(p.index())]; }
  // Whether the value was given (environment or set()), not the default.
  bool given(const ParamInfo& p) const { return given_[static_cast<size_t>(p.index)] != 0; }
  bool given(const IntParam& p) const { return given(p.info()); }
  bool given(const StringParam& p) const { return given(p.info()); }
  // The value as text (an integer in decimal).
  std::string text(const ParamInfo& p) const;

 private:
  std::vector<int64_t> ints_;
  std::vector<std::string> strings_;
  std::vector<uint8_t> given_;
};

}  // namespace nodus
