// initialize / get_distributed_backend, what a backend says about itself,
// and how a process ends the job: at exit (MPI_Finalize, or MPI_Abort after
// a failed collective), on an uncaught exception, or by abort().
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <string>

#include "internal/distributed_interface.hpp"
#include "distributed/communicator.hpp"
#include "distributed/mpi_communicator.hpp"
#include "distributed/nccl_communicator.hpp"
#include "flx/distributed.hpp"

namespace flx::distributed {
namespace {

struct Started {
  std::mutex mu;
  std::shared_ptr<detail::MpiCommunicator> mpi;
  std::shared_ptr<detail::Communicator> nccl;
};
Started& started() {
  static auto* s = new Started;  // never destroyed: used at exit
  return *s;
}

double timeout_of(const InitOptions& o) {
  FLX_CHECK(o.timeout >= 0, ArgumentError, "initialize: timeout ", o.timeout,
            " s; expected a positive number of seconds (0: FLX_DISTRIBUTED_TIMEOUT, else 600)");
  if (o.timeout > 0) return o.timeout;
  if (const char* env = std::getenv("FLX_DISTRIBUTED_TIMEOUT"); env && *env) {
    char* end = nullptr;
    const double t = std::strtod(env, &end);
    FLX_CHECK(end && *end == '\0' && t > 0, ArgumentError, "FLX_DISTRIBUTED_TIMEOUT=\"", env,
              "\": expected a positive number of seconds (the deadline of each collective)");
    return t;
  }
  return 600;
}

// Whether the user declares MPI CUDA-aware (Flux's preference
// FluxDistributedMPICUDAAware, or FLX_DISTRIBUTED_MPI_CUDA_AWARE), and where.
bool cuda_aware_declared(std::string* source) {
  if (const char* env = std::getenv("FLX_DISTRIBUTED_MPI_CUDA_AWARE"); env && *env) {
    const std::string v = env;
    FLX_CHECK(v == "0" || v == "1" || v == "true" || v == "false", ArgumentError,
              "FLX_DISTRIBUTED_MPI_CUDA_AWARE=\"", v, "\": expected 1, 0, true or false");
    *source = "the environment variable FLX_DISTRIBUTED_MPI_CUDA_AWARE";
    return v == "1" || v == "true";
  }
  return flx::internal::preference_bool("FluxDistributedMPICUDAAware", source).value_or(false);
}

bool g_abort_on_uncaught = true;

// std::terminate on a rank: say why, and end the job on every rank.
[[noreturn]] void terminate_job() {
  std::string what = "an exception of unknown type";
  if (auto e = std::current_exception()) {
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& x) {
      what = x.what();
    } catch (...) {
    }
  } else {
    what = "std::terminate without an exception";
  }
  auto* engine = detail::MpiEngine::existing();
  const std::string who = engine ? engine->label() : std::string("flx::distributed");
  // A failed collective's message is on stderr already (the engine wrote
  // it when the collective failed): say that it was not caught rather than
  // repeat it.
  const std::string failure = engine ? engine->failure() : "";
  const std::string why = !failure.empty() && what.find(failure) != std::string::npos
                              ? "the error above was not caught"
                              : "uncaught exception: " + what;
  const std::string msg = who + ": " + why + "\n" + who + ": ending the job on every rank (MPI_Abort)";
  if (engine && g_abort_on_uncaught) engine->abort(msg, 1);
  std::fprintf(stderr, "%s\n", msg.c_str());
  std::abort();
}

void shutdown_at_exit() {
  if (auto* engine = detail::MpiEngine::existing()) engine->shutdown();
}

detail::MpiEngine& start_engine(const InitOptions& o) {
  const double timeout = timeout_of(o);
  detail::MpiEngine& e = detail::MpiEngine::instance(timeout);
  static std::once_flag once;
  std::call_once(once, [&] {
    g_abort_on_uncaught = o.abort_on_uncaught;
    std::set_terminate(terminate_job);
    std::atexit(shutdown_at_exit);
  });
  return e;
}

std::shared_ptr<detail::MpiCommunicator> start_mpi(const InitOptions& o) {
  Started& s = started();
  if (s.mpi) return s.mpi;
  detail::MpiEngine& e = start_engine(o);
  std::string source;
  const bool declared = cuda_aware_declared(&source);
  FLX_CHECK(!declared || e.cuda_aware_reported(), DistributedError,
            "initialize: ", source, " says that MPI is CUDA-aware, but this MPI says it is not "
            "(MPIX_Query_cuda_support() is 0, or MPI was built without CUDA support, as Debian's OpenMPI is). "
            "Set it to false (device tensors then travel through pinned host memory), or use an MPI built with CUDA");
  s.mpi = std::make_shared<detail::MpiCommunicator>(e, declared);
  return s.mpi;
}

}  // namespace

