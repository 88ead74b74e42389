#include "topo/node.h"

#include <hwloc.h>
#include <sched.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <mutex>
#include <sstream>

#include "base/settings.h"

namespace nodus {

int NodeInfo::numaOfCpu(int cpu) const {
  if (cpu < 0 || static_cast<size_t>(cpu) >= numaOfPu.size() || numaOfPu[cpu] < 0) return 0;
  return numaOfPu[cpu];
}

std::vector<const NicInfo*> NodeInfo::nicsNear(int numaNode) const {
  std::vector<const NicInfo*> v;
  for (const NicInfo& n : nics) v.push_back(&n);
  auto score = [&](const NicInfo* n) { return (n->rdma ? 0 : 2) + (n->numa == numaNode ? 0 : 1); };
  std::stable_sort(v.begin(), v.end(), [&](const NicInfo* a, const NicInfo* b) { return score(a) < score(b); });
  return v;
}

std::string NodeInfo::describe() const {
  std::ostringstream o;
  o << "node (" << source << "): " << packages << " package(s), " << numa.size() << " NUMA node(s), " << cores
    << " core(s), " << pus << " PU(s), L3 " << (l3Bytes >> 20) << " MiB"
    << (accelerators ? ", " + std::to_string(accelerators) + " accelerator(s)" : "") << "\n";
  for (const NumaInfo& n : numa)
    o << "  NUMA " << n.index << ": " << n.cores << " core(s), " << (n.memoryBytes >> 20) << " MiB\n";
  for (const NicInfo& n : nics)
    o << "  NIC " << n.name << (n.rdma ? " (RDMA)" : "") << " near NUMA " << n.numa
      << (n.pciBusId.empty() ? "" : " at " + n.pciBusId) << "\n";
  return o.str();
}

namespace {

struct TopologyDeleter {
  void operator()(hwloc_topology* t) const { hwloc_topology_destroy(t); }
};
using TopologyPtr = std::unique_ptr<hwloc_topology, TopologyDeleter>;

Status loadTopology(const char* xml, TopologyPtr* out) {
  hwloc_topology_t raw = nullptr;
  if (hwloc_topology_init(&raw) != 0) return systemError("hwloc_topology_init");
  TopologyPtr topo(raw);
  if (xml != nullptr && hwloc_topology_set_xml(raw, xml) != 0)
    return systemError("hwloc: cannot read the XML topology %s", xml);
  hwloc_topology_set_io_types_filter(raw, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
  if (hwloc_topology_load(raw) != 0)
    return systemError("hwloc: cannot load the %s topology", xml ? xml : "machine's");
  *out = std::move(topo);
  return Status::ok();
}

Status describeTopology(hwloc_topology_t raw, const char* xml, NodeInfo* out) {
  NodeInfo n;
  n.source = xml ? xml : "this machine";
  n.packages = hwloc_get_nbobjs_by_type(raw, HWLOC_OBJ_PACKAGE);
  n.cores = hwloc_get_nbobjs_by_type(raw, HWLOC_OBJ_CORE);
  n.pus = hwloc_get_nbobjs_by_type(raw, HWLOC_OBJ_PU);
  for (hwloc_obj_type_t t : {HWLOC_OBJ_L3CACHE, HWLOC_OBJ_L2CACHE}) {
    for (int i = 0; i < hwloc_get_nbobjs_by_type(raw, t); ++i) {
      hwloc_obj_t c = hwloc_get_obj_by_type(raw, t, static_cast<unsigned>(i));
      n.l3Bytes = std::max<uint64_t>(n.l3Bytes, c->attr->cache.size);
    }
    if (n.l3Bytes) break;
  }
  unsigned maxPu = 0;
  for (int i = 0; i < n.pus; ++i)
    maxPu = std::max(maxPu, hwloc_get_obj_by_type(raw, HWLOC_OBJ_PU, static_cast<unsigned>(i))->os_index);
  n.numaOfPu.assign(n.pus ? maxPu + 1 : 0, -1);
  for (int i = 0; i < n.cores; ++i) {
    hwloc_obj_t core = hwloc_get_obj_by_type(raw, HWLOC_OBJ_CORE, static_cast<unsigned>(i));
    std::vector<int> pus;
    unsigned pu;
    hwloc_bitmap_foreach_begin(pu, core->cpuset) { pus.push_back(static_cast<int>(pu)); }
    hwloc_bitmap_foreach_end();
    n.corePus.push_back(std::move(pus));
  }
  const int nnuma = hwloc_get_nbobjs_by_type(raw, HWLOC_OBJ_NUMANODE);
  std::vector<hwloc_obj_t> numaObjs;
  for (int i = 0; i < nnuma; ++i) {
    hwloc_obj_t o = hwloc_get_obj_by_type(raw, HWLOC_OBJ_NUMANODE, static_cast<unsigned>(i));
    numaObjs.push_back(o);
    NumaInfo m;
    m.index = i;
    m.osIndex = static_cast<int>(o->os_index);
    m.memoryBytes = o->attr->numanode.local_memory;
    m.cores = hwloc_get_nbobjs_inside_cpuset_by_type(raw, o->cpuset, HWLOC_OBJ_CORE);
    unsigned pu;
    hwloc_bitmap_foreach_begin(pu, o->cpuset) {
      m.pus.push_back(static_cast<int>(pu));
      if (pu < n.numaOfPu.size()) n.numaOfPu[pu] = i;
    }
    hwloc_bitmap_foreach_end();
    n.numa.push_back(std::move(m));
  }
  for (hwloc_obj_t o = hwloc_get_next_osdev(raw, nullptr); o != nullptr; o = hwloc_get_next_osdev(raw, o)) {
    const auto type = o->attr->osdev.type;
    n.accelerators += type == HWLOC_OBJ_OSDEV_COPROC || type == HWLOC_OBJ_OSDEV_GPU;
    if (type != HWLOC_OBJ_OSDEV_NETWORK && type != HWLOC_OBJ_OSDEV_OPENFABRICS) continue;
    NicInfo nic;
    nic.name = o->name ? o->name : "?";
    nic.rdma = type == HWLOC_OBJ_OSDEV_OPENFABRICS;
    for (hwloc_obj_t p = o->parent; p != nullptr; p = p->parent) {
      if (p->type == HWLOC_OBJ_PCI_DEVICE) {
        char id[32];
        snprintf(id, sizeof(id), "%04x:%02x:%02x.%x", p->attr->pcidev.domain, p->attr->pcidev.bus,
                 p->attr->pcidev.dev, p->attr->pcidev.func);
        nic.pciBusId = id;
        break;
      }
    }
    // The nearest NUMA node: the first whose CPUs lie under the device's
    // first ancestor with CPUs (its package or NUMA group).
    hwloc_obj_t anc = hwloc_get_non_io_ancestor_obj(raw, o);
    if (anc != nullptr && anc->cpuset != nullptr && nnuma > 0) {
      for (int i = 0; i < nnuma; ++i) {
        if (hwloc_bitmap_isincluded(numaObjs[i]->cpuset, anc->cpuset)) {
          // Attached to the whole machine: no NUMA node is nearer than another.
          if (hwloc_bitmap_isequal(anc->cpuset, hwloc_topology_get_topology_cpuset(raw)) && nnuma > 1) break;
          nic.numa = i;
          break;
        }
      }
    }
    n.nics.push_back(std::move(nic));
  }
  // A plain interface and an RDMA device on one adapter (ib0 / mlx5_0) are
  // one NIC: keep the RDMA name.
  std::vector<NicInfo> merged;
  for (NicInfo& nic : n.nics) {
    auto same = std::find_if(merged.begin(), merged.end(), [&](const NicInfo& m) {
      return !nic.pciBusId.empty() && m.pciBusId == nic.pciBusId;
    });
    if (same == merged.end()) merged.push_back(nic);
    else if (nic.rdma && !same->rdma) *same = nic;
  }
  n.nics = std::move(merged);
  *out = std::move(n);
  return Status::ok();
}

}  // namespace

Status loadNodeXml(const std::string& path, NodeInfo* out) {
  TopologyPtr topo;
  NODUS_TRY(loadTopology(path.c_str(), &topo));
  return describeTopology(topo.get(), path.c_str(), out);
}

namespace {

// This machine's topology is loaded once and never destroyed: loading probes
// PCI (slow), and destroying the last topology would unload hwloc's PCI
// plugin, orphaning what it keeps allocated for the process.
std::mutex machineMu;
hwloc_topology_t machineTopology = nullptr;

Status machine(std::unique_lock<std::mutex>& lock, hwloc_topology_t* out) {
  lock = std::unique_lock<std::mutex>(machineMu);
  if (machineTopology == nullptr) {
    TopologyPtr topo;
    NODUS_TRY(loadTopology(nullptr, &topo));
    machineTopology = topo.release();
  }
  *out = machineTopology;
  return Status::ok();
}

}  // namespace

Status detectNode(const Settings& settings, NodeInfo* out) {
  const std::string& xml = settings.get(param::kHwlocXml);
  if (!xml.empty()) return loadNodeXml(xml, out);
  std::unique_lock<std::mutex> lock;
  hwloc_topology_t topo = nullptr;
  NODUS_TRY(machine(lock, &topo));
  return describeTopology(topo, nullptr, out);
}

Status bindProcess(const std::vector<int>& pus) {
  std::unique_lock<std::mutex> lock;
  hwloc_topology_t topo = nullptr;
  NODUS_TRY(machine(lock, &topo));
  hwloc_bitmap_t set = hwloc_bitmap_alloc();
  if (set == nullptr) return makeError(nodusSystemError, "hwloc_bitmap_alloc failed");
  for (int pu : pus) hwloc_bitmap_set(set, static_cast<unsigned>(pu));
  const int rc = hwloc_set_cpubind(topo, set, HWLOC_CPUBIND_PROCESS);
  const int err = errno;
  hwloc_bitmap_free(set);
  if (rc != 0) return makeError(nodusSystemError, "hwloc_set_cpubind: %s", strerror(err));
  return Status::ok();
}

int currentNuma(const NodeInfo& node) { return node.numaOfCpu(sched_getcpu()); }

}  // namespace nodus
