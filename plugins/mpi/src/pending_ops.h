// Non-blocking collectives that nodus runs, behind MPI requests.
//
// Each one is an MPI generalized request (MPI_Grequest_start), so the handle
// the program holds is a real MPI request: MPI_Wait/Test/...all/any/some,
// MPI_Request_get_status and mixing with the program's own requests keep
// their MPI meaning, MPI fills the statuses and MPI frees the handle.
// MPI_Request_free and MPI_Cancel on a non-blocking collective are erroneous
// (MPI 4.0, 6.12); MPI_Request_free reports MPI_ERR_REQUEST as Open MPI does
// for its own, MPI_Cancel does nothing. Only one thing is ours to do: call MPI_Grequest_complete once nodus
// has finished. MPI never calls back to ask, so the plugin intercepts the
// completion calls and, before handing them to MPI, completes every one of
// its requests among their arguments that nodus has finished; the blocking
// forms poll nodus and MPI's progress alternately until they can hand over
// (nodus progresses on its own thread, MPI only inside MPI calls, so neither
// starves the other). MPI_Grequest_complete is only ever called from the
// program's own threads inside an MPI call, which every thread level allows.
#pragma once

#include <atomic>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "comm_state.h"
#include "mpi_headers.h"
#include "nodus/nodus.h"

namespace nodus::mpi {

struct PendingOp {
  std::shared_ptr<CommState> comm;  // outlives the lease below (declared first)
  ScratchPool::Lease scratch;
  nodusRequest_t request = nullptr;
  MPI_Request handle = MPI_REQUEST_NULL;
  int coll = 0;
  std::function<void()> finish;  // after success: unpack or move the result into place
  int error = MPI_SUCCESS;       // what MPI reports for the request
  std::atomic<bool> claimed{false};

  PendingOp() = default;
  PendingOp(const PendingOp&) = delete;
  PendingOp& operator=(const PendingOp&) = delete;
  ~PendingOp();
};

class PendingOps {
 public:
  // Takes the started nodus request inside `op` and returns its MPI handle.
  int start(std::unique_ptr<PendingOp> op, MPI_Request* handle);

  bool empty() const { return live_.load(std::memory_order_acquire) == 0; }
  bool ours(MPI_Request r);
  bool anyOurs(int n, const MPI_Request* reqs);

  // Completes `r` if it is ours and nodus has finished it. True when MPI may
  // report `r` complete (ours and completed, or not ours at all).
  bool poll(MPI_Request r);
  // poll() over an array; true when none of ours is left unfinished.
  bool pollAll(int n, const MPI_Request* reqs);

  // At MPI_Finalize: waits for whatever is left.
  void drain();

 private:
  PendingOp* find(MPI_Request r);
  bool complete(PendingOp* op, bool wait);
  void forget(PendingOp* op);

  static int queryFn(void* extra, MPI_Status* status);
  static int freeFn(void* extra);
  static int cancelFn(void* extra, int complete);

  std::mutex mu_;  // the map; never held across an MPI call (freeFn takes it)
  std::unordered_map<MPI_Request, std::unique_ptr<PendingOp>> ops_;
  std::atomic<size_t> live_{0};
};

}  // namespace nodus::mpi
