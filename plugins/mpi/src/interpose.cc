// libnodus_mpi: the MPI entry points it replaces (PMPI interposition).
//
// Loaded with LD_PRELOAD ahead of libmpi, these definitions of MPI_* win over
// the library's; the library's own implementation stays reachable as PMPI_*.
//
//  - MPI_Init / MPI_Init_thread: after PMPI_Init*, agree on the settings and
//    create a nodus communicator for MPI_COMM_WORLD (bootstrapped through MPI).
//    Other communicators get theirs at their first eligible *blocking*
//    collective (creation is a blocking collective; a non-blocking call must
//    not block, so until then those go to MPI, reason "not-ready"). The
//    state hangs off an MPI attribute whose delete callback frees it, so
//    MPI_Comm_free / MPI_Comm_disconnect / MPI_Finalize release the nodus
//    communicator without this file intercepting them.
//  - MPI_Allreduce, _Allgather, _Reduce_scatter_block, _Reduce_scatter,
//    _Bcast, _Reduce, _Barrier and their MPI_I* forms: to nodus when nodus can
//    do exactly what MPI specifies (plugin.h says how that stays consistent
//    across ranks), else to PMPI_*, counted per reason.
//  - Non-blocking forms return MPI generalized requests (pending_ops.h), so
//    MPI_Wait/Test/Waitall/Testall/Waitany/Testany/Waitsome/Testsome,
//    MPI_Request_get_status and MPI_Request_free are intercepted (the last
//    to refuse, as MPI does for a non-blocking collective); everything else
//    about requests stays MPI's.
//  - MPI_IN_PLACE as MPI defines it: Allreduce/Reduce_scatter*: input in
//    recvbuf; Reduce: at the root only; Allgather: this rank's block already
//    in recvbuf; Reduce_scatter*: result at the start of recvbuf.
//  - MPI_Reduce_scatter with unequal counts is composed: an AllReduce of the
//    whole vector (in a pooled scratch buffer, or in recvbuf when in place),
//    then this rank's block is copied to the front. Equal counts use nodus'
//    ReduceScatter directly.
//  - Bcast and Allgather may legally use different (matching) datatypes on
//    different ranks, so their routing looks only at the byte count; a rank
//    whose datatype is not one run of bytes packs/unpacks through scratch.
//  - Failures: see Plugin::runBlocking / agreeOnFailure.
//
// Fortran's bindings in Open MPI call PMPI_* directly, so only C callers are
// intercepted.

#include <algorithm>
#include <climits>
#include <cstring>
#include <memory>

#include "mpi_headers.h"
#include "nodus/nodus.h"
#include "plugin.h"

using nodus::mpi::CommState;
using nodus::mpi::Layout;
using nodus::mpi::PendingOp;
using nodus::mpi::Plugin;
using nodus::mpi::Reduction;
using nodus::mpi::ScratchPool;

#define NODUS_MPI_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

std::byte* at(void* base, uint64_t offset) { return static_cast<std::byte*>(base) + offset; }
const std::byte* at(const void* base, uint64_t offset) { return static_cast<const std::byte*>(base) + offset; }

// MPI's packed form of `count` elements is, between processes of one host,
// their data back to back: exactly what a rank with a contiguous type holds.
// MPI_Pack counts in int, so large buffers go in pieces. MPI_COMM_SELF:
// packing depends on the communicator only across heterogeneous hosts, and a
// request may finish after the program freed its communicator.
bool packTo(const void* buf, int64_t count, MPI_Datatype type, const Layout& l, std::byte* out) {
  const int64_t step = std::max<int64_t>(1, static_cast<int64_t>(INT_MAX / std::max<uint64_t>(l.size, 1)));
  for (int64_t done = 0; done < count; done += step) {
    const int n = static_cast<int>(std::min(step, count - done));
    int pos = 0;
    const uint64_t outBytes = static_cast<uint64_t>(n) * l.size;
    if (PMPI_Pack(at(buf, static_cast<uint64_t>(done) * static_cast<uint64_t>(l.extent)), n, type,
                  out + static_cast<uint64_t>(done) * l.size, static_cast<int>(outBytes), &pos,
                  MPI_COMM_SELF) != MPI_SUCCESS ||
        static_cast<uint64_t>(pos) != outBytes)
      return false;
  }
  return true;
}

