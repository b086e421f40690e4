// docs/checkpoints.md, "Embeddings and layer norms": the state_dicts of
// PyTorch's nn.Sequential(nn.Embedding(12, 6), nn.LayerNorm(6)) and of
// nn.LayerNorm((4, 5)) (written here with PyTorch's names and layouts) load
// into flx's Embedding and LayerNorm; the refusal the page quotes goes to
// standard error. tests/interop/embedding_layernorm_interop.py checks the
// outputs and gradients against PyTorch itself.
#include <flx/flx.hpp>

#include <iostream>

using namespace flx;

int main() {
  {
    State sd;  // PyTorch's names and shapes: row k of "0.weight" embeds index k
    sd.insert("0.weight", randn(12, 6));
    sd.insert("1.weight", rand(6));
    sd.insert("1.bias", randn(6));
    save("torch_embedding.safetensors", sd);
    State ln;
    ln.insert("weight", rand(4, 5));
    ln.insert("bias", randn(4, 5));
    save("torch_layernorm.safetensors", ln);
  }
  const Tensor tokens = tensor(std::vector<int64_t>{3, 11, 0, 3, 5, 5, 2, 7, 0, 1}, {2, 5});  // PyTorch's [B, T]

  auto model = Chain(Embedding(12, 6), LayerNorm(6));
  State s = rename(load("torch_embedding.safetensors"), [](const std::string& key) -> std::string {
    if (key == "0.weight") return "layers.0.weight";   // nn.Embedding
    if (key == "1.weight") return "layers.1.scale";    // nn.LayerNorm's γ
    if (key == "1.bias") return "layers.1.bias";       // and β
    return key;
  });
  try {  // untransposed, the Embedding weight is refused
    loadmodel(model, s);
    return 1;
  } catch (const CheckpointError& e) {
    std::cerr << e.what() << "\n";
  }
  loadmodel(model, map_tensors(s, [](const std::string& name, const Tensor& t) {
    return name == "layers.0.weight" ? permutedims(t, {1, 0}) : t;   // [n, d] -> (d, n)
  }));
  Tensor y = model(permutedims(tokens, {1, 0}));   // tokens [B, T] -> (T, B); y is (6, T, B)
  if (y.shape() != Shape{6, 5, 2}) return 1;

  LayerNorm ln({5, 4});   // PyTorch's nn.LayerNorm((4, 5))
  loadmodel(ln, rename(map_tensors(load("torch_layernorm.safetensors"), [](const std::string&, const Tensor& t) {
    return permutedims(t, {1, 0});   // [4, 5] -> (5, 4)
  }), [](const std::string& key) { return key == "weight" ? std::string("scale") : key; }));
  if (ln.scale.shape() != Shape{5, 4}) return 1;
}
