// The oneDNN engine, streams and threads of the CPU backend.
//
// Threads: Debian's oneDNN (2.6) runs on OpenMP (libgomp; dnnl_config.h
// says DNNL_CPU_RUNTIME_OMP), and a primitive splits its work for
// omp_get_max_threads() of the thread that creates it. flx makes every
// primitive for one thread and runs pieces of the batch in parallel on its
// own pool (run_pieces), for two reasons:
//  - results: where oneDNN splits a sum across threads (the filter's
//    gradient of a convolution, batch statistics) its bits follow the
//    thread count, which load changes. On one thread a piece's bits are
//    fixed, the pieces are fixed by the batch size alone, and where they
//    are summed (the filter's gradient, cpu_dnn_conv.cpp) the sum runs in
//    the pieces' order: the same inputs give the same bits at any thread
//    count and load, as flx's GEMMs do;
//  - speed: libgomp's threads spin after each parallel region before they
//    sleep, on the cores where flx's pool runs the loops between oneDNN's
//    calls (BatchNorm, max pooling, Adam); in flx-train's CNN that cost a
//    third of a training step. With one thread no OpenMP team starts.
// A batch of one image is one piece, on one thread.
#include "cpu_dnn_engine.hpp"

#include <omp.h>

#include <exception>
#include <mutex>

#include "cpu_pool.hpp"

namespace flx::cpu_backend::onednn {

dnnl::engine& engine() {
  // Never destroyed: a tensor freed during exit may still reach here after
  // static destructors have run.
  static dnnl::engine& e = *new dnnl::engine(dnnl::engine::kind::cpu, 0);
  return e;
}

dnnl::stream& stream() {
  thread_local dnnl::stream s(engine());
  return s;
}

void use_threads(int n) {
  if (omp_get_max_threads() != n) omp_set_num_threads(n);
}

void run_pieces(const BatchPieces& pieces, const std::function<void(int64_t, int64_t)>& body) {
  std::exception_ptr error;
  std::mutex error_mutex;
  parallel_for(pieces.count, 1, [&](int64_t lo, int64_t hi) {
    for (int64_t k = lo; k < hi; ++k) {
      try {
        use_threads(1);
        body(k, pieces.first(k));
      } catch (...) {  // parallel_for's bodies must not throw
        std::lock_guard lock(error_mutex);
        if (!error) error = std::current_exception();
      }
    }
  });
  if (error) std::rethrow_exception(error);
}

int status_of(dnnl_status_t s) {
  switch (s) {
    case dnnl_out_of_memory:
      return FLX_ERR_OUT_OF_MEMORY;
    case dnnl_invalid_arguments:
      return FLX_ERR_INVALID_ARGUMENT;
    case dnnl_unimplemented:
      return FLX_ERR_UNSUPPORTED;
    default:
      return FLX_ERR_DEVICE;
  }
}

}  // namespace flx::cpu_backend::onednn

namespace flx::cpu_backend::onednn {

dnnl::primitive_attr user_scratchpad() {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return attr;
}

Planned plan(const dnnl::primitive_desc& pd, dnnl::primitive prim, const std::vector<ArgSpec>& args) {
  Planned p;
  p.prim = std::move(prim);
  p.scratchpad = pd.scratchpad_desc();
  uint64_t offset = aligned(p.scratchpad.get_size());
  for (const ArgSpec& a : args) {
    Planned::Arg arg{a.id, a.plain, pd.query_md(dnnl::query::exec_arg_md, a.id), a.out, false, {}, 0};
    if (arg.inner != arg.plain) {
      arg.reordered = true;
      arg.reorder = a.out ? dnnl::reorder(dnnl::reorder::primitive_desc(engine(), arg.inner, engine(), arg.plain))
                          : dnnl::reorder(dnnl::reorder::primitive_desc(engine(), arg.plain, engine(), arg.inner));
      arg.offset = offset;
      offset += aligned(arg.inner.get_size());
    }
    p.args.push_back(std::move(arg));
  }
  p.scratch_bytes = offset;
  return p;
}

const Planned::Arg* Planned::arg(int id) const {
  for (const Arg& a : args)
    if (a.id == id) return &a;
  return nullptr;
}

uint64_t Planned::scratch_without(int id) const {
  const Arg* a = arg(id);
  if (!a || !a->reordered) return scratch_bytes;
  for (const Arg& b : args)
    if (b.reordered && b.offset > a->offset) return scratch_bytes;  // not the last: no saving
  return a->offset;
}

void reorder_arg(const Planned& p, int id, void* plain, void* inner) {
  const Planned::Arg* a = p.arg(id);
  dnnl::stream& s = stream();
  dnnl::memory user = wrap(a->plain, plain), own = wrap(a->inner, inner);
  if (a->out)
    a->reorder.execute(s, own, user);
  else
    a->reorder.execute(s, user, own);
  s.wait();
}

void run(const Planned& p, const std::vector<ArgPtr>& ptrs, char* scratch) {
  dnnl::stream& s = stream();
  std::unordered_map<int, dnnl::memory> args;
  struct Out {
    const dnnl::reorder* reorder;
    dnnl::memory inner, user;
  };
  std::vector<Out> outs;  // reordered into flx's layout after the primitive
  for (const Planned::Arg& a : p.args) {
    void* ptr = nullptr;
    bool given_inner = false;
    for (const ArgPtr& q : ptrs)
      if (q.id == a.id) {
        ptr = q.ptr;
        given_inner = q.inner;
      }
    if (!a.reordered || given_inner) {
      args.emplace(a.id, wrap(given_inner ? a.inner : a.plain, ptr));
      continue;
    }
    dnnl::memory user = wrap(a.plain, ptr);
    dnnl::memory inner = wrap(a.inner, scratch + a.offset);
    if (a.out)
      outs.push_back({&a.reorder, inner, user});
    else
      a.reorder.execute(s, user, inner);
    args.emplace(a.id, inner);
  }
  if (p.scratchpad.get_size()) args.emplace(DNNL_ARG_SCRATCHPAD, wrap(p.scratchpad, scratch));
  p.prim.execute(s, args);
  for (Out& o : outs) o.reorder->execute(s, o.inner, o.user);
  s.wait();
}

}  // namespace flx::cpu_backend::onednn
