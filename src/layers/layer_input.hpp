// What a layer's forward pass checks before anything else, written once for
// every layer of src/layers: errors name the layer as it prints
// (detail::layer_string, include/flx/layers/show.hpp), "Dense(3 => 4): the
// input is an undefined tensor".
#pragma once

#include <initializer_list>
#include <string>
#include <utility>

#include "flx/error.hpp"
#include "flx/layers/show.hpp"
#include "flx/tensor.hpp"

namespace flx::detail {

// One of the layer's arrays, with the words that name it in an error
// ("the scale (γ)").
using NamedArray = std::pair<const char*, const Tensor*>;

struct LayerInput {
  bool floating = false;                   // the input must be of a floating type
  std::initializer_list<NamedArray> arrays = {};  // each, where defined, on the input's device
};

// Checks x as the layer's input: defined (ArgumentError), floating where
// asked (TypeError), on the device of each of the layer's arrays
// (DeviceMismatch). The layer's name is formatted only for an error (a
// Dense called a million times pays for no string).
template <class L>
void check_layer_input(const L& layer, const Tensor& x, LayerInput in = {}) {
  FLX_CHECK(x.defined(), ArgumentError, layer_string(layer), ": the input is an undefined tensor");
  FLX_CHECK(!in.floating || is_floating(x.dtype()), TypeError, layer_string(layer), ": expected a floating input; got ",
            x.dtype());
  for (const auto& [what, p] : in.arrays)
    FLX_CHECK(!p->defined() || p->device() == x.device(), DeviceMismatch, layer_string(layer), ": ", what, " is on ",
              p->device(), " but the input is on ", x.device(), "; move both to one device (model | device)");
}

}  // namespace flx::detail
