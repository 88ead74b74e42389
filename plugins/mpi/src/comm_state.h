// What the plugin keeps per MPI communicator: its nodus communicator (or why
// there is none), a call sequence number, and reusable scratch buffers.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "mpi_headers.h"
#include "nodus/nodus.h"
#include "nodus_mpi_plugin.h"

namespace nodus::mpi {

// Scratch memory for calls that stage data (packing a non-contiguous type,
// Reduce_scatter with unequal counts). Buffers are kept and reused: on these
// machines a page fault costs 10-17 us, so memory is touched once per
// communicator, not once per call.
class ScratchPool {
 public:
  class Lease {
   public:
    Lease() = default;
    Lease(Lease&& o) noexcept;
    Lease& operator=(Lease&& o) noexcept;
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    ~Lease();
    std::byte* data() const { return buf_.get(); }

   private:
    friend class ScratchPool;
    ScratchPool* pool_ = nullptr;
    std::unique_ptr<std::byte[]> buf_;
    size_t size_ = 0;
  };

  Lease acquire(size_t bytes);

 private:
  void release(std::unique_ptr<std::byte[]> buf, size_t size);
  struct Free {
    std::unique_ptr<std::byte[]> buf;
    size_t size;
  };
  std::mutex mu_;  // ops of several threads (MPI_THREAD_MULTIPLE) finish at once
  std::vector<Free> free_;
};

class CommState : public std::enable_shared_from_this<CommState> {
 public:
  // `nodus` may be null: then `state` says why (UNSUITABLE or INIT_FAILED).
  CommState(MPI_Comm comm, int rank, int size, nodusComm_t nodus, int state, int unsuitableReason);
  ~CommState();
  CommState(const CommState&) = delete;
  CommState& operator=(const CommState&) = delete;

  MPI_Comm comm() const { return comm_; }
  int rank() const { return rank_; }
  int size() const { return size_; }
  nodusComm_t nodus() const { return nodus_; }
  // One of enum nodus_mpi_comm_state.
  int state() const { return state_.load(std::memory_order_acquire); }
  // For UNSUITABLE / INIT_FAILED / DISABLED: the nodus_mpi_reason to count.
  int fallbackReason() const;

  // Numbers this communicator's nodus calls; equal on every rank because
  // every rank routes every call alike.
  uint64_t nextSeq() { return ++seq_; }

  // After a failure every rank agreed on: MPI from now on.
  void disable();
  // At MPI_Finalize: destroys the nodus communicator (waits for its requests).
  void shutdown();

  ScratchPool& scratch() { return scratch_; }

 private:
  const MPI_Comm comm_;
  const int rank_, size_;
  nodusComm_t nodus_;
  std::atomic<int> state_;
  const int unsuitableReason_;
  uint64_t seq_ = 0;  // MPI forbids concurrent collectives on one communicator
  ScratchPool scratch_;
};

}  // namespace nodus::mpi
