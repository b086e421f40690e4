// MLUtils' data tools: splitobs, shuffleobs, kfolds, user data types, and the
// DataLoader's .collate, .parallel and .buffer.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <set>
#include <sstream>

#include "data_columns.hpp"
#include "tensor_impl.hpp"
#include "test_util.hpp"

using namespace flx;

namespace {

using flx::testing::columns;
using flx::testing::labels;

// The observation ids of a columns() tensor, checked for consistency.
std::vector<int64_t> col_ids(const Tensor& x) {
  auto xv = x.to_vector<double>();
  std::vector<int64_t> out;
  for (size_t j = 0; j < xv.size() / 2; ++j) {
    EXPECT_EQ(xv[2 * j + 1], 10.0 * xv[2 * j]);
    out.push_back(int64_t(xv[2 * j]));
  }
  return out;
}
std::vector<int64_t> ids(const std::tuple<Tensor, Tensor>& b) {
  auto ys = std::get<1>(b).to_vector<int64_t>();
  EXPECT_EQ(col_ids(std::get<0>(b)), ys);
  return ys;
}
std::vector<int64_t> iota(int64_t a, int64_t b) {
  std::vector<int64_t> v(static_cast<size_t>(b - a));
  std::iota(v.begin(), v.end(), a);
  return v;
}

// The bytes of every tensor of every batch of one epoch, with shapes.
template <class L>
std::vector<std::string> epoch_bytes(const L& loader) {
  std::vector<std::string> out;
  for (const auto& b : loader) {
    std::string s;
    for (const Tensor& t : leaves(b)) {
      // Float32 and Int64 values convert to Float64 exactly: equal doubles
      // are equal bits.
      auto v = t.to_vector<double>();
      std::ostringstream shape;
      shape << t.shape() << t.dtype() << ":";
      s += shape.str();
      s.append(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(double));
    }
    out.push_back(std::move(s));
  }
  return out;
}

template <class E, class F>
std::string message_of(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "wrong exception type: " << e.what();
    return {};
  }
  ADD_FAILURE() << "no exception";
  return {};
}
#define EXPECT_HAS(msg, part) EXPECT_NE((msg).find(part), std::string::npos) << (msg)

}  // namespace

// A user data type with only numobs and the range form of getobs: sequences
// of different lengths, observation i of length i % 3 + 1 holding i.
namespace user_data {
struct Ragged {
  int64_t n;
};
int64_t numobs(const Ragged& r) { return r.n; }
Tensor getobs(const Ragged& r, int64_t start, int64_t stop) {
  EXPECT_LE(stop, r.n);
  if (stop - start == 1) return full(double(start), start % 3 + 1, 1);
  // Many observations as a batch: each column holds its id (length 1).
  std::vector<float> v;
  for (int64_t i = start; i < stop; ++i) v.push_back(float(i));
  return tensor(v, {1, stop - start});
}
// Fixed-size observations, range form only.
struct Squares {
  int64_t n;
};
int64_t numobs(const Squares& s) { return s.n; }
Tensor getobs(const Squares& s, int64_t start, int64_t stop) {
  EXPECT_LE(stop, s.n);
  std::vector<float> v;
  for (int64_t i = start; i < stop; ++i) v.insert(v.end(), {float(i), float(i * i)});
  return tensor(v, {2, stop - start});
}
}  // namespace user_data

TEST(DataTools, SplitobsSplitsInOrder) {
  auto [train, test] = splitobs(std::tuple{columns(10), labels(10)}, {.at = 0.7});
  EXPECT_EQ(numobs(train), 7);
  EXPECT_EQ(numobs(test), 3);
  EXPECT_EQ(ids(getobs(train, 0, 7)), iota(0, 7));
  EXPECT_EQ(ids(getobs(test, 0, 3)), iota(7, 10));
  EXPECT_EQ(ids(getobs(test, 1, 3)), iota(8, 10));
  const int64_t pick[] = {2, 0};
  EXPECT_EQ(ids(getobs(test, std::span<const int64_t>(pick))), (std::vector<int64_t>{9, 7}));
  // round(at * n) as Julia rounds: to nearest, ties to even.
  EXPECT_EQ(numobs(splitobs(columns(10), {.at = 0.25}).first), 2);
  EXPECT_EQ(numobs(splitobs(columns(10), {.at = 0.75}).first), 8);
  EXPECT_EQ(numobs(splitobs(columns(10), {.at = 0.0}).first), 0);
  EXPECT_EQ(numobs(splitobs(columns(10), {.at = 1.0}).second), 0);
  // Either part is DataLoader data.
  DataLoader loader(test, {.batchsize = 2});
  std::vector<std::vector<int64_t>> got;
  for (const auto& b : loader) got.push_back(ids(b));
  EXPECT_EQ(got, (std::vector<std::vector<int64_t>>{{7, 8}, {9}}));
  // Splitting a split.
  auto [a, b] = splitobs(train, {.at = 0.5});
  EXPECT_EQ(ids(getobs(b, 0, numobs(b))), (std::vector<int64_t>{4, 5, 6}));
  (void)a;
}

