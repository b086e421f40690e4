// The dispatch layer's convolution, pooling and batch normalisation (the
// "dnn" table, ABI minor 5), recurrent layers (minor 6), attention (minor 7)
// and group normalisation (minor 10): see backend.hpp.
// The ops that build the descriptors are in src/ops/dnn_*.cpp and
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

void Backend::conv(int dev, flx_conv_desc d, flx_conv_pass pass) const {
  d.struct_size = sizeof d;
  const OpRef op{conv_name(pass), d.dtype};
  d.workspace = {};
  d.workspace_bytes = 0;
  const Scratch workspace = scratch<&dnn::conv_workspace>(dnn_, op, dev, &d, int32_t(pass));
  d.workspace = workspace.mem();
  d.workspace_bytes = workspace.bytes();
  switch (pass) {
    case FLX_CONV_FORWARD: run<&dnn::conv_forward>(dnn_, op, dev, &d); break;
    case FLX_CONV_BACKWARD_DATA: run<&dnn::conv_backward_data>(dnn_, op, dev, &d); break;
    case FLX_CONV_BACKWARD_FILTER: run<&dnn::conv_backward_filter>(dnn_, op, dev, &d); break;
    case FLX_CONV_BACKWARD: run<&dnn::conv_backward>(dnn_, op, dev, &d); break;
  }
}

Scratch Backend::pool_reserve(int dev, const flx_pool_desc& d) const {
  flx_pool_desc desc = d;
  desc.struct_size = sizeof desc;
  return scratch<&dnn::pool_reserve_size>(dnn_, {pool_name(desc), desc.dtype}, dev, &desc);
}
void Backend::pool_forward(int dev, flx_pool_desc d) const {
  d.struct_size = sizeof d;
  run<&dnn::pool_forward>(dnn_, {pool_name(d), d.dtype}, dev, &d);
}
void Backend::pool_backward(int dev, flx_pool_desc d) const {
  d.struct_size = sizeof d;
  run<&dnn::pool_backward>(dnn_, {pool_name(d), d.dtype}, dev, &d);
}
void Backend::batchnorm_forward(int dev, flx_batchnorm_desc d) const {
  d.struct_size = sizeof d;
  run<&dnn::batchnorm_forward>(dnn_, {"batchnorm", d.dtype}, dev, &d);
}
void Backend::batchnorm_backward(int dev, flx_batchnorm_desc d) const {
  d.struct_size = sizeof d;
  run<&dnn::batchnorm_backward>(dnn_, {"batchnorm (gradient)", d.dtype}, dev, &d);
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
  uint64_t bytes = 0;
  const OpRef op{rnn_name(desc, false), desc.dtype};
  const auto query = dnn_.calls.rnn_reserve_size;
  if (!query || !rnn_knows(desc)) return false;
  const int st = query(core_->ctx, dev, &desc, &bytes);
  if (st == FLX_ERR_UNSUPPORTED) return false;
  check(st, op);
  *reserve = Scratch(*this, dev, bytes);
  return true;
}
bool Backend::rnn_forward(int dev, flx_rnn_desc d) const {
  d.struct_size = sizeof d;
  const OpRef op{rnn_name(d, false), d.dtype};
  if (!rnn_knows(d)) return false;
  const int st = status<&dnn::rnn_forward>(dnn_, op, dev, &d);
  if (st == FLX_ERR_UNSUPPORTED) return false;
  check(st, op);
  return true;
}
void Backend::rnn_backward(int dev, flx_rnn_desc d) const {
  d.struct_size = sizeof d;
  run<&dnn::rnn_backward>(dnn_, {rnn_name(d, true), d.dtype}, dev, &d);
}

// A pass of attention (0 forward, 1 backward): its workspace, then the call;
// false, with nothing queued, when the backend declines the case.
bool Backend::attention(int dev, flx_attention_desc d, int32_t pass) const {
  d.struct_size = sizeof d;
  const OpRef op{pass == 0 ? "attention" : "attention (gradient)", d.dtype};
  d.workspace = {};
  d.workspace_bytes = 0;
  uint64_t bytes = 0;
  if (const auto query = dnn_.calls.attention_workspace) {
    const int st = query(core_->ctx, dev, &d, pass, &bytes);
    if (st == FLX_ERR_UNSUPPORTED) return false;
    check(st, op);
  }
  const Scratch workspace(*this, dev, bytes);
  d.workspace = workspace.mem();
  d.workspace_bytes = workspace.bytes();
  const int st = pass == 0 ? status<&dnn::attention_forward>(dnn_, op, dev, &d)
                           : status<&dnn::attention_backward>(dnn_, op, dev, &d);
  if (st == FLX_ERR_UNSUPPORTED) return false;
  check(st, op);
  return true;
}
bool Backend::attention_forward(int dev, flx_attention_desc d) const { return attention(dev, d, 0); }
bool Backend::attention_backward(int dev, flx_attention_desc d) const { return attention(dev, d, 1); }

bool Backend::groupnorm_forward(int dev, flx_groupnorm_desc d) const {
  d.struct_size = sizeof d;
  const OpRef op{"groupnorm", d.dtype};
  if (!has_groupnorm()) return false;
  const int st = status<&dnn::groupnorm_forward>(dnn_, op, dev, &d);
  if (st == FLX_ERR_UNSUPPORTED) return false;
  check(st, op);
  return true;
}
void Backend::groupnorm_backward(int dev, flx_groupnorm_desc d) const {
  d.struct_size = sizeof d;
  run<&dnn::groupnorm_backward>(dnn_, {"groupnorm (gradient)", d.dtype}, dev, &d);
}

}  // namespace flx::detail
