// Loss functions with Flux's definitions (Flux.Losses, and NNlib's
// ctc_loss), prediction first, target second. The aggregate defaults to the
// mean, as in Flux: mse(ŷ, y, {.agg = Agg::sum}). With default options each
// returns a one-element (0-dim) tensor; Agg::none returns the unreduced
// losses (for your own weighting, Flux's `agg = x -> ...`).
//
// Flux's keywords become fields of an options struct: `agg`, `dims` (here
// `dim`, 0-based: Flux's dims = 1 is dim 0), `eps` (here `epsilon`; < 0
// means the prediction's element type's eps, Flux's epseltype), `delta`,
// `gamma`, `margin`, `smooth`, `beta`. LossOptions serves the losses whose
// keywords are among agg, dims and eps; the others have their own struct.
//
// Float16 and BFloat16 predictions (and targets) are widened to Float32
// first, and the loss is Float32, as PyTorch's autocast computes its losses:
// the sums over a batch keep Float32's precision, and a loss scaled for
// Float16 training (LossScaler: 2^16 times the loss) stays finite. The
// gradient reaching the prediction is of its own type. eps defaults to the
// prediction's own type's (Flux's epseltype).
//
// Prediction and target must have the same shape (DimensionMismatch, naming
// the loss and both shapes); a bad option is an ArgumentError naming the
// loss. Every loss but ctc_loss is built from differentiable ops, so it runs
// on every device.
#pragma once

#include "flx/export.hpp"

#include "flx/tensor.hpp"

