// NCCLBackend (nccl_communicator.hpp). A collective runs on the
// communicator's own stream, ordered after the work already queued on the
// tensor's stream, so gradient buckets reduce while the backward pass goes
// on; waiting for it polls its event and NCCL's asynchronous error against
// the deadline, and a collective that misses it aborts the communicator
// (ncclCommAbort) instead of hanging the GPU. Tensors that are not on this
// rank's GPU go through MPI.
#include "distributed/nccl_communicator.hpp"

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

#include "internal/distributed_interface.hpp"

namespace flx::distributed::detail {

#if FLX_BACKEND_ABI_MINOR >= 4
namespace {

using Clock = std::chrono::steady_clock;

int32_t comm_op(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return FLX_COMM_SUM;
    case ReduceOp::Avg: return FLX_COMM_AVG;
    case ReduceOp::Max: return FLX_COMM_MAX;
    default: return FLX_COMM_MIN;
  }
}

int32_t collective_kind(Collective c) {
  switch (c) {
    case Collective::Allreduce: return FLX_COLLECTIVE_ALLREDUCE;
    case Collective::Broadcast: return FLX_COLLECTIVE_BROADCAST;
    default: return FLX_COLLECTIVE_REDUCE;
  }
}

// Ends the job when a call into the plugin has not returned by its
// deadline: the first collective on a communicator waits inside NCCL until
// every rank has connected, and a rank that never comes would hold it there.
class CallWatchdog {
 public:
  explicit CallWatchdog(std::function<void(const std::string&)> expired)
      : expired_(std::move(expired)), thread_([this] { run(); }) {}
  ~CallWatchdog() {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  // Watches the caller's scope: `what` must return within `seconds`.
  class Scope {
   public:
    Scope(CallWatchdog& w, std::string what, double seconds) : w_(w) {
      {
        std::lock_guard lock(w_.mu_);
        w_.what_ = std::move(what);
        w_.deadline_ = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
        w_.active_ = true;
      }
      w_.cv_.notify_all();
    }
    ~Scope() {
      {
        std::lock_guard lock(w_.mu_);
        w_.active_ = false;
      }
      w_.cv_.notify_all();
    }
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    CallWatchdog& w_;
  };

 private:
  void run() {
    std::unique_lock lock(mu_);
    while (!stop_) {
      if (!active_) {
        cv_.wait(lock);
        continue;
      }
      if (cv_.wait_until(lock, deadline_, [&] { return stop_ || !active_; })) continue;
      const std::string what = what_;
      lock.unlock();
      expired_(what);  // ends the process
      lock.lock();
    }
  }
  std::function<void(const std::string&)> expired_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool active_ = false, stop_ = false;
  std::string what_;
  Clock::time_point deadline_{};
  std::thread thread_;
};

class NcclCommunicator;

class NcclWork final : public Work {
 public:
  NcclWork(NcclCommunicator& c, flx_event done, std::string what, Tensor x)
      : comm_(c), done_(done), what_(std::move(what)), x_(std::move(x)) {}
  ~NcclWork() override;
  void wait() override;

 private:
  NcclCommunicator& comm_;
  flx_event done_;
  std::string what_;
  Tensor x_;  // kept alive until the collective is done
  bool waited_ = false;
};

class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(MpiCommunicator& mpi, Device device, flx::internal::BackendCalls be, flx_comm comm)
      : mpi_(mpi), device_(device), be_(be), comm_(comm) {
    rank = mpi.rank;
    size = mpi.size;
    node_rank = mpi.node_rank;
    node_size = mpi.node_size;
    timeout = mpi.timeout;
    stream_ = be_.stream_create(device_.ordinal());
    watchdog_ = std::make_unique<CallWatchdog>([this](const std::string& what) {
      mpi_.abort(rank_label(*this) + ": " + what + " has not returned from NCCL within " + std::to_string(timeout) +
                     " s (the deadline): a rank has not joined it (stopped, gone, or making other collectives). "
                     "This job cannot go on: every rank ends it.",
                 1);
    });
  }
  std::string name() const override { return "NCCLBackend"; }

  std::unique_ptr<Work> start(Collective kind, const Tensor& x, ReduceOp op, int root,
                              const std::string& what) override {
    if (x.defined() && x.device() != device_) {
      FLX_CHECK(x.device().backend_id() != BackendId::CUDA, DeviceMismatch, collective_name(kind),
                ": the tensor is on ", x.device(), " but this rank's NCCL communicator is on ", device_,
                "; move it there first (each rank uses the GPU of its node rank)");
      ++started;
      return mpi_.start(kind, x, op, root, what);  // host tensors and other devices: MPI
    }
    check_collective(*this, kind, x, op, root);
    FLX_CHECK(!broken_, DistributedError, rank_label(*this), ": ", what,
              " refused: an earlier NCCL collective failed, and this job cannot go on");
    flx::internal::RecordingPause pause;
    const int dev = device_.ordinal();
    // After what is queued on the tensor's stream, on the communicator's.
    flx_event queued = be_.event_create(dev);
    be_.event_record(dev, queued);
    flx_event done = be_.event_create(dev);
    {
      flx::internal::StreamScope on(Device(BackendId::CUDA, dev), stream_);
      be_.stream_wait_event(dev, queued);
      flx_collective_desc d{};
      d.kind = collective_kind(kind);
      d.dtype = int32_t(x.dtype());
      d.op = comm_op(op);
      d.root = root;
      d.count = uint64_t(x.numel());
      d.send = d.recv = flx::internal::mem(x);
      CallWatchdog::Scope watched(*watchdog_, what, timeout);
      be_.collective(dev, comm_, d);
      be_.event_record(dev, done);
    }
    be_.event_destroy(dev, queued);
    ++started;
    return std::make_unique<NcclWork>(*this, done, what, x);
  }