TEST(DataTools, SplitobsWithShuffleSplitsAPermutation) {
  auto data = std::tuple{columns(20), labels(20)};
  auto [tr, te] = splitobs(data, {.at = 0.6, .shuffle = true, .seed = 11});
  EXPECT_EQ(numobs(tr), 12);
  EXPECT_EQ(numobs(te), 8);
  auto a = ids(getobs(tr, 0, 12)), b = ids(getobs(te, 0, 8));
  std::vector<int64_t> all = a;
  all.insert(all.end(), b.begin(), b.end());
  std::sort(all.begin(), all.end());
  EXPECT_EQ(all, iota(0, 20));
  EXPECT_NE(a, iota(0, 12)) << "shuffled";
  auto [tr2, te2] = splitobs(data, {.at = 0.6, .shuffle = true, .seed = 11});
  EXPECT_EQ(ids(getobs(tr2, 0, 12)), a);
  (void)te2;
}

TEST(DataTools, ShuffleobsIsAReproduciblePermutation) {
  auto data = std::tuple{columns(30), labels(30)};
  set_seed(7);
  auto s1 = shuffleobs(data);
  set_seed(7);
  auto s2 = shuffleobs(data);
  auto o1 = ids(getobs(s1, 0, 30));
  EXPECT_EQ(o1, ids(getobs(s2, 0, 30))) << "set_seed makes it reproducible";
  auto sorted = o1;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(sorted, iota(0, 30));
  EXPECT_NE(o1, iota(0, 30));
  EXPECT_NE(ids(getobs(shuffleobs(data), 0, 30)), o1) << "the next draw differs";
  EXPECT_EQ(ids(getobs(shuffleobs(data, 3), 0, 30)), ids(getobs(shuffleobs(data, 3), 0, 30)));
  // Ranges read the permuted order, and a DataLoader reads it in batches.
  EXPECT_EQ(ids(getobs(s1, 5, 9)), std::vector<int64_t>(o1.begin() + 5, o1.begin() + 9));
  std::vector<int64_t> seen;
  for (const auto& b : DataLoader(s1, {.batchsize = 7})) {
    auto v = ids(b);
    seen.insert(seen.end(), v.begin(), v.end());
  }
  EXPECT_EQ(seen, o1);
}

TEST(DataTools, KfoldsMatchesMLUtilsExample) {
  // MLUtils' docstring: kfolds(10, 5), here 0-based.
  auto [train, val] = kfolds(10, 5);
  std::vector<std::vector<int64_t>> want_train = {{2, 3, 4, 5, 6, 7, 8, 9},
                                                  {0, 1, 4, 5, 6, 7, 8, 9},
                                                  {0, 1, 2, 3, 6, 7, 8, 9},
                                                  {0, 1, 2, 3, 4, 5, 8, 9},
                                                  {0, 1, 2, 3, 4, 5, 6, 7}};
  std::vector<std::vector<int64_t>> want_val = {{0, 1}, {2, 3}, {4, 5}, {6, 7}, {8, 9}};
  EXPECT_EQ(train, want_train);
  EXPECT_EQ(val, want_val);
  // n % k folds get one more, first: 11 in 3 is 4, 4, 3.
  auto [t3, v3] = kfolds(11, 3);
  EXPECT_EQ(v3, (std::vector<std::vector<int64_t>>{{0, 1, 2, 3}, {4, 5, 6, 7}, {8, 9, 10}}));
  EXPECT_EQ(t3[2], iota(0, 8));
  EXPECT_EQ(kfolds(7).second.size(), 5u) << "k defaults to 5";
}

