// docs/checkpoints.md, "Recurrent layers": a PyTorch tagger's state_dict
// (written here with PyTorch's names and shapes, as the page's Python saves
// it) loads into Chain(LSTM(8 => 16), Dense(16 => 5)), which then gives
// every time step's scores. tests/interop/rnn_interop.py checks the same
// against PyTorch itself.
#include <flx/flx.hpp>

#include <iostream>

using namespace flx;

// Tagger().state_dict(): nn.LSTM(8, 16)'s four entries, then nn.Linear(16, 5)'s.
void write_torch_checkpoint() {
  State sd;
  sd.insert("lstm.weight_ih_l0", randn(64, 8));
  sd.insert("lstm.weight_hh_l0", randn(64, 16));
  sd.insert("lstm.bias_ih_l0", randn(64));
  sd.insert("lstm.bias_hh_l0", randn(64));
  sd.insert("head.weight", randn(5, 16));
  sd.insert("head.bias", randn(5));
  save("torch_lstm.safetensors", sd);
}

int main() {
  write_torch_checkpoint();
  auto model = Chain(LSTM(8, 16), Dense(16, 5));
  State s = torch_to_lstm(load("torch_lstm.safetensors"), {.prefix = "lstm.", .into = "layers.0."});
  loadmodel(model, rename(s, {{"head.", "layers.1."}}));
  // The biases were summed: flx's one is PyTorch's two.
  const State torch = load("torch_lstm.safetensors");
  const Tensor bias = std::get<0>(model.layers).cell.bias;
  const double gap = maximum(abs(bias - (torch.at("lstm.bias_ih_l0") + torch.at("lstm.bias_hh_l0")))).item<double>();
  const Tensor x = permutedims(randn(4, 10, 8), {2, 1, 0});  // PyTorch's batch-first [4, 10, 8] -> (8, 10, 4)
  std::cout << model(x).shape() << " " << (gap == 0 ? "biases summed" : "biases differ") << "\n";  // (5×10×4) biases summed
}
