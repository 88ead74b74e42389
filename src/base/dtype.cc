#include "base/dtype.h"

namespace nodus {

const char* typeName(nodusDataType_t t) {
  switch (t) {
    case nodusInt8: return "int8";
    case nodusUint8: return "uint8";
    case nodusInt32: return "int32";
    case nodusUint32: return "uint32";
    case nodusInt64: return "int64";
    case nodusUint64: return "uint64";
    case nodusFloat16: return "float16";
    case nodusBfloat16: return "bfloat16";
    case nodusFloat32: return "float32";
    case nodusFloat64: return "float64";
    default: return "?";
  }
}

const char* opName(nodusRedOp_t op) {
  switch (op) {
    case nodusSum: return "sum";
    case nodusProd: return "prod";
    case nodusMin: return "min";
    case nodusMax: return "max";
    case nodusAvg: return "avg";
    default: return "?";
  }
}

}  // namespace nodus
