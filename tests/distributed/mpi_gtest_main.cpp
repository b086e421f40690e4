// GoogleTest under mpiexec: every rank runs every test (the tests make
// collectives, so all ranks must), rank 0 reports, other ranks print only
// their failures, and every rank exits with the same status (a failure on
// any rank fails the run).
#include <flx/distributed.hpp>
#include <gtest/gtest.h>

#include <cstdio>

namespace {
// Prints a failed assertion of this rank, prefixed with its number.
class RankFailures : public testing::EmptyTestEventListener {
 public:
  explicit RankFailures(int rank) : rank_(rank) {}
  void OnTestPartResult(const testing::TestPartResult& r) override {
    if (r.failed())
      std::fprintf(stderr, "[rank %d] %s:%d: failure\n%s\n", rank_, r.file_name() ? r.file_name() : "?",
                   r.line_number(), r.summary());
  }

 private:
  int rank_;
};
}  // namespace

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  auto backend = flx::distributed::initialize<flx::distributed::MPIBackend>();
  if (backend.rank() != 0) {
    auto& listeners = testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new RankFailures(backend.rank()));
  }
  const int failed = RUN_ALL_TESTS() != 0;
  const double any = flx::distributed::allreduce(backend, double(failed), flx::distributed::ReduceOp::Max);
  if (backend.rank() == 0 && any && !failed) std::fprintf(stderr, "a test failed on another rank (see above)\n");
  return any ? 1 : 0;
}
