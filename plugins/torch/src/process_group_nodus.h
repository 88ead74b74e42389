// The "nodus" backend for torch.distributed: a c10d process group (torch 1.x)
// or backend (torch 2.x) whose every operation is one or more nodus
// non-blocking requests. One poller thread per process group completes the
// Work objects in issue order (nodus completes a communicator's requests in
// that order), so no call costs a thread; Work::wait() polls the requests
// itself first, so short operations do not wait for the poller to wake.
//
// The operations are defined by kind: collectives.cc, point_to_point.cc;
// set-up and the issuing of Works in process_group_nodus.cc.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include <torch/version.h>
#if TORCH_VERSION_MAJOR >= 2
#include <torch/csrc/distributed/c10d/Backend.hpp>
#else
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#endif
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/distributed/c10d/Types.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>

#include "nodus/nodus.h"
#include "nodus_work.h"
#include "poller.h"

namespace nodus_torch {

#if TORCH_VERSION_MAJOR >= 2
using Base = c10d::Backend;  // torch 2 wraps backends in its own ProcessGroup
#else
using Base = c10d::ProcessGroup;
#endif

class StagingPool;

class ProcessGroupNodus : public Base {
 public:
  // Joins the group's nodus communicator, rendezvousing through `store`: made
  // from this process's first nodus group (nodusCommCreateGroup, no new
  // connections or ids) where every member belongs to that one, else from a
  // new unique id (and then, if it is the first, it is that one).
  ProcessGroupNodus(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size, std::chrono::milliseconds timeout);
  // Whether the communicator was made from the first group's (dist.new_group).
  bool madeFromParent() const { return fromParent_; }
  nodusComm_t comm() const { return comm_; }
  // Waits until every issued operation has ended.
  ~ProcessGroupNodus() override;

  const std::string getBackendName() const override { return "nodus"; }

  // ---- Collectives (collectives.cc)
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts = c10d::AllreduceOptions()) override;

  // One reduction over the tensors laid end to end in a staging buffer.
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(
      std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts = c10d::AllreduceCoalescedOptions()) override;

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts = c10d::BroadcastOptions()) override;

  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors,
                                        const c10d::ReduceOptions& opts = c10d::ReduceOptions()) override;

  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts = c10d::AllgatherOptions()) override;

  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts = c10d::AllgatherOptions()) override;

  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts = c10d::ReduceScatterOptions()) override;

  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                      const c10d::ReduceScatterOptions& opts = c10d::ReduceScatterOptions()) override;

  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input, std::vector<int64_t>& outputSplits,
                                               std::vector<int64_t>& inputSplits,
                                               const c10d::AllToAllOptions& opts = c10d::AllToAllOptions()) override;

  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts = c10d::AllToAllOptions()) override;

  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
                                        const c10d::GatherOptions& opts = c10d::GatherOptions()) override;

  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
                                         const c10d::ScatterOptions& opts = c10d::ScatterOptions()) override;

  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts = c10d::BarrierOptions()) override;

  // ---- Point to point (point_to_point.cc)
  // Tags are not used: messages between two ranks match in the order issued.
  // A send completes as its receiver takes the data (there is no unbounded
  // buffering): exchanges that could wait in a cycle belong in
  // batch_isend_irecv, which runs them as one nodus group.
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dstRank, int /*tag*/) override;

  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int srcRank, int /*tag*/) override;

#if TORCH_VERSION_MAJOR < 2
  // batch_isend_irecv: the sends and receives between these two calls are
  // recorded, then run together as one nodus group, which progresses them all
  // at once (so rings and exchanges cannot wait in a cycle). The group runs to
  // completion on this thread.
  void startCoalescing() override { coalescing_ = true; }

  void endCoalescing(std::vector<c10::intrusive_ptr<c10d::Work>>& /*reqs*/) override;
#endif

  // Raises: receiving from any source is not supported.
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>& /*tensors*/, int /*tag*/) override;

 private:
  // A Work for one operation, with `timeout` or else the group's.
  c10::intrusive_ptr<NodusWork> work(c10d::OpType type, const char* title, const std::string& name,
                                     std::vector<at::Tensor> outputs, std::chrono::milliseconds timeout);

  // Issues the Work's requests (one thread at a time: a communicator is not
  // meant to be driven by several), then hands it to the poller. A failure
  // while issuing raises here; requests issued before it still complete in
  // the background first.
  template <typename Issue>
  c10::intrusive_ptr<c10d::Work> launch(const c10::intrusive_ptr<NodusWork>& w, Issue&& issue) {
    std::exception_ptr failed;
    {
      std::lock_guard<std::mutex> lock(issueMu_);
      try {
        issue();
      } catch (const std::exception& e) {
        failed = std::current_exception();
        w->issueFailed(e.what());
      }
    }
    poller_->push(w);
    if (failed) std::rethrow_exception(failed);
    return w;
  }

  // Raises unless `root` is a rank of the group.
  void checkRoot(int64_t root, const std::string& op) const;

  // The bytes of `t` (rows along dimension 0) going to or coming from each
  // rank: even parts, or as `splits` says (checked).
  std::vector<size_t> splitBytes(const at::Tensor& t, const std::vector<int64_t>& splits, const char* which,
                                 const std::string& op) const;

  // One nodus send or receive of `bytes`, added to `w`.
  void send(NodusWork& w, const void* buf, size_t bytes, int peer, const std::string& op);
  void recv(NodusWork& w, void* buf, size_t bytes, int peer, const std::string& op);

  // All-to-all as pairwise exchanges in tournament rounds. (nodusGroupEnd
  // would run a group to completion on the calling thread; these stay
  // asynchronous and cannot deadlock, see partners().)
  void exchange(NodusWork& w, const std::vector<const char*>& sendAt, const std::vector<size_t>& sendBytes,
                const std::vector<char*>& recvAt, const std::vector<size_t>& recvBytes, const std::string& op);

#if TORCH_VERSION_MAJOR < 2
  struct Deferred {
    c10::intrusive_ptr<NodusWork> work;
    bool isSend;
    void* buf;
    size_t bytes;
    int peer;
  };
  bool coalescing_ = false;
  std::vector<Deferred> deferred_;
#endif

  nodusComm_t comm_ = nullptr;
  bool fromParent_ = false;
  const std::chrono::milliseconds timeout_;
  std::shared_ptr<StagingPool> pool_;
  std::mutex issueMu_;
  std::unique_ptr<Poller> poller_;
};

}  // namespace nodus_torch
