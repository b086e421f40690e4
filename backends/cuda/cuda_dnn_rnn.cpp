// Recurrent layers on cuDNN's RNN (the dnn table's rnn_*, ABI minor 6; GRUs
// and plain tanh/relu RNNs minor 7): Float32 and Float64 layers through
// cudnnRNNForward, cudnnRNNBackwardData_v8 and cudnnRNNBackwardWeights_v8,
// what PyTorch's nn.LSTM, nn.GRU and nn.RNN run on a GPU. cuDNN's GRU is PyTorch's (the
// candidate's recurrent product and bias inside the reset gate), which is
// flx's with or without that bias (bh): with it, cuDNN's recurrent biases
// of the reset and update gates stay zero. flx's sequences (features, time, batch) are
// cuDNN's batch-major unpacked layout and its states (hidden, batch) cuDNN's
// (layers, batch, hidden), so x, y and the states are used in place; the
// weights are packed into cuDNN's weight space by a kernel at every forward
// (G H (input + H + 1) elements, small beside the sequence's work), and
// their gradients unpacked the same way. Float16 and BFloat16 are declined
// (FLX_ERR_UNSUPPORTED): cuDNN would round the gates differently from the
// CPU's cell, and flx's own kernels run them (src/ops/recurrent_scan.cpp).
//
// The reserve of a training forward holds the packed weights, the device
// copy of the sequence lengths and cuDNN's reserve space, all three read by
// the backward; workspaces and the weight gradients' space are taken from
// the device's pool for the call and given back in stream order.
#include <string>
#include <vector>

#include "cuda_dnn_common.hpp"

