#include <flx/flx.hpp>
#include <iostream>
using namespace flx;

int main() {
  auto model = Chain(Dense(4, 16, relu), Dense(16, 1)) | gpu;
  auto opt = setup(Adam(1e-2), model);
  Tensor x = rand(4, 256) | gpu;
  Tensor y = sum(x, {0});                          // learn the sum of the features
  TensorBoardLogger tb("runs/demo");               // a new event file in runs/demo
  tb.log_text("setup", "Adam(1e-2), a 4-16-1 MLP", 0);
  for (int step = 1; step <= 100; ++step) {
    auto [l, grads] = withgradient([&](const auto& m) { return mse(m(x), y); }, model);
    update(opt, model, std::get<0>(grads));
    tb.log_scalar("loss", l.item<float>(), step);
    if (step % 50 == 0)
      for (const auto& [name, w] : state(model)) tb.log_histogram(name, w, step);  // from any device
  }
  tb.flush();                                      // also done when tb goes out of scope
  std::cout << tb.path() << "\n";  // runs/demo/events.out.tfevents...
}
