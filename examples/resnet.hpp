// ResNet-18 in torchvision's layout (He et al. 2015; torchvision.models.resnet18),
// written as a Flux user writes it (Metalhead.jl's style): a BasicBlock is a
// SkipConnection, or a Parallel with its downsampling shortcut, whose
// connection adds and applies relu; four stages of two blocks; the backbone
// and the head two Chains. Shared by examples/resnet.cpp, its test
// (tests/test_resnet.cpp) and its benchmark (bench/bench_resnet.cpp).
//
//   auto model = zoo::resnet18();        // 1000 classes: 11,689,512 parameters, as torchvision's
//   auto small = zoo::resnet18(10);      // a 10-class head (5,130 parameters instead of 513,000)
//   zoo::load_torchvision(model, load("resnet18.safetensors"));  // torchvision's state_dict
//
// Inputs are WHCN, (W, H, 3, N); the output is (classes, N) logits. The
// initialisation is torchvision's: convolutions kaiming_normal in its
// fan_out mode for relu (standard deviation sqrt(2 / (out · kH · kW)):
// flx's kaiming_normal, which divides by fan_in, with its gain scaled to
// match), BatchNorm scale 1 and bias 0; the head is Flux's Dense default
// (glorot_uniform, zero bias) rather than PyTorch's nn.Linear default.
//
// flx's names (state(model)) and torchvision's, for load_torchvision:
//
//   torchvision                       flx
//   conv1.weight                      layers.0.layers.0.weight          (Conv 7×7, flipped: torch_to_conv)
//   bn1.{weight,bias}                 layers.0.layers.1.{scale,bias}
//   bn1.running_{mean,var}            layers.0.layers.1.running_{mean,var}
//   bn1.num_batches_tracked           (left out: flx keeps no counter)
//   layer1.0.conv1.weight             layers.0.layers.3.layers.0.layers.layers.0.weight
//   layerS.B.{conv1,bn1,conv2,bn2}.*  layers.0.layers.(2+S).layers.B.<residual>.layers.{0,1,2,3}.*
//                                       <residual> = "layers" (a SkipConnection's block),
//                                       "layers.0" (a Parallel's first branch: S >= 2, B = 0)
//   layerS.0.downsample.{0,1}.*       layers.0.layers.(2+S).layers.0.layers.1.layers.{0,1}.*
//   fc.{weight,bias}                  layers.1.layers.2.{weight,bias}   (as they are: Linear's [out, in] is Dense's)
//
// torchvision_key(key) is that map; load_torchvision applies it, converts
// the 4-d tensors (Conv2d weights) with torch_to_conv and loads, as strictly
// as loadmodel (every tensor there, with its shape, nothing left over).
#pragma once

#include <flx/flx.hpp>

#include <cmath>
#include <cstdint>
#include <functional>
#include <string>

