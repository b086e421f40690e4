// What a backend's host code asks of an ABI dtype code: whether it is one,
// its name (as flx::dtype_name prints it), its size and kind. Generated from
// the list of element types (flx/dtype_list.h); plugins do not link
// libflx, so they read it here rather than through flx::DType.
#pragma once

#include <cstddef>
#include <cstdint>

#include "flx/dtype_list.h"

namespace flx::backend_common {

constexpr bool valid_dtype(int32_t t) { return t >= 0 && t < FLX_DTYPE_COUNT; }

// "Float32", ...; "an unknown dtype" for a code outside the list.
constexpr const char* dtype_name(int32_t t) {
  switch (t) {
#define FLX_DTYPE_INFO_NAME_(code, sfx, name, bytes, kind, rank) \
  case code: return #name;
    FLX_DTYPES(FLX_DTYPE_INFO_NAME_)
#undef FLX_DTYPE_INFO_NAME_
  }
  return "an unknown dtype";
}

// The bytes of an element; 0 for a code outside the list.
constexpr size_t dtype_bytes(int32_t t) {
  switch (t) {
#define FLX_DTYPE_INFO_BYTES_(code, sfx, name, bytes, kind, rank) \
  case code: return bytes;
    FLX_DTYPES(FLX_DTYPE_INFO_BYTES_)
#undef FLX_DTYPE_INFO_BYTES_
  }
  return 0;
}

// Float32, Float64, Float16 and BFloat16.
constexpr bool dtype_is_float(int32_t t) {
  switch (t) {
#define FLX_DTYPE_INFO_FLOAT_(code, sfx, name, bytes, kind, rank) \
  case code: return FLX_DTYPE_IS_FLOAT_##kind;
    FLX_DTYPES(FLX_DTYPE_INFO_FLOAT_)
#undef FLX_DTYPE_INFO_FLOAT_
  }
  return false;
}

// The 16-bit floats, which compute in float: Float16 and BFloat16.
constexpr bool dtype_is_half(int32_t t) { return dtype_is_float(t) && dtype_bytes(t) == 2; }

}  // namespace flx::backend_common