  [[noreturn]] void abort(const std::string& message, int code) override {
    be_.comm_abort(comm_);
    mpi_.abort(message, code);
  }

  // Until `done` has happened; DistributedError (and the communicator
  // aborted) on NCCL's asynchronous error or past the deadline.
  void wait_for(flx_event done, const std::string& what) {
    const int dev = device_.ordinal();
    const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                             std::chrono::duration<double>(timeout));
    for (;;) {
      if (be_.event_query(dev, done)) break;
      std::string failure;
      try {
        be_.comm_poll(comm_);
      } catch (const Error& e) {
        failure = std::string("NCCL reports an error: ") + e.what();
      }
      if (failure.empty() && Clock::now() > deadline)
        failure = "did not complete within " + std::to_string(timeout) +
                  " s (the deadline: InitOptions::timeout or FLX_DISTRIBUTED_TIMEOUT); a rank is stopped, gone "
                  "or makes other collectives (NCCL cannot tell which: run with NCCL_DEBUG=WARN)";
      if (!failure.empty()) {
        broken_ = true;
        be_.comm_abort(comm_);
        throw DistributedError(rank_label(*this) + ": " + what + " " + failure +
                               ". This job cannot go on: every rank ends it.");
      }
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
    be_.stream_wait_event(dev, done);  // the tensor's stream: after the result
  }
  void release(flx_event e) { be_.event_destroy(device_.ordinal(), e); }
  Device device() const { return device_; }
  bool broken() const { return broken_; }

 private:
  MpiCommunicator& mpi_;
  Device device_;
  flx::internal::BackendCalls be_;
  flx_comm comm_;
  flx_stream stream_ = nullptr;
  bool broken_ = false;
  std::unique_ptr<CallWatchdog> watchdog_;
};

NcclWork::~NcclWork() {
  if (!waited_ && !comm_.broken()) {
    try {
      wait();
    } catch (...) {  // reported by the communicator's next use
    }
  }
  comm_.release(done_);
}
void NcclWork::wait() {
  if (waited_) return;
  waited_ = true;
  comm_.wait_for(done_, what_);
}

}  // namespace

std::shared_ptr<Communicator> start_nccl(MpiCommunicator& mpi) {
  std::optional<flx::internal::BackendCalls> be;
  int ndev = 0;
  try {
    be.emplace(Device(BackendId::CUDA, 0));
    ndev = be->device_count();
  } catch (const Error& e) {
    FLX_THROW(DistributedError, "initialize<NCCLBackend>: NCCL needs a CUDA GPU, and CUDA is not usable here: ",
              e.what(), ". Use MPIBackend on machines without NVIDIA GPUs");
  }
  FLX_CHECK(be->has_comm(), DistributedError, "initialize<NCCLBackend>: the CUDA plugin (ABI ", be->abi_version(),
            ") has no collectives (the \"comm\" table): rebuild flx with the CUDA toolkit's NCCL, or use MPIBackend");
  FLX_CHECK(mpi.node_size <= ndev, DistributedError, "initialize<NCCLBackend>: ", mpi.node_size,
            " processes run on this machine but it has ", ndev, " GPU", ndev == 1 ? "" : "s",
            ", so two ranks would share a GPU, which NCCL refuses. Start at most ", ndev,
            " process(es) per machine (mpiexec -n N --map-by ppr:", ndev, ":node)");
  const Device device(BackendId::CUDA, mpi.node_rank % ndev);
  flx_comm_id id{};
  if (mpi.rank == 0) id = be->comm_id();
  Tensor bytes = from_host(id.bytes, DType::UInt8, Shape{int64_t(sizeof id.bytes)});
  mpi.run(Collective::Broadcast, bytes, ReduceOp::Sum, 0, "bcast of the NCCL unique id");
  const auto got = bytes.to_vector<uint8_t>();
  std::copy(got.begin(), got.end(), id.bytes);
  flx_comm comm = be->comm_init(device.ordinal(), mpi.size, mpi.rank, id);
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                           std::chrono::duration<double>(mpi.timeout));
  for (;;) {
    bool ready = false;
    try {
      ready = be->comm_poll(comm);
    } catch (const Error& e) {
      be->comm_abort(comm);
      FLX_THROW(DistributedError, rank_label(mpi), ": the NCCL communicator could not start on ", device, ": ",
                e.what());
    }
    if (ready) break;
    if (Clock::now() > deadline) {
      be->comm_abort(comm);
      FLX_THROW(DistributedError, rank_label(mpi), ": the NCCL communicator did not start on ", device, " within ",
                mpi.timeout, " s: a rank did not join (stopped, gone, or not calling initialize<NCCLBackend>)");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return std::make_shared<NcclCommunicator>(mpi, device, *be, comm);
}

Device nccl_device(const Communicator& c) { return static_cast<const NcclCommunicator&>(c).device(); }

#else  // a libflx without the comm table (ABI minor < 4)

std::shared_ptr<Communicator> start_nccl(MpiCommunicator&) {
  FLX_THROW(DistributedError, "initialize<NCCLBackend>: this flx was built without collectives in its backend ABI");
}
Device nccl_device(const Communicator&) { return {}; }

#endif

}  // namespace flx::distributed::detail
