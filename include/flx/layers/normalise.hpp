// Normalisation and regularisation layers (Flux's normalise.jl): BatchNorm,
// LayerNorm, GroupNorm, InstanceNorm, Dropout and AlphaDropout, and the train/test mode they follow. As in Flux, a layer
// trains inside gradient/withgradient and infers outside; trainmode(model)
// and testmode(model) fix the mode for a whole model (Flux's trainmode! and
// testmode!), automode(model) gives the choice back.
//
// Each layer's declarations follow its struct: FLX_FUNCTOR (its tensors) or
// FLX_LEAF (none), show_compact (its one-line form, as Flux prints it;
// `os << layer` adds the counts: show.hpp) and outputsize (its shape rule:
// the forward pass's checks and sizes without computing: outputsize.hpp).
#pragma once

#include "flx/export.hpp"

#include <cstdint>
#include <map>
#include <initializer_list>
#include <optional>
#include <ostream>
#include <string>
#include <tuple>
#include <variant>
#include <vector>

#include "flx/activations.hpp"
#include "flx/dnn.hpp"
#include "flx/functor.hpp"
#include "flx/layers/show.hpp"

namespace flx {

struct FLX_API BatchNormOptions {
  bool affine = true;       // learn scale (γ) and bias (β)
  bool track_stats = true;  // keep running statistics for inference
  double epsilon = 1e-5;
  double momentum = 0.1;
};

// y = act.(scale .* (x .- μ) ./ sqrt.(σ² .+ ε) .+ bias) per channel (the
// second last dim of x), with the batch's statistics while training and the
// running ones (moved by momentum in training) otherwise. The running
// statistics move with the model and are saved, but are not trained.
struct FLX_API BatchNorm {
  Tensor bias;          // β, zeros
  Tensor scale;         // γ, ones
  Tensor running_mean;  // μ, zeros
  Tensor running_var;   // σ², ones
  Activation act;
  BatchNormOptions options;
  int64_t channels = 0;
  std::optional<bool> active;  // nullopt: train inside gradient only (Flux's `nothing`)

  explicit BatchNorm(int64_t channels, Activation act = {}, const BatchNormOptions& o = {});
  BatchNorm(int64_t channels, const BatchNormOptions& o) : BatchNorm(channels, {}, o) {}
  Tensor operator()(const Tensor& x) const;
};
FLX_FUNCTOR(BatchNorm, bias, scale, running_mean, running_var)
FLX_TRAINABLE(BatchNorm, bias, scale)
FLX_API void show_compact(std::ostream& os, const BatchNorm& l);
FLX_API Shape outputsize(const BatchNorm& l, const Shape& x);  // channels in the second last dim

struct FLX_API LayerNormOptions {
  bool affine = true;  // learn scale (γ) and bias (β), of the normalised shape
  double epsilon = 1e-5;
};

// Normalises each slice of x over its leading dims (size: one dim for
// LayerNorm(d), several for LayerNorm({d1, d2})) to zero mean and unit
// variance, then scales and shifts it elementwise:
//   y = act.(scale .* (x .- μ) ./ sqrt.(σ² .+ ε) .+ bias)
// with μ and the biased σ² of each slice, as Flux's LayerNorm (through
// NNlib's normalise) and PyTorch's nn.LayerNorm compute it. (Flux up to 0.15
// divided by σ + ε instead: the same but for inputs whose σ² is near ε.) The
// same in training and inference; the input must be floating, with size's
// dims first.
struct FLX_API LayerNorm {
  Tensor scale;  // γ, ones(size)
  Tensor bias;   // β, zeros(size)
  Activation act;
  LayerNormOptions options;
  Shape size;  // the normalised leading dims

  explicit LayerNorm(int64_t d, Activation act = {}, const LayerNormOptions& o = {});
  LayerNorm(int64_t d, const LayerNormOptions& o) : LayerNorm(d, {}, o) {}
  explicit LayerNorm(const Shape& size, Activation act = {}, const LayerNormOptions& o = {});
  LayerNorm(const Shape& size, const LayerNormOptions& o) : LayerNorm(size, {}, o) {}
  // LayerNorm({d1, d2}): the sizes checked (and named) before they make a Shape.
  LayerNorm(std::initializer_list<int64_t> size, Activation act = {}, const LayerNormOptions& o = {});
  LayerNorm(std::initializer_list<int64_t> size, const LayerNormOptions& o) : LayerNorm(size, {}, o) {}
  Tensor operator()(const Tensor& x) const;
};
FLX_FUNCTOR(LayerNorm, scale, bias)
FLX_API void show_compact(std::ostream& os, const LayerNorm& l);
FLX_API Shape outputsize(const LayerNorm& l, const Shape& x);  // the normalised size first

struct FLX_API GroupNormOptions {
  bool affine = true;  // learn scale (γ) and bias (β), one per channel
  double epsilon = 1e-5;
  double momentum = 0.1;  // kept as Flux keeps it (GroupNorm has no running statistics)
};

// Normalises each sample's channels in `groups` groups of channels / groups
// consecutive channels: mean and biased variance over (spatial...,
// channels of the group) of each sample, then per channel
//   y = act.(scale .* (x .- μ) ./ sqrt.(σ² .+ ε) .+ bias)
// as Flux's GroupNorm and PyTorch's nn.GroupNorm. The input is
// (spatial..., channels, batch) or (channels, batch); the same in training
// and inference. Composed of differentiable ops (reshape, mean), so it runs
// on every device; Float16 and BFloat16 are normalised in Float32 and
// rounded once, as LayerNorm's.
struct FLX_API GroupNorm {
  Tensor bias;   // β, zeros(channels)
  Tensor scale;  // γ, ones(channels)
  Activation act;
  GroupNormOptions options;
  int64_t channels = 0;
  int64_t groups = 0;
  std::optional<bool> active;  // as Flux's (trainmode/testmode set it; the output does not depend on it)

