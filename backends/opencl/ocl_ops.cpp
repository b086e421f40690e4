// Launchers for cast, random, elementwise map and reductions. Host-side work
// is what the CPU backend does before its loops: the same op/dtype checks,
// dims coalesced, scalars converted exactly as the CPU converts them.
#include <algorithm>
#include <string>

#include "ocl_common.hpp"
#include "ocl_dtype.hpp"

namespace flx_ocl {

namespace {
cl_long8 long8_of(const int64_t* v, int n) {
  cl_long8 r{};
  for (int k = 0; k < 8; ++k) r.s[k] = k < n ? v[k] : 0;
  return r;
}
}  // namespace

int cast(void*, int dev, flx_mem dst, int32_t dst_dtype, flx_mem src, int32_t src_dtype, size_t n, flx_stream s) {
  return guard("cast", [&] {
    require_dtype(dst_dtype, "cast");
    require_dtype(src_dtype, "cast");
    Device& d = device(dev);
    if ((dst_dtype == FLX_F64 || src_dtype == FLX_F64) && !d.fp64)
      raise(FLX_ERR_UNSUPPORTED, "Float64 needs cl_khr_fp64, which " + d.name + " lacks");
    elem_offset(dst, dtype_size(dst_dtype), "cast");
    elem_offset(src, dtype_size(src_dtype), "cast");
    cl_long so = cl_long(src.offset), doff = cl_long(dst.offset);
    launch(d, queue_of(d, s), dst_dtype, "cast_k", n, cl_int(src_dtype), as_mem(src), so, as_mem(dst), doff,
           cl_long(n));
  });
}

int random(void*, int dev, flx_mem dst, int32_t dtype, size_t n, int32_t dist, uint64_t seed, uint64_t offset,
           double a, double b, flx_stream s) {
  return guard("random", [&] {
    require_dtype(dtype, "random");
    if (!is_float(dtype)) raise(FLX_ERR_UNSUPPORTED, "only floating dtypes can be filled with random numbers");
    if (dist != FLX_RANDOM_UNIFORM && dist != FLX_RANDOM_NORMAL)
      raise(FLX_ERR_INVALID_ARGUMENT, "unknown distribution " + std::to_string(dist));
    Device& d = device(dev);
    elem_offset(dst, dtype_size(dtype), "random");
    // Without fp64 the numbers come from float arithmetic (not those of the CPU).
    Scalar sa = d.fp64 ? Scalar::of(a) : Scalar::of(float(a));
    Scalar sb = d.fp64 ? Scalar::of(b) : Scalar::of(float(b));
    launch(d, queue_of(d, s), dtype, "random_k", n, cl_int(dist), as_mem(dst), cl_long(dst.offset), cl_long(n),
           cl_ulong(seed), cl_ulong(offset), sa, sb);
  });
}

// ---- map ----------------------------------------------------------------------
namespace {

bool is_compare(int op) { return op >= FLX_OP_EQ && op <= FLX_OP_GE; }
int arity(int op) {
  if (op == FLX_OP_WHERE) return 3;
  if ((op >= FLX_OP_ADD && op <= FLX_OP_GE) || (op >= FLX_OP_RELU_GRAD && op <= FLX_OP_GELU_ERF_GRAD)) return 2;
  if (op >= FLX_OP_COPY && op <= FLX_OP_GELU_ERF) return 1;
  return 0;
}
// Ops that take integer (and Bool) storage, as in the CPU backend.
bool takes_ints(int op) {
  switch (op) {
    case FLX_OP_COPY: case FLX_OP_NEG: case FLX_OP_ABS: case FLX_OP_SIGN: case FLX_OP_SQUARE: case FLX_OP_RELU:
    case FLX_OP_NOT: case FLX_OP_CLAMP: case FLX_OP_ADD: case FLX_OP_SUB: case FLX_OP_MUL: case FLX_OP_MAX:
    case FLX_OP_MIN: case FLX_OP_WHERE:
      return true;
  }
  return is_compare(op);
}
bool takes_bool(int op) {
  return op == FLX_OP_COPY || op == FLX_OP_NOT || op == FLX_OP_MAX || op == FLX_OP_MIN || op == FLX_OP_WHERE ||
         is_compare(op);
}

// Dims of size 1 dropped, and runs where every operand continues
// contiguously merged (as the CPU's make_plan does).
struct Plan {
  int nd = 0;
  int64_t shape[FLX_MAX_DIMS] = {};
  int64_t st[4][FLX_MAX_DIMS] = {};  // operands 0..2, then the output
};
Plan make_plan(const flx_map_desc& d, int nin) {
  Plan p;
  int64_t out_stride = 1;
  for (int k = 0; k < d.ndim; ++k) {
    if (d.shape[k] == 1) continue;
    p.shape[p.nd] = d.shape[k];
    for (int i = 0; i < 3; ++i) p.st[i][p.nd] = (i < nin && !d.in[i].is_scalar) ? d.in[i].strides[k] : 0;
    p.st[3][p.nd] = out_stride;
    out_stride *= d.shape[k];
    ++p.nd;
  }
  int w = 0;
  for (int j = 1; j < p.nd; ++j) {
    bool merge = true;
    for (int i = 0; i < 4; ++i) merge &= p.st[i][j] == p.st[i][w] * p.shape[w];
    if (merge) {
      p.shape[w] *= p.shape[j];
    } else {
      ++w;
      p.shape[w] = p.shape[j];
      for (int i = 0; i < 4; ++i) p.st[i][w] = p.st[i][j];
    }
  }
  if (p.nd > 0) p.nd = w + 1;
  if (p.nd == 0) {
    p.nd = 1;
    p.shape[0] = 1;
  }
  return p;
}

}  // namespace

int map(void*, int dev, const flx_map_desc* dp, flx_stream s) {
  return guard("map", [&] {
    const flx_map_desc& d = *dp;
    if (d.ndim < 0 || d.ndim > FLX_MAX_DIMS) raise(FLX_ERR_INVALID_ARGUMENT, "bad ndim " + std::to_string(d.ndim));
    const int32_t t = d.in_dtype;
    require_dtype(t, "map");
    const int op = d.op, nin = arity(op);
    if (nin == 0) raise(FLX_ERR_UNSUPPORTED, "unknown op code " + std::to_string(op));
    if (!is_float(t) && !takes_ints(op))
      raise(FLX_ERR_UNSUPPORTED, "op " + std::to_string(op) + " needs a floating dtype; got " + dtype_name(t));
    if (t == FLX_BOOL && !takes_bool(op)) raise(FLX_ERR_UNSUPPORTED, "op " + std::to_string(op) + " on Bool");
    Device& d_ = device(dev);
    int64_t n = 1;
    for (int k = 0; k < d.ndim; ++k) n *= d.shape[k];
    if (n == 0) return;
    Plan p = make_plan(d, nin);

    cl_mem bufs[3] = {nullptr, nullptr, nullptr};
    cl_long offs[3] = {0, 0, 0};
    Scalar sc[3] = {compute_scalar(t, 0), compute_scalar(t, 0), compute_scalar(t, 0)};
    cl_int smask = 0;
    for (int i = 0; i < nin; ++i) {
      // WHERE's condition is Bool storage; its scalar is `scalar != 0`.
      int32_t ti = (op == FLX_OP_WHERE && i == 0) ? FLX_BOOL : t;
      if (d.in[i].is_scalar) {
        smask |= 1 << i;
        sc[i] = (op == FLX_OP_WHERE && i == 0) ? compute_scalar(t, d.in[i].scalar != 0 ? 1.0 : 0.0)
                                               : stored_scalar(t, d.in[i].scalar);
      } else {
        bufs[i] = as_mem(d.in[i].mem);
        offs[i] = cl_long(elem_offset(d.in[i].mem, dtype_size(ti), "map") * dtype_size(ti));
      }
    }
    int32_t out_t = is_compare(op) ? FLX_BOOL : t;
    elem_offset(d.out, dtype_size(out_t), "map");
    launch(d_, queue_of(d_, s), t, "map_k", size_t(n), cl_int(op), cl_int(p.nd), long8_of(p.shape, p.nd), bufs[0],
           offs[0], long8_of(p.st[0], p.nd), bufs[1], offs[1], long8_of(p.st[1], p.nd), bufs[2], offs[2],
           long8_of(p.st[2], p.nd), as_mem(d.out), cl_long(d.out.offset), smask, sc[0], sc[1], sc[2],
           compute_scalar(t, d.alpha), compute_scalar(t, d.beta), cl_long(n));
  });
}

// ---- reductions -----------------------------------------------------------------
namespace {

void arg_reduce(Device& dv, cl_command_queue q, const flx_reduce_desc& d) {
  int axis = -1;
  for (int k = 0; k < d.ndim; ++k)
    if ((d.mask >> k) & 1u) {
      if (axis >= 0) raise(FLX_ERR_INVALID_ARGUMENT, "argmax/argmin reduce exactly one dim");
      axis = k;
    }
  if (axis < 0) raise(FLX_ERR_INVALID_ARGUMENT, "argmax/argmin reduce exactly one dim");
  int64_t inner = 1, outer = 1, len = d.shape[axis];
  for (int k = 0; k < axis; ++k) inner *= d.shape[k];
  for (int k = axis + 1; k < d.ndim; ++k) outer *= d.shape[k];
  elem_offset(d.out, 8, "reduce");
  launch(dv, q, d.dtype, "argred_k", size_t(inner * outer), cl_int(d.op == FLX_REDUCE_ARGMAX), as_mem(d.in),
         cl_long(d.in.offset), as_mem(d.out), cl_long(d.out.offset), cl_long(inner), cl_long(len), cl_long(outer));
}

}  // namespace

int reduce(void*, int dev, const flx_reduce_desc* dp, flx_stream s) {
  return guard("reduce", [&] {
    const flx_reduce_desc& d = *dp;
    require_dtype(d.dtype, "reduce");
    if (d.ndim < 0 || d.ndim > FLX_MAX_DIMS) raise(FLX_ERR_INVALID_ARGUMENT, "bad ndim " + std::to_string(d.ndim));
    if (d.op < FLX_REDUCE_SUM || d.op > FLX_REDUCE_ARGMIN)
      raise(FLX_ERR_UNSUPPORTED, "unknown op " + std::to_string(d.op));
    if (d.op == FLX_REDUCE_SUM && d.dtype == FLX_BOOL) raise(FLX_ERR_UNSUPPORTED, "sum of Bool: convert first");
    Device& dv = device(dev);
    cl_command_queue q = queue_of(dv, s);
    const size_t es = dtype_size(d.dtype);
    elem_offset(d.in, es, "reduce");
    if (d.op == FLX_REDUCE_ARGMAX || d.op == FLX_REDUCE_ARGMIN) return arg_reduce(dv, q, d);
    elem_offset(d.out, es, "reduce");

    // Runs of kept and reduced dims, as on the CPU.
    int64_t kext[8] = {}, kstr[8] = {}, rext[8] = {}, rstr[8] = {};
    int nk = 0, nr = 0;
    bool last_red = false;
    int64_t stride = 1;
    for (int k = 0; k < d.ndim; ++k) {
      bool red = (d.mask >> k) & 1u;
      int64_t e = d.shape[k];
      if (e != 1) {
        int64_t* ext = red ? rext : kext;
        int64_t* str = red ? rstr : kstr;
        int& cnt = red ? nr : nk;
        if (cnt > 0 && last_red == red && str[cnt - 1] * ext[cnt - 1] == stride) ext[cnt - 1] *= e;
        else {
          ext[cnt] = e;
          str[cnt] = stride;
          ++cnt;
        }
        last_red = red;
      }
      stride *= e;
    }
    int64_t nkept = 1, nred = 1;
    for (int i = 0; i < nk; ++i) nkept *= kext[i];
    for (int i = 0; i < nr; ++i) nred *= rext[i];
    if (stride == 0) nred = 0;  // an empty input: every output is the initial value
    if (nkept == 0) return;
    // Few outputs over many elements: split each reduction into chunks and
    // combine the partials in a second pass.
    const int64_t target = int64_t(dv.compute_units) * 256;
    int64_t nchunks = 1;
    if (nkept < target && nred >= 1024) nchunks = std::min<int64_t>({target / nkept, nred / 256, 4096});
    nchunks = std::max<int64_t>(nchunks, 1);
    int64_t chunk = (nred + nchunks - 1) / nchunks;
    if (chunk > 0) nchunks = (nred + chunk - 1) / chunk;
    if (nchunks < 1) nchunks = 1;
    Scalar scale = accum_scalar(d.dtype, d.op == FLX_REDUCE_SUM ? d.scale : 1.0, dv.fp64);
    size_t acc_size = is_float(d.dtype) ? (dv.fp64 ? 8 : 4) : d.dtype == FLX_BOOL ? 8 : es;
    std::unique_ptr<TempBuffer> part;
    if (nchunks > 1) part = std::make_unique<TempBuffer>(dv, size_t(nkept * nchunks) * acc_size);
    cl_mem pm = part ? part->mem : nullptr;
    launch(dv, q, d.dtype, "reduce_k", size_t(nkept * nchunks), cl_int(d.op), as_mem(d.in), cl_long(d.in.offset),
           as_mem(d.out), cl_long(d.out.offset), pm, cl_int(nk), long8_of(kext, nk), long8_of(kstr, nk), cl_int(nr),
           long8_of(rext, nr), long8_of(rstr, nr), cl_long(nkept), cl_long(nred), cl_long(chunk), cl_int(nchunks),
           scale);
    if (nchunks > 1)
      launch(dv, q, d.dtype, "reduce_finish_k", size_t(nkept), cl_int(d.op), pm, as_mem(d.out), cl_long(d.out.offset),
             cl_long(nkept), cl_int(nchunks), scale);
  });
}

}  // namespace flx_ocl
