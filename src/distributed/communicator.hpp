// What MPIBackend and NCCLBackend are underneath: a communicator that
// starts collectives on tensors and hands back work to wait for. Not
// installed.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "flx/distributed.hpp"

namespace flx::distributed::detail {

enum class Collective { Allreduce, Broadcast, Reduce };
const char* collective_name(Collective c);

// A started collective.
class Work {
 public:
  virtual ~Work() = default;
  // Until it is done and its result is in the tensor; DistributedError when
  // it failed or missed its deadline (naming the collective and the rank at
  // fault where that can be told).
  virtual void wait() = 0;
};

class Communicator {
 public:
  virtual ~Communicator() = default;
  virtual std::string name() const = 0;  // "MPIBackend"
  int rank = 0, size = 1, node_rank = 0, node_size = 1;
  double timeout = 600;  // seconds, per collective

  // Start `kind` on x in place (every rank passes a tensor of the same
  // shape and element type; root for Broadcast and Reduce). `what` names it
  // in errors ("gradient bucket 2 of 3"). Avg is the sum divided by size.
  virtual std::unique_ptr<Work> start(Collective kind, const Tensor& x, ReduceOp op, int root,
                                      const std::string& what) = 0;
  // The same, waited for.
  void run(Collective kind, const Tensor& x, ReduceOp op, int root, const std::string& what) {
    start(kind, x, op, root, what)->wait();
  }
  // Ends the job on every rank after writing `message` (MPI_Abort).
  [[noreturn]] virtual void abort(const std::string& message, int code) = 0;

  std::atomic<int64_t> started{0};  // collectives started by this process
};

// The message prefix naming this process: "flx::distributed: rank 0 of 2".
std::string rank_label(const Communicator& c);

}  // namespace flx::distributed::detail
