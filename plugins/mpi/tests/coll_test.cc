// Every intercepted collective, blocking and non-blocking, over every datatype
// and op the plugin maps, out of place and in place, on MPI_COMM_WORLD, a
// duplicate, a rank-reversed split and a parity split (sizes 1 and 2 at np 3).
// Results are checked element by element against values computed here; when
// the plugin is preloaded each call's route (nodus, or MPI and why) is
// checked against what the plugin's documentation promises.
//
//   coll_test [--expect-init-fail]
//
// --expect-init-fail: nodus is made to fail at init (NODUS_TRANSPORT=bogus):
// every call must still be right, through MPI, for reason init-failed.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "harness.h"
#include "values.h"

using harness::Harness;
using values::Type;

namespace {

constexpr unsigned char kGarbage = 0x5a;
constexpr size_t kGuard = 64;  // bytes past the end that no call may touch

struct Comm {
  MPI_Comm comm;
  const char* name;
  int rank = 0, size = 1;
};

class Test {
 public:
  explicit Test(Harness& h) : h_(h), types_(values::reductionTypes()) {}

  void run(Comm& c) {
    PMPI_Comm_rank(c.comm, &c.rank);
    PMPI_Comm_size(c.comm, &c.size);
    c_ = &c;
    seed_ = 1;
    lazyCreation();
    boundaries();
    for (const Type& t : types_)
      for (int op = values::Sum; op <= values::Max; ++op) {
        if (!values::nodusReduces(t, op)) continue;
        // Open MPI 4.1 compares MPI_OFFSET as unsigned: see offsetLikeMpi().
        if (t.type == MPI_OFFSET && (op == values::Min || op == values::Max)) continue;
        const bool nb = t.type == MPI_INT || t.type == MPI_DOUBLE || t.type == MPI_UINT8_T ||
                        t.type == MPI_C_FLOAT_COMPLEX;
        for (bool inPlace : {false, true}) {
          allreduce(t, op, big(t), inPlace, false);
          if (nb) allreduce(t, op, big(t), inPlace, true);
        }
      }
    for (MPI_Datatype dt : {MPI_INT32_T, MPI_DOUBLE, MPI_UINT8_T, MPI_C_FLOAT_COMPLEX, MPI_LONG, MPI_BYTE}) {
      const Type t = values::find(types_, dt);
      for (int op = values::Sum; op <= values::Max; ++op) {
        if (!values::nodusReduces(t, op)) continue;
        for (int root : {0, c.size - 1})
          for (bool inPlace : {false, true}) {
            reduce(t, op, big(t), root, inPlace, false);
            if (dt == MPI_DOUBLE || dt == MPI_UINT8_T) reduce(t, op, big(t), root, inPlace, true);
          }
      }
    }
    for (MPI_Datatype dt : {MPI_INT, MPI_FLOAT, MPI_DOUBLE, MPI_UINT64_T, MPI_INT8_T, MPI_C_DOUBLE_COMPLEX}) {
      const Type t = values::find(types_, dt);
      for (int op : {values::Sum, values::Min, values::Prod}) {
        if (!values::nodusReduces(t, op)) continue;
        for (bool inPlace : {false, true}) {
          reduceScatterBlock(t, op, big(t) / 2 + 1, inPlace, false);
          if (dt == MPI_INT || dt == MPI_DOUBLE) reduceScatterBlock(t, op, big(t) / 2 + 1, inPlace, true);
        }
      }
    }
    for (MPI_Datatype dt : {MPI_INT, MPI_DOUBLE, MPI_C_DOUBLE_COMPLEX, MPI_UINT8_T}) {
      const Type t = values::find(types_, dt);
      for (int op : {values::Sum, values::Max}) {
        if (!values::nodusReduces(t, op)) continue;
        for (bool inPlace : {false, true})
          for (int shape = 0; shape < 3; ++shape) {
            reduceScatter(t, op, shape, inPlace, false);
            if (dt != MPI_UINT8_T) reduceScatter(t, op, shape, inPlace, true);
          }
      }
    }
    for (MPI_Datatype dt : {MPI_BYTE, MPI_INT, MPI_DOUBLE, MPI_LONG_DOUBLE, MPI_SHORT, MPI_C_BOOL}) {
      for (int root : {0, c.size - 1, c.size / 2})
        for (size_t count : {size_t{3}, size_t{20011}}) {
          bcast(dt, count, root, false);
          if (dt == MPI_DOUBLE || dt == MPI_LONG_DOUBLE) bcast(dt, count, root, true);
        }
    }
    for (MPI_Datatype dt : {MPI_BYTE, MPI_INT, MPI_DOUBLE, MPI_SHORT, MPI_LONG_DOUBLE})
      for (bool inPlace : {false, true})
        for (size_t count : {size_t{5}, size_t{7001}}) {
          allgather(dt, count, inPlace, false);
          if (dt == MPI_INT || dt == MPI_LONG_DOUBLE) allgather(dt, count, inPlace, true);
        }
    barriers();
    completions();
    offsetLikeMpi();
    floatTolerance();
  }

