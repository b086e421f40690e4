// Float16 and BFloat16 in the CPU's dnn table: a call runs its Float32 path
// (oneDNN or the direct loops) on float copies of its half buffers, and
// each output is rounded once to the half type, to nearest even. Widening
// a half is exact, so a result is the Float32 computation's, rounded: what
// the OpenCL plugin computes too (its products run in float). Batch
// normalisation's statistics, scale and bias are Float32 already
// (param_dtype, cuDNN's rule) and pass as they are.
//
// The copies cost a pass over each buffer and its float's memory: a half
// convolution takes longer than a Float32 one. oneDNN's own bf16 kernels
// (on CPUs with AVX512-BF16 or AMX) would avoid that; they are a separate
// piece of work.
#include "cpu_dnn.hpp"

#include <algorithm>
#include <new>

namespace flx::cpu_backend {

namespace {

template <class T>
void widen(const T* src, float* dst, int64_t n) {
  parallel_for(n, parallel_grain, [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) dst[i] = float(src[i]);
  });
}
template <class T>
void narrow(const float* src, T* dst, int64_t n) {
  parallel_for(n, parallel_grain, [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) dst[i] = T(src[i]);
  });
}

}  // namespace

bool is_half_dtype(int32_t t) { return t == FLX_F16 || t == FLX_BF16; }

HalfBuffers::~HalfBuffers() {
  for (float* p : copies_) cpu_backend::free(nullptr, 0, reinterpret_cast<flx_buffer>(p), nullptr);
}

float* HalfBuffers::copy(int64_t n) {
  flx_buffer b = nullptr;
  if (alloc(nullptr, 0, size_t(n) * sizeof(float), nullptr, &b) != FLX_OK) throw std::bad_alloc();
  copies_.push_back(reinterpret_cast<float*>(b));
  return copies_.back();
}

flx_mem HalfBuffers::in(flx_mem m, int64_t n) {
  if (!m.buf) return m;
  float* f = copy(n);
  if (dtype_ == FLX_F16) widen(reinterpret_cast<const Half*>(addr(m)), f, n);
  else widen(reinterpret_cast<const BHalf*>(addr(m)), f, n);
  return flx_mem{reinterpret_cast<flx_buffer>(f), 0};
}

flx_mem HalfBuffers::out(flx_mem m, int64_t n) {
  if (!m.buf) return m;
  float* f = copy(n);
  std::fill_n(f, n, 0.0f);  // as before: a path may add into its output
  outputs_.emplace_back(m, f, n);
  return flx_mem{reinterpret_cast<flx_buffer>(f), 0};
}

void HalfBuffers::finish() {
  for (const auto& [m, f, n] : outputs_) {
    if (dtype_ == FLX_F16) narrow(f, reinterpret_cast<Half*>(addr(m)), n);
    else narrow(f, reinterpret_cast<BHalf*>(addr(m)), n);
  }
}

}  // namespace flx::cpu_backend
