// The C++ half of the attention interop test (mha_interop.py drives it):
//   mha_interop MODEL DATA OUT
// MODEL is the state_dict of PyTorch's nn.MultiheadAttention(8, 2) and DATA
// holds x and a cotangent c, [N, L, 8] each. The program loads MODEL
// through torch_to_mha into MultiHeadAttention(8, nheads=2, bias=true),
// runs it as causal self-attention on x (as (8, L, N)) and saves in OUT the
// output "y" (8, L, N), the attention weights "alpha" (L, L, 2, N), and the
// gradients of sum(y .* c): "dx" and "d<field>.weight"/"d<field>.bias" for
// q_proj, k_proj, v_proj and out_proj.
#include <flx/flx.hpp>

#include <cstdio>

using namespace flx;

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s MODEL DATA OUT\n", argv[0]);
    return 2;
  }
  try {
    MultiHeadAttention mha(8, {.nheads = 2, .bias = true});
    loadmodel(mha, torch_to_mha(load(argv[1])));
    const State data = load(argv[2]);
    // [N, L, E] as load() reads it: (N, L, E); flx's sequences are (E, L, N).
    const Tensor x = permutedims(data.at("x"), {2, 1, 0}), c = permutedims(data.at("c"), {2, 1, 0});
    Tensor y, alpha;
    auto [loss, grads] = withgradient(
        [&](const MultiHeadAttention& m, const Tensor& in) {
          std::tie(y, alpha) = m(in, {.causal = true});
          return sum(y * c);
        },
        mha, x);
    (void)loss;
    const auto& [dm, dx] = grads;
    State out;
    out.insert("y", y);
    out.insert("alpha", alpha);
    out.insert("dx", dx);
    for (const auto& [name, t] : state(dm)) out.insert("d" + name, t);
    save(argv[3], out);
    std::printf("mha_interop: %s loaded, outputs and gradients saved\n", "nn.MultiheadAttention");
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "mha_interop: %s\n", e.what());
    return 1;
  }
}