 private:
  // Enough elements to be above any threshold the tests run with (a few KiB),
  // and a count no rank count divides.
  static size_t big(const Type& t) { return std::max<size_t>(4099, 20011 / static_cast<size_t>(t.elemBytes())); }

  // Where a call should go. `whole` is its size in bytes; `perRank` the block
  // the threshold compares: the whole buffer of Allreduce, Reduce and Bcast,
  // one rank's block of Allgather and Reduce_scatter_block, the whole vector
  // over the rank count for Reduce_scatter.
  Harness::Route expect(bool mapped, int unmappedReason, uint64_t whole, uint64_t perRank, bool nonBlocking,
                        bool isBarrier = false) {
    if (!mapped) return Harness::toMpi(unmappedReason);
    // A barrier moves nothing: on MPI unless the threshold is 0.
    if (isBarrier ? h_.minBytes() > 0 : (whole == 0 || perRank < static_cast<uint64_t>(h_.minBytes())))
      return Harness::toMpi(NODUS_MPI_FB_SMALL);
    if (c_->size == 1) return Harness::toMpi(NODUS_MPI_FB_ONE_RANK);
    // Only a blocking call that is not a barrier creates a nodus communicator.
    const int state = h_.commState(c_->comm);
    if ((nonBlocking || isBarrier) && state == NODUS_MPI_COMM_NONE) return Harness::toMpi(NODUS_MPI_FB_NOT_READY);
    if (h_.expectInitFail) return Harness::toMpi(NODUS_MPI_FB_INIT_FAILED);
    return Harness::toNodus();
  }

  std::string what(const char* coll, const Type& t, int op, size_t count, bool inPlace, bool nb, int root = -1) {
    char s[256];
    std::snprintf(s, sizeof s, "%s%s on %s(%d ranks) %s %s count %zu %s%s", nb ? "I" : "", coll, c_->name, c_->size,
                  t.name, values::opName(op), count, inPlace ? "in place" : "out of place",
                  root >= 0 ? (" root " + std::to_string(root)).c_str() : "");
    return s;
  }

  bool guardIntact(const std::vector<unsigned char>& buf, size_t used) {
    for (size_t i = used; i < buf.size(); ++i)
      if (buf[i] != kGarbage) return false;
    return true;
  }

  void wait(MPI_Request* r) {
    // Alternate the ways of completing a request, so all of them are used.
    const int how = (waitTurn_++) % 3;
    if (how == 0) {
      MPI_Wait(r, MPI_STATUS_IGNORE);
    } else if (how == 1) {
      int flag = 0;
      while (!flag) MPI_Test(r, &flag, MPI_STATUS_IGNORE);
    } else {
      MPI_Status st;
      MPI_Waitall(1, r, &st);
    }
    h_.check(*r == MPI_REQUEST_NULL, "a completed request was not set to MPI_REQUEST_NULL");
  }

  // Checks `count` elements of `buf` (scalars of `t`) against the reduction of op.
  void verifyReduced(const char* desc, const Type& t, int op, const void* buf, uint64_t firstScalar, uint64_t scalars,
                     int seed, bool digest = true) {
    uint64_t bad = 0, firstBad = 0;
    int64_t got0 = 0, want0 = 0;
    for (uint64_t s = 0; s < scalars; ++s) {
      const int64_t want = values::asStored(t, values::reduced(op, t, c_->size, firstScalar + s, seed));
      const int64_t got = values::get(t, buf, s);
      if (got != want && bad++ == 0) firstBad = s, got0 = got, want0 = want;
    }
    h_.check(bad == 0, "%s: %" PRIu64 " wrong of %" PRIu64 ", first at %" PRIu64 ": %" PRId64 " instead of %" PRId64,
             desc, bad, scalars, firstBad, got0, want0);
    if (digest) h_.digest(buf, scalars * static_cast<uint64_t>(t.scalarBytes));
  }

