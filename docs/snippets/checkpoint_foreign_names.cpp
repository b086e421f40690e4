// docs/checkpoints.md, "Names": a checkpoint with PyTorch's names for
// nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2)), written here
// as the page's Python writes it, refused by a Chain with the call that loads it.
#include <flx/flx.hpp>

#include <iostream>

using namespace flx;

int main() {
  State torch_names;  // state_dict() order; nn.Linear's weight is [out, in]
  torch_names.insert("0.weight", rand(4, 3));
  torch_names.insert("0.bias", rand(4));
  torch_names.insert("2.weight", rand(2, 4));
  torch_names.insert("2.bias", rand(2));
  save("torch.safetensors", torch_names);

  auto model = Chain(Dense(3, 4, relu), Dense(4, 2));
  try {
    loadmodel(model, load("torch.safetensors"));
    return 1;
  } catch (const CheckpointError& e) {
    std::cout << e.what() << "\n";
  }
}