TEST(DataTools, ErrorsAreTypedAndSayWhatWasExpected) {
  auto m = message_of<ArgumentError>([] { splitobs(columns(4), {.at = 1.5}); });
  EXPECT_HAS(m, "splitobs");
  EXPECT_HAS(m, "[0, 1]");
  EXPECT_HAS(m, "1.5");
  m = message_of<ArgumentError>([] { splitobs(columns(4), {}); });
  EXPECT_HAS(m, "splitobs");
  EXPECT_HAS(m, "not given");
  m = message_of<ArgumentError>([] { kfolds(3, 5); });
  EXPECT_HAS(m, "kfolds");
  EXPECT_HAS(m, "2:n");
  EXPECT_HAS(m, "n = 3");
  EXPECT_HAS(m, "k = 5");
  EXPECT_THROW(kfolds(10, 1), ArgumentError);
  auto [a, b] = splitobs(columns(10), {.at = 0.7});
  m = message_of<ArgumentError>([&] { getobs(a, 0, 8); });
  EXPECT_HAS(m, "getobs");
  EXPECT_HAS(m, "[0, 7]");
  EXPECT_HAS(m, "[0, 8)");
  const int64_t bad[] = {3};
  EXPECT_THROW(getobs(b, std::span<const int64_t>(bad)), ArgumentError);
  m = message_of<ArgumentError>([] { flx::batch({}); });
  EXPECT_HAS(m, "batch");
  m = message_of<DimensionMismatch>([] { flx::batch({zeros(2), zeros(3)}); });
  EXPECT_HAS(m, "batch: expected every observation");
  EXPECT_HAS(m, "(3)");
  // The default collate on ragged observations names batch and the fix.
  DataLoader ragged(user_data::Ragged{6}, {.batchsize = 3, .collate = flx::batch});
  m = message_of<DimensionMismatch>([&] {
    for (const Tensor& t : ragged) (void)t;
  });
  EXPECT_HAS(m, "batch");
  EXPECT_HAS(m, "collate");
  DataLoader undefined(columns(4), {.batchsize = 2, .collate = [](const std::vector<Tensor>&) { return Tensor(); }});
  m = message_of<ArgumentError>([&] {
    for (const Tensor& t : undefined) (void)t;
  });
  EXPECT_HAS(m, "collate");
}

TEST(DataTools, UserTypesWorkWithSplitobsShuffleobsAndTheLoader) {
  user_data::Squares sq{10};
  auto check = [](const Tensor& t) {
    auto v = t.to_vector<double>();
    std::vector<int64_t> out;
    for (size_t j = 0; j < v.size() / 2; ++j) {
      EXPECT_EQ(v[2 * j + 1], v[2 * j] * v[2 * j]);
      out.push_back(int64_t(v[2 * j]));
    }
    return out;
  };
  auto [tr, te] = splitobs(sq, {.at = 0.8});
  EXPECT_EQ(check(getobs(te, 0, 2)), (std::vector<int64_t>{8, 9}));
  auto s = shuffleobs(sq, 5);
  auto order = check(getobs(s, 0, 10));  // gathered one observation at a time
  auto sorted = order;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(sorted, iota(0, 10));
  // A shuffling loader over the user type (range getobs only).
  std::vector<int64_t> seen;
  for (const Tensor& b : DataLoader(sq, {.batchsize = 4, .shuffle = true, .seed = 2, .parallel = true})) {
    auto v = check(b);
    seen.insert(seen.end(), v.begin(), v.end());
  }
  std::sort(seen.begin(), seen.end());
  EXPECT_EQ(seen, iota(0, 10));
  EXPECT_EQ(check(getobs(tr, 0, 8)), iota(0, 8));
}

TEST(DataLoaderCollate, BatchIsTheDefaultAndCustomCollatesPad) {
  auto data = std::tuple{columns(11), labels(11)};
  DataLoaderOptions plain{.batchsize = 4, .shuffle = true, .seed = 9};
  DataLoaderOptions stacked = plain;
  stacked.collate = flx::batch;
  EXPECT_EQ(epoch_bytes(DataLoader(data, plain)), epoch_bytes(DataLoader(data, stacked)));
  // A collate that pads ragged sequences to the longest (batchseq-like).
  auto pad = [](const std::vector<Tensor>& obs) {
    int64_t len = 0;
    for (const Tensor& o : obs) len = std::max(len, o.size(0));
    std::vector<float> v;
    for (const Tensor& o : obs) {
      auto ov = o.to_vector<float>();
      ov.resize(size_t(len), -1.0f);
      v.insert(v.end(), ov.begin(), ov.end());
    }
    return tensor(v, {len, int64_t(obs.size())});
  };
  DataLoader ragged(user_data::Ragged{7}, {.batchsize = 3, .collate = pad});
  std::vector<std::vector<float>> got;
  std::vector<Shape> shapes;
  for (const Tensor& b : ragged) {
    shapes.push_back(b.shape());
    got.push_back(b.to_vector<float>());
  }
  ASSERT_EQ(shapes.size(), 3u);
  EXPECT_EQ(shapes[0], Shape({3, 3}));
  EXPECT_EQ(got[0], (std::vector<float>{0, -1, -1, 1, 1, -1, 2, 2, 2}));
  EXPECT_EQ(shapes[2], Shape({1, 1}));
  EXPECT_EQ(got[2], (std::vector<float>{6}));
}

