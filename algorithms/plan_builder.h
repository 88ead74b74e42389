// Small helpers algorithms share when writing plans.
#pragma once

#include <algorithm>

#include "plan/plan.h"

namespace nodus {

// Block c of n elements split into p blocks whose sizes differ by at most one.
inline uint64_t blockBegin(uint64_t c, uint64_t n, uint64_t p) {
  return c * (n / p) + std::min(c, n % p);
}
inline uint64_t blockSize(uint64_t c, uint64_t n, uint64_t p) {
  return n / p + (c < n % p ? 1 : 0);
}
inline int modRank(int64_t x, int p) { return static_cast<int>(((x % p) + p) % p); }

// Appends steps, dropping the ones that move nothing: every rank drops the
// same ones, so message order between peers stays matched. With keepEmpty it
// drops nothing, for a builder that interleaves several such lists step by
// step (channels) and must pair step s of one rank with step s of another
// before any is dropped; it passes each step on through step().
class PlanBuilder {
 public:
  explicit PlanBuilder(Plan& plan, bool keepEmpty = false) : plan_(plan), keepEmpty_(keepEmpty) {}
  void send(int to, Range src, uint64_t n) { add({Op::Send, -1, to, src, {}, n, false}); }
  void recv(int from, Range dst, uint64_t n, bool avg = false) {
    add({Op::Recv, from, -1, {}, dst, n, avg});
  }
  void recvReduceSend(int from, int to, Range src, uint64_t n) {
    add({Op::RecvReduceSend, from, to, src, {}, n, false});
  }
  void recvReduceCopy(int from, Range src, Range dst, uint64_t n, bool avg = false, bool receivedLast = false) {
    Step s{Op::RecvReduceCopy, from, -1, src, dst, n, avg};
    s.receivedLast = receivedLast;
    add(s);
  }
  void recvReduceCopySend(int from, int to, Range src, Range dst, uint64_t n, bool avg = false) {
    add({Op::RecvReduceCopySend, from, to, src, dst, n, avg});
  }
  void recvCopySend(int from, int to, Range dst, uint64_t n) {
    add({Op::RecvCopySend, from, to, {}, dst, n, false});
  }
  void copy(Range src, Range dst, uint64_t n, bool avg = false) { step({Op::Copy, -1, -1, src, dst, n, avg}); }
  void reduce(Range src, Range dst, uint64_t n, bool avg = false) {
    add({Op::Reduce, -1, -1, src, dst, n, avg});
  }
  // The steps that follow start a new phase: they run only once every slice
  // of the steps before is done (they need whole ranges those write).
  void phase() { newPhase_ = true; }
  // Any step, as the calls above add it (a copy of a range onto itself is none).
  void step(const Step& s) {
    if (!keepEmpty_ && s.op == Op::Copy && !s.finalAvg && s.src.buf == s.dst.buf && s.src.offset == s.dst.offset)
      return;
    add(s);
  }

 private:
  void add(const Step& s) {
    if (s.count == 0 && !keepEmpty_) return;
    if (newPhase_ && !plan_.steps.empty()) plan_.phaseStarts.push_back(static_cast<uint32_t>(plan_.steps.size()));
    newPhase_ = false;
    plan_.steps.push_back(s);
  }
  Plan& plan_;
  bool keepEmpty_ = false;
  bool newPhase_ = false;
};

// The single-rank case of every collective: a copy unless in place.
inline void buildSelf(const PlanKey& k, Plan& plan) {
  PlanBuilder b(plan);
  if (k.coll == Collective::Send || k.coll == Collective::Recv) return;
  b.copy({Buf::Send, 0}, {Buf::Recv, 0}, k.count, collectiveReduces(k.coll));
}

}  // namespace nodus
