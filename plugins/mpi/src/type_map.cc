#include "type_map.h"

#include <climits>
#include <cstring>

#include "nodus_mpi_plugin.h"

namespace nodus::mpi {

void TypeMap::build() {
  struct Seed {
    MPI_Datatype type;
    Kind kind;
    bool isSigned;
  };
  // Kinds, not sizes: the size of every type is asked of the MPI library, so
  // MPI_LONG, MPI_AINT or Fortran's INTEGER map to whatever width they have
  // here. Only predefined handles are listed; any other handle is a derived
  // type (or one this list does not know) and reductions over it go to MPI.
  const Seed seeds[] = {
      {MPI_DOUBLE, Kind::Float, true},
      {MPI_FLOAT, Kind::Float, true},
      {MPI_INT, Kind::Signed, true},
      {MPI_LONG, Kind::Signed, true},
      {MPI_BYTE, Kind::TextOrByte, false},  // Open MPI reduces MPI_BYTE as uint8
      {MPI_CHAR, Kind::TextOrByte, CHAR_MIN < 0},
      {MPI_UNSIGNED, Kind::Unsigned, false},
      {MPI_UNSIGNED_LONG, Kind::Unsigned, false},
      {MPI_LONG_LONG_INT, Kind::Signed, true},
      {MPI_LONG_LONG, Kind::Signed, true},
      {MPI_UNSIGNED_LONG_LONG, Kind::Unsigned, false},
      {MPI_INT8_T, Kind::Signed, true},
      {MPI_UINT8_T, Kind::Unsigned, false},
      {MPI_INT32_T, Kind::Signed, true},
      {MPI_UINT32_T, Kind::Unsigned, false},
      {MPI_INT64_T, Kind::Signed, true},
      {MPI_UINT64_T, Kind::Unsigned, false},
      {MPI_SIGNED_CHAR, Kind::Signed, true},
      {MPI_UNSIGNED_CHAR, Kind::Unsigned, false},
      {MPI_AINT, Kind::Signed, true},
      {MPI_OFFSET, Kind::Signed, true},
      {MPI_COUNT, Kind::Signed, true},
      {MPI_C_FLOAT_COMPLEX, Kind::Complex, true},
      {MPI_C_COMPLEX, Kind::Complex, true},
      {MPI_C_DOUBLE_COMPLEX, Kind::Complex, true},
      {MPI_INTEGER, Kind::Signed, true},
      {MPI_INTEGER1, Kind::Signed, true},
      {MPI_INTEGER4, Kind::Signed, true},
      {MPI_INTEGER8, Kind::Signed, true},
      {MPI_REAL, Kind::Float, true},
      {MPI_REAL4, Kind::Float, true},
      {MPI_REAL8, Kind::Float, true},
      {MPI_DOUBLE_PRECISION, Kind::Float, true},
      {MPI_COMPLEX, Kind::Complex, true},
      {MPI_DOUBLE_COMPLEX, Kind::Complex, true},
      // Predefined, moved as bytes by Bcast/Allgather, never reduced by nodus:
      // no 16-bit integers or 80-bit floats in nodus, logical and pair types
      // need ops nodus lacks.
      {MPI_SHORT, Kind::None, true},
      {MPI_UNSIGNED_SHORT, Kind::None, false},
      {MPI_INT16_T, Kind::None, true},
      {MPI_UINT16_T, Kind::None, false},
      {MPI_WCHAR, Kind::None, false},
      {MPI_LONG_DOUBLE, Kind::None, true},
      {MPI_C_BOOL, Kind::None, false},
      {MPI_C_LONG_DOUBLE_COMPLEX, Kind::None, true},
      {MPI_PACKED, Kind::None, false},
      {MPI_FLOAT_INT, Kind::None, true},
      {MPI_DOUBLE_INT, Kind::None, true},
      {MPI_LONG_INT, Kind::None, true},
      {MPI_2INT, Kind::None, true},
      {MPI_SHORT_INT, Kind::None, true},
      {MPI_LONG_DOUBLE_INT, Kind::None, true},
      {MPI_LOGICAL, Kind::None, false},
      {MPI_CHARACTER, Kind::None, false},
      {MPI_INTEGER2, Kind::None, true},
  };
  entries_.clear();
  for (const Seed& s : seeds) {
    if (s.type == MPI_DATATYPE_NULL) continue;  // a Fortran type of a library built without Fortran
    int size = 0;
    MPI_Aint lb = 0, extent = 0, trueLb = 0, trueExtent = 0;
    if (PMPI_Type_size(s.type, &size) != MPI_SUCCESS || PMPI_Type_get_extent(s.type, &lb, &extent) != MPI_SUCCESS ||
        PMPI_Type_get_true_extent(s.type, &trueLb, &trueExtent) != MPI_SUCCESS)
      continue;
    Entry e{s.type, s.kind, s.isSigned, static_cast<uint32_t>(size), extent, false};
    // Pair types such as MPI_DOUBLE_INT have padding: not one run of bytes.
    e.contiguous = size > 0 && lb == 0 && trueLb == 0 && extent == size && trueExtent == size;
    if (!e.contiguous && e.kind != Kind::None) e.kind = Kind::None;
    if (e.kind == Kind::Signed || e.kind == Kind::Unsigned || e.kind == Kind::TextOrByte) e.isSigned = comparesSigned(e);
    entries_.push_back(e);
  }
}

// Whether this MPI library's MIN treats the type as signed: min(all ones, 1).
// Results must not change under the preload, so nodus compares the way the
// library does, even where the library is wrong (Open MPI 4.1 compares
// MPI_OFFSET as unsigned) or the standard leaves it open (MPI_CHAR, MPI_BYTE).
// MPI_Reduce_local is local and cheap; sums and products do not depend on
// signedness in two's complement.
bool TypeMap::comparesSigned(const Entry& e) {
  if (e.size == 0 || e.size > 8) return e.isSigned;
  unsigned char in[8], inout[8] = {0};
  std::memset(in, 0xff, sizeof in);
  inout[0] = 1;
  if (PMPI_Reduce_local(in, inout, 1, e.type, MPI_MIN) != MPI_SUCCESS) return e.isSigned;
  return inout[0] == 0xff;
}

nodusDataType_t TypeMap::nodusType(Kind kind, bool isSigned, uint32_t size, bool* ok) {
  *ok = true;
  switch (kind) {
    case Kind::Signed:
    case Kind::Unsigned:
    case Kind::TextOrByte: {
      // Signedness as the library compares (see comparesSigned); sums and
      // products are the same bits either way.
      if (size == 1) return isSigned ? nodusInt8 : nodusUint8;
      if (size == 4) return isSigned ? nodusInt32 : nodusUint32;
      if (size == 8) return isSigned ? nodusInt64 : nodusUint64;
      break;
    }
    case Kind::Float:
    case Kind::Complex: {
      const uint32_t real = kind == Kind::Complex ? size / 2 : size;
      if (real == 4) return nodusFloat32;
      if (real == 8) return nodusFloat64;
      break;
    }
    case Kind::None: break;
  }
  *ok = false;
  return nodusUint8;
}

int TypeMap::reduction(MPI_Datatype type, MPI_Op op, int64_t count, Reduction* out) const {
  const Entry* e = find(type);
  if (e == nullptr || e->kind == Kind::None) return NODUS_MPI_FB_DATATYPE;
  bool ok = false;
  const nodusDataType_t t = nodusType(e->kind, e->isSigned, e->size, &ok);
  if (!ok) return NODUS_MPI_FB_DATATYPE;
  // Only the four ops nodus shares with MPI, and only where MPI defines them
  // for this kind of type: anything else (user ops, logical and bitwise ops,
  // MAXLOC/MINLOC, REPLACE, complex products) stays MPI's, errors included.
  nodusRedOp_t o;
  if (op == MPI_SUM) o = nodusSum;
  else if (op == MPI_MAX) o = nodusMax;
  else if (op == MPI_MIN) o = nodusMin;
  else if (op == MPI_PROD) o = nodusProd;
  else return NODUS_MPI_FB_OP;
  if (e->kind == Kind::Complex && o != nodusSum) return NODUS_MPI_FB_OP;
  if (e->kind == Kind::TextOrByte && o != nodusMin && o != nodusMax) return NODUS_MPI_FB_OP;
  out->type = t;
  out->op = o;
  out->count = static_cast<size_t>(count) * (e->kind == Kind::Complex ? 2 : 1);
  out->bytes = static_cast<uint64_t>(count) * e->size;
  return -1;
}

namespace {

// A derived type made only of CONTIGUOUS and DUP over a gap-free predefined
// type is one run of bytes in MPI's packing order; anything else is packed.
bool contiguousDerived(MPI_Datatype type, int depth) {
  if (depth > 16) return false;
  int ni = 0, na = 0, nd = 0, combiner = 0;
  if (PMPI_Type_get_envelope(type, &ni, &na, &nd, &combiner) != MPI_SUCCESS) return false;
  if (combiner == MPI_COMBINER_NAMED) {
    int size = 0;
    MPI_Aint lb = 0, extent = 0, tlb = 0, textent = 0;
    return PMPI_Type_size(type, &size) == MPI_SUCCESS && PMPI_Type_get_extent(type, &lb, &extent) == MPI_SUCCESS &&
           PMPI_Type_get_true_extent(type, &tlb, &textent) == MPI_SUCCESS && size > 0 && lb == 0 && tlb == 0 &&
           extent == size && textent == size;
  }
  if ((combiner != MPI_COMBINER_CONTIGUOUS && combiner != MPI_COMBINER_DUP) || nd != 1 || ni > 1 || na != 0)
    return false;
  int ints[1] = {0};
  MPI_Aint addrs[1] = {0};
  MPI_Datatype inner = MPI_DATATYPE_NULL;
  if (PMPI_Type_get_contents(type, ni, na, nd, ints, addrs, &inner) != MPI_SUCCESS) return false;
  const bool ok = contiguousDerived(inner, depth + 1);
  int ii = 0, ia = 0, id = 0, ic = 0;
  // get_contents hands out a new reference to a derived inner type.
  if (PMPI_Type_get_envelope(inner, &ii, &ia, &id, &ic) == MPI_SUCCESS && ic != MPI_COMBINER_NAMED)
    PMPI_Type_free(&inner);
  return ok;
}

}  // namespace

bool TypeMap::layoutOther(MPI_Datatype type, Layout* out) const {
  if (type == MPI_DATATYPE_NULL) return false;
  int size = 0;
  MPI_Aint lb = 0, extent = 0;
  if (PMPI_Type_size(type, &size) != MPI_SUCCESS || PMPI_Type_get_extent(type, &lb, &extent) != MPI_SUCCESS)
    return false;
  out->size = static_cast<uint64_t>(size);
  out->extent = extent;
  out->contiguous = size > 0 && lb == 0 && extent == size && contiguousDerived(type, 0);
  return true;
}

}  // namespace nodus::mpi
