// Element types on the host side of the OpenCL backend: sizes, names, the
// half/bfloat16 rounding, and scalars in a dtype's compute type.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>

#include "flx/dtype.hpp"
#include "ocl_common.hpp"
#include "backend_common/dtype_info.hpp"
#include "backend_common/saturating_cast.hpp"

namespace flx_ocl {

using flx::backend_common::saturating_cast;

using flx::backend_common::dtype_name;  // "an unknown dtype" for a code outside the list
using flx::backend_common::valid_dtype;
inline bool is_float(int32_t t) { return flx::backend_common::dtype_is_float(t); }
inline bool is_half(int32_t t) { return flx::backend_common::dtype_is_half(t); }
inline size_t dtype_size(int32_t t) { return flx::backend_common::dtype_bytes(t); }

// The host-side rounding is flx's own (header-only in flx/dtype.hpp).
inline float half_bits_to_float(uint16_t h) { return flx::half_to_float(h); }
inline uint16_t float_to_half_bits(float f) { return flx::float_to_half(f); }
inline float bf16_bits_to_float(uint16_t h) { return flx::bf16_to_float(h); }
inline uint16_t float_to_bf16_bits(float f) { return flx::float_to_bf16(f); }

// C(v) in the dtype's compute type (halves compute in float, Bool in bool):
// how the CPU backend converts alpha and beta.
inline Scalar compute_scalar(int32_t t, double v) {
  switch (t) {
    case FLX_F64: return Scalar::of(v);
    case FLX_F32:
    case FLX_F16:
    case FLX_BF16: return Scalar::of(float(v));
    case FLX_I32: return Scalar::of(saturating_cast<int32_t>(v));
    case FLX_I64: return Scalar::of(saturating_cast<int64_t>(v));
    case FLX_U8: return Scalar::of(saturating_cast<uint8_t>(v));
    default: return Scalar::of(uint8_t(v != 0));
  }
}
// The element v becomes, read back in the compute type: how the CPU backend
// turns a scalar operand into an element (cast_element: halves rounded
// once to their storage precision, from the double itself).
inline Scalar stored_scalar(int32_t t, double v) {
  if (t == FLX_F16) return Scalar::of(half_bits_to_float(flx::double_to_half(v)));
  if (t == FLX_BF16) return Scalar::of(bf16_bits_to_float(flx::double_to_bf16(v)));
  return compute_scalar(t, v);
}
// The raw storage bytes of that element: fill patterns.
inline Scalar storage_bytes(int32_t t, double v) {
  if (t == FLX_F16) return Scalar::of(flx::double_to_half(v));
  if (t == FLX_BF16) return Scalar::of(flx::double_to_bf16(v));
  return compute_scalar(t, v);
}

// Reduction accumulator (kernel type AT): double for floats (float where the
// device lacks fp64), int64 for Bool, the element type for integers.
inline Scalar accum_scalar(int32_t t, double v, bool fp64) {
  if (is_float(t)) return fp64 ? Scalar::of(v) : Scalar::of(float(v));
  if (t == FLX_BOOL) return Scalar::of(static_cast<int64_t>(v));
  return compute_scalar(t, v);
}

inline void require_dtype(int32_t t, const char* op) {
  if (!valid_dtype(t))
    raise(FLX_ERR_INVALID_ARGUMENT, std::string(op) + ": expected a dtype code 0 to " + std::to_string(FLX_DTYPE_COUNT - 1) + " (flx_dtype); got " +
                                        std::to_string(t));
}
inline void require_float(int32_t t, const char* op) {
  require_dtype(t, op);
  if (!is_float(t))
    raise(FLX_ERR_UNSUPPORTED, std::string(op) + " needs a floating dtype; got " + dtype_name(t));
}
// Byte offset -> element index, checking alignment.
inline size_t elem_offset(flx_mem m, size_t es, const char* what) {
  if (es == 0 || m.offset % es)
    raise(FLX_ERR_INVALID_ARGUMENT, std::string(what) + ": byte offset " + std::to_string(m.offset) +
                                        " is not a multiple of the element size " + std::to_string(es));
  return size_t(m.offset / es);
}

}  // namespace flx_ocl
