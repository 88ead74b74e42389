#include "plan/verifier.h"

#include <deque>
#include <map>
#include <memory>
#include <unordered_map>

namespace nodus {
namespace {

// A set of ranks as sorted, disjoint half-open intervals: partial results of
// ring-like algorithms are a handful of intervals, whatever the rank count.
struct RankSet {
  std::vector<std::pair<int, int>> iv;
};
using SetPtr = std::shared_ptr<const RankSet>;

bool disjoint(const RankSet& a, const RankSet& b) {
  size_t i = 0, j = 0;
  while (i < a.iv.size() && j < b.iv.size()) {
    if (a.iv[i].second <= b.iv[j].first) ++i;
    else if (b.iv[j].second <= a.iv[i].first) ++j;
    else return false;
  }
  return true;
}

SetPtr unite(const RankSet& a, const RankSet& b) {
  std::vector<std::pair<int, int>> all;
  all.reserve(a.iv.size() + b.iv.size());
  size_t i = 0, j = 0;
  while (i < a.iv.size() || j < b.iv.size()) {
    if (j == b.iv.size() || (i < a.iv.size() && a.iv[i].first < b.iv[j].first)) all.push_back(a.iv[i++]);
    else all.push_back(b.iv[j++]);
  }
  auto out = std::make_shared<RankSet>();
  for (auto& x : all) {
    if (!out->iv.empty() && out->iv.back().second >= x.first)
      out->iv.back().second = std::max(out->iv.back().second, x.second);
    else
      out->iv.push_back(x);
  }
  return out;
}

std::string setText(const SetPtr& s) {
  if (!s) return "undefined";
  std::string t = "{";
  for (auto& x : s->iv) {
    if (t.size() > 1) t += ",";
    t += std::to_string(x.first);
    if (x.second - x.first > 1) t += ".." + std::to_string(x.second - 1);
  }
  return t + "}";
}

// `len` elements; element i holds source element `src + i` combined over `set`.
struct Piece {
  uint64_t len = 0;
  SetPtr set;  // null: never written (garbage)
  int64_t src = 0;
  bool avg = false;
};
using Pieces = std::vector<Piece>;

class Memory {
 public:
  explicit Memory(uint64_t size) : size_(size) {
    if (size > 0) segs_[0] = Piece{size, nullptr, 0, false};
  }
  uint64_t size() const { return size_; }
  void fill(uint64_t off, uint64_t n, SetPtr set, int64_t src) { write(off, {Piece{n, std::move(set), src, false}}); }
  Pieces read(uint64_t off, uint64_t n) {
    split(off);
    split(off + n);
    Pieces out;
    for (auto it = segs_.find(off); it != segs_.end() && it->first < off + n; ++it) out.push_back(it->second);
    return out;
  }
  void write(uint64_t off, const Pieces& ps) {
    uint64_t n = 0;
    for (auto& p : ps) n += p.len;
    split(off);
    split(off + n);
    segs_.erase(segs_.lower_bound(off), segs_.lower_bound(off + n));
    uint64_t at = off;
    for (auto& p : ps) {
      if (p.len) segs_[at] = p;
      at += p.len;
    }
  }

 private:
  void split(uint64_t pos) {
    if (pos == 0 || pos >= size_) return;
    auto it = segs_.upper_bound(pos);
    --it;
    if (it->first == pos) return;
    Piece& left = it->second;
    uint64_t cut = pos - it->first;
    Piece right{left.len - cut, left.set, left.src + static_cast<int64_t>(cut), left.avg};
    left.len = cut;
    segs_[pos] = right;
  }
  uint64_t size_;
  std::map<uint64_t, Piece> segs_;
};

struct RankState {
  Memory user{0};
  Memory scratch{0};
  uint64_t sendBase = 0, sendSize = 0, recvBase = 0, recvSize = 0;
  PlanCursor at;
  size_t step = 0;  // = at.step, or past the end when done
  uint64_t slice = 0;
};

class Simulation {
 public:
  Simulation(const VerifyCase& c, const VerifyLimits& limits, const std::vector<Plan>& plans)
      : c_(c), plans_(plans), slots_(limits.slots ? limits.slots : 1), roundSlices_(limits.roundSlices) {
    sliceElems_ = std::max<uint64_t>(1, limits.sliceBytes / c.typeSize);
  }

