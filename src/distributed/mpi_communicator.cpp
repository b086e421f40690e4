// Collectives on tensors through MPI (MPIBackend): a host tensor's memory
// goes to MPI directly; a device tensor's through a pinned host buffer (or
// its device pointer, when MPI is CUDA-aware and the user has said so).
// MPI has no half-precision sums: Float16 and BFloat16 travel as Float32.
#include "distributed/mpi_communicator.hpp"

#include <climits>

#include "internal/distributed_interface.hpp"
#include "flx/ops.hpp"

namespace flx::distributed::detail {
namespace {

MPI_Datatype mpi_type(DType t) {
  switch (t) {
    case DType::Float32: return MPI_FLOAT;
    case DType::Float64: return MPI_DOUBLE;
    case DType::Int32: return MPI_INT32_T;
    case DType::Int64: return MPI_INT64_T;
    case DType::UInt8: return MPI_UINT8_T;
    case DType::Bool: return MPI_C_BOOL;
    default: return MPI_DATATYPE_NULL;  // halves travel as Float32
  }
}

MPI_Op mpi_op(ReduceOp op, DType t) {
  if (t == DType::Bool) return op == ReduceOp::Max ? MPI_LOR : MPI_LAND;
  switch (op) {
    case ReduceOp::Max: return MPI_MAX;
    case ReduceOp::Min: return MPI_MIN;
    default: return MPI_SUM;  // Avg: the sum, divided afterwards
  }
}

// Where MPI reads and writes a tensor's data, and how the result gets back.
class MpiWork final : public Work {
 public:
  MpiWork(MpiEngine& e, Collective kind, ReduceOp op, int root, int rank, int size, Tensor x, Tensor wire,
          void* pinned, std::shared_ptr<MpiEngine::Op> mpi)
      : engine_(e), kind_(kind), op_(op), root_(root), rank_(rank), size_(size), x_(std::move(x)),
        wire_(std::move(wire)), pinned_(pinned), mpi_(std::move(mpi)) {}
  ~MpiWork() override {
    if (!waited_) {
      // Never waited for (an exception on the way): MPI may still write
      // into the buffer, so it is kept rather than freed under MPI's feet.
      pinned_ = nullptr;
    }
    release();
  }

  void wait() override {
    if (waited_) return;
    waited_ = true;
    engine_.wait(*mpi_);  // DistributedError when it failed
    const bool changed = kind_ == Collective::Allreduce || (kind_ == Collective::Broadcast && rank_ != root_) ||
                         (kind_ == Collective::Reduce && rank_ == root_);
    if (!changed) return release();
    flx::internal::RecordingPause pause;
    const auto be = flx::internal::BackendCalls::of(wire_);
    const int dev = wire_.device().ordinal();
    if (pinned_) {
      be.copy_h2d(dev, flx::internal::mem(wire_), pinned_, flx::internal::checked_nbytes(wire_.shape(), wire_.dtype()));
      be.synchronize(dev);  // before the pinned buffer goes
      release();
    }
    if (op_ == ReduceOp::Avg) flx::internal::divide_in_place(wire_, double(size_));
    if (wire_.id() != x_.id())  // a half tensor that travelled as Float32
      be.cast(dev, flx::internal::mem(x_), x_.dtype(), flx::internal::mem(wire_), wire_.dtype(), size_t(x_.numel()));
  }

