#include "process_group_nodus.h"

#include <cstring>

#include <torch/csrc/utils/pybind.h>

#include "errors.h"
#include "staging_pool.h"

namespace nodus_torch {

namespace py = pybind11;

ProcessGroupNodus::ProcessGroupNodus(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size,
                                     std::chrono::milliseconds timeout)
    : Base(rank, size), timeout_(timeout), pool_(std::make_shared<StagingPool>()) {
  const std::string op = "init";
  require(size >= 1 && rank >= 0 && rank < size, op,
          "rank " + std::to_string(rank) + " is not in a group of " + std::to_string(size));
  // Several groups may rendezvous through one store (a PrefixStore per group
  // already separates most): count generations of `size` members.
  const int64_t generation = (store->add("nodus/members", 1) - 1) / size;
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
