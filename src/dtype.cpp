#include "flx/dtype.hpp"

#include "flx/backend.h"

#include <cmath>

#include "flx/error.hpp"

namespace flx {

size_t dtype_size(DType t) {
  switch (t) {
    case DType::Float64:
    case DType::Int64: return 8;
    case DType::Float32:
    case DType::Int32: return 4;
    case DType::Float16:
    case DType::BFloat16: return 2;
    case DType::UInt8:
    case DType::Bool: return 1;
  }
  FLX_THROW(ArgumentError, "unknown dtype code ", int(t));
}

std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::Float32: return "Float32";
    case DType::Float64: return "Float64";
    case DType::Float16: return "Float16";
    case DType::BFloat16: return "BFloat16";
    case DType::Int32: return "Int32";
    case DType::Int64: return "Int64";
    case DType::UInt8: return "UInt8";
    case DType::Bool: return "Bool";
  }
  return "?";
}

std::ostream& operator<<(std::ostream& os, DType t) { return os << dtype_name(t); }

bool is_floating(DType t) {
  return t == DType::Float32 || t == DType::Float64 || t == DType::Float16 || t == DType::BFloat16;
}
bool is_integral(DType t) { return t == DType::Int32 || t == DType::Int64 || t == DType::UInt8; }

namespace {
int rank(DType t) {
  switch (t) {
    case DType::Bool: return 0;
    case DType::UInt8: return 1;
    case DType::Int32: return 2;
    case DType::Int64: return 3;
    case DType::Float16:
    case DType::BFloat16: return 4;
    case DType::Float32: return 5;
    case DType::Float64: return 6;
  }
  return 0;
}
}  // namespace

DType promote_types(DType a, DType b) {
  if (a == b) return a;
  if ((a == DType::Float16 && b == DType::BFloat16) || (a == DType::BFloat16 && b == DType::Float16))
    return DType::Float32;
  return rank(a) >= rank(b) ? a : b;
}

}  // namespace flx

// DType's values are the ABI's codes: a tensor's dtype goes to backends as is.
static_assert(int(flx::DType::Float32) == FLX_F32 && int(flx::DType::Float64) == FLX_F64 &&
              int(flx::DType::Float16) == FLX_F16 && int(flx::DType::BFloat16) == FLX_BF16 &&
              int(flx::DType::Int32) == FLX_I32 && int(flx::DType::Int64) == FLX_I64 &&
              int(flx::DType::UInt8) == FLX_U8 && int(flx::DType::Bool) == FLX_BOOL);
