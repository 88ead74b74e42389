// Binding: which CPUs each process of a machine runs on.
//
// A launcher that binds (mpirun binds each rank to a core or a package by
// default) has decided already, and nodus keeps its choice. Where nothing
// bound the processes (torchrun, torch.multiprocessing, mpirun --bind-to
// none), the scheduler is free to stack two ranks on one core after a
// wake-up, and every hand-off between them then waits for a time slice
// (measured from PyTorch, 2 processes on 2 cores: 8 B all_reduce 21 us with
// a core each, 50-90 us unbound right after gloo had run). NODUS_BIND then
// gives each process an even share of the machine.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "topo/node.h"

namespace nodus {

enum class BindMode {
  None,  // never bind
  Auto,  // a core share each, only when no process of the machine is bound yet
  Core,  // a core share each, whatever the launcher did
  Numa,  // a NUMA node each (several processes may share one)
};

// NODUS_BIND: none, auto, core or numa.
Status parseBindMode(const std::string& text, BindMode* out);
const char* bindModeName(BindMode mode);

// The PUs (OS indexes) for the `index`-th of `count` processes sharing the
// node: for Core and Auto an even share of its cores in hwloc's logical order
// (cores of a NUMA node are consecutive, so a share stays on one NUMA node
// where it can), with every PU of each core; for Numa the NUMA node
// `index * nodes / count`. Empty when there are more processes than cores
// (Core, Auto), for None, or when the node lists no cores.
std::vector<int> bindingShare(const NodeInfo& node, BindMode mode, int index, int count);

// A set of CPUs as a fixed-size mask (OS indexes below kCpuMaskBits), to be
// exchanged between ranks at init.
constexpr int kCpuMaskBits = 1024;
struct CpuMask {
  uint64_t bits[kCpuMaskBits / 64] = {};
  void set(int cpu);
  bool has(int cpu) const;
  int count() const;
  bool operator==(const CpuMask& o) const;
  CpuMask& operator|=(const CpuMask& o);
  // "0-3,8" form.
  std::string describe() const;
};
// The CPUs the calling thread may run on now.
CpuMask currentCpus();
CpuMask maskOf(const std::vector<int>& cpus);

}  // namespace nodus