  // ---- Allreduce ---------------------------------------------------------------------

  void allreduce(const Type& t, int op, size_t count, bool inPlace, bool nb) {
    const int seed = ++seed_;
    const uint64_t scalars = count * static_cast<uint64_t>(t.scalars);
    const size_t bytes = count * static_cast<size_t>(t.elemBytes());
    std::vector<unsigned char> send(bytes + kGuard, kGarbage), recv(bytes + kGuard, kGarbage);
    void* in = inPlace ? recv.data() : send.data();
    for (uint64_t s = 0; s < scalars; ++s) values::put(t, in, s, values::gen(op, t, c_->rank, c_->size, s, seed));
    const std::string desc = what("Allreduce", t, op, count, inPlace, nb);
    const int coll = nb ? NODUS_MPI_IALLREDUCE : NODUS_MPI_ALLREDUCE;
    const auto route = expect(values::nodusReduces(t, op), NODUS_MPI_FB_OP, bytes, bytes, nb);
    const auto before = h_.counters(coll);
    const void* sb = inPlace ? MPI_IN_PLACE : send.data();
    int rc;
    if (nb) {
      MPI_Request r;
      rc = MPI_Iallreduce(sb, recv.data(), static_cast<int>(count), t.type, values::mpiOp(op), c_->comm, &r);
      wait(&r);
    } else {
      rc = MPI_Allreduce(sb, recv.data(), static_cast<int>(count), t.type, values::mpiOp(op), c_->comm);
    }
    h_.check(rc == MPI_SUCCESS, "%s returned %d", desc.c_str(), rc);
    h_.expectRoute(coll, before, route, desc.c_str());
    verifyReduced(desc.c_str(), t, op, recv.data(), 0, scalars, seed);
    h_.check(guardIntact(recv, bytes), "%s wrote past the end of recvbuf", desc.c_str());
  }

  // ---- Reduce --------------------------------------------------------------------------------

  void reduce(const Type& t, int op, size_t count, int root, bool inPlace, bool nb) {
    const int seed = ++seed_;
    const bool isRoot = c_->rank == root;
    const uint64_t scalars = count * static_cast<uint64_t>(t.scalars);
    const size_t bytes = count * static_cast<size_t>(t.elemBytes());
    std::vector<unsigned char> send(bytes + kGuard, kGarbage), recv(bytes + kGuard, kGarbage);
    const bool useInPlace = inPlace && isRoot;  // MPI_IN_PLACE is the root's only
    void* in = useInPlace ? recv.data() : send.data();
    for (uint64_t s = 0; s < scalars; ++s) values::put(t, in, s, values::gen(op, t, c_->rank, c_->size, s, seed));
    const std::string desc = what("Reduce", t, op, count, inPlace, nb, root);
    const int coll = nb ? NODUS_MPI_IREDUCE : NODUS_MPI_REDUCE;
    const auto route = expect(values::nodusReduces(t, op), NODUS_MPI_FB_OP, bytes, bytes, nb);
    const auto before = h_.counters(coll);
    const void* sb = useInPlace ? MPI_IN_PLACE : send.data();
    // Non-roots pass a buffer MPI must not need: null.
    void* rb = isRoot ? recv.data() : nullptr;
    int rc;
    if (nb) {
      MPI_Request r;
      rc = MPI_Ireduce(sb, rb, static_cast<int>(count), t.type, values::mpiOp(op), root, c_->comm, &r);
      wait(&r);
    } else {
      rc = MPI_Reduce(sb, rb, static_cast<int>(count), t.type, values::mpiOp(op), root, c_->comm);
    }
    h_.check(rc == MPI_SUCCESS, "%s returned %d", desc.c_str(), rc);
    h_.expectRoute(coll, before, route, desc.c_str());
    if (isRoot) {
      verifyReduced(desc.c_str(), t, op, recv.data(), 0, scalars, seed);
      h_.check(guardIntact(recv, bytes), "%s wrote past the end of recvbuf", desc.c_str());
    }
    if (!useInPlace) {
      bool untouched = true;
      for (uint64_t s = 0; s < scalars; ++s)
        untouched = untouched && values::get(t, send.data(), s) ==
                                     values::asStored(t, values::gen(op, t, c_->rank, c_->size, s, seed));
      h_.check(untouched, "%s modified sendbuf", desc.c_str());
    }
  }

