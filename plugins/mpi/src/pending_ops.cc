#include "pending_ops.h"

#include <vector>

#include "log.h"
#include "plugin.h"

namespace nodus::mpi {

PendingOp::~PendingOp() {
  // Already complete whenever MPI lets go of the request; frees without waiting.
  if (request) nodusRequestFree(request);
}

int PendingOps::start(std::unique_ptr<PendingOp> op, MPI_Request* handle) {
  PendingOp* raw = op.get();
  const int rc = PMPI_Grequest_start(queryFn, freeFn, cancelFn, raw, handle);
  if (rc != MPI_SUCCESS) {
    // No handle to complete through: finish the work here so that the
    // buffers are settled before the error reaches the program.
    nodusWait(raw->request);
    return Plugin::raise(raw->comm->comm(), rc);
  }
  raw->handle = *handle;
  {
    std::lock_guard<std::mutex> lock(mu_);
    ops_.emplace(*handle, std::move(op));
  }
  live_.fetch_add(1, std::memory_order_release);
  return MPI_SUCCESS;
}

PendingOp* PendingOps::find(MPI_Request r) {
  if (r == MPI_REQUEST_NULL) return nullptr;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = ops_.find(r);
  return it == ops_.end() ? nullptr : it->second.get();
}

bool PendingOps::ours(MPI_Request r) { return !empty() && find(r) != nullptr; }

bool PendingOps::anyOurs(int n, const MPI_Request* reqs) {
  if (empty() || reqs == nullptr) return false;
  for (int i = 0; i < n; ++i)
    if (find(reqs[i])) return true;
  return false;
}

// Claims `op` (one thread completes it, whoever polls first), runs what has to
// happen after nodus, then tells MPI.
bool PendingOps::complete(PendingOp* op, bool wait) {
  if (op->claimed.load(std::memory_order_acquire)) return true;
  nodusResult_t rc;
  if (wait) {
    rc = nodusWait(op->request);
  } else {
    int done = 0;
    rc = nodusTest(op->request, &done);
    if (rc == nodusSuccess && !done) return false;
  }
  if (op->claimed.exchange(true, std::memory_order_acq_rel)) return true;
  if (rc == nodusSuccess) {
    if (op->finish) op->finish();
  } else {
    op->error = MPI_ERR_OTHER;
    if (Plugin* p = Plugin::get()) p->requestFailed(op->coll, rc, nodusGetLastError(op->comm->nodus()));
  }
  op->scratch = ScratchPool::Lease();  // the buffer is free for the next call now
  PMPI_Grequest_complete(op->handle);
  return true;
}

bool PendingOps::poll(MPI_Request r) {
  if (empty()) return true;
  PendingOp* op = find(r);
  return op == nullptr || complete(op, false);
}

bool PendingOps::pollAll(int n, const MPI_Request* reqs) {
  if (empty() || reqs == nullptr) return true;
  bool all = true;
  for (int i = 0; i < n; ++i)
    if (!poll(reqs[i])) all = false;
  return all;
}

void PendingOps::drain() {
  std::vector<PendingOp*> todo;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& [handle, op] : ops_)
      if (!op->claimed.load(std::memory_order_acquire)) todo.push_back(op.get());
  }
  for (PendingOp* op : todo) complete(op, true);
}

void PendingOps::forget(PendingOp* op) {
  std::unique_ptr<PendingOp> dying;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = ops_.find(op->handle);
    if (it == ops_.end()) return;
    dying = std::move(it->second);
    ops_.erase(it);
  }
  live_.fetch_sub(1, std::memory_order_acq_rel);
  // `dying` goes here, outside the lock: freeing it may destroy a nodus communicator.
}

int PendingOps::queryFn(void* extra, MPI_Status* status) {
  auto* op = static_cast<PendingOp*>(extra);
  // A collective's status carries nothing but its error: MPI's empty status.
  PMPI_Status_set_elements(status, MPI_BYTE, 0);
  PMPI_Status_set_cancelled(status, 0);
  status->MPI_SOURCE = MPI_ANY_SOURCE;
  status->MPI_TAG = MPI_ANY_TAG;
  return op->error;
}

int PendingOps::freeFn(void* extra) {
  auto* op = static_cast<PendingOp*>(extra);
  if (Plugin* p = Plugin::get()) p->pending().forget(op);
  return MPI_SUCCESS;
}

int PendingOps::cancelFn(void*, int) {
  // MPI does not allow cancelling a non-blocking collective: nothing to undo.
  return MPI_SUCCESS;
}

}  // namespace nodus::mpi