bool unpackFrom(const std::byte* in, void* buf, int64_t count, MPI_Datatype type, const Layout& l) {
  const int64_t step = std::max<int64_t>(1, static_cast<int64_t>(INT_MAX / std::max<uint64_t>(l.size, 1)));
  for (int64_t done = 0; done < count; done += step) {
    const int n = static_cast<int>(std::min(step, count - done));
    int pos = 0;
    const uint64_t inBytes = static_cast<uint64_t>(n) * l.size;
    if (PMPI_Unpack(in + static_cast<uint64_t>(done) * l.size, static_cast<int>(inBytes), &pos,
                    at(buf, static_cast<uint64_t>(done) * static_cast<uint64_t>(l.extent)), n, type,
                    MPI_COMM_SELF) != MPI_SUCCESS)
      return false;
  }
  return true;
}

bool validRoot(int root, const CommState& s) { return root >= 0 && root < s.size(); }

// ---- Allreduce --------------------------------------------------------------------------

int allreduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype type, MPI_Op op, MPI_Comm comm,
              MPI_Request* request) {
  const int coll = request ? NODUS_MPI_IALLREDUCE : NODUS_MPI_ALLREDUCE;
  Plugin* p = Plugin::get();
  Reduction r;
  CommState* s = p ? p->routeReduction(coll, comm, count, type, op, request == nullptr, &r) : nullptr;
  if (s == nullptr)
    return request ? PMPI_Iallreduce(sendbuf, recvbuf, count, type, op, comm, request)
                   : PMPI_Allreduce(sendbuf, recvbuf, count, type, op, comm);
  const bool inPlace = sendbuf == MPI_IN_PLACE;
  const void* in = inPlace ? recvbuf : sendbuf;
  if (request)
    return p->startNonBlocking(
        *s, coll, r.bytes, false, std::make_unique<PendingOp>(),
        [&](nodusComm_t c, nodusRequest_t* q) { return nodusIallReduce(in, recvbuf, r.count, r.type, r.op, c, q); },
        request);
  return p->runBlocking(
      *s, coll, r.bytes, false, !inPlace,
      [&](nodusComm_t c) { return nodusAllReduce(in, recvbuf, r.count, r.type, r.op, c); },
      [&] { return PMPI_Allreduce(sendbuf, recvbuf, count, type, op, comm); });
}

// ---- Reduce -----------------------------------------------------------------------------

int reduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype type, MPI_Op op, int root, MPI_Comm comm,
           MPI_Request* request) {
  const int coll = request ? NODUS_MPI_IREDUCE : NODUS_MPI_REDUCE;
  Plugin* p = Plugin::get();
  Reduction r;
  CommState* s = p ? p->routeReduction(coll, comm, count, type, op, request == nullptr, &r) : nullptr;
  if (s != nullptr && !validRoot(root, *s)) {
    p->fallBack(coll, NODUS_MPI_FB_ARGS, r.bytes);
    s = nullptr;
  }
  if (s == nullptr)
    return request ? PMPI_Ireduce(sendbuf, recvbuf, count, type, op, root, comm, request)
                   : PMPI_Reduce(sendbuf, recvbuf, count, type, op, root, comm);
  const bool isRoot = s->rank() == root;
  const bool inPlace = isRoot && sendbuf == MPI_IN_PLACE;
  const void* in = inPlace ? recvbuf : sendbuf;
  void* out = isRoot ? recvbuf : nullptr;  // recvbuf means nothing elsewhere
  if (request)
    return p->startNonBlocking(
        *s, coll, r.bytes, false, std::make_unique<PendingOp>(),
        [&](nodusComm_t c, nodusRequest_t* q) { return nodusIreduce(in, out, r.count, r.type, r.op, root, c, q); },
        request);
  return p->runBlocking(
      *s, coll, r.bytes, false, !inPlace,
      [&](nodusComm_t c) { return nodusReduce(in, out, r.count, r.type, r.op, root, c); },
      [&] { return PMPI_Reduce(sendbuf, recvbuf, count, type, op, root, comm); });
}

// ---- Reduce_scatter_block and Reduce_scatter ----------------------------------------------

