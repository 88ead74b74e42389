#include "topo/binding.h"

#include <sched.h>

#include <algorithm>
#include <bit>

namespace nodus {

Status parseBindMode(const std::string& text, BindMode* out) {
  if (text.empty() || text == "auto") *out = BindMode::Auto;
  else if (text == "none") *out = BindMode::None;
  else if (text == "core") *out = BindMode::Core;
  else if (text == "numa") *out = BindMode::Numa;
  else return makeError(nodusInvalidArgument, "NODUS_BIND=%s is not one of auto, none, core, numa", text.c_str());
  return Status::ok();
}

const char* bindModeName(BindMode mode) {
  switch (mode) {
    case BindMode::None: return "none";
    case BindMode::Auto: return "auto";
    case BindMode::Core: return "core";
    case BindMode::Numa: return "numa";
  }
  return "?";
}

std::vector<int> bindingShare(const NodeInfo& node, BindMode mode, int index, int count) {
  std::vector<int> pus;
  if (mode == BindMode::None || count <= 0 || index < 0 || index >= count) return pus;
  if (mode == BindMode::Numa) {
    if (node.numa.empty()) return pus;
    const size_t n = node.numa.size();
    pus = node.numa[static_cast<size_t>(index) * n / static_cast<size_t>(count)].pus;
  } else {
    const size_t cores = node.corePus.size();
    if (static_cast<size_t>(count) > cores) return pus;
    // Shares differ by at most one core; the first ones are the larger.
    const size_t first = static_cast<size_t>(index) * cores / static_cast<size_t>(count);
    const size_t last = static_cast<size_t>(index + 1) * cores / static_cast<size_t>(count);
    for (size_t c = first; c < last; ++c) pus.insert(pus.end(), node.corePus[c].begin(), node.corePus[c].end());
  }
  std::sort(pus.begin(), pus.end());
  return pus;
}

void CpuMask::set(int cpu) {
  if (cpu >= 0 && cpu < kCpuMaskBits) bits[cpu / 64] |= uint64_t{1} << (cpu % 64);
}

bool CpuMask::has(int cpu) const { return cpu >= 0 && cpu < kCpuMaskBits && (bits[cpu / 64] >> (cpu % 64)) & 1; }

int CpuMask::count() const {
  int n = 0;
  for (uint64_t b : bits) n += std::popcount(b);
  return n;
}

bool CpuMask::operator==(const CpuMask& o) const { return std::equal(std::begin(bits), std::end(bits), std::begin(o.bits)); }

CpuMask& CpuMask::operator|=(const CpuMask& o) {
  for (size_t i = 0; i < std::size(bits); ++i) bits[i] |= o.bits[i];
  return *this;
}

std::string CpuMask::describe() const {
  std::string out;
  for (int c = 0; c < kCpuMaskBits; ++c) {
    if (!has(c)) continue;
    int e = c;
    while (has(e + 1)) ++e;
    if (!out.empty()) out.push_back(',');
    out.append(std::to_string(c));
    if (e > c) {
      out.push_back('-');
      out.append(std::to_string(e));
    }
    c = e;
  }
  return out.empty() ? "none" : out;
}

CpuMask currentCpus() {
  CpuMask m;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return m;
  for (int c = 0; c < std::min(CPU_SETSIZE, kCpuMaskBits); ++c)
    if (CPU_ISSET(c, &set)) m.set(c);
  return m;
}

CpuMask maskOf(const std::vector<int>& cpus) {
  CpuMask m;
  for (int c : cpus) m.set(c);
  return m;
}

}  // namespace nodus