TEST(DataLoaderParallel, SameBatchesAsSerialBitForBit) {
  const int threads = num_threads();
  set_num_threads(3);  // several workers even on a 2-core machine
  Tensor x = randn(5, 3, 37);
  auto data = std::tuple{x, labels(37)};
  auto mapped = mapobs(
      [](const std::tuple<Tensor, Tensor>& b) {
        return std::tuple{flx::tanh(std::get<0>(b)) * 3.0 + 1.0, std::get<1>(b)};
      },
      data);
  for (uint64_t seed : {1u, 2u, 3u})
    for (int64_t bs : {1, 4, 10, 64})
      for (bool partial : {true, false})
        for (bool shuffle : {true, false}) {
          SCOPED_TRACE(::testing::Message() << "seed " << seed << " batchsize " << bs << " partial " << partial
                                            << " shuffle " << shuffle);
          DataLoaderOptions o{.batchsize = bs, .shuffle = shuffle, .partial = partial, .seed = seed};
          DataLoaderOptions p = o;
          p.parallel = true;
          DataLoader serial(data, o), par(data, p);
          auto a = epoch_bytes(serial);
          EXPECT_EQ(a, epoch_bytes(par));
          EXPECT_EQ(epoch_bytes(serial), epoch_bytes(par)) << "the second epoch too";
          EXPECT_EQ(epoch_bytes(DataLoader(mapped, o)), epoch_bytes(DataLoader(mapped, p)));
          p.buffer = true;
          EXPECT_EQ(epoch_bytes(DataLoader(mapped, o)), epoch_bytes(DataLoader(mapped, p))) << "with .buffer";
          EXPECT_EQ(epoch_bytes(DataLoader(data, o) | cpu), epoch_bytes(DataLoader(data, p) | cpu)) << "| cpu";
        }
  set_num_threads(threads);
}

TEST(DataLoaderParallel, ErrorsArriveAfterTheGoodBatchesBeforeThem) {
  auto data = mapobs(
      [](const Tensor& b) {
        if (b.to_vector<float>()[0] == 6) throw ArgumentError("batch four is bad");
        return b;
      },
      columns(20));
  DataLoader loader(data, {.batchsize = 2, .parallel = true});
  std::vector<int64_t> seen;
  try {
    for (const Tensor& b : loader) {
      auto v = col_ids(b);
      seen.insert(seen.end(), v.begin(), v.end());
    }
    FAIL() << "the error must reach the loop";
  } catch (const ArgumentError& e) {
    EXPECT_HAS(std::string(e.what()), "batch four");
  }
  EXPECT_EQ(seen, iota(0, 6));
  // Leaving early stops the workers (no hang).
  int n = 0;
  for (const auto& b : DataLoader(std::tuple{columns(200), labels(200)}, {.batchsize = 3, .parallel = true})) {
    ids(b);
    if (++n == 2) break;
  }
  EXPECT_EQ(n, 2);
  // Skipped batches (incremented without reading) are dropped in order.
  DataLoader skip(columns(10), {.batchsize = 2, .parallel = true});
  auto it = skip.begin();
  ++it;
  ++it;
  EXPECT_EQ(col_ids(*it), (std::vector<int64_t>{4, 5}));
}

TEST(DataLoaderBuffer, ReusesABatchsMemoryOnlyOnceItIsReleased) {
  auto data = std::tuple{columns(40), labels(40)};
  DataLoaderOptions o{.batchsize = 8, .shuffle = true, .seed = 4};
  DataLoaderOptions b = o;
  b.buffer = true;
  DataLoader plain(data, o), buffered(data, b);
  EXPECT_EQ(epoch_bytes(plain), epoch_bytes(buffered));
  // Released each iteration: one buffer per tensor, reused.
  std::set<const void*> addresses;
  for (const auto& [x, y] : buffered) {
    ids({x, y});
    addresses.insert(detail::host_data(x));
  }
  EXPECT_EQ(addresses.size(), 1u);
  // Held batches are never overwritten.
  std::vector<std::tuple<Tensor, Tensor>> held;
  for (const auto& batch : buffered) held.push_back(batch);
  std::set<const void*> distinct;
  for (const auto& [x, y] : held) {
    ids({x, y});
    distinct.insert(detail::host_data(x));
  }
  EXPECT_EQ(distinct.size(), held.size());
}

TEST(DataLoaderParallel, DataOnEveryDeviceGivesTheSerialBatches) {
  for (Device d : flx::testing::conformance_devices()) {
    SCOPED_TRACE(::testing::Message() << d);
    auto data = std::tuple{columns(13).to(d), labels(13).to(d)};
    DataLoaderOptions o{.batchsize = 4, .shuffle = true, .seed = 5};
    DataLoaderOptions p = o;
    p.parallel = true;
    p.buffer = true;
    EXPECT_EQ(epoch_bytes(DataLoader(data, o)), epoch_bytes(DataLoader(data, p)));
    EXPECT_EQ(epoch_bytes(DataLoader(data, o) | d), epoch_bytes(DataLoader(data, p) | d));
  }
}
