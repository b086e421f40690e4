// flx::distributed with 1, 2 and 3 ranks (tests/distributed/CMakeLists.txt
// runs this program under mpiexec): every rank runs every test.
#include <flx/distributed.hpp>
#include <flx/flx.hpp>
#include <gtest/gtest.h>

using namespace flx;
namespace dist = flx::distributed;

namespace {
dist::MPIBackend backend() { return dist::get_distributed_backend<dist::MPIBackend>(); }
}  // namespace

// Every combination of 1-7 ranks and 0-20 observations: the shares are
// contiguous, cover every observation exactly once, differ in size by at
// most one; fewer observations than ranks is an error.
TEST(DistributedData, SharesCoverEveryObservationOnce) {
  for (int workers = 1; workers <= 7; ++workers)
    for (int64_t n = 0; n <= 20; ++n) {
      if (n < workers) {
        EXPECT_THROW(dist::share_of(n, 0, workers), ArgumentError) << n << " observations, " << workers << " ranks";
        continue;
      }
      std::vector<int> seen(size_t(n), 0);
      int64_t smallest = n, largest = 0, expected_start = 0;
      for (int r = 0; r < workers; ++r) {
        auto [a, b] = dist::share_of(n, r, workers);
        EXPECT_EQ(a, expected_start) << "rank " << r << " of " << workers << ", n " << n;
        expected_start = b;
        smallest = std::min(smallest, b - a);
        largest = std::max(largest, b - a);
        for (int64_t i = a; i < b; ++i) ++seen[size_t(i)];
      }
      EXPECT_EQ(expected_start, n);
      EXPECT_GE(smallest, 1);
      EXPECT_LE(largest - smallest, 1);
      for (int64_t i = 0; i < n; ++i) EXPECT_EQ(seen[size_t(i)], 1) << "observation " << i;
    }
}
