// The executor: runs plans over the connections an ExecContext gives it.
//
// A Task is one plan in flight with its buffers. Tasks advance slice by slice
// without blocking (a slot that is not ready means "come back later"); run()
// drives a set of tasks, possibly of several communicators, until all are
// done, waiting spin -> yield -> futex when none can move.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "base/status.h"
#include "nodus/nodus.h"
#include "plan/plan.h"

namespace nodus {

class ExecContext;
class SendConnection;
class RecvConnection;

// What a caller holds for a non-blocking operation.
struct Request {
  std::atomic<uint32_t> done{0};
  std::atomic<uint32_t> timedWaiters{0};  // threads in waitUntil (woken by a futex on `done`)
  Status status;  // written before `done` is set
  void complete(Status s);
  Status wait();
  // Whether it completed before `deadline`.
  bool waitUntil(std::chrono::steady_clock::time_point deadline);
};

struct Task {
  ExecContext* comm = nullptr;  // the communicator it runs on (src/core: a Comm)
  // Owned by the communicator's plan cache, which never drops one, or, for
  // the V-collectives (whose bounded cache may drop it), by planHold too.
  const Plan* plan = nullptr;
  std::shared_ptr<const Plan> planHold;
  const std::byte* send = nullptr;
  std::byte* recv = nullptr;
  std::byte* scratch = nullptr;
  nodusDataType_t type = nodusFloat32;
  nodusRedOp_t op = nodusSum;
  // nodusAllGatherList: the Recv buffer is nranks separate buffers of
  // partElems elements each (element e of Recv is element e % partElems of
  // recvParts[e / partElems]); empty for one contiguous `recv`.
  std::vector<std::byte*> recvParts;
  uint64_t partElems = 0;
  std::shared_ptr<Request> request;  // may be null (blocking call)
  PlanCursor at;  // progress
  // Connections that send from this task's buffers (SendConnection::
  // postReference): the task is finished once they all let go of them.
  std::vector<SendConnection*> referencing;
  // A connection that may be receiving into this task's buffers now
  // (RecvConnection::tryPeekTo): withdrawn if the task fails.
  RecvConnection* placing = nullptr;
  bool finished() const { return at.done && referencing.empty(); }
};

// Runs the tasks to completion (or the first error, which is also recorded on
// the task's communicator). Tasks of one communicator that use the same
// connection take turns in the order given.
Status runTasks(std::span<Task> tasks);

}  // namespace nodus
