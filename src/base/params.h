// The parameter registry: every NODUS_* environment variable is declared once,
// in params.cc, with its type, default and help text. `nodus-info` lists them.
//
// Values are read from the environment when asked for (communicators snapshot
// what they need at init), so a test may setenv between communicators.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace nodus {

enum class ParamType { Int, String };

struct ParamInfo {
  const char* name;
  ParamType type;
  const char* defaultValue;
  const char* help;
};

class IntParam {
 public:
  explicit constexpr IntParam(const ParamInfo& info) : info_(info) {}
  // The environment's value, or the default when unset or unparsable (the
  // latter logged once as a warning). Accepts K/M/G suffixes (powers of 1024).
  int64_t get() const;
  const ParamInfo& info() const { return info_; }

 private:
  const ParamInfo& info_;
};

class StringParam {
 public:
  explicit constexpr StringParam(const ParamInfo& info) : info_(info) {}
  std::string get() const;  // environment value, or the default when unset
  const ParamInfo& info() const { return info_; }

 private:
  const ParamInfo& info_;
};

// Every parameter, in declaration order.
std::span<const ParamInfo> allParams();
// The value nodus would use for a parameter now, as text.
std::string currentValue(const ParamInfo& info);
// NODUS_* variables set in the environment that are neither parameters nor
// variables of nodus' own scripts, tools and tests: most likely typos
// (NODUS_SLICE_BYTES for NODUS_CHUNK_BYTES), which would be ignored silently.
std::vector<std::string> unknownParams();

// The slot a transport uses unless it asks for another
// (TransportEntry::slotBytes) or NODUS_SLOT_BYTES sets one for all.
constexpr int64_t kDefaultSlotBytes = 128 << 10;

namespace param {
extern const StringParam kDebug;         // NODUS_DEBUG
extern const StringParam kDebugFile;     // NODUS_DEBUG_FILE
extern const IntParam kTimeoutMs;        // NODUS_TIMEOUT_MS
extern const StringParam kTransport;     // NODUS_TRANSPORT
extern const StringParam kAlgo;          // NODUS_ALGO
extern const IntParam kSlotBytes;        // NODUS_SLOT_BYTES
extern const IntParam kSlots;            // NODUS_SLOTS
extern const IntParam kRoundSlices;     // NODUS_ROUND_SLICES
extern const IntParam kSpin;             // NODUS_SPIN
extern const StringParam kHostId;        // NODUS_HOSTID
extern const StringParam kSocketIfAddr;  // NODUS_BOOTSTRAP_ADDR
extern const IntParam kDirectMaxBytes;   // NODUS_DIRECT_MAX_BYTES
extern const StringParam kSocketIfName;  // NODUS_SOCKET_IFNAME
extern const IntParam kNsocks;           // NODUS_NSOCKS
extern const StringParam kIbHca;         // NODUS_IB_HCA
extern const IntParam kIbGidIndex;       // NODUS_IB_GID_INDEX
extern const StringParam kTopoFile;      // NODUS_TOPO_FILE
extern const StringParam kTorusDims;     // NODUS_TORUS_DIMS
extern const StringParam kFatTree;       // NODUS_FATTREE
extern const StringParam kBind;          // NODUS_BIND
extern const StringParam kShmCopy;       // NODUS_SHM_COPY
extern const IntParam kShmCma;           // NODUS_SHM_CMA
extern const StringParam kHwlocXml;      // NODUS_HWLOC_XML
extern const IntParam kChunkBytes;       // NODUS_CHUNK_BYTES
extern const IntParam kChannels;         // NODUS_CHANNELS
}  // namespace param

}  // namespace nodus
