// The OpenCL plugin's compute primitives against the CPU backend: every map
// op code under several operand layouts, reductions, GEMM, gather/scatter,
// permute, softmax and the fused Adam step, for every dtype each accepts.
// A combination the CPU refuses must be refused by OpenCL too.
#include <algorithm>
#include <string>

#include "opencl_harness.hpp"

using namespace ocltest;

namespace {

struct MapOp {
  int op;
  int arity;
  const char* name;
  double lo0 = -3, hi0 = 3, lo1 = -3, hi1 = 3;  // operand ranges for floating dtypes
  double alpha = 0, beta = 0;
};
const MapOp kOps[] = {
    {FLX_OP_COPY, 1, "copy"}, {FLX_OP_NEG, 1, "neg"}, {FLX_OP_ABS, 1, "abs"}, {FLX_OP_SIGN, 1, "sign"},
    {FLX_OP_SQUARE, 1, "square"}, {FLX_OP_SQRT, 1, "sqrt", 0, 4}, {FLX_OP_EXP, 1, "exp"},
    {FLX_OP_LOG, 1, "log", 0.25, 4}, {FLX_OP_SIGMOID, 1, "sigmoid"}, {FLX_OP_TANH, 1, "tanh"},
    {FLX_OP_RELU, 1, "relu"}, {FLX_OP_GELU, 1, "gelu"}, {FLX_OP_LEAKYRELU, 1, "leakyrelu", -3, 3, -3, 3, 0.1},
    {FLX_OP_ELU, 1, "elu", -3, 3, -3, 3, 1.5}, {FLX_OP_SWISH, 1, "swish"}, {FLX_OP_SOFTPLUS, 1, "softplus"},
    {FLX_OP_NOT, 1, "not"}, {FLX_OP_CLAMP, 1, "clamp", -3, 3, -3, 3, -1, 1.5}, {FLX_OP_RECIP, 1, "recip", 0.5, 3},
    {FLX_OP_GELU_ERF, 1, "gelu_erf"},
    {FLX_OP_ADD, 2, "add"}, {FLX_OP_SUB, 2, "sub"}, {FLX_OP_MUL, 2, "mul"}, {FLX_OP_DIV, 2, "div", -3, 3, 0.5, 3},
    {FLX_OP_POW, 2, "pow", 0.25, 3, -2, 2}, {FLX_OP_MAX, 2, "max"}, {FLX_OP_MIN, 2, "min"},
    {FLX_OP_XLOGY, 2, "xlogy", -1, 2, 0.25, 4}, {FLX_OP_EQ, 2, "eq", -1, 1, -1, 1}, {FLX_OP_NE, 2, "ne", -1, 1, -1, 1},
    {FLX_OP_LT, 2, "lt", -1, 1, -1, 1}, {FLX_OP_LE, 2, "le", -1, 1, -1, 1}, {FLX_OP_GT, 2, "gt", -1, 1, -1, 1},
    {FLX_OP_GE, 2, "ge", -1, 1, -1, 1}, {FLX_OP_RELU_GRAD, 2, "relu_grad"}, {FLX_OP_GELU_GRAD, 2, "gelu_grad"},
    {FLX_OP_LEAKYRELU_GRAD, 2, "leakyrelu_grad", -3, 3, -3, 3, 0.2}, {FLX_OP_ELU_GRAD, 2, "elu_grad", -3, 3, -3, 3, 0.7},
    {FLX_OP_SWISH_GRAD, 2, "swish_grad"}, {FLX_OP_SOFTPLUS_GRAD, 2, "softplus_grad"},
    {FLX_OP_SIGMOID_GRAD, 2, "sigmoid_grad", 0, 1}, {FLX_OP_TANH_GRAD, 2, "tanh_grad", -1, 1},
    {FLX_OP_ABS_GRAD, 2, "abs_grad"}, {FLX_OP_CLAMP_GRAD, 2, "clamp_grad", -3, 3, -3, 3, -1, 1},
    {FLX_OP_GELU_ERF_GRAD, 2, "gelu_erf_grad"},
    {FLX_OP_WHERE, 3, "where"},
};

// Operand layouts over the output shape (4, 3, 2).
enum Layout { kContiguous, kBroadcast, kStrided, kScalarSecond, kScalarFirst, kLayouts };
const char* kLayoutNames[] = {"contiguous", "broadcast", "strided", "scalar second", "scalar first"};

std::vector<double> operand_values(int32_t t, const MapOp& op, int which, size_t n, uint32_t seed) {
  if (!dfloat(t)) return values_for(t, n, seed);
  double lo = which == 0 ? op.lo0 : op.lo1, hi = which == 0 ? op.hi0 : op.hi1;
  return grid_values(n, lo, hi, 0.25, seed);
}

void check_map(const flx_backend_iface* ocl, int32_t t, const MapOp& op, Layout layout) {
  SCOPED_TRACE(std::string(op.name) + " " + dname(t) + " " + kLayoutNames[layout]);
  const int64_t shape[3] = {4, 3, 2};
  const bool cmp = op.op >= FLX_OP_EQ && op.op <= FLX_OP_GE;
  std::vector<Bytes> bufs;
  flx_map_desc d{};
  d.op = op.op;
  d.ndim = 3;
  std::copy(shape, shape + 3, d.shape);
  d.ninputs = op.arity;
  d.in_dtype = t;
  d.out_dtype = cmp ? FLX_BOOL : t;
  d.alpha = op.alpha;
  d.beta = op.beta;
  for (int i = 0; i < op.arity; ++i) {
    int32_t ti = (op.op == FLX_OP_WHERE && i == 0) ? FLX_BOOL : t;
    int which = op.op == FLX_OP_WHERE ? 0 : i;
    flx_operand& o = d.in[i];
    bool scalar = (layout == kScalarSecond && i == 1) || (layout == kScalarFirst && i == 0);
    if (scalar) {
      o.is_scalar = 1;
      std::vector<double> v = ti == t ? operand_values(t, op, which, 1, 99 + i) : std::vector<double>{1};
      o.scalar = dfloat(ti) ? v[0] + 0.1 : v[0];  // off the grid: exercises rounding to halves
      bufs.push_back(Bytes(8, 0));
      continue;
    }
    size_t n = 24;
    int64_t st[3] = {1, 4, 12};
    if (layout == kBroadcast && i == 0) { n = 8; st[0] = 1; st[1] = 0; st[2] = 4; }   // (4, 1, 2)
    if (layout == kBroadcast && i == 1) { n = 3; st[0] = 0; st[1] = 1; st[2] = 0; }   // (1, 3, 1)
    if (layout == kStrided && i == 0) { st[0] = 3; st[1] = 1; st[2] = 12; }           // a (3, 4, 2) transposed
    if (layout == kStrided && i == 1) { n = 48; st[0] = 2; st[1] = 8; st[2] = 24; }   // every other element
    std::copy(st, st + 3, o.strides);
    std::vector<double> v = ti == t ? operand_values(t, op, which, n, 10 * i + layout) : values_for(FLX_BOOL, n, 5);
    bufs.push_back(make(ti, v));
  }
  bufs.push_back(Bytes(24 * dsize(d.out_dtype), 0));
  Outcome o = run_both(ocl, bufs, [&](const flx_backend_iface* f, int dev, const std::vector<flx_mem>& m) {
    flx_map_desc dd = d;
    for (int i = 0; i < op.arity; ++i) dd.in[i].mem = dd.in[i].is_scalar ? flx_mem{nullptr, 0} : m[i];
    dd.out = m.back();
    return f->map(f->ctx, dev, &dd, nullptr);
  });
  ASSERT_EQ(o.ocl_rc, o.cpu_rc) << "cpu: " << o.cpu_err << " / opencl: " << o.ocl_err;
  if (o.cpu_rc != FLX_OK) {
    EXPECT_FALSE(o.ocl_err.empty());
    return;
  }
  EXPECT_TRUE(close(d.out_dtype, o.cpu.back(), o.ocl.back()));
}

}  // namespace