std::ostream& operator<<(std::ostream& os, ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return os << "Sum";
    case ReduceOp::Avg: return os << "Avg";
    case ReduceOp::Max: return os << "Max";
    default: return os << "Min";
  }
}

namespace detail {
Communicator& communicator_of(const DistributedBackend& b, const char* what) {
  FLX_CHECK(b.communicator(), DistributedError, what,
            ": the distributed backend is not initialised (it was made by default, not by initialize); "
            "start one with distributed::initialize<distributed::MPIBackend>() (or <distributed::NCCLBackend>), "
            "and use what it returns (or get_distributed_backend<...>() later)");
  return *b.communicator();
}
}  // namespace detail

int DistributedBackend::rank() const { return detail::communicator_of(*this, "rank()").rank; }
int DistributedBackend::size() const { return detail::communicator_of(*this, "size()").size; }
int DistributedBackend::node_rank() const { return detail::communicator_of(*this, "node_rank()").node_rank; }
int DistributedBackend::node_size() const { return detail::communicator_of(*this, "node_size()").node_size; }
std::string DistributedBackend::name() const { return detail::communicator_of(*this, "name()").name(); }
int64_t DistributedBackend::collectives_started() const {
  return detail::communicator_of(*this, "collectives_started()").started.load();
}
std::ostream& operator<<(std::ostream& os, const DistributedBackend& b) {
  if (!b.communicator()) return os << "DistributedBackend(not initialised)";
  return os << b.name() << "(rank " << b.rank() << " of " << b.size() << ")";
}

bool MPIBackend::cuda_aware() const {
  return static_cast<const detail::MpiCommunicator&>(detail::communicator_of(*this, "cuda_aware()")).cuda_aware();
}
Device NCCLBackend::device() const { return detail::nccl_device(detail::communicator_of(*this, "device()")); }

template <>
MPIBackend initialize<MPIBackend>(const InitOptions& opts) {
  std::lock_guard lock(started().mu);
  return MPIBackend(start_mpi(opts));
}

template <>
NCCLBackend initialize<NCCLBackend>(const InitOptions& opts) {
  Started& s = started();
  std::lock_guard lock(s.mu);
  auto mpi = start_mpi(opts);
  if (!s.nccl) s.nccl = detail::start_nccl(*mpi);
  return NCCLBackend(s.nccl, MPIBackend(mpi));
}

template <>
MPIBackend get_distributed_backend<MPIBackend>() {
  Started& s = started();
  std::lock_guard lock(s.mu);
  FLX_CHECK(s.mpi, DistributedError,
            "get_distributed_backend<MPIBackend>: the backend has not been initialised; call "
            "distributed::initialize<distributed::MPIBackend>() first");
  return MPIBackend(s.mpi);
}

template <>
NCCLBackend get_distributed_backend<NCCLBackend>() {
  Started& s = started();
  std::lock_guard lock(s.mu);
  FLX_CHECK(s.nccl, DistributedError,
            "get_distributed_backend<NCCLBackend>: the backend has not been initialised; call "
            "distributed::initialize<distributed::NCCLBackend>() first");
  return NCCLBackend(s.nccl, MPIBackend(s.mpi));
}

template <>
bool initialized<MPIBackend>() {
  std::lock_guard lock(started().mu);
  return started().mpi != nullptr;
}
template <>
bool initialized<NCCLBackend>() {
  std::lock_guard lock(started().mu);
  return started().nccl != nullptr;
}

void abort(const DistributedBackend& b, const std::string& message, int code) {
  (void)detail::communicator_of(b, "abort");
  const std::string label = detail::rank_label(*b.communicator());
  // A failed collective's message is on stderr already: refer to it
  // rather than print it again inside this one.
  auto* engine = detail::MpiEngine::existing();
  const std::string failure = engine ? engine->failure() : "";
  const size_t at = failure.empty() ? std::string::npos : message.find(failure);
  const std::string text = at == std::string::npos ? message : message.substr(0, at) + "the failed collective above";
  b.communicator()->abort(label + ": " + text + "\n" + label + ": ending the job on every rank (MPI_Abort)", code);
  std::_Exit(code);  // abort() does not return
}

}  // namespace flx::distributed
