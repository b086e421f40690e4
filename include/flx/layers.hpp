// Layers, one family a header as Flux keeps them apart (basic.jl, conv.jl,
// normalise.jl, recurrent.jl, attention.jl): include this for all of them.
#pragma once

#include "flx/layers/basic.hpp"
#include "flx/layers/conv.hpp"
#include "flx/layers/embedding.hpp"
#include "flx/layers/normalise.hpp"
#include "flx/layers/recurrent.hpp"
#include "flx/layers/attention.hpp"
