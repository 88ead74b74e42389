#include "algorithms/dimension_wise.h"

#include <algorithm>

#include "algorithms/algorithm.h"

namespace nodus {
namespace {

struct Block {
  uint64_t off = 0, len = 0;
};

// One ring of one stage, in the stream's direction.
struct StageRing {
  int q, pos, prev, next;
  StageRing(const DimensionRing& r, bool backward) : q(static_cast<int>(r.ranks.size())) {
    pos = backward ? modRank(-r.pos, q) : r.pos;
    auto at = [&](int position) {
      const int forward = backward ? modRank(-position, q) : modRank(position, q);
      return r.ranks[static_cast<size_t>(forward)];
    };
    prev = at(pos - 1);
    next = at(pos + 1);
  }
  Block sub(const Block& b, int64_t c) const {
    const uint64_t i = static_cast<uint64_t>(modRank(c, q));
    return {b.off + blockBegin(i, b.len, static_cast<uint64_t>(q)), blockSize(i, b.len, static_cast<uint64_t>(q))};
  }
};

}  // namespace

void buildDimensionWise(const PlanKey& k, const std::vector<DimensionRing>& rings, const std::vector<Stream>& streams,
                        PlanBuilder& b) {
  const size_t nstreams = streams.size();
  const size_t stages = streams.empty() ? 0 : streams[0].dims.size();
  // history[j][t]: stream j's block when stage t began.
  std::vector<std::vector<Block>> history(nstreams);
  std::vector<Block> cur(nstreams);
  for (size_t j = 0; j < nstreams; ++j) cur[j] = {blockBegin(j, k.count, nstreams), blockSize(j, k.count, nstreams)};

  // Reduce-scatter, dimension by dimension: a ring reduce-scatter of the
  // stream's block; the rank keeps sub-block pos+1 of it. Step k of every
  // stream comes before step k+1 of any, so the streams' rings advance
  // together on their different links instead of one after another.
  for (size_t t = 0; t < stages; ++t) {
    b.phase();
    const bool last = t + 1 == stages;
    const Buf src = t == 0 ? Buf::Send : Buf::Recv;
    std::vector<StageRing> rs;
    int maxQ = 0;
    for (size_t j = 0; j < nstreams; ++j) {
      rs.emplace_back(rings[static_cast<size_t>(streams[j].dims[t])], streams[j].backward);
      history[j].push_back(cur[j]);
      maxQ = std::max(maxQ, rs[j].q);
    }
    for (int step = 0; step < maxQ; ++step) {
      for (size_t j = 0; j < nstreams; ++j) {
        const StageRing& r = rs[j];
        const Block& blk = history[j][t];
        if (step >= r.q) continue;
        if (step == 0) {
          const Block s = r.sub(blk, r.pos);
          b.send(r.next, {src, s.off}, s.len);
        } else if (step < r.q - 1) {
          const Block s = r.sub(blk, r.pos - step);
          b.recvReduceSend(r.prev, r.next, {src, s.off}, s.len);
        } else {
          const Block s = r.sub(blk, r.pos + 1);
          b.recvReduceCopy(r.prev, {src, s.off}, {Buf::Recv, s.off}, s.len, last);
          cur[j] = s;
        }
      }
    }
  }
  // All-gather back through the dimensions in reverse, streams in step.
  for (size_t t = stages; t-- > 0;) {
    b.phase();
    std::vector<StageRing> rs;
    int maxQ = 0;
    for (size_t j = 0; j < nstreams; ++j) {
      rs.emplace_back(rings[static_cast<size_t>(streams[j].dims[t])], streams[j].backward);
      maxQ = std::max(maxQ, rs[j].q);
    }
    for (int step = 0; step < maxQ; ++step) {
      for (size_t j = 0; j < nstreams; ++j) {
        const StageRing& r = rs[j];
        const Block& blk = history[j][t];
        if (step >= r.q) continue;
        if (step == 0) {
          const Block s = r.sub(blk, r.pos + 1);
          b.send(r.next, {Buf::Recv, s.off}, s.len);
        } else if (step < r.q - 1) {
          const Block s = r.sub(blk, r.pos - (step - 1));
          b.recvCopySend(r.prev, r.next, {Buf::Recv, s.off}, s.len);
        } else {
          const Block s = r.sub(blk, r.pos + 2);
          b.recv(r.prev, {Buf::Recv, s.off}, s.len);
        }
      }
    }
  }
}

}  // namespace nodus
