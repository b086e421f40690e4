// Activation functions as function objects: callable on tensors, usable as
// values (Dense(10, 5, sigmoid)) and as layers (softmax in a Chain). Their
// names print as Flux prints them (σ for sigmoid). Qualify flx::tanh where
// <cmath> is visible too.
#pragma once

#include <functional>
#include <ostream>
#include <string>
#include <type_traits>

#include "flx/functor.hpp"
#include "flx/ops.hpp"

namespace flx {

namespace detail {
Tensor softmax(const Tensor& x, int dim, bool log);
}  // namespace detail

// Each operator() is defined in src/ops/activations.cpp (the op codes stay
// inside the library).
#define FLX_ACTIVATION(TYPE, OBJ, NAME)                  \
  struct TYPE {                                          \
    Tensor operator()(const Tensor& x) const;            \
    static const char* name() { return NAME; }          \
  };                                                     \
  inline constexpr TYPE OBJ{};

FLX_ACTIVATION(Sigmoid, sigmoid, "σ")
FLX_ACTIVATION(Relu, relu, "relu")
FLX_ACTIVATION(Tanh, tanh, "tanh")
// gelu is NNlib's (and Flux's) gelu: the tanh approximation
// x/2 (1 + tanh(sqrt(2/π) (x + 0.044715 x³))). gelu_erf is the exact form
// x/2 (1 + erf(x/√2)), PyTorch's default nn.GELU() (gelu_tanh there is
// nn.GELU(approximate="tanh")); they differ by up to ~5e-4.
FLX_ACTIVATION(Gelu, gelu, "gelu")
FLX_ACTIVATION(GeluErf, gelu_erf, "gelu_erf")
FLX_ACTIVATION(Swish, swish, "swish")
FLX_ACTIVATION(Softplus, softplus, "softplus")
// softsign(x) = x / (1 + |x|), as NNlib.softsign and torch.nn.Softsign.
FLX_ACTIVATION(Softsign, softsign, "softsign")
#undef FLX_ACTIVATION

struct LeakyRelu {  // leakyrelu(x, a = 0.01)
  Tensor operator()(const Tensor& x, double a = 0.01) const;
  static const char* name() { return "leakyrelu"; }
};
inline constexpr LeakyRelu leakyrelu{};
struct Elu {  // elu(x, α = 1)
  Tensor operator()(const Tensor& x, double alpha = 1.0) const;
  static const char* name() { return "elu"; }
};
inline constexpr Elu elu{};
// celu(x, α = 1) = max(0, x) + min(0, α (exp(x/α) − 1)), as NNlib.celu and
// torch.nn.CELU.
struct Celu {
  Tensor operator()(const Tensor& x, double alpha = 1.0) const;
  static const char* name() { return "celu"; }
};
inline constexpr Celu celu{};
struct Identity {
  Tensor operator()(const Tensor& x) const { return x; }
  static const char* name() { return "identity"; }
};
inline constexpr Identity identity{};
// softmax / logsoftmax over dim (default 0, Flux's dims=1), also layers.
struct Softmax {
  Tensor operator()(const Tensor& x, int dim = 0) const { return detail::softmax(x, dim, false); }
  static const char* name() { return "softmax"; }
};
struct LogSoftmax {
  Tensor operator()(const Tensor& x, int dim = 0) const { return detail::softmax(x, dim, true); }
  static const char* name() { return "logsoftmax"; }
};
inline constexpr Softmax softmax{};
inline constexpr LogSoftmax logsoftmax{};

// Activation: any of the above, or any callable Tensor -> Tensor, held by
// value in layers such as Dense.
class Activation {
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
    else if constexpr (std::is_same_v<std::decay_t<F>, Tanh>) kind_ = Kind::Tanh;
    else if constexpr (std::is_same_v<std::decay_t<F>, Sigmoid>) kind_ = Kind::Sigmoid;
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

std::ostream& operator<<(std::ostream& os, const Activation& a);

FLX_LEAF(Activation)
FLX_LEAF(Softmax)
FLX_LEAF(LogSoftmax)

}  // namespace flx
