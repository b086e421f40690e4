// MultiHeadAttention and dot_product_attention, as Flux's and NNlib's: with
// the scores, from the library's differentiable ops (projections by Dense,
// scores by batched matmul, softmax over keys), so that every device runs
// them; without (.scores = false), one op whose memory is linear in the
// sequence (src/ops/attention.hpp).
#include "flx/layers/attention.hpp"

#include <cmath>
#include <limits>
#include <sstream>
#include <string>

#include "flx/activations.hpp"
#include "flx/autodiff.hpp"
#include "flx/error.hpp"
#include "flx/ops.hpp"
#include "ops/attention.hpp"

namespace flx {

namespace {

std::string shape_of(const Tensor& t) { return t.defined() ? t.shape().str() : std::string("undefined"); }

// (dim, len, batch) -> (dim / nheads, nheads, len, batch): NNlib's split_heads.
Tensor split_heads(const Tensor& x, int64_t nheads) {
  return reshape(x, Shape{x.shape()[0] / nheads, nheads, x.shape()[1], x.shape()[2]});
}

}  // namespace

Tensor make_causal_mask(const Tensor& x) {
  FLX_CHECK(x.defined() && x.ndims() >= 2, DimensionMismatch,
            "make_causal_mask: expected a (features, length, ...) sequence; got shape ", shape_of(x));
  const int64_t n = x.shape()[1];
  std::vector<uint8_t> m(size_t(n * n));
  for (int64_t i = 0; i < n; ++i)      // query i (column)
    for (int64_t j = 0; j <= i; ++j)   // may see key j <= i (row)
      m[size_t(i * n + j)] = 1;
  return from_host(m.data(), Bool, Shape{n, n}).to(x.device());
}

namespace {

// A mask or bias of shape (kv_len, q_len, nheads, batch) or one that
// broadcasts to it (each dim that size or 1, at most 4 dims), of the right
// kind and on q's device; `who` names the caller (dot_product_attention, or
// the MultiHeadAttention layer) in the errors.
std::string expected_shape(const Shape& full) {
  std::ostringstream os;
  os << "(kv_len, q_len, nheads, batch) = (" << full[0] << ", " << full[1] << ", " << full[2] << ", " << full[3]
     << ")";
  return os.str();
}

void check_broadcastable(const Tensor& t, const char* what, const Shape& full, const std::string& who) {
  bool fits = t.ndims() <= 4;
  for (int k = 0; fits && k < t.ndims(); ++k) fits = t.shape()[k] == full[k] || t.shape()[k] == 1;
  FLX_CHECK(fits, DimensionMismatch, who, ": the ", what, " must have the shape ", expected_shape(full),
            " or broadcast to it (each dim that size or 1, at most 4 dims); got shape ", t.shape());
}

void check_options(const AttentionOptions& o, const Tensor& q, const Shape& full, const std::string& who) {
  if (o.mask.defined()) {
    FLX_CHECK(o.mask.dtype() == Bool, TypeError, who,
              ": the mask must be Bool (true where a query may attend), of the shape ", expected_shape(full),
              " or broadcasting to it; got ", o.mask.dtype(), " of shape ", o.mask.shape(),
              " (make one with a comparison, e.g. x .> 0)");
    FLX_CHECK(o.mask.device() == q.device(), DeviceMismatch, who, ": the mask is on ", o.mask.device(),
              " but q is on ", q.device(), "; move it there");
    check_broadcastable(o.mask, "mask", full, who);
  }
  if (o.bias.defined()) {
    FLX_CHECK(is_floating(o.bias.dtype()), TypeError, who,
              ": the bias must be a floating tensor (added to the logits), of the shape ", expected_shape(full),
              " or broadcasting to it; got ", o.bias.dtype(), " of shape ", o.bias.shape());
    FLX_CHECK(o.bias.device() == q.device(), DeviceMismatch, who, ": the bias is on ", o.bias.device(),
              " but q is on ", q.device(), "; move it there");
    check_broadcastable(o.bias, "bias", full, who);
  }
  if (o.causal)
    FLX_CHECK(q.shape()[1] == full[0], DimensionMismatch, who,
              ": a causal mask needs queries and keys of one length; got ", q.shape()[1], " and ", full[0]);
}

// The materialising form: α whole, from the library's differentiable ops.
std::pair<Tensor, Tensor> with_scores(const Tensor& q, const Tensor& k, const Tensor& v, int64_t nheads,
                                      const AttentionOptions& o, const Dropout* dropout) {
  const Tensor qh = split_heads(q, nheads), kh = split_heads(k, nheads), vh = split_heads(v, nheads);
  // logits[j, i, h, b] = Σ_d k[d, h, j, b] q[d, h, i, b] / √d, as batched
  // products over (h, b): (kv_len, d) x (d, q_len).
  const double scale = 1.0 / std::sqrt(double(qh.shape()[0]));
  Tensor logits = matmul(permutedims(kh, {2, 0, 1, 3}), permutedims(qh, {0, 2, 1, 3}) * scale);
  if (o.bias.defined()) logits = logits + o.bias.to(logits.dtype());
  Tensor mask = o.mask;
  if (o.causal) {
    const Tensor causal = make_causal_mask(q);
    mask = mask.defined() ? (mask.to(Int32) * causal.to(Int32)) > 0 : causal;  // both
  }
  if (mask.defined()) {
    const double neg_inf = -std::numeric_limits<double>::infinity();
    logits = where(mask, logits, full(logits.dtype(), neg_inf, Shape{}).to(q.device()));
  }
  Tensor alpha = softmax(logits, 0);  // over the keys
  if (dropout) alpha = (*dropout)(alpha);
  // x[d, h, i, b] = Σ_j v[d, h, j, b] α[j, i, h, b]: (d, kv_len) x (kv_len, q_len)
  const Tensor x = matmul(permutedims(vh, {0, 2, 1, 3}), alpha);
  const Tensor joined = permutedims(x, {0, 2, 1, 3});  // (d, nheads, q_len, batch)
  return {reshape(joined, Shape{v.shape()[0], q.shape()[1], q.shape()[2]}), alpha};
}

// The linear-memory form (src/ops/attention.hpp). Dropout draws its
// generator's stream exactly where the materialising path's Dropout would
// (once, when it is active and 0 < p < 1), so one seed drops the same
// weights in both.
Tensor without_scores(const Tensor& q, const Tensor& k, const Tensor& v, int64_t nheads, const AttentionOptions& o,
                      const Dropout* dropout) {
  DType t = promote_types(promote_types(q.dtype(), k.dtype()), v.dtype());
  if (!is_floating(t)) t = Float32;  // as matmul
  ops::AttentionArgs a;
  a.q = q.to(t);
  a.k = k.to(t);
  a.v = v.to(t);
  a.nheads = nheads;
  a.mask = o.mask;
  a.causal = o.causal;
  if (o.bias.defined()) a.bias = o.bias.to(t);
  bool drop_all = false;
  if (dropout && detail::training_now(dropout->active) && dropout->p > 0) {
    if (dropout->p >= 1) {
      drop_all = true;  // dropout(α, 1) is α * 0, with no draw
    } else {
      a.dropout = dropout->p;
      std::tie(a.seed, a.offset) = detail::next_fill_stream();
    }
  }
  const Tensor x = ops::attention_linear(a);
  return drop_all ? x * 0.0 : x;
}

}  // namespace

namespace detail {
std::pair<Tensor, Tensor> dot_product_attention_as(const std::string& who, const Tensor& q, const Tensor& k,
                                                   const Tensor& v, int64_t nheads, const AttentionOptions& o,
                                                   const Dropout* dropout) {
  const char* f = who.c_str();
  FLX_CHECK(q.defined() && k.defined() && v.defined() && q.ndims() == 3 && k.ndims() == 3 && v.ndims() == 3,
            DimensionMismatch, f, ": expected q, k and v of shape (features, length, batch); got ", shape_of(q), ", ",
            shape_of(k), " and ", shape_of(v));
  FLX_CHECK(q.shape()[2] == k.shape()[2] && k.shape()[2] == v.shape()[2], DimensionMismatch, f,
            ": q, k and v must have the same batch size (dim 2); got ", q.shape(), ", ", k.shape(), " and ",
            v.shape());
  FLX_CHECK(q.shape()[0] == k.shape()[0], DimensionMismatch, f,
            ": q and k must have the same feature size (dim 0); got ", q.shape(), " and ", k.shape());
  FLX_CHECK(k.shape()[1] == v.shape()[1], DimensionMismatch, f,
            ": k and v must have the same length (dim 1); got ", k.shape(), " and ", v.shape());
  FLX_CHECK(nheads >= 1 && q.shape()[0] % nheads == 0 && v.shape()[0] % nheads == 0, ArgumentError, f, ": nheads ",
            nheads, " must divide the feature sizes of q/k (", q.shape()[0], ") and v (", v.shape()[0], ")");
  ops::check_same_device(q, k, f);
  ops::check_same_device(q, v, f);
  const Shape full{k.shape()[1], q.shape()[1], nheads, q.shape()[2]};
  check_options(o, q, full, who);
  if (!o.scores) return {without_scores(q, k, v, nheads, o, dropout), Tensor{}};
  return with_scores(q, k, v, nheads, o, dropout);
}
}  // namespace detail

std::pair<Tensor, Tensor> dot_product_attention(const Tensor& q, const Tensor& k, const Tensor& v, int64_t nheads,
                                                const AttentionOptions& o, const Dropout* dropout) {
  return detail::dot_product_attention_as("dot_product_attention", q, k, v, nheads, o, dropout);
}

namespace {
Dense projection(int64_t in, int64_t out, bool bias) {
  Dense d(in, out);
  if (!bias) d.bias = Tensor();
  return d;
}
AttentionDims checked(const AttentionDims& d, const MultiHeadAttentionOptions& o) {
  FLX_CHECK(d.q_in >= 1 && d.k_in >= 1 && d.v_in >= 1 && d.qk >= 1 && d.v >= 1 && d.out >= 1, ArgumentError,
            "MultiHeadAttention: every dim must be positive; got (", d.q_in, ", ", d.k_in, ", ", d.v_in, ") => (",
            d.qk, ", ", d.v, ") => ", d.out);
  FLX_CHECK(o.nheads >= 1 && d.qk % o.nheads == 0 && d.v % o.nheads == 0, ArgumentError,
            "MultiHeadAttention: nheads = ", o.nheads, " must divide qk_dim (", d.qk, ") and v_dim (", d.v,
            "); choose nheads among their common divisors");
  FLX_CHECK(o.dropout_prob >= 0 && o.dropout_prob <= 1, ArgumentError,
            "MultiHeadAttention: dropout_prob must lie in [0, 1]; got ", o.dropout_prob);
  return d;
}
}  // namespace

MultiHeadAttention::MultiHeadAttention(int64_t dim, const MultiHeadAttentionOptions& o)
    : MultiHeadAttention(AttentionDims::all(dim), o) {}

MultiHeadAttention::MultiHeadAttention(const AttentionDims& d0, const MultiHeadAttentionOptions& o)
    : nheads(o.nheads),
      q_proj(projection(checked(d0, o).q_in, d0.qk, o.bias)),
      k_proj(projection(d0.k_in, d0.qk, o.bias)),
      v_proj(projection(d0.v_in, d0.v, o.bias)),
      attn_drop(o.dropout_prob),
      out_proj(projection(d0.v, d0.out, o.bias)) {}

namespace {
// An input of shape (in, length, batch), in the projection's input size.
void check_attention_input(const std::string& layer, const Shape& x, const std::string& got, const Dense& proj,
                           const char* what) {
  FLX_CHECK(x.ndims() == 3 && x[0] == proj.weight.shape()[1], DimensionMismatch, layer, ": expected ", what,
            " of shape (", proj.weight.shape()[1], ", length, batch); got ", got);
}
}  // namespace

Shape outputsize(const MultiHeadAttention& m, const Shape& q, const Shape& k, const Shape& v) {
  const std::string name = detail::layer_string(m);
  check_attention_input(name, q, q.str(), m.q_proj, "the queries");
  check_attention_input(name, k, k.str(), m.k_proj, "the keys");
  check_attention_input(name, v, v.str(), m.v_proj, "the values");
  FLX_CHECK(q[2] == k[2] && k[2] == v[2], DimensionMismatch, name,
            ": the queries, keys and values must have the same batch size (dim 2); got ", q, ", ", k, " and ", v);
  FLX_CHECK(k[1] == v[1], DimensionMismatch, name, ": the keys and values must have the same length (dim 1); got ",
            k, " and ", v);
  return Shape{m.out_proj.weight.shape()[0], q[1], q[2]};
}

std::pair<Tensor, Tensor> MultiHeadAttention::operator()(const Tensor& q, const Tensor& k, const Tensor& v,
                                                         const AttentionOptions& o) const {
  const std::string name = detail::layer_string(*this);
  const auto check_input = [&](const Tensor& x, const Dense& proj, const char* what) {
    check_attention_input(name, x.defined() ? x.shape() : Shape{}, shape_of(x), proj, what);
  };
  check_input(q, q_proj, "the queries");
  check_input(k, k_proj, "the keys");
  check_input(v, v_proj, "the values");
  auto [x, alpha] = detail::dot_product_attention_as(name, q_proj(q), k_proj(k), v_proj(v), nheads, o,
                                                     attn_drop.p > 0 ? &attn_drop : nullptr);
  return {out_proj(x), alpha};
}

std::pair<Tensor, Tensor> MultiHeadAttention::operator()(const Tensor& q, const Tensor& k, const Tensor& v,
                                                         const Tensor& bias, const AttentionOptions& o) const {
  FLX_CHECK(!o.bias.defined(), ArgumentError, detail::layer_string(*this),
            ": the bias is given twice, as the fourth argument and as the option .bias; give it once");
  AttentionOptions with = o;
  with.bias = bias;
  return (*this)(q, k, v, with);
}

void show_compact(std::ostream& os, const MultiHeadAttention& m) {
  const int64_t q_in = m.q_proj.weight.shape()[1], k_in = m.k_proj.weight.shape()[1],
                v_in = m.v_proj.weight.shape()[1], qk = m.q_proj.weight.shape()[0], v = m.v_proj.weight.shape()[0],
                out = m.out_proj.weight.shape()[0];
  os << "MultiHeadAttention(";
  if (q_in == k_in && k_in == v_in) os << q_in;
  else os << "(" << q_in << ", " << k_in << ", " << v_in << ")";
  os << " => ";
  if (qk == v) os << qk;
  else os << "(" << qk << ", " << v << ")";
  os << " => " << out << ", nheads=" << m.nheads;
  if (m.q_proj.bias.defined()) os << ", bias=true";
  if (m.attn_drop.p > 0) os << ", dropout_prob=" << m.attn_drop.p;
  os << ")";
}

}  // namespace flx
