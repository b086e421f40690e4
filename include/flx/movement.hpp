// Moving data and models between devices: cpu, gpu, cu and device objects,
// each callable and pipeable (`model | gpu`, `x | dev`), walking whole models
// with fmap.
#pragma once

#include "flx/functor.hpp"
#include "flx/tensor.hpp"

namespace flx {

namespace detail {
// Where gpu() sends data now: a functional GPU, or the CPU after a one-time
// warning (FLX_SILENCE_WARN_NO_GPU=1 silences it).
Device gpu_target();
// The CUDA device cu() uses, or a BackendUnavailable error saying why not.
Device cuda_target();
// gpu/cu semantics: Float64 becomes Float32 on the way (as Flux does).
Tensor to_gpu_eltype(const Tensor& t, Device d);
}  // namespace detail

struct CpuFn {
  template <class T>
  T operator()(const T& x) const {
    return fmap([](const Tensor& t) { return t.to(Device::cpu()); }, x);
  }
};
struct GpuFn {
  template <class T>
  T operator()(const T& x) const {
    Device d = detail::gpu_target();
    return fmap([d](const Tensor& t) { return detail::to_gpu_eltype(t, d); }, x);
  }
};
struct CuFn {
  template <class T>
  T operator()(const T& x) const {
    Device d = detail::cuda_target();
    return fmap([d](const Tensor& t) { return detail::to_gpu_eltype(t, d); }, x);
  }
};

inline constexpr CpuFn cpu{};
inline constexpr GpuFn gpu{};
inline constexpr CuFn cu{};

FLX_LEAF(Device)

template <class T>
concept Mover = std::is_same_v<T, CpuFn> || std::is_same_v<T, GpuFn> || std::is_same_v<T, CuFn> ||
                std::is_same_v<T, Device>;

// x | gpu, model | cpu, (x, y) | dev
template <class T, class M>
  requires Mover<M>
T operator|(const T& x, const M& mover) {
  if constexpr (std::is_same_v<M, Device>) return fmap([&](const Tensor& t) { return t.to(mover); }, x);
  else return mover(x);
}

template <class T>
T Device::operator()(const T& x) const {
  return x | *this;
}

}  // namespace flx
