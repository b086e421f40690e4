// Elementwise ops: arithmetic, comparisons, math functions and activations,
// with promotion, broadcasting and their backward rules.
#include <cmath>

#include "backend_common/map_op_info.hpp"
#include "flx/activations.hpp"
#include "ops_internal.hpp"

namespace flx {
namespace ops {

void check_defined(const Tensor& t, const char* op) {
  FLX_CHECK(t.defined(), ArgumentError, op, ": got an undefined tensor (e.g. a gradient that did not flow)");
}

void check_same_device(const Tensor& a, const Tensor& b, const char* op) {
  FLX_CHECK(a.device() == b.device(), DeviceMismatch, op, ": operands live on different devices, ", a.device(),
            " and ", b.device(), "; move one with .to(device) or `| device` first");
}

Shape broadcast_shape(const Shape& a, const Shape& b, const char* op) {
  if (a == b) return a;
  int n = std::max(a.ndims(), b.ndims());
  Shape out;
  for (int k = 0; k < n; ++k) {
    int64_t x = k < a.ndims() ? a[k] : 1, y = k < b.ndims() ? b[k] : 1;
    FLX_CHECK(x == y || x == 1 || y == 1, DimensionMismatch, op, ": shapes ", a, " and ", b,
              " cannot be broadcast together (dim ", k, ": ", x, " vs ", y, ")");
    out.push_back(x == 1 ? y : x);
  }
  return out;
}

static void set_operand(flx_operand& o, const Arg& a, const Shape& shape) {
  if (!a.t) {
    o.is_scalar = 1;
    o.scalar = a.scalar;
    return;
  }
  const Shape& s = a.t->shape();
  o.mem = detail::mem(*a.t);
  o.is_scalar = 0;
  int64_t stride = 1;
  for (int k = 0; k < shape.ndims(); ++k) {
    int64_t e = k < s.ndims() ? s[k] : 1;
    o.strides[k] = (e == 1 && shape[k] != 1) ? 0 : stride;
    stride *= e;
  }
}

void raw_map_into(const Tensor& out, int op, DType in_dtype, std::initializer_list<Arg> args, double alpha,
                  double beta) {
  flx_map_desc d;
  d.op = op;
  const Shape& shape = out.shape();
  d.ndim = shape.ndims();
  for (int k = 0; k < d.ndim; ++k) d.shape[k] = shape[k];
  d.ninputs = int32_t(args.size());
  d.in_dtype = int32_t(in_dtype);
  d.out_dtype = int32_t(out.dtype());
  int i = 0;
  for (const Arg& a : args) set_operand(d.in[i++], a, shape);
  d.out = detail::mem(out);
  d.alpha = alpha;
  d.beta = beta;
  if (out.numel() == 0) return;
  detail::be(out).map(detail::dev(out), d);
}

Tensor raw_map(int op, DType in_dtype, DType out_dtype, const Shape& shape, std::initializer_list<Arg> args,
               double alpha, double beta) {
  Device dev;
  for (const Arg& a : args)
    if (a.t) dev = a.t->device();
  Tensor out = empty(out_dtype, shape, dev);
  raw_map_into(out, op, in_dtype, args, alpha, beta);
  return out;
}

Tensor raw_unary(int op, const Tensor& x, double alpha, double beta) {
  return raw_map(op, x.dtype(), x.dtype(), x.shape(), {{&x}}, alpha, beta);
}
Tensor raw_binary(int op, const Tensor& a, const Tensor& b, double alpha, double beta) {
  check_same_device(a, b, "elementwise op");
  return raw_map(op, a.dtype(), a.dtype(), broadcast_shape(a.shape(), b.shape(), "elementwise op"), {{&a}, {&b}},
                 alpha, beta);
}

Tensor raw_cast(const Tensor& x, DType t) {
  Tensor out = empty(t, x.shape(), x.device());
  if (x.numel()) {
    detail::be(x).cast(detail::dev(x), detail::mem(out), t, detail::mem(x), x.dtype(), size_t(x.numel()));
  }
  return out;
}

void fill(const Tensor& t, double v) {
  detail::be(t).fill(detail::dev(t), detail::mem(t), t.dtype(), size_t(t.numel()), v);
}

}  // namespace ops

using ops::Arg;

// Casting is differentiable between floating types.
Tensor Tensor::to(DType t) const {
  ops::check_defined(*this, "to");
  if (dtype() == t) return *this;
  Tensor out = ops::raw_cast(*this, t);
  if (is_floating(dtype()) && is_floating(t)) {
    DType src = dtype();
    autograd::record("cast", autograd::Order::Higher, out, {*this},
                     [src](const Tensor& g, const bool*, Tensor* gi) { gi[0] = g.to(src); });
  }
  return out;
}

namespace {

using map_ops::is_compare;

// The element type op computes in, given the promoted operand type.
DType compute_type(int op, DType t) {
  if (is_compare(op) || op == FLX_OP_MAX || op == FLX_OP_MIN) return t;
  if (op == FLX_OP_DIV || op == FLX_OP_POW || op == FLX_OP_XLOGY) return is_floating(t) ? t : DType::Float32;
  return t == DType::Bool ? DType::Int64 : t;
}

const char* op_name(int op) {
  switch (op) {
    case FLX_OP_ADD: return "+";
    case FLX_OP_SUB: return "-";
    case FLX_OP_MUL: return "*";
    case FLX_OP_DIV: return "/";
    case FLX_OP_POW: return "pow";
    case FLX_OP_MAX: return "maximum";
    case FLX_OP_MIN: return "minimum";
    case FLX_OP_XLOGY: return "xlogy";
    case FLX_OP_EQ: return "==";
    case FLX_OP_NE: return "!=";
    case FLX_OP_LT: return "<";
    case FLX_OP_LE: return "<=";
    case FLX_OP_GT: return ">";
    case FLX_OP_GE: return ">=";
  }
  return "elementwise op";
}

// Backward of a binary op given both (promoted) inputs and the output.
void binary_backward(int op, const Tensor& a, const Tensor& b, const Tensor& out, const Tensor& g, const bool* needs,
                     Tensor* gi) {
  const Shape &sa = a.shape(), &sb = b.shape();
  switch (op) {
    case FLX_OP_ADD:
      if (needs[0]) gi[0] = ops::sum_to(g, sa);
      if (needs[1]) gi[1] = ops::sum_to(g, sb);
      break;
    case FLX_OP_SUB:
      if (needs[0]) gi[0] = ops::sum_to(g, sa);
      if (needs[1]) gi[1] = -ops::sum_to(g, sb);
      break;
    case FLX_OP_MUL:
      if (needs[0]) gi[0] = ops::sum_to(g * b, sa);
      if (needs[1]) gi[1] = ops::sum_to(g * a, sb);
      break;
    case FLX_OP_DIV:
      if (needs[0]) gi[0] = ops::sum_to(g / b, sa);
      if (needs[1]) gi[1] = -ops::sum_to(g * out / b, sb);
      break;
    case FLX_OP_POW:
      if (needs[0]) gi[0] = ops::sum_to(g * b * pow(a, b - 1.0), sa);
      if (needs[1]) gi[1] = ops::sum_to(g * out * log(a), sb);
      break;
    case FLX_OP_MAX:
    case FLX_OP_MIN: {
      Tensor pick_a = op == FLX_OP_MAX ? (a >= b) : (a <= b);
      if (needs[0]) gi[0] = ops::sum_to(where(pick_a, g, zeros(g.dtype(), Shape{}).to(g.device())), sa);
      if (needs[1]) gi[1] = ops::sum_to(where(pick_a, zeros(g.dtype(), Shape{}).to(g.device()), g), sb);
      break;
    }
    case FLX_OP_XLOGY:
      if (needs[0]) gi[0] = ops::sum_to(g * log(b), sa);
      if (needs[1]) gi[1] = ops::sum_to(g * a / b, sb);
      break;
  }
}

Tensor binary(int op, const Tensor& a0, const Tensor& b0) {
  ops::check_defined(a0, op_name(op));
  ops::check_defined(b0, op_name(op));
  ops::check_same_device(a0, b0, op_name(op));
  Shape shape = ops::broadcast_shape(a0.shape(), b0.shape(), op_name(op));
  DType ct = compute_type(op, promote_types(a0.dtype(), b0.dtype()));
  Tensor a = a0.to(ct), b = b0.to(ct);
  Tensor out = ops::raw_map(op, ct, is_compare(op) ? DType::Bool : ct, shape, {{&a}, {&b}});
  if (!is_compare(op) && (autograd::tracked(a) || autograd::tracked(b))) {
    bool keep_out = op == FLX_OP_DIV || op == FLX_OP_POW;
    Tensor saved_out = keep_out ? out.detach() : Tensor{};
    autograd::record(op_name(op), autograd::Order::Higher, out, {a, b},
                     [op, a, b, saved_out](const Tensor& g, const bool* n, Tensor* gi) {
                       binary_backward(op, a, b, autograd::saved_output(saved_out), g, n, gi);
                     });
  }
  return out;
}

}  // namespace

namespace detail {
Tensor scalar_op(ScalarOp sop, const Tensor& t0, double s, bool s_floating, bool scalar_left) {
  static constexpr int kCodes[] = {FLX_OP_ADD, FLX_OP_SUB, FLX_OP_MUL, FLX_OP_DIV, FLX_OP_EQ,
                                   FLX_OP_NE,  FLX_OP_LT,  FLX_OP_LE,  FLX_OP_GT,  FLX_OP_GE};
  const int op = kCodes[int(sop)];
  ops::check_defined(t0, op_name(op));
  DType base = t0.dtype();
  if (s_floating && !is_floating(base)) base = DType::Float32;
  DType ct = compute_type(op, base);
  Tensor t = t0.to(ct);
  Arg ta{&t}, sa{nullptr, s};
  Tensor out = scalar_left ? ops::raw_map(op, ct, is_compare(op) ? DType::Bool : ct, t.shape(), {sa, ta})
                           : ops::raw_map(op, ct, is_compare(op) ? DType::Bool : ct, t.shape(), {ta, sa});
  if (!is_compare(op) && autograd::tracked(t)) {
    Tensor saved = (op == FLX_OP_DIV && scalar_left) ? out.detach() : Tensor{};
    autograd::record(op_name(op), autograd::Order::Higher, out, {t},
                     [op, s, scalar_left, saved, ts = (op == FLX_OP_DIV && scalar_left) ? t : Tensor{}](
                         const Tensor& g, const bool*, Tensor* gi) {
                       switch (op) {
                         case FLX_OP_ADD: gi[0] = g; break;
                         case FLX_OP_SUB: gi[0] = scalar_left ? -g : g; break;
                         case FLX_OP_MUL: gi[0] = g * s; break;
                         case FLX_OP_DIV:
                           gi[0] = scalar_left ? -(g * autograd::saved_output(saved) / ts) : g / s;
                           break;
                       }
                     });
  }
  return out;
}
}  // namespace detail

Tensor operator+(const Tensor& a, const Tensor& b) { return binary(FLX_OP_ADD, a, b); }
Tensor operator-(const Tensor& a, const Tensor& b) { return binary(FLX_OP_SUB, a, b); }
Tensor operator*(const Tensor& a, const Tensor& b) { return binary(FLX_OP_MUL, a, b); }
Tensor operator/(const Tensor& a, const Tensor& b) { return binary(FLX_OP_DIV, a, b); }
Tensor operator==(const Tensor& a, const Tensor& b) { return binary(FLX_OP_EQ, a, b); }
Tensor operator!=(const Tensor& a, const Tensor& b) { return binary(FLX_OP_NE, a, b); }
Tensor operator<(const Tensor& a, const Tensor& b) { return binary(FLX_OP_LT, a, b); }
Tensor operator<=(const Tensor& a, const Tensor& b) { return binary(FLX_OP_LE, a, b); }
Tensor operator>(const Tensor& a, const Tensor& b) { return binary(FLX_OP_GT, a, b); }
Tensor operator>=(const Tensor& a, const Tensor& b) { return binary(FLX_OP_GE, a, b); }
Tensor pow(const Tensor& x, const Tensor& p) { return binary(FLX_OP_POW, x, p); }
Tensor maximum(const Tensor& a, const Tensor& b) { return binary(FLX_OP_MAX, a, b); }
Tensor minimum(const Tensor& a, const Tensor& b) { return binary(FLX_OP_MIN, a, b); }
Tensor xlogy(const Tensor& x, const Tensor& y) { return binary(FLX_OP_XLOGY, x, y); }

Tensor pow(const Tensor& x0, double p) {
  ops::check_defined(x0, "pow");
  Tensor x = is_floating(x0.dtype()) ? x0 : x0.to(DType::Float32);
  Tensor out = ops::raw_map(FLX_OP_POW, x.dtype(), x.dtype(), x.shape(), {{&x}, {nullptr, p}});
  autograd::record("pow", autograd::Order::Higher, out, {x},
                   [x, p](const Tensor& g, const bool*, Tensor* gi) { gi[0] = g * p * pow(x, p - 1.0); });
  return out;
}

namespace {

// A unary op: integer inputs of float-only ops compute in Float32.
Tensor unary(int op, const Tensor& x0, double alpha = 0, double beta = 0) {
  ops::check_defined(x0, "unary op");
  const auto cls = map_ops::info(op).cls;
  bool int_ok = cls == map_ops::OpClass::Num || cls == map_ops::OpClass::All;
  DType t = x0.dtype();
  if (!is_floating(t) && (!int_ok || t == DType::Bool)) t = int_ok ? DType::Int64 : DType::Float32;
  Tensor x = x0.to(t);
  Tensor out = ops::raw_unary(op, x, alpha, beta);
  if (!autograd::tracked(x)) return out;
  // Rules that use the output (y) save it; the others save the input. The
  // fused gradient kernels are first order; while a backward pass is recorded
  // (nested gradient calls) the common ones are composed of recorded ops.
  using autograd::Order;
  using autograd::saved_output;
  switch (op) {
    case FLX_OP_NEG:
      autograd::record("-", Order::Higher, out, {x}, [](const Tensor& g, const bool*, Tensor* gi) { gi[0] = -g; });
      break;
    case FLX_OP_EXP:
      autograd::record("exp", Order::Higher, out, {x}, [y = out.detach()](const Tensor& g, const bool*, Tensor* gi) {
        gi[0] = g * saved_output(y);
      });
      break;
    case FLX_OP_SQRT:
      autograd::record("sqrt", Order::Higher, out, {x}, [y = out.detach()](const Tensor& g, const bool*, Tensor* gi) {
        gi[0] = g / (saved_output(y) * 2.0);
      });
      break;
    case FLX_OP_SIGMOID:
    case FLX_OP_TANH: {
      bool sig = op == FLX_OP_SIGMOID;
      autograd::record(sig ? "sigmoid" : "tanh", Order::Higher, out, {x},
                       [sig, y = out.detach()](const Tensor& g, const bool*, Tensor* gi) {
                         if (!detail::is_recording()) {
                           gi[0] = ops::raw_binary(sig ? FLX_OP_SIGMOID_GRAD : FLX_OP_TANH_GRAD, y, g);
                           return;
                         }
                         Tensor yy = saved_output(y);
                         gi[0] = sig ? g * (yy * (1.0 - yy)) : g * (1.0 - square(yy));
                       });
      break;
    }
    case FLX_OP_SQUARE:
      autograd::record("square", Order::Higher, out, {x},
                       [x](const Tensor& g, const bool*, Tensor* gi) { gi[0] = g * x * 2.0; });
      break;
    case FLX_OP_LOG:
      autograd::record("log", Order::Higher, out, {x},
                       [x](const Tensor& g, const bool*, Tensor* gi) { gi[0] = g / x; });
      break;
    case FLX_OP_SIN:
      autograd::record("sin", Order::Higher, out, {x},
                       [x](const Tensor& g, const bool*, Tensor* gi) { gi[0] = g * cos(x); });
      break;
    case FLX_OP_COS:
      autograd::record("cos", Order::Higher, out, {x},
                       [x](const Tensor& g, const bool*, Tensor* gi) { gi[0] = -(g * sin(x)); });
      break;
    case FLX_OP_ERF:  // d/dx erf(x) = 2/sqrt(pi) exp(-x^2)
      autograd::record("erf", Order::Higher, out, {x}, [x](const Tensor& g, const bool*, Tensor* gi) {
        gi[0] = g * (exp(-square(x)) * 1.1283791670955126);
      });
      break;
    case FLX_OP_SIGN:
      break;  // zero almost everywhere: no gradient flows
    case FLX_OP_ABS:
    case FLX_OP_RELU: {
      // g·sign(x) and g·(x > 0): the factor is constant almost everywhere.
      bool is_abs = op == FLX_OP_ABS;
      autograd::record(is_abs ? "abs" : "relu", Order::Higher, out, {x},
                       [is_abs, x = x.detach()](const Tensor& g, const bool*, Tensor* gi) {
                         if (!detail::is_recording())
                           gi[0] = ops::raw_binary(is_abs ? FLX_OP_ABS_GRAD : FLX_OP_RELU_GRAD, x, g.to(x.dtype()));
                         else
                           gi[0] = g * (is_abs ? sign(x) : (x > 0.0).to(x.dtype()));
                       });
      break;
    }
    default: {
      // An op with a fused derivative (GRAD in backend_ops.h): g * f'(x)
      // in one kernel. First order only.
      const int gop = map_ops::info(op).grad;
      const char* name = map_ops::info(op).name;
      FLX_CHECK(gop != FLX_OP_NONE, Error, "internal: no backward rule for the unary op ", name);
      autograd::record(name, Order::FirstOnly, out, {x},
                       [gop, alpha, beta, x = x.detach()](const Tensor& g, const bool*, Tensor* gi) {
                         gi[0] = ops::raw_binary(gop, x, g.to(x.dtype()), alpha, beta);
                       });
    }
  }
  return out;
}

}  // namespace

Tensor operator-(const Tensor& a) { return unary(FLX_OP_NEG, a); }
Tensor square(const Tensor& x) { return unary(FLX_OP_SQUARE, x); }
Tensor sqrt(const Tensor& x) { return unary(FLX_OP_SQRT, x); }
Tensor exp(const Tensor& x) { return unary(FLX_OP_EXP, x); }
Tensor log(const Tensor& x) { return unary(FLX_OP_LOG, x); }
Tensor abs(const Tensor& x) { return unary(FLX_OP_ABS, x); }
Tensor sign(const Tensor& x) { return unary(FLX_OP_SIGN, x); }
Tensor sin(const Tensor& x) { return unary(FLX_OP_SIN, x); }
Tensor cos(const Tensor& x) { return unary(FLX_OP_COS, x); }
Tensor erf(const Tensor& x) { return unary(FLX_OP_ERF, x); }
Tensor clamp(const Tensor& x, double lo, double hi) {
  FLX_CHECK(lo <= hi, ArgumentError, "clamp: expected lo <= hi; got ", lo, " > ", hi);
  return unary(FLX_OP_CLAMP, x, lo, hi);
}

Tensor ops::activate(int op, const Tensor& x, double alpha) { return unary(op, x, alpha); }

Tensor where(const Tensor& cond, const Tensor& a0, const Tensor& b0) {
  ops::check_defined(cond, "where");
  FLX_CHECK(cond.dtype() == DType::Bool, TypeError, "where: the condition must be Bool; got ", cond.dtype());
  ops::check_same_device(cond, a0, "where");
  ops::check_same_device(a0, b0, "where");
  Shape shape = ops::broadcast_shape(cond.shape(), ops::broadcast_shape(a0.shape(), b0.shape(), "where"), "where");
  DType t = promote_types(a0.dtype(), b0.dtype());
  Tensor a = a0.to(t), b = b0.to(t);
  Tensor out = ops::raw_map(FLX_OP_WHERE, t, t, shape, {{&cond}, {&a}, {&b}});
  autograd::record("where", autograd::Order::Higher, out, {a, b},
                   [c = cond, sa = a.shape(), sb = b.shape()](const Tensor& g, const bool* n, Tensor* gi) {
    Tensor z = zeros(g.dtype(), Shape{}).to(g.device());
    if (n[0]) gi[0] = ops::sum_to(where(c, g, z), sa);
    if (n[1]) gi[1] = ops::sum_to(where(c, z, g), sb);
  });
  return out;
}

}  // namespace flx