namespace flx {

enum class Agg { mean, sum, none };

struct FLX_API LossOptions {
  Agg agg = Agg::mean;
  int dim = 0;           // class dim for the cross-entropies (Flux's dims=1)
  double epsilon = -1;   // < 0: eps of the prediction's element type
};

// ---- regression --------------------------------------------------------------
// agg((ŷ - y)^2)
FLX_API Tensor mse(const Tensor& yhat, const Tensor& y, const LossOptions& o = {});
// agg(|ŷ - y|)
FLX_API Tensor mae(const Tensor& yhat, const Tensor& y, const LossOptions& o = {});
// agg(log((ŷ + ϵ) / (y + ϵ))^2)
FLX_API Tensor msle(const Tensor& yhat, const Tensor& y, const LossOptions& o = {});

struct FLX_API HuberOptions {
  Agg agg = Agg::mean;
  double delta = 1;  // δ > 0
};
// agg of 0.5 |ŷ - y|^2 where |ŷ - y| < δ, else δ (|ŷ - y| - 0.5 δ)
FLX_API Tensor huber_loss(const Tensor& yhat, const Tensor& y, const HuberOptions& o = {});

// agg(ŷ - y log(ŷ)): ŷ is the Poisson rate itself (PyTorch's
// poisson_nll_loss(log_input = false) without its eps).
FLX_API Tensor poisson_loss(const Tensor& yhat, const Tensor& y, const LossOptions& o = {});

// ---- classification ----------------------------------------------------------
// agg(-sum(y log(ŷ + ϵ); dim))
FLX_API Tensor crossentropy(const Tensor& yhat, const Tensor& y, const LossOptions& o = {});
// agg(-sum(y logsoftmax(ŷ; dim); dim))
FLX_API Tensor logitcrossentropy(const Tensor& yhat, const Tensor& y, const LossOptions& o = {});
// agg(-y log(ŷ + ϵ) - (1 - y) log(1 - ŷ + ϵ))
FLX_API Tensor binarycrossentropy(const Tensor& yhat, const Tensor& y, const LossOptions& o = {});
// binarycrossentropy(σ(ŷ), y) without computing σ: agg((1 - y) ŷ - logσ(ŷ)),
// with -logσ(ŷ) = softplus(-ŷ) (never log of a rounded σ, so no -Inf for
// large |ŷ|). The options' dim and epsilon are not used.
FLX_API Tensor logitbinarycrossentropy(const Tensor& yhat, const Tensor& y, const LossOptions& o = {});
// KL(y ‖ ŷ): agg(sum(y log y; dim)) + crossentropy(ŷ, y, o), y log y = 0 at
// y = 0 (Flux's, so ϵ enters as in crossentropy; ŷ, y probabilities along dim).
FLX_API Tensor kldivergence(const Tensor& yhat, const Tensor& y, const LossOptions& o = {});

struct FLX_API LabelSmoothingOptions {
  int dim = 0;          // the one-hot dim (Flux's dims = 1)
  bool binary = false;  // y holds binary labels, one number each (Flux's dims = 0)
};
// Smoothed labels (not a loss): y (1 - α) + α / size(y, dim), or with
// .binary, y (1 - α) + α / 2. 0 < α < 1. Bool and integer labels give
// Float32; floating labels keep their type.
FLX_API Tensor label_smoothing(const Tensor& y, double alpha, const LabelSmoothingOptions& o = {});

// ---- margins -----------------------------------------------------------------
// agg(max(0, 1 - ŷ y)), y in {-1, 1}
FLX_API Tensor hinge_loss(const Tensor& yhat, const Tensor& y, const LossOptions& o = {});
// agg(max(0, 1 - ŷ y)^2)
FLX_API Tensor squared_hinge_loss(const Tensor& yhat, const Tensor& y, const LossOptions& o = {});

struct FLX_API SiameseContrastiveOptions {
  Agg agg = Agg::mean;
  double margin = 1;  // >= 0
};
// agg((1 - y) ŷ^2 + y max(0, margin - ŷ)^2): ŷ a distance, y = 1 for a
// dissimilar pair.
FLX_API Tensor siamese_contrastive_loss(const Tensor& yhat, const Tensor& y, const SiameseContrastiveOptions& o = {});

// ---- segmentation (whole-tensor losses: no agg, as in Flux) ------------------
struct FLX_API DiceOptions {
  double smooth = 1;
};
// 1 - (2 sum(y ŷ) + s) / (sum(y^2) + sum(ŷ^2) + s)
FLX_API Tensor dice_coeff_loss(const Tensor& yhat, const Tensor& y, const DiceOptions& o = {});

struct FLX_API TverskyOptions {
  double beta = 0.7;
};
// 1 - (sum(y ŷ) + 1) / (sum(y ŷ + β (1 - y) ŷ + (1 - β) y (1 - ŷ)) + 1)
// (Flux's code: β weighs the false positives (1 - y) ŷ, 1 - β the false
// negatives).
FLX_API Tensor tversky_loss(const Tensor& yhat, const Tensor& y, const TverskyOptions& o = {});

// ---- focal losses (ŷ probabilities, e.g. softmax or σ output) ----------------
struct FLX_API BinaryFocalOptions {
  Agg agg = Agg::mean;
  double gamma = 2;
  double epsilon = -1;  // < 0: eps of the prediction's element type
};
// p_t = y (ŷ + ϵ) + (1 - y) (1 - ŷ - ϵ); agg(-max(1 - p_t, 0)^γ log(p_t))
// (clamped: an exactly right ŷ makes 1 - p_t = -ϵ). γ = 0 is
// binarycrossentropy.
FLX_API Tensor binary_focal_loss(const Tensor& yhat, const Tensor& y, const BinaryFocalOptions& o = {});

struct FLX_API FocalOptions {
  Agg agg = Agg::mean;
  int dim = 0;  // the class dim (Flux's dims = 1)
  double gamma = 2;
  double epsilon = -1;
};
// agg(sum(-y max(1 - ŷ - ϵ, 0)^γ log(ŷ + ϵ); dim)). γ = 0 is crossentropy.
FLX_API Tensor focal_loss(const Tensor& yhat, const Tensor& y, const FocalOptions& o = {});

// ---- sequences ---------------------------------------------------------------
// NNlib's ctc_loss(ŷ, y): the connectionist temporal classification loss of
// one sequence, -log p(y | ŷ), summed over every alignment (not divided by
// the label count). ŷ: (classes, time) unnormalised scores (logsoftmax is
// applied over dim 0 inside, as NNlib does); y: a 1-d tensor of integer
// labels, 0-based. The blank is the last class, classes - 1 (NNlib's blank
// is size(ŷ, 1)), so labels lie in [0, classes - 2]; y may be empty. A
// label sequence that no alignment of ŷ's length can produce (too long, or
// too many repeats) has the loss +Inf, and a zero gradient. Returns a 0-dim
// tensor (Float32 for half ŷ); its gradient is softmax(ŷ) - the posterior
// of each class at each step. Runs on the CPU only: on another device it
// raises NotImplemented (move ŷ to the CPU: ctc_loss(yhat.to(Device::cpu()), y)).
FLX_API Tensor ctc_loss(const Tensor& yhat, const Tensor& y);

}  // namespace flx
