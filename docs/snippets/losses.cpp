#include <flx/flx.hpp>
#include <iostream>

using namespace flx;

int main() {
  Tensor yhat = tensor({1.1f, 2.1f, 3.1f}), y = tensor({1.f, 2.f, 3.f});
  std::cout << mae(yhat, y).ndims() << " " << mae(yhat, y).item<float>() << "\n";  // 0-dim: the mean
  std::cout << huber_loss(yhat, y, {.delta = 0.05}).item<float>() << "\n";
  std::cout << mae(yhat, y, {.agg = Agg::none}).shape() << "\n";     // unreduced
  // From logits, stable at any size: no log(σ(x)).
  Tensor logits = tensor({2.f, -1.f, 3.1415927f, -200.f}), labels = tensor({1.f, 0.f, 1.f, 1.f});
  for (float v : logitbinarycrossentropy(logits, labels, {.agg = Agg::none}).to_vector<float>()) std::cout << v << ";";
  std::cout << "\n";
  // Classes along dim 0, one column per observation.
  Tensor targets = label_smoothing(onehotbatch({0, 2, 1}, 3), 0.3);
  Tensor scores = tensor({2.f, 0.f, -1.f, 0.f, 1.f, 3.f, 0.5f, 0.5f, 0.5f}, {3, 3});
  std::cout << targets << "\n";
  std::cout << logitcrossentropy(scores, targets).item<float>() << " "
            << focal_loss(softmax(scores), targets, {.gamma = 2}).item<float>() << "\n";
  // CTC: scores of 4 classes (the last, 3, is the blank) over 6 steps, and
  // a label sequence; the gradient is d loss / d scores.
  Tensor steps = zeros(4, 6), seq = tensor(std::vector<int64_t>{0, 2, 2});
  auto [l, g] = withgradient([&](const Tensor& s) { return ctc_loss(s, seq); }, steps);
  std::cout << l.item<float>() << " " << std::get<0>(g).shape() << "\n";
  try {
    mae(yhat, ones(2));
  } catch (const DimensionMismatch& e) {
    std::cout << e.what() << "\n";
  }
}
