// PyTorch's nn.RNN, nn.LSTM and nn.GRU checkpoints as flx's recurrent layers
// name them (torch_to_rnn, torch_to_lstm, torch_to_gru in flx/checkpoints.hpp).
//
// PyTorch keeps, per layer n, weight_ih_ln [k·H, in], weight_hh_ln [k·H, H],
// bias_ih_ln and bias_hh_ln [k·H], the gates stacked in the order flx (and
// Flux) stack them: RNN one, LSTM i, f, g, o, GRU r, z, n. A file's [k·H, in]
// loads as flx's (k·H, in) with the same element at each (row, column), so
// the weights need no conversion; only the biases do, since flx has one.
#include <string>
#include <vector>

#include "flx/checkpoints.hpp"
#include "flx/error.hpp"
#include "flx/ops.hpp"

namespace flx {
namespace {

struct Kind {
  const char* fn;     // for messages: "torch_to_lstm"
  const char* torch;  // "nn.LSTM"
  int gates;
};

std::string held(const State& s) {
  std::string out;
  for (const auto& [k, t] : s) out += (out.empty() ? "" : ", ") + k;
  return out.empty() ? "nothing" : out;
}

State convert(const State& s, const TorchRecurrentNames& names, const Kind& kind) {
  const std::string n = std::to_string(names.layer), p = names.prefix;
  const std::string wi_key = p + "weight_ih_l" + n, wh_key = p + "weight_hh_l" + n;
  const std::string bi_key = p + "bias_ih_l" + n, bh_key = p + "bias_hh_l" + n;
  const bool gru = kind.gates == 3;
  for (const auto& [key, t] : s) {
    FLX_CHECK(!(key.starts_with(p + "weight_ih_l" + n + "_reverse") || key.starts_with(p + "weight_hh_l" + n + "_reverse")),
              CheckpointError, kind.fn, ": \"", key, "\" belongs to a bidirectional ", kind.torch,
              "; flx's layers run one direction (load the forward direction's entries, and run a second layer on the "
              "reversed sequence for the other)");
    FLX_CHECK(key != p + "weight_hr_l" + n, CheckpointError, kind.fn, ": \"", key, "\" is the projection of an ",
              kind.torch, " made with proj_size > 0, which flx's LSTM does not have");
  }
  FLX_CHECK(s.contains(wi_key) && s.contains(wh_key), CheckpointError, kind.fn, ": the checkpoint has no \"",
            s.contains(wi_key) ? wh_key : wi_key, "\" (", kind.torch, "'s layer ", names.layer, " under prefix \"", p,
            "\"); it holds ", held(s), ". Pass the prefix of the module's names as {.prefix = \"...\"}");
  const Tensor &wi = s.at(wi_key), &wh = s.at(wh_key);
  FLX_CHECK(wi.ndims() == 2 && wi.shape()[0] % kind.gates == 0, CheckpointError, kind.fn, ": \"", wi_key,
            "\" has shape ", wi.shape(), "; ", kind.torch, "'s is [", kind.gates == 1 ? "" : std::to_string(kind.gates) + "·",
            "hidden, input]");
  const int64_t rows = wi.shape()[0], h = rows / kind.gates;
  FLX_CHECK(wh.shape() == (Shape{rows, h}), CheckpointError, kind.fn, ": \"", wh_key, "\" has shape ", wh.shape(),
            "; with \"", wi_key, "\" of shape ", wi.shape(), " it must be ", Shape{rows, h});
  FLX_CHECK(s.contains(bi_key) == s.contains(bh_key), CheckpointError, kind.fn, ": the checkpoint has \"",
            s.contains(bi_key) ? bi_key : bh_key, "\" but not \"", s.contains(bi_key) ? bh_key : bi_key, "\"; ",
            kind.torch, " has both biases or (bias=False) neither");
  const bool with_bias = s.contains(bi_key);
  Tensor bias, candidate_bias;
  if (with_bias) {
    const Tensor &bi = s.at(bi_key), &bh = s.at(bh_key);
    for (const auto& [key, b] : {std::pair{bi_key, bi}, std::pair{bh_key, bh}})
      FLX_CHECK(b.shape() == Shape{rows}, CheckpointError, kind.fn, ": \"", key, "\" has shape ", b.shape(),
                "; it must be (", rows, ") to match \"", wi_key, "\"");
    if (gru) {
      // b_hr and b_hz add to the input biases; b_hn stays apart, inside r ⊙ (·).
      std::vector<double> keep(size_t(rows), 1.0);
      for (int64_t i = 2 * h; i < rows; ++i) keep[size_t(i)] = 0.0;
      bias = bi + bh * tensor(keep, {rows}).to(bh.dtype());
      candidate_bias = reshape(reshape(bh, {h, 3}).slice_last(2, 3), {h});
    } else {
      bias = bi + bh;
    }
  }
  const std::string cell = names.into + "cell.";
  State out;
  for (const auto& [key, t] : s) {
    if (key == wi_key) out.insert(cell + "Wi", t);
    else if (key == wh_key) out.insert(cell + "Wh", t);
    else if (key == bi_key) {
      out.insert(cell + (gru ? "b" : "bias"), bias);
      if (gru) out.insert(cell + "bh", candidate_bias);
    } else if (key != bh_key) out.insert(key, t);
  }
  out.metadata() = s.metadata();
  return out;
}

}  // namespace

State torch_to_rnn(const State& s, const TorchRecurrentNames& names) {
  return convert(s, names, {"torch_to_rnn", "nn.RNN", 1});
}
State torch_to_lstm(const State& s, const TorchRecurrentNames& names) {
  return convert(s, names, {"torch_to_lstm", "nn.LSTM", 4});
}
State torch_to_gru(const State& s, const TorchRecurrentNames& names) {
  return convert(s, names, {"torch_to_gru", "nn.GRU", 3});
}

}  // namespace flx
