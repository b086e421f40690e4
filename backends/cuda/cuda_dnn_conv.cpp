// Convolution of the dnn table (backend.h) on cuDNN 9.
//
// Which cuDNN API: the legacy one (cudnnConvolutionForward and
// BackwardData/BackwardFilter, cudnnGet*Algorithm_v7, cudnnPooling*,
// cudnnBatchNormalization*), not the graph API (cudnnBackend*). cuDNN 9
// marks the legacy calls deprecated but ships them whole in libcudnn.so.9
// (they run on the graph engines underneath), and they are what the ABI's
// calls are: one fixed primitive each, NCHW, with Float64 support (the
// graph API's engines take no double for convolution or batch norm, and
// the dnn table requires Float64). The graph API would need an operation
// graph, engine heuristics and an execution plan per shape, some 300 lines
// more, for fusions the table does not ask for. Should a cuDNN drop the
// legacy API, this file is where the graph API goes.
//
// Algorithms: cudnnGet*Algorithm_v7 heuristics (no timing runs: a timing
// run needs the operands' memory and a workspace at the first call, and
// takes seconds for a large layer; the heuristics take microseconds). Of
// their answers, in their order (fastest expected first), the candidates
// kept are those that are supported, deterministic when
// d->deterministic = 1 (CUDNN_DETERMINISTIC), not on TF32 tensor cores for
// Float32 unless FLX_CUDA_ALLOW_TF32=1, and whose workspace (asked of
// cudnnGet*WorkspaceSize) is at most kWorkspaceCap. conv_workspace answers
// the first candidate's workspace (plus the padded copy, below); a call
// runs the first candidate its workspace holds, and the next one when
// cuDNN refuses it at launch (e.g. for operands not aligned as the
// algorithm needs: the legacy heuristics never see the pointers).
// The candidates are cached per device by everything they depend on
// (pass, dtype, shapes, strides, dilation, padding, groups, the
// deterministic flag, TF32), in a bounded map behind a mutex.
//
// Per-side padding: cuDNN pads both sides of a dim alike. Where pad_lo !=
// pad_hi in some dim, the input is copied into a zero-padded buffer at the
// start of the workspace (dnn_pad) and cuDNN runs with no padding: forward
// and backward filter read the padded x; backward data writes the padded
// dx there, which is then cropped into dx (dnn_crop). Otherwise cuDNN pads.
//
// 1-D runs as 2-D with an H of 1; 3-D through the Nd descriptors. Groups
// through cudnnSetConvolutionGroupCount. Bias: cudnnAddTensor after the
// convolution (the fused cudnnConvolutionBiasActivationForward takes only
// IMPLICIT_PRECOMP_GEMM with identity activation, so the algorithm choice
// would be lost); db through cudnnConvolutionBackwardBias.
#include <algorithm>
#include <array>
#include <atomic>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>

#include "cuda_dnn_common.hpp"

