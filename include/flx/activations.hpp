// Activation functions as function objects: callable on tensors, usable as
// values (Dense(10, 5, sigmoid)) and as layers (softmax in a Chain). Their
// names print as Flux prints them (σ for sigmoid). Qualify flx::tanh where
// <cmath> is visible too.
#pragma once

#include "flx/export.hpp"

#include <functional>
#include <ostream>
#include <string>
#include <type_traits>

#include "flx/functor.hpp"
#include "flx/ops.hpp"

namespace flx {

namespace detail {
FLX_API Tensor softmax(const Tensor& x, int dim, bool log);
}  // namespace detail

// Each activation's shape rule (outputsize, flx/layers/outputsize.hpp): its
// output has its input's shape. Declared beside each, so that outputsize
// of a Chain finds it by argument lookup (no list to keep).
#define FLX_KEEPS_SHAPE(TYPE) \
  inline Shape outputsize(const TYPE&, const Shape& x) { return x; }

// Each operator() is defined in src/ops/activations.cpp (the op codes stay
// inside the library).
#define FLX_ACTIVATION(TYPE, OBJ, NAME)                  \
  struct FLX_API TYPE {                                  \
    Tensor operator()(const Tensor& x) const;            \
    static const char* name() { return NAME; }          \
  };                                                     \
  inline constexpr TYPE OBJ{};                           \
  FLX_KEEPS_SHAPE(TYPE)

FLX_ACTIVATION(Sigmoid, sigmoid, "σ")
FLX_ACTIVATION(Relu, relu, "relu")
FLX_ACTIVATION(Tanh, tanh, "tanh")
// gelu is NNlib's (and Flux's) gelu, gelu_tanh: the tanh approximation
// x/2 (1 + tanh(sqrt(2/π) (x + 0.044715 x³))); as in NNlib, gelu and
// gelu_tanh are one function, which prints as gelu_tanh. gelu_sigmoid is the
// same function written x σ(sqrt(8/π) (x + 0.044715 x³)) (NNlib's, to
// rounding). gelu_erf is the exact form x/2 (1 + erf(x/√2)), PyTorch's
// default nn.GELU() (gelu_tanh there is nn.GELU(approximate="tanh")); they
// differ by up to ~5e-4.
FLX_ACTIVATION(Gelu, gelu, "gelu_tanh")
inline constexpr Gelu gelu_tanh{};
FLX_ACTIVATION(GeluSigmoid, gelu_sigmoid, "gelu_sigmoid")
FLX_ACTIVATION(GeluErf, gelu_erf, "gelu_erf")
FLX_ACTIVATION(Swish, swish, "swish")
FLX_ACTIVATION(Softplus, softplus, "softplus")
// softsign(x) = x / (1 + |x|), as NNlib.softsign and torch.nn.Softsign.
FLX_ACTIVATION(Softsign, softsign, "softsign")
// NNlib's other activations (docs/activations.md has each formula):
// hardσ(x) = clamp((x + 3)/6, 0, 1), hardtanh(x) = clamp(x, -1, 1),
// relu6(x) = clamp(x, 0, 6), hardswish(x) = x hardσ(x),
// selu(x) = λ (x > 0 ? x : α (eˣ − 1)) with NNlib's λ ≈ 1.0507, α ≈ 1.6733,
// logσ(x) = log σ(x) = −softplus(−x), logcosh(x) = log cosh x,
// mish(x) = x tanh(softplus(x)), tanhshrink(x) = x − tanh x,
// lisht(x) = x tanh x. hardsigmoid and logsigmoid print as NNlib's hardσ and
// logσ.
FLX_ACTIVATION(HardSigmoid, hardsigmoid, "hardσ")
FLX_ACTIVATION(HardTanh, hardtanh, "hardtanh")
FLX_ACTIVATION(Relu6, relu6, "relu6")
FLX_ACTIVATION(HardSwish, hardswish, "hardswish")
FLX_ACTIVATION(Selu, selu, "selu")
FLX_ACTIVATION(LogSigmoid, logsigmoid, "logσ")
FLX_ACTIVATION(LogCosh, logcosh, "logcosh")
FLX_ACTIVATION(Mish, mish, "mish")
FLX_ACTIVATION(TanhShrink, tanhshrink, "tanhshrink")
FLX_ACTIVATION(Lisht, lisht, "lisht")
// NNlib's tanh_fast and sigmoid_fast are faster, less exact forms of tanh
// and σ; here they compute as flx::tanh and sigmoid do (the same bits), and
// print their own names.
FLX_ACTIVATION(TanhFast, tanh_fast, "tanh_fast")
FLX_ACTIVATION(SigmoidFast, sigmoid_fast, "sigmoid_fast")
#undef FLX_ACTIVATION

struct FLX_API LeakyRelu {  // leakyrelu(x, a = 0.01)
  Tensor operator()(const Tensor& x, double a = 0.01) const;
  static const char* name() { return "leakyrelu"; }
};
inline constexpr LeakyRelu leakyrelu{};
FLX_KEEPS_SHAPE(LeakyRelu)
struct FLX_API Elu {  // elu(x, α = 1)
  Tensor operator()(const Tensor& x, double alpha = 1.0) const;
  static const char* name() { return "elu"; }
};
inline constexpr Elu elu{};
FLX_KEEPS_SHAPE(Elu)
// celu(x, α = 1) = max(0, x) + min(0, α (exp(x/α) − 1)), as NNlib.celu and
// torch.nn.CELU.
struct FLX_API Celu {
  Tensor operator()(const Tensor& x, double alpha = 1.0) const;
  static const char* name() { return "celu"; }
};
inline constexpr Celu celu{};
FLX_KEEPS_SHAPE(Celu)
// softshrink(x, λ = 0.5): x − λ above λ, x + λ below −λ, 0 between (λ ≥ 0).
struct FLX_API Softshrink {
  Tensor operator()(const Tensor& x, double lambda = 0.5) const;
  static const char* name() { return "softshrink"; }
};
inline constexpr Softshrink softshrink{};
FLX_KEEPS_SHAPE(Softshrink)
// trelu(x, θ = 1): x above θ, else 0 (NNlib's trelu, also thresholdrelu).
struct FLX_API Trelu {
  Tensor operator()(const Tensor& x, double theta = 1.0) const;
  static const char* name() { return "trelu"; }
};
inline constexpr Trelu trelu{};
inline constexpr Trelu thresholdrelu{};
FLX_KEEPS_SHAPE(Trelu)
// rrelu(x, lo = 1/8, hi = 1/3): x where x > 0, else a·x, with a slope a drawn
// for each element uniformly from [lo, hi] (NNlib's rrelu) while training;
// otherwise the mean slope (lo + hi)/2, as PyTorch's rrelu in evaluation
// and the RReLU paper at test time. Training is decided as layers decide it
// by default (inside gradient/withgradient), or by `training`. The slopes
// are drawn as dropout's mask: on x's device, from the global seed
// (set_seed). Unlike NNlib's, rrelu outside gradient is deterministic.
struct FLX_API Rrelu {
  Tensor operator()(const Tensor& x, double lo = 1.0 / 8, double hi = 1.0 / 3) const;
  Tensor operator()(const Tensor& x, double lo, double hi, bool training) const;
  static const char* name() { return "rrelu"; }
};
inline constexpr Rrelu rrelu{};
FLX_KEEPS_SHAPE(Rrelu)
// glu(x, dim = 0): x split in two halves a, b along dim (whose size must be
// even), then a .* σ(b): NNlib's glu (its default dim 1 is dim 0 here). Also
// a layer in a Chain, where it splits dim 0.
struct FLX_API Glu {
  Tensor operator()(const Tensor& x, int dim = 0) const;
  static const char* name() { return "glu"; }
};
inline constexpr Glu glu{};
// As a layer: dim 0 halved (its size must be even).
FLX_API Shape outputsize(const Glu&, const Shape& x);
struct FLX_API Identity {
  Tensor operator()(const Tensor& x) const { return x; }
  static const char* name() { return "identity"; }
};
inline constexpr Identity identity{};
FLX_KEEPS_SHAPE(Identity)
// softmax / logsoftmax over dim (default 0, Flux's dims=1), also layers.
struct FLX_API Softmax {
  Tensor operator()(const Tensor& x, int dim = 0) const { return detail::softmax(x, dim, false); }
  static const char* name() { return "softmax"; }
};
struct FLX_API LogSoftmax {
  Tensor operator()(const Tensor& x, int dim = 0) const { return detail::softmax(x, dim, true); }
  static const char* name() { return "logsoftmax"; }
};
inline constexpr Softmax softmax{};
inline constexpr LogSoftmax logsoftmax{};
FLX_KEEPS_SHAPE(Softmax)
FLX_KEEPS_SHAPE(LogSoftmax)

// Activation: any of the above, or any callable Tensor -> Tensor, held by
// value in layers such as Dense.
class FLX_API Activation {
 public:
  Activation() : name_("identity"), identity_(true), kind_(Kind::Identity) {}
  template <class F>
    requires(!std::is_same_v<std::decay_t<F>, Activation> && std::is_invocable_r_v<Tensor, const F&, const Tensor&>)
  Activation(F f) : fn_(std::move(f)) {  // NOLINT: implicit on purpose (Dense(2, 3, relu))
    if constexpr (requires { F::name(); }) name_ = F::name();
    else name_ = "#callable";
    identity_ = std::is_same_v<std::decay_t<F>, Identity>;
    if constexpr (std::is_same_v<std::decay_t<F>, Relu>) kind_ = Kind::Relu;
    else if constexpr (std::is_same_v<std::decay_t<F>, Gelu>) kind_ = Kind::Gelu;
    else if constexpr (std::is_same_v<std::decay_t<F>, Identity>) kind_ = Kind::Identity;
    else if constexpr (std::is_same_v<std::decay_t<F>, Tanh> || std::is_same_v<std::decay_t<F>, TanhFast>)
      kind_ = Kind::Tanh;
    else if constexpr (std::is_same_v<std::decay_t<F>, Sigmoid> || std::is_same_v<std::decay_t<F>, SigmoidFast>)
      kind_ = Kind::Sigmoid;
  }
  Tensor operator()(const Tensor& x) const { return identity_ ? x : fn_(x); }
  const std::string& name() const { return name_; }
  bool is_identity() const { return identity_; }
  // Which built-in activation this is, where a layer can fuse it into its
  // kernels (Dense: identity, relu, gelu; RNN: identity, relu, tanh, σ);
  // Other for every other function.
  enum class Kind { Other, Identity, Relu, Gelu, Tanh, Sigmoid };
  Kind kind() const { return kind_; }

 private:
  std::function<Tensor(const Tensor&)> fn_;
  std::string name_;
  bool identity_ = false;
  Kind kind_ = Kind::Other;
};

FLX_API std::ostream& operator<<(std::ostream& os, const Activation& a);
// A layer's activation keeps the shape (whatever callable it holds).
FLX_KEEPS_SHAPE(Activation)

FLX_LEAF(Activation)
FLX_LEAF(Softmax)
FLX_LEAF(LogSoftmax)
FLX_LEAF(Glu)

}  // namespace flx
