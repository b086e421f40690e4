// The MPI engine (mpi_engine.hpp): its thread, the polling of collectives
// against their deadline, and the health pings that name a rank at fault.
#include "distributed/mpi_engine.hpp"

#if __has_include(<mpi-ext.h>)
#include <mpi-ext.h>
#endif
#include <sys/prctl.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <sstream>

#include "flx/distributed.hpp"

namespace flx::distributed::detail {
namespace {

constexpr int kTagPing = 1, kTagPong = 2;

// Polling collectives in flight: every kPoll, and without a pause for kSpin
// after a thread starts waiting or a collective completes while one waits.
constexpr auto kPoll = std::chrono::microseconds(50);
constexpr auto kSpin = std::chrono::microseconds(250);

// Allreduces of at least this many bytes take libnbc's ring (find_iallreduce_algorithm).
constexpr size_t kRingBytes = 64 * 1024;
constexpr int kNbcDefault = 0, kNbcRing = 1;

std::string mpi_error(int rc) {
  char buf[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(rc, buf, &len) != MPI_SUCCESS) return "MPI error " + std::to_string(rc);
  return std::string(buf, size_t(len));
}

std::string seconds(double s) {
  std::ostringstream os;
  os << s << " s";
  return os.str();
}

// "allreduce of a (4) Float32 tensor on CPU (Sum: 4 Float32 elements)": a
// collective as its signature says, for a mismatch between ranks.
std::string describe(const MpiEngine::Signature& s) {
  static const char* const kinds[] = {"allreduce", "bcast", "reduce"};
  static const char* const ops[] = {"Sum", "Avg", "Max", "Min"};
  std::ostringstream os;
  const std::string what(s.what, strnlen(s.what, sizeof s.what));
  os << (what.empty() ? std::string(s.kind >= 0 && s.kind < 3 ? kinds[s.kind] : "a collective") : what) << " (";
  if (s.op >= 0 && s.op < 4) os << ops[s.op] << ", ";
  if (s.root >= 0) os << "root " << s.root << ", ";
  os << s.count << " elements of " << (s.dtype >= 0 ? dtype_name(DType(s.dtype)) : "?") << ")";
  return os.str();
}

std::mutex g_engine_mu;
MpiEngine* g_engine = nullptr;  // never deleted: shutdown() ends its thread at exit

}  // namespace

// A collective that failed or missed its deadline: every other rank is
// pinged, and the answers (or their absence, within `until`) say who is at
// fault.
struct MpiEngine::Diagnosis {
  std::shared_ptr<Op> op;
  std::string cause;
  Clock::time_point until;
  std::vector<uint64_t> ping_out;
  std::vector<Pong> pong_in;
  std::vector<MPI_Request> sends, recvs;
  enum State { Waiting, Answered, Unreachable };
  std::vector<State> state;
  std::vector<std::string> unreachable_why;
};

MpiEngine& MpiEngine::instance(double timeout) {
  std::lock_guard lock(g_engine_mu);
  if (!g_engine) g_engine = new MpiEngine(timeout);  // throws when MPI cannot start
  return *g_engine;
}
MpiEngine* MpiEngine::existing() {
  std::lock_guard lock(g_engine_mu);
  return g_engine;
}

MpiEngine::MpiEngine(double timeout) : timeout_(timeout) {
  std::promise<std::string> started;
  auto result = started.get_future();
  thread_ = std::thread([this, &started] {
    std::string error;
    const bool ok = start_mpi(error);
    started.set_value(error);
    if (ok) run();
  });
  const std::string error = result.get();
  if (!error.empty()) {
    thread_.join();
    FLX_THROW(DistributedError, "flx::distributed: MPI could not start: ", error,
              ". Run the program under an MPI launcher (mpiexec -n 2 ./program) with OpenMPI installed "
              "(Debian: openmpi-bin, libopenmpi-dev)");
  }
}

bool MpiEngine::start_mpi(std::string& error) {
  int inited = 0, finalized = 0, provided = 0;
  MPI_Initialized(&inited);
  MPI_Finalized(&finalized);
  if (finalized) {
    error = "MPI has already been finalised in this process";
    return false;
  }
  if (!inited) {
    const int rc = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided);
    if (rc != MPI_SUCCESS) {
      error = "MPI_Init_thread failed: " + mpi_error(rc);
      return false;
    }
    we_initialised_ = true;
  } else {
    MPI_Query_thread(&provided);
    if (provided < MPI_THREAD_MULTIPLE) {
      error = "the program initialised MPI itself with a thread level below MPI_THREAD_MULTIPLE; flx makes its "
              "MPI calls from a thread of its own, so initialise MPI with MPI_Init_thread(..., "
              "MPI_THREAD_MULTIPLE, ...) or leave it to flx::distributed::initialize";
      return false;
    }
  }
  // Errors come back as codes (turned into DistributedError naming the
  // collective), never MPI's default abort without a word of context.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm_dup(MPI_COMM_WORLD, &coll_);
  MPI_Comm_dup(MPI_COMM_WORLD, &health_);
  MPI_Comm_set_errhandler(coll_, MPI_ERRORS_RETURN);
  MPI_Comm_set_errhandler(health_, MPI_ERRORS_RETURN);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
  MPI_Comm_size(MPI_COMM_WORLD, &size_);
  MPI_Comm node = MPI_COMM_NULL;
  if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL, &node) == MPI_SUCCESS) {
    MPI_Comm_rank(node, &node_rank_);
    MPI_Comm_size(node, &node_size_);
    MPI_Comm_free(&node);
  } else {
    node_rank_ = rank_;
    node_size_ = size_;
  }
