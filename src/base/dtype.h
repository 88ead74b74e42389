// Data types and reduction operations: sizes, names, validation.
#pragma once

#include <cstddef>

#include "nodus/nodus.h"

namespace nodus {

inline bool validType(nodusDataType_t t) { return t >= 0 && t < nodusNumTypes; }
inline bool validOp(nodusRedOp_t op) { return op >= 0 && op < nodusNumOps; }

inline size_t typeSize(nodusDataType_t t) {
  switch (t) {
    case nodusInt8:
    case nodusUint8: return 1;
    case nodusFloat16:
    case nodusBfloat16: return 2;
    case nodusInt32:
    case nodusUint32:
    case nodusFloat32: return 4;
    case nodusInt64:
    case nodusUint64:
    case nodusFloat64: return 8;
    default: return 0;
  }
}

const char* typeName(nodusDataType_t t);  // "float32", ... ("?" if invalid)
const char* opName(nodusRedOp_t op);      // "sum", ...

}  // namespace nodus
