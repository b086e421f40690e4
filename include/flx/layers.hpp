// Layers, one family a header as Flux keeps them apart (basic.jl, conv.jl,
// normalise.jl, upsample.jl, recurrent.jl, attention.jl): include this for all of them.
// Their printing is in show.hpp, their shape rules' entry point
// (outputsize) in outputsize.hpp; docs/layers.md says how to add a layer.
#pragma once

#include "flx/layers/show.hpp"
#include "flx/layers/outputsize.hpp"
#include "flx/layers/basic.hpp"
#include "flx/layers/containers.hpp"
#include "flx/layers/conv.hpp"
#include "flx/layers/embedding.hpp"
#include "flx/layers/normalise.hpp"
#include "flx/layers/upsample.hpp"
#include "flx/layers/recurrent.hpp"
#include "flx/layers/attention.hpp"
#include "flx/layers/weightnorm.hpp"