#if defined(MPIX_CUDA_AWARE_SUPPORT) && MPIX_CUDA_AWARE_SUPPORT
  cuda_aware_ = MPIX_Query_cuda_support() == 1;
#endif
  gather_where();
  find_iallreduce_algorithm();
  pong_out_.assign(size_t(size_), Pong{});
  pong_sends_.assign(size_t(size_), MPI_REQUEST_NULL);
  MPI_Irecv(&ping_in_, 1, MPI_UINT64_T, MPI_ANY_SOURCE, kTagPing, health_, &ping_req_);
  return true;
}

// Every rank's pid and host, so that a message blaming a rank says which
// process to look at.
void MpiEngine::gather_where() {
  struct Where {
    int64_t pid;
    char host[MPI_MAX_PROCESSOR_NAME];
  };
  Where mine{int64_t(getpid()), {}};
  int len = 0;
  if (MPI_Get_processor_name(mine.host, &len) != MPI_SUCCESS) len = 0;
  mine.host[std::clamp(len, 0, MPI_MAX_PROCESSOR_NAME - 1)] = '\0';
  std::vector<Where> all(static_cast<size_t>(size_));
  where_.assign(size_t(size_), "");
  if (MPI_Allgather(&mine, int(sizeof(Where)), MPI_BYTE, all.data(), int(sizeof(Where)), MPI_BYTE,
                    MPI_COMM_WORLD) != MPI_SUCCESS)
    return;  // the messages then name ranks only
  for (int q = 0; q < size_; ++q)
    where_[size_t(q)] = "pid " + std::to_string(all[size_t(q)].pid) + " on " + all[size_t(q)].host;
}

