// Fabric: how hosts are wired together, as a person describes it in a file
// (NODUS_TOPO_FILE, YAML; docs/topology.md) or in the environment
// (NODUS_TORUS_DIMS=4x4x4, NODUS_FATTREE=16x8:4x1).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "base/settings.h"
#include "base/status.h"

namespace nodus {

enum class FabricKind : uint8_t { Flat, Torus, FatTree };
const char* fabricKindName(FabricKind k);

// One direction of one link.
struct LinkSpec {
  double bandwidthGBs = 25.0;  // GB/s (1e9 bytes per second)
  double latencyUs = 1.0;
};

// Where each host sits: torus coordinates, or (leaf, pod) on a fat-tree.
using HostCoord = std::array<int, 3>;

struct FabricConfig {
  FabricKind kind = FabricKind::Flat;
  std::string source = "default";  // file name or variable it came from, for messages
  LinkSpec link;                   // between hosts
  // Whether link.bandwidth came from the user (a fabric file's
  // link.bandwidth). When not, a communicator prices its links between hosts
  // at the slowest NIC its net transport runs on (Comm::init), not at
  // LinkSpec's default.
  bool bandwidthGiven = false;

  // Torus: 1 to 3 dimensions.
  std::vector<int> dims;
  std::vector<bool> wrap;

  // Fat-tree: radix[l] = children of a level-l switch (radix[0] = hosts per
  // leaf); oversubscription[l] = down/up bandwidth ratio of those switches.
  std::vector<int> radix;
  std::vector<double> oversubscription;

  // Host placement: by name (explicit list or a pattern whose capture groups
  // are the coordinates), else in order of each host's first rank.
  enum class Placement : uint8_t { InOrder, ByName, ByPattern } placement = Placement::InOrder;
  std::vector<std::pair<std::string, HostCoord>> named;
  std::string pattern;

  // Hosts the fabric has room for (torus: product of dims; fat-tree: product of radix).
  uint64_t capacity() const;
  // Same fabric on every rank? (compared through the bootstrap)
  uint64_t fingerprint() const;
  std::string describe() const;  // one line
};

// Parses a fabric file. Errors name the file, line and field.
Status loadFabricFile(const std::string& path, FabricConfig* out);
// Parses YAML text (`name` stands for the file in messages).
Status parseFabric(const std::string& text, const std::string& name, FabricConfig* out);
// NODUS_TOPO_FILE, else NODUS_TORUS_DIMS / NODUS_FATTREE, else flat.
Status fabricFromSettings(const Settings& settings, FabricConfig* out);
// The same from the environment as it is now (tests and tools).
inline Status fabricFromEnvironment(FabricConfig* out) {
  Settings s;
  NODUS_TRY(Settings::fromEnvironment(&s));
  return fabricFromSettings(s, out);
}

// Coordinates of every host, hosts given by name in order of their first
// rank. Rejects layouts that do not fit: more hosts than places, duplicate
// or out-of-range coordinates, a host the list or pattern does not place.
Status placeHosts(const FabricConfig& f, const std::vector<std::string>& hosts, std::vector<HostCoord>* coords);

}  // namespace nodus
