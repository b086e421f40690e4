#include <flx/flx.hpp>
#include <iostream>

using namespace flx;

int main() {
  set_seed(1);
  auto model = Chain(Dense(3, 8, relu), Dense(8, 1));
  std::vector<std::tuple<Tensor, Tensor>> data;
  for (int i = 0; i < 100; ++i) {
    Tensor x = randn(3, 16);
    data.emplace_back(x, sum(x, {0}));
  }
  auto loss = [](const auto& m, const Tensor& x, const Tensor& y) { return mse(m(x), y); };

  // Mean gradients of 2 batches, weight decay by sign, then NAdam.
  auto state = setup(OptimiserChain(AccumGrad(2), SignDecay(1e-4), NAdam(3e-2)), model);
  std::cout << state.rule() << "\n";  // OptimiserChain(AccumGrad(2), SignDecay(0.0001), NAdam(0.03, (0.9, 0.999), 1e-08))
  std::vector<double> losses = train(loss, model, data, state);  // Flux's train!: one update per element
  std::cout << losses.size() << " " << (losses.back() < losses.front()) << "\n";  // 100 1

  adjust(state, 1e-3);                                             // the learning rate
  adjust<NAdam>(state, [](NAdam& r) { r.beta = {0.8, 0.99}; });   // any field
  std::cout << state.rule() << "\n";  // OptimiserChain(AccumGrad(2), SignDecay(0.0001), NAdam(0.001, (0.8, 0.99), 1e-08))
  std::cout << freeze(state, "layers.0") << "\n";  // 2
  thaw(state);

  std::cout << trainables(model).size() << "\n";  // 4
  auto [flat, re] = destructure(model);
  std::cout << flat.shape() << "\n";  // (41)
  auto halved = re(flat * 0.5);  // the model's type, every trainable number halved
  const float b = std::get<1>(model.layers).bias.item<float>();
  std::cout << (std::get<1>(halved.layers).bias.item<float>() == b / 2) << "\n";  // 1
}