// OpenMPI's libnbc runs every MPI_Iallreduce in place (flx's are), and any
// on fewer than 4 ranks, as a binomial tree: every rank's buffer travels to
// rank 0, then the sum travels back, one after the other, each transfer and
// the sum by a single rank. The ring (reduce-scatter, then allgather) has
// every rank send and sum 1/n of the buffer at once per step: with 2 ranks
// and the 1 MiB bucket of bench_ddp's MLP, measured: half the binomial
// tree's time or less. For buffers of kRingBytes and more (libnbc's own
// threshold for the ring out of place), flx sets libnbc's algorithm to the
// ring through its MPI_T control variable just before the call (only this
// thread calls MPI) and back to libnbc's choice right after. Where
// the user has chosen an algorithm (--mca coll_libnbc_iallreduce_algorithm
// N, or OMPI_MCA_...) or MPI is not OpenMPI, nothing is changed. Every rank
// decides alike: by the size, which is the same everywhere.
void MpiEngine::find_iallreduce_algorithm() {
  int provided = 0, n = 0;
  if (MPI_T_init_thread(MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS) return;
  mpi_t_ = true;
  if (MPI_T_cvar_get_num(&n) != MPI_SUCCESS) return;
  for (int i = 0; i < n; ++i) {
    char name[256];
    int len = sizeof name, verbosity = 0, bind = 0, scope = 0, count = 0;
    MPI_Datatype type = MPI_DATATYPE_NULL;
    MPI_T_enum values{};
    if (MPI_T_cvar_get_info(i, name, &len, &verbosity, &type, &values, nullptr, nullptr, &bind, &scope) !=
            MPI_SUCCESS ||
        std::string(name) != "coll_libnbc_iallreduce_algorithm" || type != MPI_INT)
      continue;
    MPI_T_cvar_handle h = MPI_T_CVAR_HANDLE_NULL;
    if (MPI_T_cvar_handle_alloc(i, nullptr, &h, &count) != MPI_SUCCESS) return;
    int now = -1;
    if (count == 1 && MPI_T_cvar_read(h, &now) == MPI_SUCCESS && now == kNbcDefault) {
      nbc_algorithm_ = h;  // libnbc decides: flx may
    } else {
      MPI_T_cvar_handle_free(&h);  // the user has chosen
    }
    return;
  }
}

int MpiEngine::iallreduce(void* data, int count, MPI_Datatype type, MPI_Op op, size_t bytes, MPI_Comm c,
                          MPI_Request* r) {
  const bool ring = nbc_algorithm_ != MPI_T_CVAR_HANDLE_NULL && bytes >= kRingBytes && size_ > 1;
  const int chosen = kNbcRing, libnbc_choice = kNbcDefault;
  if (ring) MPI_T_cvar_write(nbc_algorithm_, &chosen);  // libnbc reads it when the call starts
  const int rc = MPI_Iallreduce(MPI_IN_PLACE, data, count, type, op, c, r);
  if (ring) MPI_T_cvar_write(nbc_algorithm_, &libnbc_choice);  // the program's own calls: libnbc's choice
  return rc;
}

void MpiEngine::run() {
  // Fine-grained sleeps between polls (the default timer slack is 50 µs).
  prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
  Clock::time_point last_progress{};  // a collective last completed
  for (;;) {
    {
      std::unique_lock lock(mu_);
      if (active_.empty() && queued_.empty() && !diagnosis_ && !stop_)
        work_cv_.wait_for(lock, std::chrono::milliseconds(10));  // idle: still answer pings
      if (stop_ && queued_.empty() && active_.empty() && !diagnosis_) break;
    }
    launch_queued();
    const bool progressed = progress_active();
    serve_pings();
    if (diagnosis_) progress_diagnosis();
    else check_deadline();
    if (progressed) last_progress = Clock::now();
    if ((active_.empty() && !diagnosis_) || progressed) continue;
    // Work in flight. While a thread waits for it, poll without a pause for
    // kSpin: once every rank has joined a collective, the rest takes a few
    // polls on each side (about 0.2 ms for a 1 MiB allreduce of 2 ranks on
    // one machine). Past that, a rank mostly waits for a slower one (or for
    // a network); polling every kPoll, as while nobody waits (the caller
    // computes on the same cores), leaves the cores to that rank and to
    // whatever else the machine runs. (It used to yield in a loop: on a
    // busy machine that gave the core away for a whole time slice when the
    // data came, and burnt 2 to 3 ms of CPU per step of bench_ddp's MLP.)
    Clock::time_point spin_until{};
    {
      std::lock_guard lock(mu_);
      if (waiters_ > 0) spin_until = std::max(wait_began_, last_progress) + kSpin;
    }
    if (Clock::now() >= spin_until) std::this_thread::sleep_for(kPoll);
  }
  // Shut down: stop listening for pings, let the last answers go, finalise.
  if (ping_req_ != MPI_REQUEST_NULL) {
    MPI_Cancel(&ping_req_);
    MPI_Wait(&ping_req_, MPI_STATUS_IGNORE);
  }
  for (auto& r : pong_sends_)
    if (r != MPI_REQUEST_NULL) MPI_Wait(&r, MPI_STATUS_IGNORE);
  MPI_Comm_free(&coll_);
  MPI_Comm_free(&health_);
  if (nbc_algorithm_ != MPI_T_CVAR_HANDLE_NULL) MPI_T_cvar_handle_free(&nbc_algorithm_);
  if (mpi_t_) MPI_T_finalize();
  if (we_initialised_) MPI_Finalize();
  std::lock_guard lock(mu_);
  exited_ = true;
  done_cv_.notify_all();
}

std::shared_ptr<MpiEngine::Op> MpiEngine::submit(std::string what, const Signature& sig,
                                                 std::function<int(MPI_Comm, MPI_Request*)> launch) {
  auto op = std::make_shared<Op>();
  op->sig = sig;
  op->what = std::move(what);
  op->launch = std::move(launch);
  std::string broken;
  {
    std::lock_guard lock(mu_);
    broken = broken_;
    if (broken.empty()) queued_.push_back(op);
  }
  // Thrown with mu_ free: uncaught, it reaches the terminate handler, which
  // reads failure() without the stack having been unwound.
  FLX_CHECK(broken.empty(), DistributedError, label(), ": ", op->what,
            " refused: an earlier collective failed, and this job cannot go on. It failed with: ", broken);
  work_cv_.notify_one();
  return op;
}

void MpiEngine::wait(Op& op) {
  std::unique_lock lock(mu_);
  if (waiters_++ == 0) wait_began_ = Clock::now();
  // The engine gives up on the op by its deadline plus the diagnosis; past
  // that and a margin, its thread itself is stuck (inside MPI).
  const auto limit = std::chrono::duration<double>(timeout_ * 1.5 + 60);
  const bool finished = done_cv_.wait_for(lock, limit, [&] { return op.finished; });
  --waiters_;
  if (!finished) {
    lock.unlock();
    abort(label() + ": " + op.what +
              ": the communication thread has not returned from MPI for " + seconds(limit.count()) +
              "; ending the job",
          1);
  }
  const std::string error = op.error;
  lock.unlock();  // before throwing: see submit()
  if (!error.empty()) throw DistributedError(error);
}

void MpiEngine::finish(Op& op, const std::string& error) {
  {
    std::lock_guard lock(mu_);
    op.finished = true;
    op.error = error;
  }
  done_cv_.notify_all();
}

void MpiEngine::launch_queued() {
  std::deque<std::shared_ptr<Op>> batch;
  {
    std::lock_guard lock(mu_);
    batch.swap(queued_);
  }
  constexpr size_t kHistory = 64;  // a rank a collective ahead is far fewer ahead
  for (auto& op : batch) {
    op->seq = ++launched_;
    op->started = Clock::now();
    history_.emplace_back(op->seq, op->sig);
    if (history_.size() > kHistory) history_.pop_front();
    active_.push_back(op);
    const int rc = op->launch(coll_, &op->req);
    if (rc != MPI_SUCCESS) {
      op->req = MPI_REQUEST_NULL;
      if (!diagnosis_) begin_diagnosis(op, "could not start: " + mpi_error(rc));
    }
  }
}

bool MpiEngine::progress_active() {
  bool progressed = false;
  for (size_t i = 0; i < active_.size();) {
    auto& op = active_[i];
    if (diagnosis_ && diagnosis_->op == op) {
      ++i;
      continue;
    }
    int flag = 0;
    const int rc = op->req == MPI_REQUEST_NULL ? MPI_SUCCESS : MPI_Test(&op->req, &flag, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS) {
      if (!diagnosis_) begin_diagnosis(op, "failed: " + mpi_error(rc));
      ++i;
      continue;
    }
    if (flag) {
      ++completed_;
      finish(*op, "");
      active_.erase(active_.begin() + std::ptrdiff_t(i));
      progressed = true;
    } else {
      ++i;
    }
  }
  return progressed;
}

void MpiEngine::serve_pings() {
  while (ping_req_ != MPI_REQUEST_NULL) {
    int flag = 0;
    MPI_Status st;
    if (MPI_Test(&ping_req_, &flag, &st) != MPI_SUCCESS || !flag) return;
    const int q = st.MPI_SOURCE;
    int sent = 1;
    if (pong_sends_[q] != MPI_REQUEST_NULL) MPI_Test(&pong_sends_[q], &sent, MPI_STATUS_IGNORE);
    if (sent) {  // else the previous answer to q is still on its way: that one will do
      Pong& p = pong_out_[size_t(q)];
      p = Pong{};
      p.launched = launched_;
      p.completed = completed_;
      for (const auto& [seq, sig] : history_)
        if (seq == ping_in_) {
          p.has_sig = 1;
          p.sig = sig;
        }
      MPI_Isend(&p, int(sizeof(Pong)), MPI_BYTE, q, kTagPong, health_, &pong_sends_[q]);
    }
    if (MPI_Irecv(&ping_in_, 1, MPI_UINT64_T, MPI_ANY_SOURCE, kTagPing, health_, &ping_req_) != MPI_SUCCESS)
      ping_req_ = MPI_REQUEST_NULL;
  }
}

void MpiEngine::check_deadline() {
  const auto now = Clock::now();
  for (auto& op : active_) {
    if (std::chrono::duration<double>(now - op->started).count() <= timeout_) continue;
    begin_diagnosis(op, "did not complete within " + seconds(timeout_) +
                            " (the deadline: InitOptions::timeout or FLX_DISTRIBUTED_TIMEOUT)");
    return;
  }
}

void MpiEngine::begin_diagnosis(const std::shared_ptr<Op>& op, std::string cause) {
  // Ping every other rank; the answers arrive on the health communicator,
  // which the collectives' failure does not block.
  diagnosis_ = std::make_unique<Diagnosis>();
  auto& d = *diagnosis_;
  d.op = op;
  d.cause = std::move(cause);
  const double grace = std::clamp(timeout_ / 4, 0.5, 10.0);
  d.until = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(grace));
  d.ping_out.assign(size_t(size_), d.op->seq);
  d.pong_in.assign(size_t(size_), Pong{});
  d.sends.assign(size_t(size_), MPI_REQUEST_NULL);
  d.recvs.assign(size_t(size_), MPI_REQUEST_NULL);
  d.state.assign(size_t(size_), Diagnosis::Answered);
  d.unreachable_why.assign(size_t(size_), "");
  for (int q = 0; q < size_; ++q) {
    if (q == rank_) continue;
    d.state[q] = Diagnosis::Waiting;
    int rc = MPI_Irecv(&d.pong_in[size_t(q)], int(sizeof(Pong)), MPI_BYTE, q, kTagPong, health_, &d.recvs[q]);
    if (rc == MPI_SUCCESS) rc = MPI_Isend(&d.ping_out[q], 1, MPI_UINT64_T, q, kTagPing, health_, &d.sends[q]);
    if (rc != MPI_SUCCESS) {
      d.state[q] = Diagnosis::Unreachable;
      d.unreachable_why[q] = mpi_error(rc);
    }
  }
}

