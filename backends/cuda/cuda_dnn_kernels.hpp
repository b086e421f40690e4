// The dnn table's own kernels (cuda_dnn_kernels.cu), for what cuDNN does
// not do: per-side padding (cuDNN pads both sides of a dim alike), max
// pooling (flx's window rule, flx/backend_window.h), mean pooling where
// cuDNN's padding rules do not hold, and the running statistics of a
// one-element batch norm. Host launchers; each returns an flx_status.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

#ifdef __CUDACC__
#define FLX_DNN_HD __host__ __device__
#else
#define FLX_DNN_HD
#endif

namespace flx_cuda {

// A (s0, s1, s2, nc) tensor, s0 fastest (the ABI's spatial dims, unused
// ones 1; nc = channels * batch).
struct DnnBox {
  int64_t size[3];
  int64_t nc;
  FLX_DNN_HD int64_t numel() const { return size[0] * size[1] * size[2] * nc; }
};

// dst (of box `padded`) = src (of box `inner`) placed at offset lo in each
// spatial dim, zeros (all bits 0: +0.0 in every floating dtype) elsewhere.
int dnn_pad(cudaStream_t st, const void* src, const DnnBox& inner, void* dst, const DnnBox& padded,
            const int64_t lo[3], size_t elem_bytes);
// dst (of box `inner`) = the part of src (of box `padded`) at offset lo.
int dnn_crop(cudaStream_t st, const void* src, const DnnBox& padded, void* dst, const DnnBox& inner,
             const int64_t lo[3], size_t elem_bytes);

// Pooling as backend.h defines it, directly: any padding on either side
// (padding never wins a max; a mean divides by the full window), a window
// wholly in padding included. backward writes dx from x and dy (the max's
// argument recomputed: the first largest element of each window in window
// order, dim 0 fastest), gathering per element of dx, so deterministic.
struct DnnPoolGeom {
  DnnBox in, out;
  int64_t window[3], stride[3], lo[3];
  bool max;
};
int dnn_pool_direct(cudaStream_t st, int32_t dtype, const DnnPoolGeom& g, const void* x, void* y);
int dnn_pool_direct_backward(cudaStream_t st, int32_t dtype, const DnnPoolGeom& g, const void* x, const void* dy,
                             void* dx);

// db[c] = sum of dy (spatial, channels, batch) over all but c, for the
// dtypes cuDNN's cudnnConvolutionBackwardBias refuses (BFloat16 in cuDNN 9.19).
int dnn_bias_grad(cudaStream_t st, int32_t dtype, const void* dy, void* db, int64_t spatial, int64_t channels,
                  int64_t batch);

// The running statistics of a training batch norm over one element per
// channel (spatial * batch = 1), which cuDNN would move with the unbiased
// variance m / (m - 1) = 1 / 0: mean = x (dtype), var = 0, so
// running_mean = (1 - momentum) running_mean + momentum x and
// running_var = (1 - momentum) running_var (backend.h: m = 1 keeps var).
int dnn_bn_running_single(cudaStream_t st, int32_t dtype, int32_t param_dtype, int64_t channels, double momentum,
                          const void* x, void* running_mean, void* running_var);

// A recurrent layer's parameters between flx's layout (backend.h's
// flx_rnn_desc: wi (G H, input) and wh (G H, H) column-major, the G gates
// stacked, b G H elements, a GRU's bh H) and cuDNN's weight space (a
// row-major H x input or H x H matrix and an H bias a gate, where
// cudnnGetRNNWeightParams says): element offsets into the space of gate g's
// input matrix (w_at[g]), recurrent matrix (w_at[G + g]) and input bias
// (b_at[g]), and of the candidate's recurrent bias (bh_at, a GRU's).
struct DnnRnnPack {
  int64_t gates, hidden, input;
  int64_t w_at[8], b_at[4], bh_at;
};
// to_space: wi, wh, b and bh (b and bh may be null: none) into space;
// otherwise the gradients in space out to wi, wh, b and bh, each skipped
// when null.
int dnn_rnn_pack(cudaStream_t st, size_t elem_bytes, const DnnRnnPack& p, void* wi, void* wh, void* b, void* bh,
                 void* space, bool to_space);
// n int32 values `value` at dst (cuDNN's device copy of the sequence lengths).
int dnn_fill_i32(cudaStream_t st, int32_t* dst, int64_t n, int32_t value);

}  // namespace flx_cuda