namespace flx_cuda {
namespace {

using RnnDesc = CudnnDesc<cudnnRNNDescriptor_t, &CudnnApi::create_rnn, &CudnnApi::destroy_rnn>;
using RnnDataDesc = CudnnDesc<cudnnRNNDataDescriptor_t, &CudnnApi::create_rnn_data, &CudnnApi::destroy_rnn_data>;
using DropoutDesc = CudnnDesc<cudnnDropoutDescriptor_t, &CudnnApi::create_dropout, &CudnnApi::destroy_dropout>;

// Device memory from the pool for one call, freed stream-ordered with it.
struct Temp {
  int dev = 0;
  flx_stream s = nullptr;
  flx_buffer buf = nullptr;
  Temp(int d, flx_stream st) : dev(d), s(st) {}
  Temp(const Temp&) = delete;
  Temp& operator=(const Temp&) = delete;
  ~Temp() {
    if (buf) flx_cuda::free(nullptr, dev, buf, s);
  }
  int get(size_t bytes) { return bytes ? alloc(nullptr, dev, bytes, s, &buf) : FLX_OK; }
  char* ptr() const { return reinterpret_cast<char*>(buf); }
};

// One call's descriptors and the sizes cuDNN gives for them.
struct Rnn {
  DropoutDesc drop;
  RnnDesc rnn;
  RnnDataDesc x, y;
  TensorDesc h, w, b;  // the states; the weight params' matrix and bias
  cudnnDataType_t type{};
  size_t elem = 0, weight_bytes = 0, work_bytes = 0, reserve_bytes = 0;
  int64_t seq_at = 0, cudnn_reserve_at = 0;  // in a training reserve, after the weights
  uint64_t total_reserve = 0;
  bool double_bias = false;  // a GRU's bh: cuDNN's recurrent biases too (the others zero)
};

bool gru(const flx_rnn_desc* d) { return d->cell == FLX_RNN_GRU; }
int64_t gates(const flx_rnn_desc* d) {
  switch (d->cell) {
    case FLX_RNN_LSTM: return 4;
    case FLX_RNN_GRU: return 3;
  }
  return 1;  // tanh, relu
}
cudnnRNNMode_t cudnn_cell(const flx_rnn_desc* d) {
  switch (d->cell) {
    case FLX_RNN_LSTM: return CUDNN_LSTM;
    case FLX_RNN_GRU: return CUDNN_GRU;
    case FLX_RNN_RELU: return CUDNN_RNN_RELU;
  }
  return CUDNN_RNN_TANH;
}
// A GRU's candidate recurrent bias, when the descriptor has the field and it is set.
flx_mem bh_of(const flx_rnn_desc* d) { return gru(d) && FLX_DESC_HAS(d, flx_rnn_desc, bh) ? d->bh : flx_mem{}; }
flx_mem dbh_of(const flx_rnn_desc* d) { return gru(d) && FLX_DESC_HAS(d, flx_rnn_desc, dbh) ? d->dbh : flx_mem{}; }

int check_desc(const char* what, const flx_rnn_desc* d) {
  if (!d) return fail(FLX_ERR_INVALID_ARGUMENT, std::string(what) + ": the descriptor is a null pointer");
  if (d->cell != FLX_RNN_LSTM && d->cell != FLX_RNN_GRU && d->cell != FLX_RNN_TANH && d->cell != FLX_RNN_RELU)
    return fail(FLX_ERR_UNSUPPORTED, std::string(what) + ": cell code " + std::to_string(d->cell) +
                                         "; the CUDA backend runs LSTMs, GRUs and tanh and relu RNNs on cuDNN");
  if (d->dtype != FLX_F32 && d->dtype != FLX_F64)
    return fail(FLX_ERR_UNSUPPORTED, std::string(what) + ": " + dtype_name(d->dtype) +
                                         " recurrent layers run on flx's kernels (cuDNN's only for Float32 and Float64)");
  for (int64_t v : {d->input, d->hidden, d->batch, d->time})
    if (v < 1 || !fits_int(v))
      return dnn_invalid(what, "a size", v, "input, hidden, batch and time must lie in [1, 2^31)");
  if (!fits_int(gates(d) * d->hidden * (d->input + d->hidden + 1)))
    return fail(FLX_ERR_UNSUPPORTED, std::string(what) + ": more than 2^31 weights");
  return FLX_OK;
}

int describe(const DnnCall& c, const flx_rnn_desc* d, bool training, Rnn* r) {
  const CudnnApi& api = *c.api;
  if (!cudnn_dtype(d->dtype, &r->type)) return dnn_invalid("rnn", "dtype", d->dtype, "not a floating dtype");
  r->elem = dnn_dtype_bytes(d->dtype);
  const int in = int(d->input), H = int(d->hidden), B = int(d->batch), T = int(d->time);
  if (int e = r->drop.create(api, "cudnnCreateDropoutDescriptor")) return e;
  if (cudnnStatus_t s = api.set_dropout(r->drop.get(), c.handle, 0.0f, nullptr, 0, 0); s != CUDNN_STATUS_SUCCESS)
    return cudnn_fail(api, s, "cudnnSetDropoutDescriptor");
  if (int e = r->rnn.create(api, "cudnnCreateRNNDescriptor")) return e;
  const bool f64 = d->dtype == FLX_F64;
  const cudnnMathType_t math = f64 || allow_tf32() ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH;  // FMA: no TF32
  r->double_bias = bh_of(d).buf != nullptr;
  const cudnnRNNBiasMode_t bias = r->double_bias ? CUDNN_RNN_DOUBLE_BIAS
                                  : d->b.buf     ? CUDNN_RNN_SINGLE_INP_BIAS
                                                 : CUDNN_RNN_NO_BIAS;
  if (cudnnStatus_t s = api.set_rnn(r->rnn.get(), CUDNN_RNN_ALGO_STANDARD, cudnn_cell(d), bias,
                                    CUDNN_UNIDIRECTIONAL,
                                    CUDNN_LINEAR_INPUT, r->type, f64 ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT, math, in,
                                    H, H, 1, r->drop.get(), CUDNN_RNN_PADDED_IO_ENABLED);
      s != CUDNN_STATUS_SUCCESS)
    return cudnn_fail(api, s, "cudnnSetRNNDescriptor_v8");
  const std::vector<int> lengths(size_t(B), T);
  for (auto [desc, width] : {std::pair{&r->x, in}, std::pair{&r->y, H}}) {
    if (int e = desc->create(api, "cudnnCreateRNNDataDescriptor")) return e;
    if (cudnnStatus_t s = api.set_rnn_data(desc->get(), r->type, CUDNN_RNN_DATA_LAYOUT_BATCH_MAJOR_UNPACKED, T, B,
                                           width, lengths.data(), nullptr);
        s != CUDNN_STATUS_SUCCESS)
      return cudnn_fail(api, s, "cudnnSetRNNDataDescriptor");
  }
  if (int e = set_packed_tensor(api, r->h, r->type, {1, B, H}, "rnn states")) return e;
  if (int e = r->w.create(api, "cudnnCreateTensorDescriptor")) return e;
  if (int e = r->b.create(api, "cudnnCreateTensorDescriptor")) return e;
  if (cudnnStatus_t s = api.rnn_weight_space(c.handle, r->rnn.get(), &r->weight_bytes); s != CUDNN_STATUS_SUCCESS)
    return cudnn_fail(api, s, "cudnnGetRNNWeightSpaceSize");
  if (cudnnStatus_t s = api.rnn_temp_space(c.handle, r->rnn.get(),
                                           training ? CUDNN_FWD_MODE_TRAINING : CUDNN_FWD_MODE_INFERENCE, r->x.get(),
                                           &r->work_bytes, &r->reserve_bytes);
      s != CUDNN_STATUS_SUCCESS)
    return cudnn_fail(api, s, "cudnnGetRNNTempSpaceSizes");
  r->seq_at = int64_t(dnn_align(r->weight_bytes));
  r->cudnn_reserve_at = r->seq_at + int64_t(dnn_align(sizeof(int32_t) * size_t(B)));
  r->total_reserve = uint64_t(r->cudnn_reserve_at) + dnn_align(r->reserve_bytes);
  return FLX_OK;
}

// Where cuDNN keeps each gate's matrices and biases in the weight space at
// `space` (element offsets): linear layers 0..G-1 act on the input, G..2G-1
// on the state, gates in flx's order; a GRU's candidate is gate 2.
int locate(const DnnCall& c, const flx_rnn_desc* d, Rnn& r, char* space, DnnRnnPack* p) {
  const int G = int(gates(d));
  p->gates = G, p->hidden = d->hidden, p->input = d->input, p->bh_at = 0;
  for (int id = 0; id < 2 * G; ++id) {
    void *m = nullptr, *b = nullptr;
    if (cudnnStatus_t s = c.api->rnn_weight_params(c.handle, r.rnn.get(), 0, r.weight_bytes, space, id, r.w.get(), &m,
                                                   r.b.get(), &b);
        s != CUDNN_STATUS_SUCCESS)
      return cudnn_fail(*c.api, s, "cudnnGetRNNWeightParams");
    const bool needs_bias = id < G ? d->b.buf != nullptr : r.double_bias && id == G + 2;
    if (!m || (needs_bias && !b))
      return fail(FLX_ERR_DEVICE, "cudnnGetRNNWeightParams gave no address for the recurrent layer's parameter " +
                                      std::to_string(id));
    p->w_at[id] = (static_cast<char*>(m) - space) / int64_t(r.elem);
    const int64_t b_at = b ? (static_cast<char*>(b) - space) / int64_t(r.elem) : 0;
    if (id < G) p->b_at[id] = b_at;
    else if (id == G + 2 && r.double_bias) p->bh_at = b_at;
  }
  return FLX_OK;
}

void* ptr_or_null(flx_mem m) { return m.buf ? addr(m) : nullptr; }

int operands(int dev, const flx_rnn_desc* d, bool backward, const char* what) {
  const size_t es = dnn_dtype_bytes(d->dtype);
  const int64_t I = d->input, H = d->hidden, B = d->batch, T = d->time, G = gates(d);
  const bool lstm = d->cell == FLX_RNN_LSTM;
  struct Op {
    flx_mem m;
    int64_t n;
    const char* name;
    bool required;
  };
  const flx_mem none{};
  const Op ops[] = {{d->x, I * T * B, "x", true},
                    {d->y, H * T * B, "y", true},
                    {d->wi, G * H * I, "wi", true},
                    {d->wh, G * H * H, "wh", true},
                    {d->b, G * H, "b", false},
                    {bh_of(d), H, "bh", false},
                    {d->h0, H * B, "h0", false},
                    {lstm ? d->c0 : none, H * B, "c0", false},
                    {d->hn, H * B, "hn", false},
                    {lstm ? d->cn : none, H * B, "cn", false},
                    {d->dy, H * T * B, "dy", backward},
                    {d->dhn, H * B, "dhn", false},
                    {lstm ? d->dcn : none, H * B, "dcn", false},
                    {d->dx, I * T * B, "dx", false},
                    {d->dh0, H * B, "dh0", false},
                    {lstm ? d->dc0 : none, H * B, "dc0", false},
                    {d->dwi, G * H * I, "dwi", false},
                    {d->dwh, G * H * H, "dwh", false},
                    {d->db, G * H, "db", false},
                    {dbh_of(d), H, "dbh", false}};
  for (const Op& o : ops)
    if (o.required || o.m.buf)
      if (int e = dnn_operand(dev, o.m, o.n, es, what, o.name)) return e;
  return FLX_OK;
}

}  // namespace

int rnn_reserve_size(void*, int dev, const flx_rnn_desc* d, uint64_t* bytes) {
  const char* what = "rnn_reserve_size";
  if (int e = check_desc(what, d)) return e;
  DnnCall c;
  if (int e = dnn_begin(dev, nullptr, what, &c)) return e;
  Rnn r;
  if (int e = describe(c, d, true, &r)) return e;
  *bytes = r.total_reserve;
  return FLX_OK;
}

int rnn_forward(void*, int dev, const flx_rnn_desc* d, flx_stream s) {
  const char* what = "rnn_forward";
  if (int e = check_desc(what, d)) return e;
  if (int e = operands(dev, d, false, what)) return e;
  DnnCall c;
  if (int e = dnn_begin(dev, s, what, &c)) return e;
  const bool training = d->training != 0;
  Rnn r;
  if (int e = describe(c, d, training, &r)) return e;
  Temp own(dev, s), work(dev, s);
  char* base;
  if (training) {
    if (!d->reserve.buf || d->reserve_bytes < r.total_reserve)
      return dnn_invalid(what, "reserve_bytes", int64_t(d->reserve_bytes),
                         "a training forward needs the reserve rnn_reserve_size gave (" +
                             std::to_string(r.total_reserve) + " bytes)");
    base = addr(d->reserve);
  } else {
    if (int e = own.get(size_t(r.cudnn_reserve_at))) return e;  // weights and lengths
    base = own.ptr();
  }
  if (int e = work.get(r.work_bytes)) return e;
  DnnRnnPack pack{};
  if (int e = locate(c, d, r, base, &pack)) return e;
  int32_t* lengths = reinterpret_cast<int32_t*>(base + r.seq_at);
  if (int e = dnn_fill_i32(c.stream, lengths, d->batch, int32_t(d->time))) return e;
  if (r.double_bias)  // the recurrent biases flx has not (a GRU's reset and update gates'): zero
    if (int e = check(cudaMemsetAsync(base, 0, r.weight_bytes, c.stream), "rnn_forward (cudaMemsetAsync)")) return e;
  if (int e = dnn_rnn_pack(c.stream, r.elem, pack, addr(d->wi), addr(d->wh), ptr_or_null(d->b), ptr_or_null(bh_of(d)),
                           base, true))
    return e;
  const bool lstm = d->cell == FLX_RNN_LSTM;
  const cudnnStatus_t st = c.api->rnn_forward(
      c.handle, r.rnn.get(), training ? CUDNN_FWD_MODE_TRAINING : CUDNN_FWD_MODE_INFERENCE, lengths, r.x.get(),
      addr(d->x), r.y.get(), addr(d->y), r.h.get(), ptr_or_null(d->h0), ptr_or_null(d->hn), r.h.get(),
      lstm ? ptr_or_null(d->c0) : nullptr, lstm ? ptr_or_null(d->cn) : nullptr, r.weight_bytes, base, r.work_bytes,
      work.ptr(),
      training ? r.reserve_bytes : 0, training ? base + r.cudnn_reserve_at : nullptr);
  if (st != CUDNN_STATUS_SUCCESS) return cudnn_fail(*c.api, st, "cudnnRNNForward");
  return FLX_OK;
}

int rnn_backward(void*, int dev, const flx_rnn_desc* d, flx_stream s) {
  const char* what = "rnn_backward";
  if (int e = check_desc(what, d)) return e;
  if (int e = operands(dev, d, true, what)) return e;
  DnnCall c;
  if (int e = dnn_begin(dev, s, what, &c)) return e;
  Rnn r;
  if (int e = describe(c, d, true, &r)) return e;
  if (!d->reserve.buf || d->reserve_bytes < r.total_reserve)
    return dnn_invalid(what, "reserve_bytes", int64_t(d->reserve_bytes),
                       "the backward needs the reserve its training forward filled");
  char* base = addr(d->reserve);
  int32_t* lengths = reinterpret_cast<int32_t*>(base + r.seq_at);
  char* reserve = base + r.cudnn_reserve_at;
  Temp work(dev, s), dx(dev, s), dspace(dev, s);
  if (int e = work.get(r.work_bytes)) return e;
  void* dx_ptr = ptr_or_null(d->dx);
  if (!dx_ptr) {  // cuDNN writes dx whether wanted or not
    if (int e = dx.get(r.elem * size_t(d->input * d->time * d->batch))) return e;
    dx_ptr = dx.ptr();
  }
  const bool lstm = d->cell == FLX_RNN_LSTM;
  cudnnStatus_t st = c.api->rnn_backward_data(
      c.handle, r.rnn.get(), lengths, r.y.get(), addr(d->y), addr(d->dy), r.x.get(), dx_ptr, r.h.get(),
      ptr_or_null(d->h0), ptr_or_null(d->dhn), ptr_or_null(d->dh0), r.h.get(), lstm ? ptr_or_null(d->c0) : nullptr,
      lstm ? ptr_or_null(d->dcn) : nullptr, lstm ? ptr_or_null(d->dc0) : nullptr, r.weight_bytes, base, r.work_bytes,
      work.ptr(), r.reserve_bytes, reserve);
  if (st != CUDNN_STATUS_SUCCESS) return cudnn_fail(*c.api, st, "cudnnRNNBackwardData_v8");
  if (!d->dwi.buf && !d->dwh.buf && !d->db.buf && !dbh_of(d).buf) return FLX_OK;
  // The weight gradients: cuDNN adds them into a zeroed space, unpacked after.
  if (int e = dspace.get(r.weight_bytes)) return e;
  if (int e = check(cudaMemsetAsync(dspace.ptr(), 0, r.weight_bytes, c.stream), "rnn_backward (cudaMemsetAsync)"))
    return e;
  st = c.api->rnn_backward_weights(c.handle, r.rnn.get(), CUDNN_WGRAD_MODE_ADD, lengths, r.x.get(), addr(d->x),
                                   r.h.get(), ptr_or_null(d->h0), r.y.get(), addr(d->y), r.weight_bytes, dspace.ptr(),
                                   r.work_bytes, work.ptr(), r.reserve_bytes, reserve);
  if (st != CUDNN_STATUS_SUCCESS) return cudnn_fail(*c.api, st, "cudnnRNNBackwardWeights_v8");
  DnnRnnPack pack{};
  if (int e = locate(c, d, r, dspace.ptr(), &pack)) return e;
  return dnn_rnn_pack(c.stream, r.elem, pack, ptr_or_null(d->dwi), ptr_or_null(d->dwh),
                      d->b.buf ? ptr_or_null(d->db) : nullptr, r.double_bias ? ptr_or_null(dbh_of(d)) : nullptr,
                      dspace.ptr(), false);
}

}  // namespace flx_cuda
