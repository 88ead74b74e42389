#include "comm_state.h"

#include <algorithm>
#include <utility>

namespace nodus::mpi {

// ---- ScratchPool ----------------------------------------------------------------

ScratchPool::Lease::Lease(Lease&& o) noexcept
    : pool_(std::exchange(o.pool_, nullptr)), buf_(std::move(o.buf_)), size_(std::exchange(o.size_, 0)) {}

ScratchPool::Lease& ScratchPool::Lease::operator=(Lease&& o) noexcept {
  if (this != &o) {
    if (pool_ && buf_) pool_->release(std::move(buf_), size_);
    pool_ = std::exchange(o.pool_, nullptr);
    buf_ = std::move(o.buf_);
    size_ = std::exchange(o.size_, 0);
  }
  return *this;
}

ScratchPool::Lease::~Lease() {
  if (pool_ && buf_) pool_->release(std::move(buf_), size_);
}

ScratchPool::Lease ScratchPool::acquire(size_t bytes) {
  Lease lease;
  lease.pool_ = this;
  {
    std::lock_guard<std::mutex> lock(mu_);
    // The smallest kept buffer that is large enough.
    auto best = free_.end();
    for (auto it = free_.begin(); it != free_.end(); ++it)
      if (it->size >= bytes && (best == free_.end() || it->size < best->size)) best = it;
    if (best != free_.end()) {
      lease.buf_ = std::move(best->buf);
      lease.size_ = best->size;
      free_.erase(best);
      return lease;
    }
  }
  const size_t size = std::max<size_t>((bytes + 4095) / 4096 * 4096, 4096);
  lease.buf_ = std::make_unique_for_overwrite<std::byte[]>(size);
  lease.size_ = size;
  return lease;
}

void ScratchPool::release(std::unique_ptr<std::byte[]> buf, size_t size) {
  std::lock_guard<std::mutex> lock(mu_);
  free_.push_back(Free{std::move(buf), size});
  // A few buffers cover the calls in flight at once; beyond that keep the largest.
  constexpr size_t kKeep = 4;
  if (free_.size() > kKeep) {
    auto smallest = std::min_element(free_.begin(), free_.end(),
                                     [](const Free& a, const Free& b) { return a.size < b.size; });
    free_.erase(smallest);
  }
}

// ---- CommState ----------------------------------------------------------------------

CommState::CommState(MPI_Comm comm, int rank, int size, nodusComm_t nodus, int state, int unsuitableReason)
    : comm_(comm), rank_(rank), size_(size), nodus_(nodus), state_(state), unsuitableReason_(unsuitableReason) {}

CommState::~CommState() { shutdown(); }

int CommState::fallbackReason() const {
  switch (state()) {
    case NODUS_MPI_COMM_UNSUITABLE: return unsuitableReason_;
    case NODUS_MPI_COMM_INIT_FAILED: return NODUS_MPI_FB_INIT_FAILED;
    default: return NODUS_MPI_FB_NODUS_ERROR;
  }
}

void CommState::disable() {
  state_.store(NODUS_MPI_COMM_DISABLED, std::memory_order_release);
  nodusCommDestroy(std::exchange(nodus_, nullptr));
}

void CommState::shutdown() { nodusCommDestroy(std::exchange(nodus_, nullptr)); }

}  // namespace nodus::mpi
