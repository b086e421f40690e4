// README.md, "Data and checkpoints": Fashion-MNIST kept as UInt8 and widened
// per batch through mapobs in a DataLoader, a checkpoint saved and loaded,
// and the shapes the comments give.
#include <flx/flx.hpp>

#include <iostream>

using namespace flx;

int main() {
  Device dev = get_device();
  auto model = Chain(Dense(784, 256, relu), Dense(256, 10)) | dev;
  auto [X, Y] = datasets::fashion_mnist("train", UInt8);    // (28, 28, 1, 60000) bytes as stored, (60000)
  auto batch = [](const std::tuple<Tensor, Tensor>& b) {    // each batch widened as it is made
    return std::tuple{datasets::scaled_pixels(std::get<0>(b)), onehotbatch(std::get<1>(b), 10)};
  };
  auto loader = DataLoader(mapobs(batch, std::tuple{reshape(X, {784, -1}), Y}),
                           {.batchsize = 64, .shuffle = true}) | dev;   // batches arrive on dev, prefetched
  for (auto [x, y] : loader) { /* withgradient, update */ }
  save("model.safetensors", model);                        // from any device, atomically
  loadmodel(model, load("model.safetensors"));             // names, shapes and dtypes checked
  if (X.shape() != Shape{28, 28, 1, 60000} || X.dtype() != UInt8 || Y.shape() != Shape{60000}) {
    std::cerr << "Fashion-MNIST's training set has shapes " << X.shape() << " (" << X.dtype() << "), " << Y.shape()
              << "\n";
    return 1;
  }
}
