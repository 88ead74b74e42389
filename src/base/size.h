// Sizes as people write them: a whole number with an optional K, M, G or T
// suffix (powers of 1024, either case; KiB, KB, B also read), as every NODUS_* size, nodus-perf's
// -b/-e, NODUS_ALGO's ranges and the tools' options take them. Header-only,
// so that the tools and plugins that link only libnodus.so use the same one.
#pragma once

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <string>

namespace nodus {

// Parses "64", "-1", "0x40", "128K", "4m", "1G", "64KB", "2MiB". Fails on anything
// after the suffix (and an optional B), on an empty text and on overflow.
inline bool parseSize(const char* text, int64_t* out) {
  if (text == nullptr || *text == '\0') return false;
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(text, &end, 0);
  if (errno != 0 || end == text) return false;
  int shift = 0;
  switch (*end) {
    case 'k': case 'K': shift = 10, ++end; break;
    case 'm': case 'M': shift = 20, ++end; break;
    case 'g': case 'G': shift = 30, ++end; break;
    case 't': case 'T': shift = 40, ++end; break;
    default: break;
  }
  if (shift != 0 && end[0] == 'i' && end[1] == 'B') end += 2;  // "64KiB"
  else if (*end == 'B' || *end == 'b') ++end;                  // "64KB", "8B"
  if (*end != '\0') return false;
  const long long limit = INT64_MAX >> shift;
  if (v > limit || v < -limit) return false;
  *out = static_cast<int64_t>(v) * (int64_t{1} << shift);
  return true;
}
inline bool parseSize(const std::string& text, int64_t* out) { return parseSize(text.c_str(), out); }

// An unsigned size: as parseSize, but negative values fail.
inline bool parseUnsignedSize(const char* text, uint64_t* out) {
  int64_t v = 0;
  if (text == nullptr || *text == '-' || !parseSize(text, &v) || v < 0) return false;
  *out = static_cast<uint64_t>(v);
  return true;
}
inline bool parseUnsignedSize(const std::string& text, uint64_t* out) { return parseUnsignedSize(text.c_str(), out); }

}  // namespace nodus
