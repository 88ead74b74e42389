#include "base/params.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <strings.h>

extern char** environ;

namespace nodus {
namespace {

// The registry. Each parameter exactly once: name, type, default, range or
// choices, help (and a former name where one was renamed).
constexpr ParamInfo kTable[] = {
    {.name = "NODUS_DEBUG", .type = ParamType::String, .defaultValue = "WARN", .choices = "NONE|WARN|INFO|TRACE", .help = "Log level: NONE, WARN, INFO or TRACE."},
    {.name = "NODUS_DEBUG_FILE", .type = ParamType::String, .defaultValue = "", .help = "Write logs to this file instead of stderr (%h: host, %p: pid)."},
    {.name = "NODUS_TIMEOUT_MS", .type = ParamType::Int, .defaultValue = "300000", .min = 1, .max = INT32_MAX, .help = "Longest a wait may go without progress before the call fails with nodusTimeout "
     "(bootstrap, connection set-up and collectives)."},
    {.name = "NODUS_TRANSPORT", .type = ParamType::String, .defaultValue = "", .help = "Force one transport for every peer: loopback (nodusCommInitAll only), shm (one machine), verbs "
     "(InfiniBand / RoCE) or tcp."},
    {.name = "NODUS_ALGO", .type = ParamType::String, .defaultValue = "", .help = "Force algorithms: a name for every collective it supports, or rules per collective and size "
     "(allreduce:0-64K:tree,64K-:torus;allgather:ring); nodus-info lists the algorithms."},
    {.name = "NODUS_SLOT_BYTES", .type = ParamType::Int, .defaultValue = "0", .min = 0, .max = 1 << 30, .help = "Bytes per transport slot, the largest pipelining slice; 0: the transports' own, 128 KiB, or 512 KiB "
     "when every peer is on another host (tcp, verbs; on loopback tcp a 1 MiB AllGather 1.1-1.5x faster). "
     "Same on every rank."},
    {.name = "NODUS_SLOTS", .type = ParamType::Int, .defaultValue = "8", .min = 2, .max = 64, .help = "Slots per connection (slices in flight per peer pair), 2 to 64."},
    {.name = "NODUS_ROUND_SLICES", .type = ParamType::Int, .defaultValue = "0", .min = 0, .max = 32, .help = "Slices of a step the executor moves in a row before the next step, 1 to NODUS_SLOTS/2; 0: "
     "NODUS_SLOTS/2. More keep more of a connection's slots in flight (a chain of steps pays its "
     "latency once per round of them)."},
    {.name = "NODUS_SPIN", .type = ParamType::Int, .defaultValue = "20000", .min = 0, .max = 1000000000, .help = "Polls before a waiting rank yields the core; 0 when ranks outnumber cores."},
    {.name = "NODUS_HOSTID", .type = ParamType::String, .defaultValue = "", .help = "Host name the topology uses instead of the hostname; a comma-separated list gives rank i the "
     "i-th name (threads and processes of one machine pose as several hosts)."},
    {.name = "NODUS_BOOTSTRAP_ADDR", .type = ParamType::String, .defaultValue = "", .help = "IPv4 address the bootstrap root listens on (default: the first interface NODUS_SOCKET_IFNAME "
     "selects, else this host's first non-loopback address, else 127.0.0.1)."},
    {.name = "NODUS_SOCKET_IFNAME", .type = ParamType::String, .defaultValue = "", .help = "Network interfaces for tcp and the bootstrap: comma-separated name prefixes (eth,ens), "
     "'=' for exact names (=eth0), a leading '^' to exclude (^docker,lo); default: the first "
     "non-loopback interface that is up, else loopback."},
    {.name = "NODUS_NSOCKS", .type = ParamType::Int, .defaultValue = "1", .min = 1, .max = 16, .help = "TCP sockets per peer connection, 1 to 16; with more, a large message is striped over them in "
     "parallel (measured on loopback and a shaped 1 Gbit/s link: one is as fast or faster, as in NCCL)."},
    {.name = "NODUS_IB_HCA", .type = ParamType::String, .defaultValue = "", .help = "verbs: the RDMA device (and port) to use, e.g. mlx5_0 or mlx5_0:1; default: the one nearest the "
     "rank's NUMA node with an active port."},
    {.name = "NODUS_IB_GID_INDEX", .type = ParamType::Int, .defaultValue = "-1", .min = -1, .max = 255, .help = "verbs: GID table index to use on RoCE; -1 chooses (RoCE v2 over v1, routable over link-local)."},
    {.name = "NODUS_DIRECT_MAX_BYTES", .type = ParamType::Int, .defaultValue = "-1", .min = -1, .max = int64_t{1} << 40, .help = "Largest AllReduce/Barrier (bytes per rank) the single-round direct algorithm may take when "
     "no algorithm is forced, where its cost is the lowest; -1: 128 KiB where every rank "
     "has a logical CPU of its own, 16 KiB where ranks share them (measured here, 2 ranks: direct 1.2-1.37x the ring at "
     "64-128 KiB, 0.72-0.84x from 256 KiB; 4 ranks on 2 cores: 0.27-0.77x halving-doubling at "
     "32-128 KiB)."},
    {.name = "NODUS_TOPO_FILE", .type = ParamType::String, .defaultValue = "", .help = "Fabric description (YAML: torus or fat-tree, links, host placement; docs/topology.md)."},
    {.name = "NODUS_TORUS_DIMS", .type = ParamType::String, .defaultValue = "", .help = "Fabric without a file: a torus of these host dimensions (e.g. 4x4x4), hosts row-major in rank order."},
    {.name = "NODUS_FATTREE", .type = ParamType::String, .defaultValue = "", .help = "Fabric without a file: a fat-tree, children per switch per level and optional oversubscription "
     "(e.g. 16x8:4x1), hosts in rank order."},
    {.name = "NODUS_BIND", .type = ParamType::String, .defaultValue = "auto", .choices = "auto|core|numa|none", .help = "Which CPUs each process runs on: auto (an even share of the machine's cores each, only when "
     "nothing bound the processes, e.g. torchrun or mpirun --bind-to none, and there is a core per "
     "process), core (that share whatever the launcher did), numa (a NUMA node each) or none."},
    {.name = "NODUS_SHM_COPY", .type = ParamType::String, .defaultValue = "auto", .choices = "auto|cached|streaming", .help = "How a rank copies a slice into the shared memory its peer reads: cached (memcpy), streaming "
     "(non-temporal stores, past the cache) or auto (per connection, streaming while cached copies take "
     "4x as long: the two cores share no cache, e.g. two CCDs or sockets)."},
    {.name = "NODUS_SHM_CMA", .type = ParamType::Int, .defaultValue = "1", .min = 0, .max = 1, .help = "1: a slice that stays in a user buffer goes to a peer process on this host by reference, and the "
     "peer reads it with one process_vm_readv (cross-memory attach), straight into its destination where it "
     "has one: one copy instead of two through shared memory; used per connection only where a probe at "
     "set-up could read the peer's memory (Yama ptrace_scope or a seccomp filter can forbid it). 0: always "
     "through the shared slots."},
    {.name = "NODUS_HWLOC_XML", .type = ParamType::String, .defaultValue = "", .help = "Read the node from this hwloc XML export instead of detecting it (emulates other machines)."},
    {.name = "NODUS_SLICE_BYTES", .type = ParamType::Int, .defaultValue = "0", .min = 0, .max = 1 << 30, .help = "Pipelining slice in bytes for every call (at most NODUS_SLOT_BYTES); 0: the tuner picks it per call: "
     "the slot, or for ring and chain a half of it down to 4 KiB where the cost model says so (never when "
     "ranks outnumber cores).", .oldName = "NODUS_CHUNK_BYTES"},
    {.name = "NODUS_CHANNELS", .type = ParamType::Int, .defaultValue = "0", .min = 0, .max = 16, .help = "Channels for every call of an algorithm that runs them (1-16, capped at the algorithm's most; ring: "
     "2, the data in two halves, one around the ring each way, on 3 or more ranks); 0: the tuner picks per "
     "call (more than one only where a link has a wire each way, e.g. a torus)."},
    {.name = "NODUS_TRACE", .type = ParamType::String, .defaultValue = "",
     .help = "Directory for the timeline traces of every communicator (nodusConfig_t.traceDir sets it per "
             "communicator). Timelines are not recorded yet: a directory given is checked at init to be a "
             "writable directory (one WARN line if not) and kept with the communicator."},
    // Read by the MPI interposer (plugins/mpi, libnodus_mpi.so) through nodusParamGetInt.
    {.name = "NODUS_MPI_MIN_BYTES", .type = ParamType::Int, .defaultValue = "512", .min = 0, .max = int64_t{1} << 40, .help = "libnodus_mpi: collectives whose per-rank block is smaller than this stay on MPI (the buffer of "
     "AllReduce, Reduce and Bcast; one rank's block of Allgather and the reduce-scatters); the ranks use "
     "the largest value any of them sets."},
    {.name = "NODUS_MPI_VERBOSE", .type = ParamType::Int, .defaultValue = "0", .min = 0, .max = 2, .help = "libnodus_mpi: 1 reports at MPI_Finalize how many calls and bytes went to nodus and how many fell "
     "back, per collective and reason; 2 also logs each fallback."},
};
constexpr size_t kCount = std::size(kTable);

// kTable with each entry's index filled in.
struct Registry {
  ParamInfo params[kCount];
  Registry() {
    for (size_t i = 0; i < kCount; ++i) {
      params[i] = kTable[i];
      params[i].index = static_cast<int>(i);
    }
  }
};

const Registry& registry() {
  static const Registry r;
  return r;
}

int indexOf(const char* name, ParamType type) {
  for (size_t i = 0; i < kCount; ++i)
    if (strcmp(kTable[i].name, name) == 0 && kTable[i].type == type) return static_cast<int>(i);
  // A name missing from the table is a programming error caught by the unit tests.
  fprintf(stderr, "nodus: internal error: parameter %s is not registered with that type\n", name);
  abort();
}

}  // namespace

template <ParamType kType>
TypedParam<kType>::TypedParam(const char* name) : index_(indexOf(name, kType)) {}
template <ParamType kType>
const ParamInfo& TypedParam<kType>::info() const {
  return registry().params[index_];
}
template class TypedParam<ParamType::Int>;
template class TypedParam<ParamType::String>;

std::span<const ParamInfo> allParams() { return registry().params; }

const ParamInfo* findParam(const std::string& name) {
  for (const ParamInfo& p : allParams())
    if (name == p.name || (p.oldName != nullptr && name == p.oldName)) return &p;
  return nullptr;
}

std::string rangeText(const ParamInfo& info) {
  if (info.type == ParamType::Int) {
    char text[64];
    snprintf(text, sizeof(text), "[%lld, %lld]", static_cast<long long>(info.min), static_cast<long long>(info.max));
    return text;
  }
  return info.choices ? info.choices : "any text";
}

std::vector<std::string> unknownParams() {
  // Read by the project's scripts, tools and tests, not by the library.
  static constexpr const char* kOthers[] = {"NODUS_SANITIZERS", "NODUS_BUILD_DIR", "NODUS_SIM_",
                                            "NODUS_MPI_TEST_", "NODUS_TEST_", "NODUS_TORCH_"};
  std::vector<std::string> out;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    if (strncmp(*e, "NODUS_", 6) != 0) continue;
    const char* eq = strchr(*e, '=');
    const std::string name(*e, eq ? static_cast<size_t>(eq - *e) : strlen(*e));
    bool known = findParam(name) != nullptr;
    for (const char* o : kOthers) known |= name.compare(0, strlen(o), o) == 0;
    if (!known) out.push_back(name);
  }
  return out;
}

