// The text of the model zoo's character-level models (char_lstm.cpp,
// char_transformer.cpp; bench/char_models_torch.py does the same in
// PyTorch): Debian's license texts, which base-files puts on every Debian
// machine (/usr/share/common-licenses), as bytes.
#pragma once

#include <flx/flx.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

namespace zoo {

struct CharText {
  std::vector<uint8_t> vocab;         // the distinct bytes, sorted
  std::vector<int64_t> train, valid;  // indices into vocab: the first 90 % of the text, the last 10 %
};

// The regular files of `root` by name (symlinks left out: GPL is GPL-3),
// one after the other.
inline CharText load_licenses(const std::string& root = "/usr/share/common-licenses") {
  namespace fs = std::filesystem;
  FLX_CHECK(fs::is_directory(root), flx::ArgumentError, "the model zoo's text: ", root,
            " is not a directory; it comes with Debian's base-files package");
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(root))
    if (e.is_regular_file() && !e.is_symlink()) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  std::vector<uint8_t> bytes;
  for (const auto& n : names) {
    std::ifstream f(root + "/" + n, std::ios::binary);
    bytes.insert(bytes.end(), std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
  }
  CharText t;
  std::array<int64_t, 256> index{};
  std::array<bool, 256> seen{};
  for (uint8_t b : bytes) seen[b] = true;
  for (int b = 0; b < 256; ++b)
    if (seen[size_t(b)]) {
      index[size_t(b)] = int64_t(t.vocab.size());
      t.vocab.push_back(uint8_t(b));
    }
  const size_t cut = bytes.size() * 9 / 10;
  for (size_t i = 0; i < bytes.size(); ++i) (i < cut ? t.train : t.valid).push_back(index[bytes[i]]);
  return t;
}

// Inputs and targets (seq, batch) Int64 for windows of seq + 1 indices
// starting at `starts`: the targets are the inputs' next bytes.
inline std::pair<flx::Tensor, flx::Tensor> windows(const std::vector<int64_t>& ids,
                                                   const std::vector<int64_t>& starts, int64_t seq) {
  std::vector<int64_t> x, y;
  for (int64_t s : starts)
    for (int64_t t = 0; t < seq; ++t) {
      x.push_back(ids[size_t(s + t)]);
      y.push_back(ids[size_t(s + t + 1)]);
    }
  const flx::Shape shape{seq, int64_t(starts.size())};
  return {flx::tensor(x, shape), flx::tensor(y, shape)};
}

// `batch` window starts drawn uniformly from the training text.
inline std::vector<int64_t> random_starts(size_t n, int64_t seq, int64_t batch, std::mt19937_64& rng) {
  std::uniform_int_distribution<int64_t> pick(0, int64_t(n) - seq - 2);
  std::vector<int64_t> s(static_cast<size_t>(batch));
  for (auto& v : s) v = pick(rng);
  return s;
}

// The validation windows: `count` starts spread evenly over the text
// (numpy's linspace(0, n - seq - 1, count), truncated).
inline std::vector<int64_t> validation_starts(size_t n, int64_t seq, int64_t count = 32) {
  std::vector<int64_t> s;
  const double last = double(int64_t(n) - seq - 1);
  for (int64_t i = 0; i < count; ++i) s.push_back(int64_t(last * double(i) / double(count - 1)));
  return s;
}

// Mean cross-entropy of logits (V, seq, batch) against targets (seq, batch).
inline flx::Tensor char_loss(const flx::Tensor& logits, const flx::Tensor& targets) {
  const int64_t v = logits.shape()[0];
  return flx::logitcrossentropy(flx::reshape(logits, {v, -1}),
                                flx::onehotbatch(flx::reshape(targets, {-1}), v).to(logits.device()));
}

// `n` bytes sampled after `prompt` at temperature 1: model(ids (t, 1)) gives
// logits (V, t, 1), of which the last position's is used; the context is
// the last `seq` bytes.
template <class Model>
std::string sample(const Model& model, const CharText& text, const std::string& prompt, int n, int64_t seq,
                   uint64_t seed, flx::Device dev) {
  std::vector<int64_t> ids;
  for (unsigned char c : prompt)
    ids.push_back(int64_t(std::find(text.vocab.begin(), text.vocab.end(), c) - text.vocab.begin()));
  std::mt19937_64 rng(seed);
  for (int i = 0; i < n; ++i) {
    const int64_t t = std::min<int64_t>(seq, int64_t(ids.size()));
    std::vector<int64_t> ctx(ids.end() - t, ids.end());
    const flx::Tensor logits = model(flx::tensor(ctx, flx::Shape{t, 1}).to(dev));
    const int64_t v = logits.shape()[0];
    const std::vector<double> last =
        flx::softmax(flx::reshape(logits, {v, -1})).to(flx::Device::cpu()).to_vector<double>();
    std::discrete_distribution<int64_t> pick(last.end() - v, last.end());
    ids.push_back(pick(rng));
  }
  std::string out;
  for (int64_t id : ids) out.push_back(char(text.vocab[size_t(id)]));
  return out;
}

}  // namespace zoo