  // ---- Reduce_scatter_block and Reduce_scatter ------------------------------------------------

  void reduceScatterBlock(const Type& t, int op, size_t block, bool inPlace, bool nb) {
    const int seed = ++seed_;
    const uint64_t per = static_cast<uint64_t>(t.scalars);
    const size_t eb = static_cast<size_t>(t.elemBytes());
    const size_t total = block * static_cast<size_t>(c_->size);
    std::vector<unsigned char> send(total * eb + kGuard, kGarbage),
        recv((inPlace ? total : block) * eb + kGuard, kGarbage);
    void* in = inPlace ? recv.data() : send.data();
    for (uint64_t s = 0; s < total * per; ++s) values::put(t, in, s, values::gen(op, t, c_->rank, c_->size, s, seed));
    const std::string desc = what("Reduce_scatter_block", t, op, block, inPlace, nb);
    const int coll = nb ? NODUS_MPI_IREDUCE_SCATTER_BLOCK : NODUS_MPI_REDUCE_SCATTER_BLOCK;
    const auto route = expect(values::nodusReduces(t, op), NODUS_MPI_FB_OP, total * eb, block * eb, nb);
    const auto before = h_.counters(coll);
    const void* sb = inPlace ? MPI_IN_PLACE : send.data();
    int rc;
    if (nb) {
      MPI_Request r;
      rc = MPI_Ireduce_scatter_block(sb, recv.data(), static_cast<int>(block), t.type, values::mpiOp(op), c_->comm,
                                     &r);
      wait(&r);
    } else {
      rc = MPI_Reduce_scatter_block(sb, recv.data(), static_cast<int>(block), t.type, values::mpiOp(op), c_->comm);
    }
    h_.check(rc == MPI_SUCCESS, "%s returned %d", desc.c_str(), rc);
    h_.expectRoute(coll, before, route, desc.c_str());
    verifyReduced(desc.c_str(), t, op, recv.data(), static_cast<uint64_t>(c_->rank) * block * per, block * per, seed);
    h_.check(guardIntact(recv, (inPlace ? total : block) * eb), "%s wrote past the end of recvbuf", desc.c_str());
  }

  // shape 0: every rank the same count; 1: unequal, one rank gets nothing;
  // 2: unequal and small for all but one rank.
  void reduceScatter(const Type& t, int op, int shape, bool inPlace, bool nb) {
    const int seed = ++seed_;
    const int p = c_->size;
    std::vector<int> counts(static_cast<size_t>(p));
    for (int r = 0; r < p; ++r) {
      if (shape == 0) counts[r] = 1503;
      else if (shape == 1) counts[r] = r == p / 2 && p > 1 ? 0 : 1000 + 317 * r;
      else counts[r] = r == p - 1 ? 4001 : 3 + r;
    }
    const uint64_t per = static_cast<uint64_t>(t.scalars);
    const size_t eb = static_cast<size_t>(t.elemBytes());
    const size_t total = static_cast<size_t>(std::accumulate(counts.begin(), counts.end(), 0L));
    size_t offset = 0;
    for (int r = 0; r < c_->rank; ++r) offset += static_cast<size_t>(counts[r]);
    const size_t mine = static_cast<size_t>(counts[c_->rank]);
    std::vector<unsigned char> send(total * eb + kGuard, kGarbage),
        recv((inPlace ? total : mine) * eb + kGuard, kGarbage);
    void* in = inPlace ? recv.data() : send.data();
    for (uint64_t s = 0; s < total * per; ++s) values::put(t, in, s, values::gen(op, t, c_->rank, c_->size, s, seed));
    char shapeName[32];
    std::snprintf(shapeName, sizeof shapeName, "Reduce_scatter/shape%d", shape);
    const std::string desc = what(shapeName, t, op, total, inPlace, nb);
    const int coll = nb ? NODUS_MPI_IREDUCE_SCATTER : NODUS_MPI_REDUCE_SCATTER;
    const auto route = expect(values::nodusReduces(t, op), NODUS_MPI_FB_OP, total * eb,
                              total * eb / static_cast<size_t>(c_->size), nb);
    const auto before = h_.counters(coll);
    const void* sb = inPlace ? MPI_IN_PLACE : send.data();
    int rc;
    if (nb) {
      MPI_Request r;
      rc = MPI_Ireduce_scatter(sb, recv.data(), counts.data(), t.type, values::mpiOp(op), c_->comm, &r);
      wait(&r);
    } else {
      rc = MPI_Reduce_scatter(sb, recv.data(), counts.data(), t.type, values::mpiOp(op), c_->comm);
    }
    h_.check(rc == MPI_SUCCESS, "%s returned %d", desc.c_str(), rc);
    h_.expectRoute(coll, before, route, desc.c_str());
    verifyReduced(desc.c_str(), t, op, recv.data(), offset * per, mine * per, seed);
    h_.check(guardIntact(recv, (inPlace ? total : mine) * eb), "%s wrote past the end of recvbuf", desc.c_str());
  }

