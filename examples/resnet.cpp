// ResNet-18 in torchvision's layout (examples/resnet.hpp) learning
// Fashion-MNIST: the 28×28 images padded to 32×32 with zeros, their one
// channel repeated to three, pixels in [0, 1]; a 10-class head; Adam(1e-3)
// on cross-entropy, batches of 32 reshuffled each epoch (partial batches
// dropped); then the test accuracy (BatchNorm on its running statistics).
// bench/resnet_torch.py is the same in PyTorch.
//
//   resnet [--epochs 1] [--limit 60000] [--steps 0] [--test 10000] [--batch 32] [--seed 1] [--device NAME]
//
// --limit N trains on the first N training images, --steps N stops after N
// steps (0: the whole epochs), --test N tests on the first N test images.
// The model prints on stderr, as Flux prints it, then the mean loss every
// 100 steps; stdout gets one JSON line: model, steps, images, seconds (of
// training), train_loss (the mean of the last 100 steps), test_accuracy.
// The data come from $FLX_DATA or /usr/share/datasets/fashion-mnist
// (flx/datasets.hpp); without them the example says so and exits with 77.
#include <flx/flx.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <string>

#include "resnet.hpp"

using namespace flx;

int main(int argc, char** argv) {
  int64_t epochs = 1, limit = 60000, steps = 0, ntest = 10000, batchsize = 32, seed = 1;
  std::string device;
  for (int i = 1; i < argc; i += 2) {
    const std::string f = argv[i];
    const std::string val = i + 1 < argc ? argv[i + 1] : "";
    char* end = nullptr;
    const long long n = std::strtoll(val.c_str(), &end, 10);
    const bool number = !val.empty() && *end == '\0' && n >= 0;
    if (f == "--device" && !val.empty()) device = val;
    else if (number && f == "--epochs" && n >= 1) epochs = n;
    else if (number && f == "--limit" && n >= 1) limit = n;
    else if (number && f == "--steps") steps = n;
    else if (number && f == "--test" && n >= 1) ntest = n;
    else if (number && f == "--batch" && n >= 1) batchsize = n;
    else if (number && f == "--seed") seed = n;
    else {
      std::fprintf(stderr,
                   "usage: resnet [--epochs N] [--limit N] [--steps N] [--test N] [--batch N] [--seed N] "
                   "[--device NAME]\n");
      return 2;
    }
  }

  datasets::Dataset train, test;
  try {
    train = datasets::fashion_mnist("train", UInt8);
    test = datasets::fashion_mnist("test", UInt8);
  } catch (const Error& e) {
    std::printf("resnet: no Fashion-MNIST here, nothing to learn (%s)\n", e.what());
    return 77;
  }
  limit = std::min(limit, numobs(train.features));
  ntest = std::min(ntest, numobs(test.features));
  limit = std::max(limit, batchsize);

  set_seed(uint64_t(seed));
  const Device dev = device.empty() ? get_device() : get_device(device);
  auto model = zoo::resnet18(10) | dev;
  std::cerr << model << "\n";
  auto opt = setup(Adam(1e-3), model);

  // (28, 28, 1, B) bytes -> (32, 32, 3, B) Float32 in [0, 1], on the loader's thread.
  auto images = [](const Tensor& bytes) { return repeat(pad_zeros(datasets::scaled_pixels(bytes), {2, 2, 2, 2}), {1, 1, 3, 1}); };
  auto batch = [&](const std::tuple<Tensor, Tensor>& b) {
    return std::tuple{images(std::get<0>(b)), onehotbatch(std::get<1>(b), 10)};
  };
  auto data = std::tuple{getobs(train.features, 0, limit), getobs(train.targets, 0, limit)};
  DataLoader loader(mapobs(batch, data),
                    {.batchsize = batchsize, .shuffle = true, .partial = false, .seed = uint64_t(seed)});
  std::fprintf(stderr, "training on %lld images, batches of %lld, on %s\n", static_cast<long long>(limit),
               static_cast<long long>(batchsize), dev.str().c_str());

  const auto t0 = std::chrono::steady_clock::now();
  double window = 0, last = 0;
  int64_t step = 0, in_window = 0;
  bool done = false;
  for (int64_t e = 0; e < epochs && !done; ++e) {
    for (auto [x, y] : loader | dev) {
      auto [l, grads] = withgradient([&](const auto& m) { return logitcrossentropy(m(x), y); }, model);
      update(opt, model, std::get<0>(grads));
      window += l.item<double>();
      ++in_window, ++step;
      if (step % 100 == 0) {
        last = window / double(in_window);
        std::fprintf(stderr, "step %5lld  loss %.4f  (%.0f s)\n", static_cast<long long>(step), last,
                     std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
        window = 0, in_window = 0;
      }
      if (step == steps) {
        done = true;
        break;
      }
    }
  }
  if (in_window) last = window / double(in_window);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  int64_t right = 0;
  for (int64_t i = 0; i < ntest; i += 500) {
    const int64_t j = std::min(ntest, i + 500);
    Tensor x = images(getobs(test.features, i, j)) | dev;
    right += sum(onecold(model(x)) == (getobs(test.targets, i, j) | dev)).item<int64_t>();
  }
  std::printf("{\"model\":\"resnet18\",\"steps\":%lld,\"images\":%lld,\"seconds\":%.2f,\"train_loss\":%.6f,"
              "\"test_accuracy\":%.4f}\n",
              static_cast<long long>(step), static_cast<long long>(limit), seconds, last,
              double(right) / double(ntest));
  return 0;
}
