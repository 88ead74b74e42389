#include "plan/plan.h"

#include <algorithm>

#include <sstream>

namespace nodus {

const char* collectiveName(Collective c) {
  switch (c) {
    case Collective::AllReduce: return "AllReduce";
    case Collective::AllGather: return "AllGather";
    case Collective::ReduceScatter: return "ReduceScatter";
    case Collective::Broadcast: return "Broadcast";
    case Collective::Reduce: return "Reduce";
    case Collective::Send: return "Send";
    case Collective::Recv: return "Recv";
    case Collective::AllToAll: return "AllToAll";
    case Collective::AllToAllV: return "AllToAllV";
    case Collective::Gather: return "Gather";
    case Collective::Scatter: return "Scatter";
    case Collective::AllGatherV: return "AllGatherV";
    case Collective::ReduceScatterV: return "ReduceScatterV";
  }
  return "?";
}

const char* opKindName(Op op) {
  switch (op) {
    case Op::Send: return "send";
    case Op::Recv: return "recv";
    case Op::RecvReduceSend: return "recvReduceSend";
    case Op::RecvReduceCopy: return "recvReduceCopy";
    case Op::RecvReduceCopySend: return "recvReduceCopySend";
    case Op::RecvCopySend: return "recvCopySend";
    case Op::Copy: return "copy";
    case Op::Reduce: return "reduce";
  }
  return "?";
}

namespace {

uint64_t at(const PlanKey& k, int array, int peer) {
  return k.blocks[static_cast<size_t>(array) * static_cast<size_t>(k.nranks) + static_cast<size_t>(peer)];
}
// ReduceScatterV: where block `peer` starts in the send buffer.
uint64_t prefixOf(const PlanKey& k, int peer) {
  uint64_t sum = 0;
  for (int j = 0; j < peer; ++j) sum += at(k, 0, j);
  return sum;
}
// The last element a set of blocks reaches, plus one.
uint64_t extent(const PlanKey& k, PeerBlock (*of)(const PlanKey&, int)) {
  uint64_t end = 0;
  for (int j = 0; j < k.nranks; ++j) {
    const PeerBlock b = of(k, j);
    if (b.exists) end = std::max(end, b.offset + b.count);
  }
  return end;
}

}  // namespace

PeerBlock blockTo(const PlanKey& k, int peer) {
  const uint64_t n = k.count, j = static_cast<uint64_t>(peer);
  switch (k.coll) {
    case Collective::AllToAll: return {true, j * n, n};
    case Collective::AllToAllV: return {true, at(k, 1, peer), at(k, 0, peer)};
    case Collective::Gather: return {peer == k.root, 0, n};
    case Collective::Scatter: return {k.rank == k.root, j * n, n};
    case Collective::AllGatherV: return {true, 0, n};
    case Collective::ReduceScatterV: return {true, prefixOf(k, peer), at(k, 0, peer)};
    default: return {};
  }
}

PeerBlock blockFrom(const PlanKey& k, int peer) {
  const uint64_t n = k.count, j = static_cast<uint64_t>(peer);
  switch (k.coll) {
    case Collective::AllToAll: return {true, j * n, n};
    case Collective::AllToAllV: return {true, at(k, 3, peer), at(k, 2, peer)};
    case Collective::Gather: return {k.rank == k.root, j * n, n};
    case Collective::Scatter: return {peer == k.root, 0, n};
    case Collective::AllGatherV: return {true, at(k, 1, peer), at(k, 0, peer)};
    case Collective::ReduceScatterV: return {true, 0, at(k, 0, k.rank)};
    default: return {};
  }
}

int64_t inPlaceShift(const PlanKey& k) {
  const int64_t share = static_cast<int64_t>(k.count) * k.rank;
  switch (k.coll) {
    case Collective::AllGather: return share;        // send = recv + rank * count
    case Collective::ReduceScatter: return -share;  // recv = send + rank * count
    case Collective::Gather: return static_cast<int64_t>(k.count) * k.root;
    case Collective::Scatter: return -static_cast<int64_t>(k.count) * k.root;
    case Collective::AllGatherV: return static_cast<int64_t>(at(k, 1, k.rank));
    case Collective::ReduceScatterV: return -static_cast<int64_t>(prefixOf(k, k.rank));
    default: return 0;
  }
}

uint64_t sendElems(const PlanKey& k) {
  if (isBlockCollective(k.coll)) return extent(k, blockTo);
  switch (k.coll) {
    case Collective::ReduceScatter: return k.count * static_cast<uint64_t>(k.nranks);
    case Collective::Recv: return 0;
    default: return k.count;
  }
}

uint64_t recvElems(const PlanKey& k) {
  if (isBlockCollective(k.coll)) return extent(k, blockFrom);
  switch (k.coll) {
    case Collective::AllGather: return k.count * static_cast<uint64_t>(k.nranks);
    case Collective::Send: return 0;
    default: return k.count;
  }
}

static const char* bufName(Buf b) {
  switch (b) {
    case Buf::Send: return "send";
    case Buf::Recv: return "recv";
    case Buf::Scratch: return "scratch";
  }
  return "?";
}

std::string describe(const Plan& plan) {
  std::ostringstream os;
  os << collectiveName(plan.key.coll) << " algo=" << plan.algorithm << " rank=" << plan.key.rank
     << "/" << plan.key.nranks << " count=" << plan.key.count
     << (plan.key.inPlace ? " in-place" : "") << "\n";
  for (const Step& s : plan.steps) {
    os << "  " << opKindName(s.op) << " n=" << s.count;
    if (opReceives(s.op)) os << " from=" << s.recvPeer;
    if (opSends(s.op)) os << " to=" << s.sendPeer;
    if (s.op != Op::Recv && s.op != Op::RecvCopySend)
      os << " src=" << bufName(s.src.buf) << "+" << s.src.offset;
    if (s.op != Op::Send && s.op != Op::RecvReduceSend)
      os << " dst=" << bufName(s.dst.buf) << "+" << s.dst.offset;
    if (s.finalAvg) os << " avg";
    if (s.receivedLast) os << " received-last";
    os << "\n";
  }
  return os.str();
}

void PlanCursor::enterPhase(const Plan& p, uint64_t sliceElems) {
  const size_t begin = phase == 0 ? 0 : p.phaseStarts[phase - 1];
  phaseEnd_ = phase < p.phaseStarts.size() ? p.phaseStarts[phase] : p.steps.size();
  phaseSlices_ = 0;
  for (size_t i = begin; i < phaseEnd_; ++i)
    phaseSlices_ = std::max(phaseSlices_, (p.steps[i].count + sliceElems - 1) / sliceElems);
  step = begin;
  slice = 0;
  roundFirst_ = 0;
}

void PlanCursor::start(const Plan& p, uint64_t sliceElems, uint32_t group) {
  phase = 0;
  done = false;
  group_ = std::max<uint32_t>(1, group);
  enterPhase(p, sliceElems);
  settle(p, sliceElems);
}

void PlanCursor::next(const Plan& p, uint64_t sliceElems) {
  if (++slice < roundFirst_ + group_ && slice * sliceElems < p.steps[step].count) return;
  ++step;
  slice = roundFirst_;
  settle(p, sliceElems);
}

void PlanCursor::settle(const Plan& p, uint64_t sliceElems) {
  for (;;) {
    if (step >= phaseEnd_) {
      roundFirst_ += group_;
      if (roundFirst_ < phaseSlices_) {
        step = phase == 0 ? 0 : p.phaseStarts[phase - 1];
        slice = roundFirst_;
        continue;
      }
      if (++phase > p.phaseStarts.size()) {
        done = true;
        return;
      }
      enterPhase(p, sliceElems);
      continue;
    }
    // A step of no elements is visited once, in the first round: an empty
    // message (a block collective's header) or nothing.
    const uint64_t n = p.steps[step].count;
    if (slice * sliceElems < n || (n == 0 && slice == 0)) return;
    ++step;
  }
}

namespace {

// A range of one step in one address space: Send, Recv (which an in-place
// call's Send lies in) or Scratch, in elements.
struct Span {
  int space;
  int64_t begin, end;
};

Span spanOf(const PlanKey& k, const Range& r, uint64_t count) {
  int64_t at = static_cast<int64_t>(r.offset);
  int space = static_cast<int>(r.buf);
  if (r.buf == Buf::Send && k.inPlace) {
    space = static_cast<int>(Buf::Recv);
    at += inPlaceShift(k);
  }
  return {space, at, at + static_cast<int64_t>(count)};
}

bool writes(Op op) { return op != Op::Send && op != Op::RecvReduceSend; }

}  // namespace

void markReferenceSends(Plan& plan, size_t maxSteps) {
  const size_t n = plan.steps.size();
  for (Step& s : plan.steps) s.mayReference = false;
  plan.referencesAcross = false;
  // A point-to-point send must not wait for its receiver (a send left to
  // the transport by reference is not done until the transport let go).
  if (n > maxSteps || plan.key.coll == Collective::Send) return;
  std::vector<size_t> phaseOf(n, 0);
  for (size_t i = 0, ph = 0; i < n; ++i) {
    while (ph < plan.phaseStarts.size() && plan.phaseStarts[ph] <= i) ++ph;
    phaseOf[i] = ph;
  }
  for (size_t i = 0; i < n; ++i) {
    Step& s = plan.steps[i];
    if (!opSends(s.op) || s.op == Op::RecvReduceSend || s.count == 0) continue;  // that one's out is computed into the slot
    const Span out = spanOf(plan.key, s.op == Op::Send ? s.src : s.dst, s.count);
    bool stable = true;
    for (size_t j = 0; j < n && stable; ++j) {
      const Step& w = plan.steps[j];
      if (j == i || phaseOf[j] < phaseOf[i] || !writes(w.op) || w.count == 0) continue;
      const Span d = spanOf(plan.key, w.dst, w.count);
      if (w.op == Op::Copy && !w.finalAvg) {
        const Span from = spanOf(plan.key, w.src, w.count);
        if (from.space == d.space && from.begin == d.begin) continue;  // in place: the executor skips it
      }
      if (d.space != out.space || d.end <= out.begin || out.end <= d.begin) continue;
      // An earlier step of the phase writing from the same element on writes
      // each element in the same slice, so before this step sends it (a
      // ring's Copy of its own block, then its Send).
      stable = j < i && phaseOf[j] == phaseOf[i] && d.begin == out.begin;
    }
    s.mayReference = stable;
  }
  bool receives = false, copies = false;
  for (const Step& s : plan.steps) {
    if (s.count == 0) continue;
    const Span from = spanOf(plan.key, s.src, s.count), to = spanOf(plan.key, s.dst, s.count);
    receives |= opReceives(s.op);
    copies |= s.op == Op::Copy && (from.space != to.space || from.begin != to.begin);
  }
  const uint64_t bytes = plan.key.count * plan.key.typeSize;
  plan.referencesAcross =
      (plan.key.coll == Collective::AllGather && (receives || copies)) ||
      (plan.key.coll == Collective::Broadcast && plan.key.nranks == 2 && bytes <= kMaxBroadcastReferenceBytes);
}

}  // namespace nodus
