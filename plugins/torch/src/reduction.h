// Torch's tensor types and reduce ops as nodus's data types and reduction
// ops, with the errors for those nodus does not take.
#pragma once

#include <string>

#include <ATen/ATen.h>
#include <torch/csrc/distributed/c10d/Types.hpp>

#include "nodus/nodus.h"

namespace nodus_torch {

// "torch.float32" and so on: the names Python users know.
const char* dtypeName(at::ScalarType st);

// The nodus type a tensor of type `st` travels as; raises for the others.
nodusDataType_t dataType(at::ScalarType st, const std::string& op);

struct Reduction {
  nodusDataType_t type = nodusFloat32;
  nodusRedOp_t op = nodusSum;
  bool premul = false;  // multiply the input by `factor` (or `factorTensor`), then sum
  double factor = 1.0;
  at::Tensor factorTensor;
};

// How nodus computes `reduceOp` on tensors of type `st`; raises where it cannot.
Reduction reduction(const c10d::ReduceOp& reduceOp, at::ScalarType st, const std::string& op);

// `t` multiplied by a PREMUL_SUM's factor.
at::Tensor premultiplied(const at::Tensor& t, const Reduction& r);

}  // namespace nodus_torch
