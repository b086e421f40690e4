// Batch normalisation (the dnn table's batchnorm_*) as flx's own loops
// (cpu_dnn_direct.cpp), Float32 and Float64: one channel to a thread, its
// sums in one order, so the same bits at any thread count and load. oneDNN's
// batch normalisation splits a channel's sums across its threads (its bits
// follow the thread count), and on flx's plain layout (its reference-like
// ncsp kernels) it was no faster than these loops in flx-train's CNN (a
// training step at batch 16 and 128, 2026-11). Float16 and BFloat16 data
// (with Float32 statistics and parameters) run the Float32 loops on float
// copies (cpu_dnn_halves.cpp): sums in double, one rounding per output.
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
  if (is_half_dtype(d->dtype))
    return guarded(call, [&] {
      const int64_t n = d->spatial * d->channels * d->batch;
      HalfBuffers h(d->dtype);
      flx_batchnorm_desc f = *d;
      f.dtype = FLX_F32;
      f.x = h.in(d->x, n);
      f.y = h.out(d->y, n);
      const int st = batchnorm_forward(nullptr, 0, &f, nullptr);
      if (st == FLX_OK) h.finish();
      return st;
    });
  return guarded(call, [&] {
    auto direct = [&](auto tag) {
      using T = decltype(tag);
      direct_batchnorm_forward<T>(*d, ptr_or_null<T>(d->x), ptr_or_null<T>(d->y), ptr_or_null<T>(d->scale),
                                  ptr_or_null<T>(d->bias), ptr_or_null<T>(d->running_mean),
                                  ptr_or_null<T>(d->running_var), ptr_or_null<T>(d->saved_mean),
                                  ptr_or_null<T>(d->saved_invstd));
    };
    if (d->dtype == FLX_F32)
      direct(float{});
    else
      direct(double{});
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
  if (is_half_dtype(d->dtype))
    return guarded(call, [&] {
      const int64_t n = d->spatial * d->channels * d->batch;
      HalfBuffers h(d->dtype);
      flx_batchnorm_desc f = *d;
      f.dtype = FLX_F32;
      f.x = h.in(d->x, n);
      f.dy = h.in(d->dy, n);
      f.dx = h.out(d->dx, n);
      const int st = batchnorm_backward(nullptr, 0, &f, nullptr);
      if (st == FLX_OK) h.finish();
      return st;
    });
  return guarded(call, [&] {
    auto direct = [&](auto tag) {
      using T = decltype(tag);
      direct_batchnorm_backward<T>(*d, ptr_or_null<T>(d->x), ptr_or_null<T>(d->dy), ptr_or_null<T>(d->scale),
                                   ptr_or_null<T>(d->saved_mean), ptr_or_null<T>(d->saved_invstd),
                                   ptr_or_null<T>(d->dx), ptr_or_null<T>(d->dscale), ptr_or_null<T>(d->dbias));
    };
    if (d->dtype == FLX_F32)
      direct(float{});
    else
      direct(double{});
    return FLX_OK;
  });
}

}  // namespace flx::cpu_backend