  GroupNorm(int64_t channels, int64_t groups, Activation act = {}, const GroupNormOptions& o = {});
  GroupNorm(int64_t channels, int64_t groups, const GroupNormOptions& o) : GroupNorm(channels, groups, {}, o) {}
  Tensor operator()(const Tensor& x) const;
};
FLX_FUNCTOR(GroupNorm, bias, scale)
FLX_API void show_compact(std::ostream& os, const GroupNorm& l);     // GroupNorm(32, 4, relu)
FLX_API Shape outputsize(const GroupNorm& l, const Shape& x);     // channels in the second last dim

struct FLX_API InstanceNormOptions {
  bool affine = false;       // Flux's default: no scale (γ) or bias (β)
  bool track_stats = false;  // Flux's default: no running statistics
  double epsilon = 1e-5;
  double momentum = 0.1;
};

// Normalises each channel of each sample over its spatial dims:
//   y = act.(scale .* (x .- μ) ./ sqrt.(σ² .+ ε) .+ bias)
// with μ and the biased σ² of that (spatial...) slice, as Flux's
// InstanceNorm and PyTorch's nn.InstanceNorm2d. With track_stats, training
// moves running_mean and running_var by momentum towards the batch's mean
// of the slices' means and of their unbiased variances (Flux's rule) and
// inference normalises with them; without, the slices' own statistics serve
// in inference too. The input is (spatial..., channels, batch), at least
// one spatial dim; training with track_stats needs two spatial elements or
// more (an unbiased variance of one is 0/0: a DimensionMismatch, as
// PyTorch refuses it), and an empty batch leaves the statistics as they are.
struct FLX_API InstanceNorm {
  Tensor bias;          // β (affine)
  Tensor scale;         // γ (affine)
  Tensor running_mean;  // μ (track_stats)
  Tensor running_var;   // σ² (track_stats)
  Activation act;
  InstanceNormOptions options;
  int64_t channels = 0;
  std::optional<bool> active;

  explicit InstanceNorm(int64_t channels, Activation act = {}, const InstanceNormOptions& o = {});
  InstanceNorm(int64_t channels, const InstanceNormOptions& o) : InstanceNorm(channels, {}, o) {}
  Tensor operator()(const Tensor& x) const;
};
FLX_FUNCTOR(InstanceNorm, bias, scale, running_mean, running_var)
FLX_TRAINABLE(InstanceNorm, bias, scale)
FLX_API void show_compact(std::ostream& os, const InstanceNorm& l);  // InstanceNorm(3, affine=false)
FLX_API Shape outputsize(const InstanceNorm& l, const Shape& x);  // (spatial..., channels, batch)

// Zeroes each element (or slice: Flux's dims) with probability p while
// training and scales the rest by 1 / (1 - p); the identity in inference.
struct FLX_API Dropout {
  double p = 0.5;
  std::vector<int> dims;  // empty: every element apart (Flux's dims=:)
  std::optional<bool> active;

  explicit Dropout(double p, std::vector<int> dims = {});
  Tensor operator()(const Tensor& x) const;
};
FLX_LEAF(Dropout)
FLX_API void show_compact(std::ostream& os, const Dropout& l);
inline Shape outputsize(const Dropout&, const Shape& x) { return x; }

// Dropout for selu networks (Flux's AlphaDropout; see alphadropout): keeps
// the mean and variance of its input while training; the identity in
// inference.
struct FLX_API AlphaDropout {
  double p = 0.5;
  std::optional<bool> active;

  explicit AlphaDropout(double p);
  Tensor operator()(const Tensor& x) const;
};
FLX_LEAF(AlphaDropout)
FLX_API void show_compact(std::ostream& os, const AlphaDropout& l);
inline Shape outputsize(const AlphaDropout&, const Shape& x) { return x; }

namespace detail {
// Whether a layer with this mode setting trains now.
FLX_API bool training_now(const std::optional<bool>& active);

// Sets `active` on every layer of x that has one.
template <class T>
void set_mode(T& x, std::optional<bool> mode) {
  if constexpr (requires { x.active = mode; }) x.active = mode;
  if constexpr (DeclaredFunctor<T>) {
    std::apply([&](const auto&... fld) { (set_mode(x.*(fld.ptr), mode), ...); }, fields_of<T, false>());
  } else if constexpr (is_std_container<T>::value) {
    if constexpr (requires { std::tuple_size<T>::value; } && !requires { x.size(); }) {
      std::apply([&](auto&... e) { (set_mode(e, mode), ...); }, x);
    } else if constexpr (requires { x.has_value(); }) {
      if (x) set_mode(*x, mode);
    } else if constexpr (requires { x.index(); }) {
      std::visit([&](auto& v) { set_mode(v, mode); }, x);
    } else if constexpr (requires { x.begin()->first; }) {
      for (auto& [k, v] : x) set_mode(v, mode);
    } else {
      for (auto& e : x) set_mode(e, mode);
    }
  }
}
}  // namespace detail

// The model with every BatchNorm and Dropout (any layer with an `active`
// field) training, inferring, or back to automatic (training inside
// gradient/withgradient only). The copy shares the model's tensors.
template <class M>
M trainmode(M model) {
  detail::set_mode(model, true);
  return model;
}
template <class M>
M testmode(M model) {
  detail::set_mode(model, false);
  return model;
}
template <class M>
M automode(M model) {
  detail::set_mode(model, std::nullopt);
  return model;
}

}  // namespace flx