TEST_F(OpenCL, MapUnaryOps) {
  for (const MapOp& op : kOps)
    if (op.arity == 1)
      for (int32_t t : all_dtypes())
        for (int l = 0; l < kLayouts; ++l)
          if (l != kScalarSecond) check_map(ocl, t, op, Layout(l));
}

TEST_F(OpenCL, MapBinaryOpsAndComparisons) {
  for (const MapOp& op : kOps)
    if (op.arity == 2 && op.op < FLX_OP_RELU_GRAD)
      for (int32_t t : all_dtypes())
        for (int l = 0; l < kLayouts; ++l) check_map(ocl, t, op, Layout(l));
}

TEST_F(OpenCL, MapActivationGradients) {
  for (const MapOp& op : kOps)
    if (op.op >= FLX_OP_RELU_GRAD && op.op <= FLX_OP_GELU_ERF_GRAD)
      for (int32_t t : all_dtypes())
        for (int l = 0; l < kLayouts; ++l) check_map(ocl, t, op, Layout(l));
}

TEST_F(OpenCL, MapWhere) {
  for (int32_t t : all_dtypes())
    for (int l = 0; l < kLayouts; ++l) check_map(ocl, t, kOps[sizeof kOps / sizeof kOps[0] - 1], Layout(l));
}