void MpiEngine::progress_diagnosis() {
  auto& d = *diagnosis_;
  bool waiting = false;
  for (int q = 0; q < size_; ++q) {
    if (d.state[q] != Diagnosis::Waiting) continue;
    int flag = 0;
    const int rc = MPI_Test(&d.recvs[q], &flag, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS) {
      d.state[q] = Diagnosis::Unreachable;
      d.unreachable_why[q] = mpi_error(rc);
    } else if (flag) {
      d.state[q] = Diagnosis::Answered;
    } else {
      waiting = true;
    }
  }
  if (waiting && Clock::now() < d.until) return;

  std::ostringstream msg;
  msg << label() << ": " << d.op->what << " (collective #"
      << d.op->seq << ") " << d.cause << ".";
  bool blamed = false;
  auto on_q = [&](int q) {  // "rank 1 (pid 1234 on node7)"
    const std::string& w = where_[size_t(q)];
    return "rank " + std::to_string(q) + (w.empty() ? "" : " (" + w + ")");
  };
  auto rank_q = [&](int q) { return "R" + on_q(q).substr(1); };
  // Ranks that made another collective as this one's number, or the same
  // with other data: named first, since that is the cause whatever MPI
  // said (a truncated message, a deadline).
  std::ostringstream calls, data;
  for (int q = 0; q < size_; ++q) {
    const Pong& p = d.pong_in[size_t(q)];
    if (q == rank_ || d.state[q] != Diagnosis::Answered || p.launched < d.op->seq || !p.has_sig) continue;
    if (!p.sig.same_call(d.op->sig)) calls << "; on " << on_q(q) << ", " << describe(p.sig);
    else if (!p.sig.same_data(d.op->sig)) data << "; on " << on_q(q) << ", " << describe(p.sig);
  }
  if (!calls.str().empty() || !data.str().empty()) {
    msg << " The ranks called " << (calls.str().empty() ? "it with different shapes or element types"
                                                        : "different collectives")
        << " as their collective #" << d.op->seq << ": on this rank, " << describe(d.op->sig) << calls.str()
        << data.str() << ". Every rank must make the same collectives in the same order, on tensors of the same "
        << "shape and element type (the same model and batch shapes on every rank).";
    blamed = true;
  }
  for (int q = 0; q < size_ && !blamed; ++q) {
    if (q == rank_) continue;
    if (d.state[q] == Diagnosis::Waiting) {
      msg << " " << rank_q(q) << " does not answer: it is stopped, hung outside flx, or gone.";
      blamed = true;
    } else if (d.state[q] == Diagnosis::Unreachable) {
      msg << " " << rank_q(q) << " cannot be reached (" << d.unreachable_why[q] << "): its process has probably died.";
      blamed = true;
    } else if (d.pong_in[size_t(q)].launched < d.op->seq) {
      msg << " " << rank_q(q) << " answers but has started only " << d.pong_in[size_t(q)].launched
          << " collectives, so it has not reached this one: it is slower or stuck in its own code, or it makes "
             "other collectives (every rank must make the same ones in the same order, e.g. the same number of "
             "batches).";
      blamed = true;
    }
  }
  if (!blamed)
    msg << " Every rank has started it, so its data does not get through: check the network between the machines "
           "(choose the interface with mpirun --mca btl_tcp_if_include).";
  msg << " This job cannot go on: every rank ends it.";
  for (int q = 0; q < size_; ++q)
    if (d.state[q] == Diagnosis::Waiting && d.recvs[q] != MPI_REQUEST_NULL) {
      MPI_Cancel(&d.recvs[q]);
      MPI_Request_free(&d.recvs[q]);
    }
  // The pings may never be received (a dead peer): their buffers stay with
  // the diagnosis, which is kept until exit.
  static std::vector<std::unique_ptr<Diagnosis>> kept;
  kept.push_back(std::move(diagnosis_));
  fail_all(msg.str());
}

