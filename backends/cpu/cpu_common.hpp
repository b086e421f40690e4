// Shared pieces of the CPU backend: dtype dispatch, loads and stores through
// the compute type, error reporting, and the parallel-for policy.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>

#include "backend_common/backend_tables.hpp"
#include "backend_common/saturating_cast.hpp"
#include "flx/backend.h"
#include "cpu_pool.hpp"
#include "flx/dtype.hpp"

namespace flx::cpu_backend {

using flx::backend_common::saturating_cast;

// Set the calling thread's error message and return the status.
int fail(int status, const std::string& msg);
const char* last_error();

inline char* addr(flx_mem m) { return reinterpret_cast<char*>(m.buf) + m.offset; }
// m's elements as T, or nullptr for a NULL buf (an optional operand).
template <class T>
T* ptr_or_null(flx_mem m) {
  return m.buf ? reinterpret_cast<T*>(addr(m)) : nullptr;
}

// Elements per chunk of a parallel loop, at least: a loop of fewer than two
// grains runs on the calling thread, since waking a helper costs more than
// it saves (cpu_pool.hpp).
inline constexpr int64_t parallel_grain = 1 << 14;
// The grain of a loop whose items are `per` elements each (rows, columns).
inline int64_t grain_of(int64_t per) { return per > 1 ? parallel_grain / per : parallel_grain; }

// Compute type of a storage type: halves compute in float.
template <class T>
using compute_t = std::conditional_t<std::is_same_v<T, Half> || std::is_same_v<T, BHalf>, float, T>;

template <class T>
inline compute_t<T> load(const T& v) {
  if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BHalf>) return float(v);
  else return v;
}
template <class T, class C>
inline T store(C v) {
  if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BHalf>) return T(float(v));
  else if constexpr (std::is_same_v<T, bool>) return v != C(0);
  else return static_cast<T>(v);
}

// One element converted into storage type D, as `cast` converts (the rule
// of every backend): Bool is "not zero"; a half or bfloat16 is the value
// rounded once, from a double or an integer too (flx/half_bits.h); an
// integer saturates (NaN is 0: saturating_cast.hpp); else C++'s
// conversion, round to nearest.
template <class D, class S>
inline D cast_element(S s) {
  using flx::backend_common::saturating_convert;
  if constexpr (std::is_same_v<D, bool>) {
    return load(s) != 0;
  } else if constexpr (std::is_same_v<D, Half> || std::is_same_v<D, BHalf>) {
    constexpr bool bf = std::is_same_v<D, BHalf>;
    D out;
    if constexpr (std::is_same_v<S, double>) out.bits = bf ? double_to_bf16(s) : double_to_half(s);
    else if constexpr (std::is_integral_v<S>) out.bits = bf ? int64_to_bf16(int64_t(s)) : int64_to_half(int64_t(s));
    else out = D(float(load(s)));
    return out;
  } else if constexpr (std::is_integral_v<D>) {
    return saturating_convert<D>(load(s));
  } else {
    return static_cast<D>(load(s));
  }
}

// The CPU's storage type of each element type (flx/dtype_list.h's
// suffixes): a dtype added to the list fails to compile here until it has one.
#define FLX_CPU_STORAGE_F32 float
#define FLX_CPU_STORAGE_F64 double
#define FLX_CPU_STORAGE_F16 Half
#define FLX_CPU_STORAGE_BF16 BHalf
#define FLX_CPU_STORAGE_I32 int32_t
#define FLX_CPU_STORAGE_I64 int64_t
#define FLX_CPU_STORAGE_U8 uint8_t
#define FLX_CPU_STORAGE_BOOL bool

// Call f(T{}) with the C++ type of dtype t; false when t is unknown.
#define FLX_CPU_DISPATCH_CASE_(code, sfx, name, bytes, kind, rank) \
  case FLX_##sfx: f(FLX_CPU_STORAGE_##sfx{}); return true;
template <class F>
bool dispatch_dtype(int32_t t, F&& f) {
  switch (t) { FLX_DTYPES(FLX_CPU_DISPATCH_CASE_) }
  return false;
}
#undef FLX_CPU_DISPATCH_CASE_

template <class T>
inline constexpr bool is_float_v = std::is_floating_point_v<compute_t<T>>;

// The ABI's calls, implemented across the cpu_*.cpp files under their
// fields' names (cpu_backend.cpp builds the tables from them).
FLX_DECLARE_BACKEND_CALLS
int release_cached(void*, int dev);
int gemm_epilogue(void*, int dev, const flx_gemm_epilogue_desc* d, flx_stream s);  // minor 2, optional
int rule_step(void*, int dev, const flx_rule_desc* d, flx_stream s);  // minor 12, optional (cpu_optim.cpp)

}  // namespace flx::cpu_backend
