#include "reduction.h"

#include <torch/version.h>

#include "errors.h"

namespace nodus_torch {

namespace {

constexpr const char* kSupported =
    "float32, float64, float16, bfloat16, int8, uint8, int32, int64 and bool are supported";

const char* opName(c10d::ReduceOp::RedOpType op) {
  switch (op) {
    case c10d::ReduceOp::SUM: return "SUM";
    case c10d::ReduceOp::AVG: return "AVG";
    case c10d::ReduceOp::PRODUCT: return "PRODUCT";
    case c10d::ReduceOp::MIN: return "MIN";
    case c10d::ReduceOp::MAX: return "MAX";
    case c10d::ReduceOp::BAND: return "BAND";
    case c10d::ReduceOp::BOR: return "BOR";
    case c10d::ReduceOp::BXOR: return "BXOR";
    case c10d::ReduceOp::PREMUL_SUM: return "PREMUL_SUM";
    default: return "UNKNOWN";
  }
}

}  // namespace

const char* dtypeName(at::ScalarType st) {
  switch (st) {
    case at::kFloat: return "torch.float32";
    case at::kDouble: return "torch.float64";
    case at::kHalf: return "torch.float16";
    case at::kBFloat16: return "torch.bfloat16";
    case at::kChar: return "torch.int8";
    case at::kByte: return "torch.uint8";
    case at::kShort: return "torch.int16";
    case at::kInt: return "torch.int32";
    case at::kLong: return "torch.int64";
    case at::kBool: return "torch.bool";
    default: return c10::toString(st);
  }
}

// bool travels as uint8 (torch stores it as one byte holding 0 or 1).
nodusDataType_t dataType(at::ScalarType st, const std::string& op) {
  switch (st) {
    case at::kFloat: return nodusFloat32;
    case at::kDouble: return nodusFloat64;
    case at::kHalf: return nodusFloat16;
    case at::kBFloat16: return nodusBfloat16;
    case at::kChar: return nodusInt8;
    case at::kByte: return nodusUint8;
    case at::kInt: return nodusInt32;
    case at::kLong: return nodusInt64;
    case at::kBool: return nodusUint8;
    default: raise(op, std::string("tensors of type ") + dtypeName(st) + " are not supported (" + kSupported + ")");
  }
}

// SUM/PRODUCT on bool are logical or/and, as torch computes them: MAX/MIN on
// 0/1 bytes. AVG and PREMUL_SUM are defined for floating-point tensors only
// (an integer average would have to round; nodus and torch round differently).
Reduction reduction(const c10d::ReduceOp& reduceOp, at::ScalarType st, const std::string& op) {
  const auto kind = static_cast<c10d::ReduceOp::RedOpType>(reduceOp);
  const bool isFloat = at::isFloatingType(st);
  const bool isBool = st == at::kBool;
  Reduction r;
  r.type = dataType(st, op);
  switch (kind) {
    case c10d::ReduceOp::SUM: r.op = isBool ? nodusMax : nodusSum; break;
    case c10d::ReduceOp::PRODUCT: r.op = isBool ? nodusMin : nodusProd; break;
    case c10d::ReduceOp::MIN: r.op = nodusMin; break;
    case c10d::ReduceOp::MAX: r.op = nodusMax; break;
    case c10d::ReduceOp::AVG:
      require(isFloat, op, std::string("ReduceOp.AVG needs a floating-point tensor, not ") + dtypeName(st) +
                           " (use ReduceOp.SUM and divide)");
      r.op = nodusAvg;
      break;
    case c10d::ReduceOp::PREMUL_SUM: {
      require(isFloat, op, std::string("ReduceOp.PREMUL_SUM needs a floating-point tensor, not ") + dtypeName(st));
      auto* supplement = static_cast<c10d::NCCLPreMulSumSupplement*>(reduceOp.supplement_.get());
      require(supplement != nullptr, op, "ReduceOp.PREMUL_SUM without a factor (make it with _make_nccl_premul_sum)");
      r.op = nodusSum;
      r.premul = true;
#if TORCH_VERSION_MAJOR >= 2
      if (supplement->tensor_factor.defined()) r.factorTensor = supplement->tensor_factor;
#else
      if (!supplement->tensor_factors.empty()) r.factorTensor = supplement->tensor_factors[0];
#endif
      else r.factor = supplement->double_factor;
      break;
    }
    default: raise(op, std::string("ReduceOp.") + opName(kind) + " is not supported (SUM, PRODUCT, MIN, MAX, AVG and PREMUL_SUM are)");
  }
  return r;
}

at::Tensor premultiplied(const at::Tensor& t, const Reduction& r) {
  if (r.factorTensor.defined()) return at::mul(t, r.factorTensor.to(t.scalar_type()));
  return at::mul(t, r.factor);
}

}  // namespace nodus_torch