  // ---- Bcast and Allgather: bytes of any predefined type ------------------------------------

  static int typeSize(MPI_Datatype dt) {
    int s = 0;
    PMPI_Type_size(dt, &s);
    return s;
  }
  static unsigned char dataByte(int rank, uint64_t i, int seed) {
    return static_cast<unsigned char>(values::mix(i + static_cast<uint64_t>(seed) * 7919) + static_cast<uint64_t>(rank) * 131);
  }

  void bcast(MPI_Datatype dt, size_t count, int root, bool nb) {
    const int seed = ++seed_;
    const size_t bytes = count * static_cast<size_t>(typeSize(dt));
    std::vector<unsigned char> buf(bytes + kGuard, kGarbage);
    if (c_->rank == root)
      for (size_t i = 0; i < bytes; ++i) buf[i] = dataByte(root, i, seed);
    char name[64];
    PMPI_Type_get_name(dt, name, &rootLen_);
    const Type t{dt, name, values::Kind::Uint, 1, 1, false};
    const std::string desc = what("Bcast", t, values::Data, count, false, nb, root);
    const int coll = nb ? NODUS_MPI_IBCAST : NODUS_MPI_BCAST;
    const auto route = expect(true, 0, bytes, bytes, nb);
    const auto before = h_.counters(coll);
    int rc;
    if (nb) {
      MPI_Request r;
      rc = MPI_Ibcast(buf.data(), static_cast<int>(count), dt, root, c_->comm, &r);
      wait(&r);
    } else {
      rc = MPI_Bcast(buf.data(), static_cast<int>(count), dt, root, c_->comm);
    }
    h_.check(rc == MPI_SUCCESS, "%s returned %d", desc.c_str(), rc);
    h_.expectRoute(coll, before, route, desc.c_str());
    size_t bad = 0;
    for (size_t i = 0; i < bytes; ++i) bad += buf[i] != dataByte(root, i, seed);
    h_.check(bad == 0, "%s: %zu wrong bytes of %zu", desc.c_str(), bad, bytes);
    h_.check(guardIntact(buf, bytes), "%s wrote past the end", desc.c_str());
    h_.digest(buf.data(), bytes);
  }

  void allgather(MPI_Datatype dt, size_t count, bool inPlace, bool nb) {
    const int seed = ++seed_;
    const size_t block = count * static_cast<size_t>(typeSize(dt));
    const size_t total = block * static_cast<size_t>(c_->size);
    std::vector<unsigned char> send(block + kGuard, kGarbage), recv(total + kGuard, kGarbage);
    unsigned char* own = inPlace ? recv.data() + static_cast<size_t>(c_->rank) * block : send.data();
    for (size_t i = 0; i < block; ++i) own[i] = dataByte(c_->rank, i, seed);
    char name[64];
    PMPI_Type_get_name(dt, name, &rootLen_);
    const Type t{dt, name, values::Kind::Uint, 1, 1, false};
    const std::string desc = what("Allgather", t, values::Data, count, inPlace, nb);
    const int coll = nb ? NODUS_MPI_IALLGATHER : NODUS_MPI_ALLGATHER;
    const auto route = expect(true, 0, total, block, nb);
    const auto before = h_.counters(coll);
    const void* sb = inPlace ? MPI_IN_PLACE : send.data();
    int rc;
    if (nb) {
      MPI_Request r;
      rc = MPI_Iallgather(sb, static_cast<int>(count), dt, recv.data(), static_cast<int>(count), dt, c_->comm, &r);
      wait(&r);
    } else {
      rc = MPI_Allgather(sb, static_cast<int>(count), dt, recv.data(), static_cast<int>(count), dt, c_->comm);
    }
    h_.check(rc == MPI_SUCCESS, "%s returned %d", desc.c_str(), rc);
    h_.expectRoute(coll, before, route, desc.c_str());
    size_t bad = 0;
    for (int r = 0; r < c_->size; ++r)
      for (size_t i = 0; i < block; ++i) bad += recv[static_cast<size_t>(r) * block + i] != dataByte(r, i, seed);
    h_.check(bad == 0, "%s: %zu wrong bytes of %zu", desc.c_str(), bad, total);
    h_.check(guardIntact(recv, total), "%s wrote past the end of recvbuf", desc.c_str());
    h_.digest(recv.data(), total);
  }

