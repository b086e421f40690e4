// flx-train's --precision: the element type of each choice, and a
// checkpoint of one precision as a run of another takes it.
//
// A run in bf16 or f16 keeps MixedPrecision(Float32, Adam)'s state: per
// parameter P, P.state.t0 (the Float32 copy) and P.state.child0.* (Adam's
// state for it); a run in f32 keeps Adam's, P.state.*. Between the two the
// inner state moves as it is, and the Float32 copy is either made from the
// f32 run's parameter (exact) or, going to f32, becomes the parameter (more
// precise than the low-precision model's value). The model's tensors
// convert as they load (loadmodel converts floating types).
#pragma once

#include <flx/flx.hpp>

#include <string>

namespace flx_train {

// f32, bf16, f16 as Float32, BFloat16, Float16.
flx::DType precision_dtype(const std::string& precision);

// The model and optimiser parts of a checkpoint written with
// MixedPrecision (saved_mixed) or without, as `opt` takes them (with or
// without, as the rule it was set up with). Unchanged when both agree.
struct RestorableStates {
  flx::State model, optimiser;
};
RestorableStates across_precisions(const flx::State& model, const flx::State& optimiser, bool saved_mixed,
                                   const flx::OptState& opt);

// Whether an optimiser state's rule (as OptState::rule().state_rule(), or
// as a checkpoint's metadata names it) is a MixedPrecision.
bool is_mixed(const flx::OptState& opt);
bool is_mixed(const flx::State& saved_optimiser);

}  // namespace flx_train