namespace zoo {

// The connection of a BasicBlock: relu(residual + shortcut), Metalhead's addact(relu, ...).
struct AddRelu {
  flx::Tensor operator()(const flx::Tensor& a, const flx::Tensor& b) const { return flx::relu(a + b); }
  static const char* name() { return "addrelu"; }
};
// Its shape rule (outputsize): the two shapes broadcast, as +.
inline flx::Shape outputsize(const AddRelu&, const flx::Shape& a, const flx::Shape& b) {
  return flx::outputsize(std::plus<>{}, a, b);
}

// torchvision's conv init: kaiming_normal(mode="fan_out", nonlinearity="relu").
inline flx::Tensor kaiming_normal_fan_out(const flx::Shape& dims) {
  const auto [fan_in, fan_out] = flx::nfan(dims);
  return flx::kaiming_normal(dims, {.gain = std::sqrt(2.0 * double(fan_in) / double(fan_out))});
}

// A k×k convolution without bias (BatchNorm follows), padding k ÷ 2.
inline flx::Conv conv_no_bias(int64_t k, int64_t in, int64_t out, int64_t stride) {
  return flx::Conv({k, k}, in, out, {.stride = stride, .pad = k / 2, .init = kaiming_normal_fan_out, .bias = false});
}

// conv3x3, BatchNorm, relu, conv3x3, BatchNorm: the residual branch of a BasicBlock.
inline auto basic_residual(int64_t in, int64_t out, int64_t stride) {
  return flx::Chain(conv_no_bias(3, in, out, stride), flx::BatchNorm(out, flx::relu), conv_no_bias(3, out, out, 1),
                    flx::BatchNorm(out));
}
// A BasicBlock whose shortcut is the identity.
inline auto basic_block(int64_t channels) { return flx::SkipConnection(basic_residual(channels, channels, 1), AddRelu{}); }
// A BasicBlock whose shortcut downsamples: a 1×1 convolution of the stride and a BatchNorm.
inline auto basic_block_down(int64_t in, int64_t out, int64_t stride) {
  return flx::Parallel(AddRelu{}, basic_residual(in, out, stride),
                       flx::Chain(conv_no_bias(1, in, out, stride), flx::BatchNorm(out)));
}

// ResNet-18: the stem (7×7/2 conv, BatchNorm, relu, 3×3/2 max pool), four
// stages of two BasicBlocks (64, 128, 256, 512 channels; the last three
// halve the size), then global mean pool, flatten, Dense(512 => classes).
inline auto resnet18(int64_t classes = 1000) {
  using namespace flx;
  auto stage = [](int64_t in, int64_t out) { return Chain(basic_block_down(in, out, 2), basic_block(out)); };
  auto backbone = Chain(conv_no_bias(7, 3, 64, 2), BatchNorm(64, relu), MaxPool({3, 3}, {.stride = 2, .pad = 1}),
                        Chain(basic_block(64), basic_block(64)), stage(64, 128), stage(128, 256), stage(256, 512));
  return Chain(std::move(backbone), Chain(AdaptiveMeanPool({1, 1}), Flatten(), Dense(512, classes)));
}
using ResNet18 = decltype(resnet18());

// torchvision's resnet18 state_dict key -> flx's name ("" for
// num_batches_tracked, which flx does not keep). A key of no ResNet-18 comes
// back unchanged, so that loadmodel names it in its refusal.
inline std::string torchvision_key(const std::string& key) {
  auto bn_field = [](const std::string& f) { return f == "weight" ? std::string("scale") : f; };
  auto dot = key.find('.');
  if (dot == std::string::npos) return key;
  const std::string head = key.substr(0, dot), rest = key.substr(dot + 1);
  if (rest == "num_batches_tracked" || rest.ends_with(".num_batches_tracked")) return "";
  if (head == "conv1" && rest == "weight") return "layers.0.layers.0.weight";
  if (head == "bn1") return "layers.0.layers.1." + bn_field(rest);
  if (head == "fc") return "layers.1.layers.2." + rest;
  if (head.size() != 6 || !head.starts_with("layer") || head[5] < '1' || head[5] > '4') return key;
  const int stage = head[5] - '0';
  // rest: "B.module.field" or "B.downsample.i.field"
  const auto d1 = rest.find('.');
  if (d1 == std::string::npos || (rest.substr(0, d1) != "0" && rest.substr(0, d1) != "1")) return key;
  const std::string block = rest.substr(0, d1), tail = rest.substr(d1 + 1);
  const std::string base = "layers.0.layers." + std::to_string(2 + stage) + ".layers." + block + ".";
  const bool down = stage >= 2 && block == "0";
  const std::string residual = base + (down ? "layers.0.layers." : "layers.layers.");
  static const char* modules[] = {"conv1.", "bn1.", "conv2.", "bn2."};
  for (int i = 0; i < 4; ++i) {
    if (tail.starts_with(modules[i])) {
      const std::string field = tail.substr(std::string(modules[i]).size());
      return residual + std::to_string(i) + "." + (i % 2 ? bn_field(field) : field);
    }
  }
  if (down && tail.starts_with("downsample.0.")) return base + "layers.1.layers.0." + tail.substr(13);
  if (down && tail.starts_with("downsample.1.")) return base + "layers.1.layers.1." + bn_field(tail.substr(13));
  return key;
}

// Loads a torchvision ResNet-18 state_dict (as load() reads a safetensors
// file of it: PyTorch's shapes) into a model of resnet18(classes).
template <class M>
const M& load_torchvision(const M& model, const flx::State& s) {
  const flx::State renamed = flx::rename(s, torchvision_key);
  return flx::loadmodel(model, flx::map_tensors(renamed, [](const std::string&, const flx::Tensor& t) {
                          return t.ndims() == 4 ? flx::torch_to_conv(t) : t;
                        }));
}

}  // namespace zoo
