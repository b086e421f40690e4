// The public collectives: on one tensor, on host numbers, on whole trees
// (synchronize: one broadcast per element type and device, after checking
// that every rank holds the same layout), and each rank's share of data.
#include <algorithm>
#include <map>
#include <sstream>

#include "internal/distributed_interface.hpp"
#include "distributed/communicator.hpp"
#include "flx/distributed.hpp"

namespace flx::distributed {
namespace {

// "a (4) Float32 tensor on CPU", for messages.
std::string describe(const Tensor& x) {
  if (!x.defined()) return "an undefined tensor";
  std::ostringstream os;
  os << "a " << x.shape() << " " << x.dtype() << " tensor on " << x.device();
  return os.str();
}

detail::Communicator& comm_of(const DistributedBackend& b, const char* what) {
  return detail::communicator_of(b, what);
}

// Copy between a tensor and a region of a flat tensor of the same dtype
// and device (bytes at `offset`).
void copy_region(const Tensor& dst, uint64_t dst_offset, const Tensor& src, uint64_t src_offset, size_t bytes) {
  if (!bytes) return;
  flx_mem d = flx::internal::mem(dst), s = flx::internal::mem(src);
  d.offset += dst_offset;
  s.offset += src_offset;
  flx::internal::BackendCalls::of(dst).copy_d2d(dst.device().ordinal(), d, s, bytes);
}

}  // namespace

Tensor allreduce(const DistributedBackend& b, const Tensor& x, ReduceOp op) {
  comm_of(b, "allreduce").run(detail::Collective::Allreduce, x, op, 0, "allreduce of " + describe(x));
  return x;
}
Tensor bcast(const DistributedBackend& b, const Tensor& x, int root) {
  comm_of(b, "bcast").run(detail::Collective::Broadcast, x, ReduceOp::Sum, root,
                 "bcast from rank " + std::to_string(root) + " of " + describe(x));
  return x;
}
Tensor reduce(const DistributedBackend& b, const Tensor& x, ReduceOp op, int root) {
  comm_of(b, "reduce").run(detail::Collective::Reduce, x, op, root, "reduce to rank " + std::to_string(root) + " of " + describe(x));
  return x;
}
double allreduce(const DistributedBackend& b, double v, ReduceOp op) {
  Tensor t = tensor(std::vector<double>{v});
  allreduce(b, t, op);
  return t.item<double>();
}
double bcast(const DistributedBackend& b, double v, int root) {
  Tensor t = tensor(std::vector<double>{v});
  bcast(b, t, root);
  return t.item<double>();
}

namespace detail {

void broadcast_tree(const DistributedBackend& b, const std::vector<std::pair<std::string, Tensor>>& tensors,
                    const std::vector<double*>& numbers, int root) {
  Communicator& c = comm_of(b, "synchronize");
  flx::internal::RecordingPause pause;
  FLX_CHECK(root >= 0 && root < c.size, ArgumentError, "synchronize: root ", root, " is not a rank of this job (0 to ",
            c.size - 1, ")");
  // 1. The layout: root's, compared on every rank; a difference anywhere
  //    stops every rank (one allreduce of a flag), not just the one that sees it.
  std::ostringstream sig;
  for (const auto& [path, t] : tensors) sig << (path.empty() ? "(root)" : path) << " " << t.dtype() << " " << t.shape() << "\n";
  sig << numbers.size() << " host numbers\n";
  const std::string mine = sig.str();
  Tensor len = tensor(std::vector<int64_t>{int64_t(mine.size())});
  c.run(Collective::Broadcast, len, ReduceOp::Sum, root, "bcast of the layout's size (synchronize)");
  const int64_t n = len.item<int64_t>();
  Tensor text = c.rank == root ? from_host(mine.data(), DType::UInt8, Shape{n}) : zeros(DType::UInt8, Shape{n});
  c.run(Collective::Broadcast, text, ReduceOp::Sum, root, "bcast of the layout (synchronize)");
  const auto bytes = text.to_vector<uint8_t>();
  const std::string theirs(bytes.begin(), bytes.end());
  Tensor differs = tensor(std::vector<int32_t>{theirs == mine ? 0 : 1});
  c.run(Collective::Allreduce, differs, ReduceOp::Max, 0, "allreduce of the layout check (synchronize)");
  if (differs.item<int32_t>()) {
    std::istringstream a(mine), r(theirs);
    std::string la, lr;
    while (std::getline(a, la) && std::getline(r, lr) && la == lr) {
    }
    FLX_THROW(DistributedError, rank_label(c), ": synchronize: the ranks hold differently shaped trees, so root ",
              root, "'s values cannot replace this rank's. ",
              theirs == mine ? "This rank matches root; another rank differs."
                             : "Here: \"" + la + "\", on rank " + std::to_string(root) + ": \"" + lr + "\".",
              " Build the same model (and setup the same rule) on every rank before synchronizing");
  }
  // 2. The tensors: one flat tensor per element type and device.
  std::map<std::pair<int, std::string>, std::vector<Tensor>> groups;
  for (const auto& [path, t] : tensors) groups[{int(t.dtype()), t.device().str()}].push_back(t);
  for (auto& [key, ts] : groups) {
    const DType dt = ts[0].dtype();
    const size_t esize = dtype_size(dt);
    int64_t total = 0;
    for (const auto& t : ts) total += t.numel();
    if (total == 0) continue;
    Tensor flat = empty(dt, Shape{total}, ts[0].device());
    uint64_t off = 0;
    if (c.rank == root)
      for (const auto& t : ts) {
        copy_region(flat, off, t, 0, size_t(t.numel()) * esize);
        off += uint64_t(t.numel()) * esize;
      }
    std::ostringstream what;
    what << "bcast of " << ts.size() << " " << dt << " tensor" << (ts.size() == 1 ? "" : "s") << " on "
         << key.second << " (synchronize)";
    c.run(Collective::Broadcast, flat, ReduceOp::Sum, root, what.str());
    if (c.rank == root) continue;
    off = 0;
    for (const auto& t : ts) {
      copy_region(t, 0, flat, off, size_t(t.numel()) * esize);
      off += uint64_t(t.numel()) * esize;
    }
  }
  // 3. Host numbers, as Float64.
  if (!numbers.empty()) {
    std::vector<double> v;
    for (double* p : numbers) v.push_back(*p);
    Tensor t = tensor(v);
    c.run(Collective::Broadcast, t, ReduceOp::Sum, root, "bcast of host numbers (synchronize)");
    v = t.to_vector<double>();
    for (size_t i = 0; i < numbers.size(); ++i) *numbers[i] = v[i];
  }
}

}  // namespace detail

OptState synchronize(const DistributedBackend& b, OptState& state, int root) {
  std::vector<std::pair<std::string, Tensor>> tensors;
  std::vector<double*> numbers;
  flx::internal::walk_opt_state(
      state, [&](const std::string& name, const Tensor& t) { tensors.emplace_back(name, t); },
      [&](const std::string&, std::vector<double>& v) {
        for (double& d : v) numbers.push_back(&d);
      });
  detail::broadcast_tree(b, tensors, numbers, root);
  return state;
}

std::pair<int64_t, int64_t> share_of(int64_t nobs, int rank, int workers) {
  FLX_CHECK(workers >= 1 && rank >= 0 && rank < workers, ArgumentError, "DistributedDataContainer: rank ", rank,
            " of ", workers, " workers does not exist");
  FLX_CHECK(nobs >= workers, ArgumentError, "DistributedDataContainer: ", nobs, " observation",
            nobs == 1 ? "" : "s", " cannot be shared among ", workers,
            " workers: every rank needs at least one (an empty share would hang the others at the first "
            "collective). Use at most ",
            nobs, " processes, or more data");
  const int64_t base = nobs / workers, extra = nobs % workers;
  const int64_t start = rank * base + std::min<int64_t>(rank, extra);
  return {start, start + base + (rank < extra ? 1 : 0)};
}

}  // namespace flx::distributed
