#include "base/params.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <set>

extern char** environ;

namespace nodus {
namespace {

// The registry. Each parameter exactly once: name, type, default, help.
constexpr ParamInfo kParams[] = {
    {"NODUS_DEBUG", ParamType::String, "WARN", "Log level: NONE, WARN, INFO or TRACE."},
    {"NODUS_DEBUG_FILE", ParamType::String, "",
     "Write logs to this file instead of stderr (%h: host, %p: pid)."},
    {"NODUS_TIMEOUT_MS", ParamType::Int, "300000",
     "Longest a wait may go without progress before the call fails with nodusTimeout "
     "(bootstrap, connection set-up and collectives)."},
    {"NODUS_TRANSPORT", ParamType::String, "",
     "Force one transport for every peer: loopback (nodusCommInitAll only), shm (one machine), verbs "
     "(InfiniBand / RoCE) or tcp."},
    {"NODUS_ALGO", ParamType::String, "",
     "Force algorithms: a name for every collective it supports, or rules per collective and size "
     "(allreduce:0-64K:tree,64K-:torus;allgather:ring); nodus-info lists the algorithms."},
    {"NODUS_SLOT_BYTES", ParamType::Int, "0",
     "Bytes per transport slot, the largest pipelining slice; 0: the transports' own, 128 KiB, or 512 KiB "
     "when every peer is on another host (tcp, verbs; on loopback tcp a 1 MiB AllGather 1.1-1.5x faster). "
     "Same on every rank."},
    {"NODUS_SLOTS", ParamType::Int, "8", "Slots per connection (slices in flight per peer pair), 2 to 64."},
    {"NODUS_ROUND_SLICES", ParamType::Int, "0",
     "Slices of a step the executor moves in a row before the next step, 1 to NODUS_SLOTS/2; 0: "
     "NODUS_SLOTS/2. More keep more of a connection's slots in flight (a chain of steps pays its "
     "latency once per round of them)."},
    {"NODUS_SPIN", ParamType::Int, "20000",
     "Polls before a waiting rank yields the core; 0 when ranks outnumber cores."},
    {"NODUS_HOSTID", ParamType::String, "",
     "Host name the topology uses instead of the hostname; a comma-separated list gives rank i the "
     "i-th name (threads and processes of one machine pose as several hosts)."},
    {"NODUS_BOOTSTRAP_ADDR", ParamType::String, "",
     "IPv4 address the bootstrap root listens on (default: the first interface NODUS_SOCKET_IFNAME "
     "selects, else this host's first non-loopback address, else 127.0.0.1)."},
    {"NODUS_SOCKET_IFNAME", ParamType::String, "",
     "Network interfaces for tcp and the bootstrap: comma-separated name prefixes (eth,ens), "
     "'=' for exact names (=eth0), a leading '^' to exclude (^docker,lo); default: the first "
     "non-loopback interface that is up, else loopback."},
    {"NODUS_NSOCKS", ParamType::Int, "1",
     "TCP sockets per peer connection, 1 to 16; with more, a large message is striped over them in "
     "parallel (measured on loopback and a shaped 1 Gbit/s link: one is as fast or faster, as in NCCL)."},
    {"NODUS_IB_HCA", ParamType::String, "",
     "verbs: the RDMA device (and port) to use, e.g. mlx5_0 or mlx5_0:1; default: the one nearest the "
     "rank's NUMA node with an active port."},
    {"NODUS_IB_GID_INDEX", ParamType::Int, "-1",
     "verbs: GID table index to use on RoCE; -1 chooses (RoCE v2 over v1, routable over link-local)."},
    {"NODUS_DIRECT_MAX_BYTES", ParamType::Int, "-1",
     "Largest AllReduce/Barrier (bytes per rank) the single-round direct algorithm may take when "
     "no algorithm is forced, where its cost is the lowest; -1 (any negative): 128 KiB where every rank "
     "has a logical CPU of its own, 16 KiB where ranks share them (measured here, 2 ranks: direct 1.2-1.37x the ring at "
     "64-128 KiB, 0.72-0.84x from 256 KiB; 4 ranks on 2 cores: 0.27-0.77x halving-doubling at "
     "32-128 KiB)."},
    {"NODUS_TOPO_FILE", ParamType::String, "",
     "Fabric description (YAML: torus or fat-tree, links, host placement; docs/topology.md)."},
    {"NODUS_TORUS_DIMS", ParamType::String, "",
     "Fabric without a file: a torus of these host dimensions (e.g. 4x4x4), hosts row-major in rank order."},
    {"NODUS_FATTREE", ParamType::String, "",
     "Fabric without a file: a fat-tree, children per switch per level and optional oversubscription "
     "(e.g. 16x8:4x1), hosts in rank order."},
    {"NODUS_BIND", ParamType::String, "auto",
     "Which CPUs each process runs on: auto (an even share of the machine's cores each, only when "
     "nothing bound the processes, e.g. torchrun or mpirun --bind-to none, and there is a core per "
     "process), core (that share whatever the launcher did), numa (a NUMA node each) or none."},
    {"NODUS_SHM_COPY", ParamType::String, "auto",
     "How a rank copies a slice into the shared memory its peer reads: cached (memcpy), streaming "
     "(non-temporal stores, past the cache) or auto (per connection, streaming while cached copies take "
     "4x as long: the two cores share no cache, e.g. two CCDs or sockets)."},
    {"NODUS_SHM_CMA", ParamType::Int, "1",
     "1: a slice that stays in a user buffer goes to a peer process on this host by reference, and the "
     "peer reads it with one process_vm_readv (cross-memory attach), straight into its destination where it "
     "has one: one copy instead of two through shared memory; used per connection only where a probe at "
     "set-up could read the peer's memory (Yama ptrace_scope or a seccomp filter can forbid it). 0: always "
     "through the shared slots."},
    {"NODUS_HWLOC_XML", ParamType::String, "",
     "Read the node from this hwloc XML export instead of detecting it (emulates other machines)."},
    {"NODUS_CHUNK_BYTES", ParamType::Int, "0",
     "Pipelining slice in bytes for every call (at most NODUS_SLOT_BYTES); 0: the tuner picks it per call: "
     "the slot, or for ring and chain a half of it down to 4 KiB where the cost model says so (never when "
     "ranks outnumber cores)."},
    {"NODUS_CHANNELS", ParamType::Int, "0",
     "Channels for every call of an algorithm that runs them (1-16, capped at the algorithm's most; ring: "
     "2, the data in two halves, one around the ring each way, on 3 or more ranks); 0: the tuner picks per "
     "call (more than one only where a link has a wire each way, e.g. a torus)."},
    // Read by the MPI interposer (plugins/mpi, libnodus_mpi.so), listed here so
    // that nodus-info shows every setting; plugins/mpi/src/config.h has the same default.
    {"NODUS_MPI_MIN_BYTES", ParamType::Int, "512",
     "libnodus_mpi: collectives whose per-rank block is smaller than this stay on MPI (the buffer of "
     "AllReduce, Reduce and Bcast; one rank's block of Allgather and the reduce-scatters); the ranks use "
     "the largest value any of them sets."},
    {"NODUS_MPI_VERBOSE", ParamType::Int, "0",
     "libnodus_mpi: 1 reports at MPI_Finalize how many calls and bytes went to nodus and how many fell "
     "back, per collective and reason; 2 also logs each fallback."},
};

const ParamInfo& lookup(const char* name) {
  for (const ParamInfo& p : kParams)
    if (strcmp(p.name, name) == 0) return p;
  // A typo in the table below is a programming error caught by the unit tests.
  fprintf(stderr, "nodus: internal error: parameter %s is not registered\n", name);
  abort();
}

bool parseInt(const char* text, int64_t* out) {
  errno = 0;
  char* end = nullptr;
  long long v = strtoll(text, &end, 0);
  if (errno != 0 || end == text) return false;
  int64_t mult = 1;
  if (*end == 'k' || *end == 'K') mult = 1024, ++end;
  else if (*end == 'm' || *end == 'M') mult = 1024 * 1024, ++end;
  else if (*end == 'g' || *end == 'G') mult = 1024LL * 1024 * 1024, ++end;
  if (*end != '\0') return false;
  *out = v * mult;
  return true;
}

}  // namespace

int64_t IntParam::get() const {
  int64_t def = 0;
  parseInt(info_.defaultValue, &def);
  const char* env = getenv(info_.name);
  if (env == nullptr || *env == '\0') return def;
  int64_t v = 0;
  if (parseInt(env, &v)) return v;
  static std::mutex mu;
  static std::set<std::string> warned;
  std::lock_guard<std::mutex> lock(mu);
  if (warned.insert(info_.name).second)
    fprintf(stderr, "nodus WARN %s=\"%s\" is not an integer; using the default %s\n", info_.name,
            env, info_.defaultValue);
  return def;
}

std::string StringParam::get() const {
  const char* env = getenv(info_.name);
  return (env != nullptr && *env != '\0') ? std::string(env) : std::string(info_.defaultValue);
}

std::span<const ParamInfo> allParams() { return kParams; }

std::vector<std::string> unknownParams() {
  // Read by the project's scripts, tools and tests, not by the library.
  static constexpr const char* kOthers[] = {"NODUS_SANITIZERS", "NODUS_BUILD_DIR", "NODUS_SIM_",
                                            "NODUS_MPI_TEST_", "NODUS_TEST_", "NODUS_TORCH_"};
  std::vector<std::string> out;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    if (strncmp(*e, "NODUS_", 6) != 0) continue;
    const char* eq = strchr(*e, '=');
    const std::string name(*e, eq ? static_cast<size_t>(eq - *e) : strlen(*e));
    bool known = false;
    for (const ParamInfo& p : kParams) known |= name == p.name;
    for (const char* o : kOthers) known |= name.compare(0, strlen(o), o) == 0;
    if (!known) out.push_back(name);
  }
  return out;
}

