// Typed buffers of small integer values that every datatype holds exactly,
// with their reductions computed here, independently of MPI and of nodus.
#pragma once

#include <mpi.h>

#include <climits>
#include <cstdint>
#include <cstring>
#include <vector>

namespace values {

enum class Kind { Int, Uint, Float, Complex, TextByte };

struct Type {
  MPI_Datatype type;
  const char* name;
  Kind kind;
  int scalarBytes;  // one real or integer
  int scalars;      // per element: 2 for complex
  bool isSigned;
  int elemBytes() const { return scalarBytes * scalars; }
};

enum Op { Sum, Prod, Min, Max, Data };
inline const char* opName(int op) {
  static const char* const k[] = {"sum", "prod", "min", "max", "data"};
  return k[op];
}
inline MPI_Op mpiOp(int op) {
  switch (op) {
    case Sum: return MPI_SUM;
    case Prod: return MPI_PROD;
    case Min: return MPI_MIN;
    default: return MPI_MAX;
  }
}

// The reductions nodus is expected to take for this kind (the rest goes to MPI).
inline bool nodusReduces(const Type& t, int op) {
  switch (t.kind) {
    case Kind::Complex: return op == Sum;
    case Kind::TextByte: return op == Min || op == Max;
    default: return t.scalarBytes == 1 || t.scalarBytes == 4 || t.scalarBytes == 8;
  }
}

inline uint64_t mix(uint64_t x) {
  x ^= x >> 31;
  x *= 0x7fb5d329728ea185ULL;
  x ^= x >> 27;
  x *= 0x81dadef4bc2dd44dULL;
  return x ^ (x >> 33);
}

// Rank `r`'s input at scalar index `s`: small enough that sums over 4 ranks
// fit an int8, products are one of +-1, +-2.
inline int64_t gen(int op, const Type& t, int r, int nranks, uint64_t s, int seed) {
  const uint64_t h = mix(s * 1315423911ULL + static_cast<uint64_t>(seed) * 2654435761ULL);
  const uint64_t ur = static_cast<uint64_t>(r);
  const bool sgn = t.isSigned;
  switch (op) {
    case Sum: return static_cast<int64_t>((h + ur * 3) % 5) - (sgn ? 2 : 0);
    case Prod: {
      int64_t v = (h >> 8) % static_cast<uint64_t>(nranks) == ur ? 2 : 1;
      if (sgn && (h >> 20) % static_cast<uint64_t>(nranks + 1) == ur) v = -v;
      return v;
    }
    case Min:
    case Max: return static_cast<int64_t>((h + ur * 5) % 17) - (sgn ? 8 : 0);
    default: return static_cast<int64_t>((h + ur * 7) % 11) - (sgn ? 5 : 0);
  }
}

inline int64_t reduced(int op, const Type& t, int nranks, uint64_t s, int seed) {
  int64_t acc = gen(op, t, 0, nranks, s, seed);
  for (int r = 1; r < nranks; ++r) {
    const int64_t v = gen(op, t, r, nranks, s, seed);
    switch (op) {
      case Sum: acc += v; break;
      case Prod: acc *= v; break;
      case Min: acc = v < acc ? v : acc; break;
      case Max: acc = v > acc ? v : acc; break;
      default: break;
    }
  }
  return acc;
}

inline void put(const Type& t, void* buf, uint64_t s, int64_t v) {
  unsigned char* p = static_cast<unsigned char*>(buf) + s * static_cast<uint64_t>(t.scalarBytes);
  if (t.kind == Kind::Float || t.kind == Kind::Complex) {
    if (t.scalarBytes == 4) {
      const float f = static_cast<float>(v);
      std::memcpy(p, &f, 4);
    } else {
      const double d = static_cast<double>(v);
      std::memcpy(p, &d, 8);
    }
    return;
  }
  const uint64_t u = static_cast<uint64_t>(v);  // two's complement truncation per width
  std::memcpy(p, &u, static_cast<size_t>(t.scalarBytes));  // little-endian
}

// Reads scalar `s`; `exact` is false when a float holds something not integral.
inline int64_t get(const Type& t, const void* buf, uint64_t s) {
  const unsigned char* p = static_cast<const unsigned char*>(buf) + s * static_cast<uint64_t>(t.scalarBytes);
  if (t.kind == Kind::Float || t.kind == Kind::Complex) {
    double d;
    if (t.scalarBytes == 4) {
      float f;
      std::memcpy(&f, p, 4);
      d = f;
    } else {
      std::memcpy(&d, p, 8);
    }
    return d == static_cast<double>(static_cast<int64_t>(d)) ? static_cast<int64_t>(d) : INT64_MIN;
  }
  uint64_t u = 0;
  std::memcpy(&u, p, static_cast<size_t>(t.scalarBytes));
  if (t.isSigned && t.scalarBytes < 8) {
    const int shift = 64 - 8 * t.scalarBytes;
    return static_cast<int64_t>(u << shift) >> shift;
  }
  return static_cast<int64_t>(u);
}

// A value as it reads back after a round trip through the type.
inline int64_t asStored(const Type& t, int64_t v) {
  unsigned char tmp[8];
  put(t, tmp, 0, v);
  return get(t, tmp, 0);
}

inline std::vector<Type> reductionTypes() {
  std::vector<Type> ts = {
      {MPI_INT, "MPI_INT", Kind::Int, 4, 1, true},
      {MPI_LONG, "MPI_LONG", Kind::Int, static_cast<int>(sizeof(long)), 1, true},
      {MPI_LONG_LONG, "MPI_LONG_LONG", Kind::Int, 8, 1, true},
      {MPI_UNSIGNED, "MPI_UNSIGNED", Kind::Uint, 4, 1, false},
      {MPI_UNSIGNED_LONG, "MPI_UNSIGNED_LONG", Kind::Uint, static_cast<int>(sizeof(long)), 1, false},
      {MPI_UNSIGNED_LONG_LONG, "MPI_UNSIGNED_LONG_LONG", Kind::Uint, 8, 1, false},
      {MPI_SIGNED_CHAR, "MPI_SIGNED_CHAR", Kind::Int, 1, 1, true},
      {MPI_UNSIGNED_CHAR, "MPI_UNSIGNED_CHAR", Kind::Uint, 1, 1, false},
      {MPI_INT8_T, "MPI_INT8_T", Kind::Int, 1, 1, true},
      {MPI_UINT8_T, "MPI_UINT8_T", Kind::Uint, 1, 1, false},
      {MPI_INT32_T, "MPI_INT32_T", Kind::Int, 4, 1, true},
      {MPI_UINT32_T, "MPI_UINT32_T", Kind::Uint, 4, 1, false},
      {MPI_INT64_T, "MPI_INT64_T", Kind::Int, 8, 1, true},
      {MPI_UINT64_T, "MPI_UINT64_T", Kind::Uint, 8, 1, false},
      {MPI_AINT, "MPI_AINT", Kind::Int, static_cast<int>(sizeof(MPI_Aint)), 1, true},
      {MPI_OFFSET, "MPI_OFFSET", Kind::Int, static_cast<int>(sizeof(MPI_Offset)), 1, true},
      {MPI_COUNT, "MPI_COUNT", Kind::Int, static_cast<int>(sizeof(MPI_Count)), 1, true},
      {MPI_FLOAT, "MPI_FLOAT", Kind::Float, 4, 1, true},
      {MPI_DOUBLE, "MPI_DOUBLE", Kind::Float, 8, 1, true},
      {MPI_C_FLOAT_COMPLEX, "MPI_C_FLOAT_COMPLEX", Kind::Complex, 4, 2, true},
      {MPI_C_DOUBLE_COMPLEX, "MPI_C_DOUBLE_COMPLEX", Kind::Complex, 8, 2, true},
      {MPI_CHAR, "MPI_CHAR", Kind::TextByte, 1, 1, CHAR_MIN < 0},
      {MPI_BYTE, "MPI_BYTE", Kind::TextByte, 1, 1, false},
  };
  // Fortran's types, at whatever width this MPI library gives them.
  struct F {
    MPI_Datatype type;
    const char* name;
    Kind kind;
  };
  for (F f : {F{MPI_INTEGER, "MPI_INTEGER", Kind::Int}, F{MPI_REAL, "MPI_REAL", Kind::Float},
              F{MPI_DOUBLE_PRECISION, "MPI_DOUBLE_PRECISION", Kind::Float}}) {
    int size = 0;
    if (f.type == MPI_DATATYPE_NULL || PMPI_Type_size(f.type, &size) != MPI_SUCCESS) continue;
    if (f.kind == Kind::Int && (size == 4 || size == 8)) ts.push_back({f.type, f.name, f.kind, size, 1, true});
    if (f.kind == Kind::Float && (size == 4 || size == 8)) ts.push_back({f.type, f.name, f.kind, size, 1, true});
  }
  return ts;
}

inline Type find(const std::vector<Type>& ts, MPI_Datatype t) {
  for (const Type& x : ts)
    if (x.type == t) return x;
  return ts.front();
}

}  // namespace values
