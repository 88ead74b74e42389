// Communicators made from communicators (nodusCommSplit,
// nodusCommCreateGroup): the child's bootstrap is a subset of the parent's
// (Bootstrap::subset: no unique id, no root), its placement, hosts, NUMA
// nodes and fabric are the parent's (InitOptions::parent), and it prices and
// plans its own layout.
#include <algorithm>
#include <cstring>

#include "base/log.h"
#include "core/comm.h"

namespace nodus {

namespace {

// What each rank says in a split: its colour and key, and whether its own
// settings for the child could be made.
struct SplitRequest {
  int32_t color = 0;
  int32_t key = 0;
  int32_t settingsBad = 0;
  int32_t pad = 0;
};

}  // namespace

Status Comm::makeChild(const std::vector<int>& members, uint64_t tag, Settings settings, std::unique_ptr<Comm>* out) {
  InitOptions opts;
  opts.settings = std::move(settings);
  opts.parent = this;
  opts.parentRanks = members;
  // Thread-safe without bootstrapMu_: a subset uses none of the parent's exchanges.
  NODUS_TRY(bootstrap_->subset(members, tag, &opts.bootstrap));
  return Comm::create(std::move(opts), out);
}

Status Comm::split(int color, int key, Settings settings, const Status& settingsError, std::unique_ptr<Comm>* out) {
  out->reset();
  std::vector<SplitRequest> all(static_cast<size_t>(nranks_));
  SplitRequest& mine = all[static_cast<size_t>(rank_)];
  mine.color = color;
  mine.key = key;
  mine.settingsBad = settingsError.isOk() ? 0 : 1;
  uint64_t seq = 0;
  {
    std::lock_guard<std::mutex> lock(bootstrapMu_);
    NODUS_TRY(bootstrap_->allGather(all.data(), sizeof(SplitRequest)));
    seq = ++splits_;
  }
  // Every rank checks every request alike, so a bad one fails every rank.
  for (int r = 0; r < nranks_; ++r) {
    const SplitRequest& q = all[static_cast<size_t>(r)];
    if (q.color < kNoColor)
      return makeError(nodusInvalidArgument,
                       "rank %d passed colour %d to nodusCommSplit: a colour is >= 0, or NODUS_SPLIT_NOCOLOR (-1) for "
                       "no new communicator",
                       r, q.color);
    if (q.settingsBad)
      return r == rank_ ? settingsError
                        : makeError(nodusInvalidArgument, "rank %d's nodusConfig_t for nodusCommSplit was refused (its "
                                    "error names the field)", r);
  }
  if (color == kNoColor) return Status::ok();
  std::vector<int> members;
  for (int r = 0; r < nranks_; ++r)
    if (all[static_cast<size_t>(r)].color == color) members.push_back(r);
  std::stable_sort(members.begin(), members.end(), [&](int a, int b) {
    return all[static_cast<size_t>(a)].key < all[static_cast<size_t>(b)].key;  // ties: rank here (stable)
  });
  const uint64_t tag = mixTag(mixTag(mixTag(bootstrap_->tag(), 1), seq), static_cast<uint64_t>(color));
  Status s = makeChild(members, tag, std::move(settings), out);
  if (!s.isOk()) return Status(s.code(), "the communicator of colour " + std::to_string(color) + ": " + s.message());
  return Status::ok();
}

Status Comm::createGroup(const std::vector<int>& ranks, Settings settings, std::unique_ptr<Comm>* out) {
  out->reset();
  // The members count the groups made of their list: a list's n-th group
  // has the same tag on every member, whatever else each made in between.
  uint64_t list = mixTag(bootstrap_->tag(), 2);
  for (int r : ranks) list = mixTag(list, static_cast<uint64_t>(r));
  uint64_t seq = 0;
  {
    std::lock_guard<std::mutex> lock(bootstrapMu_);
    seq = ++groupsOfList_[list];
  }
  Status s = makeChild(ranks, mixTag(list, seq), std::move(settings), out);
  if (!s.isOk()) return Status(s.code(), "nodusCommCreateGroup of " + std::to_string(ranks.size()) + " ranks: " + s.message());
  return Status::ok();
}

}  // namespace nodus
