// docs/checkpoints.md, "Attention": a PyTorch nn.MultiheadAttention's
// state_dict (written here with PyTorch's names and layouts) loads through
// torch_to_mha. tests/interop/mha_interop.py checks the outputs and
// gradients against PyTorch itself.
#include <flx/flx.hpp>

#include <iostream>

using namespace flx;

int main() {
  {  // nn.MultiheadAttention(64, 8)'s state_dict: the stacked in-projection, the out-projection
    State sd;
    sd.insert("in_proj_weight", randn(3 * 64, 64) * 0.1);
    sd.insert("in_proj_bias", randn(3 * 64) * 0.1);
    sd.insert("out_proj.weight", randn(64, 64) * 0.1);
    sd.insert("out_proj.bias", randn(64) * 0.1);
    save("torch_mha.safetensors", sd);
  }
  MultiHeadAttention mha(64, {.nheads = 8, .bias = true});
  loadmodel(mha, torch_to_mha(load("torch_mha.safetensors")));
  const State s = load("torch_mha.safetensors");
  const bool same = (mha.k_proj.bias.to_vector<float>() ==
                     s.at("in_proj_bias").slice_last(64, 128).to_vector<float>());
  auto [y, alpha] = mha(rand(64, 10, 2));  // (E, L, N) self-attention
  std::cout << "keys' bias loaded: " << (same ? "yes" : "no") << "; y " << y.shape() << ", attention weights "
            << alpha.shape() << "\n";
  return same ? 0 : 1;
}
