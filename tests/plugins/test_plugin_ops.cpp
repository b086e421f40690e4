// A backend plugin's compute primitives against the CPU backend, through the
// dispatch layer: every map op of the op list (FLX_MAP_OPS) for every dtype
// it accepts under several operand layouts, reductions, GEMM,
// gather/scatter, permute, softmax and the fused Adam step. A combination
// the CPU refuses must be refused by the plugin too. Descriptors are built
// as the frontend builds them (map: the output's dims and each operand's
// strides; reduce and permute: descriptors.hpp); Backend makes them canonical.
#include <algorithm>
#include <string>

#include "backend_common/map_op_info.hpp"
#include "plugin_harness.hpp"

using namespace plugintest;
namespace mo = flx::map_ops;

namespace {

// ---- map ---------------------------------------------------------------------
// Every op of the list, by code.
constexpr int kMapOps[] = {
#define FLX_TEST_OP_(NAME, CODE, ARITY, CLASS, GRAD, BODY) CODE,
    FLX_MAP_OPS(FLX_TEST_OP_)
#undef FLX_TEST_OP_
};

// Operand ranges (floating dtypes) and parameters: where an op needs other
// values than the defaults (its domain, meaningful alpha/beta). A new op
// gets the defaults, so it is covered as soon as it is in the list.
struct OpValues {
  double lo0 = -3, hi0 = 3, lo1 = -3, hi1 = 3;
  double alpha = 0.75, beta = 1.5;  // nonzero: some ops divide by alpha
};
OpValues values_of(int op) {
  OpValues v;
  switch (op) {
    case FLX_OP_SQRT: v.lo0 = 0; v.hi0 = 4; break;
    case FLX_OP_LOG: v.lo0 = 0.25; v.hi0 = 4; break;
    case FLX_OP_LEAKYRELU: v.alpha = 0.1; break;
    case FLX_OP_ELU: v.alpha = 1.5; break;
    case FLX_OP_CLAMP: v.alpha = -1; v.beta = 1.5; break;
    case FLX_OP_RECIP: v.lo0 = 0.5; v.hi0 = 3; break;
    case FLX_OP_DIV: v.lo1 = 0.5; v.hi1 = 3; break;
    case FLX_OP_POW: v.lo0 = 0.25; v.lo1 = -2; v.hi1 = 2; break;
    case FLX_OP_XLOGY: v.lo0 = -1; v.hi0 = 2; v.lo1 = 0.25; v.hi1 = 4; break;
    case FLX_OP_EQ: case FLX_OP_NE: case FLX_OP_LT: case FLX_OP_LE: case FLX_OP_GT: case FLX_OP_GE:
      v.lo0 = v.lo1 = -1; v.hi0 = v.hi1 = 1; break;  // ties
    case FLX_OP_LEAKYRELU_GRAD: v.alpha = 0.2; break;
    case FLX_OP_ELU_GRAD: v.alpha = 0.7; break;
    case FLX_OP_SIGMOID_GRAD: v.lo0 = 0; v.hi0 = 1; break;  // x is sigmoid's output
    case FLX_OP_TANH_GRAD: v.lo0 = -1; v.hi0 = 1; break;    // x is tanh's output
    case FLX_OP_CLAMP_GRAD: v.alpha = -1; v.beta = 1; break;
    default: break;
  }
  return v;
}

// Operand layouts over the output shape (4, 3, 2).
enum Layout { kContiguous, kBroadcast, kStrided, kScalarSecond, kScalarFirst, kSizeOneDim, kLayouts };
const char* kLayoutNames[] = {"contiguous", "broadcast", "strided", "scalar second", "scalar first", "size-1 dim"};

std::vector<double> operand_values(int32_t t, const OpValues& ov, int which, size_t n, uint32_t seed) {
  if (!dfloat(t)) return values_for(t, n, seed);
  double lo = which == 0 ? ov.lo0 : ov.lo1, hi = which == 0 ? ov.hi0 : ov.hi1;
  return grid_values(n, lo, hi, 0.25, seed);
}

void check_map(const Backend& be, int32_t t, int op, Layout layout) {
  const mo::OpInfo& info = mo::info(op);
  SCOPED_TRACE(std::string(info.name) + " " + dname(t) + " " + kLayoutNames[layout]);
  OpValues ov = values_of(op);
  // clamp(x::UInt8, -1, ...): a bound below the type's range saturates to 0
  // from ABI 2.5 on (backends/backend_common/saturating_cast.hpp); a plugin built for
  // an older minor may convert it as x86 does (to 255), which the ABI left open.
  if (op == FLX_OP_CLAMP && t == FLX_U8 && FLX_TEST_PLUGIN_MINOR < 5) ov.alpha = 0;
  const bool where = info.cls == mo::OpClass::Select;
  // kSizeOneDim: the output (4, 1, 6), whose middle dim libflx drops.
  const int64_t shape[3] = {4, layout == kSizeOneDim ? 1 : 3, layout == kSizeOneDim ? 6 : 2};
  std::vector<Bytes> bufs;
  flx_map_desc d{};
  d.op = op;
  d.ndim = 3;
  std::copy(shape, shape + 3, d.shape);
  d.ninputs = info.arity;
  d.in_dtype = t;
  d.out_dtype = mo::is_compare(op) ? FLX_BOOL : t;
  d.alpha = ov.alpha;
  d.beta = ov.beta;
  for (int i = 0; i < info.arity; ++i) {
    int32_t ti = (where && i == 0) ? FLX_BOOL : t;
    int which = where ? 0 : i;
    flx_operand& o = d.in[i];
    bool scalar = (layout == kScalarSecond && i == 1) || (layout == kScalarFirst && i == 0);
    if (scalar) {
      o.is_scalar = 1;
      std::vector<double> v = ti == t ? operand_values(t, ov, which, 1, 99 + i) : std::vector<double>{1};
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
    if (layout == kSizeOneDim) { st[1] = 99; st[2] = i == 1 ? 5 : 4; n = i == 1 ? 31 : 24; }  // stride of a size-1 dim is moot
    std::copy(st, st + 3, o.strides);
    std::vector<double> v = ti == t ? operand_values(t, ov, which, n, 10 * i + layout) : values_for(FLX_BOOL, n, 5);
    bufs.push_back(make(ti, v));
  }
  bufs.push_back(Bytes(24 * dsize(d.out_dtype), 0));
  Outcome o = run_both(be, bufs, [&](const Backend& b, int dev, const std::vector<flx_mem>& m) {
    flx_map_desc dd = d;
    for (int i = 0; i < info.arity; ++i) dd.in[i].mem = dd.in[i].is_scalar ? flx_mem{nullptr, 0} : m[size_t(i)];
    dd.out = m.back();
    b.map(dev, dd);
  });
  EXPECT_SAME_OUTCOME(o);
  if (!o.cpu.ok || !o.dev.ok) return;
  EXPECT_TRUE(close(d.out_dtype, o.cpu_out.back(), o.dev_out.back()));
}

// An op newer than the plugin's ABI minor (a plugin built before the op
// came): libflx refuses it without calling the plugin, naming the version.
void check_refused_as_too_new(const Backend& be, int op) {
  SCOPED_TRACE(mo::info(op).name);
  DevBuf x(be, 0, Bytes(3 * 4 * 4));
  flx_map_desc d{};
  d.op = op;
  d.ndim = 1;
  d.shape[0] = 4;
  d.ninputs = mo::arity(op);
  d.in_dtype = d.out_dtype = FLX_F32;
  for (int i = 0; i < d.ninputs; ++i) {
    d.in[i].mem = x.mem(16 * uint64_t(i));
    d.in[i].strides[0] = 1;
  }
  d.out = x.mem(32);
  const std::string came = "which came with ABI 2." + std::to_string(mo::since(op));
  EXPECT_BACKEND_ERROR(be.map(0, d), mo::info(op).name, "predates op code", came.c_str());
  EXPECT_THROW(be.map(0, d), flx::NotImplemented);
}

// Every op of the list of `arity`, every dtype, every layout. A dtype the
// op does not take is refused by both backends (check_map compares).
void check_ops(const Backend& be, const std::vector<int32_t>& dtypes, int arity) {
  for (int op : kMapOps)
    if (mo::arity(op) == arity) {
      if (uint32_t(mo::since(op)) > be.abi_minor()) {
        check_refused_as_too_new(be, op);
        continue;
      }
      for (int32_t t : dtypes)
        for (int l = 0; l < kLayouts; ++l)
          if (arity > 1 || l != kScalarSecond) check_map(be, t, op, Layout(l));
    }
}

}  // namespace

TEST_F(PluginTest, MapUnaryOps) { check_ops(*be, all_dtypes(), 1); }
TEST_F(PluginTest, MapBinaryOpsComparisonsAndGradients) { check_ops(*be, all_dtypes(), 2); }
TEST_F(PluginTest, MapTernaryOps) { check_ops(*be, all_dtypes(), 3); }

TEST(PluginOpList, EveryOpIsCovered) {
  // The op list is what the map tests iterate: every code in it is known
  // to map_op_info and has an arity the tests run.
  size_t n = 0;
  for (int op : kMapOps) {
    EXPECT_TRUE(mo::exists(op)) << op;
    EXPECT_TRUE(mo::arity(op) >= 1 && mo::arity(op) <= 3) << mo::info(op).name;
    ++n;
  }
  EXPECT_GE(n, 46u);
  EXPECT_STREQ(mo::info(FLX_OP_CELU).name, "celu");
}

TEST_F(PluginTest, MapRefusesUnknownOpsAndNamesRefusedOnes) {
  DevBuf x(*be, 0, Bytes(16));
  flx_map_desc d{};
  d.op = 200;
  d.ndim = 1;
  d.shape[0] = 1;
  d.ninputs = 1;
  d.in_dtype = d.out_dtype = FLX_F32;
  d.in[0].mem = x.mem();
  d.in[0].strides[0] = 1;
  d.out = x.mem();
  flx_map_desc d1 = d;
  EXPECT_BACKEND_ERROR(be->map(0, d1), "unsupported", "200");
  // An op/dtype pair outside the op's class: refused, naming the op.
  for (int op : {int(FLX_OP_EXP), int(FLX_OP_CELU), int(FLX_OP_NEG)}) {
    flx_map_desc d2 = d;
    d2.op = op;
    d2.in_dtype = d2.out_dtype = mo::info(op).cls == mo::OpClass::Float ? FLX_I32 : FLX_BOOL;
    const std::string dtype(flx::dtype_name(dt(d2.in_dtype)));  // "Int32", "Bool"
    EXPECT_BACKEND_ERROR(be->map(0, d2), "unsupported", mo::info(op).name, dtype.c_str());
  }
}

// NaN through map's stores. COPY converts nothing but the halves' float
// round trip: the CPU's bits for every NaN (nan_patterns), on the vector
// path (16 contiguous elements and more) and the strided one. Arithmetic
// with a NaN operand or scalar gives NaN; in Float16 and BFloat16 it is
// stored quiet without payload (its sign is the hardware's: a GPU's NaNs
// are positive, an x86 CPU's from a negative NaN negative).
namespace {
// op over n elements of dtype t: operand 0 from memory every `stride`
// elements, operand 1 (binary ops) the scalar; run on both backends over
// copies of `in`, into an output of out_bytes.
Outcome run_map_1d(const Backend& be, int op, int32_t t, int64_t n, int64_t stride, double scalar, const Bytes& in,
                   size_t out_bytes) {
  flx_map_desc d{};
  d.op = op;
  d.ndim = 1;
  d.shape[0] = n;
  d.ninputs = mo::arity(op);
  d.in_dtype = d.out_dtype = t;
  d.in[0].strides[0] = stride;
  if (d.ninputs > 1) {
    d.in[1].is_scalar = 1;
    d.in[1].scalar = scalar;
  }
  return run_both(be, {in, Bytes(out_bytes, 0)}, [&](const Backend& b, int dev, const std::vector<flx_mem>& m) {
    flx_map_desc dd = d;
    dd.in[0].mem = m[0];
    dd.out = m[1];
    b.map(dev, dd);
  });
}
}  // namespace

TEST_F(PluginTest, MapStoresNanWithTheCpusBits) {
  FLX_SKIP_BEFORE_NAN_BITS_RULE();
  for (int32_t t : float_dtypes()) {
    SCOPED_TRACE(dname(t));
    Bytes pattern = nan_patterns(t), src;
    for (int rep = 0; rep < 8; ++rep) src.insert(src.end(), pattern.begin(), pattern.end());
    const int64_t n = int64_t(src.size() / dsize(t));
    for (int64_t stride : {1, 2}) {
      Outcome o = run_map_1d(*be, FLX_OP_COPY, t, n / stride, stride, 0, src, src.size());
      ASSERT_TRUE(o.dev.ok) << o.dev.err;
      EXPECT_TRUE(bitwise(o.cpu_out[1], o.dev_out[1])) << "copy, stride " << stride;
    }
    for (int op : {int(FLX_OP_ADD), int(FLX_OP_MUL), int(FLX_OP_MAX)})
      for (bool scalar_nan : {false, true}) {
        SCOPED_TRACE(std::string(mo::info(op).name) + (scalar_nan ? " NaN scalar" : " NaN operand"));
        const Bytes x = scalar_nan ? make(t, grid_values(size_t(n), -2, 2, 0.25, 3)) : src;
        Outcome o = run_map_1d(*be, op, t, n, 1, scalar_nan ? std::nan("") : 1.5, x, src.size());
        ASSERT_TRUE(o.dev.ok) << o.dev.err;
        for (int64_t i = 0; i < n; ++i) {
          if (!scalar_nan && i % 10 >= 7) continue;  // not one of nan_patterns' NaNs
          ASSERT_TRUE(std::isnan(value_at(t, o.dev_out[1], size_t(i)))) << i;
          if (t == FLX_F16 || t == FLX_BF16)
            ASSERT_TRUE(is_stored_half_nan(t, half_bits(o.dev_out[1], size_t(i))))
                << i << ": " << std::hex << half_bits(o.dev_out[1], size_t(i));
        }
        EXPECT_TRUE(close(t, o.cpu_out[1], o.dev_out[1]));
      }
  }
}

// ---- reductions ---------------------------------------------------------------
namespace {
void check_reduce(const Backend& be, int32_t t, int op, const std::vector<int64_t>& shape, uint32_t mask,
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
  if (arg && dfloat(t) && n > 7) v[size_t(n / 2)] = std::nan("");  // the first NaN wins
  int32_t out_t = arg ? FLX_I64 : t;
  Outcome o = run_both(be, {make(t, v), Bytes(size_t(nout) * dsize(out_t), 0)},
                       [&](const Backend& b, int dev, const std::vector<flx_mem>& m) {
                         flx_reduce_desc d = flx::detail::reduce_desc(op, t, int(shape.size()), shape.data(), mask,
                                                                      scale, m[0], m[1]);
                         b.reduce(dev, d);
                       });
  EXPECT_SAME_OUTCOME(o);
  if (o.cpu.ok && o.dev.ok) {
    EXPECT_TRUE(close(out_t, o.cpu_out[1], o.dev_out[1]));
  }
}
}  // namespace

TEST_F(PluginTest, ReductionsOverEveryMask) {
  for (int32_t t : all_dtypes())
    for (int op : {FLX_REDUCE_SUM, FLX_REDUCE_MAX, FLX_REDUCE_MIN})
      for (uint32_t mask = 0; mask < 8; ++mask) check_reduce(*be, t, op, {5, 4, 3}, mask, dfloat(t) ? 0.5 : 2.0);
}

// Few outputs over many inputs: the plugin may split them into chunks with
// a workspace (reduce_workspace), which the dispatch layer allocates.
TEST_F(PluginTest, LargeReductionsSplitIntoChunks) {
  for (int32_t t : {FLX_F32, FLX_F64, FLX_F16, FLX_I32, FLX_I64})
    for (int op : {FLX_REDUCE_SUM, FLX_REDUCE_MAX, FLX_REDUCE_MIN}) {
      if (t == FLX_F64 && !fp64) continue;
      check_reduce(*be, t, op, {5000}, 1u, 1.0);
      check_reduce(*be, t, op, {3000, 2}, 1u, 1.0);
      check_reduce(*be, t, op, {2, 1500, 3}, 2u, 1.0);
      check_reduce(*be, t, op, {200, 3, 10}, 5u, 1.0);  // two reduced runs
    }
}

TEST_F(PluginTest, EmptyReductionsWriteTheInitialValue) {
  for (int32_t t : {FLX_F32, FLX_I32})
    for (int op : {FLX_REDUCE_SUM, FLX_REDUCE_MAX, FLX_REDUCE_MIN}) {
      check_reduce(*be, t, op, {0, 3}, 1u, 1.0);  // 3 outputs of 0 elements
      check_reduce(*be, t, op, {3, 0}, 1u, 1.0);  // no outputs
    }
}

TEST_F(PluginTest, ArgmaxAndArgminAlongEachDim) {
  for (int32_t t : all_dtypes())
    for (int op : {FLX_REDUCE_ARGMAX, FLX_REDUCE_ARGMIN}) {
      for (uint32_t k = 0; k < 3; ++k) check_reduce(*be, t, op, {5, 4, 3}, 1u << k, 1.0);
      check_reduce(*be, t, op, {5, 1, 3}, 2u, 1.0);  // along a size-1 dim
    }
  // Two reduced runs are not an argmax the ABI defines.
  DevBuf in(*be, 0, Bytes(12 * 4)), out(*be, 0, Bytes(3 * 8));
  const int64_t shape[3] = {2, 3, 2};
  flx_reduce_desc d = flx::detail::reduce_desc(FLX_REDUCE_ARGMAX, FLX_F32, 3, shape, 5u, 1.0, in.mem(), out.mem());
  ASSERT_EQ(d.nred_runs, 2);
  EXPECT_BACKEND_ERROR(be->reduce(0, d), "invalid argument", "argmax");
}

// Work on a side stream (StreamGuard): a chunked reduction, whose workspace
// is allocated and freed on that stream, and a map reading its result.
TEST_F(PluginTest, ComputeOnASideStream) {
  const int64_t n = 6000;
  std::vector<double> v = values_for(FLX_F32, size_t(n), 21);
  for (int32_t t : float_dtypes()) {
    SCOPED_TRACE(dname(t));
    auto op = [&](const Backend& b, int dev, const std::vector<flx_mem>& m) {
      flx_stream s = b.stream_create(dev);
      {
        StreamGuard g(&b == &cpu() ? flx::BackendId::CPU : id, dev, s);
        flx_reduce_desc d = flx::detail::reduce_desc(FLX_REDUCE_SUM, t, 1, &n, 1u, 0.5, m[0], m[1]);
        b.reduce(dev, d);
        flx_map_desc md = unary_map(FLX_OP_SQUARE, t, 1, m[1], m[2]);
        b.map(dev, md);
        b.synchronize(dev);
      }
      b.stream_destroy(dev, s);
    };
    Outcome o = run_both(*be, {make(t, v), Bytes(dsize(t)), Bytes(dsize(t))}, op);
    ASSERT_TRUE(o.dev.ok) << o.dev.err;
    EXPECT_TRUE(close(t, o.cpu_out[1], o.dev_out[1], 4));
    EXPECT_TRUE(close(t, o.cpu_out[2], o.dev_out[2], 8));
  }
}

// ---- device fast paths ------------------------------------------------------------
// Layouts a device backend may treat specially; the CPU is the reference.
namespace {
// A 1-D map of n elements whose operands start off[i] elements into their
// buffers and whose output starts out_off elements in: a vector path (CUDA:
// 16-byte loads when every operand is aligned) with a tail when n is not a
// multiple of the vector, the element path when an offset misaligns.
void check_contiguous_map(const Backend& be, int32_t t, int op, int64_t n, const int64_t (&off)[3], int64_t out_off,
                          bool scalar1) {
  const mo::OpInfo& info = mo::info(op);
  SCOPED_TRACE(std::string(info.name) + " " + dname(t) + " n " + std::to_string(n) + " offsets " +
               std::to_string(off[0]) + "," + std::to_string(off[1]) + "," + std::to_string(off[2]) + " out " +
               std::to_string(out_off) + (scalar1 ? " scalar in1" : ""));
  const bool where = info.cls == mo::OpClass::Select;
  const int32_t out_t = mo::is_compare(op) ? FLX_BOOL : t;
  flx_map_desc d{};
  d.op = op;
  d.ndim = 1;
  d.shape[0] = n;
  d.ninputs = info.arity;
  d.in_dtype = t;
  d.out_dtype = out_t;
  std::vector<Bytes> bufs;
  int32_t ts[3] = {t, t, t};
  for (int i = 0; i < info.arity; ++i) {
    ts[i] = (where && i == 0) ? FLX_BOOL : t;
    if (scalar1 && i == 1) {
      d.in[i].is_scalar = 1;
      d.in[i].scalar = dfloat(t) ? 1.25 : 2;
      bufs.push_back(Bytes(8, 0));
      continue;
    }
    d.in[i].strides[0] = 1;
    bufs.push_back(make(ts[i], values_for(ts[i], size_t(n + off[i]), 31 + uint32_t(i))));
  }
  bufs.push_back(Bytes(size_t(n + out_off) * dsize(out_t), 0));
  Outcome o = run_both(be, bufs, [&](const Backend& b, int dev, const std::vector<flx_mem>& m) {
    flx_map_desc dd = d;
    for (int i = 0; i < info.arity; ++i)
      dd.in[i].mem = dd.in[i].is_scalar ? flx_mem{nullptr, 0} : flx_mem{m[size_t(i)].buf, uint64_t(off[i]) * dsize(ts[i])};
    dd.out = {m.back().buf, uint64_t(out_off) * dsize(out_t)};
    b.map(dev, dd);
  });
  EXPECT_SAME_OUTCOME(o);
  if (o.cpu.ok && o.dev.ok) {
    EXPECT_TRUE(close(out_t, o.cpu_out.back(), o.dev_out.back()));
  }
}
}  // namespace

TEST_F(PluginTest, ContiguousMapsAlignedAndNot) {
  const int64_t aligned[3] = {0, 0, 0}, in0_off[3] = {1, 0, 0}, in1_off[3] = {0, 3, 0}, cond_off[3] = {5, 0, 0},
                in2_off[3] = {0, 0, 1};
  for (int32_t t : all_dtypes())
    for (int op : {int(FLX_OP_COPY), int(FLX_OP_NEG), int(FLX_OP_ADD), int(FLX_OP_LT), int(FLX_OP_WHERE)})
      for (int64_t n : {int64_t(1003), int64_t(4096)}) {
        check_contiguous_map(*be, t, op, n, aligned, 0, false);
        check_contiguous_map(*be, t, op, n, aligned, 0, true);
        check_contiguous_map(*be, t, op, n, aligned, 1, false);  // the output misaligned
        check_contiguous_map(*be, t, op, n, in0_off, 0, false);
        check_contiguous_map(*be, t, op, n, in1_off, 0, false);
        if (op == FLX_OP_WHERE) {
          check_contiguous_map(*be, t, op, n, cond_off, 0, false);
          check_contiguous_map(*be, t, op, n, in2_off, 0, false);
        }
      }
}

// Long reductions into few outputs (CUDA: split over many blocks through
// the workspace from 65536 elements on), and long argmax/argmin runs (CUDA:
// a block per output), ties and a NaN included.
TEST_F(PluginTest, LongReductionsAndArgRuns) {
  for (int32_t t : {FLX_F32, FLX_F64, FLX_F16, FLX_BF16, FLX_I32, FLX_I64, FLX_U8})
    for (int op : {FLX_REDUCE_SUM, FLX_REDUCE_MAX, FLX_REDUCE_MIN}) {
      if (t == FLX_F64 && !fp64) continue;
      check_reduce(*be, t, op, {1 << 17}, 1u, dfloat(t) ? 1.0 / (1 << 17) : 1.0);
      check_reduce(*be, t, op, {70001, 3}, 1u, 1.0);
      check_reduce(*be, t, op, {3, 70001}, 2u, 1.0);
    }
  for (int32_t t : all_dtypes())
    for (int op : {FLX_REDUCE_ARGMAX, FLX_REDUCE_ARGMIN}) {
      check_reduce(*be, t, op, {5000}, 1u, 1.0);
      check_reduce(*be, t, op, {300, 7}, 1u, 1.0);
      check_reduce(*be, t, op, {7, 300}, 2u, 1.0);
      check_reduce(*be, t, op, {100}, 1u, 1.0);  // fewer elements than a block's threads
    }
}

// ---- GEMM -------------------------------------------------------------------------
namespace {
struct GemmCase {
  int ta, tb;
  int64_t m, n, k, batch;
  double alpha, beta;
  int pad;        // extra rows in lda/ldb/ldc
  bool shared_b;  // stride_b = 0
};
void check_gemm(const Backend& be, int32_t t, const GemmCase& g) {
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
  Outcome o = run_both(be, {a, b, c}, [&](const Backend& bk, int dev, const std::vector<flx_mem>& m) {
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
    bk.gemm(dev, d);
  });
  EXPECT_SAME_OUTCOME(o);
  if (o.cpu.ok && o.dev.ok) {
    EXPECT_TRUE(close(t, o.cpu_out[2], o.dev_out[2], 2));
  }
}
}  // namespace

TEST_F(PluginTest, GemmWithTransposesLeadingDimsAndBatchStrides) {
  for (int32_t t : float_dtypes())
    for (int ta = 0; ta < 2; ++ta)
      for (int tb = 0; tb < 2; ++tb) {
        check_gemm(*be, t, {ta, tb, 5, 4, 3, 1, 1.0, 0.0, 0, false});
        check_gemm(*be, t, {ta, tb, 7, 6, 9, 3, 1.5, 0.5, 2, false});
      }
  for (int32_t t : {FLX_F32, FLX_F64}) {
    if (t == FLX_F64 && !fp64) continue;
    check_gemm(*be, t, {0, 1, 6, 5, 4, 4, -1.0, 1.0, 1, true});     // B shared by the batch
    check_gemm(*be, t, {0, 0, 33, 17, 40, 2, 1.0, 0.25, 3, false});  // beyond one tile
    check_gemm(*be, t, {1, 0, 4, 3, 0, 2, 1.0, 0.5, 0, false});     // k = 0: C = beta C
    check_gemm(*be, t, {0, 0, 4, 3, 0, 1, 1.0, 0.0, 0, false});
  }
  for (int32_t t : {FLX_I32, FLX_U8}) check_gemm(*be, t, {0, 0, 2, 2, 2, 1, 1.0, 0.0, 0, false});
}

// ---- GEMM with an epilogue (minor 2, optional) --------------------------------------
// A plugin either runs it, with the CPU's results, or declines
// (FLX_ERR_UNSUPPORTED, or no gemm_epilogue): then Backend::gemm_epilogue
// returns false and must not have touched C, the bias or aux.
namespace {
void check_gemm_epilogue(const Backend& be, int32_t t, int32_t epilogue, bool aux, int ta, int tb, int64_t m,
                         int64_t n, int64_t k, int pad) {
  SCOPED_TRACE(std::string(dname(t)) + " epilogue " + std::to_string(epilogue) + (aux ? " aux" : "") + " ta " +
               std::to_string(ta) + " tb " + std::to_string(tb) + " m" + std::to_string(m) + " n" +
               std::to_string(n) + " k" + std::to_string(k) + " pad " + std::to_string(pad));
  int64_t ra = ta ? k : m, ca = ta ? m : k, rb = tb ? n : k, cb = tb ? k : n;
  int64_t lda = ra + pad, ldb = rb + pad, ldc = m + pad, aux_ld = m + 8 * pad;
  Bytes a = make(t, grid_values(size_t(lda * ca), -2, 2, 0.125, 1));
  Bytes b = make(t, grid_values(size_t(ldb * cb), -2, 2, 0.125, 2));
  Bytes c = make(t, grid_values(size_t(ldc * n), -2, 2, 0.125, 3));
  Bytes bias = make(t, grid_values(size_t(m), -2, 2, 0.125, 4));
  Bytes x = make(t, grid_values(size_t(aux_ld * n), -2, 2, 0.125, 5));
  std::vector<bool> ran;
  Outcome o = run_both(be, {a, b, c, bias, x}, [&](const Backend& bk, int dev, const std::vector<flx_mem>& mm) {
    flx_gemm_epilogue_desc d{};
    d.gemm.dtype = t;
    d.gemm.trans_a = ta;
    d.gemm.trans_b = tb;
    d.gemm.m = m;
    d.gemm.n = n;
    d.gemm.k = k;
    d.gemm.alpha = 1;
    d.gemm.beta = 0;
    d.gemm.a = mm[0];
    d.gemm.b = mm[1];
    d.gemm.c = mm[2];
    d.gemm.lda = lda;
    d.gemm.ldb = ldb;
    d.gemm.ldc = ldc;
    d.gemm.batch = 1;
    d.epilogue = epilogue;
    d.bias = mm[3];
    if (aux) {
      d.aux = mm[4];
      d.aux_ld = aux_ld;
    }
    ran.push_back(bk.gemm_epilogue(dev, d));
  });
  ASSERT_TRUE(o.cpu.ok) << o.cpu.err;
  ASSERT_TRUE(o.dev.ok) << o.dev.err;
  ASSERT_EQ(ran.size(), 2u);
  ASSERT_TRUE(ran[0]) << "the CPU fuses Float32 and Float64";
  const std::vector<Bytes> before = {a, b, c, bias, x};
  if (!ran[1]) {  // declined: nothing written
    for (size_t i = 0; i < before.size(); ++i) EXPECT_TRUE(bitwise(o.dev_out[i], before[i])) << "buffer " << i;
    return;
  }
  // Compared where defined: C's m rows of each column (the padding rows are
  // the backend's to keep), the bias, aux's m rows.
  auto rows = [&](const Bytes& buf, int64_t ld) {
    Bytes out;
    const size_t es = dsize(t);
    for (int64_t j = 0; j < n; ++j)
      out.insert(out.end(), buf.begin() + ptrdiff_t(size_t(j * ld) * es), buf.begin() + ptrdiff_t(size_t(j * ld + m) * es));
    return out;
  };
  EXPECT_TRUE(close(t, rows(o.cpu_out[2], ldc), rows(o.dev_out[2], ldc), 4)) << "C";
  EXPECT_TRUE(close(t, o.cpu_out[3], o.dev_out[3], 4)) << "bias";
  if (aux) EXPECT_TRUE(close(t, rows(o.cpu_out[4], aux_ld), rows(o.dev_out[4], aux_ld), 4)) << "aux";
}
}  // namespace

TEST_F(PluginTest, GemmEpilogueMatchesTheCpuOrDeclines) {
  for (int32_t t : {FLX_F32, FLX_F64}) {
    if (t == FLX_F64 && !fp64) continue;
    for (int32_t e : {FLX_EPILOGUE_BIAS, FLX_EPILOGUE_BIAS_RELU, FLX_EPILOGUE_BIAS_GELU, FLX_EPILOGUE_BGRADA})
      for (int ta = 0; ta < 2; ++ta)
        for (int tb = 0; tb < 2; ++tb) {
          check_gemm_epilogue(*be, t, e, false, ta, tb, 16, 12, 9, 0);
          check_gemm_epilogue(*be, t, e, false, ta, tb, 7, 5, 33, 1);
        }
    check_gemm_epilogue(*be, t, FLX_EPILOGUE_BIAS_GELU, true, 0, 0, 16, 12, 9, 0);
    check_gemm_epilogue(*be, t, FLX_EPILOGUE_BIAS_GELU, true, 0, 0, 40, 70, 300, 1);
    check_gemm_epilogue(*be, t, FLX_EPILOGUE_BGRADA, false, 0, 1, 40, 70, 300, 0);  // Dense's dW, db
  }
}

// ---- movement ---------------------------------------------------------------------
namespace {
struct IndexCase {
  int64_t inner, axis, outer, nidx;
  const char* what;
};
// Indices with repeats: the first case's by hand, the others drawn with
// most of them on a few values (squared uniforms: low indices are hot), and
// some values never drawn.
std::vector<double> index_values(const IndexCase& c) {
  if (c.nidx == 7) return {4, 0, 4, 2, 4, 1, 0};
  std::mt19937 rng(uint32_t(c.nidx));
  std::uniform_real_distribution<double> u(0, 1);
  std::vector<double> v(size_t(c.nidx));
  for (auto& x : v) {
    const double r = u(rng);
    x = std::min(double(c.axis - 1), std::floor(r * r * double(c.axis)));
  }
  return v;
}
}  // namespace

// scatter_add must add repeated indices in index order, as the CPU does:
// the same bits. Floating sources are arbitrary positive values, so that the
// partial sums round (Float16 and BFloat16 at almost every step) and any
// other order shows. The cases cover each plugin's two paths: the loop over
// the indices per (i, o), and the parallel one for many indices into narrow
// slices (sorted by index first: CUDA for more than 32 indices into fewer
// slices than the GPU holds threads; OpenCL likewise on GPUs, and on a CPU
// device for fewer slices than compute units, here inner = outer = 1).
TEST_F(PluginTest, GatherAndScatterAddWithRepeatedIndices) {
  const IndexCase cases[] = {
      {3, 5, 2, 7, "few indices"},
      {1, 9, 1, 3000, "one feature, many repeats (the parallel path on CPU devices too)"},
      {5, 300, 2, 2000, "two outer slices, hot low indices"},
      {40, 50, 1, 64, "just past the loop's index count"},
      {2, 3, 1, 33, "three rows, 33 indices"},
  };
  for (const IndexCase& c : cases) {
    const Bytes ib = make(FLX_I64, index_values(c));
    for (int32_t t : all_dtypes()) {
      SCOPED_TRACE(std::string(dname(t)) + ", " + c.what + ": inner " + std::to_string(c.inner) + ", axis " +
                   std::to_string(c.axis) + ", outer " + std::to_string(c.outer) + ", " + std::to_string(c.nidx) +
                   " indices");
      auto desc = [&](const std::vector<flx_mem>& m) {
        flx_index_desc d{};
        d.dtype = t;
        d.inner = c.inner;
        d.axis_len = c.axis;
        d.outer = c.outer;
        d.nidx = c.nidx;
        d.src = m[0];
        d.dst = m[1];
        d.idx = m[2];
        return d;
      };
      const size_t table = size_t(c.inner * c.axis * c.outer), gathered = size_t(c.inner * c.nidx * c.outer);
      Outcome g = run_both(*be, {make(t, values_for(t, table, 1)), Bytes(gathered * dsize(t)), ib},
                           [&](const Backend& b, int dev, const std::vector<flx_mem>& m) { b.gather(dev, desc(m)); });
      ASSERT_TRUE(g.dev.ok) << g.dev.err;
      EXPECT_TRUE(bitwise(g.cpu_out[1], g.dev_out[1]));
      const std::vector<double> sources =
          dfloat(t) && c.nidx != 7 ? grid_values(gathered, 0, 3, 0x1p-30, 2) : values_for(t, gathered, 2);
      Outcome s = run_both(
          *be, {make(t, sources), make(t, values_for(t, table, 3)), ib},
          [&](const Backend& b, int dev, const std::vector<flx_mem>& m) { b.scatter_add(dev, desc(m)); });
      EXPECT_SAME_OUTCOME(s);
      if (s.cpu.ok && s.dev.ok) {
        EXPECT_TRUE(bitwise(s.cpu_out[1], s.dev_out[1])) << close(t, s.cpu_out[1], s.dev_out[1]).message();
      }
    }
  }
}

TEST_F(PluginTest, PermuteEveryOrderOfThreeAndFourDims) {
  for (int32_t t : all_dtypes()) {
    for (int nd : {3, 4}) {
      // (4, 3, 2, 2), and (4, 1, 3, 2) whose size-1 dim libflx drops
      for (bool size_one : {false, true}) {
        const int64_t shape[4] = {4, size_one ? 1 : 3, size_one ? 3 : 2, 2};
        int32_t perm[4] = {0, 1, 2, 3};
        do {
          SCOPED_TRACE(std::string(dname(t)) + " perm " + std::to_string(perm[0]) + std::to_string(perm[1]) +
                       std::to_string(perm[2]) + (nd == 4 ? std::to_string(perm[3]) : "") +
                       (size_one ? " with a size-1 dim" : ""));
          int64_t n = 1;
          for (int k = 0; k < nd; ++k) n *= shape[k];
          Outcome o = run_both(*be, {make(t, values_for(t, size_t(n), 4)), Bytes(size_t(n) * dsize(t))},
                               [&](const Backend& b, int dev, const std::vector<flx_mem>& m) {
                                 b.permute(dev, flx::detail::permute_desc(t, nd, shape, perm, m[0], m[1]));
                               });
          ASSERT_TRUE(o.dev.ok) << o.dev.err;
          EXPECT_TRUE(bitwise(o.cpu_out[1], o.dev_out[1]));
        } while (std::next_permutation(perm, perm + nd));
      }
    }
  }
}

// ---- softmax and optimisers ----------------------------------------------------------
TEST_F(PluginTest, SoftmaxForwardAndBackward) {
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
        Outcome fwd = run_both(*be, {x, z, dy, z},
                               [&](const Backend& b, int dev, const std::vector<flx_mem>& m) { b.softmax(dev, desc(m)); });
        EXPECT_SAME_OUTCOME(fwd);
        if (!fwd.cpu.ok || !fwd.dev.ok) continue;
        EXPECT_TRUE(close(t, fwd.cpu_out[1], fwd.dev_out[1]));
        // backward from the CPU's y, so both sides see the same input
        Outcome bwd = run_both(*be, {x, fwd.cpu_out[1], dy, z}, [&](const Backend& b, int dev, const std::vector<flx_mem>& m) {
          b.softmax_backward(dev, desc(m));
        });
        ASSERT_TRUE(bwd.dev.ok) << bwd.dev.err;
        EXPECT_TRUE(close(t, bwd.cpu_out[3], bwd.dev_out[3], 2));
      }
}

TEST_F(PluginTest, AdamStepWritesDxOrUpdatesInPlace) {
  const size_t n = 300;
  for (int32_t t : all_dtypes())
    for (bool in_place : {false, true}) {
      SCOPED_TRACE(std::string(dname(t)) + (in_place ? " in place" : " dx"));
      Bytes g = make(t, values_for(t, n, 1)), m = make(t, grid_values(n, -1, 1, 0.01, 2)),
            v = make(t, grid_values(n, 0, 1, 0.01, 3)), x = make(t, values_for(t, n, 4)), dx(n * dsize(t));
      Outcome o = run_both(*be, {g, m, v, dx, x}, [&](const Backend& bk, int dev, const std::vector<flx_mem>& b) {
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
        bk.optim_step(dev, d);
      });
      EXPECT_SAME_OUTCOME(o);
      if (!o.cpu.ok || !o.dev.ok) continue;
      EXPECT_TRUE(close(t, o.cpu_out[1], o.dev_out[1]));                                 // m
      EXPECT_TRUE(close(t, o.cpu_out[2], o.dev_out[2]));                                 // v
      EXPECT_TRUE(close(t, o.cpu_out[in_place ? 4 : 3], o.dev_out[in_place ? 4 : 3]));  // x or dx
    }
}
