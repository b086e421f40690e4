/* flx's element types, listed once. Everything that has one line per dtype
 * is generated from this list: the ABI's flx_dtype codes (backend.h),
 * flx::DType and its names, sizes, kinds and promotion ranks (dtype.hpp,
 * dtype.cpp), each backend's dispatch from a code to its storage type (the
 * CPU's cpu_common.hpp, CUDA's cuda_kernels.cuh), the OpenCL programs'
 * D_<SUFFIX> codes (ocl_program.cpp passes them as -D options), the
 * plugins' names and sizes, and safetensors' dtype strings. A new element
 * type is a line here, then its storage type in each backend's map (the
 * dispatch does not compile until it has one) and its arithmetic.
 *
 * FLX_DTYPES(X) calls X(CODE, SUFFIX, NAME, BYTES, KIND, RANK), in code
 * order:
 *   CODE    the ABI's flx_dtype value, FLX_<SUFFIX>, and flx::DType::NAME's;
 *   SUFFIX  the short name: FLX_F32, OpenCL's D_F32, safetensors' "F32";
 *   NAME    flx's name: flx::Float32, "Float32" in messages;
 *   BYTES   the size of an element;
 *   KIND    FLOAT, HALF (a 16-bit float that computes in float), INT or
 *           BOOL: FLX_DTYPE_IS_FLOAT_##KIND and FLX_DTYPE_IS_INT_##KIND
 *           say 1 or 0, FLX_DTYPE_IF_FLOAT_##KIND(text) keeps its text for
 *           the floating kinds only;
 *   RANK    type promotion's order (docs/dtypes.md): the higher rank wins,
 *           and two different dtypes of one rank (Float16 and BFloat16)
 *           promote to Float32.
 *
 * Preprocessor text only, so that C, C++, CUDA C and OpenCL C read it.
 * The codes are the ABI: never renumber them, only append. */
#ifndef FLX_DTYPE_LIST_H
#define FLX_DTYPE_LIST_H

#define FLX_DTYPES(X)              \
  X(0, F32, Float32, 4, FLOAT, 5)  \
  X(1, F64, Float64, 8, FLOAT, 6)  \
  X(2, F16, Float16, 2, HALF, 4)   \
  X(3, BF16, BFloat16, 2, HALF, 4) \
  X(4, I32, Int32, 4, INT, 2)      \
  X(5, I64, Int64, 8, INT, 3)      \
  X(6, U8, UInt8, 1, INT, 1)       \
  X(7, BOOL, Bool, 1, BOOL, 0)

/* The number of codes (0 to FLX_DTYPE_COUNT - 1). */
#define FLX_DTYPE_COUNT 8

#define FLX_DTYPE_IS_FLOAT_FLOAT 1
#define FLX_DTYPE_IS_FLOAT_HALF 1
#define FLX_DTYPE_IS_FLOAT_INT 0
#define FLX_DTYPE_IS_FLOAT_BOOL 0
#define FLX_DTYPE_IS_INT_FLOAT 0
#define FLX_DTYPE_IS_INT_HALF 0
#define FLX_DTYPE_IS_INT_INT 1
#define FLX_DTYPE_IS_INT_BOOL 0
#define FLX_DTYPE_IF_FLOAT_FLOAT(...) __VA_ARGS__
#define FLX_DTYPE_IF_FLOAT_HALF(...) __VA_ARGS__
#define FLX_DTYPE_IF_FLOAT_INT(...)
#define FLX_DTYPE_IF_FLOAT_BOOL(...)

#endif /* FLX_DTYPE_LIST_H */
