/* flx backend ABI: the one list of elementwise (map) ops.
 *
 * Every map op is defined here once: its code (part of the ABI: never
 * renumber), its arity, the element types it takes, the op computing its
 * derivative product, and its body. Everything else is generated from this
 * list: the C enum flx_map_op (backend.h), the CPU backend's dispatch, the
 * OpenCL kernels' switch (as source text), the CUDA kernels', the frontend's
 * autodiff rule for activations with a fused derivative, and the ABI tests.
 *
 *   X(NAME, CODE, ARITY, CLASS, GRAD, BODY)
 *
 * NAME   FLX_OP_<NAME> in the enum; lower-cased, the op's name in messages.
 * CODE   unary 0-31 then 128-191, binary 32-63 then 192-255, derivative
 *        products 64-95 then 256-319, ternary 96-127 (kMaxOpCode in
 *        backends/backend_common/map_op_info.hpp is one past the last).
 * CLASS  the input types an op takes:
 *          ALL    every dtype, Bool included
 *          NUM    every dtype but Bool
 *          FLOAT  floating dtypes only (the frontend converts integers)
 *          CMP    every dtype; the output is Bool
 *          SELECT in0 is Bool, in1 and in2 any dtype (WHERE)
 * GRAD   for a unary op with a fused derivative: the op that computes
 *        g * f'(x) from (x, g) and the same alpha/beta. NONE otherwise.
 * BODY   the value, as an expression in the compute type CT of the inputs
 *        x (in0), y (in1) and the parameters a (alpha), b (beta). K(v)
 *        converts a constant to CT. It is compiled as C++ (the CPU), as
 *        OpenCL C and as CUDA C, with the helpers of backend_elem.h, so one
 *        body serves every backend. Integer types never reach a FLOAT body.
 *
 * Adding an op: one line here (a new code, never a reused one); one line in
 * FLX_MAP_OPS_ADDED with the ABI minor version that brings it, which is a
 * new one (raise FLX_BACKEND_ABI_MINOR in backend_types.h, unless the change that
 * brings the op raised it already: plugins built at a minor that is on main
 * exist, and must not be sent a code they do not know); its autodiff rule in
 * src/ops (none for an activation with a GRAD partner: the generic rule uses
 * GRAD); and a conformance case. See docs/backends.md.
 */
#ifndef FLX_BACKEND_OPS_H
#define FLX_BACKEND_OPS_H