  Status run() {
    const int p = c_.nranks;
    if (static_cast<int>(plans_.size()) != p) return makeError(nodusInternalError, "expected %d plans", p);
    ranks_.resize(p);
    for (int r = 0; r < p; ++r) {
      layout(r);
      RankState& s = ranks_[r];
      s.at.start(plans_[r], sliceElems_, roundSlices_);
      sync(s, plans_[r]);
    }
    // Worklist: a rank runs again only when a message arrives for it or a
    // slot it waits for frees up, so the cost is the plans' total size.
    std::vector<int> work;
    std::vector<char> queued(p, 1);
    for (int r = p - 1; r >= 0; --r) work.push_back(r);
    wake_ = [&](int r) {
      if (!queued[r]) queued[r] = 1, work.push_back(r);
    };
    while (!work.empty()) {
      const int r = work.back();
      work.pop_back();
      queued[r] = 0;
      for (;;) {
        bool moved = false;
        NODUS_TRY(runSlice(r, &moved));
        if (!moved) break;
      }
    }
    for (int r = 0; r < p; ++r)
      if (ranks_[r].step < plans_[r].steps.size()) return deadlock();
    for (auto& [key, q] : queues_)
      if (!q.empty())
        return makeError(nodusInternalError, "%zu message(s) from rank %d to rank %d never received",
                         q.size(), static_cast<int>(key / p), static_cast<int>(key % p));
    for (int r = 0; r < p; ++r) NODUS_TRY(checkOutput(r));
    return Status::ok();
  }

 private:
  // Where the user buffers sit in one address space, aliased as in-place calls alias them.
  void layout(int r) {
    RankState& s = ranks_[r];
    const PlanKey& k = plans_[r].key;
    const uint64_t sc = sendElems(k), rc = recvElems(k);
    s.sendSize = sc;
    s.recvSize = rc;
    if (c_.coll == Collective::Broadcast && r != c_.root) s.sendSize = 0;
    if (c_.coll == Collective::Reduce && r != c_.root) s.recvSize = 0;
    const int64_t shift = c_.inPlace ? inPlaceShift(k) : 0;
    if (!c_.inPlace) {
      s.sendBase = 0;
      s.recvBase = sc;
    } else if (shift >= 0) {
      s.recvBase = 0;
      s.sendBase = static_cast<uint64_t>(shift);
    } else {
      s.sendBase = 0;
      s.recvBase = static_cast<uint64_t>(-shift);
    }
    s.user = Memory(std::max(s.sendBase + s.sendSize, s.recvBase + s.recvSize));
    if (s.sendSize) {
      auto set = std::make_shared<RankSet>();
      set->iv.push_back({r, r + 1});
      s.user.fill(s.sendBase, s.sendSize, set, 0);
    }
    s.scratch = Memory(plans_[r].scratchElems);
  }

  Status locate(int r, const Range& range, uint64_t n, Memory** mem, uint64_t* off) {
    RankState& s = ranks_[r];
    uint64_t size = 0;
    switch (range.buf) {
      case Buf::Send: *mem = &s.user, *off = s.sendBase + range.offset, size = s.sendSize; break;
      case Buf::Recv: *mem = &s.user, *off = s.recvBase + range.offset, size = s.recvSize; break;
      case Buf::Scratch: *mem = &s.scratch, *off = range.offset, size = s.scratch.size(); break;
    }
    if (range.offset + n > size)
      return makeError(nodusInternalError, "rank %d: step %zu touches [%llu, %llu) of a %llu-element buffer",
                       r, s.step, static_cast<unsigned long long>(range.offset),
                       static_cast<unsigned long long>(range.offset + n), static_cast<unsigned long long>(size));
    return Status::ok();
  }

