// Bootstrap: the out-of-band channel ranks use to find each other and to
// exchange connection information before any transport exists.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <memory>

#include "base/settings.h"
#include "base/status.h"
#include "nodus/nodus.h"

namespace nodus {

// The job's 128-bit secret: every connection between its ranks presents it.
using JobSecret = std::array<uint8_t, 16>;

class Bootstrap {
 public:
  virtual ~Bootstrap() = default;
  int rank() const { return rank_; }
  int nranks() const { return nranks_; }
  // data holds nranks blocks of `bytes`; block rank() is ours on entry, all
  // blocks are everyone's on return.
  virtual Status allGather(void* data, size_t bytes) = 0;
  Status barrier();
  // Known to the ranks of this job only (the unique id's, or a random one
  // per in-process group): transports use it to refuse strangers.
  const JobSecret& secret() const { return secret_; }

 protected:
  Bootstrap(int rank, int nranks) : rank_(rank), nranks_(nranks) {}
  JobSecret secret_{};

 private:
  int rank_, nranks_;
};

// Unique id for sockets: the root's address and a 128-bit secret. The root
// (a thread of the process that made the id) gathers every rank's address.
Status createUniqueId(const Settings& settings, nodusUniqueId* id);
// Joins the job `id` names as `rank` of `nranks`, via TCP, within `timeout`.
Status socketBootstrap(const nodusUniqueId& id, int rank, int nranks, std::chrono::milliseconds timeout,
                       std::unique_ptr<Bootstrap>* out);

// Ranks that are threads of this process (nodusCommInitAll).
class InProcessGroup;
std::shared_ptr<InProcessGroup> makeInProcessGroup(int nranks);
std::unique_ptr<Bootstrap> inProcessBootstrap(std::shared_ptr<InProcessGroup> group, int rank);

}  // namespace nodus