/* clang-format off */
#define FLX_MAP_OPS(X) \
  /* unary */ \
  X(COPY,      0, 1, ALL,   NONE,           x) \
  X(NEG,       1, 1, NUM,   NONE,           (CT)(-x)) \
  X(ABS,       2, 1, NUM,   NONE,           abs_of(x)) \
  X(SIGN,      3, 1, NUM,   NONE,           sign_of(x)) \
  X(SQUARE,    4, 1, NUM,   NONE,           (CT)(x * x)) \
  X(SQRT,      5, 1, FLOAT, NONE,           sqrt(x)) \
  X(EXP,       6, 1, FLOAT, NONE,           exp(x)) \
  X(LOG,       7, 1, FLOAT, NONE,           log(x)) \
  X(SIGMOID,   8, 1, FLOAT, NONE,           sigm(x)) \
  X(TANH,      9, 1, FLOAT, NONE,           tanh(x)) \
  X(RELU,     10, 1, NUM,   NONE,           x > K(0) || x != x ? x : K(0)) \
  X(GELU,     11, 1, FLOAT, GELU_GRAD,      K(0.5) * x * (K(1) + tanh(K(FLX_GELU_K) * (x + K(0.044715) * x * x * x)))) \
  X(LEAKYRELU,12, 1, FLOAT, LEAKYRELU_GRAD, x > K(0) ? x : a * x) \
  X(ELU,      13, 1, FLOAT, ELU_GRAD,       x >= K(0) ? x : a * (exp(x) - K(1))) \
  X(SWISH,    14, 1, FLOAT, SWISH_GRAD,     x * sigm(x)) \
  X(SOFTPLUS, 15, 1, FLOAT, SOFTPLUS_GRAD,  log1p(exp(-abs_of(x))) + max_nan(x, K(0))) \
  X(NOT,      16, 1, ALL,   NONE,           (CT)(!x)) \
  X(CLAMP,    17, 1, NUM,   CLAMP_GRAD,     min_nan(max_nan(x, a), b)) \
  X(RECIP,    18, 1, FLOAT, NONE,           K(1) / x) \
  X(GELU_ERF, 19, 1, FLOAT, GELU_ERF_GRAD,  K(0.5) * x * (K(1) + erf(x * K(FLX_SQRT_HALF)))) \
  X(CELU,     20, 1, FLOAT, CELU_GRAD,      max_nan(x, K(0)) + min_nan(K(0), a * (exp(x / a) - K(1)))) \
  X(SOFTSIGN, 21, 1, FLOAT, SOFTSIGN_GRAD,  x / (K(1) + abs_of(x))) \
  X(SIN,      22, 1, FLOAT, NONE,           sin(x)) \
  X(COS,      23, 1, FLOAT, NONE,           cos(x)) \
  X(ERF,      24, 1, FLOAT, NONE,           erf(x)) \
  X(HARDSIGMOID, 25, 1, FLOAT, HARDSIGMOID_GRAD, hardsigm(x)) \
  X(HARDTANH,  26, 1, FLOAT, HARDTANH_GRAD,  x < K(-1) ? K(-1) : (x > K(1) ? K(1) : x)) \
  X(RELU6,     27, 1, FLOAT, RELU6_GRAD,     x < K(0) ? K(0) : (x > K(6) ? K(6) : x)) \
  X(GELU_SIGMOID, 28, 1, FLOAT, GELU_SIGMOID_GRAD, x * sigm(K(FLX_GELU_2K) * x * (K(1) + K(0.044715) * x * x))) \
  X(HARDSWISH, 29, 1, FLOAT, HARDSWISH_GRAD, x * hardsigm(x)) \
  X(SELU,      30, 1, FLOAT, SELU_GRAD,      K(FLX_SELU_L) * (x > K(0) ? x : K(FLX_SELU_A) * (exp(x) - K(1)))) \
  X(LOGSIGMOID, 31, 1, FLOAT, LOGSIGMOID_GRAD, min_nan(x, K(0)) - log1p(exp(-abs_of(x)))) \
  X(LOGCOSH,  128, 1, FLOAT, LOGCOSH_GRAD,   abs_of(x) + log1p(exp(K(-2) * abs_of(x))) - K(FLX_LN2)) \
  X(MISH,     129, 1, FLOAT, MISH_GRAD,      x * tanh(softplus_of(x))) \
  X(TANHSHRINK, 130, 1, FLOAT, TANHSHRINK_GRAD, x - tanh(x)) \
  X(SOFTSHRINK, 131, 1, FLOAT, SOFTSHRINK_GRAD, softshrink_of(x, a)) \
  X(TRELU,    132, 1, FLOAT, TRELU_GRAD,     x <= a ? K(0) : x) \
  X(LISHT,    133, 1, FLOAT, LISHT_GRAD,     x * tanh(x)) \
  /* binary */ \
  X(ADD,      32, 2, NUM,   NONE,           (CT)(x + y)) \
  X(SUB,      33, 2, NUM,   NONE,           (CT)(x - y)) \
  X(MUL,      34, 2, NUM,   NONE,           (CT)(x * y)) \
  X(DIV,      35, 2, FLOAT, NONE,           x / y) \
  X(POW,      36, 2, FLOAT, NONE,           pow(x, y)) \
  X(MAX,      37, 2, ALL,   NONE,           max_nan(x, y)) \
  X(MIN,      38, 2, ALL,   NONE,           min_nan(x, y)) \
  X(XLOGY,    39, 2, FLOAT, NONE,           x == K(0) ? K(0) : x * log(y)) \
  X(EQ,       40, 2, CMP,   NONE,           x == y) \
  X(NE,       41, 2, CMP,   NONE,           x != y) \
  X(LT,       42, 2, CMP,   NONE,           x < y) \
  X(LE,       43, 2, CMP,   NONE,           x <= y) \
  X(GT,       44, 2, CMP,   NONE,           x > y) \
  X(GE,       45, 2, CMP,   NONE,           x >= y) \
  X(RRELU,    46, 2, FLOAT, NONE,           x > K(0) ? x : y * x) /* y: each element's slope */ \
  /* derivative products (x or y, upstream gradient g = y here) */ \
  X(RELU_GRAD,      64, 2, FLOAT, NONE, x > K(0) ? y : K(0)) \
  X(GELU_GRAD,      65, 2, FLOAT, NONE, y * gelu_tanh_grad(x)) \
  X(LEAKYRELU_GRAD, 66, 2, FLOAT, NONE, x > K(0) ? y : a * y) \
  X(ELU_GRAD,       67, 2, FLOAT, NONE, x >= K(0) ? y : y * a * exp(x)) \
  X(SWISH_GRAD,     68, 2, FLOAT, NONE, y * (sigm(x) + x * sigm(x) * (K(1) - sigm(x)))) \
  X(SOFTPLUS_GRAD,  69, 2, FLOAT, NONE, y * sigm(x)) \
  X(SIGMOID_GRAD,   70, 2, FLOAT, NONE, y * x * (K(1) - x)) /* x is the output */ \
  X(TANH_GRAD,      71, 2, FLOAT, NONE, y * (K(1) - x * x))  /* x is the output */ \
  X(ABS_GRAD,       72, 2, FLOAT, NONE, y * sign_of(x)) \
  X(CLAMP_GRAD,     73, 2, FLOAT, NONE, (x >= a && x <= b) ? y : K(0)) \
  X(GELU_ERF_GRAD,  74, 2, FLOAT, NONE, y * gelu_erf_grad(x)) \
  X(CELU_GRAD,      75, 2, FLOAT, NONE, x > K(0) ? y : y * exp(x / a)) \
  X(SOFTSIGN_GRAD,  76, 2, FLOAT, NONE, y / ((K(1) + abs_of(x)) * (K(1) + abs_of(x)))) \
  X(HARDSIGMOID_GRAD, 77, 2, FLOAT, NONE, x > K(-3) && x < K(3) ? y / K(6) : K(0)) \
  X(HARDTANH_GRAD,  78, 2, FLOAT, NONE, x > K(-1) && x < K(1) ? y : K(0)) \
  X(RELU6_GRAD,     79, 2, FLOAT, NONE, x > K(0) && x < K(6) ? y : K(0)) \
  X(GELU_SIGMOID_GRAD, 80, 2, FLOAT, NONE, y * gelu_sigmoid_grad(x)) \
  X(HARDSWISH_GRAD, 81, 2, FLOAT, NONE, x < K(-3) ? K(0) : (x > K(3) ? y : y * (x / K(3) + K(0.5)))) \
  X(SELU_GRAD,      82, 2, FLOAT, NONE, x > K(0) ? y * K(FLX_SELU_L) : y * K(FLX_SELU_LA) * exp(x)) \
  X(LOGSIGMOID_GRAD, 83, 2, FLOAT, NONE, y * sigm(-x)) \
  X(LOGCOSH_GRAD,   84, 2, FLOAT, NONE, y * tanh(x)) \
  X(MISH_GRAD,      85, 2, FLOAT, NONE, y * mish_grad(x)) \
  X(TANHSHRINK_GRAD, 86, 2, FLOAT, NONE, y * tanh(x) * tanh(x)) \
  X(SOFTSHRINK_GRAD, 87, 2, FLOAT, NONE, softshrink_of(x, a) != K(0) ? y : K(0)) \
  X(TRELU_GRAD,     88, 2, FLOAT, NONE, x > a ? y : K(0)) \
  X(LISHT_GRAD,     89, 2, FLOAT, NONE, y * (tanh(x) + x * (K(1) - tanh(x) * tanh(x)))) \
  /* ternary */ \
  X(WHERE,          96, 3, SELECT, NONE, K(0) /* a select: each backend's map loop */)

