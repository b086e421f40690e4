// DataLoader: batching, shuffling, tuples, mapobs, bad input, and
// `loader | device` (background prefetch) on every available device.
#include <algorithm>
#include <cstdlib>
#include <functional>
#include <map>
#include <new>
#include <numeric>
#include <random>
#include <set>

#include "backend/pinned_pool.hpp"
#include "data_columns.hpp"
#include "tensor_impl.hpp"
#include "test_util.hpp"

using namespace flx;

namespace {

using flx::testing::columns;
using flx::testing::labels;


// The observation indices a batch holds, checked against its data column.
std::vector<int64_t> ids(const std::tuple<Tensor, Tensor>& b) {
  auto [x, y] = b;
  auto xv = x.to_vector<double>();
  auto yv = y.to_vector<int64_t>();
  EXPECT_EQ(x.size(1), y.size(0));
  for (size_t j = 0; j < yv.size(); ++j) {
    EXPECT_EQ(xv[2 * j], double(yv[j]));
    EXPECT_EQ(xv[2 * j + 1], 10.0 * double(yv[j]));
  }
  return yv;
}

template <class L>
std::vector<std::vector<int64_t>> epoch_ids(const L& loader) {
  std::vector<std::vector<int64_t>> out;
  for (const auto& b : loader) out.push_back(ids(b));
  return out;
}

}  // namespace

TEST(DataLoader, BatchesInOrderAreViews) {
  Tensor x = columns(10);
  DataLoader loader(x, {.batchsize = 4});
  EXPECT_EQ(loader.size(), 3);
  std::vector<int64_t> sizes;
  int64_t first = 0;
  for (Tensor b : loader) {
    sizes.push_back(b.size(1));
    EXPECT_EQ(detail::impl(b).storage, detail::impl(x).storage) << "an unshuffled batch is a view";
    EXPECT_EQ(b.to_vector<float>()[0], float(first));
    first += b.size(1);
  }
  EXPECT_EQ(sizes, (std::vector<int64_t>{4, 4, 2}));
  DataLoader whole(x, {.batchsize = 4, .partial = false});
  EXPECT_EQ(whole.size(), 2);
  int n = 0;
  for (Tensor b : whole) n += int(b.size(1) == 4);
  EXPECT_EQ(n, 2);
  EXPECT_EQ(DataLoader(x).size(), 10) << "batchsize defaults to 1, as in Flux";
}

TEST(DataLoader, ShuffleIsAFreshSeededPermutationEachEpoch) {
  DataLoader loader(std::tuple{columns(50), labels(50)}, {.batchsize = 8, .shuffle = true, .seed = 7});
  auto e1 = epoch_ids(loader), e2 = epoch_ids(loader);
  for (const auto& e : {e1, e2}) {
    std::vector<int64_t> all;
    for (const auto& b : e) all.insert(all.end(), b.begin(), b.end());
    std::vector<int64_t> sorted = all;
    std::sort(sorted.begin(), sorted.end());
    std::vector<int64_t> expect(50);
    std::iota(expect.begin(), expect.end(), 0);
    EXPECT_EQ(sorted, expect) << "each observation exactly once per epoch";
    EXPECT_NE(all, expect) << "shuffled";
  }
  EXPECT_NE(e1, e2) << "a new permutation each epoch";
  DataLoader again(std::tuple{columns(50), labels(50)}, {.batchsize = 8, .shuffle = true, .seed = 7});
  EXPECT_EQ(epoch_ids(again), e1) << "the same seed gives the same epochs";
  DataLoader other(std::tuple{columns(50), labels(50)}, {.batchsize = 8, .shuffle = true, .seed = 8});
  EXPECT_NE(epoch_ids(other), e1);
}

// ---- the shuffle's distribution ------------------------------------------------
// Pearson's chi-square tests, each with a false-alarm rate of 1e-6 for a
// uniform shuffle (3e-6 for the three). The seeds are fixed, so a test that
// passes once passes always; the rate says how unlikely a fair shuffle was to
// fail with whichever seeds.