  // ---- The rest ---------------------------------------------------------------------------

  // A fresh communicator gets its nodus communicator at its first eligible
  // blocking call; before that, non-blocking calls go to MPI.
  // The same calls with and without the preload (results feed the digest);
  // only the state checks need the library.
  void lazyCreation() {
    const Type t = values::find(types_, MPI_INT);
    const bool fresh = h_.preloaded && c_->comm != MPI_COMM_WORLD;
    auto expectState = [&](int want, const char* when) {
      if (fresh)
        h_.check(h_.commState(c_->comm) == want, "%s: state %d %s, expected %d", c_->name, h_.commState(c_->comm),
                 when, want);
    };
    const int created = c_->size == 1 ? NODUS_MPI_COMM_UNSUITABLE
                        : h_.expectInitFail ? NODUS_MPI_COMM_INIT_FAILED
                                            : NODUS_MPI_COMM_ACTIVE;
    // Three ints are small unless the threshold is at most 12 bytes (0: the
    // call creates the communicator).
    const bool smallIsSmall = h_.minBytes() > static_cast<long long>(3 * sizeof(int));
    expectState(NODUS_MPI_COMM_NONE, "before any collective");
    allreduce(t, values::Sum, 3, false, false);  // small: does not create one
    expectState(smallIsSmall ? NODUS_MPI_COMM_NONE : created, "after a small call");
    allreduce(t, values::Sum, big(t), false, true);  // non-blocking: MPI (not-ready), still none
    expectState(c_->size == 1 ? NODUS_MPI_COMM_UNSUITABLE : smallIsSmall ? NODUS_MPI_COMM_NONE : created,
                "after a non-blocking call");
    allreduce(t, values::Sum, big(t), false, false);  // creates it
    expectState(created, "after the first large blocking call");
  }

  // Counts 0 and 1, and sizes either side of the threshold.
  void boundaries() {
    const Type i8 = values::find(types_, MPI_INT8_T);
    allreduce(i8, values::Sum, 0, false, false);
    allreduce(i8, values::Sum, 1, true, false);
    const long long m = h_.preloaded ? h_.minBytes() : 1000;
    if (m > 1) allreduce(i8, values::Max, static_cast<size_t>(m - 1), false, false);
    allreduce(i8, values::Max, static_cast<size_t>(std::max(m, 1LL)), false, false);
    allreduce(i8, values::Min, static_cast<size_t>(std::max(m, 1LL)), false, true);
    // Allgather and Reduce_scatter_block are small by one rank's block, not
    // by the whole buffer: just below the threshold per rank is MPI's even
    // though every rank receives more than the threshold in all.
    const Type u8 = values::find(types_, MPI_UINT8_T);
    for (bool nb : {false, true}) {
      if (m > 1) allgather(MPI_BYTE, static_cast<size_t>(m - 1), false, nb);
      allgather(MPI_BYTE, static_cast<size_t>(std::max(m, 1LL)), nb, nb);
      if (m > 1) reduceScatterBlock(u8, values::Max, static_cast<size_t>(m - 1), false, nb);
      reduceScatterBlock(u8, values::Max, static_cast<size_t>(std::max(m, 1LL)), nb, nb);
    }
    bcast(MPI_BYTE, 0, 0, false);
    allgather(MPI_BYTE, 0, false, false);
  }

  void barriers() {
    const Type t{MPI_DATATYPE_NULL, "-", values::Kind::Uint, 1, 1, false};
    for (bool nb : {false, true}) {
      const std::string desc = what("Barrier", t, values::Data, 0, false, nb);
      const int coll = nb ? NODUS_MPI_IBARRIER : NODUS_MPI_BARRIER;
      const auto route = expect(true, 0, 0, 0, nb, true);
      const auto before = h_.counters(coll);
      int rc;
      if (nb) {
        MPI_Request r;
        rc = MPI_Ibarrier(c_->comm, &r);
        wait(&r);
      } else {
        rc = MPI_Barrier(c_->comm);
      }
      h_.check(rc == MPI_SUCCESS, "%s returned %d", desc.c_str(), rc);
      h_.expectRoute(coll, before, route, desc.c_str());
    }
  }

