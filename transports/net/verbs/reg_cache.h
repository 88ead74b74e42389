// RegCache: memory registrations kept for reuse. Registering memory with an
// RDMA device pins its pages and costs tens of microseconds per MiB, so a
// buffer used again (a slot ring, a user buffer of a repeated collective)
// must not pay it again.
//
// Pure logic, no verbs: the register / deregister calls are functions given
// at construction (the verbs net passes ibv_reg_mr / ibv_dereg_mr, the tests
// a fake). Ranges are widened to whole pages, a request hits when one cached
// region covers it, and the least recently used region goes when more than
// `capacity` are cached. A region handed out stays registered while any
// holder keeps it, even after eviction: eviction only drops the cache's
// reference. Not thread-safe: one per net, used by one thread at a time
// (callers serialise).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <list>
#include <memory>

#include "base/status.h"

namespace nodus::net::verbs {

class RegCache {
 public:
  struct Region {
    uintptr_t begin = 0, end = 0;  // page-aligned [begin, end)
    void* handle = nullptr;        // what register returned (an ibv_mr*)
  };
  using RegisterFn = std::function<Status(void* addr, size_t bytes, void** handle)>;
  using DeregisterFn = std::function<void(void* handle)>;

  RegCache(size_t capacity, size_t pageBytes, RegisterFn reg, DeregisterFn dereg);
  RegCache(const RegCache&) = delete;
  RegCache& operator=(const RegCache&) = delete;
  ~RegCache();  // drops the cache's references; regions still held live on

  // A region covering [addr, addr + bytes): cached, or registered now.
  Status get(const void* addr, size_t bytes, std::shared_ptr<const Region>* out);
  // Drops every cached region overlapping the range (memory about to be
  // unmapped: its registration must not be found again).
  void invalidate(const void* addr, size_t bytes);

  uint64_t hits() const { return hits_; }
  uint64_t misses() const { return misses_; }
  uint64_t evictions() const { return evictions_; }
  size_t size() const { return lru_.size(); }

 private:
  size_t capacity_;
  uintptr_t pageMask_;
  RegisterFn reg_;
  // Shared with every region's deleter, so a region outliving the cache
  // still deregisters.
  std::shared_ptr<DeregisterFn> dereg_;
  std::list<std::shared_ptr<const Region>> lru_;  // most recently used first
  uint64_t hits_ = 0, misses_ = 0, evictions_ = 0;
};

}  // namespace nodus::net::verbs
