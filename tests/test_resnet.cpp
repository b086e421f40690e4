// The model zoo's ResNet-18 (examples/resnet.hpp): torchvision's parameter
// count, its key map, and parity with torchvision's resnet18 in Float64:
// outputs in inference and in training, the loss, the gradients of the input
// and of every parameter, and the running statistics after a training pass.
//
// The reference is tests/parity/resnet18_fixture.safetensors, written by
// tests/parity/make_resnet18_fixture.py with PyTorch. The weights are not in
// it (46 MB in Float32): both sides compute them from a formula of the
// state_dict key and the element's index (the script's docstring), exact in
// Float64, so the model here loads the very numbers PyTorch's had, through
// torchvision's names and shapes and zoo::load_torchvision. Gradients of up
// to 4096 elements are compared whole; larger ones (the convolution and fc
// weights, the input) by 8 random projections, in which every element
// counts, 64 sampled elements and the sum of squares. Tolerance: 1e-10
// relative (Float64 on both sides; what differs is the order of the sums
// through 20 layers: on the CPU every check also held at 1e-13).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "flx/flx.hpp"
#include "resnet.hpp"

using namespace flx;

namespace {

constexpr double kTol = 1e-10;

const State& fixture() {
  static const State s = load(std::string(FLX_TEST_PARITY_DIR) + "/resnet18_fixture.safetensors");
  return s;
}
std::vector<double> fx(const std::string& name) { return fixture().at(name).to_vector<double>(); }

// The script's formula (make_resnet18_fixture.py).
uint64_t fnv1a64(const std::string& s) {
  uint64_t h = 0xCBF29CE484222325ull;
  for (unsigned char b : s) h = (h ^ b) * 0x100000001B3ull;
  return h;
}
uint64_t hash_at(uint64_t base, uint64_t i) {
  uint64_t z = base + (i + 1) * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
std::vector<double> v(const std::string& key, int64_t n) {
  const uint64_t base = fnv1a64(key);
  std::vector<double> out(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) out[size_t(i)] = 2.0 * (double(hash_at(base, uint64_t(i)) >> 11) * 0x1p-53) - 1.0;
  return out;
}

// A tensor of PyTorch's shape `dims` from its row-major values, as load()
// reads it from a file: flx's shape (d0, ..., dk) with the same elements.
Tensor torch_tensor(const std::vector<double>& rowmajor, const std::vector<int64_t>& dims) {
  if (dims.size() <= 1) return tensor(rowmajor, Shape(std::vector<int64_t>(dims.begin(), dims.end())));
  std::vector<int64_t> rev(dims.rbegin(), dims.rend());
  std::vector<int> perm;
  for (int d = int(dims.size()) - 1; d >= 0; --d) perm.push_back(d);
  return permutedims(tensor(rowmajor, Shape(rev)), perm);
}

// The state_dict of torchvision's resnet18 with the script's weights.
State torchvision_state() {
  State s;
  for (const auto& [name, shape] : fixture()) {
    if (!name.starts_with("shape/")) continue;
    const std::string key = name.substr(6);
    const std::vector<int64_t> dims = shape.to_vector<int64_t>();
    int64_t n = 1;
    for (int64_t d : dims) n *= d;
    if (key.ends_with("num_batches_tracked")) {
      s.insert(key, tensor(std::vector<int64_t>{0}, Shape(std::vector<int64_t>{})));
      continue;
    }
    std::vector<double> w = v(key, n);
    for (double& e : w) {
      if (dims.size() == 4) e = std::sqrt(6.0 / double(dims[1] * dims[2] * dims[3])) * e;
      else if (key == "fc.weight") e = std::sqrt(3.0 / 512.0) * e;
      else if (key.ends_with("bias") || key.ends_with("running_mean")) e = 0.1 * e;
      else e = 1.0 + 0.25 * e;  // BatchNorm weight, running_var
    }
    s.insert(key, torch_tensor(w, dims));
  }
  return s;
}

// A flx tensor's elements in PyTorch's row-major order of the same tensor:
// a Conv weight (kW, kH, in, out) unflipped is [out, in, kH, kW]'s bytes; a
// Dense weight (out, in) transposed is [out, in]'s.
std::vector<double> torch_order(const Tensor& t) {
  if (t.ndims() == 4) return flip_kernel(t, 2).to_vector<double>();
  if (t.ndims() == 2) return permutedims(t, {1, 0}).to_vector<double>();
  return t.to_vector<double>();
}

void expect_near_all(const std::vector<double>& got, const std::vector<double>& want, const std::string& what,
                     double scale = 0) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double m = scale;
  for (double w : want) m = std::max(m, std::abs(w));
  double worst = 0;
  size_t at = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double e = std::abs(got[i] - want[i]);
    if (!(e <= worst) || std::isnan(e)) worst = e, at = i;
  }
  EXPECT_LE(worst, kTol * m) << what << ": element " << at << " is " << got[at] << ", PyTorch's " << want[at]
                             << " (largest |value| " << m << ")";
}

