#include "tensor_checks.h"

#include "errors.h"
#include "reduction.h"

namespace nodus_torch {

void checkTensor(const at::Tensor& t, const std::string& op) {
  require(t.defined(), op, "a tensor is undefined");
  require(t.layout() == c10::kStrided, op, "sparse tensors are not supported");
  require(t.device().is_cpu(), op, "tensors must be on the CPU, not " + t.device().str());
  (void)dataType(t.scalar_type(), op);
}

at::Tensor& single(std::vector<at::Tensor>& tensors, const std::string& op) {
  require(tensors.size() == 1, op,
          "expects exactly one tensor per process, got " + std::to_string(tensors.size()));
  checkTensor(tensors[0], op);
  return tensors[0];
}

void checkLike(const at::Tensor& t, const at::Tensor& like, const std::string& op, const std::string& what) {
  checkTensor(t, op);
  require(t.scalar_type() == like.scalar_type(), op,
          what + " has type " + dtypeName(t.scalar_type()) + " but the input has " + dtypeName(like.scalar_type()));
  require(t.numel() == like.numel(), op,
          what + " has " + std::to_string(t.numel()) + " elements but the input has " + std::to_string(like.numel()));
}

bool adjacent(const std::vector<at::Tensor>& ts) {
  if (ts.empty()) return false;
  auto* next = static_cast<const char*>(ts[0].data_ptr());
  for (const at::Tensor& t : ts) {
    if (!t.is_contiguous() || static_cast<const char*>(t.data_ptr()) != next) return false;
    next += t.nbytes();
  }
  return true;
}

}  // namespace nodus_torch
