// A small convolutional network learning Fashion-MNIST, as Flux's model zoo
// does it: Conv, BatchNorm, MaxPool, flatten and Dense in a Chain, trained
// with Adam on cross-entropy, then tested. Runs on get_device() (the CPU
// without a GPU).
//
//   cnn [--steps 500] [--train 60000] [--test 10000] [--batchsize 32]
//
// The data come from $FLX_DATA or /usr/share/datasets/fashion-mnist (see
// flx/datasets.hpp); without them the example says so and exits with 77.
#include <flx/flx.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>

using namespace flx;

int main(int argc, char** argv) {
  int64_t steps = 500, ntrain = 60000, ntest = 10000, batchsize = 32;
  for (int i = 1; i + 1 < argc; i += 2) {
    const int64_t v = std::atoll(argv[i + 1]);
    if (!std::strcmp(argv[i], "--steps")) steps = v;
    else if (!std::strcmp(argv[i], "--train")) ntrain = v;
    else if (!std::strcmp(argv[i], "--test")) ntest = v;
    else if (!std::strcmp(argv[i], "--batchsize")) batchsize = v;
    else {
      std::fprintf(stderr, "usage: cnn [--steps N] [--train N] [--test N] [--batchsize N]\n");
      return 2;
    }
  }

  // The images stay UInt8 (0..255) until a batch is made.
  datasets::Dataset train, test;
  try {
    train = datasets::fashion_mnist("train", UInt8);
    test = datasets::fashion_mnist("test", UInt8);
  } catch (const Error& e) {
    std::printf("cnn: no Fashion-MNIST here, nothing to learn (%s)\n", e.what());
    return 77;
  }
  ntrain = std::clamp<int64_t>(ntrain, 1, numobs(train.features));
  ntest = std::clamp<int64_t>(ntest, 1, numobs(test.features));

  set_seed(1);
  const Device dev = get_device();
  // (28, 28, 1, N) images -> 16 then 32 channels of 28×28, 14×14, 7×7 -> 10 logits.
  auto model = Chain(Conv({3, 3}, 1, 16, {.pad = 1}), BatchNorm(16, relu), MaxPool({2, 2}),
                     Conv({3, 3}, 16, 32, {.pad = 1}), BatchNorm(32, relu), MaxPool({2, 2}), Flatten(),
                     Dense(32 * 7 * 7, 10)) |
               dev;
  std::cout << model << "\n";
  auto opt = setup(Adam(1e-3), model);

  // Each batch: Float32 pixels in [0, 1] and one-hot targets, made on the
  // loader's thread.
  auto batch = [](const std::tuple<Tensor, Tensor>& b) {
    return std::tuple{datasets::scaled_pixels(std::get<0>(b)), onehotbatch(std::get<1>(b), 10)};
  };
  auto data = std::tuple{getobs(train.features, 0, ntrain), getobs(train.targets, 0, ntrain)};
  DataLoader loader(mapobs(batch, data), {.batchsize = batchsize, .shuffle = true, .partial = false, .seed = 1});
  std::printf("training on %lld images, %lld steps of %lld, on %s\n", static_cast<long long>(ntrain),
              static_cast<long long>(steps), static_cast<long long>(batchsize), dev.str().c_str());

  // BatchNorm trains inside withgradient (batch statistics) and infers
  // outside it (running statistics), as in Flux.
  const int64_t report = std::max<int64_t>(1, steps / 10);
  double window = 0, first = -1, last = 0;
  int64_t step = 0, in_window = 0;
  while (step < steps) {
    for (auto [x, y] : loader | dev) {
      auto [l, grads] = withgradient([&](const auto& m) { return logitcrossentropy(m(x), y); }, model);
      update(opt, model, std::get<0>(grads));
      window += l.item<double>();
      ++in_window;
      if (++step % report == 0 || step == steps) {
        last = window / double(in_window);
        if (first < 0) first = last;
        std::printf("step %4lld  loss %.4f\n", static_cast<long long>(step), last);
        window = 0, in_window = 0;
      }
      if (step == steps) break;
    }
  }

  int64_t right = 0;
  for (int64_t i = 0; i < ntest; i += 1000) {
    const int64_t j = std::min(ntest, i + 1000);
    Tensor x = datasets::scaled_pixels(getobs(test.features, i, j)) | dev;
    right += sum(onecold(model(x)) == (getobs(test.targets, i, j) | dev)).item<int64_t>();
  }
  std::printf("loss fell from %.4f to %.4f; test accuracy %.4f on %lld images\n", first, last,
              double(right) / double(ntest), static_cast<long long>(ntest));
  return 0;
}
