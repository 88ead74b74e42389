#include "transports/net/verbs/reg_cache.h"

#include <utility>

namespace nodus::net::verbs {
namespace {

// A region that deregisters itself when its last holder lets go.
struct Owned final : RegCache::Region {
  Owned(uintptr_t b, uintptr_t e, void* h, std::shared_ptr<RegCache::DeregisterFn> d) : dereg(std::move(d)) {
    begin = b;
    end = e;
    handle = h;
  }
  Owned(const Owned&) = delete;
  Owned& operator=(const Owned&) = delete;
  ~Owned() { (*dereg)(handle); }
  std::shared_ptr<RegCache::DeregisterFn> dereg;
};

}  // namespace

RegCache::RegCache(size_t capacity, size_t pageBytes, RegisterFn reg, DeregisterFn dereg)
    : capacity_(capacity == 0 ? 1 : capacity),
      pageMask_(static_cast<uintptr_t>(pageBytes) - 1),
      reg_(std::move(reg)),
      dereg_(std::make_shared<DeregisterFn>(std::move(dereg))) {}

RegCache::~RegCache() { lru_.clear(); }

Status RegCache::get(const void* addr, size_t bytes, std::shared_ptr<const Region>* out) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(addr);
  if (bytes == 0) bytes = 1;  // an empty buffer still needs a key: its page's
  if (a + bytes < a) return makeError(nodusInvalidArgument, "verbs: a buffer of %zu bytes at %p wraps the address space", bytes, addr);
  const uintptr_t begin = a & ~pageMask_;
  const uintptr_t end = (a + bytes + pageMask_) & ~pageMask_;
  for (auto it = lru_.begin(); it != lru_.end(); ++it) {
    if ((*it)->begin <= begin && end <= (*it)->end) {
      ++hits_;
      lru_.splice(lru_.begin(), lru_, it);
      *out = lru_.front();
      return Status::ok();
    }
  }
  ++misses_;
  void* handle = nullptr;
  NODUS_TRY(reg_(reinterpret_cast<void*>(begin), end - begin, &handle));
  std::shared_ptr<const Region> region = std::make_shared<const Owned>(begin, end, handle, dereg_);
  lru_.push_front(region);
  while (lru_.size() > capacity_) {
    lru_.pop_back();
    ++evictions_;
  }
  *out = std::move(region);
  return Status::ok();
}

void RegCache::invalidate(const void* addr, size_t bytes) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(addr);
  const uintptr_t end = a + (bytes == 0 ? 1 : bytes);
  lru_.remove_if([&](const std::shared_ptr<const Region>& r) { return r->begin < end && a < r->end; });
}

}  // namespace nodus::net::verbs