  // Non-blocking nodus requests mixed with the program's own MPI requests,
  // completed by Waitall / Waitany / Waitsome / Testall / Testany /
  // Testsome / Request_get_status, and one freed with MPI_Request_free.
  void completions() {
    const Type t = values::find(types_, MPI_DOUBLE);
    const size_t n = big(t);
    const int p = c_->size, me = c_->rank;
    const int next = (me + 1) % p, prev = (me + p - 1) % p;
    for (int form = 0; form < 6; ++form) {
      const int seed = ++seed_;
      std::vector<double> a(n), ra(n), b(n), rb(n);
      for (size_t i = 0; i < n; ++i) {
        a[i] = static_cast<double>(values::gen(values::Sum, t, me, p, i, seed));
        b[i] = static_cast<double>(values::gen(values::Sum, t, me, p, i, seed + 1000));
      }
      int token = me * 10 + form, got = -1;
      MPI_Request reqs[4];
      MPI_Iallreduce(a.data(), ra.data(), static_cast<int>(n), MPI_DOUBLE, MPI_SUM, c_->comm, &reqs[0]);
      MPI_Irecv(&got, 1, MPI_INT, prev, 77, c_->comm, &reqs[1]);
      MPI_Isend(&token, 1, MPI_INT, next, 77, c_->comm, &reqs[2]);
      MPI_Iallreduce(b.data(), rb.data(), static_cast<int>(n), MPI_DOUBLE, MPI_SUM, c_->comm, &reqs[3]);
      MPI_Status st[4];
      int done = 0;
      switch (form) {
        case 0: MPI_Waitall(4, reqs, st); break;
        case 1:
          while (done < 4) {
            int idx = -1;
            MPI_Waitany(4, reqs, &idx, &st[0]);
            h_.check(idx >= 0 && idx < 4, "Waitany index %d", idx);
            ++done;
          }
          break;
        case 2:
          while (done < 4) {
            int outc = 0, idx[4];
            MPI_Waitsome(4, reqs, &outc, idx, st);
            h_.check(outc > 0, "Waitsome returned %d", outc);
            done += std::max(outc, 1);
          }
          break;
        case 3: {
          int flag = 0;
          while (!flag) MPI_Testall(4, reqs, &flag, st);
          break;
        }
        case 4:
          while (done < 4) {
            int idx = -1, flag = 0;
            MPI_Testany(4, reqs, &idx, &flag, &st[0]);
            if (flag && idx != MPI_UNDEFINED) ++done;
            if (flag && idx == MPI_UNDEFINED) break;
          }
          break;
        case 5: {
          // Polled to completion without being freed, then waited for.
          int flag = 0;
          while (!flag) MPI_Request_get_status(reqs[3], &flag, MPI_STATUS_IGNORE);
          h_.check(reqs[3] != MPI_REQUEST_NULL, "Request_get_status freed the request");
          MPI_Waitall(4, reqs, st);
          break;
        }
      }
      for (int i = 0; i < 4; ++i)
        h_.check(reqs[i] == MPI_REQUEST_NULL, "completion form %d left request %d active", form, i);
      h_.check(got == prev * 10 + form, "completion form %d: point-to-point got %d", form, got);
      verifyReduced("Iallreduce (mixed completion) a", t, values::Sum, ra.data(), 0, n, seed);
      verifyReduced("Iallreduce (mixed completion) b", t, values::Sum, rb.data(), 0, n, seed + 1000);
    }
  }

  // MIN/MAX must compare the way the MPI library does, whatever the standard
  // says: the preloaded result is checked against PMPI_Allreduce's, bit for bit.
  void offsetLikeMpi() {
    const size_t n = 3001;
    std::vector<MPI_Offset> in(n), got(n), ref(n);
    for (size_t i = 0; i < n; ++i)
      in[i] = static_cast<MPI_Offset>(values::mix(i * 31 + static_cast<uint64_t>(c_->rank))) >> 40;
    for (MPI_Op op : {MPI_MIN, MPI_MAX}) {
      MPI_Allreduce(in.data(), got.data(), static_cast<int>(n), MPI_OFFSET, op, c_->comm);
      PMPI_Allreduce(in.data(), ref.data(), static_cast<int>(n), MPI_OFFSET, op, c_->comm);
      h_.check(got == ref, "MPI_OFFSET %s on %s differs from the MPI library's", op == MPI_MIN ? "min" : "max",
               c_->name);
      h_.digest(got.data(), n * sizeof(MPI_Offset));
    }
  }

