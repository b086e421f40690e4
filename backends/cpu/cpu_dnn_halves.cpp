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

flx_mem HalfBuffers::in(flx_mem m, int64_t n) {
  if (!m.buf) return m;
  std::vector<float>& f = copies_.emplace_back(size_t(n));
  if (dtype_ == FLX_F16) widen(reinterpret_cast<const Half*>(addr(m)), f.data(), n);
  else widen(reinterpret_cast<const BHalf*>(addr(m)), f.data(), n);
  return flx_mem{reinterpret_cast<flx_buffer>(f.data()), 0};
}

flx_mem HalfBuffers::out(flx_mem m, int64_t n) {
  if (!m.buf) return m;
  std::vector<float>& f = copies_.emplace_back(size_t(n));
  outputs_.push_back({m, &f});
  return flx_mem{reinterpret_cast<flx_buffer>(f.data()), 0};
}

void HalfBuffers::finish() {
  for (const auto& [m, f] : outputs_) {
    if (dtype_ == FLX_F16) narrow(f->data(), reinterpret_cast<Half*>(addr(m)), int64_t(f->size()));
    else narrow(f->data(), reinterpret_cast<BHalf*>(addr(m)), int64_t(f->size()));
  }
}

}  // namespace flx::cpu_backend