namespace {

// The next epoch's order of observations 0..n-1: a loader of labels(n) with
// batchsize n has one batch.
template <class L>
std::vector<int64_t> next_order(const L& loader) {
  std::vector<int64_t> order;
  for (Tensor b : loader) order = b.to_vector<int64_t>();
  return order;
}
std::vector<int64_t> shuffled_order(int64_t n, uint64_t seed) {
  return next_order(DataLoader(labels(n), {.batchsize = n, .shuffle = true, .seed = seed}));
}

// Pearson's statistic of how often each of the n! orders of n items came
// out of `draws` calls to order(k); under a uniform shuffle it follows the
// chi-square distribution with n! - 1 degrees of freedom.
double chi_square_of_orders(int64_t n, int64_t draws, const std::function<std::vector<int64_t>(int64_t)>& order) {
  std::map<std::vector<int64_t>, int64_t> counts;
  for (int64_t k = 0; k < draws; ++k) ++counts[order(k)];
  std::vector<int64_t> p(static_cast<size_t>(n));
  std::iota(p.begin(), p.end(), 0);
  double orders = 1;
  for (int64_t i = 2; i <= n; ++i) orders *= double(i);
  double stat = 0, cells = 0;
  do {
    const double expected = double(draws) / orders, o = double(counts[p]);
    stat += (o - expected) * (o - expected) / expected;
    ++cells;
  } while (std::next_permutation(p.begin(), p.end()));
  EXPECT_EQ(double(counts.size()), cells) << "every draw is a permutation of 0.." << n - 1;
  return stat;
}

// Pearson's statistic of how often item i landed at position j, times
// (n-1)/n: each order puts one item at each position, so the n² counts are
// not a multinomial sample; scaled so, the statistic follows the chi-square
// distribution with (n-1)² degrees of freedom (the permutation matrix, less
// its mean, has covariance I/(n-1) on that (n-1)²-dimensional space).
double chi_square_of_positions(int64_t n, int64_t draws, const std::function<std::vector<int64_t>(int64_t)>& order) {
  std::vector<double> counts(static_cast<size_t>(n * n), 0.0);
  for (int64_t k = 0; k < draws; ++k) {
    const auto o = order(k);
    for (size_t j = 0; j < o.size(); ++j) counts[size_t(o[j]) * size_t(n) + j] += 1;
  }
  const double expected = double(draws) / double(n);
  double stat = 0;
  for (double c : counts) stat += (c - expected) * (c - expected) / expected;
  return stat * double(n - 1) / double(n);
}

// The chi-square quantiles with upper tail 1e-6 (scipy.stats.chi2.isf(1e-6, dof)).
constexpr double kChi2Orders4 = 70.55;     // 23 degrees of freedom: the 24 orders of 4
constexpr double kChi2Positions10 = 156.45;  // 81: positions of 10 items

// The classic biased shuffle, swapping each a[i] with any a[j] (n^n equally
// likely paths onto n! orders): the tests must reject it.
std::vector<int64_t> naive_shuffle(int64_t n, std::mt19937_64& rng) {
  std::vector<int64_t> a(static_cast<size_t>(n));
  std::iota(a.begin(), a.end(), 0);
  for (size_t i = 0; i < a.size(); ++i) std::swap(a[i], a[size_t(rng() % uint64_t(n))]);
  return a;
}

}  // namespace

TEST(DataLoader, ShuffleIsUniformOverSeedsAndEpochs) {
  // 24,000 draws: 1,000 expected per order of 4 (and 2,000 per cell of 10 x 10).
  const int64_t draws = 24000;
  EXPECT_LT(chi_square_of_orders(4, draws, [](int64_t k) { return shuffled_order(4, uint64_t(k)); }), kChi2Orders4)
      << "the first epoch over seeds 0, 1, 2, ...";
  DataLoader one_seed(labels(4), {.batchsize = 4, .shuffle = true, .seed = 12345});
  EXPECT_LT(chi_square_of_orders(4, draws, [&](int64_t) { return next_order(one_seed); }), kChi2Orders4)
      << "the epochs of one seed";
  EXPECT_LT(chi_square_of_positions(10, draws / 2, [](int64_t k) { return shuffled_order(10, uint64_t(k) + 1000000); }),
            kChi2Positions10)
      << "positions of 10 observations over seeds";
  // The tests have the power to see the classic bias, with the same numbers of draws.
  std::mt19937_64 rng(1);
  EXPECT_GT(chi_square_of_orders(4, draws, [&](int64_t) { return naive_shuffle(4, rng); }), kChi2Orders4);
  EXPECT_GT(chi_square_of_positions(10, draws / 2, [&](int64_t) { return naive_shuffle(10, rng); }), kChi2Positions10);
}

TEST(DataLoader, BadInputIsATypedError) {
  try {
    DataLoader bad(std::tuple{columns(5), labels(4)}, {.batchsize = 2});
    FAIL() << "mismatched observation counts must throw";
  } catch (const DimensionMismatch& e) {
    std::string m = e.what();
    EXPECT_NE(m.find("(2×5) with 5"), std::string::npos) << m;
    EXPECT_NE(m.find("(4) with 4"), std::string::npos) << m;
  }
  EXPECT_THROW(DataLoader(columns(5), {.batchsize = 0}), ArgumentError);
  EXPECT_THROW(DataLoader(columns(5), {.batchsize = -3}), ArgumentError);
  EXPECT_THROW(DataLoader<Tensor>{Tensor()}, ArgumentError);
  Tensor x = columns(4);
  const int64_t out_of_range[] = {1, 4};
  EXPECT_THROW(getobs(x, std::span<const int64_t>(out_of_range)), ArgumentError);
}