  // Random reals: sums in a different order than MPI's may differ in the last
  // bits. Documented tolerance: |nodus - MPI| <= 2 * nranks * eps * sum|x_i|.
  void floatTolerance() {
    std::mt19937_64 rng(static_cast<uint64_t>(1234 + c_->rank));
    std::uniform_real_distribution<double> dist(-1.0, 1.0);
    const size_t n = 30011;
    std::vector<double> d(n), dr(n), dref(n), dabs(n), dabsSum(n);
    std::vector<float> f(n), fr(n), fref(n);
    for (size_t i = 0; i < n; ++i) {
      d[i] = dist(rng) * std::ldexp(1.0, static_cast<int>(i % 40) - 20);
      f[i] = static_cast<float>(d[i]);
      dabs[i] = std::fabs(d[i]);
    }
    MPI_Allreduce(d.data(), dr.data(), static_cast<int>(n), MPI_DOUBLE, MPI_SUM, c_->comm);
    MPI_Allreduce(f.data(), fr.data(), static_cast<int>(n), MPI_FLOAT, MPI_SUM, c_->comm);
    PMPI_Allreduce(d.data(), dref.data(), static_cast<int>(n), MPI_DOUBLE, MPI_SUM, c_->comm);
    PMPI_Allreduce(f.data(), fref.data(), static_cast<int>(n), MPI_FLOAT, MPI_SUM, c_->comm);
    PMPI_Allreduce(dabs.data(), dabsSum.data(), static_cast<int>(n), MPI_DOUBLE, MPI_SUM, c_->comm);
    size_t bad = 0;
    for (size_t i = 0; i < n; ++i) {
      const double tolD = 2.0 * c_->size * 0x1p-52 * dabsSum[i];
      const double tolF = 2.0 * c_->size * 0x1p-23 * dabsSum[i] * 1.0001;
      bad += std::fabs(dr[i] - dref[i]) > tolD;
      bad += std::fabs(static_cast<double>(fr[i]) - fref[i]) > tolF;
    }
    h_.check(bad == 0, "random-real Allreduce on %s: %zu elements outside the tolerance", c_->name, bad);
  }

  Harness& h_;
  std::vector<Type> types_;
  Comm* c_ = nullptr;
  int seed_ = 0;
  int waitTurn_ = 0;
  int rootLen_ = 0;
};

}  // namespace

int main(int argc, char** argv) {
  Harness h(&argc, &argv);
  if (h.preloaded && !h.expectInitFail)
    h.check(h.commState(MPI_COMM_WORLD) == NODUS_MPI_COMM_ACTIVE, "MPI_COMM_WORLD has no nodus communicator");
  if (h.preloaded && h.expectInitFail)
    h.check(h.commState(MPI_COMM_WORLD) == NODUS_MPI_COMM_INIT_FAILED, "MPI_COMM_WORLD: state %d, expected init-failed",
            h.commState(MPI_COMM_WORLD));
  Test test(h);
  Comm world{MPI_COMM_WORLD, "world"};
  test.run(world);
  MPI_Comm dup = MPI_COMM_NULL, reversed = MPI_COMM_NULL, parity = MPI_COMM_NULL;
  MPI_Comm_dup(MPI_COMM_WORLD, &dup);
  MPI_Comm_split(MPI_COMM_WORLD, 0, h.size - h.rank, &reversed);
  MPI_Comm_split(MPI_COMM_WORLD, h.rank % 2, h.rank, &parity);
  Comm d{dup, "dup"}, r{reversed, "reversed"}, q{parity, "parity"};
  test.run(d);
  test.run(r);
  test.run(q);
  MPI_Comm_free(&dup);
  MPI_Comm_free(&reversed);
  MPI_Comm_free(&parity);
  if (h.preloaded)
    h.check(h.commState(MPI_COMM_WORLD) == (h.expectInitFail ? NODUS_MPI_COMM_INIT_FAILED : NODUS_MPI_COMM_ACTIVE),
            "MPI_COMM_WORLD changed state");
  return h.finish("coll_test");
}