std::string currentValue(const ParamInfo& info) {
  if (info.type == ParamType::Int) return std::to_string(IntParam(info).get());
  return StringParam(info).get();
}

namespace param {
const StringParam kDebug{lookup("NODUS_DEBUG")};
const StringParam kDebugFile{lookup("NODUS_DEBUG_FILE")};
const IntParam kTimeoutMs{lookup("NODUS_TIMEOUT_MS")};
const StringParam kTransport{lookup("NODUS_TRANSPORT")};
const StringParam kAlgo{lookup("NODUS_ALGO")};
const IntParam kSlotBytes{lookup("NODUS_SLOT_BYTES")};
const IntParam kSlots{lookup("NODUS_SLOTS")};
const IntParam kRoundSlices{lookup("NODUS_ROUND_SLICES")};
const IntParam kSpin{lookup("NODUS_SPIN")};
const StringParam kHostId{lookup("NODUS_HOSTID")};
const StringParam kSocketIfAddr{lookup("NODUS_BOOTSTRAP_ADDR")};
const IntParam kDirectMaxBytes{lookup("NODUS_DIRECT_MAX_BYTES")};
const StringParam kSocketIfName{lookup("NODUS_SOCKET_IFNAME")};
const IntParam kNsocks{lookup("NODUS_NSOCKS")};
const StringParam kIbHca{lookup("NODUS_IB_HCA")};
const IntParam kIbGidIndex{lookup("NODUS_IB_GID_INDEX")};
const StringParam kTopoFile{lookup("NODUS_TOPO_FILE")};
const StringParam kTorusDims{lookup("NODUS_TORUS_DIMS")};
const StringParam kFatTree{lookup("NODUS_FATTREE")};
const StringParam kBind{lookup("NODUS_BIND")};
const StringParam kHwlocXml{lookup("NODUS_HWLOC_XML")};
const StringParam kShmCopy{lookup("NODUS_SHM_COPY")};
const IntParam kShmCma{lookup("NODUS_SHM_CMA")};
const IntParam kChunkBytes{lookup("NODUS_CHUNK_BYTES")};
const IntParam kChannels{lookup("NODUS_CHANNELS")};
}  // namespace param

}  // namespace nodus
