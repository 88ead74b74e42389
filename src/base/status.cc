#include "base/status.h"

#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstring>

namespace nodus {

static std::string vformat(const char* fmt, va_list ap) {
  va_list copy;
  va_copy(copy, ap);
  int n = vsnprintf(nullptr, 0, fmt, copy);
  va_end(copy);
  std::string out(n > 0 ? static_cast<size_t>(n) : 0, '\0');
  if (n > 0) vsnprintf(out.data(), out.size() + 1, fmt, ap);
  return out;
}

Status makeError(nodusResult_t code, const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  std::string msg = vformat(fmt, ap);
  va_end(ap);
  return Status(code, std::move(msg));
}

Status systemError(const char* fmt, ...) {
  int err = errno;
  va_list ap;
  va_start(ap, fmt);
  std::string msg = vformat(fmt, ap);
  va_end(ap);
  msg += ": ";
  msg += strerror(err);
  return Status(nodusSystemError, std::move(msg));
}

}  // namespace nodus
