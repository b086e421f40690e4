// The map kernels: one grid-stride kernel per (dtype, op), the op bodies
// taken from the op list (include/flx/backend_ops.h) through a function
// object per op, exactly as the CPU backend (backends/cpu/cpu_map.cpp)
// builds them, and the element functions of include/flx/backend_elem.h.
// Included by cuda_map.cu (Float32/64), cuda_map_half.cu (Float16,
// BFloat16) and cuda_map_int.cu (the others), so they compile in parallel.
#pragma once

#include <string>
#include <type_traits>

#include "backend_common/map_op_info.hpp"
#include "cuda_kernels.cuh"

namespace flx_cuda {
namespace elem {
// exp, log, ... resolve to CUDA's global device overloads (float and double).
#define FLX_ELEM_FN template <class CT> __device__ inline
#define FLX_MAP_FN_PREFIX __device__
#include "backend_common/map_functors.inc"
#undef FLX_MAP_FN_PREFIX
#undef FLX_ELEM_FN
}  // namespace elem

// The descriptor as the kernels read it (passed by value: ~300 bytes).
template <class T>
struct MapArgs {
  int32_t ndim;
  bool vec;  // 1-D, every operand contiguous or a scalar, every pointer aligned for Vec
  int64_t numel;
  int64_t shape[FLX_MAX_DIMS];
  int64_t strides[3][FLX_MAX_DIMS];
  const T* in[3];
  T scalar[3];
  bool is_scalar[3];
};

// The vector path's unit: kVec<T> elements of T in 16 bytes, loaded and
// stored as one aligned 16-byte access (a narrower one for a Bool output of
// a comparison: kVec<T> bytes).
template <class T>
inline constexpr int kVec = 16 / int(sizeof(T));
template <class E, int V>
struct alignas(sizeof(E) * V) Vec {
  E v[V];
};

// V elements of operand j from element i on (i a multiple of V): a scalar
// repeated, or one aligned vector load.
template <int V, class E>
__device__ __forceinline__ Vec<E, V> vec_load(const E* p, bool is_scalar, E scalar, int64_t i) {
  Vec<E, V> r;
  if (is_scalar) {
#pragma unroll
    for (int k = 0; k < V; ++k) r.v[k] = scalar;
  } else {
    r = *reinterpret_cast<const Vec<E, V>*>(p + i);
  }
  return r;
}

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

// The op computes in compute_t<T> (float for the halves). One kernel per
// (dtype, op): when a.vec, each thread takes kVec<T> elements at a time
// through 16-byte loads and stores, the last numel % kVec<T> elements
// one by one; otherwise element by element through the strides. Both paths
// apply the same op to each element, so they give the same bits.
template <class T, class O, int N, class Op>
__global__ void map_kernel(MapArgs<T> a, O* out, Op op) {
  using C = compute_t<T>;
  int64_t first = 0;  // where the element-by-element loop starts
  if (a.vec) {
    constexpr int V = kVec<T>;
    const int64_t nv = a.numel / V;
    for (int64_t v = global_index(); v < nv; v += global_stride()) {
      const int64_t i = v * V;
      const Vec<T, V> x = vec_load<V>(a.in[0], a.is_scalar[0], a.scalar[0], i);
      Vec<O, V> r;
      if constexpr (N == 1) {
#pragma unroll
        for (int k = 0; k < V; ++k) r.v[k] = store<O>(op(load(x.v[k]), C()));
      } else {
        const Vec<T, V> y = vec_load<V>(a.in[1], a.is_scalar[1], a.scalar[1], i);
#pragma unroll
        for (int k = 0; k < V; ++k) r.v[k] = store<O>(op(load(x.v[k]), load(y.v[k])));
      }
      *reinterpret_cast<Vec<O, V>*>(out + i) = r;
    }
    first = nv * V;  // the tail: 1-D with unit strides, so offsets are i
  }
  for (int64_t i = first + global_index(); i < a.numel; i += global_stride()) {
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

// WHERE(cond, a, b): cond is Bool storage, a and b of T; the vector path
// as map_kernel's.
template <class T>
__global__ void where_kernel(MapArgs<T> a, const bool* cond, bool cond_scalar, bool cond_value, T* out) {
  int64_t first = 0;
  if (a.vec) {
    constexpr int V = kVec<T>;
    const int64_t nv = a.numel / V;
    for (int64_t v = global_index(); v < nv; v += global_stride()) {
      const int64_t i = v * V;
      const Vec<bool, V> c = vec_load<V>(cond, cond_scalar, cond_value, i);
      const Vec<T, V> x = vec_load<V>(a.in[1], a.is_scalar[1], a.scalar[1], i);
      const Vec<T, V> y = vec_load<V>(a.in[2], a.is_scalar[2], a.scalar[2], i);
      Vec<T, V> r;
#pragma unroll
      for (int k = 0; k < V; ++k) r.v[k] = c.v[k] ? x.v[k] : y.v[k];
      *reinterpret_cast<Vec<T, V>*>(out + i) = r;
    }
    first = nv * V;
  }
  for (int64_t i = first + global_index(); i < a.numel; i += global_stride()) {
    int64_t off[3];
    offsets<3>(a, i, off);
    const bool c = cond_scalar ? cond_value : cond[off[0]];
    out[i] = c ? (a.is_scalar[1] ? a.scalar[1] : a.in[1][off[1]]) : (a.is_scalar[2] ? a.scalar[2] : a.in[2][off[2]]);
  }
}

inline bool aligned_to(const void* p, size_t align) { return reinterpret_cast<uintptr_t>(p) % align == 0; }

// The arguments of a map whose output elements are O. The vector path is
// taken when the descriptor is 1-D (canonical: contiguous operands merge
// into one dim), every memory operand has unit stride, and every pointer
// (the output's and the inputs', WHERE's Bool condition included) is
// aligned for its Vec; otherwise the strided path. It needs at least one
// whole vector.
template <class T, class O>
MapArgs<T> map_args(const flx_map_desc& d) {
  constexpr int V = kVec<T>;
  MapArgs<T> a{};
  a.ndim = d.ndim;
  a.numel = d.numel;
  for (int k = 0; k < d.ndim; ++k) a.shape[k] = d.shape[k];
  bool vec = d.ndim == 1 && d.numel >= V && aligned_to(addr(d.out), alignof(Vec<O, V>));
  for (int j = 0; j < 3 && j < d.ninputs; ++j) {
    a.is_scalar[j] = d.in[j].is_scalar != 0;
    a.scalar[j] = cast_element<T>(d.in[j].scalar);  // as the CPU
    a.in[j] = a.is_scalar[j] ? nullptr : reinterpret_cast<const T*>(addr(d.in[j].mem));
    for (int k = 0; k < d.ndim; ++k) a.strides[j][k] = a.is_scalar[j] ? 0 : d.in[j].strides[k];
    if (!a.is_scalar[j]) {
      // WHERE's in0 is the Bool condition, the others are T
      const size_t align = (d.op == FLX_OP_WHERE && j == 0) ? alignof(Vec<bool, V>) : alignof(Vec<T, V>);
      vec = vec && d.in[j].strides[0] == 1 && aligned_to(addr(d.in[j].mem), align);
    }
  }
  a.vec = vec;
  return a;
}

// Threads for n elements: a thread per Vec on the vector path.
template <class T>
unsigned map_blocks(const MapArgs<T>& a) {
  return blocks_for(a.vec ? (a.numel + kVec<T> - 1) / kVec<T> : a.numel);
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
    const MapArgs<T> a = map_args<T, T>(d);
    where_kernel<T><<<map_blocks(a), 256, 0, st>>>(a, cond, cond_scalar, d.in[0].scalar != 0,
                                                   reinterpret_cast<T*>(addr(d.out)));
    return launched("map kernel (where)");
  } else {
    Op op;
    op.alpha = d.alpha;
    op.beta = d.beta;
    using O = std::conditional_t<Op::cls == OpClass::Cmp, bool, T>;
    const MapArgs<T> a = map_args<T, O>(d);
    map_kernel<T, O, Op::arity == 1 ? 1 : 2><<<map_blocks(a), 256, 0, st>>>(a, reinterpret_cast<O*>(addr(d.out)), op);
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