/* The ABI minor version that brought each op code, where it is not 0:
 *   X(NAME, MINOR)
 * libflx runs an op on a backend only when the backend's abi_minor is at
 * least the op's minor (an older plugin does not know the code: the op is
 * NotImplemented there, with this version in the message). */
#define FLX_MAP_OPS_ADDED(X) \
  X(SOFTSIGN, 3) X(SOFTSIGN_GRAD, 3) \
  X(SIN, 8) X(COS, 8) X(ERF, 8) \
  X(HARDSIGMOID, 11) X(HARDTANH, 11) X(RELU6, 11) X(GELU_SIGMOID, 11) X(HARDSWISH, 11) X(SELU, 11) \
  X(LOGSIGMOID, 11) X(LOGCOSH, 11) X(MISH, 11) X(TANHSHRINK, 11) X(SOFTSHRINK, 11) X(TRELU, 11) X(LISHT, 11) \
  X(RRELU, 11) \
  X(HARDSIGMOID_GRAD, 11) X(HARDTANH_GRAD, 11) X(RELU6_GRAD, 11) X(GELU_SIGMOID_GRAD, 11) X(HARDSWISH_GRAD, 11) \
  X(SELU_GRAD, 11) X(LOGSIGMOID_GRAD, 11) X(LOGCOSH_GRAD, 11) X(MISH_GRAD, 11) X(TANHSHRINK_GRAD, 11) \
  X(SOFTSHRINK_GRAD, 11) X(TRELU_GRAD, 11) X(LISHT_GRAD, 11)
/* clang-format on */

/* Constants the bodies use (plain literals, so every language reads them). */
#define FLX_GELU_K 0.7978845608028654     /* sqrt(2/pi) */
#define FLX_SQRT_HALF 0.7071067811865476  /* 1/sqrt(2) */
#define FLX_INV_SQRT_2PI 0.3989422804014327 /* 1/sqrt(2 pi) */
#define FLX_GELU_2K 1.5957691216057308    /* sqrt(8/pi) */
#define FLX_SELU_L 1.0507009873554805     /* selu's lambda */
#define FLX_SELU_A 1.6732632423543772     /* selu's alpha */
#define FLX_SELU_LA 1.7580993408473768    /* lambda * alpha */
#define FLX_LN2 0.6931471805599453        /* log(2) */

#endif /* FLX_BACKEND_OPS_H */