// Both forms; `counts` is null for the block form (every rank gets `block`).
int reduceScatter(const void* sendbuf, void* recvbuf, int block, const int* counts, MPI_Datatype type, MPI_Op op,
                  MPI_Comm comm, MPI_Request* request) {
  const bool vector = counts != nullptr;
  const int coll = vector ? (request ? NODUS_MPI_IREDUCE_SCATTER : NODUS_MPI_REDUCE_SCATTER)
                          : (request ? NODUS_MPI_IREDUCE_SCATTER_BLOCK : NODUS_MPI_REDUCE_SCATTER_BLOCK);
  auto viaMpi = [&] {
    if (vector)
      return request ? PMPI_Ireduce_scatter(sendbuf, recvbuf, counts, type, op, comm, request)
                     : PMPI_Reduce_scatter(sendbuf, recvbuf, counts, type, op, comm);
    return request ? PMPI_Ireduce_scatter_block(sendbuf, recvbuf, block, type, op, comm, request)
                   : PMPI_Reduce_scatter_block(sendbuf, recvbuf, block, type, op, comm);
  };
  Plugin* p = Plugin::get();
  if (p == nullptr) return viaMpi();
  int nranks = 0;
  bool ok = comm != MPI_COMM_NULL && p->commSize(comm, &nranks) && nranks > 0;
  // The whole vector, and whether every rank's share is the same.
  int64_t total = 0;
  bool equal = true;
  if (ok && vector) {
    for (int i = 0; i < nranks; ++i) {
      ok = ok && counts[i] >= 0;
      total += counts[i];
      equal = equal && counts[i] == counts[0];
    }
    block = counts[0];
  } else if (ok) {
    ok = block >= 0;
    total = static_cast<int64_t>(block) * nranks;
  }
  if (!ok) {
    p->fallBack(coll, NODUS_MPI_FB_ARGS, 0);
    return viaMpi();
  }
  Reduction r;
  CommState* s = p->routeReduction(coll, comm, total, type, op, request == nullptr, &r, static_cast<uint64_t>(nranks));
  if (s == nullptr) return viaMpi();
  const int me = s->rank();
  const uint64_t elem = r.bytes / static_cast<uint64_t>(total);  // bytes per MPI element
  const size_t per = r.count / static_cast<size_t>(total);        // nodus elements per MPI element
  const bool inPlace = sendbuf == MPI_IN_PLACE;
  const bool staged = !equal;
  ScratchPool::Lease scratch;

  // What nodus runs, and what is left to do once it has finished.
  uint64_t offset = 0, mine = 0;  // this rank's block in the whole vector, bytes
  const void* nodusIn = nullptr;
  void* nodusOut = nullptr;
  if (equal) {
    offset = static_cast<uint64_t>(me) * static_cast<uint64_t>(block) * elem;
    mine = static_cast<uint64_t>(block) * elem;
    // nodus' in-place form reads recvbuf and leaves this rank's result at its
    // own block; MPI wants it at the front.
    nodusIn = inPlace ? recvbuf : sendbuf;
    nodusOut = inPlace ? at(recvbuf, offset) : recvbuf;
  } else {
    for (int i = 0; i < me; ++i) offset += static_cast<uint64_t>(counts[i]) * elem;
    mine = static_cast<uint64_t>(counts[me]) * elem;
    nodusIn = inPlace ? recvbuf : sendbuf;
    if (inPlace) {
      nodusOut = recvbuf;
    } else {
      scratch = s->scratch().acquire(r.bytes);
      nodusOut = scratch.data();
    }
  }
  const size_t nodusBlock = static_cast<size_t>(block) * per;
  void* front = recvbuf;
  const std::byte* result = static_cast<const std::byte*>(nodusOut) + (equal ? 0 : offset);
  const bool move = result != static_cast<const std::byte*>(front) && mine > 0;
  auto finish = [front, result, mine, move] {
    if (move) std::memmove(front, result, mine);
  };
  auto run = [&](nodusComm_t c, nodusRequest_t* q) {
    if (equal)
      return q ? nodusIreduceScatter(nodusIn, nodusOut, nodusBlock, r.type, r.op, c, q)
               : nodusReduceScatter(nodusIn, nodusOut, nodusBlock, r.type, r.op, c);
    return q ? nodusIallReduce(nodusIn, nodusOut, r.count, r.type, r.op, c, q)
             : nodusAllReduce(nodusIn, nodusOut, r.count, r.type, r.op, c);
  };
  if (request) {
    auto pending = std::make_unique<PendingOp>();
    pending->scratch = std::move(scratch);
    if (move) pending->finish = finish;
    return p->startNonBlocking(*s, coll, r.bytes, staged, std::move(pending), run, request);
  }
  return p->runBlocking(
      *s, coll, r.bytes, staged, !inPlace,
      [&](nodusComm_t c) {
        const nodusResult_t rc = run(c, nullptr);
        if (rc == nodusSuccess) finish();
        return rc;
      },
      viaMpi);
}

