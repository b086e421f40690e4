// Moving data and models between devices: cpu, gpu, cu and device objects,
// each callable and pipeable (`model | gpu`, `x | dev`), walking whole models
// with fmap.
#pragma once

#include "flx/export.hpp"

#include "flx/functor.hpp"
#include "flx/tensor.hpp"

namespace flx {

namespace detail {
// Where gpu() sends data now: a functional GPU, or the CPU after a one-time
// warning (FLX_SILENCE_WARN_NO_GPU=1 silences it).
FLX_API Device gpu_target();
// The CUDA device cu() uses, or a BackendUnavailable error saying why not.
FLX_API Device cuda_target();
// gpu/cu semantics: Float64 becomes Float32 on the way (as Flux does).
FLX_API Tensor to_gpu_eltype(const Tensor& t, Device d);
}  // namespace detail

// Move x to device d: every tensor leaf of a model, tuple or tensor, with
// Float64 becoming Float32 when gpu_eltype (gpu/cu do that, as Flux does).
// A more specialised overload for DataLoader (data.hpp), found by ADL, gives a
// loader that yields batches on d.
template <class T>
T move_to(const T& x, Device d, bool gpu_eltype) {
  if (gpu_eltype) return fmap([d](const Tensor& t) { return detail::to_gpu_eltype(t, d); }, x);
  return fmap([d](const Tensor& t) { return t.to(d); }, x);
}

struct FLX_API CpuFn {
  template <class T>
  auto operator()(const T& x) const {
    return move_to(x, Device::cpu(), false);
  }
};
struct FLX_API GpuFn {
  template <class T>
  auto operator()(const T& x) const {
    return move_to(x, detail::gpu_target(), true);
  }
};
struct FLX_API CuFn {
  template <class T>
  auto operator()(const T& x) const {
    return move_to(x, detail::cuda_target(), true);
  }
};

inline constexpr CpuFn cpu{};
inline constexpr GpuFn gpu{};
inline constexpr CuFn cu{};

FLX_LEAF(Device)

template <class T>
concept Mover = std::is_same_v<T, CpuFn> || std::is_same_v<T, GpuFn> || std::is_same_v<T, CuFn> ||
                std::is_same_v<T, Device>;

// x | gpu, model | cpu, (x, y) | dev, loader | dev
template <class T, class M>
  requires Mover<M>
auto operator|(const T& x, const M& mover) {
  if constexpr (std::is_same_v<M, Device>) return move_to(x, mover, false);
  else return mover(x);
}

template <class T>
auto Device::operator()(const T& x) const {
  return x | *this;
}

}  // namespace flx
