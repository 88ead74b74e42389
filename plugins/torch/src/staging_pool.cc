#include "staging_pool.h"

#include <algorithm>
#include <cstdint>
#include <utility>

namespace nodus_torch {

at::Tensor StagingPool::acquire(size_t bytes) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    size_t best = free_.size();
    for (size_t i = 0; i < free_.size(); ++i) {
      size_t have = static_cast<size_t>(free_[i].numel());
      if (have >= bytes && (best == free_.size() || have < static_cast<size_t>(free_[best].numel()))) best = i;
    }
    if (best != free_.size()) {
      at::Tensor t = std::move(free_[best]);
      free_.erase(free_.begin() + static_cast<std::ptrdiff_t>(best));
      return t;
    }
  }
  return at::empty({static_cast<int64_t>(std::max<size_t>(bytes, 64))}, at::TensorOptions().dtype(at::kByte));
}

void StagingPool::release(at::Tensor t) {
  std::lock_guard<std::mutex> lock(mu_);
  free_.push_back(std::move(t));
  if (free_.size() > kKeep) {  // drop the smallest
    auto smallest = std::min_element(free_.begin(), free_.end(),
                                     [](const at::Tensor& a, const at::Tensor& b) { return a.numel() < b.numel(); });
    free_.erase(smallest);
  }
}

}  // namespace nodus_torch
