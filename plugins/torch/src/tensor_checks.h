// What every operation checks of the tensors it is given; each raises with
// the operation's name when a tensor is not one nodus can use.
#pragma once

#include <string>
#include <vector>

#include <ATen/ATen.h>

namespace nodus_torch {

// Defined, strided, on the CPU and of a type nodus takes.
void checkTensor(const at::Tensor& t, const std::string& op);

// The one tensor of a per-process list, checked.
at::Tensor& single(std::vector<at::Tensor>& tensors, const std::string& op);

// Checked, and of the type and size of `like`; `what` names `t` in errors.
void checkLike(const at::Tensor& t, const at::Tensor& like, const std::string& op, const std::string& what);

// Whether `ts` are contiguous and lie one after the other in memory: then
// they are one buffer nodus can use without a copy.
bool adjacent(const std::vector<at::Tensor>& ts);

}  // namespace nodus_torch
