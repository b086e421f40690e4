// Programs and launches. A kernel family's source is built once per (device,
// dtype) on first use and kept for the life of the process: with PoCL, a
// build runs clang and LLVM, so few programs, built lazily, keep first-use
// latency low (PoCL also caches compiled kernels on disk across processes).
// Launches use one fixed work-group size per kernel, since PoCL compiles a
// new variant of a kernel for every distinct local size it sees.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "ocl_common.hpp"
#include "ocl_dtype.hpp"
#include "backend_common/env_switch.hpp"

namespace flx_ocl {

bool verbose() {
  static const bool v = flx::backend_common::env_switch("FLX_OPENCL_VERBOSE", false);
  return v;
}

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

namespace {

std::string build_log(cl_program p, cl_device_id dev) {
  size_t n = 0;
  clGetProgramBuildInfo(p, dev, CL_PROGRAM_BUILD_LOG, 0, nullptr, &n);
  std::string log(n, '\0');
  if (n) clGetProgramBuildInfo(p, dev, CL_PROGRAM_BUILD_LOG, n, log.data(), nullptr);
  while (!log.empty() && (log.back() == '\0' || log.back() == '\n')) log.pop_back();
  if (log.size() > 4000) log = log.substr(0, 4000) + "\n...";
  return log;
}

// -DD_F32=0 -DD_F64=1 ...: the codes the programs compare DT with
// (prelude.cl), from the list of element types.
const std::string& dtype_code_options() {
  static const std::string opts = [] {
    std::string o;
#define FLX_OCL_DTYPE_OPTION_(code, sfx, name, bytes, kind, rank) o += " -DD_" #sfx "=" #code;
    FLX_DTYPES(FLX_OCL_DTYPE_OPTION_)
#undef FLX_OCL_DTYPE_OPTION_
    return o;
  }();
  return opts;
}

// Creates and builds the program and its kernels; on failure returns why
// (with the build log), leaving p.prog null.
std::string build_program(Device& d, const KernelFamily& f, int dtype, Program& p) {
  std::string opts = "-cl-std=CL1.2 -DDT=" + std::to_string(dtype) + " -DHAS_FP64=" + (d.fp64 ? "1" : "0") +
                     dtype_code_options();
  if (d.exact_divsqrt) opts += " -cl-fp32-correctly-rounded-divide-sqrt";
  cl_int err;
  const std::string source = program_source(f);
  const char* src = source.c_str();
  cl_program prog = clCreateProgramWithSource(d.ctx, 1, &src, nullptr, &err);
  if (err != CL_SUCCESS) return std::string("clCreateProgramWithSource: ") + cl_error_name(err);
  const char* call = "clBuildProgram";
  err = clBuildProgram(prog, 1, &d.id, opts.c_str(), nullptr, nullptr);
  cl_uint nk = 0;
  std::vector<cl_kernel> ks;
  if (err == CL_SUCCESS) {
    call = "clCreateKernelsInProgram";
    err = clCreateKernelsInProgram(prog, 0, nullptr, &nk);
    ks.resize(nk);
    if (err == CL_SUCCESS && nk) err = clCreateKernelsInProgram(prog, nk, ks.data(), nullptr);
  }
  if (err != CL_SUCCESS) {
    std::string why = std::string(call) + " (" + opts + "): " + cl_error_name(err) + "\n" + build_log(prog, d.id);
    clReleaseProgram(prog);
    return why;
  }
  for (cl_kernel k : ks) {
    Kernel kk;
    kk.k = k;
    char name[128] = {};
    clGetKernelInfo(k, CL_KERNEL_FUNCTION_NAME, sizeof name - 1, name, nullptr);
    kk.name = name;
    size_t wg = 0;
    clGetKernelWorkGroupInfo(k, d.id, CL_KERNEL_WORK_GROUP_SIZE, sizeof wg, &wg, nullptr);
    size_t cap = std::min<size_t>({64, wg ? wg : 1, d.max_wg});
    kk.local = 1;
    while (kk.local * 2 <= cap) kk.local *= 2;
    p.kernels.push_back(std::move(kk));
  }
  p.prog = prog;
  return {};
}

// Runs once per Program, under its once_flag.
void build(Device& d, const KernelFamily& f, int dtype, Program& p) {
  auto t0 = std::chrono::steady_clock::now();
  p.error = build_program(d, f, dtype, p);
  const double ms = ms_since(t0);
  {
    std::lock_guard<std::mutex> lock(d.programs_mu);
    d.built.push_back({f.name, dtype, p.prog != nullptr, ms});
  }
  if (verbose() && p.prog) {
    std::fprintf(stderr, "flx OpenCL: built the %s kernels for %s on %s in %.0f ms\n", f.name, dtype_name(dtype),
                 d.name.c_str(), ms);
    std::string log = build_log(p.prog, d.id);
    if (!log.empty()) std::fprintf(stderr, "%s\n", log.c_str());
  }
}

}  // namespace

Kernel& kernel(Device& d, const KernelFamily& family, int dtype, const char* name) {
  if (!valid_dtype(dtype)) raise(FLX_ERR_INVALID_ARGUMENT, "unknown dtype " + std::to_string(dtype));
  if (dtype == FLX_F64 && !d.fp64)
    raise(FLX_ERR_UNSUPPORTED, "Float64 needs cl_khr_fp64, which " + d.name + " lacks; use Float32");
  Program* p;
  {
    std::lock_guard<std::mutex> lock(d.programs_mu);
    p = &d.programs[&family][size_t(dtype)];
  }
  // Concurrent first users of one program wait for one build; programs of
  // other families or dtypes build at the same time.
  std::call_once(p->once, [&] { build(d, family, dtype, *p); });
  if (!p->prog)
    raise(FLX_ERR_DEVICE, std::string("building the OpenCL ") + family.name + " kernels for " + dtype_name(dtype) +
                              " on " + d.name + " failed: " + p->error);
  for (Kernel& k : p->kernels)
    if (k.name == name) return k;
  raise(FLX_ERR_UNSUPPORTED,
        std::string("no kernel ") + name + " among the " + family.name + " kernels for " + dtype_name(dtype));
}

std::vector<BuiltProgram> built_programs(Device& d) {
  std::lock_guard<std::mutex> lock(d.programs_mu);
  return d.built;
}

void enqueue(Device& d, cl_command_queue q, Kernel& k, size_t items) {
  size_t local = k.local;
  size_t groups = (items + local - 1) / local;
  // Enough groups to fill the device; kernels loop over the rest.
  size_t max_groups = std::max<size_t>(size_t(d.compute_units) * 64, 256);
  size_t global = std::min(groups, max_groups) * local;
  // PoCL compiles a kernel for the device on its first launch, on its worker
  // thread, which is most of the first run's cost. The first launch of each
  // kernel waits for it: a program that ended while PoCL was still compiling
  // (its last op's result never read) crashed in PoCL's compiler during exit
  // (SIGSEGV under pocl_check_kernel_disk_cache, LLVM's statics already
  // destroyed; Devices/NNlibActivations.RreluDrawsItsSlopesOnlyWhileTraining
  // did, once in three runs of two processes with a cold kernel cache).
  // Verbose mode times it (waiting for the queue before too, so the time is
  // the compile and this one run).
  const bool first = !k.launched, timed = verbose() && first;
  k.launched = true;
  if (timed) clFinish(q);
  auto t0 = std::chrono::steady_clock::now();
  check_cl(clEnqueueNDRangeKernel(q, k.k, 1, nullptr, &global, &local, 0, nullptr, nullptr),
           "clEnqueueNDRangeKernel(" + k.name + ")");
  if (first) clFinish(q);
  if (timed)
    std::fprintf(stderr, "flx OpenCL: first run of %s on %s: %.0f ms\n", k.name.c_str(), d.name.c_str(), ms_since(t0));
}

TempBuffer::TempBuffer(Device& d, size_t bytes) {
  cl_int err;
  mem = clCreateBuffer(d.ctx, CL_MEM_READ_WRITE, std::max<size_t>(bytes, 1), nullptr, &err);
  if (err != CL_SUCCESS) mem = nullptr;
  check_cl(err, "clCreateBuffer(" + std::to_string(bytes) + " bytes, temporary)");
}

}  // namespace flx_ocl
