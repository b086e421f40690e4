// The oneDNN engine, streams and threads of the CPU backend.
//
// Threads: Debian's oneDNN (2.6) runs on OpenMP (libgomp; dnnl_config.h
// says DNNL_CPU_RUNTIME_OMP), and a primitive uses omp_get_max_threads()
// of the thread that creates it: its split of the work across threads is
// fixed then and each execution opens a parallel region of that many
// threads. So before making or running a primitive, the calling thread's
// OpenMP count (a per-thread setting, omp_set_num_threads) is set to the
// count flx's own pool would use now (pool_threads_now(): FLX_NUM_THREADS or
// flx::set_num_threads(), less the cores other work keeps busy), and that
// count is part of every cached primitive's key, so a primitive made for 4
// threads never runs on 2. OpenMP's team is separate from flx's pool, but
// the two never run at once: a oneDNN call returns only when its parallel
// region has ended, and flx's loops run between such calls. (libgomp's
// threads spin a little after each region before they sleep, as OpenMP
// does by default; OMP_WAIT_POLICY=passive turns that off.)
//
// Results: where oneDNN splits a sum across threads (the weights' gradient
// of a convolution, batch statistics), its bits depend on the thread count.
// A convolution asked to be deterministic (flx_conv_desc::deterministic)
// therefore runs on flx's maximum count, which load does not change, rather
// than on the threads free now.
#include "cpu_dnn_engine.hpp"

#include <omp.h>

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

int follow_flx_threads(bool fixed) {
  const int n = fixed ? pool_max_threads() : pool_threads_now();
  if (omp_get_max_threads() != n) omp_set_num_threads(n);
  return n;
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
    for (const ArgPtr& q : ptrs)
      if (q.id == a.id) ptr = q.ptr;
    dnnl::memory user = wrap(a.plain, ptr);
    if (!a.reordered) {
      args.emplace(a.id, user);
      continue;
    }
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
