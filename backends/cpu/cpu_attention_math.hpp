// The CPU attention kernel's column operations (cpu_dnn_attention.cpp): a
// tile's scores are stored key-fastest, so each query's scores are one
// contiguous column; the online softmax takes its maximum and turns it into
// exponentials and their sum.
#pragma once

#include <cstdint>

namespace flx::cpu_backend::attention_math {

// x[j] = e^(x[j] - shift) over n contiguous values (shift >= each of them,
// up to rounding); returns their sum. Float32: Cephes' expf (the
// polynomial of cpu_vector_math.hpp, within 1 ulp), e^-Inf = 0, values
// below FLT_MIN 0, NaN kept; the sum in 16 partial sums (element j in sum
// j mod 16), then the 16 in order. The same bits with AVX-512, AVX2 or
// neither (no FMA: every step rounds as written). Float64: libm's exp,
// summed in order.
float exp_shifted(float* x, int64_t n, float shift);
double exp_shifted(double* x, int64_t n, double shift);

// exp_shifted's Float32 body for one instruction set, for tests: 0 the
// baseline, 1 AVX2, 2 AVX-512 (the CPU must have it).
float exp_shifted_on(int isa, float* x, int64_t n, float shift);
// The instruction sets this CPU has: 1 (the baseline), 2 (and AVX2), 3.
int exp_isas();

// The largest of n contiguous values (-Inf for none); NaNs are passed over
// as std::max passes them.
float column_max(const float* x, int64_t n);
double column_max(const double* x, int64_t n);

}  // namespace flx::cpu_backend::attention_math