namespace flx_cuda {
namespace {

// The most workspace an algorithm may ask (the padded copy comes on top).
constexpr uint64_t kWorkspaceCap = uint64_t(256) << 20;
// The most shapes cached; the map is emptied when full (a model has tens).
constexpr size_t kMaxPlans = 1024;

const char* pass_name(int32_t pass) {
  switch (pass) {
    case FLX_CONV_FORWARD: return "conv";
    case FLX_CONV_BACKWARD_DATA: return "conv_backward_data";
    case FLX_CONV_BACKWARD_FILTER: return "conv_backward_filter";
  }
  return "conv (an unknown pass)";
}

// The descriptor's geometry, checked, with the dims past nspatial set to
// 1 (sizes, kernel, stride, dilation) and 0 (padding) whatever they held.
struct Geometry {
  int nsp = 0;
  int64_t in[3], out[3], kernel[3], stride[3], dilation[3], lo[3], hi[3];
  bool padded = false;  // pad_lo != pad_hi in some dim: padded copy
  int64_t pin[3];       // the padded input's sizes (== in when !padded)
};

int64_t prod3(const int64_t* v) { return v[0] * v[1] * v[2]; }

int validate(const flx_conv_desc* d, const char* what, Geometry* g) {
  if (!d) return fail(FLX_ERR_INVALID_ARGUMENT, std::string(what) + ": the descriptor is NULL");
  if (!FLX_DESC_HAS(d, flx_conv_desc, workspace_bytes))
    return dnn_invalid(what, "struct_size", d->struct_size,
                       "expected at least " + std::to_string(sizeof(flx_conv_desc)) + " (flx_conv_desc of ABI 2.5)");
  if (dnn_dtype_bytes(d->dtype) == 0)
    return fail(FLX_ERR_UNSUPPORTED, std::string(what) + ": the CUDA backend convolves Float32, Float64, Float16 and "
                                                         "BFloat16, not " + dtype_name(d->dtype) +
                                         "; convert to a floating dtype first");
  if (d->nspatial < 1 || d->nspatial > FLX_DNN_MAX_SPATIAL)
    return dnn_invalid(what, "nspatial", d->nspatial, "expected 1, 2 or 3 spatial dims");
  if (d->groups < 1) return dnn_invalid(what, "groups", d->groups, "expected 1 or more");
  if (d->deterministic != 0 && d->deterministic != 1)
    return dnn_invalid(what, "deterministic", d->deterministic, "expected 0 or 1");
  if (d->batch < 0) return dnn_invalid(what, "batch", d->batch, "expected 0 or more");
  if (d->in_channels < 1 || d->in_channels % d->groups)
    return dnn_invalid(what, "in_channels", d->in_channels,
                       "expected a positive multiple of groups (" + std::to_string(d->groups) + ")");
  if (d->out_channels < 1 || d->out_channels % d->groups)
    return dnn_invalid(what, "out_channels", d->out_channels,
                       "expected a positive multiple of groups (" + std::to_string(d->groups) + ")");
  g->nsp = d->nspatial;
  for (int i = 0; i < 3; ++i) {
    const bool used = i < d->nspatial;
    g->in[i] = used ? d->in_size[i] : 1;
    g->out[i] = used ? d->out_size[i] : 1;
    g->kernel[i] = used ? d->kernel[i] : 1;
    g->stride[i] = used ? d->stride[i] : 1;
    g->dilation[i] = used ? d->dilation[i] : 1;
    g->lo[i] = used ? d->pad_lo[i] : 0;
    g->hi[i] = used ? d->pad_hi[i] : 0;
    if (!used) continue;
    const std::string dim = "[" + std::to_string(i) + "]";
    if (g->in[i] < 1) return dnn_invalid(what, "in_size" + dim, g->in[i], "expected 1 or more");
    if (g->kernel[i] < 1) return dnn_invalid(what, "kernel" + dim, g->kernel[i], "expected 1 or more");
    if (g->stride[i] < 1) return dnn_invalid(what, "stride" + dim, g->stride[i], "expected 1 or more");
    if (g->dilation[i] < 1) return dnn_invalid(what, "dilation" + dim, g->dilation[i], "expected 1 or more");
    if (g->lo[i] < 0 || g->hi[i] < 0)
      return dnn_invalid(what, (g->lo[i] < 0 ? "pad_lo" : "pad_hi") + dim, std::min(g->lo[i], g->hi[i]),
                         "expected 0 or more");
    const int64_t span = g->in[i] + g->lo[i] + g->hi[i] - g->dilation[i] * (g->kernel[i] - 1) - 1;
    const int64_t expect = span < 0 ? 0 : span / g->stride[i] + 1;
    if (g->out[i] != expect || expect < 1)
      return dnn_invalid(what, "out_size" + dim, g->out[i],
                         "expected (in + pad_lo + pad_hi - dilation * (kernel - 1) - 1) / stride + 1 = " +
                             std::to_string(expect) + " (must be 1 or more) for in " + std::to_string(g->in[i]) +
                             ", pads " + std::to_string(g->lo[i]) + "/" + std::to_string(g->hi[i]) + ", kernel " +
                             std::to_string(g->kernel[i]) + ", dilation " + std::to_string(g->dilation[i]) +
                             ", stride " + std::to_string(g->stride[i]));
    if (g->lo[i] != g->hi[i]) g->padded = true;
  }
  for (int i = 0; i < 3; ++i) g->pin[i] = g->padded ? g->in[i] + g->lo[i] + g->hi[i] : g->in[i];
  // cuDNN's descriptors hold ints, and its tensors index with them.
  const int64_t counts[] = {d->batch * d->in_channels * prod3(g->pin), d->batch * d->out_channels * prod3(g->out),
                            d->out_channels * (d->in_channels / d->groups) * prod3(g->kernel)};
  for (int64_t c : counts)
    if (!fits_int(c) || !fits_int(d->batch))
      return fail(FLX_ERR_UNSUPPORTED, std::string(what) + ": a tensor of " + std::to_string(c) +
                                           " elements is more than cuDNN takes (2^31-1); split the batch");
  return FLX_OK;
}

// The plan of one pass of one convolution on one device.
struct Candidate {
  int algo;        // cudnnConvolution{Fwd,BwdData,BwdFilter}Algo_t
  uint64_t bytes;  // its workspace
  std::shared_ptr<ConvDesc> conv;  // with the candidate's math type
};
struct Plan {
  TensorDesc x, y, b;  // x: the padded input's shape when padded; b: 1 x C x 1 x 1
  FilterDesc w;
  std::vector<Candidate> candidates;
  uint64_t pad_bytes = 0;  // the padded copy at the workspace's start (0 when none)
  // Per alignment of the operands (0: all 16-byte aligned, 1: some not),
  // the candidate to try first: the one that ran after cuDNN refused the
  // ones before it at launch, so that misaligned operands (a view at an
  // odd offset) do not retry refused algorithms at every call.
  std::atomic<size_t> first[2] = {0, 0};
};

struct Key {
  std::array<int64_t, 32> v{};
  bool operator<(const Key& o) const { return v < o.v; }
};

Key make_key(int dev, int32_t pass, const flx_conv_desc* d, const Geometry& g) {
  Key k;
  size_t n = 0;
  for (int64_t x : {int64_t(dev), int64_t(pass), int64_t(d->dtype), int64_t(g.nsp), int64_t(d->groups),
                    int64_t(d->deterministic), int64_t(allow_tf32()), d->batch, d->in_channels, d->out_channels})
    k.v[n++] = x;
  for (int i = 0; i < 3; ++i) {
    k.v[n++] = g.in[i];
    k.v[n++] = g.out[i];
    k.v[n++] = g.dilation[i];
    k.v[n++] = g.lo[i];
    k.v[n++] = g.hi[i];
    k.v[n++] = g.kernel[i];
    k.v[n++] = g.stride[i];
  }
  return k;
}

cudnnMathType_t base_math(int32_t dtype) {
  switch (dtype) {
    case FLX_F32: return allow_tf32() ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH;  // DEFAULT lets cuDNN use TF32
    case FLX_F16:
    case FLX_BF16: return CUDNN_TENSOR_OP_MATH;
  }
  return CUDNN_DEFAULT_MATH;
}

int make_conv_desc(const CudnnApi& api, const flx_conv_desc* d, const Geometry& g, cudnnMathType_t math,
                   std::shared_ptr<ConvDesc>* out) {
  auto c = std::make_shared<ConvDesc>();
  if (int e = c->create(api, "cudnnCreateConvolutionDescriptor")) return e;
  const int64_t zero[3] = {0, 0, 0};
  const std::vector<int> pad = cudnn_spatial(g.padded ? zero : g.lo, g.nsp, 0);
  const std::vector<int> stride = cudnn_spatial(g.stride, g.nsp, 1), dil = cudnn_spatial(g.dilation, g.nsp, 1);
  // Float16/BFloat16 accumulate in float (cuDNN's PSEUDO_HALF/BFLOAT16 config), Float64 in double.
  const cudnnDataType_t compute = d->dtype == FLX_F64 ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT;
  cudnnStatus_t s = api.set_conv_nd(c->get(), int(pad.size()), pad.data(), stride.data(), dil.data(),
                                    CUDNN_CROSS_CORRELATION, compute);
  if (s != CUDNN_STATUS_SUCCESS) return cudnn_fail(api, s, "cudnnSetConvolutionNdDescriptor");
  if ((s = api.set_conv_groups(c->get(), d->groups)) != CUDNN_STATUS_SUCCESS)
    return cudnn_fail(api, s, "cudnnSetConvolutionGroupCount");
  if ((s = api.set_conv_math(c->get(), math)) != CUDNN_STATUS_SUCCESS)
    return cudnn_fail(api, s, "cudnnSetConvolutionMathType");
  *out = std::move(c);
  return FLX_OK;
}

// The candidates' search: ask the heuristics, keep what backend.h and the
// environment allow (see the top of the file).
template <class Perf, class Count, class Get, class Size>
int choose(const CudnnApi& api, const flx_conv_desc* d, const Geometry& g, Count count, Get get, Size size,
           const char* what, Plan* p) {
  const cudnnMathType_t math = base_math(d->dtype);
  std::shared_ptr<ConvDesc> base;
  if (int e = make_conv_desc(api, d, g, math, &base)) return e;
  int n = 0;
  if (cudnnStatus_t s = count(base->get(), &n); s != CUDNN_STATUS_SUCCESS)
    return cudnn_fail(api, s, std::string(what) + ": cudnnGetConvolution*AlgorithmMaxCount");
  std::vector<Perf> perf(size_t(std::max(n, 1)));
  int got = 0;
  if (cudnnStatus_t s = get(base->get(), int(perf.size()), &got, perf.data()); s != CUDNN_STATUS_SUCCESS)
    return cudnn_fail(api, s, std::string(what) + ": cudnnGetConvolution*Algorithm_v7");
  const bool no_tf32 = d->dtype == FLX_F32 && !allow_tf32();
  std::string refused;
  for (int i = 0; i < got; ++i) {
    const Perf& r = perf[size_t(i)];
    if (r.status != CUDNN_STATUS_SUCCESS) continue;
    if (d->deterministic && r.determinism != CUDNN_DETERMINISTIC) continue;
    const bool tensor_op = r.mathType == CUDNN_TENSOR_OP_MATH || r.mathType == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION;
    if (no_tf32 && tensor_op) continue;
    // The candidate runs under the math type the heuristics answered it
    // for (FMA for Float32 without TF32), on a descriptor of its own.
    std::shared_ptr<ConvDesc> c = base;
    const cudnnMathType_t m = no_tf32 ? CUDNN_FMA_MATH : r.mathType;
    if (m != math)
      if (int e = make_conv_desc(api, d, g, m, &c)) return e;
    size_t bytes = 0;
    if (size(c->get(), r.algo, &bytes) != CUDNN_STATUS_SUCCESS) continue;
    if (bytes > kWorkspaceCap) {
      refused += " algorithm " + std::to_string(int(r.algo)) + " (" + std::to_string(bytes >> 20) + " MiB)";
      continue;
    }
    p->candidates.push_back({int(r.algo), dnn_align(bytes), c});
  }
  if (p->candidates.empty())
    return fail(FLX_ERR_UNSUPPORTED,
                std::string(what) + ": cuDNN offers no algorithm for this convolution (" + dtype_name(d->dtype) +
                    ", groups " + std::to_string(d->groups) + (d->deterministic ? ", deterministic" : "") +
                    ") within the workspace cap of " + std::to_string(kWorkspaceCap >> 20) + " MiB" +
                    (refused.empty() ? std::string() : "; over the cap:" + refused) +
                    (d->deterministic ? "; try without deterministic" : ""));
  return FLX_OK;
}

int build_plan(const CudnnApi& api, cudnnHandle_t h, int32_t pass, const flx_conv_desc* d, const Geometry& g,
               std::shared_ptr<Plan>* out) {
  const char* what = pass_name(pass);
  auto p = std::make_shared<Plan>();
  cudnnDataType_t type;
  cudnn_dtype(d->dtype, &type);
  std::vector<int> xd{int(d->batch), int(d->in_channels)}, yd{int(d->batch), int(d->out_channels)},
      wd{int(d->out_channels), int(d->in_channels / d->groups)}, bd{1, int(d->out_channels)};
  for (int v : cudnn_spatial(g.pin, g.nsp, 1)) xd.push_back(v);
  for (int v : cudnn_spatial(g.out, g.nsp, 1)) yd.push_back(v);
  for (int v : cudnn_spatial(g.kernel, g.nsp, 1)) wd.push_back(v);
  bd.resize(yd.size(), 1);
  if (int e = set_packed_tensor(api, p->x, type, xd, "x")) return e;
  if (int e = set_packed_tensor(api, p->y, type, yd, "y")) return e;
  if (int e = set_packed_tensor(api, p->b, type, bd, "b")) return e;
  if (int e = p->w.create(api, "cudnnCreateFilterDescriptor")) return e;
  if (cudnnStatus_t s = api.set_filter_nd(p->w.get(), type, CUDNN_TENSOR_NCHW, int(wd.size()), wd.data());
      s != CUDNN_STATUS_SUCCESS)
    return cudnn_fail(api, s, std::string(what) + ": cudnnSetFilterNdDescriptor");
  if (g.padded) p->pad_bytes = dnn_align(uint64_t(d->batch * d->in_channels * prod3(g.pin)) * dnn_dtype_bytes(d->dtype));
  int e = FLX_OK;
  switch (pass) {
    case FLX_CONV_FORWARD:
      e = choose<cudnnConvolutionFwdAlgoPerf_t>(
          api, d, g, [&](cudnnConvolutionDescriptor_t, int* n) { return api.fwd_algo_count(h, n); },
          [&](cudnnConvolutionDescriptor_t c, int req, int* got, cudnnConvolutionFwdAlgoPerf_t* r) {
            return api.fwd_algos(h, p->x.get(), p->w.get(), c, p->y.get(), req, got, r);
          },
          [&](cudnnConvolutionDescriptor_t c, cudnnConvolutionFwdAlgo_t a, size_t* b) {
            return api.fwd_workspace(h, p->x.get(), p->w.get(), c, p->y.get(), a, b);
          },
          what, p.get());
      break;
    case FLX_CONV_BACKWARD_DATA:
      e = choose<cudnnConvolutionBwdDataAlgoPerf_t>(
          api, d, g, [&](cudnnConvolutionDescriptor_t, int* n) { return api.bwd_data_algo_count(h, n); },
          [&](cudnnConvolutionDescriptor_t c, int req, int* got, cudnnConvolutionBwdDataAlgoPerf_t* r) {
            return api.bwd_data_algos(h, p->w.get(), p->y.get(), c, p->x.get(), req, got, r);
          },
          [&](cudnnConvolutionDescriptor_t c, cudnnConvolutionBwdDataAlgo_t a, size_t* b) {
            return api.bwd_data_workspace(h, p->w.get(), p->y.get(), c, p->x.get(), a, b);
          },
          what, p.get());
      break;
    default:
      e = choose<cudnnConvolutionBwdFilterAlgoPerf_t>(
          api, d, g, [&](cudnnConvolutionDescriptor_t, int* n) { return api.bwd_filter_algo_count(h, n); },
          [&](cudnnConvolutionDescriptor_t c, int req, int* got, cudnnConvolutionBwdFilterAlgoPerf_t* r) {
            return api.bwd_filter_algos(h, p->x.get(), p->y.get(), c, p->w.get(), req, got, r);
          },
          [&](cudnnConvolutionDescriptor_t c, cudnnConvolutionBwdFilterAlgo_t a, size_t* b) {
            return api.bwd_filter_workspace(h, p->x.get(), p->y.get(), c, p->w.get(), a, b);
          },
          what, p.get());
  }
  if (e) return e;
  // cuDNN's own output size must be the ABI's: a mismatch would be a bug in
  // the mapping above (the order of dims, the padding), caught here rather
  // than as a silently wrong result.
  std::vector<int> od(yd.size());
  if (cudnnStatus_t s = api.conv_output_dim(p->candidates[0].conv->get(), p->x.get(), p->w.get(), int(od.size()), od.data());
      s != CUDNN_STATUS_SUCCESS)
    return cudnn_fail(api, s, std::string(what) + ": cudnnGetConvolutionNdForwardOutputDim");
  if (od != yd)
    return fail(FLX_ERR_DEVICE, std::string(what) + ": cuDNN computes another output shape than the descriptor's "
                                                    "(a bug of the CUDA plugin's descriptor mapping; please report)");
  *out = std::move(p);
  return FLX_OK;
}

int plan_for(const CudnnApi& api, cudnnHandle_t h, int dev, int32_t pass, const flx_conv_desc* d, const Geometry& g,
             std::shared_ptr<Plan>* out) {
  static std::mutex mu;
  static std::map<Key, std::shared_ptr<Plan>> plans;
  const Key k = make_key(dev, pass, d, g);
  {
    std::lock_guard<std::mutex> lock(mu);
    if (auto it = plans.find(k); it != plans.end()) {
      *out = it->second;
      return FLX_OK;
    }
  }
  // Built outside the lock (the heuristics take a while); two threads may
  // build the same plan, and the first one stored wins.
  std::shared_ptr<Plan> p;
  if (int e = build_plan(api, h, pass, d, g, &p)) return e;
  std::lock_guard<std::mutex> lock(mu);
  if (plans.size() >= kMaxPlans) plans.clear();  // plans in use live on through their shared_ptr
  *out = plans.emplace(k, std::move(p)).first->second;
  return FLX_OK;
}

// Whether a status of a launch means "this algorithm cannot run these
// operands" (try the next), rather than a failure.
bool try_next(cudnnStatus_t s) {
  return s == CUDNN_STATUS_NOT_SUPPORTED || s == CUDNN_STATUS_BAD_PARAM ||
         (s >= CUDNN_STATUS_NOT_SUPPORTED && s < CUDNN_STATUS_NOT_SUPPORTED + 5);  // SHAPE, DATA_TYPE, LAYOUT, ...
}

int run_pass(void*, int dev, const flx_conv_desc* d, flx_stream s, int32_t pass) {
  const char* what = pass_name(pass);
  Geometry g;
  if (int e = validate(d, what, &g)) return e;
  DnnCall c;
  if (int e = dnn_begin(dev, s, what, &c)) return e;
  const size_t eb = dnn_dtype_bytes(d->dtype);
  const int64_t nx = d->batch * d->in_channels * prod3(g.in), ny = d->batch * d->out_channels * prod3(g.out),
                nw = d->out_channels * (d->in_channels / d->groups) * prod3(g.kernel);
  switch (pass) {
    case FLX_CONV_FORWARD:
      if (int e = dnn_operand(dev, d->x, nx, eb, what, "x")) return e;
      if (int e = dnn_operand(dev, d->w, nw, eb, what, "w")) return e;
      if (int e = dnn_operand(dev, d->y, ny, eb, what, "y")) return e;
      if (d->b.buf)
        if (int e = dnn_operand(dev, d->b, d->out_channels, eb, what, "b")) return e;
      break;
    case FLX_CONV_BACKWARD_DATA:
      if (int e = dnn_operand(dev, d->dy, ny, eb, what, "dy")) return e;
      if (int e = dnn_operand(dev, d->w, nw, eb, what, "w")) return e;
      if (int e = dnn_operand(dev, d->dx, nx, eb, what, "dx")) return e;
      break;
    default:
      if (int e = dnn_operand(dev, d->x, nx, eb, what, "x")) return e;
      if (int e = dnn_operand(dev, d->dy, ny, eb, what, "dy")) return e;
      if (int e = dnn_operand(dev, d->dw, nw, eb, what, "dw")) return e;
      if (d->db.buf)
        if (int e = dnn_operand(dev, d->db, d->out_channels, eb, what, "db")) return e;
  }
  if (d->batch == 0) {  // nothing to convolve; dw (and db) are sums over nothing
    if (pass != FLX_CONV_BACKWARD_FILTER) return FLX_OK;
    if (int e = check(cudaMemsetAsync(addr(d->dw), 0, size_t(nw) * eb, c.stream), "cudaMemsetAsync (dw)")) return e;
    if (d->db.buf)
      return check(cudaMemsetAsync(addr(d->db), 0, size_t(d->out_channels) * eb, c.stream), "cudaMemsetAsync (db)");
    return FLX_OK;
  }
  std::shared_ptr<Plan> p;
  if (int e = plan_for(*c.api, c.handle, dev, pass, d, g, &p)) return e;
  const uint64_t have = d->workspace.buf ? d->workspace_bytes : 0;
  // The workspace conv_workspace answered holds the first candidate; a
  // smaller one may still hold a later candidate.
  bool fits = false;
  for (const Candidate& k : p->candidates) fits = fits || p->pad_bytes + k.bytes <= have;
  if (!fits)
    return dnn_invalid(what, "workspace_bytes", int64_t(have),
                       "expected at least " + std::to_string(p->pad_bytes + p->candidates[0].bytes) +
                           " bytes (with workspace.buf set), as conv_workspace answers for this descriptor and pass");
  if (have > 0)
    if (int e = check_range(dev, d->workspace, size_t(have), (std::string(what) + ": workspace").c_str())) return e;
  char* ws = d->workspace.buf ? addr(d->workspace) : nullptr;
  const DnnBox in_box = dnn_box(g.in, g.nsp, d->batch * d->in_channels), pad_box = dnn_box(g.pin, g.nsp, in_box.nc);
  const int64_t lo[3] = {g.lo[0], g.lo[1], g.lo[2]};
  // x (forward, backward filter) or dx (backward data) as cuDNN sees it.
  const void* x = addr(d->x);
  void* dx = pass == FLX_CONV_BACKWARD_DATA ? addr(d->dx) : nullptr;
  if (g.padded) {
    if (pass == FLX_CONV_BACKWARD_DATA) {
      dx = ws;
    } else {
      if (int e = dnn_pad(c.stream, addr(d->x), in_box, ws, pad_box, lo, eb)) return e;
      x = ws;
    }
  }
  char* cws = ws ? ws + p->pad_bytes : nullptr;
  const Blend blend;
  const void* one = blend.one(d->dtype);
  const void* zero = blend.zero(d->dtype);
  cudnnStatus_t r = CUDNN_STATUS_NOT_SUPPORTED;
  std::string tried;
  const void* ptrs[] = {x, addr(d->w), pass == FLX_CONV_FORWARD ? addr(d->y) : addr(d->dy),
                        pass == FLX_CONV_BACKWARD_DATA ? dx : pass == FLX_CONV_BACKWARD_FILTER ? addr(d->dw) : nullptr,
                        cws};
  bool aligned = true;
  for (const void* q : ptrs) aligned = aligned && reinterpret_cast<uintptr_t>(q) % 16 == 0;
  std::atomic<size_t>& first = p->first[aligned ? 0 : 1];
  const size_t n = p->candidates.size(), start = first.load(std::memory_order_relaxed) % n;
  for (size_t t = 0; t < n; ++t) {
    const size_t i = (start + t) % n;
    const Candidate& k = p->candidates[i];
    if (p->pad_bytes + k.bytes > have) continue;
    const size_t wsb = size_t(have - p->pad_bytes);
    void* kws = k.bytes ? cws : nullptr;
    switch (pass) {
      case FLX_CONV_FORWARD:
        r = c.api->conv_forward(c.handle, one, p->x.get(), x, p->w.get(), addr(d->w), k.conv->get(),
                                cudnnConvolutionFwdAlgo_t(k.algo), kws, k.bytes ? wsb : 0, zero, p->y.get(), addr(d->y));
        break;
      case FLX_CONV_BACKWARD_DATA:
        r = c.api->conv_backward_data(c.handle, one, p->w.get(), addr(d->w), p->y.get(), addr(d->dy), k.conv->get(),
                                      cudnnConvolutionBwdDataAlgo_t(k.algo), kws, k.bytes ? wsb : 0, zero, p->x.get(),
                                      dx);
        break;
      default:
        r = c.api->conv_backward_filter(c.handle, one, p->x.get(), x, p->y.get(), addr(d->dy), k.conv->get(),
                                        cudnnConvolutionBwdFilterAlgo_t(k.algo), kws, k.bytes ? wsb : 0, zero,
                                        p->w.get(), addr(d->dw));
    }
    if (r == CUDNN_STATUS_SUCCESS) {
      if (!tried.empty()) first.store(i, std::memory_order_relaxed);  // remember past the refusals
      break;
    }
    if (!try_next(r)) break;
    tried += std::string(tried.empty() ? "" : ", ") + std::to_string(k.algo) + " (" + c.api->error_string(r) + ")";
  }
  if (r != CUDNN_STATUS_SUCCESS)  // a refused Float16/BFloat16 left only the padded copy queued, in the workspace
    return cudnn_fail_for(*c.api, r,
                      std::string(what) + ": cudnnConvolution" +
                          (pass == FLX_CONV_FORWARD ? "Forward" : pass == FLX_CONV_BACKWARD_DATA ? "BackwardData"
                                                                                                 : "BackwardFilter") +
                          (tried.empty() ? std::string() : " (algorithms tried: " + tried + ")"),
                      d->dtype);
  if (pass == FLX_CONV_FORWARD && d->b.buf) {
    if (cudnnStatus_t e = c.api->add_tensor(c.handle, one, p->b.get(), addr(d->b), one, p->y.get(), addr(d->y));
        e != CUDNN_STATUS_SUCCESS)
      return cudnn_fail(*c.api, e, "conv: cudnnAddTensor (the bias)");
  }
  if (pass == FLX_CONV_BACKWARD_FILTER && d->db.buf) {
    cudnnStatus_t e = c.api->conv_backward_bias(c.handle, one, p->y.get(), addr(d->dy), zero, p->b.get(), addr(d->db));
    if (e == CUDNN_STATUS_NOT_SUPPORTED) {  // BFloat16 (seen on an H100, cuDNN 9.19): our own reduction
      const int64_t spatial = prod3(g.out);
      if (int st = dnn_bias_grad(c.stream, d->dtype, addr(d->dy), addr(d->db), spatial, d->out_channels, d->batch))
        return st;
    } else if (e != CUDNN_STATUS_SUCCESS) {
      return cudnn_fail(*c.api, e, "conv_backward_filter: cudnnConvolutionBackwardBias (db)");
    }
  }
  if (pass == FLX_CONV_BACKWARD_DATA && g.padded)
    return dnn_crop(c.stream, ws, pad_box, addr(d->dx), in_box, lo, eb);
  return FLX_OK;
}

}  // namespace

int conv_workspace(void*, int dev, const flx_conv_desc* d, int32_t pass, uint64_t* bytes) {
  const char* what = pass_name(pass);
  if (!bytes) return fail(FLX_ERR_INVALID_ARGUMENT, std::string(what) + " workspace: the answer's pointer is NULL");
  *bytes = 0;
  if (pass < FLX_CONV_FORWARD || pass > FLX_CONV_BACKWARD_FILTER)
    return dnn_invalid("conv_workspace", "pass", pass, "expected FLX_CONV_FORWARD, _BACKWARD_DATA or _BACKWARD_FILTER");
  Geometry g;
  if (int e = validate(d, what, &g)) return e;
  if (d->batch == 0) return FLX_OK;
  DnnCall c;
  if (int e = dnn_begin(dev, nullptr, what, &c)) return e;
  std::shared_ptr<Plan> p;
  if (int e = plan_for(*c.api, c.handle, dev, pass, d, g, &p)) return e;
  *bytes = p->pad_bytes + p->candidates[0].bytes;
  return FLX_OK;
}

int conv_forward(void* ctx, int dev, const flx_conv_desc* d, flx_stream s) {
  return run_pass(ctx, dev, d, s, FLX_CONV_FORWARD);
}
int conv_backward_data(void* ctx, int dev, const flx_conv_desc* d, flx_stream s) {
  return run_pass(ctx, dev, d, s, FLX_CONV_BACKWARD_DATA);
}
int conv_backward_filter(void* ctx, int dev, const flx_conv_desc* d, flx_stream s) {
  return run_pass(ctx, dev, d, s, FLX_CONV_BACKWARD_FILTER);
}

}  // namespace flx_cuda
