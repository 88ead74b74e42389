// Non-contiguous tensors and list arguments go through contiguous buffers.
// Faulting pages in costs more than the copy on these machines, so buffers are
// kept and reused rather than allocated per call.
#pragma once

#include <cstddef>
#include <mutex>
#include <vector>

#include <ATen/ATen.h>

namespace nodus_torch {

// Byte tensors of at least the size asked for, reused; thread-safe.
class StagingPool {
 public:
  // The smallest kept buffer that holds `bytes`, else a new one.
  at::Tensor acquire(size_t bytes);
  // Keeps `t` for reuse (at most kKeep buffers: the smallest goes).
  void release(at::Tensor t);

 private:
  static constexpr size_t kKeep = 8;
  std::mutex mu_;
  std::vector<at::Tensor> free_;
};

}  // namespace nodus_torch
