// One column-major product through CLBlast for the plugin's own host code
// (the dnn table's convolutions), beside the compute table's gemm: the same
// CLBlast, opened on first use (ocl_gemm.cpp). Float32 and Float64 only.
#pragma once

#include <cstddef>

#include "ocl_common.hpp"

namespace flx_ocl {

// A matrix operand: a cl_mem, an offset and a leading dimension in
// elements, and the distance between the matrices of a batch.
struct BlasMatrix {
  cl_mem mem;
  size_t offset, ld, stride = 0;
};

// C = alpha * op(A) * op(B) + beta * C for `batch` products (one call of
// CLBlast's Xgemm when batch is 1, of XgemmStridedBatched otherwise);
// m, n, k >= 1. Throws FLX_ERR_DEVICE (FLX_ERR_OUT_OF_MEMORY) with CLBlast's
// status.
void blas_gemm(cl_command_queue q, int32_t dtype, bool trans_a, bool trans_b, size_t m, size_t n, size_t k,
               double alpha, const BlasMatrix& a, const BlasMatrix& b, double beta, const BlasMatrix& c,
               size_t batch = 1);

// How many kinds of CLBlast product (routine, transpositions, size to a
// power of two, device) this process has run; the first of each waited for
// its queue, so that PoCL's compile of its kernels is over (ocl_gemm.cpp).
size_t blas_kinds_waited_for();
// Whether that routine's product of that kind on q's device has run (and waited).
bool blas_kind_waited_for(cl_command_queue q, const char* routine, bool trans_a, bool trans_b, size_t m, size_t n,
                          size_t k);

}  // namespace flx_ocl
