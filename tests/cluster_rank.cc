// One rank of a job started without a launcher by scripts/netns-cluster.sh
// (ranks in network namespaces posing as hosts). Rank 0 makes the unique id
// and publishes it in IDFILE; the others wait for that file.
//
//   cluster_rank RANK NRANKS IDFILE matrix
//     every collective x type x op x placement x count of the core tests
//     (MakeMatrix), each checked against a reference computed here; exit 0
//     when every case was right.
//   cluster_rank RANK NRANKS IDFILE survive DIR
//     checked AllReduce calls until one fails; after the first good one it
//     creates DIR/running.RANK (the script then kills a host's ranks). Prints
//     "rank R failed at MS: ..." (MS: CLOCK_REALTIME in milliseconds) and
//     exits 1 when a call fails, as it must; exits 3 if none failed in 120 s.
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "collective_check.h"
#include "nodus/nodus.h"

namespace {

using nodus_test::CheckCase;
using nodus_test::CheckOutcome;

long long epochMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Rank 0 writes the id under a temporary name and renames it, so a reader
// never sees half of it.
bool publish(const std::string& path, const nodusUniqueId& id) {
  const std::string tmp = path + ".part";
  {
    std::ofstream out(tmp, std::ios::binary);
    out.write(reinterpret_cast<const char*>(&id), sizeof(id));
    if (!out) return false;
  }
  return std::rename(tmp.c_str(), path.c_str()) == 0;
}

bool await(const std::string& path, nodusUniqueId* id, std::chrono::seconds limit) {
  const auto end = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < end) {
    std::ifstream in(path, std::ios::binary);
    if (in.read(reinterpret_cast<char*>(id), sizeof(*id))) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 5) {
    std::fprintf(stderr, "usage: %s RANK NRANKS IDFILE matrix | survive DIR\n", argv[0]);
    return 2;
  }
  const int rank = std::atoi(argv[1]), nranks = std::atoi(argv[2]);
  const std::string idFile = argv[3], mode = argv[4];
  if ((mode != "matrix" && mode != "survive") || (mode == "survive" && argc < 6)) {
    std::fprintf(stderr, "cluster_rank: unknown mode '%s' (matrix | survive DIR)\n", mode.c_str());
    return 2;
  }
  char host[256] = "";
  gethostname(host, sizeof(host) - 1);
  nodusUniqueId id;
  if (rank == 0) {
    if (nodusGetUniqueId(&id) != nodusSuccess || !publish(idFile, id)) {
      std::fprintf(stderr, "rank 0: cannot make or publish the unique id: %s\n", nodusGetLastError(nullptr));
      return 1;
    }
  } else if (!await(idFile, &id, std::chrono::seconds(60))) {
    std::fprintf(stderr, "rank %d: no unique id in %s\n", rank, idFile.c_str());
    return 1;
  }
  nodusComm_t comm = nullptr;
  if (nodusCommInitRank(&comm, nranks, id, rank) != nodusSuccess) {
    std::fprintf(stderr, "rank %d on %s: nodusCommInitRank: %s\n", rank, host, nodusGetLastError(nullptr));
    return 1;
  }
  int status = 0;
  if (mode == "matrix") {
    const std::vector<CheckCase> cases = nodus_test::MakeMatrix(nranks);
    size_t failures = 0;
    const size_t ran = nodus_test::RunCasesOnRank(
        comm, cases,
        [&](const std::string& why) {
          if (++failures <= 20) std::fprintf(stderr, "rank %d on %s: %s\n", rank, host, why.c_str());
        },
        nullptr);
    if (failures == 0 && ran == cases.size()) {
      std::printf("rank %d of %d on %s: %zu cases right\n", rank, nranks, host, ran);
    } else {
      std::fprintf(stderr, "rank %d on %s: %zu of %zu cases wrong (%zu ran)\n", rank, host, failures, cases.size(), ran);
      status = 1;
    }
  } else {
    const std::string marker = std::string(argv[5]) + "/running." + std::to_string(rank);
    CheckCase c;
    c.coll = nodus_test::Coll::kAllReduce;
    c.count = (size_t{1} << 20) + 3;
    const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    status = 3;
    for (int calls = 0; std::chrono::steady_clock::now() < end; ++calls) {
      c.seed = 1000 + static_cast<uint64_t>(calls);
      const CheckOutcome o = nodus_test::RunCollectiveCheck(comm, c);
      if (o.result != nodusSuccess) {
        std::printf("rank %d failed at %lld: %s: %s\n", rank, epochMs(), nodus_test::ResultName(o.result),
                    nodusGetLastError(comm));
        status = 1;
        break;
      }
      if (!o.ok()) {  // a call that returned success with a wrong result
        std::fprintf(stderr, "rank %d: %s\n", rank, o.failure.c_str());
        status = 4;
        break;
      }
      if (calls == 0) std::ofstream{marker};
    }
    if (status == 3) std::fprintf(stderr, "rank %d: no call failed in 120 s\n", rank);
    nodusCommAbort(comm);
  }
  nodusCommDestroy(comm);
  return status;
}
