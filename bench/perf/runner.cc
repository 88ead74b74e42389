#include "perf/runner.h"

#include <algorithm>
#include <chrono>
#include <climits>
#include <cstring>
#include <limits>
#include <optional>
#include <string>

namespace nodus_perf {

const char* gAlgo = nullptr;

nodusConfig_t perfConfig(const char* algo) {
  nodusConfig_t cfg = NODUS_CONFIG_INITIALIZER;
  cfg.algo = algo ? algo : gAlgo;
  return cfg;
}

Runner::Runner(const Options& opt, int rank, int nranks, nodusComm_t comm, Group& group,
               bool mpiBaseline, Reporter* reporter)
    : opt_(opt),
      rank_(rank),
      nranks_(nranks),
      comm_(comm),
      group_(group),
      mpiBaseline_(mpiBaseline),
      reporter_(reporter),
      sizes_(sweepSizes(opt)) {
  // Every size's send and receive buffers fit in maxBytes. Allocate and touch
  // them once: a page fault costs more than moving the page.
  capacity_ = std::max<size_t>((opt.maxBytes + 4095) / 4096 * 4096, 4096);
  send_ = allocTouched(capacity_);
  recv_ = allocTouched(capacity_);
}

nodusComm_t Runner::splitMode() {
  const int k = opt_.split, color = rank_ % k, key = rank_;
  const int reps = std::max(3, std::min(opt_.iters, 20));
  // Each new-id group's root is its lowest rank (= its colour); the ids go
  // to the members over the parent communicator, as a job would share them.
  std::vector<nodusUniqueId> ids(static_cast<size_t>(nranks_));
  int groupSize = 0;
  for (int r = color; r < nranks_; r += k) ++groupSize;
  double splitUs = 0, idUs = 0;
  for (int i = 0; i < reps; ++i) {
    nodusComm_t child = nullptr;
    group_.barrier();
    auto t0 = std::chrono::steady_clock::now();
    checkNodus(nodusCommSplit(comm_, color, key, &child, nullptr), "nodusCommSplit", comm_, rank_);
    splitUs += group_.maxAll(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
    group_.barrier();
    checkNodus(nodusCommDestroy(child), "nodusCommDestroy", nullptr, rank_);
    group_.barrier();
    t0 = std::chrono::steady_clock::now();
    nodusUniqueId mine{};
    if (rank_ < k) checkNodus(nodusGetUniqueId(&mine), "nodusGetUniqueId", nullptr, rank_);
    checkNodus(nodusAllGather(&mine, ids.data(), sizeof(mine), nodusUint8, comm_), "nodusAllGather (ids)", comm_, rank_);
    checkNodus(nodusCommInitRank(&child, groupSize, ids[static_cast<size_t>(color)], rank_ / k), "nodusCommInitRank",
               nullptr, rank_);
    idUs += group_.maxAll(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
    group_.barrier();
    checkNodus(nodusCommDestroy(child), "nodusCommDestroy", nullptr, rank_);
  }
  splitUs /= reps;
  idUs /= reps;
  if (reporter_ != nullptr) {
    char line[256];
    std::snprintf(line, sizeof line,
                  "split into %d communicator(s) (rank %% %d) of %d ranks: nodusCommSplit %.1f us, from new unique ids "
                  "%.1f us (%.1fx; slowest rank, mean of %d)",
                  k, k, nranks_, splitUs, idUs, splitUs > 0 ? idUs / splitUs : 0.0, reps);
    reporter_->progress(line);
  }
  nodusComm_t parent = comm_, child = nullptr;
  checkNodus(nodusCommSplit(parent, color, key, &child, nullptr), "nodusCommSplit", parent, rank_);
  comm_ = child;
  checkNodus(nodusCommUserRank(child, &rank_), "nodusCommUserRank", child, rank_);
  checkNodus(nodusCommCount(child, &nranks_), "nodusCommCount", child, rank_);
#if NODUS_PERF_MPI
  if (mpiBaseline_) MPI_Comm_split(MPI_COMM_WORLD, color, key, &mpiComm_);
#endif
  if (reporter_ != nullptr)
    reporter_->progress("the tables below: communicator 0 of the split (" + std::to_string(nranks_) +
                        " ranks), all " + std::to_string(k) + " running at once");
  return parent;
}

uint64_t Runner::run() {
  nodusComm_t parent = opt_.split > 0 ? splitMode() : nullptr;
  const uint64_t wrong = sweep();
  if (parent != nullptr) {
    group_.barrier();
    checkNodus(nodusCommDestroy(comm_), "nodusCommDestroy", nullptr, rank_);
    comm_ = parent;
#if NODUS_PERF_MPI
    if (mpiComm_ != MPI_COMM_WORLD) MPI_Comm_free(&mpiComm_);
    mpiComm_ = MPI_COMM_WORLD;
#endif
  }
  return wrong;
}

uint64_t Runner::sweep() {
  uint64_t totalWrong = 0;
  uint64_t seed = 0;
  for (Coll c : opt_.colls) {
    if (reporter_ != nullptr) reporter_->beginTable(c);
    for (Row row : sweepRows(c)) {
      const TypeInfo& ti = typeInfo(row.type);
      for (int ip = 0; ip < 2; ++ip) {
        row.place[ip] =
            measure(c, ti, row.op, row.rankCount, row.bytes, ip == 1, ++seed, mpiBaseline_);
        if (row.place[ip].wrong > 0) totalWrong += static_cast<uint64_t>(row.place[ip].wrong);
      }
      if (reporter_ != nullptr) {
        row.algo = algorithmFor(row);
        reporter_->row(row);
      }
    }
    if (reporter_ != nullptr) reporter_->endTable(c);
  }
  return totalWrong;
}

uint64_t Runner::runAll(CommMaker& maker) {
  const std::vector<std::string> names = algorithmNames();
  std::vector<AlgoRow> rows;
  for (Coll c : opt_.colls)
    for (const Row& r : sweepRows(c))
      rows.push_back(AlgoRow{r, nullptr, std::vector<std::optional<Measurement>>(names.size())});
  if (reporter_ != nullptr)
    reporter_->progress(std::string("tuner: NODUS_ALGO unset, asking for its picks") +
                        (mpiBaseline_ ? "; timing the MPI baseline" : ""));
  comm_ = maker.create(nullptr);
  for (AlgoRow& ar : rows) {
    ar.pick = algorithmFor(ar.row);
    if (mpiBaseline_)
      timeMpi(ar.row.coll, typeInfo(ar.row.type), ar.row.op, ar.row.rankCount, ar.row.bytes,
              false, &ar.row.place[0]);
  }
  retire();

  uint64_t totalWrong = 0;
  uint64_t seed = 0;
  // Several rounds: the algorithms in turn, the other way round every other
  // round, so that a machine that slows down for a while (shared VMs do,
  // 2x and more) does not slow one algorithm's whole column.
  for (int round = 0; round < opt_.rounds; ++round)
  for (size_t step = 0; step < names.size(); ++step) {
    const size_t k = round % 2 == 0 ? step : names.size() - 1 - step;
    comm_ = maker.create(names[k].c_str());
    // A rank that disagreed would run another plan than its peers: stop
    // instead of hanging.
    std::vector<char> runs(rows.size(), 0);
    size_t nruns = 0;
    for (size_t i = 0; i < rows.size(); ++i) {
      runs[i] = names[k] == algorithmFor(rows[i].row);
      const uint64_t agree = group_.sumAll(runs[i] ? 1 : 0);
      if (agree != 0 && agree != static_cast<uint64_t>(nranks_))
        fatal(rank_, "ranks disagree on whether %s runs %s of %zu bytes", names[k].c_str(),
              collName(rows[i].row.coll), rows[i].row.bytes);
      nruns += runs[i] ? 1 : 0;
    }
    if (reporter_ != nullptr) {
      std::string what = (opt_.rounds > 1 ? "round " + std::to_string(round + 1) + "/" +
                                                std::to_string(opt_.rounds) + ", "
                                          : std::string()) +
                         "algorithm " + std::to_string(k + 1) + "/" + std::to_string(names.size()) + " " +
                         names[k] + ": ";
      if (nruns == 0)
        what += "runs none of these calls, skipped";
      else
        what +=
            "timing " + std::to_string(nruns) + " of " + std::to_string(rows.size()) + " calls" +
            (nruns < rows.size() ? " (the rest would fall back to the tuner: not timed)" : "");
      reporter_->progress(what);
    }
    for (size_t i = 0; i < rows.size(); ++i) {
      if (!runs[i]) continue;
      const Row& r = rows[i].row;
      const Measurement m =
          measure(r.coll, typeInfo(r.type), r.op, r.rankCount, r.bytes, false, ++seed, false);
      if (m.wrong > 0) totalWrong += static_cast<uint64_t>(m.wrong);
      std::optional<Measurement>& cell = rows[i].cells[k];
      if (!cell || m.timeUs < cell->timeUs) {
        const int64_t wrong = cell ? std::max(cell->wrong, m.wrong) : m.wrong;
        cell = m;
        cell->wrong = wrong;
      } else {
        cell->wrong = std::max(cell->wrong, m.wrong);
      }
    }
    retire();
  }
  if (reporter_ != nullptr)
    for (Coll c : opt_.colls) reporter_->algoTable(c, rows, names);
  return totalWrong;
}

std::vector<Row> Runner::sweepRows(Coll c) const {
  std::vector<Row> rows;
  for (nodusDataType_t type : opt_.types) {
    const TypeInfo& ti = typeInfo(type);
    const std::vector<nodusRedOp_t> ops =
        collHasOp(c) ? opt_.ops : std::vector<nodusRedOp_t>{nodusSum};
    for (nodusRedOp_t op : ops) {
      size_t previous = std::numeric_limits<size_t>::max();
      for (size_t size : sizes_) {
        const size_t parts = collSplitsSize(c) ? static_cast<size_t>(nranks_) : 1;
        const size_t rankCount = size / (ti.size * parts);
        if (rankCount == 0) continue;
        const size_t bytes = rankCount * ti.size * parts;
        if (bytes == previous) continue;  // a size that rounds to the one before
        previous = bytes;
        Row row{};
        row.coll = c;
        row.type = type;
        row.op = op;
        row.root = collHasRoot(c) ? opt_.root : -1;
        row.bytes = bytes;
        row.count = bytes / ti.size;
        row.rankCount = rankCount;
        rows.push_back(row);
      }
    }
  }
  return rows;
}

const char* Runner::algorithmFor(const Row& r) const {
  const char* name = nullptr;
  checkNodus(nodusCommGetAlgorithm(comm_, collEnum(r.coll), r.rankCount, r.type,
                                   r.root < 0 ? 0 : r.root, &name),
             "nodusCommGetAlgorithm", comm_, rank_);
  return name;
}

void Runner::retire() {
  group_.barrier();
  checkNodus(nodusCommDestroy(comm_), "nodusCommDestroy", nullptr, rank_);
  comm_ = nullptr;
}

Buffer Runner::allocTouched(size_t bytes) {
  void* p = std::aligned_alloc(4096, bytes);
  if (p == nullptr) fatal(rank_, "cannot allocate %zu bytes", bytes);
  std::memset(p, 0, bytes);
  return Buffer(static_cast<std::byte*>(p));
}

void Runner::nodusBuffers(Coll c, size_t rankCount, size_t elemSize, bool inPlace, const void** send,
                          void** recv) const {
  std::byte* s = send_.get();
  std::byte* r = recv_.get();
  const size_t mine = static_cast<size_t>(rank_) * rankCount * elemSize;
  *send = s;
  *recv = r;
  if (!inPlace) return;
  switch (c) {
    case Coll::AllReduce:
    case Coll::Broadcast:
    case Coll::Reduce: *send = r; break;
    case Coll::AllGather: *send = r + mine; break;
    case Coll::ReduceScatter:
      *send = r;
      *recv = r + mine;
      break;
    case Coll::AllToAll: *send = r; break;
    // In place on the root only (nodus.h): elsewhere there is one buffer anyway.
    case Coll::Gather:
      if (rank_ == opt_.root) *send = r + mine;
      break;
    case Coll::Scatter:
      if (rank_ == opt_.root) {
        *send = r;
        *recv = r + mine;
      }
      break;
  }
}

void Runner::callNodus(Coll c, const void* send, void* recv, size_t count, nodusDataType_t type,
                       nodusRedOp_t op) const {
  nodusResult_t res = nodusSuccess;
  switch (c) {
    case Coll::AllReduce: res = nodusAllReduce(send, recv, count, type, op, comm_); break;
    case Coll::AllGather: res = nodusAllGather(send, recv, count, type, comm_); break;
    case Coll::ReduceScatter: res = nodusReduceScatter(send, recv, count, type, op, comm_); break;
    case Coll::Broadcast: res = nodusBroadcast(send, recv, count, type, opt_.root, comm_); break;
    case Coll::Reduce: res = nodusReduce(send, recv, count, type, op, opt_.root, comm_); break;
    case Coll::AllToAll: res = nodusAllToAll(send, recv, count, type, comm_); break;
    case Coll::Gather: res = nodusGather(send, recv, count, type, opt_.root, comm_); break;
    case Coll::Scatter: res = nodusScatter(send, recv, count, type, opt_.root, comm_); break;
  }
  checkNodus(res, collName(c), comm_, rank_);
}

template <class F>
double Runner::timeLoop(F&& once) {
  for (int i = 0; i < opt_.warmup; ++i) once();
  group_.barrier();
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < opt_.iters; ++i) once();
  const auto t1 = std::chrono::steady_clock::now();
  const double us = std::chrono::duration<double, std::micro>(t1 - t0).count() / opt_.iters;
  return group_.maxAll(us);
}

Measurement Runner::measure(Coll c, const TypeInfo& ti, nodusRedOp_t op, size_t rankCount, size_t bytes,
                            bool inPlace, uint64_t seed, bool withMpi) {
  Measurement m;
  const void* send = nullptr;
  void* recv = nullptr;
  nodusBuffers(c, rankCount, ti.size, inPlace, &send, &recv);
  const double factor = busFactor(c, nranks_);
  m.timeUs = timeLoop([&] { callNodus(c, send, recv, rankCount, ti.type, op); });
  m.algbw = m.timeUs > 0 ? static_cast<double>(bytes) / m.timeUs / 1e3 : 0.0;
  m.busbw = m.algbw * factor;
  if (withMpi) timeMpi(c, ti, op, rankCount, bytes, inPlace, &m);
  if (opt_.check)
    m.wrong = static_cast<int64_t>(check(c, ti, op, rankCount, inPlace, seed, send, recv));
  return m;
}

void Runner::timeMpi(Coll c, const TypeInfo& ti, nodusRedOp_t op, size_t rankCount, size_t bytes,
                     bool inPlace, Measurement* m) {
#if NODUS_PERF_MPI
  MPI_Datatype dt = MPI_DATATYPE_NULL;
  MPI_Op mop = MPI_OP_NULL;
  const bool supported = mpiType(ti.type, &dt) && (!collHasOp(c) || mpiOp(op, &mop)) &&
                         rankCount <= static_cast<size_t>(INT_MAX);
  if (supported) {
    m->mpiTimeUs = timeLoop([&] { callMpi(c, inPlace, rankCount, ti.size, dt, mop); });
    m->mpiBusbw = m->mpiTimeUs > 0
                      ? static_cast<double>(bytes) / m->mpiTimeUs / 1e3 * busFactor(c, nranks_)
                      : 0.0;
  }
#else
  (void)c, (void)ti, (void)op, (void)rankCount, (void)bytes, (void)inPlace, (void)m;
#endif
}

#if NODUS_PERF_MPI
void Runner::callMpi(Coll c, bool inPlace, size_t rankCount, size_t elemSize, MPI_Datatype dt,
                     MPI_Op op) const {
  std::byte* s = send_.get();
  std::byte* r = recv_.get();
  const int n = static_cast<int>(rankCount);
  const int root = opt_.root;
  const bool isRoot = rank_ == root;
  (void)elemSize;
  int rc = MPI_SUCCESS;
  switch (c) {
    case Coll::AllReduce:
      rc = MPI_Allreduce(inPlace ? MPI_IN_PLACE : s, r, n, dt, op, mpiComm_);
      break;
    case Coll::AllGather:
      rc = inPlace ? MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, r, n, dt, mpiComm_)
                   : MPI_Allgather(s, n, dt, r, n, dt, mpiComm_);
      break;
    case Coll::ReduceScatter:
      // MPI's in-place form reads the whole input from recvbuf and leaves the
      // result at its start (NCCL's at the rank's offset): same traffic.
      rc = MPI_Reduce_scatter_block(inPlace ? MPI_IN_PLACE : s, r, n, dt, op, mpiComm_);
      break;
    case Coll::Broadcast:
      rc = MPI_Bcast(!inPlace && isRoot ? s : r, n, dt, root, mpiComm_);
      break;
    case Coll::Reduce:
      if (inPlace)
        rc = MPI_Reduce(isRoot ? MPI_IN_PLACE : r, isRoot ? r : nullptr, n, dt, op, root,
                        mpiComm_);
      else
        rc = MPI_Reduce(s, r, n, dt, op, root, mpiComm_);
      break;
    case Coll::AllToAll:
      rc = inPlace ? MPI_Alltoall(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, r, n, dt, mpiComm_)
                   : MPI_Alltoall(s, n, dt, r, n, dt, mpiComm_);
      break;
    case Coll::Gather:
      rc = inPlace && isRoot ? MPI_Gather(MPI_IN_PLACE, n, dt, r, n, dt, root, mpiComm_)
                             : MPI_Gather(s, n, dt, r, n, dt, root, mpiComm_);
      break;
    case Coll::Scatter:
      rc = inPlace && isRoot ? MPI_Scatter(r, n, dt, MPI_IN_PLACE, n, dt, root, mpiComm_)
                             : MPI_Scatter(s, n, dt, r, n, dt, root, mpiComm_);
      break;
  }
  if (rc != MPI_SUCCESS) fatal(rank_, "MPI baseline %s failed (MPI error %d)", collName(c), rc);
}
#endif

uint64_t Runner::check(Coll c, const TypeInfo& ti, nodusRedOp_t op, size_t rankCount, bool inPlace,
                       uint64_t seed, const void* send, void* recv) {
  const Inputs in(patternFor(c, op), nranks_, seed, ti);
  const bool avg = collHasOp(c) && op == nodusAvg;
  const size_t es = ti.size;
  const size_t p = static_cast<size_t>(nranks_);
  const int root = opt_.root;
  std::byte* sb = send_.get();
  std::byte* rb = recv_.get();
  const size_t mine = static_cast<size_t>(rank_) * rankCount * es;
  // Stale results of the timed loop must not pass: poison the output first
  // (0xA5 bytes are no small integer in any type), then write the inputs.
  const uint64_t wrong = withType(ti.type, [&](auto tag) -> uint64_t {
    using T = typename decltype(tag)::type;
    const auto run = [&] { callNodus(c, send, recv, rankCount, ti.type, op); };
    const auto reducedAt = [&](uint64_t first) {
      return [&in, first](size_t k) { return in.reduced(first + k); };
    };
    switch (c) {
      case Coll::AllReduce:
        std::memset(rb, 0xA5, rankCount * es);
        fillInputs<T>(inPlace ? rb : sb, rankCount, rank_, in);
        run();
        return countWrong<T>(rb, rankCount, avg, nranks_, reducedAt(0));
      case Coll::AllGather:
        std::memset(rb, 0xA5, p * rankCount * es);
        fillInputs<T>(inPlace ? rb + mine : sb, rankCount, rank_, in);
        run();
        return countWrong<T>(rb, p * rankCount, false, nranks_, [&](size_t k) {
          return in.value(static_cast<int>(k / rankCount), k % rankCount);
        });
      case Coll::ReduceScatter:
        if (!inPlace) std::memset(rb, 0xA5, rankCount * es);
        fillInputs<T>(inPlace ? rb : sb, p * rankCount, rank_, in);
        run();
        return countWrong<T>(inPlace ? rb + mine : rb, rankCount, avg, nranks_,
                             reducedAt(static_cast<uint64_t>(rank_) * rankCount));
      case Coll::Broadcast:
        std::memset(rb, 0xA5, rankCount * es);
        if (rank_ == root) fillInputs<T>(inPlace ? rb : sb, rankCount, root, in);
        run();
        return countWrong<T>(rb, rankCount, false, nranks_,
                             [&](size_t k) { return in.value(root, k); });
      case Coll::Reduce:
        if (rank_ == root) std::memset(rb, 0xA5, rankCount * es);
        fillInputs<T>(inPlace ? rb : sb, rankCount, rank_, in);
        run();
        if (rank_ != root) return 0;
        return countWrong<T>(rb, rankCount, avg, nranks_, reducedAt(0));
      case Coll::AllToAll:
        // Block j of rank i's input (elements j*count...) goes to rank j.
        std::memset(rb, 0xA5, p * rankCount * es);
        fillInputs<T>(inPlace ? rb : sb, p * rankCount, rank_, in);
        run();
        return countWrong<T>(rb, p * rankCount, false, nranks_, [&](size_t k) {
          return in.value(static_cast<int>(k / rankCount), static_cast<size_t>(rank_) * rankCount + k % rankCount);
        });
      case Coll::Gather: {
        const bool here = inPlace && rank_ == root;
        if (rank_ == root) std::memset(rb, 0xA5, p * rankCount * es);
        fillInputs<T>(here ? rb + mine : sb, rankCount, rank_, in);
        run();
        if (rank_ != root) return 0;
        return countWrong<T>(rb, p * rankCount, false, nranks_, [&](size_t k) {
          return in.value(static_cast<int>(k / rankCount), k % rankCount);
        });
      }
      case Coll::Scatter: {
        const bool here = inPlace && rank_ == root;
        std::memset(here ? rb + mine : rb, 0xA5, rankCount * es);
        if (rank_ == root) fillInputs<T>(here ? rb : sb, p * rankCount, root, in);
        run();
        return countWrong<T>(here ? rb + mine : rb, rankCount, false, nranks_, [&](size_t k) {
          return in.value(root, static_cast<size_t>(rank_) * rankCount + k);
        });
      }
    }
    return 0;
  });
  return group_.sumAll(wrong);
}

}  // namespace nodus_perf