// ---- Bcast --------------------------------------------------------------------------------

int bcast(void* buf, int count, MPI_Datatype type, int root, MPI_Comm comm, MPI_Request* request) {
  const int coll = request ? NODUS_MPI_IBCAST : NODUS_MPI_BCAST;
  auto viaMpi = [&] {
    return request ? PMPI_Ibcast(buf, count, type, root, comm, request) : PMPI_Bcast(buf, count, type, root, comm);
  };
  Plugin* p = Plugin::get();
  if (p == nullptr) return viaMpi();
  Layout l;
  if (count < 0 || !p->types().layout(type, &l)) {
    p->fallBack(coll, NODUS_MPI_FB_ARGS, 0);
    return viaMpi();
  }
  const uint64_t bytes = static_cast<uint64_t>(count) * l.size;
  CommState* s = p->routeMove(coll, comm, bytes, request == nullptr);
  if (s != nullptr && !validRoot(root, *s)) {
    p->fallBack(coll, NODUS_MPI_FB_ARGS, bytes);
    s = nullptr;
  }
  if (s == nullptr) return viaMpi();
  const bool isRoot = s->rank() == root;
  const bool staged = !l.contiguous;
  ScratchPool::Lease scratch;
  void* data = buf;
  if (staged) {
    scratch = s->scratch().acquire(bytes);
    data = scratch.data();
  }
  // The root packs before nodus runs, the others unpack after.
  std::byte* staging = scratch.data();
  auto prepare = [&] { return !staged || !isRoot || packTo(buf, count, type, l, staging); };
  auto finish = [staging, buf, count, type, l] { unpackFrom(staging, buf, count, type, l); };
  if (request) {
    auto pending = std::make_unique<PendingOp>();
    pending->scratch = std::move(scratch);
    if (staged && !isRoot) pending->finish = finish;
    return p->startNonBlocking(
        *s, coll, bytes, staged, std::move(pending),
        [&](nodusComm_t c, nodusRequest_t* q) {
          if (!prepare()) return nodusInvalidArgument;
          return nodusIbroadcast(data, data, bytes, nodusUint8, root, c, q);
        },
        request);
  }
  return p->runBlocking(
      *s, coll, bytes, staged, true,
      [&](nodusComm_t c) {
        if (!prepare()) return nodusInvalidArgument;
        const nodusResult_t rc = nodusBroadcast(data, data, bytes, nodusUint8, root, c);
        if (rc == nodusSuccess && staged && !isRoot && !unpackFrom(staging, buf, count, type, l))
          return nodusInvalidArgument;
        return rc;
      },
      viaMpi);
}

// ---- Allgather ------------------------------------------------------------------------------

