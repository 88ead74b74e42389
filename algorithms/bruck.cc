// Bruck's AllToAll: the small-block one. Think of rank r's blocks as rotated,
// position i holding the block for rank r + i. In round k every rank sends
// the blocks at positions with bit k set, packed into one message, to rank
// r + 2^k and receives the same positions from r - 2^k, so after
// ceil(log2 p) rounds position i holds the block from rank r - i. Each
// rank sends ceil(log2 p) messages instead of p - 1, of about half its data
// each: fewer latencies, more bytes and local copies.
//
// No rotation is copied: the plan tracks where each position's block is
// (the send buffer at first, the round's receive area in scratch once it
// moved), packs from there, and at the end copies every block to its place
// in the receive buffer. Scratch: one pack area and one receive area a
// round. In place the send buffer is read until the last phase, which alone
// writes the receive buffer (position 0, the own block, is in place already).
#include "algorithms/bruck.h"

#include "algorithms/plan_builder.h"

namespace nodus {

int bruckRounds(int p) {
  int rounds = 0;
  while ((1 << rounds) < p) ++rounds;
  return rounds;
}

int bruckBlocks(int p, int round) {
  int n = 0;
  for (int i = 1; i < p; ++i) n += (i >> round) & 1;
  return n;
}

namespace {

// Scratch it takes: beyond this, pairwise exchange moves fewer bytes anyway.
constexpr uint64_t kMaxScratchBytes = 64 << 20;

uint64_t scratchElems(int p, uint64_t n) {
  uint64_t most = 0, all = 0;
  for (int k = 0; k < bruckRounds(p); ++k) {
    const uint64_t b = static_cast<uint64_t>(bruckBlocks(p, k));
    most = std::max(most, b);
    all += b;
  }
  return (most + all) * n;
}

bool supports(const PlanKey& k, const PlanContext&) {
  return k.coll == Collective::AllToAll && k.nranks > 2 && k.count > 0 &&
         scratchElems(k.nranks, k.count) * k.typeSize <= kMaxScratchBytes;
}

Status build(const PlanKey& k, const PlanContext&, Plan& plan) {
  PlanBuilder b(plan);
  const int p = k.nranks, r = k.rank;
  const uint64_t n = k.count;
  std::vector<Range> where(static_cast<size_t>(p));
  for (int i = 0; i < p; ++i) where[static_cast<size_t>(i)] = {Buf::Send, static_cast<uint64_t>(modRank(r + i, p)) * n};
  uint64_t pack = 0;
  for (int k2 = 0; k2 < bruckRounds(p); ++k2) pack = std::max(pack, static_cast<uint64_t>(bruckBlocks(p, k2)) * n);
  uint64_t area = pack;  // the next round's receive area in scratch
  for (int round = 0; round < bruckRounds(p); ++round) {
    const int dist = 1 << round;
    std::vector<int> moving;
    for (int i = 1; i < p; ++i)
      if ((i >> round) & 1) moving.push_back(i);
    b.phase();
    for (size_t x = 0; x < moving.size(); ++x) b.copy(where[static_cast<size_t>(moving[x])], {Buf::Scratch, x * n}, n);
    const uint64_t len = moving.size() * n;
    b.phase();
    b.send(modRank(r + dist, p), {Buf::Scratch, 0}, len);
    b.recv(modRank(r - dist, p), {Buf::Scratch, area}, len);
    for (size_t x = 0; x < moving.size(); ++x) where[static_cast<size_t>(moving[x])] = {Buf::Scratch, area + x * n};
    area += len;
  }
  plan.scratchElems = area;
  b.phase();
  for (int i = 0; i < p; ++i) {
    const Range to{Buf::Recv, static_cast<uint64_t>(modRank(r - i, p)) * n};
    if (i == 0 && k.inPlace) continue;  // the own block, in place already
    b.copy(where[static_cast<size_t>(i)], to, n);
  }
  return Status::ok();
}

}  // namespace

const Algorithm kBruckAlgorithm = {
    "bruck", "Small AllToAll: log2(p) rounds, each one packed message to rank + 2^k (store and forward).",
    supports, build};

}  // namespace nodus
