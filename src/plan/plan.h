// Plan: what one rank does for one collective call, as data.
//
// Algorithms produce plans, the executor (src/exec) runs them over transports,
// the verifier (src/plan/verifier) runs them symbolically. A plan refers to
// buffers by role and element offset, never by address, so one plan serves
// every call with the same signature (it is cached per communicator).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "nodus/nodus.h"

namespace nodus {

enum class Collective : uint8_t {
  AllReduce,
  AllGather,
  ReduceScatter,
  Broadcast,
  Reduce,
  Send,
  Recv,
  // The block collectives: each rank sends blocks to some peers and receives
  // blocks from some (blockTo / blockFrom below say which and where).
  AllToAll,
  AllToAllV,
  Gather,
  Scatter,
  AllGatherV,
  ReduceScatterV,
};
const char* collectiveName(Collective c);
inline bool isBlockCollective(Collective c) { return c >= Collective::AllToAll; }
// Collectives whose blocks differ between peers: their counts are in PlanKey::blocks.
inline bool isVCollective(Collective c) {
  return c == Collective::AllToAllV || c == Collective::AllGatherV || c == Collective::ReduceScatterV;
}
inline bool collectiveReduces(Collective c) {
  return c == Collective::AllReduce || c == Collective::ReduceScatter || c == Collective::Reduce ||
         c == Collective::ReduceScatterV;
}

// Buffer roles. Send/Recv are the user's; Scratch belongs to the communicator.
// In-place calls alias Send and Recv exactly as nodus.h defines.
enum class Buf : uint8_t { Send, Recv, Scratch };

struct Range {
  Buf buf = Buf::Send;
  uint64_t offset = 0;  // elements
};

// What a step does with the data it receives ("in") from recvPeer, its local
// source range `src` and destination range `dst`, and what it sends to sendPeer.
// All ranges of a step have the same length `count`.
enum class Op : uint8_t {
  Send,                // out = src
  Recv,                // dst = in
  RecvReduceSend,      // out = in (op) src
  RecvReduceCopy,      // dst = in (op) src
  RecvReduceCopySend,  // dst = in (op) src; out = dst
  RecvCopySend,        // dst = in; out = in
  Copy,                // dst = src (local)
  Reduce,              // dst = dst (op) src (local)
};
const char* opKindName(Op op);

inline bool opReceives(Op op) {
  return op == Op::Recv || op == Op::RecvReduceSend || op == Op::RecvReduceCopy ||
         op == Op::RecvReduceCopySend || op == Op::RecvCopySend;
}
inline bool opSends(Op op) {
  return op == Op::Send || op == Op::RecvReduceSend || op == Op::RecvReduceCopySend ||
         op == Op::RecvCopySend;
}
inline bool opReduces(Op op) {
  return op == Op::RecvReduceSend || op == Op::RecvReduceCopy || op == Op::RecvReduceCopySend ||
         op == Op::Reduce;
}

// A step of no elements runs once (PlanCursor): a send or receive of an
// empty message, which block collectives keep so that a count that differs
// from a peer's zero fails rather than waits.
struct Step {
  Op op = Op::Copy;
  int32_t recvPeer = -1;
  int32_t sendPeer = -1;
  Range src;
  Range dst;
  uint64_t count = 0;  // elements
  // This step writes a final value of an average: the executor divides by
  // nranks here (when the call's op is nodusAvg).
  bool finalAvg = false;
  // RecvReduceCopy[Send]: fold as src op received, where the default is
  // received op src. A plan in which every rank folds every element (direct)
  // keeps the operands in one order on every rank with it, so min and max
  // give every rank the same zero sign and NaN.
  bool receivedLast = false;
  // What this step sends (src for Send, dst for Recv[Reduce]CopySend) is not
  // written again by the plan once the step has run (markReferenceSends): a
  // transport may send it from there rather than from a copy in a slot
  // (SendConnection::postReference).
  bool mayReference = false;
};

// The signature a plan depends on (and is cached by).
struct PlanKey {
  Collective coll = Collective::AllReduce;
  int nranks = 1;
  int rank = 0;
  uint64_t count = 0;  // the API's count argument
  uint32_t typeSize = 1;
  int root = 0;        // root for Broadcast/Reduce/Gather/Scatter; peer for Send/Recv
  bool inPlace = false;
  // A list AllGather (nodusAllGatherList): the receive buffer is several,
  // so no receive lands straight in place and every slice fits a slot.
  bool listRecv = false;
  // The V-collectives' counts and displacements as this rank passed them, in
  // elements (empty for every other collective):
  //   AllToAllV:      sendcounts, sdispls, recvcounts, rdispls (4 x nranks; in
  //                   place the send pair is a copy of the receive pair)
  //   AllGatherV:     recvcounts, displs (2 x nranks; count = sendcount)
  //   ReduceScatterV: recvcounts (nranks; count = recvcounts[rank])
  // AllToAllV's count is 0: its sizes are this rank's own, and what every
  // rank decides from the key (the algorithm, its slice) must not differ.
  std::vector<uint64_t> blocks = {};
  bool operator==(const PlanKey&) const = default;
};

// A block of a block collective: `count` elements from element `offset` of
// the send or receive buffer. `exists`: a message goes (one of zero elements
// too, so that counts that disagree fail instead of waiting).
struct PeerBlock {
  bool exists = false;
  uint64_t offset = 0;
  uint64_t count = 0;
};
// What rank k.rank sends to `peer` (its own block when peer == k.rank, kept
// locally) and what it receives from `peer`.
PeerBlock blockTo(const PlanKey& k, int peer);
PeerBlock blockFrom(const PlanKey& k, int peer);
// In place, where the send buffer is relative to the receive buffer, in
// elements (send = recv + shift), as nodus.h defines each collective's in
// place; 0 where they coincide.
int64_t inPlaceShift(const PlanKey& k);

struct Plan {
  PlanKey key;
  std::string algorithm;  // e.g. "ring", for logs and traces
  uint32_t channels = 1;  // the channels the algorithm built (PlanContext::channels), for logs
  std::vector<Step> steps;
  uint64_t scratchElems = 0;  // scratch the plan needs, in elements
  // Steps run phase by phase; within a phase slice-major: slice s of every
  // step in order, then slice s+1. Slice s of a step covers elements
  // [s*sliceElems, (s+1)*sliceElems). A phase boundary is where a step needs
  // whole ranges an earlier step writes (recursive halving), not just the
  // same slice of them (a ring or a tree).
  std::vector<uint32_t> phaseStarts;  // first step of each phase after the first
  uint64_t sliceElems = 1;
  // Slices of a step the executor takes in a row before the next step
  // (NODUS_ROUND_SLICES): slice-major in rounds of this many, so a chain of
  // steps pays its latency once per round rather than once per slice, while
  // a step never holds more than this many of a connection's slots.
  uint32_t roundSlices = 1;
  uint64_t maxSlices = 0;  // over all steps
  // This rank's sends that may go by reference (Step::mayReference) may go to a peer process too
  // (SendConnection::postReference; shm: the peer reads them with
  // process_vm_readv). Set by markReferenceSends where that was measured to
  // pay (docs/architecture.md): an AllGather's, where every receive lands
  // unchanged (the reader puts it straight where it goes) and every rank
  // both sends and receives, so one process_vm_readv a byte replaces a
  // copy into a slot and one out of it on the same core. Elsewhere the two
  // copies through the slots, one on each side, ran as fast or faster
  // (AllReduce: its receives reduce, and read into a slot first; Broadcast
  // on 3 ranks or more: a chain's ranks and its root have a core each to
  // copy with, and a sender by reference waits for its reader at the end
  // of the call). A 2-rank Broadcast of up to kMaxBroadcastReferenceBytes
  // goes by reference too: a message of a few slices, the root's copies
  // into the slots and the receiver's out of them hardly overlap.
  bool referencesAcross = false;
};

// The largest slice a plan sends by reference where every connection takes
// references of any size (Comm::plan): a slice is otherwise at most a slot.
constexpr uint64_t kMaxReferenceSliceBytes = 4 << 20;

// The largest Broadcast on 2 ranks that goes by reference
// (markReferenceSends): above it the pipeline through the slots, a copy on
// each core, is faster than one process_vm_readv on the receiver's core.
// By size only: every rank must take the same decision.
constexpr uint64_t kMaxBroadcastReferenceBytes = 1 << 20;

// Where a rank is in a plan, in the order above: phase by phase; within a
// phase, round by round (`group` slices a round: Plan::roundSlices); within a
// round, step by step; within a step, the round's slices in order.
struct PlanCursor {
  size_t phase = 0;
  size_t step = 0;
  uint64_t slice = 0;
  bool done = false;
  void start(const Plan& p, uint64_t sliceElems, uint32_t group = 1);
  void next(const Plan& p, uint64_t sliceElems);

