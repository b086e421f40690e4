// The dispatch layer's fused ops (backend_fused.h, ABI minor 14; for an
// older backend the calls FLX_FUSED_OPS names): convolution, pooling and
// batch normalisation (the dnn table's since minor 5), recurrent layers
// (minor 6), attention (minor 7) and group normalisation (minor 10); the
// compute table's gemm_epilogue and rule_step are in dispatch.cpp. See
// backend.hpp. The ops that build the descriptors are in src/ops/dnn_*.cpp,
// src/ops/recurrent_scan.cpp and src/ops/attention_*.cpp.
#include "backend/backend.hpp"

namespace flx::detail {

namespace {
using dnn = flx_dnn_table;

const char* conv_name(flx_conv_pass pass) {
  switch (pass) {
    case FLX_CONV_FORWARD: return "conv";
    case FLX_CONV_BACKWARD_DATA: return "conv (gradient of the input)";
    case FLX_CONV_BACKWARD_FILTER: return "conv (gradient of the weight)";
    case FLX_CONV_BACKWARD: return "conv (gradients)";
  }
  return "conv";
}
const char* pool_name(const flx_pool_desc& d) { return d.mode == FLX_POOL_MAX ? "maxpool" : "meanpool"; }
}  // namespace

int Backend::fused_supports(int dev, int32_t op, const void* d) const {
  if (fused_.served) return fused_.calls.supports(core_->ctx, dev, op, d);
  return abi::fused_supports(older_tables(), op);
}
int Backend::fused_scratch_bytes(int dev, int32_t op, const void* d, int32_t kind, uint64_t* bytes) const {
  *bytes = 0;
  if (fused_.served) return fused_.calls.scratch_bytes(core_->ctx, dev, op, d, kind, bytes);
  return abi::fused_scratch_bytes(older_tables(), core_->ctx, dev, op, d, kind, bytes);
}
int Backend::fused_run(int dev, int32_t op, const void* d) const {
  const flx_stream s = current_stream(id_, dev);
  if (fused_.served) return fused_.calls.run(core_->ctx, dev, op, d, s);
  return abi::fused_run(older_tables(), core_->ctx, dev, op, d, s);
}

namespace {
// The scratch of `kind` that fused op `op` asks for, allocated: none for 0
// bytes.
template <class Desc>
Scratch fused_scratch(const Backend& b, int dev, int32_t op, const Desc& d, int32_t kind, int* status) {
  uint64_t bytes = 0;
  *status = b.fused_scratch_bytes(dev, op, &d, kind, &bytes);
  return *status == FLX_OK ? Scratch(b, dev, bytes) : Scratch(b, dev, 0);
}
}  // namespace

void Backend::conv(int dev, flx_conv_desc d, flx_conv_pass pass) const {
  d.struct_size = sizeof d;
  const OpRef op{conv_name(pass), d.dtype};
  d.workspace = {};
  d.workspace_bytes = 0;
  int code = FLX_FUSED_CONV_FORWARD;
  switch (pass) {
    case FLX_CONV_FORWARD: require_fused<&dnn::conv_forward>(dev, code = FLX_FUSED_CONV_FORWARD, &d, op); break;
    case FLX_CONV_BACKWARD_DATA:
      require_fused<&dnn::conv_backward_data>(dev, code = FLX_FUSED_CONV_BACKWARD_DATA, &d, op);
      break;
    case FLX_CONV_BACKWARD_FILTER:
      require_fused<&dnn::conv_backward_filter>(dev, code = FLX_FUSED_CONV_BACKWARD_FILTER, &d, op);
      break;
    case FLX_CONV_BACKWARD: require_fused<&dnn::conv_backward>(dev, code = FLX_FUSED_CONV_BACKWARD, &d, op); break;
  }
  int st = FLX_OK;
  const Scratch workspace = fused_scratch(*this, dev, code, d, FLX_FUSED_WORKSPACE, &st);
  check(st, op);
  d.workspace = workspace.mem();
  d.workspace_bytes = workspace.bytes();
  check(fused_run(dev, code, &d), op);
}

Scratch Backend::pool_reserve(int dev, const flx_pool_desc& d) const {
  flx_pool_desc desc = d;
  desc.struct_size = sizeof desc;
  int st = FLX_OK;
  Scratch reserve = fused_scratch(*this, dev, FLX_FUSED_POOL_FORWARD, desc, FLX_FUSED_RESERVE, &st);
  check(st, {pool_name(desc), desc.dtype});
  return reserve;
}
void Backend::pool_forward(int dev, flx_pool_desc d) const {
  d.struct_size = sizeof d;
  run_fused<&dnn::pool_forward>(dev, FLX_FUSED_POOL_FORWARD, &d, {pool_name(d), d.dtype});
}
void Backend::pool_backward(int dev, flx_pool_desc d) const {
  d.struct_size = sizeof d;
  run_fused<&dnn::pool_backward>(dev, FLX_FUSED_POOL_BACKWARD, &d, {pool_name(d), d.dtype});
}
void Backend::batchnorm_forward(int dev, flx_batchnorm_desc d) const {
  d.struct_size = sizeof d;
  run_fused<&dnn::batchnorm_forward>(dev, FLX_FUSED_BATCHNORM_FORWARD, &d, {"batchnorm", d.dtype});
}
void Backend::batchnorm_backward(int dev, flx_batchnorm_desc d) const {
  d.struct_size = sizeof d;
  run_fused<&dnn::batchnorm_backward>(dev, FLX_FUSED_BATCHNORM_BACKWARD, &d, {"batchnorm (gradient)", d.dtype});
}

namespace {
const char* rnn_name(const flx_rnn_desc& d, bool gradient) {
  switch (d.cell) {
    case FLX_RNN_GRU: return gradient ? "gru (gradient)" : "gru";
    case FLX_RNN_TANH:
    case FLX_RNN_RELU: return gradient ? "rnn (gradient)" : "rnn";
  }
  return gradient ? "lstm (gradient)" : "lstm";
}
}  // namespace

// A GRU or plain RNN cell (minor 7) goes only to a backend of minor 7 or
// later: to an older one the cell code means nothing (backend.h's
// compatibility rules).
bool Backend::rnn_knows(const flx_rnn_desc& d) const { return d.cell == FLX_RNN_LSTM || abi_minor_ >= 7; }

bool Backend::rnn_reserve(int dev, const flx_rnn_desc& d, Scratch* reserve) const {
  flx_rnn_desc desc = d;
  desc.struct_size = sizeof desc;
  const OpRef op{rnn_name(desc, false), desc.dtype};
  if (!rnn_knows(desc) || fused_supports(dev, FLX_FUSED_RNN_FORWARD, &desc) != FLX_OK) return false;
  int st = FLX_OK;
  Scratch r = fused_scratch(*this, dev, FLX_FUSED_RNN_FORWARD, desc, FLX_FUSED_RESERVE, &st);
  if (st == FLX_ERR_UNSUPPORTED) return false;
  check(st, op);
  *reserve = std::move(r);
  return true;
}
bool Backend::rnn_forward(int dev, flx_rnn_desc d) const {
  d.struct_size = sizeof d;
  const OpRef op{rnn_name(d, false), d.dtype};
  if (!rnn_knows(d) || fused_supports(dev, FLX_FUSED_RNN_FORWARD, &d) != FLX_OK) return false;
  const int st = fused_run(dev, FLX_FUSED_RNN_FORWARD, &d);
  if (st == FLX_ERR_UNSUPPORTED) return false;
  check(st, op);
  return true;
}
void Backend::rnn_backward(int dev, flx_rnn_desc d) const {
  d.struct_size = sizeof d;
  run_fused<&dnn::rnn_backward>(dev, FLX_FUSED_RNN_BACKWARD, &d, {rnn_name(d, true), d.dtype});
}

// A pass of attention (0 forward, 1 backward): its workspace, then the call;
// false, with nothing queued, when the backend declines the case.
bool Backend::attention(int dev, flx_attention_desc d, int32_t pass) const {
  d.struct_size = sizeof d;
  const OpRef op{pass == 0 ? "attention" : "attention (gradient)", d.dtype};
  const int32_t code = pass == 0 ? FLX_FUSED_ATTENTION_FORWARD : FLX_FUSED_ATTENTION_BACKWARD;
  d.workspace = {};
  d.workspace_bytes = 0;
  if (fused_supports(dev, code, &d) != FLX_OK) return false;
  int st = FLX_OK;
  const Scratch workspace = fused_scratch(*this, dev, code, d, FLX_FUSED_WORKSPACE, &st);
  if (st == FLX_ERR_UNSUPPORTED) return false;
  check(st, op);
  d.workspace = workspace.mem();
  d.workspace_bytes = workspace.bytes();
  st = fused_run(dev, code, &d);
  if (st == FLX_ERR_UNSUPPORTED) return false;
  check(st, op);
  return true;
}
bool Backend::attention_forward(int dev, flx_attention_desc d) const { return attention(dev, d, 0); }
bool Backend::attention_backward(int dev, flx_attention_desc d) const { return attention(dev, d, 1); }

bool Backend::groupnorm_forward(int dev, flx_groupnorm_desc d) const {
  d.struct_size = sizeof d;
  const OpRef op{"groupnorm", d.dtype};
  if (fused_supports(dev, FLX_FUSED_GROUPNORM_FORWARD, &d) != FLX_OK) return false;
  const int st = fused_run(dev, FLX_FUSED_GROUPNORM_FORWARD, &d);
  if (st == FLX_ERR_UNSUPPORTED) return false;
  check(st, op);
  return true;
}
void Backend::groupnorm_backward(int dev, flx_groupnorm_desc d) const {
  d.struct_size = sizeof d;
  run_fused<&dnn::groupnorm_backward>(dev, FLX_FUSED_GROUPNORM_BACKWARD, &d, {"groupnorm (gradient)", d.dtype});
}

}  // namespace flx::detail
