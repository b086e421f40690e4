// The C++ half of the conv net interop test (cnn_interop.py drives it):
//   cnn_interop MODEL DATA OUT TRANSPOSE
// MODEL is the state_dict of PyTorch's
//   nn.Sequential(Conv2d(1, 4, 3, padding=1), BatchNorm2d(4), ReLU(), MaxPool2d(2),
//                 Conv2d(4, 8, 3), BatchNorm2d(8), ReLU(), MaxPool2d(2),
//                 Flatten(), Linear(32, 10))
// and DATA holds inputs "x" [N, 1, 12, 12]. The program loads MODEL into
//   Chain(CrossCor((3, 3), 1 => 4, pad=1), BatchNorm(4, relu), MaxPool((2, 2)),
//         CrossCor((3, 3), 4 => 8), BatchNorm(8, relu), MaxPool((2, 2)),
//         flatten, Dense(32 => 10))
// converting the Conv2d weights with torch_to_crosscor, and into the same
// Chain with Conv layers, converting them with torch_to_conv; runs
// testmode(model) on x (as WHCN) and saves the outputs (10, N) as "crosscor"
// and "conv" in OUT. It first tries the load without converting the weights
// and prints "refused: <message>".
// TRANSPOSE is the state_dict of PyTorch's ConvTranspose2d(2, 3, (2, 3))
// and TRANSPOSE.x its inputs [N, 2, 4, 5]: loaded into flx's ConvTranspose
// with torch_to_conv, its output is saved as "conv_transpose" (WHCN).
#include <flx/flx.hpp>

#include <cstdio>

using namespace flx;

namespace {

// PyTorch's module numbers -> flx's layer numbers (ReLU is no layer in flx,
// where BatchNorm applies it).
const PrefixMap torch_modules = {{"0.", "layers.0."}, {"1.", "layers.1."}, {"4.", "layers.3."},
                                 {"5.", "layers.4."}, {"9.", "layers.7."}};

// Then BatchNorm2d's "weight" is flx's "scale", and flx keeps no
// num_batches_tracked.
std::string batchnorm_names(const std::string& key) {
  if (key.ends_with(".num_batches_tracked")) return "";
  const bool batchnorm = key.starts_with("layers.1.") || key.starts_with("layers.4.");
  if (batchnorm && key.ends_with(".weight")) return key.substr(0, key.size() - 6) + "scale";
  return key;
}

template <class L>
auto make_model() {
  return Chain(L({3, 3}, 1, 4, ConvOptions{.pad = 1}), BatchNorm(4, relu), MaxPool({2, 2}), L({3, 3}, 4, 8),
               BatchNorm(8, relu), MaxPool({2, 2}), Flatten(), Dense(32, 10));
}

// The PyTorch conv weights (the only 4-d tensors) converted by convert.
State converted(const State& s, Tensor (*convert)(const Tensor&)) {
  return map_tensors(s, [convert](const std::string&, const Tensor& t) { return t.ndims() == 4 ? convert(t) : t; });
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: %s MODEL DATA OUT TRANSPOSE\n", argv[0]);
    return 2;
  }
  try {
    const State torch_state = rename(rename(load(argv[1]), torch_modules), batchnorm_names);
    // x [N, C, H, W] loads as (N, C, H, W); its bytes are WHCN's.
    const Tensor x = permutedims(load(argv[2]).at("x"), {3, 2, 1, 0});

    auto crosscor_model = make_model<CrossCor>();
    try {
      loadmodel(crosscor_model, torch_state);
      std::fprintf(stderr, "loadmodel took PyTorch's Conv2d weights without a conversion\n");
      return 1;
    } catch (const CheckpointError& e) {
      std::printf("refused: %s\n", e.what());
    }
    loadmodel(crosscor_model, converted(torch_state, torch_to_crosscor));

    auto conv_model = make_model<Conv>();
    loadmodel(conv_model, converted(torch_state, torch_to_conv));

    State out;
    out.insert("crosscor", testmode(crosscor_model)(x));
    out.insert("conv", testmode(conv_model)(x));
    ConvTranspose transpose({3, 2}, 2, 3);
    loadmodel(transpose, converted(load(argv[4]), torch_to_conv));
    const std::string transpose_inputs = std::string(argv[4]) + ".x";
    out.insert("conv_transpose", transpose(permutedims(load(transpose_inputs).at("x"), {3, 2, 1, 0})));
    save(argv[3], out);
    return 0;
  } catch (const Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
}
