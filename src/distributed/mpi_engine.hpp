// The process's MPI: one thread of flx's own makes every MPI call (it calls
// MPI_Init_thread, so MPI's "main thread" is it), starts collectives in the
// order they are submitted, and polls them against their deadline while
// the caller computes (true overlap: a non-blocking collective in OpenMPI
// progresses only while some thread calls into MPI). It also answers the
// other ranks' health pings, so that a rank whose collective times out can
// say which rank is at fault: one that does not answer (stopped, hung,
// dead) or one that answers but has not reached the collective. Not
// installed.
#pragma once

#include <mpi.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace flx::distributed::detail {

class MpiEngine {
 public:
  using Clock = std::chrono::steady_clock;
  // What a collective is, as every rank must make it: when one fails or
  // misses its deadline, the ranks exchange the signatures of that
  // collective (in their health pings), so that a mismatch (ranks calling
  // different collectives, or one with different shapes or element types)
  // is named as such. Plain bytes: it travels in a pong.
  struct Signature {
    int32_t kind = -1;   // Collective
    int32_t dtype = -1;  // the caller's DType
    int32_t op = -1;     // ReduceOp; -1 for a broadcast
    int32_t root = -1;   // -1 for an allreduce
    int64_t count = 0;   // elements
    char what[112] = {};  // the collective's description, cut to fit
    bool same_call(const Signature& o) const { return kind == o.kind && op == o.op && root == o.root; }
    bool same_data(const Signature& o) const { return dtype == o.dtype && count == o.count; }
  };
  // A collective: launch() calls the MPI_I* function on the engine's
  // thread with the collectives' communicator.
  struct Op {
    std::string what;  // "allreduce of gradient bucket 1 of 2 (262144 Float32 values, 1024.000 KiB, on CPU)"
    Signature sig;
    std::function<int(MPI_Comm, MPI_Request*)> launch;
    uint64_t seq = 0;  // 1-based, in start order; the same on every rank
    MPI_Request req = MPI_REQUEST_NULL;
    Clock::time_point started{};
    bool finished = false;
    std::string error;  // empty: it succeeded
  };

  // The engine (started on first call): MPI initialised on its thread,
  // communicators made. DistributedError when MPI cannot start.
  static MpiEngine& instance(double timeout);
  static MpiEngine* existing();  // null before instance()

  int rank() const { return rank_; }
  int size() const { return size_; }
  int node_rank() const { return node_rank_; }
  int node_size() const { return node_size_; }
  bool cuda_aware_reported() const { return cuda_aware_; }  // MPIX_Query_cuda_support
  double timeout() const { return timeout_; }
  // "flx::distributed: rank 0 of 2": how this process's messages begin.
  std::string label() const;

  // Queue a collective; the engine starts queued ones in order. Refused
  // (DistributedError) once a collective has failed.
  std::shared_ptr<Op> submit(std::string what, const Signature& sig, std::function<int(MPI_Comm, MPI_Request*)> launch);
  // Until op is finished; DistributedError with its message when it failed.
  void wait(Op& op);
  // MPI_Iallreduce in place of `bytes` bytes at data, with OpenMPI's
  // algorithm picked for its size (find_iallreduce_algorithm). Engine
  // thread only: from an Op's launch.
  int iallreduce(void* data, int count, MPI_Datatype type, MPI_Op op, size_t bytes, MPI_Comm c, MPI_Request* r);
  // Write message and end the job on every rank (MPI_Abort).
  [[noreturn]] void abort(const std::string& message, int code);
  // At exit: MPI_Finalize on the engine's thread, or MPI_Abort when a
  // collective failed (so no rank waits in MPI_Finalize for one that will
  // never come). Bounded by the deadline.
  void shutdown();
  // The failure that broke the engine ("" while none).
  std::string failure() const;

 private:
  explicit MpiEngine(double timeout);
  void run();
  bool start_mpi(std::string& error);
  void gather_where();
  void launch_queued();
  bool progress_active();
  void serve_pings();
  void check_deadline();
  void begin_diagnosis(const std::shared_ptr<Op>& op, std::string cause);
  void progress_diagnosis();
  void fail_all(const std::string& message);
  void find_iallreduce_algorithm();
  void finish(Op& op, const std::string& error);

  double timeout_;
  int rank_ = 0, size_ = 1, node_rank_ = 0, node_size_ = 1;
  bool cuda_aware_ = false;
  bool we_initialised_ = false;
  std::vector<std::string> where_;  // per rank, for messages: "pid 1234 on node7"
  MPI_Comm coll_ = MPI_COMM_NULL;    // collectives
  MPI_Comm health_ = MPI_COMM_NULL;  // pings
  // OpenMPI's coll_libnbc_iallreduce_algorithm (MPI_T), when flx picks it.
  bool mpi_t_ = false;
  MPI_T_cvar_handle nbc_algorithm_ = MPI_T_CVAR_HANDLE_NULL;

  mutable std::mutex mu_;
  std::condition_variable work_cv_;  // the engine: something to do
  std::condition_variable done_cv_;  // waiters: an op finished
  std::deque<std::shared_ptr<Op>> queued_;
  std::vector<std::shared_ptr<Op>> active_;  // engine thread only
  int waiters_ = 0;                          // threads blocked in wait()
  Clock::time_point wait_began_{};           // when waiters_ last left 0
  bool stop_ = false;
  bool exited_ = false;  // the thread has finalised MPI
  std::string broken_;
  uint64_t launched_ = 0, completed_ = 0;  // engine thread; sent in pongs
  // The signatures of the last collectives launched (engine thread), by
  // sequence number, for the pongs.
  std::deque<std::pair<uint64_t, Signature>> history_;

  // Health pings (engine thread only). A ping carries the sequence number
  // of the collective the pinging rank diagnoses; the pong, how far this
  // rank got and its signature of that collective, when it has launched it.
  struct Pong {
    uint64_t launched = 0, completed = 0;
    int32_t has_sig = 0, pad = 0;
    Signature sig;
  };
  uint64_t ping_in_ = 0;
  MPI_Request ping_req_ = MPI_REQUEST_NULL;
  std::vector<Pong> pong_out_;  // per peer
  std::vector<MPI_Request> pong_sends_;
  struct Diagnosis;
  std::unique_ptr<Diagnosis> diagnosis_;

  std::thread thread_;
};

}  // namespace flx::distributed::detail