  Status readRange(int r, const Range& range, uint64_t skip, uint64_t n, Pieces* out) {
    Memory* m = nullptr;
    uint64_t off = 0;
    NODUS_TRY(locate(r, {range.buf, range.offset + skip}, n, &m, &off));
    *out = m->read(off, n);
    return Status::ok();
  }
  Status writeRange(int r, const Range& range, uint64_t skip, const Pieces& v, uint64_t n) {
    Memory* m = nullptr;
    uint64_t off = 0;
    NODUS_TRY(locate(r, {range.buf, range.offset + skip}, n, &m, &off));
    m->write(off, v);
    return Status::ok();
  }

  Status combine(int r, const Pieces& a, const Pieces& b, Pieces* out) {
    out->clear();
    size_t i = 0, j = 0;
    uint64_t ai = 0, bj = 0;  // consumed within a[i], b[j]
    while (i < a.size() && j < b.size()) {
      const Piece& x = a[i];
      const Piece& y = b[j];
      uint64_t len = std::min(x.len - ai, y.len - bj);
      if (!x.set || !y.set)
        return makeError(nodusInternalError, "rank %d step %zu: reduces an element never written", r, ranks_[r].step);
      int64_t xs = x.src + static_cast<int64_t>(ai), ys = y.src + static_cast<int64_t>(bj);
      if (xs != ys)
        return makeError(nodusInternalError, "rank %d step %zu: reduces source element %lld with %lld", r,
                         ranks_[r].step, static_cast<long long>(xs), static_cast<long long>(ys));
      if (!disjoint(*x.set, *y.set))
        return makeError(nodusInternalError, "rank %d step %zu: contributions %s and %s overlap (counted twice)", r,
                         ranks_[r].step, setText(x.set).c_str(), setText(y.set).c_str());
      if (x.avg || y.avg)
        return makeError(nodusInternalError, "rank %d step %zu: reduces a value already averaged", r, ranks_[r].step);
      out->push_back(Piece{len, unite(*x.set, *y.set), xs, false});
      ai += len, bj += len;
      if (ai == x.len) ++i, ai = 0;
      if (bj == y.len) ++j, bj = 0;
    }
    return Status::ok();
  }

  Status finalize(int r, Pieces& v) {
    for (auto& p : v) {
      if (p.avg) return makeError(nodusInternalError, "rank %d step %zu: averages twice", r, ranks_[r].step);
      p.avg = true;
    }
    return Status::ok();
  }

  std::deque<Pieces>& queue(int from, int to) {
    return queues_[static_cast<uint64_t>(from) * c_.nranks + to];
  }

  uint64_t slicesOf(const Step& st) const { return (st.count + sliceElems_ - 1) / sliceElems_; }

  // Plans run in the executor's order (PlanCursor): phase by phase, slice-major within a phase.
  void sync(RankState& s, const Plan& plan) {
    s.step = s.at.done ? plan.steps.size() : s.at.step;
    s.slice = s.at.slice;
  }
  void advance(int r) {
    RankState& s = ranks_[r];
    s.at.next(plans_[r], sliceElems_);
    sync(s, plans_[r]);
  }