 private:
  size_t phaseEnd_ = 0;
  uint64_t phaseSlices_ = 0;
  uint64_t roundFirst_ = 0;  // the round's first slice
  uint32_t group_ = 1;
  void enterPhase(const Plan& p, uint64_t sliceElems);
  void settle(const Plan& p, uint64_t sliceElems);
};

struct PlanKeyHash {
  size_t operator()(const PlanKey& k) const {
    uint64_t h = static_cast<uint64_t>(k.coll) * 0x9e3779b97f4a7c15ULL;
    for (uint64_t v : {static_cast<uint64_t>(k.nranks), static_cast<uint64_t>(k.rank), k.count,
                       static_cast<uint64_t>(k.typeSize), static_cast<uint64_t>(k.root),
                       static_cast<uint64_t>(k.inPlace) | static_cast<uint64_t>(k.listRecv) << 1})
      h = (h ^ v) * 0x100000001b3ULL + (h >> 29);
    for (uint64_t v : k.blocks) h = (h ^ v) * 0x100000001b3ULL + (h >> 29);
    return static_cast<size_t>(h);
  }
};

// Element counts of the user buffers for a call (what the verifier and the
// argument checks assume is there).
uint64_t sendElems(const PlanKey& k);
uint64_t recvElems(const PlanKey& k);

std::string describe(const Plan& plan);  // one step a line, for debugging

// Sets Step::mayReference: a sending step's range overlaps no range that a
// later step of its phase (slice-major: it writes each slice after this one
// sent it), a step of a later phase, or an earlier step of its phase not
// starting at the same element (its later slices run after) writes, with
// Send and Recv aliased as an in-place call aliases them. Plans of more than
// `maxSteps` steps are left unmarked (quadratic).
void markReferenceSends(Plan& plan, size_t maxSteps = 4096);

}  // namespace nodus
