// The CPU backend's "dnn" table (backend.h, minor 5): convolution, pooling
// and batch normalisation (recurrent layers and attention: below). Float32 convolutions and mean pooling run through
// oneDNN (cpu_dnn_engine.hpp, cpu_dnn_conv.cpp, cpu_dnn_pool.cpp); batch
// normalisation, max pooling, Float64 (which oneDNN lacks) and any case
// oneDNN refuses run as direct loops on flx's thread pool
// (cpu_dnn_direct.cpp). This header holds what both share: the
// descriptors' geometry in one form, checked once.
#pragma once

#include <cstdint>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "cpu_common.hpp"

namespace flx::cpu_backend {

// A window geometry with three spatial dims always (dims past nspatial are
// size 1, kernel 1, stride 1, dilation 1, no padding), listed dim 0 (W, the
// fastest) first as in the descriptors. Pooling is the case groups = 1,
// cin = cout = channels, dilation 1.
struct DnnGeometry {
  int nspatial = 0;
  int64_t batch = 0, cin = 0, cout = 0, groups = 1;
  int64_t in[3]{1, 1, 1}, out[3]{1, 1, 1}, kernel[3]{1, 1, 1};
  int64_t stride[3]{1, 1, 1}, dilation[3]{1, 1, 1}, pad_lo[3]{}, pad_hi[3]{};

  int64_t in_numel() const { return in[0] * in[1] * in[2]; }
  int64_t out_numel() const { return out[0] * out[1] * out[2]; }
  int64_t kernel_numel() const { return kernel[0] * kernel[1] * kernel[2]; }
};

// The geometry of a descriptor, checked: FLX_OK, or the status and message
// (through fail) naming `call`, what was expected, what was found and what
// to do. For the conv and pool descriptors: struct_size, nspatial, positive
// sizes, channel counts that are multiples of groups, pads >= 0, and output
// sizes that follow backend.h's rule.
int conv_geometry(const char* call, const flx_conv_desc* d, DnnGeometry* g);
int pool_geometry(const char* call, const flx_pool_desc* d, DnnGeometry* g);
// The batchnorm descriptor's struct_size, sizes, epsilon and param_dtype.
int check_batchnorm(const char* call, const flx_batchnorm_desc* d);

// FLX_OK for the floating types; FLX_ERR_INVALID_ARGUMENT otherwise.
int check_dnn_dtype(const char* call, int32_t dtype);

// Float16 and BFloat16 run through the Float32 paths (cpu_dnn_halves.cpp):
// a call swaps each half buffer of its descriptor for a float copy (in: the
// values widened; out: rounded into the half buffer by finish()), runs the
// Float32 path, then calls finish(). A null buffer stays null.
bool is_half_dtype(int32_t t);
class HalfBuffers {
 public:
  explicit HalfBuffers(int32_t dtype) : dtype_(dtype) {}
  HalfBuffers(const HalfBuffers&) = delete;
  HalfBuffers& operator=(const HalfBuffers&) = delete;
  ~HalfBuffers();
  flx_mem in(flx_mem m, int64_t n);   // a float copy of n elements of m
  flx_mem out(flx_mem m, int64_t n);  // a float buffer for n elements of m, zeros
  void finish();                      // each out buffer rounded into its m

 private:
  // The copies come from the backend's own allocator, whose cache keeps
  // large blocks for reuse: fresh memory each call (a std::vector) spent a
  // quarter of a BFloat16 CNN step in page faults and zeroing.
  float* copy(int64_t n);
  int32_t dtype_;
  std::vector<float*> copies_;
  std::vector<std::tuple<flx_mem, const float*, int64_t>> outputs_;
};
// FLX_ERR_INVALID_ARGUMENT naming `call` and `what` when m has no buffer.
int need_buffer(const char* call, const char* what, flx_mem m);

// The direct loops (cpu_dnn_direct.cpp), for T = float and double, on flx's
// thread pool; the same semantics as the oneDNN paths. Pointers address
// the descriptor's tensors (bias, db: nullptr for none).
template <class T>
void direct_conv_forward(const DnnGeometry& g, const T* x, const T* w, const T* b, T* y);
template <class T>
void direct_conv_backward_data(const DnnGeometry& g, const T* dy, const T* w, T* dx);
template <class T>
void direct_conv_backward_filter(const DnnGeometry& g, const T* x, const T* dy, T* dw, T* db);
template <class T>
void direct_pool_forward(const DnnGeometry& g, bool max, const T* x, T* y);
template <class T>
void direct_pool_backward(const DnnGeometry& g, bool max, const T* x, const T* dy, T* dx);
// Max pooling of Half or BHalf storage without widened copies where that
// gives the copies' bits (cpu_dnn_direct.cpp says where); false elsewhere.
// out is y (forward) or dx (backward); dy is unused forward.
template <class T>
bool half_max_pool_direct(const DnnGeometry& g, bool backward, const T* x, const T* dy, T* out);
// Batch normalisation of data of type T with statistics and parameters of
// type P (T itself, or float for Float16 and BFloat16 data: backend.h's
// param_dtype), one channel to a thread. scale, bias, running_*: nullptr
// for none. The halves compute as the Float32 loops do on widened copies
// and round each output once: the same bits.
template <class T, class P = T>
void direct_batchnorm_forward(const flx_batchnorm_desc& d, const T* x, T* y, const P* scale, const P* bias,
                              P* running_mean, P* running_var, P* saved_mean, P* saved_invstd);
template <class T, class P = T>
void direct_batchnorm_backward(const flx_batchnorm_desc& d, const T* x, const T* dy, const P* scale,
                               const P* saved_mean, const P* saved_invstd, T* dx, P* dscale, P* dbias);

// The calls of the dnn table (cpu_dnn_conv.cpp, cpu_dnn_pool.cpp,
// cpu_dnn_batchnorm.cpp), under their fields' names.
FLX_DECLARE_REQUIRED_CALLS(FLX_DNN_CALLS, flx_dnn_table)
FLX_DECLARE_CALL(flx_dnn_table, conv_workspace)
FLX_DECLARE_CALL(flx_dnn_table, pool_reserve_size)
// Recurrent layers (minor 6, optional): Float32 LSTMs through oneDNN
// (cpu_dnn_rnn.cpp); anything else FLX_ERR_UNSUPPORTED.
FLX_DECLARE_CALL(flx_dnn_table, rnn_reserve_size)
FLX_DECLARE_CALL(flx_dnn_table, rnn_forward)
FLX_DECLARE_CALL(flx_dnn_table, rnn_backward)
// Attention without its scores (minor 7, optional): tiles of queries × keys
// with an online softmax on OpenBLAS, every floating dtype, no workspace
// (cpu_dnn_attention.cpp).
FLX_DECLARE_CALL(flx_dnn_table, attention_forward)
FLX_DECLARE_CALL(flx_dnn_table, attention_backward)
// Group normalisation (minor 10, optional): Float32 and Float64 loops
// (cpu_dnn_groupnorm.cpp); other dtypes FLX_ERR_UNSUPPORTED.
FLX_DECLARE_CALL(flx_dnn_table, groupnorm_forward)
FLX_DECLARE_CALL(flx_dnn_table, groupnorm_backward)
// Both backward passes of a convolution (minor 13, optional): oneDNN's two
// primitives piece by piece, each piece's dy reordered once for both
// (cpu_dnn_conv.cpp).
FLX_DECLARE_CALL(flx_dnn_table, conv_backward)

}  // namespace flx::cpu_backend
