// flx: Flux-style deep learning for C++. Include this one header.
#pragma once

#include "flx/activations.hpp"
#include "flx/autodiff.hpp"
#include "flx/backend.h"
#include "flx/device.hpp"
#include "flx/devices.hpp"
#include "flx/dtype.hpp"
#include "flx/error.hpp"
#include "flx/functor.hpp"
#include "flx/layers.hpp"
#include "flx/losses.hpp"
#include "flx/movement.hpp"
#include "flx/ops.hpp"
#include "flx/optimisers.hpp"
#include "flx/shape.hpp"
#include "flx/tensor.hpp"
#include "flx/version.hpp"
