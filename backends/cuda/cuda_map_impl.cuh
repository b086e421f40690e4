// The map kernels: one grid-stride kernel per (dtype, op), the op bodies
// taken from the op list (include/flx/backend_ops.h) through a function
// object per op, exactly as the CPU backend (backends/cpu/cpu_map.cpp)
// builds them, and the element functions of include/flx/backend_elem.h.
// Included by cuda_map.cu (Float32/64), cuda_map_half.cu (Float16,
// BFloat16) and cuda_map_int.cu (the others), so they compile in parallel.
#pragma once

#include <string>
#include <type_traits>

#include "common/map_op_info.hpp"
#include "cuda_kernels.cuh"

namespace flx_cuda {
namespace elem {
// exp, log, ... resolve to CUDA's global device overloads (float and double).
#define FLX_ELEM_FN template <class CT> __device__ inline
#define FLX_MAP_FN_PREFIX __device__
#include "common/map_functors.inc"
#undef FLX_MAP_FN_PREFIX
#undef FLX_ELEM_FN
}  // namespace elem

// The descriptor as the kernels read it (passed by value: ~300 bytes).
template <class T>
struct MapArgs {
  int32_t ndim;
  int64_t numel;
  int64_t shape[FLX_MAX_DIMS];
  int64_t strides[3][FLX_MAX_DIMS];
  const T* in[3];
  T scalar[3];
  bool is_scalar[3];
};

// Offsets of element i (column-major over the output shape) in each input.
template <int N, class T>
__device__ __forceinline__ void offsets(const MapArgs<T>& a, int64_t i, int64_t* off) {
  for (int j = 0; j < N; ++j) off[j] = 0;
  if (a.ndim == 1) {
    for (int j = 0; j < N; ++j) off[j] = i * a.strides[j][0];
    return;
  }
  int64_t r = i;
  for (int k = 0; k < a.ndim && r; ++k) {
    const int64_t ik = r % a.shape[k];
    r /= a.shape[k];
    for (int j = 0; j < N; ++j) off[j] += ik * a.strides[j][k];
  }
}

// The op computes in compute_t<T> (float for the halves).
template <class T, class O, int N, class Op>
__global__ void map_kernel(MapArgs<T> a, O* out, Op op) {
  using C = compute_t<T>;
  for (int64_t i = global_index(); i < a.numel; i += global_stride()) {
    int64_t off[N];
    offsets<N>(a, i, off);
    const C x = load(a.is_scalar[0] ? a.scalar[0] : a.in[0][off[0]]);
    if constexpr (N == 1) {
      out[i] = store<O>(op(x, C()));
    } else {
      const C y = load(a.is_scalar[1] ? a.scalar[1] : a.in[1][off[1]]);
      out[i] = store<O>(op(x, y));
    }
  }
}

// WHERE(cond, a, b): cond is Bool storage, a and b of T.
template <class T>
__global__ void where_kernel(MapArgs<T> a, const bool* cond, bool cond_scalar, bool cond_value, T* out) {
  for (int64_t i = global_index(); i < a.numel; i += global_stride()) {
    int64_t off[3];
    offsets<3>(a, i, off);
    const bool c = cond_scalar ? cond_value : cond[off[0]];
    out[i] = c ? (a.is_scalar[1] ? a.scalar[1] : a.in[1][off[1]]) : (a.is_scalar[2] ? a.scalar[2] : a.in[2][off[2]]);
  }
}

template <class T>
MapArgs<T> map_args(const flx_map_desc& d) {
  MapArgs<T> a{};
  a.ndim = d.ndim;
  a.numel = d.numel;
  for (int k = 0; k < d.ndim; ++k) a.shape[k] = d.shape[k];
  for (int j = 0; j < 3 && j < d.ninputs; ++j) {
    a.is_scalar[j] = d.in[j].is_scalar != 0;
    a.scalar[j] = store<T>(static_cast<compute_t<T>>(d.in[j].scalar));  // as the CPU
    a.in[j] = a.is_scalar[j] ? nullptr : reinterpret_cast<const T*>(addr(d.in[j].mem));
    for (int k = 0; k < d.ndim; ++k) a.strides[j][k] = a.is_scalar[j] ? 0 : d.in[j].strides[k];
  }
  return a;
}

template <class T, class Op>
int run_op(const flx_map_desc& d, int code, cudaStream_t st) {
  using flx::map_ops::OpClass;
  constexpr bool takes = Op::cls == OpClass::All || Op::cls == OpClass::Cmp || Op::cls == OpClass::Select ||
                         (Op::cls == OpClass::Num && !std::is_same_v<T, bool>) ||
                         (Op::cls == OpClass::Float && is_float_v<T>);
  if constexpr (!takes) {
    return fail(FLX_ERR_UNSUPPORTED, std::string("map: ") + flx::map_ops::info(code).name + " does not take " +
                                         dtype_name(d.in_dtype) +
                                         (Op::cls == OpClass::Float ? " (it needs a floating dtype)" : ""));
  } else if constexpr (Op::cls == OpClass::Select) {
    const bool cond_scalar = d.in[0].is_scalar != 0;
    const bool* cond = cond_scalar ? nullptr : reinterpret_cast<const bool*>(addr(d.in[0].mem));
    where_kernel<T><<<blocks_for(d.numel), 256, 0, st>>>(map_args<T>(d), cond, cond_scalar, d.in[0].scalar != 0,
                                                          reinterpret_cast<T*>(addr(d.out)));
    return launched("map kernel (where)");
  } else {
    Op op;
    op.alpha = d.alpha;
    op.beta = d.beta;
    using O = std::conditional_t<Op::cls == OpClass::Cmp, bool, T>;
    map_kernel<T, O, Op::arity == 1 ? 1 : 2><<<blocks_for(d.numel), 256, 0, st>>>(
        map_args<T>(d), reinterpret_cast<O*>(addr(d.out)), op);
    return launched("map kernel");
  }
}

template <class T>
int map_dtype(const flx_map_desc& d, cudaStream_t st) {
  switch (d.op) {
#define FLX_CUDA_CASE_(NAME, CODE, ARITY, CLASS, GRAD, BODY) \
  case CODE:                                                 \
    return run_op<T, elem::Op_##NAME>(d, CODE, st);
    FLX_MAP_OPS(FLX_CUDA_CASE_)
#undef FLX_CUDA_CASE_
  }
  return fail(FLX_ERR_UNSUPPORTED, "map: unknown op code " + std::to_string(d.op));
}

// Instantiated in cuda_map.cu (float, double), cuda_map_half.cu (Float16,
// BFloat16) and cuda_map_int.cu (the rest).
extern template int map_dtype<float>(const flx_map_desc&, cudaStream_t);
extern template int map_dtype<double>(const flx_map_desc&, cudaStream_t);
extern template int map_dtype<int32_t>(const flx_map_desc&, cudaStream_t);
extern template int map_dtype<int64_t>(const flx_map_desc&, cudaStream_t);
extern template int map_dtype<uint8_t>(const flx_map_desc&, cudaStream_t);
extern template int map_dtype<bool>(const flx_map_desc&, cudaStream_t);
extern template int map_dtype<__half>(const flx_map_desc&, cudaStream_t);
extern template int map_dtype<__nv_bfloat16>(const flx_map_desc&, cudaStream_t);

}  // namespace flx_cuda
