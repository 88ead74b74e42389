// Bootstrap: the out-of-band channel ranks use to find each other and to
// exchange connection information before any transport exists.
#pragma once

#include <chrono>
#include <memory>

#include "core/status.h"
#include "nodus/nodus.h"

namespace nodus {

class Bootstrap {
 public:
  virtual ~Bootstrap() = default;
  int rank() const { return rank_; }
  int nranks() const { return nranks_; }
  // data holds nranks blocks of `bytes`; block rank() is ours on entry, all
  // blocks are everyone's on return.
  virtual Status allGather(void* data, size_t bytes) = 0;
  Status barrier();

 protected:
  Bootstrap(int rank, int nranks) : rank_(rank), nranks_(nranks) {}

 private:
  int rank_, nranks_;
};

// Unique id for sockets: the root's address and a 128-bit secret. The root
// (a thread of the process that made the id) gathers every rank's address.
Status createUniqueId(nodusUniqueId* id);
// Joins the job `id` names as `rank` of `nranks`, via TCP, within `timeout`.
Status socketBootstrap(const nodusUniqueId& id, int rank, int nranks, std::chrono::milliseconds timeout,
                       std::unique_ptr<Bootstrap>* out);

// Ranks that are threads of this process (nodusCommInitAll).
class InProcessGroup;
std::shared_ptr<InProcessGroup> makeInProcessGroup(int nranks);
std::unique_ptr<Bootstrap> inProcessBootstrap(std::shared_ptr<InProcessGroup> group, int rank);

}  // namespace nodus
