// The C++ half of the Embedding/LayerNorm interop test
// (embedding_layernorm_interop.py drives it):
//   embedding_layernorm_interop MODEL_A MODEL_B DATA OUT
// MODEL_A is the state_dict of PyTorch's
//   nn.Sequential(nn.Embedding(12, 6), nn.LayerNorm(6))
// ("0.weight" [12, 6], "1.weight" [6], "1.bias" [6]), loaded into
//   Chain(Embedding(12, 6), LayerNorm(6))
// with the key map of docs/checkpoints.md: nn.Embedding's weight transposed
// (flx's is (d, n)), nn.LayerNorm's "weight" as "scale". MODEL_B is that of
// nn.LayerNorm((4, 5)) ("weight", "bias" [4, 5]), loaded into
// LayerNorm({5, 4}) with both transposed (PyTorch normalises its trailing
// dims, row-major; flx its leading dims, column-major). DATA holds "tokens"
// [3, 7], "x_b" [3, 4, 5] and the cotangents "c_a" [3, 7, 6], "c_b"
// [3, 4, 5]. The program saves in OUT, in flx's layouts: the outputs "y_a"
// (6, 7, 3) and "y_b" (5, 4, 3), and the gradients of sum(y_a .* c_a) and
// sum(y_b .* c_b): "d_embedding" (6, 12), "d_scale_a", "d_bias_a" (6),
// "d_x_b" (5, 4, 3), "d_scale_b", "d_bias_b" (5, 4). It first tries to load
// MODEL_A without the transposition and prints "refused: <message>".
#include <flx/flx.hpp>

#include <cstdio>

using namespace flx;

namespace {

// PyTorch's [a, b, c] loads as (a, b, c); its bytes are flx's (c, b, a).
Tensor reversed(const Tensor& t) {
  std::vector<int> perm(size_t(t.ndims()));
  for (int k = 0; k < t.ndims(); ++k) perm[size_t(k)] = t.ndims() - 1 - k;
  return permutedims(t, perm);
}

// nn.Sequential's module numbers -> flx's layers; nn.LayerNorm's weight (γ) is flx's scale.
State torch_names(const State& s) {
  return rename(s, [](const std::string& key) -> std::string {
    if (key == "0.weight") return "layers.0.weight";
    if (key == "1.weight") return "layers.1.scale";
    if (key == "1.bias") return "layers.1.bias";
    return key;
  });
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: %s MODEL_A MODEL_B DATA OUT\n", argv[0]);
    return 2;
  }
  try {
    const State torch_a = torch_names(load(argv[1]));
    auto model_a = Chain(Embedding(12, 6), LayerNorm(6));
    try {
      loadmodel(model_a, torch_a);
      std::fprintf(stderr, "loadmodel took PyTorch's Embedding weight without a transposition\n");
      return 1;
    } catch (const CheckpointError& e) {
      std::printf("refused: %s\n", e.what());
    }
    loadmodel(model_a, map_tensors(torch_a, [](const std::string& name, const Tensor& t) {
      return name == "layers.0.weight" ? permutedims(t, {1, 0}) : t;  // [n, d] -> (d, n)
    }));
    LayerNorm model_b({5, 4});
    const State torch_b = map_tensors(load(argv[2]), [](const std::string&, const Tensor& t) { return reversed(t); });
    loadmodel(model_b,
              rename(torch_b, [](const std::string& key) { return key == "weight" ? std::string("scale") : key; }));

    const State data = load(argv[3]);
    const Tensor tokens = reversed(data.at("tokens"));  // (7, 3): 7 tokens of 3 sequences
    const Tensor x_b = reversed(data.at("x_b")), c_a = reversed(data.at("c_a")), c_b = reversed(data.at("c_b"));

    State out;
    auto [y_a, grad_a] = withgradient([&](const auto& m) { return sum(m(tokens) * c_a); }, model_a);
    (void)y_a;
    out.insert("y_a", model_a(tokens));
    const auto& g_a = std::get<0>(grad_a);
    out.insert("d_embedding", std::get<0>(g_a.layers).weight);
    out.insert("d_scale_a", std::get<1>(g_a.layers).scale);
    out.insert("d_bias_a", std::get<1>(g_a.layers).bias);
    out.insert("y_b", model_b(x_b));
    auto [g_b, g_x] = gradient([&](const LayerNorm& m, const Tensor& x) { return sum(m(x) * c_b); }, model_b, x_b);
    out.insert("d_x_b", g_x);
    out.insert("d_scale_b", g_b.scale);
    out.insert("d_bias_b", g_b.bias);
    save(argv[4], out);
    return 0;
  } catch (const Error& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
}
