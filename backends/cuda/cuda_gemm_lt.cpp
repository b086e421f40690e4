// gemm_epilogue (ABI minor 2) through cuBLASLt: one cublasLtMatmul with
// CUBLASLT_MATMUL_DESC_EPILOGUE for a Dense layer's bias + activation
// (BIAS, RELU_BIAS, GELU_BIAS, GELU_AUX_BIAS, which writes the
// pre-activation for the backward pass) and for its bias gradient fused into
// the weight gradient (BGRADA: the row sums of op(A) over k).
//
// The algorithm comes from cublasLtMatmulAlgoGetHeuristic, asked once per
// (device, shape, leading dimensions, transposes, dtype, epilogue, pointer
// alignments) and cached, so that a call costs a lookup and the descriptors
// built on the stack (the semi-opaque *Init calls allocate nothing). When the
// heuristic finds no algorithm, that is cached too and the call answers
// FLX_ERR_UNSUPPORTED before queuing anything: libflx then runs the unfused
// ops. Workspace (at most kMaxWorkspace) is stream-ordered memory from the
// device's pool, freed right after the launch.
//
// Float32 computes in FP32 (CUBLAS_COMPUTE_32F), TF32 only when
// allow_tf32() (FLX_CUDA_ALLOW_TF32=1), as for gemm; Float16 and BFloat16
// in FP32. Float64 and the other products cuda_epilogue_policy.hpp lists
// are declined (FLX_ERR_UNSUPPORTED). cuBLASLt is opened by the first call
// (cuda_blas_libs.hpp); when it cannot be, the call answers
// FLX_ERR_UNSUPPORTED. Whatever the answer other than FLX_OK, libflx runs
// the unfused ops on the same device (and logs a failure that is not
// FLX_ERR_UNSUPPORTED once).

#include <cstring>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "cuda_blas_libs.hpp"
#include "cuda_common.hpp"
#include "cuda_epilogue_policy.hpp"

