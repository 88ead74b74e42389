// The collectives of ProcessGroupNodus: each checks its arguments, then
// issues its nodus requests into one Work (process_group_nodus.h).
#include <cstring>
#include <string>
#include <vector>

#include "errors.h"
#include "partners.h"
#include "process_group_nodus.h"
#include "reduction.h"
#include "tensor_checks.h"

namespace nodus_torch {

using c10d::OpType;

c10::intrusive_ptr<c10d::Work> ProcessGroupNodus::allreduce(std::vector<at::Tensor>& tensors,
                                                            const c10d::AllreduceOptions& opts) {
  const std::string op = "allreduce";
  at::Tensor t = single(tensors, op);
  const Reduction red = reduction(opts.reduceOp, t.scalar_type(), op);
  auto w = work(OpType::ALLREDUCE, "nodus:all_reduce", op, {t}, opts.timeout);
  return launch(w, [&] {
    at::Tensor buf = w->output(t, true);
    at::Tensor src = buf;
    if (red.premul) w->keep(src = premultiplied(buf, red));
    nodusRequest_t r;
    check(nodusIallReduce(src.data_ptr(), buf.data_ptr(), static_cast<size_t>(buf.numel()), red.type, red.op, comm_, &r), op);
    w->addRequest(r);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNodus::allreduce_coalesced(std::vector<at::Tensor>& tensors,
                                                                      const c10d::AllreduceCoalescedOptions& opts) {
  const std::string op = "allreduce_coalesced";
  require(!tensors.empty(), op, "needs at least one tensor");
  size_t bytes = 0;
  for (const at::Tensor& t : tensors) {
    checkTensor(t, op);
    require(t.scalar_type() == tensors[0].scalar_type(), op,
            std::string("all tensors must have one type; found ") + dtypeName(tensors[0].scalar_type()) + " and " +
                dtypeName(t.scalar_type()));
    bytes += t.nbytes();
  }
  const Reduction red = reduction(opts.reduceOp, tensors[0].scalar_type(), op);
  auto w = work(OpType::ALLREDUCE_COALESCED, "nodus:all_reduce_coalesced", op, tensors, opts.timeout);
  return launch(w, [&] {
    const int64_t elems = static_cast<int64_t>(bytes / tensors[0].element_size());
    at::Tensor flat = w->staging({elems}, tensors[0].options());
    std::vector<at::Tensor> parts;
    int64_t offset = 0;
    for (const at::Tensor& t : tensors) {
      w->keep(t);
      at::Tensor part = flat.narrow(0, offset, t.numel()).view(t.sizes());
      part.copy_(t);
      parts.push_back(part);
      offset += t.numel();
    }
    at::Tensor src = flat;
    if (red.premul) w->keep(src = premultiplied(flat, red));
    nodusRequest_t r;
    check(nodusIallReduce(src.data_ptr(), flat.data_ptr(), static_cast<size_t>(elems), red.type, red.op, comm_, &r), op);
    w->addRequest(r);
    w->afterSuccess([tensors, parts]() mutable {
      for (size_t i = 0; i < tensors.size(); ++i) tensors[i].copy_(parts[i]);
    });
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNodus::broadcast(std::vector<at::Tensor>& tensors,
                                                            const c10d::BroadcastOptions& opts) {
  const std::string op = "broadcast";
  at::Tensor t = single(tensors, op);
  checkRoot(opts.rootRank, op);
  require(opts.rootTensor == 0, op, "rootTensor must be 0 (one tensor per process)");
  const int root = static_cast<int>(opts.rootRank);
  auto w = work(OpType::BROADCAST, "nodus:broadcast", op, {t}, opts.timeout);
  return launch(w, [&] {
    at::Tensor buf = getRank() == root ? w->input(t) : w->output(t, false);
    nodusRequest_t r;
    check(nodusIbroadcast(buf.data_ptr(), buf.data_ptr(), static_cast<size_t>(buf.numel()), dataType(t.scalar_type(), op),
                          root, comm_, &r),
          op);
    w->addRequest(r);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNodus::reduce(std::vector<at::Tensor>& tensors,
                                                         const c10d::ReduceOptions& opts) {
  const std::string op = "reduce";
  at::Tensor t = single(tensors, op);
  checkRoot(opts.rootRank, op);
  require(opts.rootTensor == 0, op, "rootTensor must be 0 (one tensor per process)");
  const int root = static_cast<int>(opts.rootRank);
  const Reduction red = reduction(opts.reduceOp, t.scalar_type(), op);
  auto w = work(OpType::REDUCE, "nodus:reduce", op, {t}, opts.timeout);
  return launch(w, [&] {
    const bool isRoot = getRank() == root;
    at::Tensor buf = isRoot ? w->output(t, true) : w->input(t);
    at::Tensor src = buf;
    if (red.premul) w->keep(src = premultiplied(buf, red));
    nodusRequest_t r;
    check(nodusIreduce(src.data_ptr(), isRoot ? buf.data_ptr() : nullptr, static_cast<size_t>(buf.numel()), red.type,
                       red.op, root, comm_, &r),
          op);
    w->addRequest(r);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNodus::allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                                            std::vector<at::Tensor>& inputs,
                                                            const c10d::AllgatherOptions& opts) {
  const std::string op = "allgather";
  at::Tensor in = single(inputs, op);
  require(outputs.size() == 1, op, "expects one list of output tensors");
  std::vector<at::Tensor>& outs = outputs[0];
  require(static_cast<int>(outs.size()) == getSize(), op,
          "the output list has " + std::to_string(outs.size()) + " tensors; the group has " + std::to_string(getSize()));
  // Uneven: each output as large as its rank's input (nodusAllGatherV); this
  // rank's own must match its input.
  bool even = true;
  for (const at::Tensor& o : outs) {
    checkTensor(o, op);
    require(o.scalar_type() == in.scalar_type(), op,
            std::string("an output tensor has type ") + dtypeName(o.scalar_type()) + " but the input has " +
                dtypeName(in.scalar_type()));
    even = even && o.numel() == in.numel();
  }
  checkLike(outs[static_cast<size_t>(getRank())], in, op, "this rank's output tensor");
  auto w = work(OpType::ALLGATHER, "nodus:all_gather", op, outs, opts.timeout);
  return launch(w, [&] {
    const at::Tensor src = w->input(in);
    const size_t count = static_cast<size_t>(in.numel());
    nodusRequest_t r;
    if (!even) {
      std::vector<size_t> counts(getSize()), displs(getSize());
      size_t total = 0;
      for (int q = 0; q < getSize(); ++q) {
        counts[q] = static_cast<size_t>(outs[q].numel());
        displs[q] = total;
        total += counts[q];
      }
      at::Tensor flat = w->staging({static_cast<int64_t>(total)}, in.options());
      check(nodusIallGatherV(src.data_ptr(), count, flat.data_ptr(), counts.data(), displs.data(),
                             dataType(in.scalar_type(), op), comm_, &r),
            op);
      std::vector<at::Tensor> targets = outs;
      w->afterSuccess([flat, targets, displs] {
        for (size_t q = 0; q < targets.size(); ++q)
          targets[q].copy_(flat.narrow(0, static_cast<int64_t>(displs[q]), targets[q].numel()).view(targets[q].sizes()));
      });
    } else if (adjacent(outs)) {
      check(nodusIallGather(src.data_ptr(), outs[0].data_ptr(), count, dataType(in.scalar_type(), op), comm_, &r), op);
    } else {
      // Straight into each output (non-contiguous ones through staging):
      // no gathered copy to scatter afterwards.
      std::vector<void*> dsts;
      for (const at::Tensor& o : outs) dsts.push_back(w->output(o, false).data_ptr());
      check(nodusIallGatherList(src.data_ptr(), dsts.data(), count, dataType(in.scalar_type(), op), comm_, &r), op);
    }
    w->addRequest(r);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNodus::_allgather_base(at::Tensor& output, at::Tensor& input,
                                                                  const c10d::AllgatherOptions& opts) {
  const std::string op = "all_gather_into_tensor";
  checkTensor(input, op);
  checkTensor(output, op);
  require(output.scalar_type() == input.scalar_type(), op,
          std::string("the output has type ") + dtypeName(output.scalar_type()) + " but the input has " +
              dtypeName(input.scalar_type()));
  require(output.numel() == input.numel() * getSize(), op,
          "the output has " + std::to_string(output.numel()) + " elements; it needs the group size (" +
              std::to_string(getSize()) + ") times the input's " + std::to_string(input.numel()));
  auto w = work(OpType::_ALLGATHER_BASE, "nodus:all_gather_into_tensor", op, {output}, opts.timeout);
  return launch(w, [&] {
    const at::Tensor src = w->input(input);
    at::Tensor dst = w->output(output, false);
    nodusRequest_t r;
    check(nodusIallGather(src.data_ptr(), dst.data_ptr(), static_cast<size_t>(input.numel()),
                          dataType(input.scalar_type(), op), comm_, &r),
          op);
    w->addRequest(r);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNodus::reduce_scatter(std::vector<at::Tensor>& outputs,
                                                                 std::vector<std::vector<at::Tensor>>& inputs,
                                                                 const c10d::ReduceScatterOptions& opts) {
  const std::string op = "reduce_scatter";
  at::Tensor out = single(outputs, op);
  require(inputs.size() == 1, op, "expects one list of input tensors");
  std::vector<at::Tensor>& ins = inputs[0];
  require(static_cast<int>(ins.size()) == getSize(), op,
          "the input list has " + std::to_string(ins.size()) + " tensors; the group has " + std::to_string(getSize()));
  for (const at::Tensor& i : ins) checkLike(i, out, op, "an input tensor");
  const Reduction red = reduction(opts.reduceOp, out.scalar_type(), op);
  auto w = work(OpType::REDUCE_SCATTER, "nodus:reduce_scatter", op, {out}, opts.timeout);
  return launch(w, [&] {
    at::Tensor src;
    if (adjacent(ins)) {
      for (const at::Tensor& i : ins) w->keep(i);
      src = at::from_blob(ins[0].data_ptr(), {out.numel() * getSize()}, out.options());
    } else {
      src = w->staging({out.numel() * getSize()}, out.options());
      for (int i = 0; i < getSize(); ++i) src.narrow(0, i * out.numel(), out.numel()).view(out.sizes()).copy_(ins[i]);
    }
    if (red.premul) w->keep(src = premultiplied(src, red));
    at::Tensor dst = w->output(out, false);
    nodusRequest_t r;
    check(nodusIreduceScatter(src.data_ptr(), dst.data_ptr(), static_cast<size_t>(out.numel()), red.type, red.op, comm_, &r),
          op);
    w->addRequest(r);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNodus::_reduce_scatter_base(at::Tensor& output, at::Tensor& input,
                                                                       const c10d::ReduceScatterOptions& opts) {
  const std::string op = "reduce_scatter_tensor";
  checkTensor(input, op);
  checkTensor(output, op);
  require(output.scalar_type() == input.scalar_type(), op,
          std::string("the output has type ") + dtypeName(output.scalar_type()) + " but the input has " +
              dtypeName(input.scalar_type()));
  require(input.numel() == output.numel() * getSize(), op,
          "the input has " + std::to_string(input.numel()) + " elements; it needs the group size (" +
              std::to_string(getSize()) + ") times the output's " + std::to_string(output.numel()));
  const Reduction red = reduction(opts.reduceOp, output.scalar_type(), op);
  auto w = work(OpType::_REDUCE_SCATTER_BASE, "nodus:reduce_scatter_tensor", op, {output}, opts.timeout);
  return launch(w, [&] {
    at::Tensor src = w->input(input);
    if (red.premul) w->keep(src = premultiplied(src, red));
    at::Tensor dst = w->output(output, false);
    nodusRequest_t r;
    check(nodusIreduceScatter(src.data_ptr(), dst.data_ptr(), static_cast<size_t>(output.numel()), red.type, red.op,
                              comm_, &r),
          op);
    w->addRequest(r);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNodus::alltoall_base(at::Tensor& output, at::Tensor& input,
                                                                std::vector<int64_t>& outputSplits,
                                                                std::vector<int64_t>& inputSplits,
                                                                const c10d::AllToAllOptions& opts) {
  const std::string op = "all_to_all_single";
  checkTensor(input, op);
  checkTensor(output, op);
  require(output.scalar_type() == input.scalar_type(), op,
          std::string("the output has type ") + dtypeName(output.scalar_type()) + " but the input has " +
              dtypeName(input.scalar_type()));
  require(input.dim() >= 1 && output.dim() >= 1, op, "tensors need at least one dimension");
  const std::vector<size_t> sendBytes = splitBytes(input, inputSplits, "input", op);
  const std::vector<size_t> recvBytes = splitBytes(output, outputSplits, "output", op);
  auto w = work(OpType::ALLTOALL_BASE, "nodus:all_to_all_single", op, {output}, opts.timeout);
  return launch(w, [&] {
    at::Tensor src = w->input(input);
    at::Tensor dst = w->output(output, false);
    nodusRequest_t r;
    if (inputSplits.empty() && outputSplits.empty() && sendBytes == recvBytes) {
      // Even splits: nodusAllToAll (whose tuner may pick Bruck for small blocks).
      check(nodusIallToAll(src.data_ptr(), dst.data_ptr(), sendBytes[0], nodusUint8, comm_, &r), op);
    } else {
      // Counts and displacements in bytes: the rows of every split are contiguous.
      std::vector<size_t> sendAt(getSize()), recvAt(getSize());
      for (int q = 1; q < getSize(); ++q) {
        sendAt[q] = sendAt[q - 1] + sendBytes[q - 1];
        recvAt[q] = recvAt[q - 1] + recvBytes[q - 1];
      }
      check(nodusIallToAllV(src.data_ptr(), sendBytes.data(), sendAt.data(), dst.data_ptr(), recvBytes.data(),
                            recvAt.data(), nodusUint8, comm_, &r),
            op);
    }
    w->addRequest(r);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNodus::alltoall(std::vector<at::Tensor>& outputs,
                                                           std::vector<at::Tensor>& inputs,
                                                           const c10d::AllToAllOptions& opts) {
  const std::string op = "all_to_all";
  require(static_cast<int>(outputs.size()) == getSize() && static_cast<int>(inputs.size()) == getSize(), op,
          "needs one input and one output tensor per rank (" + std::to_string(getSize()) + "), got " +
              std::to_string(inputs.size()) + " and " + std::to_string(outputs.size()));
  for (const at::Tensor& t : inputs) checkTensor(t, op);
  for (const at::Tensor& t : outputs) {
    checkTensor(t, op);
    require(t.scalar_type() == inputs[0].scalar_type(), op, "all tensors must have one type");
  }
  for (const at::Tensor& t : inputs) require(t.scalar_type() == inputs[0].scalar_type(), op, "all tensors must have one type");
  auto w = work(OpType::ALLTOALL, "nodus:all_to_all", op, outputs, opts.timeout);
  return launch(w, [&] {
    // The lists packed into one staging buffer each way (nodusAllToAllV
    // takes one buffer and displacements), the outputs copied out after.
    const int p = getSize();
    std::vector<size_t> sendBytes(p), recvBytes(p), sendAt(p), recvAt(p);
    size_t sendTotal = 0, recvTotal = 0;
    for (int q = 0; q < p; ++q) {
      sendAt[q] = sendTotal;
      recvAt[q] = recvTotal;
      sendTotal += sendBytes[q] = inputs[q].nbytes();
      recvTotal += recvBytes[q] = outputs[q].nbytes();
    }
    const auto bytes = at::TensorOptions().dtype(at::kByte);
    at::Tensor packed = w->staging({static_cast<int64_t>(sendTotal)}, bytes);
    at::Tensor landed = w->staging({static_cast<int64_t>(recvTotal)}, bytes);
    for (int q = 0; q < p; ++q)
      if (sendBytes[q])
        std::memcpy(static_cast<char*>(packed.data_ptr()) + sendAt[q], w->input(inputs[q]).data_ptr(), sendBytes[q]);
    nodusRequest_t r;
    check(nodusIallToAllV(packed.data_ptr(), sendBytes.data(), sendAt.data(), landed.data_ptr(), recvBytes.data(),
                          recvAt.data(), nodusUint8, comm_, &r),
          op);
    w->addRequest(r);
    std::vector<at::Tensor> targets = outputs;
    w->afterSuccess([landed, targets, recvAt, recvBytes] {
      for (size_t q = 0; q < targets.size(); ++q) {
        if (recvBytes[q] == 0) continue;
        at::Tensor part = landed.narrow(0, static_cast<int64_t>(recvAt[q]), static_cast<int64_t>(recvBytes[q]));
        targets[q].copy_(part.view(targets[q].scalar_type()).view(targets[q].sizes()));
      }
    });
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNodus::gather(std::vector<std::vector<at::Tensor>>& outputs,
                                                         std::vector<at::Tensor>& inputs,
                                                         const c10d::GatherOptions& opts) {
  const std::string op = "gather";
  at::Tensor in = single(inputs, op);
  checkRoot(opts.rootRank, op);
  const int root = static_cast<int>(opts.rootRank);
  const bool isRoot = getRank() == root;
  std::vector<at::Tensor> outs;
  if (isRoot) {
    require(outputs.size() == 1 && static_cast<int>(outputs[0].size()) == getSize(), op,
            "the root needs a list of " + std::to_string(getSize()) + " output tensors");
    outs = outputs[0];
    for (const at::Tensor& o : outs) checkLike(o, in, op, "an output tensor");
  } else {
    require(outputs.empty() || (outputs.size() == 1 && outputs[0].empty()), op, "only the root passes output tensors");
  }
  auto w = work(OpType::GATHER, "nodus:gather", op, outs, opts.timeout);
  return launch(w, [&] {
    const size_t bytes = in.nbytes();
    nodusRequest_t r;
    void* dst = nullptr;
    at::Tensor flat;
    if (isRoot) {
      // Adjacent contiguous outputs take the blocks where they are; others
      // are filled from a staging buffer once the gather is done.
      if (adjacent(outs)) {
        dst = outs[0].data_ptr();
      } else {
        flat = w->staging({static_cast<int64_t>(bytes) * getSize()}, at::TensorOptions().dtype(at::kByte));
        dst = flat.data_ptr();
      }
    }
    check(nodusIgather(w->input(in).data_ptr(), dst, bytes, nodusUint8, root, comm_, &r), op);
    w->addRequest(r);
    if (flat.defined()) {
      std::vector<at::Tensor> targets = outs;
      w->afterSuccess([flat, targets, bytes] {
        for (size_t q = 0; q < targets.size(); ++q)
          targets[q].copy_(flat.narrow(0, static_cast<int64_t>(q * bytes), static_cast<int64_t>(bytes))
                               .view(targets[q].scalar_type())
                               .view(targets[q].sizes()));
      });
    }
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNodus::scatter(std::vector<at::Tensor>& outputs,
                                                          std::vector<std::vector<at::Tensor>>& inputs,
                                                          const c10d::ScatterOptions& opts) {
  const std::string op = "scatter";
  at::Tensor out = single(outputs, op);
  checkRoot(opts.rootRank, op);
  const int root = static_cast<int>(opts.rootRank);
  const bool isRoot = getRank() == root;
  std::vector<at::Tensor> ins;
  if (isRoot) {
    require(inputs.size() == 1 && static_cast<int>(inputs[0].size()) == getSize(), op,
            "the root needs a list of " + std::to_string(getSize()) + " input tensors");
    ins = inputs[0];
    for (const at::Tensor& i : ins) checkLike(i, out, op, "an input tensor");
  } else {
    require(inputs.empty() || (inputs.size() == 1 && inputs[0].empty()), op, "only the root passes input tensors");
  }
  auto w = work(OpType::SCATTER, "nodus:scatter", op, {out}, opts.timeout);
  return launch(w, [&] {
    const size_t bytes = out.nbytes();
    const void* src = nullptr;
    if (isRoot) {
      if (adjacent(ins)) {
        src = ins[0].data_ptr();
      } else {
        at::Tensor flat = w->staging({static_cast<int64_t>(bytes) * getSize()}, at::TensorOptions().dtype(at::kByte));
        for (int q = 0; q < getSize(); ++q)
          if (bytes) std::memcpy(static_cast<char*>(flat.data_ptr()) + q * bytes, w->input(ins[q]).data_ptr(), bytes);
        src = flat.data_ptr();
      }
    }
    nodusRequest_t r;
    check(nodusIscatter(src, w->output(out, false).data_ptr(), bytes, nodusUint8, root, comm_, &r), op);
    w->addRequest(r);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupNodus::barrier(const c10d::BarrierOptions& opts) {
  const std::string op = "barrier";
  auto w = work(OpType::BARRIER, "nodus:barrier", op, {}, opts.timeout);
  return launch(w, [&] {
    nodusRequest_t r;
    check(nodusIbarrier(comm_, &r), op);
    w->addRequest(r);
  });
}

std::vector<size_t> ProcessGroupNodus::splitBytes(const at::Tensor& t, const std::vector<int64_t>& splits,
                                                  const char* which, const std::string& op) const {
  const int p = getSize();
  const int64_t rows = t.size(0);
  const size_t rowBytes = rows ? t.nbytes() / static_cast<size_t>(rows) : 0;
  std::vector<size_t> bytes(p);
  if (splits.empty()) {
    require(rows % p == 0, op,
            std::string("the ") + which + " has " + std::to_string(rows) + " rows, not a multiple of the group size " +
                std::to_string(p) + " (pass split sizes)");
    for (int q = 0; q < p; ++q) bytes[q] = static_cast<size_t>(rows / p) * rowBytes;
    return bytes;
  }
  require(static_cast<int>(splits.size()) == p, op,
          std::string(which) + " split sizes have " + std::to_string(splits.size()) + " entries; the group has " +
              std::to_string(p));
  int64_t sum = 0;
  for (int q = 0; q < p; ++q) {
    require(splits[q] >= 0, op, std::string(which) + " split sizes must not be negative");
    sum += splits[q];
    bytes[q] = static_cast<size_t>(splits[q]) * rowBytes;
  }
  require(sum == rows, op,
          std::string(which) + " split sizes add up to " + std::to_string(sum) + " but the " + which + " has " +
              std::to_string(rows) + " rows");
  return bytes;
}

void ProcessGroupNodus::exchange(NodusWork& w, const std::vector<const char*>& sendAt,
                                 const std::vector<size_t>& sendBytes, const std::vector<char*>& recvAt,
                                 const std::vector<size_t>& recvBytes, const std::string& op) {
  const int me = getRank();
  require(sendBytes[me] == recvBytes[me], op,
          "this rank sends itself " + std::to_string(sendBytes[me]) + " bytes but expects " +
              std::to_string(recvBytes[me]));
  if (sendBytes[me]) std::memcpy(recvAt[me], sendAt[me], sendBytes[me]);
  for (int q : partners(getSize(), me)) {
    if (q < 0) continue;
    if (me < q) {
      if (sendBytes[q]) send(w, sendAt[q], sendBytes[q], q, op);
      if (recvBytes[q]) recv(w, recvAt[q], recvBytes[q], q, op);
    } else {
      if (recvBytes[q]) recv(w, recvAt[q], recvBytes[q], q, op);
      if (sendBytes[q]) send(w, sendAt[q], sendBytes[q], q, op);
    }
  }
}

}  // namespace nodus_torch