// A gradient against the fixture: whole, or by projections, samples and its sum of squares.
void expect_gradient(const std::string& name, const std::vector<double>& g) {
  SCOPED_TRACE(name);
  const State& f = fixture();
  if (f.contains("full/" + name)) return expect_near_all(g, fx("full/" + name), name);
  ASSERT_TRUE(f.contains("proj/" + name)) << name << " is not in the fixture";
  const int64_t n = int64_t(g.size());
  double sumsq = 0;
  for (double e : g) sumsq += e * e;
  const double want_sumsq = fx("sumsq/" + name)[0];
  EXPECT_LE(std::abs(sumsq - want_sumsq), kTol * want_sumsq) << name << " sum of squares";
  const double norm = std::sqrt(want_sumsq);
  const std::vector<double> proj = fx("proj/" + name);
  for (size_t k = 0; k < proj.size(); ++k) {
    const std::vector<double> r = v("proj" + std::to_string(k) + ":" + name, n);
    double dot = 0;
    for (int64_t i = 0; i < n; ++i) dot += g[size_t(i)] * r[size_t(i)];
    // |r| ~ sqrt(n / 3): the projection's natural scale is |g| |r|.
    EXPECT_LE(std::abs(dot - proj[k]), kTol * norm * std::sqrt(double(n) / 3)) << name << " projection " << k;
  }
  const std::vector<double> sample = fx("sample/" + name);
  const uint64_t base = fnv1a64("sample:" + name);
  std::vector<double> got(sample.size());
  for (size_t j = 0; j < sample.size(); ++j) got[j] = g[size_t(hash_at(base, j) % uint64_t(n))];
  expect_near_all(got, sample, name + " samples", norm / std::sqrt(double(n)));
}

int64_t parameter_count(const auto& model) {
  int64_t n = 0;
  for (const Tensor& t : leaves(model, true)) n += t.numel();
  return n;
}

}  // namespace

TEST(ResNet18, HasTorchvisionsParameterCount) {
  set_seed(1);
  EXPECT_EQ(parameter_count(zoo::resnet18()), 11'689'512);
  EXPECT_EQ(parameter_count(zoo::resnet18(10)), 11'689'512 - 513 * 1000 + 513 * 10);  // 11,181,642
  // 62 trained tensors and 40 running statistics: torchvision's 122 less 20 num_batches_tracked.
  EXPECT_EQ(state(zoo::resnet18()).size(), 102u);
  auto model = zoo::resnet18(10);
  EXPECT_EQ(outputsize(model, Shape{32, 32, 3, 4}), (Shape{10, 4}));
  EXPECT_EQ(outputsize(model, Shape{224, 224, 3, 1}), (Shape{10, 1}));
}

TEST(ResNet18, KeyMapCoversTorchvisionsStateDict) {
  std::set<std::string> ours;
  for (const auto& [name, t] : state(zoo::resnet18())) ours.insert(name);
  std::set<std::string> mapped;
  int dropped = 0;
  for (const auto& [name, shape] : fixture()) {
    if (!name.starts_with("shape/")) continue;
    const std::string key = name.substr(6), to = zoo::torchvision_key(key);
    if (to.empty()) {
      EXPECT_TRUE(key.ends_with("num_batches_tracked")) << key;
      ++dropped;
      continue;
    }
    EXPECT_TRUE(ours.count(to)) << key << " -> " << to << ", which the model does not have";
    EXPECT_TRUE(mapped.insert(to).second) << key << " -> " << to << " twice";
  }
  EXPECT_EQ(dropped, 20);
  EXPECT_EQ(mapped, ours);
  EXPECT_EQ(zoo::torchvision_key("layer1.0.conv1.weight"), "layers.0.layers.3.layers.0.layers.layers.0.weight");
  EXPECT_EQ(zoo::torchvision_key("layer2.0.downsample.1.weight"), "layers.0.layers.4.layers.0.layers.1.layers.1.scale");
  EXPECT_EQ(zoo::torchvision_key("fc.weight"), "layers.1.layers.2.weight");
  EXPECT_EQ(zoo::torchvision_key("head.weight"), "head.weight");  // not ResNet-18's: loadmodel refuses it by name
}

TEST(ResNet18, MatchesTorchvisionInFloat64) {
  auto model = f64(zoo::resnet18(1000));
  zoo::load_torchvision(model, torchvision_state());

  const Tensor x = tensor(v("input", 2 * 3 * 64 * 64), Shape{64, 64, 3, 2});  // [2, 3, 64, 64]'s bytes
  const Tensor c = tensor(v("cotangent", 2 * 1000), Shape{1000, 2});           // [2, 1000]'s
  expect_near_all(testmode(model)(x).to_vector<double>(), fx("y_eval"), "inference output");

  Tensor y;
  auto [loss, grads] = withgradient(
      [&](const auto& m, const Tensor& xx) {
        y = m(xx);
        return sum(y * c);
      },
      model, x);
  expect_near_all(y.to_vector<double>(), fx("y_train"), "training output");
  EXPECT_NEAR(loss.item<double>(), fx("loss")[0], kTol * std::abs(fx("loss")[0]));

  expect_gradient("grad/x", std::get<1>(grads).to_vector<double>());  // (W, H, C, N): [N, C, H, W]'s bytes
  const State g = state(std::get<0>(grads)), now = state(model);
  int params = 0, running = 0;
  for (const auto& [name, shape] : fixture()) {
    if (!name.starts_with("shape/")) continue;
    const std::string key = name.substr(6), to = zoo::torchvision_key(key);
    if (to.empty()) continue;
    if (key.ends_with("running_mean") || key.ends_with("running_var")) {
      expect_near_all(now.at(to).to_vector<double>(), fx("running/" + key), key + " after the training pass");
      ++running;
    } else {
      ASSERT_TRUE(g.contains(to)) << "no gradient for " << key << " (" << to << ")";
      expect_gradient("grad/" + key, torch_order(g.at(to)));
      ++params;
    }
  }
  EXPECT_EQ(params, 62);
  EXPECT_EQ(running, 40);
}
