// Status: how errors travel inside nodus. A value, never an exception.
#pragma once

#include <string>
#include <utility>

#include "nodus/nodus.h"

namespace nodus {

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(nodusResult_t code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status ok() { return {}; }
  bool isOk() const { return code_ == nodusSuccess; }
  explicit operator bool() const { return isOk(); }
  nodusResult_t code() const { return code_; }
  const std::string& message() const { return message_; }

 private:
  nodusResult_t code_ = nodusSuccess;
  std::string message_;
};

// printf-style constructor for error statuses.
Status makeError(nodusResult_t code, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
// An error from errno, with the failing call named: "shm_open(/x): Permission denied".
Status systemError(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

}  // namespace nodus

// Propagates a failed Status to the caller.
#define NODUS_TRY(expr)                        \
  do {                                         \
    ::nodus::Status nodus_try_status_ = (expr); \
    if (!nodus_try_status_.isOk()) return nodus_try_status_; \
  } while (0)
