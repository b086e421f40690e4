// The dnn table (convolution, pooling, batch normalisation; ABI minor 5) in
// the OpenCL backend: the pieces its host files share. Kernels in
// kernels/{dnn_helpers,conv,pool,batchnorm}.cl (the family in
// ocl_families.cpp); convolution in ocl_dnn_conv.cpp (im2col and col2im
// kernels around CLBlast's GEMM); pooling and batch normalisation in
// ocl_dnn_norm.cpp.
#pragma once

#include <string>

#include "ocl_common.hpp"
#include "ocl_dtype.hpp"

namespace flx_ocl {

extern const KernelFamily kDnnKernels;  // ocl_families.cpp

// The dnn table's calls (FLX_DNN_CALLS), under their fields' names.
FLX_DECLARE_REQUIRED_CALLS(FLX_DNN_CALLS, flx_dnn_table)
FLX_DECLARE_CALL(flx_dnn_table, conv_workspace)

namespace dnn {

// A descriptor of the caller's build: at least as long as this header's
// (the table came with minor 5, so no shorter layout exists; a longer one
// is a newer caller's, whose extra fields are zero for this backend).
template <class D>
void check_struct_size(const D& d, const char* op, const char* type) {
  if (d.struct_size < sizeof(D))
    raise(FLX_ERR_INVALID_ARGUMENT, std::string(op) + ": the descriptor's struct_size is " +
                                        std::to_string(d.struct_size) + "; a " + type + " holds " +
                                        std::to_string(sizeof(D)) + " bytes since ABI 2.5 (set it to sizeof(" +
                                        type + "))");
}

// Float32 and Float64 (the latter where the device has cl_khr_fp64), and
// Float16 and BFloat16 (optional in backend.h; computed in float here),
// checked before anything is queued.
inline void require_dnn_dtype(const Device& dv, int32_t t, const char* op) {
  require_dtype(t, op);
  if (!is_float(t))
    raise(FLX_ERR_UNSUPPORTED, std::string(op) + " takes floating dtypes; got " + dtype_name(t) +
                                   " (convert to Float32 first)");
  if (t == FLX_F64 && !dv.fp64)
    raise(FLX_ERR_UNSUPPORTED, std::string(op) + ": Float64 needs cl_khr_fp64, which " + dv.name +
                                   " lacks; use Float32");
}

// A tensor operand of `elems` elements of size es: aligned, inside its
// buffer, of this device's context.
inline void check_operand(Device& dv, flx_mem m, int64_t elems, size_t es, const char* what) {
  if (!m.buf) raise(FLX_ERR_INVALID_ARGUMENT, std::string(what) + ": expected a buffer; got a NULL buf");
  elem_offset(m, es, what);
  check_range(dv, m, size_t(elems) * es, what);
}

inline int64_t positive(int64_t v, const char* op, const std::string& what) {
  if (v < 1)
    raise(FLX_ERR_INVALID_ARGUMENT, std::string(op) + ": " + what + " must be at least 1; got " + std::to_string(v));
  return v;
}

inline cl_long4 long4_of(const int64_t (&v)[3]) {
  cl_long4 r{};
  for (int k = 0; k < 3; ++k) r.s[k] = v[k];
  return r;
}

// The work-items for a kernel that runs one work-group per channel: C
// groups of the kernel's fixed local size.
inline size_t per_channel_items(Device& dv, int32_t dtype, const char* kernel_name, int64_t channels) {
  return size_t(channels) * kernel(dv, kDnnKernels, dtype, kernel_name).local;
}

}  // namespace dnn
}  // namespace flx_ocl
