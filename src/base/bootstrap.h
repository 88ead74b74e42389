// Bootstrap: the out-of-band channel ranks use to find each other and to
// exchange connection information before any transport exists.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <vector>

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
  // The same on every rank of this bootstrap and different from every other
  // bootstrap of the job: a hash of the secret for the first, the tag it was
  // made with for a subset. Subsets mix it into their tags.
  uint64_t tag() const { return tag_; }
  // A bootstrap over some of these ranks, made from what this one already
  // has (no unique id, no root): `members` are ranks of this bootstrap in the
  // new one's order and include this rank, which becomes its index there.
  // Collective over the members only, each passing the same members and the
  // same `tag` (unique among this job's subsets: it tells concurrent ones
  // apart); members that disagree fail within the timeout. What nodusCommSplit
  // and nodusCommCreateGroup build their communicators' bootstraps with.
  virtual Status subset(const std::vector<int>& members, uint64_t tag, std::unique_ptr<Bootstrap>* out) = 0;

 protected:
  Bootstrap(int rank, int nranks) : rank_(rank), nranks_(nranks) {}
  // After the members joined: checks that every one passed the same list.
  static Status checkMembers(Bootstrap& child, const std::vector<int>& members, uint64_t tag);
  JobSecret secret_{};
  uint64_t tag_ = 0;

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
// `timeout` bounds each exchange (a rank that never comes fails the others).
std::unique_ptr<Bootstrap> inProcessBootstrap(std::shared_ptr<InProcessGroup> group, int rank,
                                              std::chrono::milliseconds timeout);

// Mixes values into a tag (splitmix64 of each in turn).
uint64_t mixTag(uint64_t tag, uint64_t value);
// The tag of a job's first bootstrap: a hash of its secret.
uint64_t tagOfSecret(const JobSecret& secret);

}  // namespace nodus
