// The C++ half of the model-level interop test (model_interop.py drives it):
//   model_interop save PATH   saves Chain(Dense(3 => 2), Dense(2 => 1)) with
//                             known weights, prints the output for x = (1, 2, 3)
//   model_interop load PATH   loads a PyTorch-style nn.Linear(3, 2) file
//                             ("weight" [2, 3], "bias" [2]) into Dense(3 => 2)
//                             and prints the output for x = (1, 1, 1)
//   model_interop sequential PATH
//                             loads a file laid out as the state_dict of
//                             PyTorch's nn.Sequential(Linear(3, 4), ReLU(),
//                             Linear(4, 2)) ("0.weight", ..., "2.bias"): first
//                             without a key map (prints the refusal), then
//                             into Chain(Dense(3 => 4, relu), Dense(4 => 2))
//                             with the prefixes the refusal names; prints the
//                             output for x = (1, 2, 3)
#include <flx/flx.hpp>

#include <cstdio>

using namespace flx;

namespace {

void print(const Tensor& y) {
  for (float v : y.to_vector<float>()) std::printf("%.6f ", double(v));
  std::printf("\n");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s save|load|sequential PATH\n", argv[0]);
    return 2;
  }
  try {
    const std::string mode = argv[1], path = argv[2];
    if (mode == "save") {
      // weight[i, j] = 10 i + j (row i = output i), stored column-major.
      std::vector<float> w;
      for (int j = 0; j < 3; ++j)
        for (int i = 0; i < 2; ++i) w.push_back(float(10 * i + j));
      auto model = Chain(Dense(tensor(w, {2, 3}), tensor(std::vector<float>{0.5f, -0.5f}, {2})),
                         Dense(tensor(std::vector<float>{2, -1}, {1, 2}), tensor(std::vector<float>{3}, {1})));
      save(path, model);
      print(model(tensor(std::vector<float>{1, 2, 3}, {3})));
      return 0;
    }
    if (mode == "load") {
      Dense d(3, 2);
      loadmodel(d, load(path));
      print(d(ones(3)));
      return 0;
    }
    if (mode == "sequential") {
      auto model = Chain(Dense(3, 4, relu), Dense(4, 2));
      const State s = load(path);
      try {
        loadmodel(model, s);
        std::fprintf(stderr, "loadmodel took PyTorch's names without a key map\n");
        return 1;
      } catch (const CheckpointError& e) {
        std::printf("refused: %s\n", e.what());
      }
      loadmodel(model, s, {{"0.", "layers.0."}, {"2.", "layers.1."}});
      print(model(tensor(std::vector<float>{1, 2, 3}, {3})));
      return 0;
    }
  } catch (const Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  std::fprintf(stderr, "unknown mode %s; use save, load or sequential\n", argv[1]);
  return 2;
}
