// Weight initialisers, as Flux's (src/utils.jl there): each takes the dims
// first, then Flux's keywords as a trailing options struct, and returns a
// Float32 tensor on the CPU drawn from the global generator (set_seed: the
// same seed gives the same bits).
//
//   glorot_uniform(3, 4)                                 // dims as integers
//   glorot_uniform({3, 3, 16, 32})                       // or one Shape
//   kaiming_normal({64, 32}, {.gain = 1})                // dims, then options
//   truncated_normal({5, 5}, {.std = 0.02})
//   sparse_init({10, 3}, {.sparsity = 0.5})
//   Dense(784, 256, relu, {.init = kaiming_normal})      // a layer's .init
//   Conv({3, 3}, 3, 16, {.init = [](const Shape& s) { return orthogonal(s, {.gain = 2}); }})
//
// Each initialiser is a function object (as the activations are), so it can
// be a layer's `.init` as it is; with options, a lambda that passes them.
// Fans are Flux's nfan of the dims: () -> (1, 1), (n) -> (1, n), (out, in)
// -> (in, out), (k..., in, out) -> (prod(k) in, prod(k) out).
#pragma once

#include "flx/export.hpp"

#include <concepts>
#include <cstdint>
#include <functional>
#include <optional>
#include <utility>
#include <vector>

#include "flx/shape.hpp"
#include "flx/tensor.hpp"

namespace flx {

// What a layer's `.init` option holds: the weight's dims in, the weight out.
// An empty one is the layer's default (Flux's: glorot_uniform, or randn for
// Embedding).
using InitFn = std::function<Tensor(const Shape&)>;

// Flux.nfan: {fan_in, fan_out} of an array of these dims.
FLX_API std::pair<int64_t, int64_t> nfan(const Shape& dims);

struct FLX_API GlorotOptions {
  double gain = 1;
};
struct FLX_API KaimingOptions {
  double gain = 1.4142135623730951;  // √2, Flux's default
};
struct FLX_API TruncatedNormalOptions {
  double mean = 0, std = 1, lo = -2, hi = 2;
};
struct FLX_API OrthogonalOptions {
  double gain = 1;
};
struct FLX_API SparseInitOptions {
  std::optional<double> sparsity;  // required: the fraction of each column set to zero (rounded up)
  double std = 0.01;
};
struct FLX_API IdentityInitOptions {
  double gain = 1;
  // circshift of the result, as Julia's circshift(A, shifts): the k-th
  // value shifts dim k, so one value shifts dim 0 only (as in Flux); dims
  // without a value stay.
  std::vector<int64_t> shift = {};
};

namespace detail {
// An initialiser of options O: f(dims...), f(Shape), f(Shape, O).
template <class Impl, class O>
struct Initialiser {
  Tensor operator()(const Shape& dims, const O& o = {}) const { return Impl::draw(dims, o); }
  template <std::integral... I>
    requires(sizeof...(I) >= 1)
  Tensor operator()(I... dims) const {
    return Impl::draw(Shape{int64_t(dims)...}, O{});
  }
};

struct FLX_API GlorotUniformImpl { static Tensor draw(const Shape& dims, const GlorotOptions& o); };
struct FLX_API GlorotNormalImpl { static Tensor draw(const Shape& dims, const GlorotOptions& o); };
struct FLX_API KaimingUniformImpl { static Tensor draw(const Shape& dims, const KaimingOptions& o); };
struct FLX_API KaimingNormalImpl { static Tensor draw(const Shape& dims, const KaimingOptions& o); };
struct FLX_API TruncatedNormalImpl { static Tensor draw(const Shape& dims, const TruncatedNormalOptions& o); };
struct FLX_API OrthogonalImpl { static Tensor draw(const Shape& dims, const OrthogonalOptions& o); };
struct FLX_API SparseInitImpl { static Tensor draw(const Shape& dims, const SparseInitOptions& o); };
struct FLX_API IdentityInitImpl { static Tensor draw(const Shape& dims, const IdentityInitOptions& o); };
}  // namespace detail

// Uniform on ±gain·sqrt(6 / (fan_in + fan_out)) (Xavier).
inline constexpr detail::Initialiser<detail::GlorotUniformImpl, GlorotOptions> glorot_uniform{};
// Normal, standard deviation gain·sqrt(2 / (fan_in + fan_out)).
inline constexpr detail::Initialiser<detail::GlorotNormalImpl, GlorotOptions> glorot_normal{};
// Uniform on ±gain·sqrt(3 / fan_in) (He).
inline constexpr detail::Initialiser<detail::KaimingUniformImpl, KaimingOptions> kaiming_uniform{};
// Normal, standard deviation gain / sqrt(fan_in).
inline constexpr detail::Initialiser<detail::KaimingNormalImpl, KaimingOptions> kaiming_normal{};
// Normal(mean, std) truncated to [lo, hi], by the inverse CDF of a uniform draw.
inline constexpr detail::Initialiser<detail::TruncatedNormalImpl, TruncatedNormalOptions> truncated_normal{};
// A (semi-)orthogonal matrix times gain: prod(dims[0:end-1]) × dims[end]
// (the transpose of one when rows < cols), reshaped; Q of the QR of a normal
// draw with R's diagonal made positive. Not for one dim.
inline constexpr detail::Initialiser<detail::OrthogonalImpl, OrthogonalOptions> orthogonal{};
// A matrix (two dims only) of normal(0, std) draws with ceil(sparsity·rows)
// zeros at random rows of each column.
inline constexpr detail::Initialiser<detail::SparseInitImpl, SparseInitOptions> sparse_init{};
// Zeros (one dim), gain·I (two dims, the rest zero), or for (k..., in, out)
// gain at the kernel's centre (cld(k, 2), 1-based) for channel i -> i; then
// circshift by `shift` (its k-th value along dim k). Not random.
inline constexpr detail::Initialiser<detail::IdentityInitImpl, IdentityInitOptions> identity_init{};

}  // namespace flx