TEST_F(OpenCL, MapRejectsUnknownOpCodes) {
  flx_map_desc d{};
  d.op = 200;
  d.ndim = 1;
  d.shape[0] = 1;
  d.ninputs = 1;
  EXPECT_EQ(ocl->map(ocl->ctx, 0, &d, nullptr), FLX_ERR_UNSUPPORTED);
  EXPECT_NE(err().find("unknown op code"), std::string::npos) << err();
}

namespace {
void check_reduce(const flx_backend_iface* ocl, int32_t t, int op, const std::vector<int64_t>& shape, uint32_t mask,
                  double scale) {
  SCOPED_TRACE(std::string(dname(t)) + " op " + std::to_string(op) + " mask " + std::to_string(mask) + " ndim " +
               std::to_string(shape.size()));
  int64_t n = 1, nout = 1;
  for (size_t k = 0; k < shape.size(); ++k) {
    n *= shape[k];
    nout *= (mask >> k) & 1u ? 1 : shape[k];
  }
  bool arg = op >= FLX_REDUCE_ARGMAX;
  // ARG* on a coarse grid so that ties (first occurrence wins) happen
  std::vector<double> v = arg && dfloat(t) ? grid_values(size_t(n), -2, 2, 1, 7) : values_for(t, size_t(n), 11);
  int32_t out_t = arg ? FLX_I64 : t;
  Outcome o = run_both(ocl, {make(t, v), Bytes(size_t(nout) * dsize(out_t), 0)},
                       [&](const flx_backend_iface* f, int dev, const std::vector<flx_mem>& m) {
                         flx_reduce_desc d{};
                         d.op = op;
                         d.dtype = t;
                         d.ndim = int32_t(shape.size());
                         std::copy(shape.begin(), shape.end(), d.shape);
                         d.mask = mask;
                         d.scale = scale;
                         d.in = m[0];
                         d.out = m[1];
                         return f->reduce(f->ctx, dev, &d, nullptr);
                       });
  ASSERT_EQ(o.ocl_rc, o.cpu_rc) << "cpu: " << o.cpu_err << " / opencl: " << o.ocl_err;
  if (o.cpu_rc == FLX_OK) EXPECT_TRUE(close(out_t, o.cpu[1], o.ocl[1]));
}
}  // namespace

TEST_F(OpenCL, ReductionsOverEveryMask) {
  for (int32_t t : all_dtypes())
    for (int op : {FLX_REDUCE_SUM, FLX_REDUCE_MAX, FLX_REDUCE_MIN})
      for (uint32_t mask = 0; mask < 8; ++mask) check_reduce(ocl, t, op, {5, 4, 3}, mask, dfloat(t) ? 0.5 : 2.0);
}

TEST_F(OpenCL, LargeReductionsSplitIntoChunks) {
  for (int32_t t : {FLX_F32, FLX_F64, FLX_F16, FLX_I32, FLX_I64})
    for (int op : {FLX_REDUCE_SUM, FLX_REDUCE_MAX, FLX_REDUCE_MIN}) {
      if (t == FLX_F64 && !fp64) continue;
      check_reduce(ocl, t, op, {5000}, 1u, 1.0);
      check_reduce(ocl, t, op, {3000, 2}, 1u, 1.0);
      check_reduce(ocl, t, op, {2, 1500, 3}, 2u, 1.0);
    }
}

