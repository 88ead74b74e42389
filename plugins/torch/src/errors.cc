#include "errors.h"

#include <stdexcept>

namespace nodus_torch {

[[noreturn]] void raise(const std::string& op, const std::string& what) {
  throw std::runtime_error("nodus: " + op + ": " + what);
}

void require(bool ok, const std::string& op, const std::string& what) {
  if (!ok) raise(op, what);
}

std::string nodusError(nodusResult_t rc) {
  std::string msg = nodusGetErrorString(rc);
  const char* detail = nodusGetLastError(nullptr);
  if (detail && *detail) msg += std::string(": ") + detail;
  return msg;
}

void check(nodusResult_t rc, const std::string& op) {
  if (rc != nodusSuccess) raise(op, nodusError(rc));
}

}  // namespace nodus_torch
