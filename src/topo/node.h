// Node: what one host has, from hwloc (the running machine, or an exported
// XML given by NODUS_HWLOC_XML so tests can pose as machines we lack).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/settings.h"
#include "base/status.h"

namespace nodus {

struct NicInfo {
  std::string name;    // OS name: eth0, mlx5_0, ib0
  bool rdma = false;   // an OpenFabrics (verbs) device rather than a plain network interface
  int numa = -1;       // logical index of the nearest NUMA node, -1 when unknown
  std::string pciBusId;
};

struct NumaInfo {
  int index = 0;         // logical index
  int osIndex = 0;
  uint64_t memoryBytes = 0;
  int cores = 0;
  std::vector<int> pus;  // OS indexes of the PUs (hardware threads) close to it
};

struct NodeInfo {
  std::string source;  // "this machine" or the XML file
  int packages = 0, cores = 0, pus = 0;
  uint64_t l3Bytes = 0;  // largest last-level cache
  int accelerators = 0;  // GPUs and co-processors hwloc reports
  std::vector<NumaInfo> numa;
  std::vector<NicInfo> nics;
  // Logical NUMA index of each PU by OS index (-1 where unknown).
  std::vector<int> numaOfPu;
  // The OS indexes of each core's PUs, cores in hwloc's logical order (the
  // cores of one NUMA node, and of one package, are consecutive).
  std::vector<std::vector<int>> corePus;

  // NUMA node of a CPU (OS index), 0 when unknown.
  int numaOfCpu(int cpu) const;
  // NICs ordered best first for a rank on `numa`: RDMA before plain, near before far.
  std::vector<const NicInfo*> nicsNear(int numa) const;
  std::string describe() const;  // a few lines
};

// The node from hwloc: NODUS_HWLOC_XML when set, else this machine.
Status detectNode(const Settings& settings, NodeInfo* out);
// The same with the environment as it is now (tests and tools).
inline Status detectNode(NodeInfo* out) {
  Settings s;
  NODUS_TRY(Settings::fromEnvironment(&s));
  return detectNode(s, out);
}
Status loadNodeXml(const std::string& path, NodeInfo* out);

// The NUMA node the calling thread runs on now (0 when unknown).
int currentNuma(const NodeInfo& node);

// Binds every thread of this process (and those it starts later) to the PUs
// `pus` (OS indexes) of this machine, through hwloc.
Status bindProcess(const std::vector<int>& pus);

}  // namespace nodus
