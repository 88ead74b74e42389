// The parameter registry: every NODUS_* environment variable is declared once,
// in params.cc, with its type, default, range (or choices) and help text.
// `nodus-info` lists them. What a communicator, tool or test uses is a
// Settings value (base/settings.h) read from the environment once and passed
// explicitly; nothing below the C API reads the environment on its own.
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
  // Int: the values accepted, inclusive. String: ignored.
  int64_t min = 0, max = 0;
  // String: the values accepted, '|'-separated, compared ignoring case
  // (null: any text). Int: ignored.
  const char* choices = nullptr;
  const char* help = "";
  // A former name still read when the new one is unset, with one WARN line.
  const char* oldName = nullptr;
  int index = -1;  // position in allParams(); set by the registry
};

// A typed handle on one registered parameter (its index in allParams()).
template <ParamType kType>
class TypedParam {
 public:
  explicit TypedParam(const char* name);  // a name not registered with this type aborts
  const ParamInfo& info() const;
  int index() const { return index_; }

 private:
  int index_;
};
using IntParam = TypedParam<ParamType::Int>;
using StringParam = TypedParam<ParamType::String>;

// Every parameter, in declaration order.
std::span<const ParamInfo> allParams();
const ParamInfo* findParam(const std::string& name);  // by name or old name; null if none
// The range or choices as help shows them: "[1, 2147483647]", "auto|core|numa|none", "any text".
std::string rangeText(const ParamInfo& info);
// NODUS_* variables set in the environment that are neither parameters nor
// variables of nodus' own scripts, tools and tests: most likely typos
// (NODUS_SLICES_BYTES for NODUS_SLICE_BYTES), which would be ignored silently.
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
extern const IntParam kRoundSlices;      // NODUS_ROUND_SLICES
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
extern const IntParam kSliceBytes;       // NODUS_SLICE_BYTES (formerly NODUS_CHUNK_BYTES)
extern const IntParam kChannels;         // NODUS_CHANNELS
extern const StringParam kTrace;         // NODUS_TRACE
extern const IntParam kMpiMinBytes;      // NODUS_MPI_MIN_BYTES
extern const IntParam kMpiVerbose;       // NODUS_MPI_VERBOSE
}  // namespace param

}  // namespace nodus