TEST_F(OpenCL, ArgmaxAndArgminAlongEachDim) {
  for (int32_t t : all_dtypes())
    for (int op : {FLX_REDUCE_ARGMAX, FLX_REDUCE_ARGMIN})
      for (uint32_t k = 0; k < 3; ++k) check_reduce(ocl, t, op, {5, 4, 3}, 1u << k, 1.0);
  flx_reduce_desc d{};
  d.op = FLX_REDUCE_ARGMAX;
  d.dtype = FLX_F32;
  d.ndim = 2;
  d.shape[0] = d.shape[1] = 2;
  d.mask = 3;
  EXPECT_EQ(ocl->reduce(ocl->ctx, 0, &d, nullptr), FLX_ERR_INVALID_ARGUMENT);
}

namespace {
struct GemmCase {
  int ta, tb;
  int64_t m, n, k, batch;
  double alpha, beta;
  int pad;          // extra rows in lda/ldb/ldc
  bool shared_b;    // stride_b = 0
};
void check_gemm(const flx_backend_iface* ocl, int32_t t, const GemmCase& g) {
  SCOPED_TRACE(std::string(dname(t)) + " ta " + std::to_string(g.ta) + " tb " + std::to_string(g.tb) + " m" +
               std::to_string(g.m) + " n" + std::to_string(g.n) + " k" + std::to_string(g.k) + " batch " +
               std::to_string(g.batch) + " beta " + std::to_string(g.beta));
  int64_t ra = g.ta ? g.k : g.m, ca = g.ta ? g.m : g.k, rb = g.tb ? g.n : g.k, cb = g.tb ? g.k : g.n;
  int64_t lda = ra + g.pad, ldb = rb + g.pad, ldc = g.m + g.pad;
  int64_t sa = lda * ca + 3, sb = g.shared_b ? 0 : ldb * cb + 1, sc = ldc * g.n + 2;
  int64_t off = 2;  // elements before each operand
  auto count = [&](int64_t ld, int64_t cols, int64_t stride) { return off + stride * (g.batch - 1) + ld * cols; };
  Bytes a = make(t, grid_values(size_t(count(lda, ca, sa)), -2, 2, 0.125, 1));
  Bytes b = make(t, grid_values(size_t(count(ldb, cb, sb)), -2, 2, 0.125, 2));
  Bytes c = make(t, grid_values(size_t(count(ldc, g.n, sc)), -2, 2, 0.125, 3));
  Outcome o = run_both(ocl, {a, b, c}, [&](const flx_backend_iface* f, int dev, const std::vector<flx_mem>& m) {
    flx_gemm_desc d{};
    d.dtype = t;
    d.trans_a = g.ta;
    d.trans_b = g.tb;
    d.m = g.m;
    d.n = g.n;
    d.k = g.k;
    d.alpha = g.alpha;
    d.beta = g.beta;
    d.a = {m[0].buf, uint64_t(off) * dsize(t)};
    d.b = {m[1].buf, uint64_t(off) * dsize(t)};
    d.c = {m[2].buf, uint64_t(off) * dsize(t)};
    d.lda = lda;
    d.ldb = ldb;
    d.ldc = ldc;
    d.stride_a = sa;
    d.stride_b = sb;
    d.stride_c = sc;
    d.batch = g.batch;
    return f->gemm(f->ctx, dev, &d, nullptr);
  });
  ASSERT_EQ(o.ocl_rc, o.cpu_rc) << "cpu: " << o.cpu_err << " / opencl: " << o.ocl_err;
  if (o.cpu_rc == FLX_OK) EXPECT_TRUE(close(t, o.cpu[2], o.ocl[2], 2));
}
}  // namespace