int allgather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf, int recvcount,
              MPI_Datatype recvtype, MPI_Comm comm, MPI_Request* request) {
  const int coll = request ? NODUS_MPI_IALLGATHER : NODUS_MPI_ALLGATHER;
  auto viaMpi = [&] {
    return request ? PMPI_Iallgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, request)
                   : PMPI_Allgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
  };
  Plugin* p = Plugin::get();
  if (p == nullptr) return viaMpi();
  const bool inPlace = sendbuf == MPI_IN_PLACE;
  Layout rl, sl;
  int nranks = 0;
  const bool ok = comm != MPI_COMM_NULL && recvcount >= 0 && p->types().layout(recvtype, &rl) &&
                  p->commSize(comm, &nranks);
  if (!ok) {
    p->fallBack(coll, NODUS_MPI_FB_ARGS, 0);
    return viaMpi();
  }
  const uint64_t block = static_cast<uint64_t>(recvcount) * rl.size;
  const uint64_t bytes = block * static_cast<uint64_t>(nranks);
  CommState* s = p->routeMove(coll, comm, bytes, request == nullptr, static_cast<uint64_t>(nranks));
  if (s == nullptr) return viaMpi();
  // MPI requires the signatures to match; a mismatch is MPI's to report.
  if (!inPlace &&
      (sendcount < 0 || !p->types().layout(sendtype, &sl) || static_cast<uint64_t>(sendcount) * sl.size != block)) {
    p->fallBack(coll, NODUS_MPI_FB_ARGS, bytes);
    return viaMpi();
  }
  const int me = s->rank();
  // Stage through scratch only when the receive type is not one run of bytes;
  // a non-contiguous send type is packed straight into this rank's block.
  const bool sendDirect = inPlace || sl.contiguous;
  const bool staged = !rl.contiguous || !sendDirect;
  ScratchPool::Lease scratch;
  std::byte* gather = static_cast<std::byte*>(recvbuf);
  if (!rl.contiguous) {
    scratch = s->scratch().acquire(bytes);
    gather = scratch.data();
  }
  std::byte* own = gather + static_cast<uint64_t>(me) * block;
  const void* nodusIn = own;  // nodus' in-place form unless the send buffer can go as it is
  auto prepare = [&] {
    if (rl.contiguous) {
      if (!inPlace && sl.contiguous) nodusIn = sendbuf;
      else if (!inPlace) return packTo(sendbuf, sendcount, sendtype, sl, own);
      return true;  // in place: already there
    }
    if (inPlace)
      return packTo(at(recvbuf, static_cast<uint64_t>(me) * static_cast<uint64_t>(recvcount) *
                                    static_cast<uint64_t>(rl.extent)),
                    recvcount, recvtype, rl, own);
    if (sl.contiguous) {
      if (block > 0) std::memcpy(own, sendbuf, block);
      return true;
    }
    return packTo(sendbuf, sendcount, sendtype, sl, own);
  };
  const int64_t all = static_cast<int64_t>(recvcount) * nranks;
  auto finish = [gather, recvbuf, all, recvtype, rl] { unpackFrom(gather, recvbuf, all, recvtype, rl); };
  if (request) {
    auto pending = std::make_unique<PendingOp>();
    pending->scratch = std::move(scratch);
    if (!rl.contiguous) pending->finish = finish;
    return p->startNonBlocking(
        *s, coll, bytes, staged, std::move(pending),
        [&](nodusComm_t c, nodusRequest_t* q) {
          if (!prepare()) return nodusInvalidArgument;
          return nodusIallGather(nodusIn, gather, block, nodusUint8, c, q);
        },
        request);
  }
  return p->runBlocking(
      *s, coll, bytes, staged, true,
      [&](nodusComm_t c) {
        if (!prepare()) return nodusInvalidArgument;
        const nodusResult_t rc = nodusAllGather(nodusIn, gather, block, nodusUint8, c);
        if (rc == nodusSuccess && !rl.contiguous && !unpackFrom(gather, recvbuf, all, recvtype, rl))
          return nodusInvalidArgument;
        return rc;
      },
      viaMpi);
}

// ---- Barrier --------------------------------------------------------------------------------

int barrier(MPI_Comm comm, MPI_Request* request) {
  const int coll = request ? NODUS_MPI_IBARRIER : NODUS_MPI_BARRIER;
  Plugin* p = Plugin::get();
  CommState* s = p ? p->routeMove(coll, comm, 0, request == nullptr) : nullptr;
  if (s == nullptr) return request ? PMPI_Ibarrier(comm, request) : PMPI_Barrier(comm);
  if (request)
    return p->startNonBlocking(
        *s, coll, 0, false, std::make_unique<PendingOp>(),
        [](nodusComm_t c, nodusRequest_t* q) { return nodusIbarrier(c, q); }, request);
  return p->runBlocking(
      *s, coll, 0, false, true, [](nodusComm_t c) { return nodusBarrier(c); }, [&] { return PMPI_Barrier(comm); });
}

}  // namespace

// ---- Initialisation and finalisation --------------------------------------------------------