  Status runSlice(int r, bool* moved) {
    *moved = false;
    RankState& s = ranks_[r];
    const Plan& plan = plans_[r];
    if (s.step >= plan.steps.size()) return Status::ok();
    const Step& st = plan.steps[s.step];
    const int p = c_.nranks;
    const uint64_t off = s.slice * sliceElems_;
    const uint64_t n = std::min(sliceElems_, st.count - off);
    std::deque<Pieces>* in = nullptr;
    std::deque<Pieces>* out = nullptr;
    if (opReceives(st.op)) {
      if (st.recvPeer < 0 || st.recvPeer >= p || st.recvPeer == r)
        return makeError(nodusInternalError, "rank %d step %zu: bad recv peer %d", r, s.step, st.recvPeer);
      in = &queue(st.recvPeer, r);
      if (in->empty()) return Status::ok();
    }
    if (opSends(st.op)) {
      if (st.sendPeer < 0 || st.sendPeer >= p || st.sendPeer == r)
        return makeError(nodusInternalError, "rank %d step %zu: bad send peer %d", r, s.step, st.sendPeer);
      out = &queue(r, st.sendPeer);
      if (out->size() >= slots_) return Status::ok();
    }
    Pieces msg;
    if (in) {
      msg = std::move(in->front());
      in->pop_front();
      wake_(st.recvPeer);
      uint64_t got = 0;
      for (auto& x : msg) got += x.len;
      if (got != n)
        return makeError(nodusInternalError, "rank %d step %zu: expects %llu elements from rank %d, got %llu", r,
                         s.step, static_cast<unsigned long long>(n), st.recvPeer, static_cast<unsigned long long>(got));
    }
    Pieces a, v;
    switch (st.op) {
      case Op::Send:
        NODUS_TRY(readRange(r, st.src, off, n, &v));
        break;
      case Op::Recv:
        v = std::move(msg);
        if (st.finalAvg) NODUS_TRY(finalize(r, v));
        NODUS_TRY(writeRange(r, st.dst, off, v, n));
        break;
      case Op::RecvReduceSend:
        NODUS_TRY(readRange(r, st.src, off, n, &a));
        NODUS_TRY(combine(r, msg, a, &v));
        break;
      case Op::RecvReduceCopy:
      case Op::RecvReduceCopySend:
        NODUS_TRY(readRange(r, st.src, off, n, &a));
        NODUS_TRY(combine(r, msg, a, &v));
        if (st.finalAvg) NODUS_TRY(finalize(r, v));
        NODUS_TRY(writeRange(r, st.dst, off, v, n));
        break;
      case Op::RecvCopySend:
        v = std::move(msg);
        NODUS_TRY(writeRange(r, st.dst, off, v, n));
        break;
      case Op::Copy:
        NODUS_TRY(readRange(r, st.src, off, n, &v));
        if (st.finalAvg) NODUS_TRY(finalize(r, v));
        NODUS_TRY(writeRange(r, st.dst, off, v, n));
        break;
      case Op::Reduce: {
        Pieces d;
        NODUS_TRY(readRange(r, st.src, off, n, &a));
        NODUS_TRY(readRange(r, st.dst, off, n, &d));
        NODUS_TRY(combine(r, d, a, &v));
        if (st.finalAvg) NODUS_TRY(finalize(r, v));
        NODUS_TRY(writeRange(r, st.dst, off, v, n));
        break;
      }
    }
    if (out) {
      out->push_back(std::move(v));
      wake_(st.sendPeer);
    }
    *moved = true;
    advance(r);
    return Status::ok();
  }

  Status deadlock() {
    std::string why;
    for (int r = 0; r < c_.nranks && why.size() < 600; ++r) {
      const RankState& s = ranks_[r];
      if (s.step >= plans_[r].steps.size()) continue;
      const Step& st = plans_[r].steps[s.step];
      why += " rank " + std::to_string(r) + " waits in step " + std::to_string(s.step) + " (" + opKindName(st.op) + ");";
    }
    return makeError(nodusInternalError, "plans deadlock with %u slot(s) per connection:%s", slots_, why.c_str());
  }

