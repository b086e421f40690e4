#include "flx/dtype.hpp"

#include <cmath>

#include "flx/error.hpp"

namespace flx {

// Each function is one switch generated from the list of element types
// (flx/dtype_list.h).
#define FLX_DTYPE_SIZE_(code, sfx, name, bytes, kind, rank) \
  case DType::name: return bytes;
size_t dtype_size(DType t) {
  switch (t) { FLX_DTYPES(FLX_DTYPE_SIZE_) }
  FLX_THROW(ArgumentError, "unknown dtype code ", int(t));
}

#define FLX_DTYPE_NAME_(code, sfx, name, bytes, kind, rank) \
  case DType::name: return #name;
std::string_view dtype_name(DType t) {
  switch (t) { FLX_DTYPES(FLX_DTYPE_NAME_) }
  return "?";
}

std::ostream& operator<<(std::ostream& os, DType t) { return os << dtype_name(t); }

#define FLX_DTYPE_IS_FLOATING_(code, sfx, name, bytes, kind, rank) \
  case DType::name: return FLX_DTYPE_IS_FLOAT_##kind;
bool is_floating(DType t) {
  switch (t) { FLX_DTYPES(FLX_DTYPE_IS_FLOATING_) }
  return false;
}
#define FLX_DTYPE_IS_INTEGRAL_(code, sfx, name, bytes, kind, rank) \
  case DType::name: return FLX_DTYPE_IS_INT_##kind;
bool is_integral(DType t) {
  switch (t) { FLX_DTYPES(FLX_DTYPE_IS_INTEGRAL_) }
  return false;
}

namespace {
#define FLX_DTYPE_RANK_(code, sfx, name, bytes, kind, rank) \
  case DType::name: return rank;
int rank(DType t) {
  switch (t) { FLX_DTYPES(FLX_DTYPE_RANK_) }
  return 0;
}
}  // namespace

DType promote_types(DType a, DType b) {
  if (a == b) return a;
  if (rank(a) == rank(b)) return DType::Float32;  // Float16 with BFloat16 (the list's only shared rank)
  return rank(a) > rank(b) ? a : b;
}

}  // namespace flx
