// docs/checkpoints.md, "Mapping names as you load": both forms of key map and
// rename() on a checkpoint with PyTorch's names (written here as the page's
// Python writes it); the errors the page quotes go to standard error.
#include <flx/flx.hpp>

#include <iostream>

using namespace flx;

// A model whose tensors are named encoder.weight and encoder.bias.
struct Net {
  Dense encoder;
};
FLX_FUNCTOR(Net, encoder)

void write_torch_checkpoint() {
  State torch_names;
  torch_names.insert("0.weight", rand(4, 3));
  torch_names.insert("0.bias", rand(4));
  torch_names.insert("2.weight", rand(2, 4));
  torch_names.insert("2.bias", rand(2));
  save("torch.safetensors", torch_names);
}

int main() {
  write_torch_checkpoint();
  {
    auto model = Chain(Dense(3, 4, relu), Dense(4, 2));
    loadmodel(model, load("torch.safetensors"), {{"0.", "layers.0."}, {"2.", "layers.1."}});
  }
  {
    Net model{Dense(3, 4)};
    State s;  // a BatchNorm-like counter besides the layer's tensors
    s.insert("weight", rand(4, 3));
    s.insert("bias", rand(4));
    s.insert("num_batches_tracked", ones(Int64, {1}));
    loadmodel(model, s, [](const std::string& key) -> std::string {
      if (key.ends_with("num_batches_tracked")) return "";
      return "encoder." + key;
    });
  }
  {
    State s = rename(load("torch.safetensors"), {{"0.", "layers.0."}, {"2.", "layers.1."}});
    std::cout << s << "\n";
    save("flx.safetensors", s);             // now loadmodel(model, load("flx.safetensors")) needs no map
    auto model = Chain(Dense(3, 4, relu), Dense(4, 2));
    loadmodel(model, load("flx.safetensors"));
  }
  // Refused loads, as the page quotes them.
  State wrong;
  wrong.insert("0.weight", rand(4, 3));
  wrong.insert("0.bias", rand(4));
  wrong.insert("2.weight", rand(3, 4));
  wrong.insert("2.bias", rand(2));
  try {
    auto model = Chain(Dense(3, 4, relu), Dense(4, 2));
    loadmodel(model, wrong, {{"0.", "layers.0."}, {"2.", "layers.1."}});
    return 1;
  } catch (const CheckpointError& e) {
    std::cerr << e.what() << "\n";
  }
}
