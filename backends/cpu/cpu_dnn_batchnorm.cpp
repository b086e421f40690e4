// Batch normalisation (the dnn table's batchnorm_*) as flx's own loops
// (cpu_dnn_direct.cpp), Float32 and Float64: one channel to a thread, its
// sums in one order, so the same bits at any thread count and load. oneDNN's
// batch normalisation splits a channel's sums across its threads (its bits
// follow the thread count), and on flx's plain layout (its reference-like
// ncsp kernels) it was no faster than these loops in flx-train's CNN (a
// training step at batch 16 and 128, 2026-11). Float16 and BFloat16 data
// (with Float32 statistics and parameters) run the same loops on the halves
// themselves, each value widened as it is read: sums in double, one
// rounding per output, the bits of the Float32 loops on widened copies
// (which they ran on before, at a fifth of a BFloat16 CNN step in the
// copies' widening and rounding).
#include <string>
#include <utility>

#include "cpu_dnn.hpp"
#include "cpu_dnn_engine.hpp"

namespace flx::cpu_backend {
namespace {

using onednn::guarded;  // what the loops throw (out of memory) as a status

}  // namespace

int batchnorm_forward(void*, int, const flx_batchnorm_desc* d, flx_stream) {
  const char* call = "batchnorm_forward";
  if (int st = check_batchnorm(call, d)) return st;
  for (auto [what, m] : {std::pair{"x", d->x}, {"y", d->y}})
    if (int st = need_buffer(call, what, m)) return st;
  if (!d->training)
    for (auto [what, m] : {std::pair{"running_mean", d->running_mean}, {"running_var", d->running_var}})
      if (int st = need_buffer(call, what, m)) return st;
  if (d->training && bool(d->running_mean.buf) != bool(d->running_var.buf))
    return fail(FLX_ERR_INVALID_ARGUMENT, std::string(call) + ": running_mean and running_var go together, but " +
                                              "only one has a buffer; give both (tracked statistics) or neither");
  return guarded(call, [&] {
    auto direct = [&](auto tag, auto param_tag) {
      using T = decltype(tag);
      using P = decltype(param_tag);
      direct_batchnorm_forward<T, P>(*d, ptr_or_null<T>(d->x), ptr_or_null<T>(d->y), ptr_or_null<P>(d->scale),
                                     ptr_or_null<P>(d->bias), ptr_or_null<P>(d->running_mean),
                                     ptr_or_null<P>(d->running_var), ptr_or_null<P>(d->saved_mean),
                                     ptr_or_null<P>(d->saved_invstd));
    };
    switch (d->dtype) {
      case FLX_F32: direct(float{}, float{}); break;
      case FLX_F64: direct(double{}, double{}); break;
      case FLX_F16: direct(Half{}, float{}); break;
      default: direct(BHalf{}, float{}); break;  // check_batchnorm admits the floating dtypes only
    }
    return FLX_OK;
  });
}

int batchnorm_backward(void*, int, const flx_batchnorm_desc* d, flx_stream) {
  const char* call = "batchnorm_backward";
  if (int st = check_batchnorm(call, d)) return st;
  for (auto [what, m] : {std::pair{"x", d->x},
                         {"dy", d->dy},
                         {"dx", d->dx},
                         {"saved_mean", d->saved_mean},
                         {"saved_invstd", d->saved_invstd}})
    if (int st = need_buffer(call, what, m)) return st;
  return guarded(call, [&] {
    auto direct = [&](auto tag, auto param_tag) {
      using T = decltype(tag);
      using P = decltype(param_tag);
      direct_batchnorm_backward<T, P>(*d, ptr_or_null<T>(d->x), ptr_or_null<T>(d->dy), ptr_or_null<P>(d->scale),
                                      ptr_or_null<P>(d->saved_mean), ptr_or_null<P>(d->saved_invstd),
                                      ptr_or_null<T>(d->dx), ptr_or_null<P>(d->dscale), ptr_or_null<P>(d->dbias));
    };
    switch (d->dtype) {
      case FLX_F32: direct(float{}, float{}); break;
      case FLX_F64: direct(double{}, double{}); break;
      case FLX_F16: direct(Half{}, float{}); break;
      default: direct(BHalf{}, float{}); break;
    }
    return FLX_OK;
  });
}

}  // namespace flx::cpu_backend