TEST(DataLoader, MapobsAppliesToEachBatch) {
  auto data = mapobs([](const std::tuple<Tensor, Tensor>& b) { return std::tuple{std::get<0>(b) * 2.0, std::get<1>(b)}; },
                     std::tuple{columns(6), labels(6)});
  DataLoader loader(data, {.batchsize = 4, .shuffle = true, .seed = 1});
  int64_t seen = 0;
  for (auto [x, y] : loader) {
    auto xv = x.to_vector<double>();
    auto yv = y.to_vector<int64_t>();
    for (size_t j = 0; j < yv.size(); ++j) EXPECT_EQ(xv[2 * j], 2.0 * double(yv[j]));
    seen += y.numel();
  }
  EXPECT_EQ(seen, 6);
}

TEST(DataLoader, MapobsWithAMoverIsTheSeedsEquivalent) {
  // The seed: gpu(DataLoader((X, Y))) is DataLoader(mapobs(gpu, (X, Y))).
  DataLoader via_mapobs(mapobs(gpu, std::tuple{columns(9), labels(9)}), {.batchsize = 4, .shuffle = true, .seed = 2});
  auto moved = DataLoader(std::tuple{columns(9), labels(9)}, {.batchsize = 4, .shuffle = true, .seed = 2}) | gpu;
  EXPECT_EQ(epoch_ids(via_mapobs), epoch_ids(moved));
}

TEST(DataLoader, ErrorsInThePrefetchThreadReachTheCaller) {
  auto data = mapobs(
      [](const Tensor& b) {
        if (b.to_vector<float>()[0] >= 4) throw ArgumentError("batch three is bad");
        return b;
      },
      columns(10));
  DataLoader loader(data, {.batchsize = 2});
  int batches = 0;
  try {
    for (const Tensor& b : loader | cpu) batches += int(b.size(1));
    FAIL() << "the error must reach the loop";
  } catch (const ArgumentError& e) {
    EXPECT_NE(std::string(e.what()).find("batch three"), std::string::npos);
  }
  EXPECT_EQ(batches, 4) << "the two good batches came first";
}

TEST(DataLoader, LeavingTheLoopEarlyStopsThePrefetcher) {
  DataLoader loader(std::tuple{columns(100), labels(100)}, {.batchsize = 3, .shuffle = true, .seed = 3});
  int n = 0;
  for (const auto& b : loader | cpu) {
    ids(b);
    if (++n == 2) break;  // the background thread must stop, not hang or crash
  }
  EXPECT_EQ(n, 2);
}

// ---- loader | device, on every device ---------------------------------------

class DeviceLoaderTest : public ::testing::TestWithParam<Device> {};

INSTANTIATE_TEST_SUITE_P(Devices, DeviceLoaderTest, ::testing::ValuesIn(flx::testing::conformance_devices()),
                         [](const auto& info) { return std::string(info.param.backend()) + std::to_string(info.param.ordinal()); });

TEST_P(DeviceLoaderTest, BatchesArriveOnTheDeviceAndStayValid) {
  Device dev = GetParam();
  auto data = std::tuple{columns(23), labels(23)};
  DataLoader host(data, {.batchsize = 5, .shuffle = true, .seed = 11});
  DataLoader twin(data, {.batchsize = 5, .shuffle = true, .seed = 11});
  std::vector<std::tuple<Tensor, Tensor>> held;  // kept past the loop: still valid
  auto on_dev = twin | dev;
  EXPECT_EQ(on_dev.size(), 5);
  for (const auto& b : on_dev) {
    EXPECT_EQ(std::get<0>(b).device(), dev);
    EXPECT_EQ(std::get<1>(b).device(), dev);
    held.push_back(b);
  }
  auto expected = epoch_ids(host);
  ASSERT_EQ(held.size(), expected.size());
  for (size_t k = 0; k < held.size(); ++k) EXPECT_EQ(ids(held[k]), expected[k]) << "batch " << k;
  // The next epoch is a new permutation, the same one the host loader draws.
  auto e2 = epoch_ids(on_dev);
  EXPECT_EQ(e2, epoch_ids(host));
  EXPECT_NE(e2, expected);
}