 private:
  void release() {
    if (pinned_) flx::internal::BackendCalls::of(wire_).host_free(pinned_);
    pinned_ = nullptr;
  }
  MpiEngine& engine_;
  Collective kind_;
  ReduceOp op_;
  int root_, rank_, size_;
  Tensor x_, wire_;
  void* pinned_;
  std::shared_ptr<MpiEngine::Op> mpi_;
  bool waited_ = false;
};

}  // namespace

const char* collective_name(Collective c) {
  switch (c) {
    case Collective::Allreduce: return "allreduce";
    case Collective::Broadcast: return "bcast";
    default: return "reduce";
  }
}

std::string rank_label(const Communicator& c) {
  return "flx::distributed: rank " + std::to_string(c.rank) + " of " + std::to_string(c.size);
}

void check_collective(const Communicator& c, Collective kind, const Tensor& x, ReduceOp op, int root) {
  const char* name = collective_name(kind);
  FLX_CHECK(x.defined(), ArgumentError, name, ": the tensor is undefined");
  FLX_CHECK(kind == Collective::Allreduce || (root >= 0 && root < c.size), ArgumentError, name, ": root ", root,
            " is not a rank of this job (0 to ", c.size - 1, ")");
  if (kind == Collective::Broadcast) return;
  FLX_CHECK(x.dtype() != DType::Bool || op == ReduceOp::Max || op == ReduceOp::Min, TypeError, name, " with ", op,
            " on a Bool tensor: Bool tensors combine with Max (or) and Min (and) only");
  FLX_CHECK(op != ReduceOp::Avg || is_floating(x.dtype()), TypeError, name, " with Avg on a ", x.dtype(),
            " tensor: averages need a floating element type; use Sum and divide, or convert first");
}

MpiCommunicator::MpiCommunicator(MpiEngine& e, bool cuda_aware) : engine_(e), cuda_aware_(cuda_aware) {
  rank = e.rank();
  size = e.size();
  node_rank = e.node_rank();
  node_size = e.node_size();
  timeout = e.timeout();
}

std::unique_ptr<Work> MpiCommunicator::start(Collective kind, const Tensor& x, ReduceOp op, int root,
                                             const std::string& what) {
  check_collective(*this, kind, x, op, root);
  flx::internal::RecordingPause pause;
  const bool half = x.dtype() == DType::Float16 || x.dtype() == DType::BFloat16;
  Tensor wire = half ? x.to(DType::Float32) : x;
  FLX_CHECK(wire.numel() <= INT_MAX, ArgumentError, collective_name(kind), ": ", wire.numel(),
            " elements in one tensor; MPI takes at most ", INT_MAX, " per call: split the tensor");
  const auto be = flx::internal::BackendCalls::of(wire);
  const int dev = wire.device().ordinal();
  const size_t nbytes = flx::internal::checked_nbytes(wire.shape(), wire.dtype());
  void* data = flx::internal::host_data(wire);
  void* pinned = nullptr;
#if FLX_BACKEND_ABI_MINOR >= 4
  if (!data && cuda_aware_ && wire.device().backend_id() == BackendId::CUDA) {
    data = be.device_address(dev, flx::internal::mem(wire));
    if (data) be.synchronize(dev);  // MPI reads it outside the stream's order
  }
#endif
  if (!data) {
    pinned = be.host_alloc(nbytes);
    try {
      be.copy_d2h(dev, pinned, flx::internal::mem(wire), nbytes);
      be.synchronize(dev);
    } catch (...) {
      be.host_free(pinned);
      throw;
    }
    data = pinned;
  }
  const MPI_Datatype type = mpi_type(wire.dtype());
  const MPI_Op mop = mpi_op(op, wire.dtype());
  const int count = int(wire.numel());
  const int me = rank;
  std::function<int(MPI_Comm, MPI_Request*)> launch;
  switch (kind) {
    case Collective::Allreduce:
      launch = [=, &engine = engine_](MPI_Comm c, MPI_Request* r) {
        return engine.iallreduce(data, count, type, mop, nbytes, c, r);
      };
      break;
    case Collective::Broadcast:
      launch = [=](MPI_Comm c, MPI_Request* r) { return MPI_Ibcast(data, count, type, root, c, r); };
      break;
    case Collective::Reduce:
      launch = [=](MPI_Comm c, MPI_Request* r) {
        return me == root ? MPI_Ireduce(MPI_IN_PLACE, data, count, type, mop, root, c, r)
                          : MPI_Ireduce(data, nullptr, count, type, mop, root, c, r);
      };
      break;
  }
  // What the other ranks must call too: compared with theirs if it fails.
  MpiEngine::Signature sig;
  sig.kind = int32_t(kind);
  sig.dtype = int32_t(x.dtype());
  sig.op = kind == Collective::Broadcast ? -1 : int32_t(op);
  sig.root = kind == Collective::Allreduce ? -1 : root;
  sig.count = x.numel();
  what.copy(sig.what, sizeof sig.what - 1);
  std::shared_ptr<MpiEngine::Op> mpi;
  try {
    mpi = engine_.submit(what, sig, std::move(launch));
  } catch (...) {
    if (pinned) be.host_free(pinned);
    throw;
  }
  ++started;
  return std::make_unique<MpiWork>(engine_, kind, op, root, rank, size, x, wire, pinned, std::move(mpi));
}

void MpiCommunicator::abort(const std::string& message, int code) { engine_.abort(message, code); }

}  // namespace flx::distributed::detail
