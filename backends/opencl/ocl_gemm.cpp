// Batched column-major GEMM through CLBlast. Float32 and Float64 call
// CLBlast directly; Float16 and BFloat16 multiply in float as the CPU backend
// does (operands packed into dense float buffers, results rounded back), so
// they work on devices without cl_khr_fp16 and agree with the CPU.
// CLBlast is opened by the first product, not linked: probing the plugin
// (which every process that asks for a device does) maps none of it.
#include <clblast_c.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <mutex>
#include <set>
#include <string>
#include <tuple>

#include "backend_common/vendor_library.hpp"
#include "ocl_blas.hpp"
#include "ocl_common.hpp"
#include "ocl_dtype.hpp"

namespace flx_ocl {
namespace {

// The CLBlast calls used here, with the header's types.
struct ClBlastApi {
  decltype(&CLBlastSgemm) sgemm;
  decltype(&CLBlastSgemmStridedBatched) sgemm_batched;
  decltype(&CLBlastDgemm) dgemm;
  decltype(&CLBlastDgemmStridedBatched) dgemm_batched;
};

// CLBlast's entry points, loaded by the first call (once per process; a
// failure is not retried): by soname, then the library the build found.
const ClBlastApi& clblast() {
  using flx::vendor::VendorLibrary;
  const auto& loaded = flx::vendor::load_once<ClBlastApi>(
      [] {
        return flx::vendor::open_vendor_library(
            "CLBlast", {"libclblast.so.1", FLX_OCL_CLBLAST_LIBRARY},
            "install CLBlast (Debian's libclblast1) or put the directory holding libclblast.so.1 on LD_LIBRARY_PATH");
      },
      [](VendorLibrary& lib, ClBlastApi& api) {
        lib.resolve("CLBlastSgemm", api.sgemm);
        lib.resolve("CLBlastSgemmStridedBatched", api.sgemm_batched);
        lib.resolve("CLBlastDgemm", api.dgemm);
        lib.resolve("CLBlastDgemmStridedBatched", api.dgemm_batched);
      });
  if (!loaded.error.empty()) raise(FLX_ERR_DEVICE, "gemm: " + loaded.error);
  return loaded.api;
}

void check_blast(CLBlastStatusCode st, const char* what) {
  if (st == CLBlastSuccess) return;
  int code = int(st);
  std::string msg = std::string(what) + " failed with CLBlast status " + std::to_string(code);
  if (code < 0 && code > -1000) msg += std::string(" (") + cl_error_name(cl_int(code)) + ")";
  if (st == CLBlastNoDoublePrecision) msg += " (the device lacks double precision)";
  bool oom = code == CL_MEM_OBJECT_ALLOCATION_FAILURE || code == CL_OUT_OF_RESOURCES || code == CL_OUT_OF_HOST_MEMORY;
  raise(oom ? FLX_ERR_OUT_OF_MEMORY : FLX_ERR_DEVICE, msg);
}

CLBlastTranspose tr(int t) { return t ? CLBlastTransposeYes : CLBlastTransposeNo; }

// CLBlast's kernels, like the plugin's own (enqueue in ocl_program.cpp), are
// compiled by PoCL on their first launch, on its worker thread, and a
// process that ended during such a compile could crash in PoCL's exit. So
// the first product of each kind on each device waits for its queue. A kind
// is the routine, the transpositions and the product's size to a power of
// two (m·n·k): CLBlast runs other kernels for small and large products.
using BlastKind = std::tuple<cl_device_id, std::string, bool, bool, int>;
std::mutex blast_kinds_mu;
std::set<BlastKind> blast_kinds;  // the kinds whose first product has waited

BlastKind kind_of(cl_command_queue q, const char* routine, bool ta, bool tb, size_t m, size_t n, size_t k) {
  cl_device_id dev = nullptr;
  clGetCommandQueueInfo(q, CL_QUEUE_DEVICE, sizeof dev, &dev, nullptr);
  const double size = double(m) * double(n) * double(k);
  return {dev, routine, ta, tb, std::ilogb(std::max(size, 1.0))};
}

// call() (a CLBlast call on q) checked, and waited for when it is the first
// of its kind; FLX_OPENCL_VERBOSE times that first one (the queue drained
// before it, so the time is the compile and this run).
template <class Call>
void blast(cl_command_queue q, const char* routine, bool ta, bool tb, size_t m, size_t n, size_t k, Call call) {
  bool first;
  {
    std::lock_guard lock(blast_kinds_mu);
    first = blast_kinds.insert(kind_of(q, routine, ta, tb, m, n, k)).second;
  }
  if (first && verbose()) clFinish(q);
  const auto t0 = std::chrono::steady_clock::now();
  check_blast(call(), routine);
  if (!first) return;
  clFinish(q);
  if (verbose())
    std::fprintf(stderr, "flx OpenCL: first %s (%c%c, m n k = %zu %zu %zu): %.0f ms\n", routine, ta ? 'T' : 'N',
                 tb ? 'T' : 'N', m, n, k, ms_since(t0));
}

// d's product in Float32 on operands at (mem, offset, ld, stride), or in
// Float64 on d's own: blas_gemm's call of CLBlast.
void gemm_float(cl_command_queue q, const flx_gemm_desc& d, cl_mem a, size_t ao, size_t lda, size_t sa, cl_mem b,
                size_t bo, size_t ldb, size_t sb, cl_mem c, size_t co, size_t ldc, size_t sc) {
  blas_gemm(q, FLX_F32, d.trans_a, d.trans_b, size_t(d.m), size_t(d.n), size_t(d.k), d.alpha, {a, ao, lda, sa},
            {b, bo, ldb, sb}, d.beta, {c, co, ldc, sc}, size_t(d.batch));
}

void gemm_double(cl_command_queue q, const flx_gemm_desc& d, size_t ao, size_t bo, size_t co) {
  blas_gemm(q, FLX_F64, d.trans_a, d.trans_b, size_t(d.m), size_t(d.n), size_t(d.k), d.alpha,
            {as_mem(d.a), ao, size_t(d.lda), size_t(d.stride_a)}, {as_mem(d.b), bo, size_t(d.ldb), size_t(d.stride_b)},
            d.beta, {as_mem(d.c), co, size_t(d.ldc), size_t(d.stride_c)}, size_t(d.batch));
}

// Halves: pack A, B (and C when beta != 0) into dense float, multiply, unpack.
void gemm_halves(Device& dv, cl_command_queue q, const flx_gemm_desc& d) {
  const int64_t ra = d.trans_a ? d.k : d.m, ca = d.trans_a ? d.m : d.k;
  const int64_t rb = d.trans_b ? d.n : d.k, cb = d.trans_b ? d.k : d.n;
  const int64_t B = d.batch;
  TempBuffer fa(dv, size_t(ra * ca * B) * 4), fb(dv, size_t(rb * cb * B) * 4), fc(dv, size_t(d.m * d.n * B) * 4);
  auto pack = [&](flx_mem src, int64_t rows, int64_t cols, int64_t ld, int64_t stride, cl_mem dst) {
    launch(dv, q, kComputeKernels, d.dtype, "pack_f32_k", size_t(rows * cols * B), as_mem(src), cl_long(src.offset),
           cl_long(rows), cl_long(cols), cl_long(ld), cl_long(stride), cl_long(B), dst);
  };
  pack(d.a, ra, ca, d.lda, d.stride_a, fa.mem);
  pack(d.b, rb, cb, d.ldb, d.stride_b, fb.mem);
  if (d.beta != 0) pack(d.c, d.m, d.n, d.ldc, d.stride_c, fc.mem);
  else {
    float zero = 0;
    check_cl(clEnqueueFillBuffer(q, fc.mem, &zero, 4, 0, size_t(d.m * d.n * B) * 4, 0, nullptr, nullptr),
             "clEnqueueFillBuffer");
  }
  gemm_float(q, d, fa.mem, 0, size_t(ra), size_t(ra * ca), fb.mem, 0, size_t(rb), size_t(rb * cb), fc.mem, 0,
             size_t(d.m), size_t(d.m * d.n));
  launch(dv, q, kComputeKernels, d.dtype, "unpack_f32_k", size_t(d.m * d.n * B), fc.mem, as_mem(d.c),
         cl_long(d.c.offset), cl_long(d.m), cl_long(d.n), cl_long(d.ldc), cl_long(d.stride_c), cl_long(B));
}

}  // namespace

size_t blas_kinds_waited_for() {
  std::lock_guard lock(blast_kinds_mu);
  return blast_kinds.size();
}
bool blas_kind_waited_for(cl_command_queue q, const char* routine, bool trans_a, bool trans_b, size_t m, size_t n,
                          size_t k) {
  const BlastKind kind = kind_of(q, routine, trans_a, trans_b, m, n, k);
  std::lock_guard lock(blast_kinds_mu);
  return blast_kinds.count(kind) > 0;
}

void blas_gemm(cl_command_queue q, int32_t dtype, bool trans_a, bool trans_b, size_t m, size_t n, size_t k,
               double alpha, const BlasMatrix& a, const BlasMatrix& b, double beta, const BlasMatrix& c,
               size_t batch) {
  const CLBlastTranspose ta = tr(trans_a), tb = tr(trans_b);
  const CLBlastLayout cm = CLBlastLayoutColMajor;
  if (dtype == FLX_F32 && batch == 1)
    blast(q, "CLBlastSgemm", trans_a, trans_b, m, n, k, [&] {
      return clblast().sgemm(cm, ta, tb, m, n, k, float(alpha), a.mem, a.offset, a.ld, b.mem, b.offset, b.ld,
                             float(beta), c.mem, c.offset, c.ld, &q, nullptr);
    });
  else if (dtype == FLX_F32)
    blast(q, "CLBlastSgemmStridedBatched", trans_a, trans_b, m, n, k, [&] {
      return clblast().sgemm_batched(cm, ta, tb, m, n, k, float(alpha), a.mem, a.offset, a.ld, a.stride, b.mem,
                                     b.offset, b.ld, b.stride, float(beta), c.mem, c.offset, c.ld, c.stride, batch,
                                     &q, nullptr);
    });
  else if (dtype == FLX_F64 && batch == 1)
    blast(q, "CLBlastDgemm", trans_a, trans_b, m, n, k, [&] {
      return clblast().dgemm(cm, ta, tb, m, n, k, alpha, a.mem, a.offset, a.ld, b.mem, b.offset, b.ld, beta, c.mem,
                             c.offset, c.ld, &q, nullptr);
    });
  else if (dtype == FLX_F64)
    blast(q, "CLBlastDgemmStridedBatched", trans_a, trans_b, m, n, k, [&] {
      return clblast().dgemm_batched(cm, ta, tb, m, n, k, alpha, a.mem, a.offset, a.ld, a.stride, b.mem, b.offset,
                                     b.ld, b.stride, beta, c.mem, c.offset, c.ld, c.stride, batch, &q, nullptr);
    });
  else
    raise(FLX_ERR_UNSUPPORTED, std::string("blas_gemm takes Float32 and Float64; got ") + dtype_name(dtype));
}

int gemm(void*, int dev, const flx_gemm_desc* dp, flx_stream s) {
  return guard("gemm", [&] {
    const flx_gemm_desc& d = *dp;
    require_float(d.dtype, "gemm");
    if (d.m < 0 || d.n < 0 || d.k < 0 || d.batch < 0) raise(FLX_ERR_INVALID_ARGUMENT, "negative dimension");
    if (d.m == 0 || d.n == 0 || d.batch == 0) return;
    Device& dv = device(dev);
    cl_command_queue q = queue_of(dv, s);
    const size_t es = dtype_size(d.dtype);
    const size_t ao = elem_offset(d.a, es, "gemm"), bo = elem_offset(d.b, es, "gemm"),
                 co = elem_offset(d.c, es, "gemm");
    if (d.k == 0) {  // C = beta * C: CLBlast rejects k == 0
      launch(dv, q, kComputeKernels, d.dtype, "gemm_scale_k", size_t(d.m * d.n * d.batch), as_mem(d.c),
             cl_long(d.c.offset), cl_long(d.m), cl_long(d.n), cl_long(d.ldc), cl_long(d.stride_c), cl_long(d.batch),
             compute_scalar(d.dtype, d.beta));
      return;
    }
    switch (d.dtype) {
      case FLX_F32:
        gemm_float(q, d, as_mem(d.a), ao, size_t(d.lda), size_t(d.stride_a), as_mem(d.b), bo, size_t(d.ldb),
                   size_t(d.stride_b), as_mem(d.c), co, size_t(d.ldc), size_t(d.stride_c));
        break;
      case FLX_F64:
        if (!dv.fp64) raise(FLX_ERR_UNSUPPORTED, "Float64 needs cl_khr_fp64, which " + dv.name + " lacks");
        gemm_double(q, d, ao, bo, co);
        break;
      default:
        gemm_halves(dv, q, d);
    }
  });
}

}  // namespace flx_ocl