namespace flx_cuda {
namespace {

constexpr uint64_t kMaxWorkspace = uint64_t(4) << 20;

// One cuBLASLt handle per device, created on first use (with the device
// current) and kept for the process; a handle holds no stream, so threads
// share it.
int lt_handle(const CublasLtApi& lt, int dev, cublasLtHandle_t* out) {
  static std::mutex mu;
  static std::vector<cublasLtHandle_t> handles;
  std::lock_guard<std::mutex> lock(mu);
  if (handles.size() <= size_t(dev)) handles.resize(size_t(dev) + 1, nullptr);
  if (!handles[size_t(dev)]) {
    cublasLtHandle_t h = nullptr;
    cublasStatus_t st = lt.create(&h);
    if (st != CUBLAS_STATUS_SUCCESS)
      return fail(st == CUBLAS_STATUS_ALLOC_FAILED ? FLX_ERR_OUT_OF_MEMORY : FLX_ERR_DEVICE,
                  std::string("cublasLtCreate failed: ") + lt.status_string(st));
    handles[size_t(dev)] = h;
  }
  *out = handles[size_t(dev)];
  return FLX_OK;
}

// log2 of a pointer's alignment, capped at 256 bytes (the heuristic's
// default assumption); 15 for a null pointer.
uint32_t align_log2(const void* p) {
  if (!p) return 15;
  const uintptr_t v = reinterpret_cast<uintptr_t>(p);
  uint32_t a = 0;
  while (a < 8 && !(v & (uintptr_t(1) << a))) ++a;
  return a;
}

struct Key {
  int64_t m, n, k, lda, ldb, ldc, aux_ld;
  int32_t dev, dtype, epilogue;
  uint32_t flags;  // transposes, tf32, aux present, alignments
  bool operator==(const Key& o) const { return std::memcmp(this, &o, sizeof *this) == 0; }
};
static_assert(sizeof(Key) == 7 * 8 + 4 * 4, "Key has no padding (compared and hashed as bytes)");
struct KeyHash {
  size_t operator()(const Key& k) const {
    const auto* p = reinterpret_cast<const unsigned char*>(&k);
    size_t h = 1469598103934665603ull;  // FNV-1a over the key's bytes
    for (size_t i = 0; i < sizeof k; ++i) h = (h ^ p[i]) * 1099511628211ull;
    return h;
  }
};
struct Plan {
  bool found = false;  // false: the heuristic had no algorithm (answer UNSUPPORTED)
  cublasLtMatmulAlgo_t algo{};
  size_t workspace = 0;
};

std::mutex g_plans_mu;
std::unordered_map<Key, Plan, KeyHash>& plans() {
  static auto* m = new std::unordered_map<Key, Plan, KeyHash>();  // never destroyed: used until exit
  return *m;
}

// The call's descriptors, on the stack.
struct Descs {
  cublasLtMatmulDescOpaque_t op_store;
  cublasLtMatrixLayoutOpaque_t a_store, b_store, c_store;
  cublasLtMatmulDesc_t op = &op_store;
  cublasLtMatrixLayout_t a = &a_store, b = &b_store, c = &c_store;
  Descs() = default;
  Descs(const Descs&) = delete;
  Descs& operator=(const Descs&) = delete;
};

// `lt` is the caller's CublasLtApi.
#define FLX_LT_TRY(call)                                                                                        \
  do {                                                                                                          \
    cublasStatus_t st_ = (call);                                                                                \
    if (st_ != CUBLAS_STATUS_SUCCESS)                                                                           \
      return fail(FLX_ERR_UNSUPPORTED, std::string("gemm_epilogue: ") + #call + ": " + lt->status_string(st_)); \
  } while (0)

}  // namespace

int gemm_epilogue(void*, int dev, const flx_gemm_epilogue_desc* e, flx_stream s) {
  if (const std::string why = epilogue_declined(*e); !why.empty())
    return fail(FLX_ERR_UNSUPPORTED, "gemm_epilogue: " + why + "; libflx runs the unfused ops");
  const flx_gemm_desc& d = e->gemm;
  // Float32, Float16 or BFloat16 (the policy declined the rest): scaled
  // and computed in FP32 (TF32 when allowed)
  const cudaDataType_t type = d.dtype == FLX_F32 ? CUDA_R_32F : d.dtype == FLX_F16 ? CUDA_R_16F : CUDA_R_16BF;
  const cudaDataType_t scale_type = CUDA_R_32F;
  const cublasComputeType_t compute =
      d.dtype == FLX_F32 && allow_tf32() ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
  const bool has_aux = e->aux.buf != nullptr;
  cublasLtEpilogue_t epi;
  switch (e->epilogue) {
    case FLX_EPILOGUE_BIAS: epi = CUBLASLT_EPILOGUE_BIAS; break;
    case FLX_EPILOGUE_BIAS_RELU: epi = CUBLASLT_EPILOGUE_RELU_BIAS; break;
    case FLX_EPILOGUE_BIAS_GELU: epi = has_aux ? CUBLASLT_EPILOGUE_GELU_AUX_BIAS : CUBLASLT_EPILOGUE_GELU_BIAS; break;
    default: epi = CUBLASLT_EPILOGUE_BGRADA; break;
  }

  cudaStream_t st;
  if (int r = enter(dev, s, &st, "gemm_epilogue")) return r;
  // cuBLASLt is opened here, by the first fused product, never by probing.
  const CublasLtApi* lt = nullptr;
  if (int r = cublaslt_api(&lt, FLX_ERR_UNSUPPORTED, "gemm_epilogue")) return r;
  cublasLtHandle_t h = nullptr;
  if (int r = lt_handle(*lt, dev, &h)) return r;

  const void* A = addr(d.a);
  const void* B = addr(d.b);
  void* C = addr(d.c);
  void* bias = addr(e->bias);
  void* aux = has_aux ? addr(e->aux) : nullptr;

  // The descriptors of this call (nothing allocated).
  Descs x;
  const cublasOperation_t ta = d.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, tb = d.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  FLX_LT_TRY(lt->matmul_desc_init(x.op, sizeof *x.op, compute, scale_type));
  FLX_LT_TRY(lt->matmul_desc_set(x.op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
  FLX_LT_TRY(lt->matmul_desc_set(x.op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
  const uint32_t epi32 = uint32_t(epi);
  FLX_LT_TRY(lt->matmul_desc_set(x.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi32, sizeof epi32));
  FLX_LT_TRY(lt->matmul_desc_set(x.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof bias));
  if (has_aux) {
    const int64_t ld = e->aux_ld;
    FLX_LT_TRY(lt->matmul_desc_set(x.op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux, sizeof aux));
    FLX_LT_TRY(lt->matmul_desc_set(x.op, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &ld, sizeof ld));
  }
  // Stored shapes (before op): A is m×k, or k×m when transposed; B k×n or n×k.
  FLX_LT_TRY(lt->layout_init(x.a, sizeof *x.a, type, uint64_t(d.trans_a ? d.k : d.m), uint64_t(d.trans_a ? d.m : d.k),
                             d.lda));
  FLX_LT_TRY(lt->layout_init(x.b, sizeof *x.b, type, uint64_t(d.trans_b ? d.n : d.k), uint64_t(d.trans_b ? d.k : d.n),
                             d.ldb));
  FLX_LT_TRY(lt->layout_init(x.c, sizeof *x.c, type, uint64_t(d.m), uint64_t(d.n), d.ldc));

  Key key{};
  key.m = d.m, key.n = d.n, key.k = d.k, key.lda = d.lda, key.ldb = d.ldb, key.ldc = d.ldc;
  key.aux_ld = has_aux ? e->aux_ld : 0;
  key.dev = dev, key.dtype = d.dtype, key.epilogue = e->epilogue;
  const uint32_t al_a = align_log2(A), al_b = align_log2(B), al_c = align_log2(C);
  key.flags = uint32_t(d.trans_a != 0) | uint32_t(d.trans_b != 0) << 1 | uint32_t(has_aux) << 2 |
              uint32_t(compute == CUBLAS_COMPUTE_32F_FAST_TF32) << 3 | al_a << 4 | al_b << 8 | al_c << 12 |
              align_log2(bias) << 16 | align_log2(aux) << 20;

  Plan plan;
  bool cached = false;
  {
    std::lock_guard<std::mutex> lock(g_plans_mu);
    auto it = plans().find(key);
    if (it != plans().end()) plan = it->second, cached = true;
  }
  if (!cached) {
    cublasLtMatmulPreferenceOpaque_t pref_store;
    cublasLtMatmulPreference_t pref = &pref_store;
    FLX_LT_TRY(lt->preference_init(pref, sizeof *pref));
    const uint64_t ws_max = kMaxWorkspace;
    FLX_LT_TRY(lt->preference_set(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws_max, sizeof ws_max));
    // The heuristic assumes 256-byte aligned matrices unless told: tell it
    // what these pointers have (the key holds the same alignments). The
    // bias and aux pointers it reads from the descriptor itself.
    const uint32_t align_a = 1u << al_a, align_b = 1u << al_b, align_c = 1u << al_c;
    FLX_LT_TRY(lt->preference_set(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &align_a, sizeof align_a));
    FLX_LT_TRY(lt->preference_set(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &align_b, sizeof align_b));
    FLX_LT_TRY(lt->preference_set(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &align_c, sizeof align_c));
    FLX_LT_TRY(lt->preference_set(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &align_c, sizeof align_c));
    cublasLtMatmulHeuristicResult_t result{};
    int count = 0;
    cublasStatus_t hs = lt->heuristic(h, x.op, x.a, x.b, x.c, x.c, pref, 1, &result, &count);
    plan.found = hs == CUBLAS_STATUS_SUCCESS && count > 0 && result.state == CUBLAS_STATUS_SUCCESS;
    if (plan.found) {
      plan.algo = result.algo;
      plan.workspace = result.workspaceSize;
    }
    std::lock_guard<std::mutex> lock(g_plans_mu);
    plans().emplace(key, plan);
  }
  if (!plan.found)
    return fail(FLX_ERR_UNSUPPORTED, "gemm_epilogue: cuBLASLt's heuristic has no algorithm for this product (m=" +
                                         std::to_string(d.m) + ", n=" + std::to_string(d.n) +
                                         ", k=" + std::to_string(d.k) + ", epilogue " + std::to_string(e->epilogue) +
                                         "); libflx runs it unfused");

  flx_buffer ws = nullptr;
  if (plan.workspace > 0)
    if (int r = flx_cuda::alloc(nullptr, dev, plan.workspace, s, &ws)) return r;
  const float alpha = float(d.alpha), beta = float(d.beta);  // every dtype fused scales in float
  const cublasStatus_t r =
      lt->matmul(h, x.op, &alpha, A, x.a, B, x.b, &beta, C, x.c, C, x.c, &plan.algo, ws, plan.workspace, st);
  if (ws) flx_cuda::free(nullptr, dev, ws, s);  // stream-ordered: reused once the product ran
  if (r == CUBLAS_STATUS_SUCCESS) return FLX_OK;
  // Any failure: libflx runs the unfused ops on this device instead (and
  // logs a failure other than "unsupported" once). Clear what the launch
  // may have left in the runtime's error state, so that those ops do not
  // report it as theirs, and do not ask for this product again (but after
  // running out of memory, which may pass).
  (void)cudaGetLastError();
  if (r != CUBLAS_STATUS_ALLOC_FAILED) {
    std::lock_guard<std::mutex> lock(g_plans_mu);
    plans()[key].found = false;
  }
  if (r == CUBLAS_STATUS_NOT_SUPPORTED)
    return fail(FLX_ERR_UNSUPPORTED, "gemm_epilogue: cublasLtMatmul does not support this product");
  return fail(r == CUBLAS_STATUS_ALLOC_FAILED ? FLX_ERR_OUT_OF_MEMORY : FLX_ERR_DEVICE,
              std::string("cublasLtMatmul failed: ") + lt->status_string(r) + " (m=" + std::to_string(d.m) +
                  ", n=" + std::to_string(d.n) + ", k=" + std::to_string(d.k) + ", epilogue " +
                  std::to_string(e->epilogue) + ")");
}

#undef FLX_LT_TRY

}  // namespace flx_cuda
