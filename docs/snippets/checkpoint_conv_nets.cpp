// docs/checkpoints.md, "Conv nets": a PyTorch conv net's state_dict (written
// here with PyTorch's names and layouts, as the page's Python saves it) loads
// into a Chain of CrossCor layers and one of Conv layers, which then compute
// the same outputs; the refusal the page quotes goes to standard error.
// tests/interop/cnn_interop.py checks the same against PyTorch itself.
#include <flx/flx.hpp>

#include <cmath>
#include <iostream>

using namespace flx;

// The state_dict of the page's nn.Sequential: Conv2d weights [out, in, kH, kW],
// BatchNorm2d weight, bias, running_mean, running_var, num_batches_tracked,
// Linear weight [out, in].
void write_torch_checkpoint() {
  State sd;
  for (auto [conv, bn, in, out] : {std::tuple{"0.", "1.", 1, 4}, std::tuple{"4.", "5.", 4, 8}}) {
    sd.insert(std::string(conv) + "weight", randn(out, in, 3, 3));
    sd.insert(std::string(conv) + "bias", randn(out));
    sd.insert(std::string(bn) + "weight", rand(out));
    sd.insert(std::string(bn) + "bias", randn(out));
    sd.insert(std::string(bn) + "running_mean", randn(out));
    sd.insert(std::string(bn) + "running_var", rand(out));
    sd.insert(std::string(bn) + "num_batches_tracked", zeros(Int64, {}));
  }
  sd.insert("9.weight", randn(10, 32));
  sd.insert("9.bias", randn(10));
  save("torch_cnn.safetensors", sd);
}

// PyTorch's names to flx's, for either model below.
State torch_names() {
  State s = rename(load("torch_cnn.safetensors"),
                   {{"0.", "layers.0."}, {"1.", "layers.1."}, {"4.", "layers.3."}, {"5.", "layers.4."},
                    {"9.", "layers.7."}});
  s = rename(s, [](const std::string& key) -> std::string {
    if (key.ends_with("num_batches_tracked")) return "";           // flx keeps no counter
    const bool batchnorm = key.starts_with("layers.1.") || key.starts_with("layers.4.");
    if (batchnorm && key.ends_with(".weight")) return key.substr(0, key.size() - 6) + "scale";  // γ
    return key;
  });
  return s;
}

int main() {
  write_torch_checkpoint();
  const Tensor x = rand(12, 12, 1, 5);  // WHCN: five 12×12 images of one channel
  Tensor y1, y2;
  {
    auto model = Chain(CrossCor({3, 3}, 1, 4, ConvOptions{.pad = 1}), BatchNorm(4, relu), MaxPool({2, 2}),
                       CrossCor({3, 3}, 4, 8), BatchNorm(8, relu), MaxPool({2, 2}), Flatten(), Dense(32, 10));
    State s = torch_names();
    try {  // unconverted, the Conv2d weights are refused
      loadmodel(model, s);
      return 1;
    } catch (const CheckpointError& e) {
      std::cerr << e.what() << "\n";
    }
    loadmodel(model, map_tensors(s, [](const std::string& name, const Tensor& t) {
      return t.ndims() == 4 ? torch_to_crosscor(t) : t;   // Conv2d weights: [out, in, kH, kW] -> (kW, kH, in, out)
    }));
    Tensor y = testmode(model)(x);   // (10, 5), as PyTorch's model.eval()(x) gives [5, 10]
    y1 = y;
  }
  {
    auto model = Chain(Conv({3, 3}, 1, 4, ConvOptions{.pad = 1}), BatchNorm(4, relu), MaxPool({2, 2}),
                       Conv({3, 3}, 4, 8), BatchNorm(8, relu), MaxPool({2, 2}), Flatten(), Dense(32, 10));
    State s = torch_names();
    loadmodel(model, map_tensors(s, [](const std::string& name, const Tensor& t) {
      return t.ndims() == 4 ? torch_to_conv(t) : t;   // also flipped, as Conv convolves
    }));
    y2 = testmode(model)(x);
  }
  const auto a = y1.to_vector<float>(), b = y2.to_vector<float>();
  for (size_t i = 0; i < a.size(); ++i)
    if (std::abs(a[i] - b[i]) > 1e-4f * (1 + std::abs(a[i]))) return 1;  // CrossCor and Conv agree
}
