// How MPI datatypes and reduction ops map onto nodus, decided per call from
// the handles alone (never from buffer contents), so every rank decides alike.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "mpi_headers.h"
#include "nodus/nodus.h"

namespace nodus::mpi {

// A reduction nodus carries out exactly as MPI specifies it.
struct Reduction {
  nodusDataType_t type = nodusUint8;
  nodusRedOp_t op = nodusSum;
  size_t count = 0;    // nodus elements (a complex number is two)
  uint64_t bytes = 0;  // the call's payload
};

// How a (count, datatype) buffer lies in memory, for the collectives that only
// move bytes (Bcast, Allgather).
struct Layout {
  uint64_t size = 0;       // bytes of data in one element (MPI_Type_size)
  MPI_Aint extent = 0;     // stride from one element to the next
  bool contiguous = false; // count elements are one run of count*size bytes
};

class TypeMap {
 public:
  // Needs MPI initialised (sizes of Fortran types are the library's).
  void build();

  // Fills `out` and returns -1, or returns the nodus_mpi_reason why nodus
  // cannot reduce `count` elements of `type` with `op` exactly as MPI would.
  int reduction(MPI_Datatype type, MPI_Op op, int64_t count, Reduction* out) const;

  // False for a type MPI would reject. Inline for the predefined types.
  bool layout(MPI_Datatype type, Layout* out) const {
    if (const Entry* e = find(type)) {
      out->size = e->size;
      out->extent = e->extent;
      out->contiguous = e->contiguous;
      return true;
    }
    return layoutOther(type, out);
  }

  // The size of a predefined type's element (0 for any other handle): enough
  // to tell most calls that they are too small, on every call's path.
  uint32_t predefinedSize(MPI_Datatype type) const {
    const Entry* e = find(type);
    return e ? e->size : 0;
  }

 private:
  enum class Kind : uint8_t {
    Signed,      // C and Fortran integers: sum, prod, min, max
    Unsigned,
    Float,
    Complex,     // sum only, as two reals per element
    TextOrByte,  // MPI_CHAR, MPI_BYTE: min and max only (MPI leaves arithmetic on them undefined)
    None,        // predefined but not reducible by nodus (or not at all)
  };
  struct Entry {
    MPI_Datatype type;
    Kind kind;
    bool isSigned;  // how this MPI library compares it (MIN/MAX), probed at build()
    uint32_t size;
    MPI_Aint extent;
    bool contiguous;
  };
  const Entry* find(MPI_Datatype type) const {
    for (const Entry& e : entries_)
      if (e.type == type) return &e;
    return nullptr;
  }
  bool layoutOther(MPI_Datatype type, Layout* out) const;
  static bool comparesSigned(const Entry& e);
  static nodusDataType_t nodusType(Kind kind, bool isSigned, uint32_t size, bool* ok);

  std::vector<Entry> entries_;  // most used first: a linear scan beats hashing at this size
};

}  // namespace nodus::mpi