NODUS_MPI_EXPORT int MPI_Init(int* argc, char*** argv) {
  const int rc = PMPI_Init(argc, argv);
  if (rc == MPI_SUCCESS) {
    int level = MPI_THREAD_SINGLE;
    PMPI_Query_thread(&level);
    Plugin::start(level);
  }
  return rc;
}

NODUS_MPI_EXPORT int MPI_Init_thread(int* argc, char*** argv, int required, int* provided) {
  const int rc = PMPI_Init_thread(argc, argv, required, provided);
  if (rc == MPI_SUCCESS) Plugin::start(*provided);
  return rc;
}

NODUS_MPI_EXPORT int MPI_Finalize(void) {
  Plugin::stop();
  return PMPI_Finalize();
}

// ---- Collectives ------------------------------------------------------------------------------
// Each entry point first asks whether the call is too small for nodus
// (Plugin::tooSmall) and if so jumps straight to PMPI_*; the rest of the
// routing is in the functions above.

namespace {
// Allgather and Reduce_scatter_block are small by one rank's block (their
// counters count the whole buffer).
bool smallBlocks(Plugin& p, int coll, int recvcount, MPI_Datatype recvtype, MPI_Comm comm) {
  int nranks = 0;
  return comm != MPI_COMM_NULL && p.commSize(comm, &nranks) && nranks > 0 &&
         p.tooSmall(coll, recvcount, recvtype, static_cast<uint64_t>(nranks));
}
}  // namespace

NODUS_MPI_EXPORT int MPI_Allreduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                                   MPI_Comm comm) {
  if (Plugin* p = Plugin::get(); p == nullptr || p->tooSmall(NODUS_MPI_ALLREDUCE, count, datatype))
    return PMPI_Allreduce(sendbuf, recvbuf, count, datatype, op, comm);
  return allreduce(sendbuf, recvbuf, count, datatype, op, comm, nullptr);
}

NODUS_MPI_EXPORT int MPI_Iallreduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                                    MPI_Comm comm, MPI_Request* request) {
  if (Plugin* p = Plugin::get();
      request == nullptr || p == nullptr || p->tooSmall(NODUS_MPI_IALLREDUCE, count, datatype))
    return PMPI_Iallreduce(sendbuf, recvbuf, count, datatype, op, comm, request);
  return allreduce(sendbuf, recvbuf, count, datatype, op, comm, request);
}

NODUS_MPI_EXPORT int MPI_Reduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                                int root, MPI_Comm comm) {
  if (Plugin* p = Plugin::get(); p == nullptr || p->tooSmall(NODUS_MPI_REDUCE, count, datatype))
    return PMPI_Reduce(sendbuf, recvbuf, count, datatype, op, root, comm);
  return reduce(sendbuf, recvbuf, count, datatype, op, root, comm, nullptr);
}

NODUS_MPI_EXPORT int MPI_Ireduce(const void* sendbuf, void* recvbuf, int count, MPI_Datatype datatype, MPI_Op op,
                                 int root, MPI_Comm comm, MPI_Request* request) {
  if (Plugin* p = Plugin::get();
      request == nullptr || p == nullptr || p->tooSmall(NODUS_MPI_IREDUCE, count, datatype))
    return PMPI_Ireduce(sendbuf, recvbuf, count, datatype, op, root, comm, request);
  return reduce(sendbuf, recvbuf, count, datatype, op, root, comm, request);
}

NODUS_MPI_EXPORT int MPI_Reduce_scatter_block(const void* sendbuf, void* recvbuf, int recvcount,
                                              MPI_Datatype datatype, MPI_Op op, MPI_Comm comm) {
  if (Plugin* p = Plugin::get();
      p == nullptr || smallBlocks(*p, NODUS_MPI_REDUCE_SCATTER_BLOCK, recvcount, datatype, comm))
    return PMPI_Reduce_scatter_block(sendbuf, recvbuf, recvcount, datatype, op, comm);
  return reduceScatter(sendbuf, recvbuf, recvcount, nullptr, datatype, op, comm, nullptr);
}

