// The flx half of bench/compare_transformer_steps.py: the model zoo's
// char-transformer (examples/char_transformer.cpp, sized by --dim, --heads
// and --layers) started from a PyTorch checkpoint and trained on given
// batches, step by step, saving what the script compares with PyTorch.
//
//   transformer_steps --init INIT --batches BATCHES --out OUT
//                     [--dtype f32|f64] [--dim 64] [--heads 4] [--layers 2] [--lr 1e-3]
//                     [--dump N] [--steps N]
//
// INIT is the state_dict of bench/char_models_torch.py's CharTransformer
// (saved by safetensors.torch), converted through the key maps of
// docs/checkpoints.md: nn.Embedding weights transposed, nn.LayerNorm's
// weight as scale, nn.MultiheadAttention through torch_to_mha, nn.Linear as
// it is. Its dtype is the run's. BATCHES holds "x" and "y", [steps, batch,
// seq] Int64 (the inputs and the next bytes), and optionally "val_x" and
// "val_y", [n, seq]. Each step is one Adam(lr) step on zoo::char_loss, as
// the example takes. OUT receives "loss" (steps), then, for the first --dump
// steps, "grad.S.NAME" (the gradient at step S, 0-based) and "param.S.NAME"
// (the parameter after step S's update), under flx's names, and "val_loss"
// (a scalar, inference mode) after the last step when the batches hold
// validation windows.
#include <flx/flx.hpp>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "char_text.hpp"
#include "char_transformer_model.hpp"

using namespace flx;