void MpiEngine::fail_all(const std::string& message) {
  std::vector<std::shared_ptr<Op>> ops;
  {
    std::lock_guard lock(mu_);
    if (broken_.empty()) broken_ = message;
    ops.assign(queued_.begin(), queued_.end());
    queued_.clear();
  }
  ops.insert(ops.end(), active_.begin(), active_.end());
  active_.clear();  // their requests are abandoned: the job ends
  for (auto& op : ops) finish(*op, message);
  std::fprintf(stderr, "%s\n", message.c_str());
  std::fflush(stderr);
}

std::string MpiEngine::label() const {
  return "flx::distributed: rank " + std::to_string(rank_) + " of " + std::to_string(size_);
}

std::string MpiEngine::failure() const {
  std::lock_guard lock(mu_);
  return broken_;
}

void MpiEngine::abort(const std::string& message, int code) {
  std::fprintf(stderr, "%s\n", message.c_str());
  std::fflush(stderr);
  // The launcher forwards this stderr and MPI_Abort's own notice by
  // different paths: a moment's pause lets the explanation come first.
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);  // MPI_Abort does not return; if it did, still end
}

void MpiEngine::shutdown() {
  const std::string failed = failure();
  if (!failed.empty())
    abort(label() + ": exiting after a failed collective, so ending the job on every rank (MPI_Abort)",
          1);
  std::unique_lock lock(mu_);
  stop_ = true;
  work_cv_.notify_all();
  const auto limit = std::chrono::duration<double>(std::max(timeout_, 1.0));
  if (!done_cv_.wait_for(lock, limit, [&] { return exited_; })) {
    lock.unlock();
    abort(label() + ": MPI_Finalize has not returned within " + seconds(limit.count()) +
              " (another rank has not reached the end of the program, or is gone); ending the job",
          1);
  }
  lock.unlock();
  thread_.join();
}

}  // namespace flx::distributed::detail