  // What element `at` of rank r's receive buffer must hold: the set of ranks
  // combined (null: nothing, never written), the source element, and up to
  // where the same rule runs on (source elements consecutive).
  struct Expect {
    SetPtr set;
    int64_t src = 0;
    uint64_t runEnd = 0;
  };
  Expect expected(int r, uint64_t at) const {
    const uint64_t n = c_.count;
    const int p = c_.nranks;
    auto one = [](int j) {
      auto s = std::make_shared<RankSet>();
      s->iv.push_back({j, j + 1});
      return SetPtr(s);
    };
    const PlanKey& k = plans_[r].key;
    const uint64_t size = recvElems(k);
    if (isBlockCollective(c_.coll)) {
      // The block from rank j that covers `at`, if one does; else the gap up to the next.
      uint64_t next = size;
      for (int j = 0; j < p; ++j) {
        const PeerBlock in = blockFrom(k, j);
        if (!in.exists || in.count == 0) continue;
        if (at >= in.offset && at < in.offset + in.count) {
          const uint64_t e = at - in.offset;
          if (c_.coll == Collective::ReduceScatterV) return {all_, static_cast<int64_t>(blockTo(k, r).offset + e), in.offset + in.count};
          return {one(j), static_cast<int64_t>(blockTo(plans_[j].key, r).offset + e), in.offset + in.count};
        }
        if (in.offset > at) next = std::min(next, in.offset);
      }
      return {nullptr, 0, next};
    }
    switch (c_.coll) {
      case Collective::AllGather: {
        const int j = static_cast<int>(at / n);
        return {one(j), static_cast<int64_t>(at - j * n), (j + 1) * n};
      }
      case Collective::ReduceScatter: return {all_, static_cast<int64_t>(r * n + at), size};
      case Collective::Broadcast: return {one(c_.root), static_cast<int64_t>(at), size};
      default: return {all_, static_cast<int64_t>(at), size};
    }
  }

  Status checkOutput(int r) {
    RankState& s = ranks_[r];
    const bool reduces = collectiveReduces(c_.coll);
    if (c_.coll == Collective::Reduce && r != c_.root) return Status::ok();
    const uint64_t size = recvElems(plans_[r].key);
    // In place, a block collective's receive buffer holds the send buffer's
    // blocks before the call: what no block lands on keeps them. Out of
    // place nothing may be written there.
    const bool gapsKeepInput = c_.inPlace && isBlockCollective(c_.coll);
    Pieces got = s.user.read(s.recvBase, size);
    uint64_t pos = 0;
    for (const Piece& x : got) {
      for (uint64_t e = 0; e < x.len;) {
        const uint64_t at = pos + e;
        const Expect want = expected(r, at);
        const uint64_t len = std::min(x.len - e, want.runEnd - at);
        const int64_t gotSrc = x.src + static_cast<int64_t>(e);
        bool ok;
        if (!want.set) ok = !x.set || (gapsKeepInput && x.set->iv == std::vector<std::pair<int, int>>{{r, r + 1}} && !x.avg);
        else ok = x.set && x.set->iv == want.set->iv && gotSrc == want.src && x.avg == reduces;
        if (!ok)
          return makeError(nodusInternalError,
                           "rank %d: output element %llu holds %s of source %lld%s, expected %s of source %lld%s", r,
                           static_cast<unsigned long long>(at), setText(x.set).c_str(), static_cast<long long>(gotSrc),
                           x.avg ? " (averaged)" : "", want.set ? setText(want.set).c_str() : "nothing (a gap)",
                           static_cast<long long>(want.src), reduces ? " (averaged)" : "");
        e += len;
      }
      pos += x.len;
    }
    return Status::ok();
  }

  const VerifyCase& c_;
  const std::vector<Plan>& plans_;
  uint32_t slots_;
  uint32_t roundSlices_ = 1;
  uint64_t sliceElems_ = 1;
  std::vector<RankState> ranks_;
  SetPtr all_ = [this] {
    auto s = std::make_shared<RankSet>();
    s->iv.push_back({0, c_.nranks});
    return SetPtr(s);
  }();
  std::unordered_map<uint64_t, std::deque<Pieces>> queues_;
  std::function<void(int)> wake_;
};

}  // namespace

PlanKey VerifyCase::keyOf(int r) const {
  PlanKey key{coll, nranks, r, count, typeSize, root, inPlace};
  if (!blocks.empty()) key.blocks = blocks[static_cast<size_t>(r)];
  return key;
}

Status verifyPlans(const VerifyCase& c, const VerifyLimits& limits, const std::vector<Plan>& plans) {
  Simulation sim(c, limits, plans);
  return sim.run();
}

}  // namespace nodus
