#include "process_group_nodus.h"

#include <cstring>

#include <torch/csrc/utils/pybind.h>

#include "errors.h"
#include "staging_pool.h"

namespace nodus_torch {

namespace py = pybind11;

namespace {

// This process's first nodus group, the one later groups are made from (in
// torch: the default group, which init_process_group creates first).
// `id` names it alike in every member (a hash of its unique id).
struct FirstGroup {
  std::mutex mu;
  const ProcessGroupNodus* owner = nullptr;
  nodusComm_t comm = nullptr;
  uint64_t id = 0;
  int rank = -1;
};
FirstGroup& firstGroup() {
  static FirstGroup* g = new FirstGroup;  // never destroyed: groups may outlive static destruction
  return *g;
}

uint64_t hashOf(const nodusUniqueId& id) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (char c : id.internal) h = (h ^ static_cast<unsigned char>(c)) * 0x100000001b3ull;
  return h | 1;  // never 0 (0: no first group)
}

}  // namespace

ProcessGroupNodus::ProcessGroupNodus(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                     std::chrono::milliseconds timeout)
    : Base(rank, size), timeout_(timeout), pool_(std::make_shared<StagingPool>()) {
  const std::string op = "init";
  require(size >= 1 && rank >= 0 && rank < size, op,
          "rank " + std::to_string(rank) + " is not in a group of " + std::to_string(size));
  // Several groups may rendezvous through one store (a PrefixStore per group
  // already separates most): count generations of `size` members.
  const int64_t generation = (store->add("nodus/members", 1) - 1) / size;
  FirstGroup& first = firstGroup();
  std::unique_lock<std::mutex> lock(first.mu);
  // Every member says which first group it has and its rank there; if all
  // have the same, the group is made from it (nodusCommCreateGroup: collective
  // over the members only, as torch calls the constructor on members only).
  const std::string mine = std::to_string(first.owner ? first.id : 0) + ":" + std::to_string(first.rank);
  const std::string prefix = "nodus/first/" + std::to_string(generation) + "/";
  store->set(prefix + std::to_string(rank), std::vector<uint8_t>(mine.begin(), mine.end()));
  std::vector<int> parentRanks;
  bool same = first.owner != nullptr;
  for (int q = 0; q < size; ++q) {
    const std::vector<uint8_t> got = store->get(prefix + std::to_string(q));
    const std::string text(got.begin(), got.end());
    const size_t colon = text.find(':');
    same = same && colon != std::string::npos && text.substr(0, colon) == std::to_string(first.id);
    if (same) parentRanks.push_back(std::stoi(text.substr(colon + 1)));
  }
  if (same) {
    check(nodusCommCreateGroup(first.comm, parentRanks.data(), size, &comm_, nullptr), op);
    fromParent_ = true;
    lock.unlock();
    poller_ = std::make_unique<Poller>();
#if TORCH_VERSION_MAJOR < 2
    init();
#endif
    return;
  }
  const std::string key = "nodus/unique_id/" + std::to_string(generation);
  nodusUniqueId id;
  if (rank == 0) {
    check(nodusGetUniqueId(&id), op);
    store->set(key, std::vector<uint8_t>(id.internal, id.internal + sizeof(id.internal)));
  } else {
    std::vector<uint8_t> bytes = store->get(key);
    require(bytes.size() == sizeof(id.internal), op,
            "the unique id in the store has " + std::to_string(bytes.size()) + " bytes, not " +
                std::to_string(sizeof(id.internal)));
    std::memcpy(id.internal, bytes.data(), bytes.size());
  }
  check(nodusCommInitRank(&comm_, size, id, rank), op);
  if (first.owner == nullptr) {
    first.owner = this;
    first.comm = comm_;
    first.id = hashOf(id);
    first.rank = rank;
  }
  lock.unlock();
  poller_ = std::make_unique<Poller>();
#if TORCH_VERSION_MAJOR < 2
  init();
#endif
}

ProcessGroupNodus::~ProcessGroupNodus() {
  // Waits until every issued operation has ended. Their futures' callbacks
  // may need the GIL: do not hold it meanwhile.
  if (Py_IsInitialized() && PyGILState_Check()) {
    py::gil_scoped_release nogil;
    poller_.reset();
  } else {
    poller_.reset();
  }
  {
    FirstGroup& first = firstGroup();
    std::lock_guard<std::mutex> lock(first.mu);
    if (first.owner == this) {
      first.owner = nullptr;
      first.comm = nullptr;
      first.id = 0;
      first.rank = -1;
    }
  }
  nodusCommDestroy(comm_);
}

c10::intrusive_ptr<NodusWork> ProcessGroupNodus::work(c10d::OpType type, const char* title, const std::string& name,
                                                      std::vector<at::Tensor> outputs, std::chrono::milliseconds timeout) {
  const auto limit = timeout > std::chrono::milliseconds::zero() ? timeout : timeout_;
  return c10::make_intrusive<NodusWork>(getRank(), type, title, name, std::move(outputs), limit, pool_);
}

void ProcessGroupNodus::checkRoot(int64_t root, const std::string& op) const {
  require(root >= 0 && root < getSize(), op,
          "root " + std::to_string(root) + " is not a rank of this group of " + std::to_string(getSize()));
}

}  // namespace nodus_torch
