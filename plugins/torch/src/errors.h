// Errors of the torch plugin. Everything it throws is a std::runtime_error
// (Python: RuntimeError) whose message starts with "nodus: <operation>: ".
#pragma once

#include <string>

#include "nodus/nodus.h"

namespace nodus_torch {

[[noreturn]] void raise(const std::string& op, const std::string& what);
void require(bool ok, const std::string& op, const std::string& what);

// The calling thread's explanation of its last nodus failure: nodus keeps one
// per thread, so a concurrent failure seen by another thread cannot replace it.
std::string nodusError(nodusResult_t rc);

// Raises with nodusError(rc) unless rc is nodusSuccess.
void check(nodusResult_t rc, const std::string& op);

}  // namespace nodus_torch