namespace param {
const StringParam kDebug{"NODUS_DEBUG"};
const StringParam kDebugFile{"NODUS_DEBUG_FILE"};
const IntParam kTimeoutMs{"NODUS_TIMEOUT_MS"};
const StringParam kTransport{"NODUS_TRANSPORT"};
const StringParam kAlgo{"NODUS_ALGO"};
const IntParam kSlotBytes{"NODUS_SLOT_BYTES"};
const IntParam kSlots{"NODUS_SLOTS"};
const IntParam kRoundSlices{"NODUS_ROUND_SLICES"};
const IntParam kSpin{"NODUS_SPIN"};
const StringParam kHostId{"NODUS_HOSTID"};
const StringParam kSocketIfAddr{"NODUS_BOOTSTRAP_ADDR"};
const IntParam kDirectMaxBytes{"NODUS_DIRECT_MAX_BYTES"};
const StringParam kSocketIfName{"NODUS_SOCKET_IFNAME"};
const IntParam kNsocks{"NODUS_NSOCKS"};
const StringParam kIbHca{"NODUS_IB_HCA"};
const IntParam kIbGidIndex{"NODUS_IB_GID_INDEX"};
const StringParam kTopoFile{"NODUS_TOPO_FILE"};
const StringParam kTorusDims{"NODUS_TORUS_DIMS"};
const StringParam kFatTree{"NODUS_FATTREE"};
const StringParam kBind{"NODUS_BIND"};
const StringParam kHwlocXml{"NODUS_HWLOC_XML"};
const StringParam kShmCopy{"NODUS_SHM_COPY"};
const IntParam kShmCma{"NODUS_SHM_CMA"};
const IntParam kSliceBytes{"NODUS_SLICE_BYTES"};
const IntParam kChannels{"NODUS_CHANNELS"};
const StringParam kTrace{"NODUS_TRACE"};
const IntParam kMpiMinBytes{"NODUS_MPI_MIN_BYTES"};
const IntParam kMpiVerbose{"NODUS_MPI_VERBOSE"};
}  // namespace param

}  // namespace nodus
