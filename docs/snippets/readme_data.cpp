// README.md, "Data and checkpoints": Fashion-MNIST through a DataLoader, a
// checkpoint saved and loaded, and the shapes the comments give.
#include <flx/flx.hpp>

#include <iostream>

using namespace flx;

int main() {
  Device dev = get_device();
  auto model = Chain(Dense(784, 256, relu), Dense(256, 10)) | dev;
  auto [X, Y] = datasets::fashion_mnist("train");           // (28, 28, 1, 60000), (60000)
  auto loader = DataLoader(std::tuple{reshape(X, {784, -1}), Y},
                           {.batchsize = 64, .shuffle = true}) | dev;   // batches arrive on dev, prefetched
  for (auto [x, y] : loader) { /* withgradient, update */ }
  save("model.safetensors", model);                        // from any device, atomically
  loadmodel(model, load("model.safetensors"));             // names, shapes and dtypes checked
  if (X.shape() != Shape{28, 28, 1, 60000} || Y.shape() != Shape{60000}) {
    std::cerr << "Fashion-MNIST's training set has shapes " << X.shape() << ", " << Y.shape() << "\n";
    return 1;
  }
}
