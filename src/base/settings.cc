#include "base/settings.h"

#include <strings.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <set>

#include "base/size.h"

namespace nodus {
namespace {

bool choiceMatches(const char* choices, const std::string& text) {
  const std::string all = choices;
  size_t start = 0;
  while (start <= all.size()) {
    size_t bar = all.find('|', start);
    if (bar == std::string::npos) bar = all.size();
    if (strcasecmp(all.substr(start, bar - start).c_str(), text.c_str()) == 0) return true;
    start = bar + 1;
  }
  return false;
}

// A parameter given under its former name: said once per process and name.
void warnOldName(const ParamInfo& p) {
  static std::mutex mu;
  static std::set<std::string> warned;
  std::lock_guard<std::mutex> lock(mu);
  if (warned.insert(p.oldName).second)
    fprintf(stderr, "nodus WARN %s is now called %s; the old name still works but will go\n", p.oldName, p.name);
}

}  // namespace

Settings::Settings() {
  const auto params = allParams();
  ints_.assign(params.size(), 0);
  strings_.assign(params.size(), std::string());
  given_.assign(params.size(), 0);
  for (const ParamInfo& p : params) reset(p);
}

void Settings::reset(const ParamInfo& p) {
  const size_t i = static_cast<size_t>(p.index);
  given_[i] = 0;
  if (p.type == ParamType::Int) {
    int64_t v = 0;
    parseSize(p.defaultValue, &v);
    ints_[i] = v;
  } else {
    strings_[i] = p.defaultValue;
  }
}

Status Settings::set(const ParamInfo& p, const std::string& text, const std::string& source) {
  const std::string who = source.empty() ? std::string(p.name) : source;
  const size_t i = static_cast<size_t>(p.index);
  if (p.type == ParamType::Int) {
    int64_t v = 0;
    if (!parseSize(text, &v))
      return makeError(nodusInvalidArgument, "%s=\"%s\" is not an integer (a number, optionally with K, M or G); "
                       "the range is %s", who.c_str(), text.c_str(), rangeText(p).c_str());
    if (v < p.min || v > p.max)
      return makeError(nodusInvalidArgument, "%s=%s is outside its range %s", who.c_str(), text.c_str(),
                       rangeText(p).c_str());
    ints_[i] = v;
  } else {
    if (p.choices != nullptr && !text.empty() && !choiceMatches(p.choices, text))
      return makeError(nodusInvalidArgument, "%s=\"%s\" is not one of %s", who.c_str(), text.c_str(), p.choices);
    strings_[i] = text;
  }
  given_[i] = 1;
  return Status::ok();
}

Status Settings::set(const std::string& name, const std::string& text) {
  const ParamInfo* p = findParam(name);
  if (p == nullptr) return makeError(nodusInvalidArgument, "%s is not a nodus parameter (nodus-info lists them)", name.c_str());
  return set(*p, text);
}

Status Settings::set(const IntParam& p, int64_t value, const std::string& source) {
  return set(p.info(), std::to_string(value), source);
}

std::string Settings::text(const ParamInfo& p) const {
  const size_t i = static_cast<size_t>(p.index);
  return p.type == ParamType::Int ? std::to_string(ints_[i]) : strings_[i];
}

Status Settings::fromEnvironment(Settings* out) {
  *out = Settings();
  Status first;
  for (const ParamInfo& p : allParams()) {
    const char* name = p.name;
    const char* env = getenv(p.name);
    if ((env == nullptr || *env == '\0') && p.oldName != nullptr) {
      env = getenv(p.oldName);
      if (env != nullptr && *env != '\0') {
        warnOldName(p);
        name = p.oldName;
      }
    }
    if (env == nullptr || *env == '\0') continue;
    Status s = out->set(p, env, name);
    if (!s.isOk() && first.isOk()) first = s;
  }
  return first;
}

}  // namespace nodus