TEST_F(OpenCL, GemmWithTransposesLeadingDimsAndBatchStrides) {
  for (int32_t t : float_dtypes())
    for (int ta = 0; ta < 2; ++ta)
      for (int tb = 0; tb < 2; ++tb) {
        check_gemm(ocl, t, {ta, tb, 5, 4, 3, 1, 1.0, 0.0, 0, false});
        check_gemm(ocl, t, {ta, tb, 7, 6, 9, 3, 1.5, 0.5, 2, false});
      }
  for (int32_t t : {FLX_F32, FLX_F64}) {
    if (t == FLX_F64 && !fp64) continue;
    check_gemm(ocl, t, {0, 1, 6, 5, 4, 4, -1.0, 1.0, 1, true});    // B shared by the batch
    check_gemm(ocl, t, {0, 0, 33, 17, 40, 2, 1.0, 0.25, 3, false});  // beyond one tile
    check_gemm(ocl, t, {1, 0, 4, 3, 0, 2, 1.0, 0.5, 0, false});    // k = 0: C = beta C
    check_gemm(ocl, t, {0, 0, 4, 3, 0, 1, 1.0, 0.0, 0, false});
  }
  for (int32_t t : {FLX_I32, FLX_U8}) check_gemm(ocl, t, {0, 0, 2, 2, 2, 1, 1.0, 0.0, 0, false});
}

TEST_F(OpenCL, GatherAndScatterAddWithRepeatedIndices) {
  const int64_t inner = 3, axis = 5, outer = 2, nidx = 7;
  std::vector<double> idx = {4, 0, 4, 2, 4, 1, 0};
  Bytes ib = make(FLX_I64, idx);
  for (int32_t t : all_dtypes()) {
    SCOPED_TRACE(dname(t));
    auto desc = [&](const std::vector<flx_mem>& m) {
      flx_index_desc d{};
      d.dtype = t;
      d.inner = inner;
      d.axis_len = axis;
      d.outer = outer;
      d.nidx = nidx;
      d.src = m[0];
      d.dst = m[1];
      d.idx = m[2];
      return d;
    };
    Outcome g = run_both(ocl, {make(t, values_for(t, inner * axis * outer, 1)), Bytes(inner * nidx * outer * dsize(t)), ib},
                         [&](const flx_backend_iface* f, int dev, const std::vector<flx_mem>& m) {
                           flx_index_desc d = desc(m);
                           return f->gather(f->ctx, dev, &d, nullptr);
                         });
    ASSERT_EQ(g.ocl_rc, FLX_OK) << g.ocl_err;
    EXPECT_TRUE(bitwise(g.cpu[1], g.ocl[1]));
    Outcome s = run_both(ocl, {make(t, values_for(t, inner * nidx * outer, 2)), make(t, values_for(t, inner * axis * outer, 3)), ib},
                         [&](const flx_backend_iface* f, int dev, const std::vector<flx_mem>& m) {
                           flx_index_desc d = desc(m);
                           return f->scatter_add(f->ctx, dev, &d, nullptr);
                         });
    ASSERT_EQ(s.ocl_rc, s.cpu_rc) << "cpu: " << s.cpu_err << " / opencl: " << s.ocl_err;
    if (s.cpu_rc == FLX_OK) EXPECT_TRUE(bitwise(s.cpu[1], s.ocl[1])) << close(t, s.cpu[1], s.ocl[1]).message();
  }
}

TEST_F(OpenCL, PermuteEveryOrderOfThreeDims) {
  const int64_t shape[4] = {4, 3, 2, 2};
  for (int32_t t : all_dtypes()) {
    for (int nd : {3, 4}) {
      int perm[4] = {0, 1, 2, 3};
      do {
        SCOPED_TRACE(std::string(dname(t)) + " perm " + std::to_string(perm[0]) + std::to_string(perm[1]) +
                     std::to_string(perm[2]) + (nd == 4 ? std::to_string(perm[3]) : ""));
        int64_t n = 1;
        for (int k = 0; k < nd; ++k) n *= shape[k];
        Outcome o = run_both(ocl, {make(t, values_for(t, size_t(n), 4)), Bytes(size_t(n) * dsize(t))},
                             [&](const flx_backend_iface* f, int dev, const std::vector<flx_mem>& m) {
                               flx_permute_desc d{};
                               d.dtype = t;
                               d.ndim = nd;
                               std::copy(shape, shape + nd, d.shape);
                               std::copy(perm, perm + nd, d.perm);
                               d.src = m[0];
                               d.dst = m[1];
                               return f->permute(f->ctx, dev, &d, nullptr);
                             });
        ASSERT_EQ(o.ocl_rc, FLX_OK) << o.ocl_err;
        EXPECT_TRUE(bitwise(o.cpu[1], o.ocl[1]));
      } while (std::next_permutation(perm, perm + nd));
    }
  }
}