namespace {

using zoo::CharTransformer;  // the example's model (examples/char_transformer_model.hpp)

// PyTorch's names (bench/char_models_torch.py) -> flx's, with the
// embeddings transposed ([n, d] -> (d, n)).
State from_torch(const State& torch_state, int64_t layers) {
  State s = torch_state;
  for (int64_t i = 0; i < layers; ++i) s = torch_to_mha(s, "blocks." + std::to_string(i) + ".attn.");
  s = rename(s, [](const std::string& key) -> std::string {
    if (key == "emb.weight") return "tokens.weight";
    if (key == "pos.weight") return "positions.weight";
    if (key == "ln.weight") return "ln.scale";
    std::string k = key;
    auto swap = [&](const std::string& from, const std::string& to) {
      const size_t at = k.find(from);
      if (at != std::string::npos) k.replace(at, from.size(), to);
    };
    swap(".mlp.0.", ".up.");
    swap(".mlp.2.", ".down.");
    if ((k.find(".ln1.") != std::string::npos || k.find(".ln2.") != std::string::npos) && k.ends_with(".weight"))
      k = k.substr(0, k.size() - 6) + "scale";
    return k;
  });
  return map_tensors(s, [](const std::string& name, const Tensor& t) {
    return name == "tokens.weight" || name == "positions.weight" ? permutedims(t, {1, 0}) : t;
  });
}

// Step s of a (seq, batch, steps) tensor: (seq, batch).
Tensor step_of(const Tensor& all, int64_t s) {
  const Tensor one = all.slice_last(s, s + 1);
  return reshape(one, Shape{all.shape()[0], all.shape()[1]});
}

[[noreturn]] void usage() {
  std::fprintf(stderr,
               "usage: transformer_steps --init INIT --batches BATCHES --out OUT [--dtype f32|f64] [--dim 64] "
               "[--heads 4] [--layers 2] [--lr 1e-3] [--dump N] [--steps N]\n"
               "       transformer_steps --write-init OUT --seed S [--seq 64] [--dim 64] [--heads 4] [--layers 2]\n"
               "       transformer_steps --write-batches OUT --seed S --steps N [--batch 32] [--seq 64]\n");
  std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  std::string init, batches, out, dtype = "f32", write_init, write_batches;
  int64_t dim = 64, heads = 4, layers = 2, dump = 0, steps = -1, seq = 64, batch = 32, seed = -1;
  double lr = 1e-3;
  for (int i = 1; i < argc; i += 2) {
    if (i + 1 >= argc) usage();
    const std::string f = argv[i], v = argv[i + 1];
    if (f == "--init") init = v;
    else if (f == "--batches") batches = v;
    else if (f == "--out") out = v;
    else if (f == "--write-init") write_init = v;
    else if (f == "--write-batches") write_batches = v;
    else if (f == "--dtype") dtype = v;
    else if (f == "--dim") dim = std::stoll(v);
    else if (f == "--heads") heads = std::stoll(v);
    else if (f == "--layers") layers = std::stoll(v);
    else if (f == "--lr") lr = std::stod(v);
    else if (f == "--dump") dump = std::stoll(v);
    else if (f == "--steps") steps = std::stoll(v);
    else if (f == "--seq") seq = std::stoll(v);
    else if (f == "--batch") batch = std::stoll(v);
    else if (f == "--seed") seed = std::stoll(v);
    else usage();
  }
  try {
    if (!write_init.empty()) {
      // The example's initial model for --seed, under flx's names (the
      // script maps them to PyTorch's): set_seed, then the model.
      if (seed < 1) usage();
      set_seed(uint64_t(seed));
      const zoo::CharText text = zoo::load_licenses();
      save(write_init, state(CharTransformer(int64_t(text.vocab.size()), seq, dim, heads, layers)));
      return 0;
    }
    if (!write_batches.empty()) {
      // The example's training windows for --seed: its generator and draws,
      // as "x" and "y" [steps, batch, seq].
      if (seed < 1 || steps < 1) usage();
      const zoo::CharText text = zoo::load_licenses();
      std::mt19937_64 rng{uint64_t(seed)};
      std::vector<int64_t> x, y;
      for (int64_t s = 0; s < steps; ++s) {
        auto [xs, ys] = zoo::windows(text.train, zoo::random_starts(text.train.size(), seq, batch, rng), seq);
        for (int64_t v : xs.to_vector<int64_t>()) x.push_back(v);
        for (int64_t v : ys.to_vector<int64_t>()) y.push_back(v);
      }
      // (seq, batch, steps), permuted to the file's [steps, batch, seq]
      State b;
      b.insert("x", permutedims(tensor(x, Shape{seq, batch, steps}), {2, 1, 0}));
      b.insert("y", permutedims(tensor(y, Shape{seq, batch, steps}), {2, 1, 0}));
      save(write_batches, b);
      return 0;
    }
    if (init.empty() || batches.empty() || out.empty() || (dtype != "f32" && dtype != "f64")) usage();
    const State torch_init = load(init), data = load(batches);
    // [steps, batch, seq] -> (seq, batch, steps): a step is one contiguous slice
    const Tensor xs = permutedims(data.at("x"), {2, 1, 0}), ys = permutedims(data.at("y"), {2, 1, 0});
    const int64_t vocab = torch_init.at("emb.weight").shape()[0];
    seq = xs.shape()[0];
    if (steps < 0) steps = xs.shape()[2];
    auto model = CharTransformer(vocab, seq, dim, heads, layers);
    if (dtype == "f64") model = fmap([](const Tensor& t) { return t.to(Float64); }, model);
    loadmodel(model, from_torch(torch_init, layers));
    OptState opt = setup(Adam(lr), model);
    std::vector<double> losses;
    State result;
    for (int64_t s = 0; s < steps; ++s) {
      const Tensor x = step_of(xs, s), y = step_of(ys, s);
      auto [l, g] = withgradient([&](const CharTransformer& m) { return zoo::char_loss(m(x), y); }, model);
      losses.push_back(l.item<double>());
      if (s < dump)
        for (const auto& [name, t] : state(std::get<0>(g))) result.insert("grad." + std::to_string(s) + "." + name, t);
      update(opt, model, std::get<0>(g));
      if (s < dump)
        for (const auto& [name, t] : state(model))
          result.insert("param." + std::to_string(s) + "." + name, t * 1.0);  // a copy: update writes in place
    }
    result.insert("loss", tensor(losses, Shape{int64_t(losses.size())}));
    if (data.contains("val_x")) {
      const Tensor vx = permutedims(data.at("val_x"), {1, 0}), vy = permutedims(data.at("val_y"), {1, 0});
      result.insert("val_loss", tensor(std::vector<double>{zoo::char_loss(model(vx), vy).item<double>()}, Shape{}));
    }
    save(out, result);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "transformer_steps: %s\n", e.what());
    return 1;
  }
}