// The staging ring and its copy stream are kept across epochs; an epoch
// started while another runs (nested loops over one loader) gets a stager of
// its own; leaving a loop early and more batches than ring entries work.
TEST_P(DeviceLoaderTest, EpochsReuseTheStagingRingAndMayOverlap) {
  Device dev = GetParam();
  auto data = std::tuple{columns(40), labels(40)};
  DataLoader host(data, {.batchsize = 3, .shuffle = true, .seed = 4});
  auto on_dev = DataLoader(data, {.batchsize = 3, .shuffle = true, .seed = 4}) | dev;
  for (int epoch = 0; epoch < 3; ++epoch) {
    auto expected = epoch_ids(host);
    std::vector<std::vector<int64_t>> got;
    for (const auto& b : on_dev) got.push_back(ids(b));  // 14 batches through a ring of 4
    EXPECT_EQ(got, expected) << "epoch " << epoch;
  }
  auto outer_expected = epoch_ids(host);
  auto inner_expected = epoch_ids(host);
  std::vector<std::vector<int64_t>> outer, inner;
  for (const auto& b : on_dev) {
    outer.push_back(ids(b));
    if (outer.size() == 2)
      for (const auto& c : on_dev) inner.push_back(ids(c));
  }
  EXPECT_EQ(outer, outer_expected);
  EXPECT_EQ(inner, inner_expected);
  int n = 0;
  for (const auto& b : on_dev) {
    ids(b);
    if (++n == 5) break;
  }
  (void)epoch_ids(host);  // the epoch broken off above
  EXPECT_EQ(epoch_ids(on_dev), epoch_ids(host));
}

TEST_P(DeviceLoaderTest, DataAlreadyOnTheDeviceIsGatheredThere) {
  Device dev = GetParam();
  auto data = std::tuple{columns(17).to(dev), labels(17).to(dev)};
  DataLoader loader(data, {.batchsize = 4, .shuffle = true, .seed = 5});
  DataLoader host(std::tuple{columns(17), labels(17)}, {.batchsize = 4, .shuffle = true, .seed = 5});
  auto expected = epoch_ids(host);
  std::vector<std::vector<int64_t>> got;
  for (const auto& b : loader) {
    EXPECT_EQ(std::get<0>(b).device(), dev);
    got.push_back(ids(b));
  }
  EXPECT_EQ(got, expected);
  EXPECT_EQ(epoch_ids(loader | dev), epoch_ids(host)) << "loader | dev with data already there";
}

TEST_P(DeviceLoaderTest, GpuStyleMovesTurnFloat64IntoFloat32) {
  Device dev = GetParam();
  DataLoader loader(columns(6).to(Float64), {.batchsize = 4});
  for (const Tensor& b : move_to(loader, dev, /*gpu_eltype=*/true)) {
    EXPECT_EQ(b.dtype(), Float32);
    EXPECT_EQ(b.device(), dev);
  }
  for (const Tensor& b : loader | dev) EXPECT_EQ(b.dtype(), Float64) << "device objects keep element types";
}

// ---- the pinned-block cache behind Backend::host_alloc ---------------------------------------

TEST(PinnedPool, ReusesAFreedBlockOfTheSameSizeClass) {
  using detail::PinnedPool;
  EXPECT_EQ(PinnedPool::size_class(1), 256u);
  EXPECT_EQ(PinnedPool::size_class(300), 512u);
  EXPECT_EQ(PinnedPool::size_class((1 << 20) + 1), 2u << 20);
  PinnedPool pool;
  std::map<void*, size_t> live;  // what the "backend" has handed out, and its size
  int allocs = 0, frees = 0;
  auto alloc = [&](size_t n) {
    ++allocs;
    void* p = std::malloc(n);
    live[p] = n;
    return p;
  };
  auto release = [&](void* p) {
    ++frees;
    live.erase(p);
    std::free(p);
  };
  void* a = pool.take(25'000'000, alloc, release);
  EXPECT_GE(live.at(a), 25'000'000u);
  pool.give(a, release);
  EXPECT_EQ(pool.cached_bytes(), PinnedPool::size_class(25'000'000));
  // The same class again: the same block, no new allocation; another class: a new one.
  EXPECT_EQ(pool.take(24'900'000, alloc, release), a);
  void* b = pool.take(1000, alloc, release);
  EXPECT_NE(b, a);
  EXPECT_EQ(allocs, 2);
  EXPECT_EQ(frees, 0);
  pool.give(a, release);
  pool.give(b, release);
  // A failed allocation releases the cache and tries once more.
  int failures = 1;
  auto flaky = [&](size_t n) {
    if (failures-- > 0) throw std::bad_alloc();
    return alloc(n);
  };
  void* c = pool.take(100'000'000, flaky, release);
  EXPECT_EQ(frees, 2);  // both cached blocks went back first
  EXPECT_EQ(pool.cached_bytes(), 0u);
  // Past the cap, a freed block goes back to the backend.
  void* d = pool.take(PinnedPool::kMaxCachedBytes, alloc, release);
  pool.give(c, release);
  pool.give(d, release);
  EXPECT_EQ(frees, 3);
  EXPECT_EQ(pool.cached_bytes(), PinnedPool::size_class(100'000'000));
  EXPECT_EQ(live.size(), 1u);
  for (auto& [p, n] : std::map<void*, size_t>(live)) release(p);
}
