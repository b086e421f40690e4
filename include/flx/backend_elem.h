/* flx backend ABI: the element functions the op bodies of backend_ops.h use.
 *
 * Written in the subset shared by C++, OpenCL C and CUDA C, so that the CPU
 * backend, the OpenCL kernels (this file is embedded in their source) and
 * the CUDA kernels compute with the same code. The including language
 * defines, before including it:
 *
 *   FLX_ELEM_FN       the function prefix: `template <class CT> inline` in
 *                     C++ (CT deduced from the argument), `inline` in OpenCL C
 *                     with CT a typedef, `template <class CT> __device__
 *                     inline` in CUDA
 *   FLX_ELEM_IS_FLOAT 1 when the floating helpers may be compiled (always in
 *                     C++ and CUDA, where templates are instantiated only
 *                     for floating CT; per program in OpenCL)
 *
 * and makes exp, log, tanh, erf, log1p, sqrt, pow, sin and cos callable
 * unqualified.
 */
#ifndef FLX_BACKEND_ELEM_H
#define FLX_BACKEND_ELEM_H

#ifndef K
#define K(v) ((CT)(v))
#endif

/* max and min that propagate NaN (as Julia's max and PyTorch's maximum):
 * y wins when it is larger or NaN. x != x is false for integers. */
FLX_ELEM_FN CT max_nan(CT x, CT y) { return y > x || y != y ? y : x; }
FLX_ELEM_FN CT min_nan(CT x, CT y) { return y < x || y != y ? y : x; }

/* x < 0 is false for unsigned types, so abs is the identity there. */
FLX_ELEM_FN CT abs_of(CT x) { return x < K(0) ? (CT)(-x) : x; }
FLX_ELEM_FN CT sign_of(CT x) { return (CT)((K(0) < x) - (x < K(0))); }

#if FLX_ELEM_IS_FLOAT
/* The logistic function without overflow for large |x|. */
FLX_ELEM_FN CT sigm(CT x) {
  if (x >= K(0)) return K(1) / (K(1) + exp(-x));
  CT e = exp(x);
  return e / (K(1) + e);
}
/* d/dx of the tanh form of gelu. */
FLX_ELEM_FN CT gelu_tanh_grad(CT x) {
  CT u = K(FLX_GELU_K) * (x + K(0.044715) * x * x * x);
  CT t = tanh(u);
  return K(0.5) * (K(1) + t) + K(0.5) * x * (K(1) - t * t) * K(FLX_GELU_K) * (K(1) + K(3 * 0.044715) * x * x);
}
/* d/dx of x/2 (1 + erf(x/sqrt 2)). */
FLX_ELEM_FN CT gelu_erf_grad(CT x) {
  return K(0.5) * (K(1) + erf(x * K(FLX_SQRT_HALF))) + x * K(FLX_INV_SQRT_2PI) * exp(K(-0.5) * x * x);
}
/* NNlib's hardsigmoid, clamp((x + 3) / 6, 0, 1); NaN stays NaN. */
FLX_ELEM_FN CT hardsigm(CT x) { return x <= K(-3) ? K(0) : (x >= K(3) ? K(1) : (x + K(3)) / K(6)); }
/* log(1 + exp(x)) without overflow (softplus's body). */
FLX_ELEM_FN CT softplus_of(CT x) { return log1p(exp(-abs_of(x))) + max_nan(x, K(0)); }
/* d/dx of x sigm(sqrt(8/pi) x (1 + 0.044715 x^2)), gelu's sigmoid form. */
FLX_ELEM_FN CT gelu_sigmoid_grad(CT x) {
  CT s = sigm(K(FLX_GELU_2K) * x * (K(1) + K(0.044715) * x * x));
  return s + x * s * (K(1) - s) * K(FLX_GELU_2K) * (K(1) + K(3 * 0.044715) * x * x);
}
/* d/dx of x tanh(softplus(x)). */
FLX_ELEM_FN CT mish_grad(CT x) {
  CT t = tanh(softplus_of(x));
  return t + x * (K(1) - t * t) * sigm(x);
}
/* NNlib's softshrink: x - a above a, x + a below -a, else 0; NaN stays NaN. */
FLX_ELEM_FN CT softshrink_of(CT x, CT a) {
  return x + a > K(0) ? (x - a < K(0) ? K(0) : x - a) : x + a;
}
#endif

#endif /* FLX_BACKEND_ELEM_H */
