// Datasets: MNIST and Fashion-MNIST from their IDX files.
//
//   auto [x, y] = datasets::fashion_mnist("train");  // x (28, 28, 1, 60000) Float32 in [0, 1]
//                                                     // y (60000) Int64 labels 0..9
//   auto [p, _] = datasets::fashion_mnist("train", UInt8);  // p: the stored bytes 0..255,
//                                                           // a quarter of the memory
//
// UInt8 images are the way to keep a large dataset in memory: widen each
// batch as it is made, `mapobs` with scaled_pixels (see docs/gpu.md), which
// gives the Float32 loader's values bit for bit.
//
// Files are looked up in $FLX_DATA/<name>, then $FLX_DATA, then
// /usr/share/datasets/<name> (Debian's dataset-fashion-mnist puts
// Fashion-MNIST there), as train-images-idx3-ubyte.gz, train-labels-idx1-ubyte.gz,
// t10k-images-idx3-ubyte.gz and t10k-labels-idx1-ubyte.gz (gzipped or not).
// Each file is checked before its data is read (IDX magic, 28×28 images, no
// more items than the split has; fewer is fine) and must hold exactly what
// its header promises; anything else, or a path that is not a regular file,
// is a flx::Error naming the path and saying what to do.
#pragma once

#include "flx/export.hpp"

#include <string>

#include "flx/tensor.hpp"

namespace flx::datasets {

struct FLX_API Dataset {
  Tensor features;  // (28, 28, 1, N) Float32 or UInt8: width, height, channel, observation
  Tensor targets;   // (N) Int64 class labels
};

// split: "train" (60,000 images) or "test" (10,000). eltype: Float32 (pixels
// in [0, 1]) or UInt8 (the bytes as stored, 0..255); anything else is an
// ArgumentError.
FLX_API Dataset fashion_mnist(const std::string& split = "train", DType eltype = DType::Float32);
FLX_API Dataset mnist(const std::string& split = "train", DType eltype = DType::Float32);

// UInt8 pixels (0..255, any shape, on any device) as Float32 in [0, 1],
// exactly as the Float32 loader makes them: float(b) * (1.0f / 255.0f).
FLX_API Tensor scaled_pixels(const Tensor& pixels);

// The class names of Fashion-MNIST, by label.
inline constexpr const char* fashion_mnist_classes[10] = {"T-shirt/top", "Trouser", "Pullover", "Dress", "Coat",
                                                          "Sandal",      "Shirt",   "Sneaker",  "Bag",   "Ankle boot"};

}  // namespace flx::datasets