NODUS_MPI_EXPORT int MPI_Ireduce_scatter_block(const void* sendbuf, void* recvbuf, int recvcount,
                                               MPI_Datatype datatype, MPI_Op op, MPI_Comm comm,
                                               MPI_Request* request) {
  if (Plugin* p = Plugin::get(); request == nullptr || p == nullptr ||
                                 smallBlocks(*p, NODUS_MPI_IREDUCE_SCATTER_BLOCK, recvcount, datatype, comm))
    return PMPI_Ireduce_scatter_block(sendbuf, recvbuf, recvcount, datatype, op, comm, request);
  return reduceScatter(sendbuf, recvbuf, recvcount, nullptr, datatype, op, comm, request);
}

NODUS_MPI_EXPORT int MPI_Reduce_scatter(const void* sendbuf, void* recvbuf, const int recvcounts[],
                                        MPI_Datatype datatype, MPI_Op op, MPI_Comm comm) {
  if (recvcounts == nullptr) return PMPI_Reduce_scatter(sendbuf, recvbuf, recvcounts, datatype, op, comm);
  return reduceScatter(sendbuf, recvbuf, 0, recvcounts, datatype, op, comm, nullptr);
}

NODUS_MPI_EXPORT int MPI_Ireduce_scatter(const void* sendbuf, void* recvbuf, const int recvcounts[],
                                         MPI_Datatype datatype, MPI_Op op, MPI_Comm comm, MPI_Request* request) {
  if (recvcounts == nullptr || request == nullptr)
    return PMPI_Ireduce_scatter(sendbuf, recvbuf, recvcounts, datatype, op, comm, request);
  return reduceScatter(sendbuf, recvbuf, 0, recvcounts, datatype, op, comm, request);
}

NODUS_MPI_EXPORT int MPI_Bcast(void* buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm) {
  if (Plugin* p = Plugin::get(); p == nullptr || p->tooSmall(NODUS_MPI_BCAST, count, datatype))
    return PMPI_Bcast(buffer, count, datatype, root, comm);
  return bcast(buffer, count, datatype, root, comm, nullptr);
}

NODUS_MPI_EXPORT int MPI_Ibcast(void* buffer, int count, MPI_Datatype datatype, int root, MPI_Comm comm,
                                MPI_Request* request) {
  if (Plugin* p = Plugin::get(); request == nullptr || p == nullptr || p->tooSmall(NODUS_MPI_IBCAST, count, datatype))
    return PMPI_Ibcast(buffer, count, datatype, root, comm, request);
  return bcast(buffer, count, datatype, root, comm, request);
}

NODUS_MPI_EXPORT int MPI_Allgather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                                   int recvcount, MPI_Datatype recvtype, MPI_Comm comm) {
  if (Plugin* p = Plugin::get(); p == nullptr || smallBlocks(*p, NODUS_MPI_ALLGATHER, recvcount, recvtype, comm))
    return PMPI_Allgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm);
  return allgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, nullptr);
}

NODUS_MPI_EXPORT int MPI_Iallgather(const void* sendbuf, int sendcount, MPI_Datatype sendtype, void* recvbuf,
                                    int recvcount, MPI_Datatype recvtype, MPI_Comm comm, MPI_Request* request) {
  if (Plugin* p = Plugin::get();
      request == nullptr || p == nullptr || smallBlocks(*p, NODUS_MPI_IALLGATHER, recvcount, recvtype, comm))
    return PMPI_Iallgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, request);
  return allgather(sendbuf, sendcount, sendtype, recvbuf, recvcount, recvtype, comm, request);
}

NODUS_MPI_EXPORT int MPI_Barrier(MPI_Comm comm) { return barrier(comm, nullptr); }

NODUS_MPI_EXPORT int MPI_Ibarrier(MPI_Comm comm, MPI_Request* request) {
  if (request == nullptr) return PMPI_Ibarrier(comm, request);
  return barrier(comm, request);
}

// ---- Completion of requests --------------------------------------------------------------------
// Each form first completes those of its requests that are ours and finished
// in nodus, then lets MPI do the rest. The blocking forms alternate between
// that and one pass of MPI's progress (a Test call) until MPI can take over.

namespace {
nodus::mpi::PendingOps* pendingOps() {
  Plugin* p = Plugin::get();
  if (p == nullptr || p->pending().empty()) return nullptr;
  return &p->pending();
}
}  // namespace

