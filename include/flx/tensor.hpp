// Tensor: a handle (like torch::Tensor) to an n-dimensional array on some
// device. Copying a Tensor shares its storage; shapes are column-major in
// Flux's order (the last dimension holds observations).
#pragma once

#include "flx/export.hpp"

#include <concepts>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <ostream>
#include <vector>

#include "flx/device.hpp"
#include "flx/dtype.hpp"
#include "flx/error.hpp"
#include "flx/shape.hpp"

namespace flx {

namespace detail {
struct TensorImpl;
}

class FLX_API Tensor {
 public:
  Tensor() = default;  // undefined: holds nothing (a gradient that did not flow)
  // Wrap an implementation record (library internals).
  static Tensor from_impl(std::shared_ptr<detail::TensorImpl> impl) {
    Tensor t;
    t.impl_ = std::move(impl);
    return t;
  }

  bool defined() const { return impl_ != nullptr; }
  const Shape& shape() const;
  int ndims() const { return shape().ndims(); }
  int64_t numel() const { return shape().numel(); }
  int64_t size(int dim) const;  // 0-based; dims past ndims() are 1, as in Julia
  DType dtype() const;
  Device device() const;

  // The single element, converted to T (throws unless numel() == 1).
  template <class T>
  T item() const {
    T out{};
    read_host(dtype_of<T>(), &out, 1, "item");
    return out;
  }
  // All elements in column-major order, converted to T.
  template <class T>
  std::vector<T> to_vector() const {
    std::vector<T> out(static_cast<size_t>(numel()));
    if constexpr (std::is_same_v<T, bool>) {
      std::unique_ptr<bool[]> tmp(new bool[out.size()]);
      read_host(DType::Bool, tmp.get(), out.size(), "to_vector");
      for (size_t i = 0; i < out.size(); ++i) out[i] = tmp[i];
    } else {
      read_host(dtype_of<T>(), out.data(), out.size(), "to_vector");
    }
    return out;
  }

  Tensor to(Device d) const;  // same dtype on d (the tensor itself if already there)
  Tensor to(DType t) const;   // same device, converted elements (itself if already t)

  // Zero-copy view of observations [start, stop) along the last dimension.
  Tensor slice_last(int64_t start, int64_t stop) const;

  // True inside gradient() for tensors that gradients flow to.
  bool requires_grad() const;
  // A new handle on the same storage, cut from any gradient graph.
  Tensor detach() const;
  // Identity of the handle: copies of a Tensor share it, tied weights too.
  const void* id() const { return impl_.get(); }

  const std::shared_ptr<detail::TensorImpl>& impl() const { return impl_; }

 private:
  void read_host(DType as, void* out, size_t n, const char* what) const;
  std::shared_ptr<detail::TensorImpl> impl_;
};

FLX_API std::ostream& operator<<(std::ostream& os, const Tensor& t);
namespace detail {
// Its size and type, the first line of its printing without the device:
// "2×3 Tensor{Float32}", "5-element Tensor{Float64}" (a layer's display
// shows a tensor so, as Flux's shows an array).
FLX_API std::string tensor_summary(const Tensor& t);
}  // namespace detail

// ---- factories (CPU; move with `| gpu` or `.to(device)`) -------------------
FLX_API Tensor empty(DType t, const Shape& s, Device d = {});  // uninitialised
FLX_API Tensor zeros(DType t, const Shape& s);
FLX_API Tensor ones(DType t, const Shape& s);
FLX_API Tensor rand(DType t, const Shape& s);   // uniform on [0, 1)
FLX_API Tensor randn(DType t, const Shape& s);  // standard normal
FLX_API Tensor full(DType t, double value, const Shape& s);
FLX_API Tensor from_host(const void* data, DType t, const Shape& s);

// Seed the global counter-based generator (rand, randn, layer init).
FLX_API void set_seed(uint64_t seed);
namespace detail {
// A seed drawn from that generator (a DataLoader's or shuffleobs's, when
// none is given).
FLX_API uint64_t draw_seed();
}  // namespace detail

template <class... D>
concept DimArgs = (std::integral<D> && ...);

#define FLX_FACTORY(NAME)                                                      \
  inline Tensor NAME(const Shape& s) { return NAME(DType::Float32, s); }       \
  template <class... D>                                                        \
    requires DimArgs<D...>                                                        \
  Tensor NAME(D... dims) {                                                     \
    return NAME(DType::Float32, Shape{int64_t(dims)...});                      \
  }                                                                            \
  template <class... D>                                                        \
    requires DimArgs<D...>                                                        \
  Tensor NAME(DType t, D... dims) {                                            \
    return NAME(t, Shape{int64_t(dims)...});                                   \
  }
FLX_FACTORY(zeros)
FLX_FACTORY(ones)
FLX_FACTORY(rand)
FLX_FACTORY(randn)
#undef FLX_FACTORY

// full(value, dims...): Float32 for floating values (the default element
// type), Int64 for integers, Bool for bool; full(dtype, value, dims...) picks.
template <class V, class... D>
  requires(std::is_arithmetic_v<V> && DimArgs<D...>)
Tensor full(V value, D... dims) {
  DType t = std::is_same_v<V, bool> ? DType::Bool : std::is_floating_point_v<V> ? DType::Float32 : DType::Int64;
  return full(t, double(value), Shape{int64_t(dims)...});
}
template <class V, class... D>
  requires(std::is_arithmetic_v<V> && DimArgs<D...>)
Tensor full(DType t, V value, D... dims) {
  return full(t, double(value), Shape{int64_t(dims)...});
}

// tensor(data, dims): column-major data; the dtype follows the C++ type.
template <class T>
Tensor tensor(const std::vector<T>& data, const Shape& dims) {
  FLX_CHECK(int64_t(data.size()) == dims.numel(), DimensionMismatch, "tensor: ", data.size(),
            " values do not fill a tensor of shape ", dims.str(), " (", dims.numel(), " elements)");
  if constexpr (std::is_same_v<T, bool>) {
    std::vector<uint8_t> bytes(data.begin(), data.end());
    return from_host(bytes.data(), DType::Bool, dims);
  } else {
    return from_host(data.data(), dtype_of<T>(), dims);
  }
}
template <class T>
Tensor tensor(const std::vector<T>& data) {
  return tensor(data, Shape{int64_t(data.size())});
}
template <class T>
Tensor tensor(std::initializer_list<T> data, const Shape& dims) {
  return tensor(std::vector<T>(data), dims);
}
template <class T>
Tensor tensor(std::initializer_list<T> data) {
  return tensor(std::vector<T>(data));
}

}  // namespace flx