TEST_F(OpenCL, SoftmaxForwardAndBackward) {
  struct Case { int64_t inner, axis, outer; };
  for (int32_t t : all_dtypes())
    for (int lg = 0; lg < 2; ++lg)
      for (Case c : {Case{3, 5, 2}, Case{1, 10, 4}, Case{6, 1, 1}}) {
        SCOPED_TRACE(std::string(dname(t)) + (lg ? " logsoftmax" : " softmax") + " inner " + std::to_string(c.inner) +
                     " axis " + std::to_string(c.axis));
        size_t n = size_t(c.inner * c.axis * c.outer);
        auto desc = [&](const std::vector<flx_mem>& m) {
          flx_softmax_desc d{};
          d.dtype = t;
          d.log = lg;
          d.inner = c.inner;
          d.axis_len = c.axis;
          d.outer = c.outer;
          d.x = m[0];
          d.y = m[1];
          d.dy = m[2];
          d.dx = m[3];
          return d;
        };
        Bytes x = make(t, values_for(t, n, 6)), dy = make(t, values_for(t, n, 7)), z(n * dsize(t));
        Outcome fwd = run_both(ocl, {x, z, dy, z}, [&](const flx_backend_iface* f, int dev, const std::vector<flx_mem>& m) {
          flx_softmax_desc d = desc(m);
          return f->softmax(f->ctx, dev, &d, nullptr);
        });
        ASSERT_EQ(fwd.ocl_rc, fwd.cpu_rc) << "cpu: " << fwd.cpu_err << " / opencl: " << fwd.ocl_err;
        if (fwd.cpu_rc != FLX_OK) continue;
        EXPECT_TRUE(close(t, fwd.cpu[1], fwd.ocl[1]));
        // backward from the CPU's y, so both sides see the same input
        Outcome bwd = run_both(ocl, {x, fwd.cpu[1], dy, z}, [&](const flx_backend_iface* f, int dev, const std::vector<flx_mem>& m) {
          flx_softmax_desc d = desc(m);
          return f->softmax_backward(f->ctx, dev, &d, nullptr);
        });
        ASSERT_EQ(bwd.ocl_rc, FLX_OK) << bwd.ocl_err;
        EXPECT_TRUE(close(t, bwd.cpu[3], bwd.ocl[3], 2));
      }
}

TEST_F(OpenCL, AdamStepWritesDxOrUpdatesInPlace) {
  const size_t n = 300;
  for (int32_t t : all_dtypes())
    for (bool in_place : {false, true}) {
      SCOPED_TRACE(std::string(dname(t)) + (in_place ? " in place" : " dx"));
      Bytes g = make(t, values_for(t, n, 1)), m = make(t, grid_values(n, -1, 1, 0.01, 2)),
            v = make(t, grid_values(n, 0, 1, 0.01, 3)), x = make(t, values_for(t, n, 4)), dx(n * dsize(t));
      Outcome o = run_both(ocl, {g, m, v, dx, x}, [&](const flx_backend_iface* f, int dev, const std::vector<flx_mem>& b) {
        flx_optim_desc d{};
        d.kind = FLX_OPTIM_ADAM;
        d.dtype = t;
        d.n = int64_t(n);
        d.grad = b[0];
        d.m = b[1];
        d.v = b[2];
        d.dx = in_place ? flx_mem{nullptr, 0} : b[3];
        d.x = b[4];
        d.eta = 0.01;
        d.beta1 = 0.9;
        d.beta2 = 0.999;
        d.eps = 1e-8;
        d.beta1_pow = 0.9 * 0.9 * 0.9;
        d.beta2_pow = 0.999 * 0.999 * 0.999;
        return f->optim_step(f->ctx, dev, &d, nullptr);
      });
      ASSERT_EQ(o.ocl_rc, o.cpu_rc) << "cpu: " << o.cpu_err << " / opencl: " << o.ocl_err;
      if (o.cpu_rc != FLX_OK) continue;
      EXPECT_TRUE(close(t, o.cpu[1], o.ocl[1]));                       // m
      EXPECT_TRUE(close(t, o.cpu[2], o.ocl[2]));                       // v
      EXPECT_TRUE(close(t, o.cpu[in_place ? 4 : 3], o.ocl[in_place ? 4 : 3]));  // x or dx
    }
}