NODUS_MPI_EXPORT int MPI_Wait(MPI_Request* request, MPI_Status* status) {
  nodus::mpi::PendingOps* ops = pendingOps();
  if (ops == nullptr || request == nullptr || !ops->ours(*request)) return PMPI_Wait(request, status);
  while (!ops->poll(*request)) {
    int flag = 0;
    PMPI_Test(request, &flag, MPI_STATUS_IGNORE);  // progress only: ours is not complete yet
  }
  return PMPI_Wait(request, status);
}

NODUS_MPI_EXPORT int MPI_Test(MPI_Request* request, int* flag, MPI_Status* status) {
  if (nodus::mpi::PendingOps* ops = pendingOps(); ops != nullptr && request != nullptr) ops->poll(*request);
  return PMPI_Test(request, flag, status);
}

NODUS_MPI_EXPORT int MPI_Request_get_status(MPI_Request request, int* flag, MPI_Status* status) {
  if (nodus::mpi::PendingOps* ops = pendingOps()) ops->poll(request);
  return PMPI_Request_get_status(request, flag, status);
}

NODUS_MPI_EXPORT int MPI_Request_free(MPI_Request* request) {
  // Erroneous for a non-blocking collective (MPI 4.0, 6.12): the error Open
  // MPI gives for its own, and the request stays valid.
  if (nodus::mpi::PendingOps* ops = pendingOps(); ops != nullptr && request != nullptr && ops->ours(*request))
    return Plugin::raise(MPI_COMM_WORLD, MPI_ERR_REQUEST);
  return PMPI_Request_free(request);
}

NODUS_MPI_EXPORT int MPI_Waitall(int count, MPI_Request requests[], MPI_Status statuses[]) {
  nodus::mpi::PendingOps* ops = pendingOps();
  if (ops == nullptr || !ops->anyOurs(count, requests)) return PMPI_Waitall(count, requests, statuses);
  // Once none of ours is unfinished, MPI's own blocking wait does the rest.
  while (!ops->pollAll(count, requests)) {
    int flag = 0;
    PMPI_Testall(count, requests, &flag, MPI_STATUSES_IGNORE);  // cannot succeed yet: progress only
  }
  return PMPI_Waitall(count, requests, statuses);
}

NODUS_MPI_EXPORT int MPI_Testall(int count, MPI_Request requests[], int* flag, MPI_Status statuses[]) {
  if (nodus::mpi::PendingOps* ops = pendingOps()) ops->pollAll(count, requests);
  return PMPI_Testall(count, requests, flag, statuses);
}

NODUS_MPI_EXPORT int MPI_Waitany(int count, MPI_Request requests[], int* index, MPI_Status* status) {
  nodus::mpi::PendingOps* ops = pendingOps();
  if (ops == nullptr || !ops->anyOurs(count, requests)) return PMPI_Waitany(count, requests, index, status);
  for (;;) {
    ops->pollAll(count, requests);
    int flag = 0;
    const int rc = PMPI_Testany(count, requests, index, &flag, status);
    if (rc != MPI_SUCCESS || flag) return rc;
  }
}

NODUS_MPI_EXPORT int MPI_Testany(int count, MPI_Request requests[], int* index, int* flag, MPI_Status* status) {
  if (nodus::mpi::PendingOps* ops = pendingOps()) ops->pollAll(count, requests);
  return PMPI_Testany(count, requests, index, flag, status);
}

NODUS_MPI_EXPORT int MPI_Waitsome(int incount, MPI_Request requests[], int* outcount, int indices[],
                                  MPI_Status statuses[]) {
  nodus::mpi::PendingOps* ops = pendingOps();
  if (ops == nullptr || !ops->anyOurs(incount, requests))
    return PMPI_Waitsome(incount, requests, outcount, indices, statuses);
  for (;;) {
    ops->pollAll(incount, requests);
    const int rc = PMPI_Testsome(incount, requests, outcount, indices, statuses);
    if (rc != MPI_SUCCESS || *outcount != 0) return rc;  // MPI_UNDEFINED: nothing active
  }
}

NODUS_MPI_EXPORT int MPI_Testsome(int incount, MPI_Request requests[], int* outcount, int indices[],
                                  MPI_Status statuses[]) {
  if (nodus::mpi::PendingOps* ops = pendingOps()) ops->pollAll(incount, requests);
  return PMPI_Testsome(incount, requests, outcount, indices, statuses);
}
