// NCCL opened on first use (backends/cuda/cuda_nccl_lib.cpp), without a GPU:
// before the first request it is not mapped; a request maps it, resolves
// every entry point the comm table calls with nccl.h's type and checks its
// version, and the host-only calls (version, error strings) work through
// those pointers. Also the maps of the comm table's dtypes and ops. The
// plugin's fail() is replaced here by one that keeps the message.
#include <gtest/gtest.h>

#include <string>

#include "cuda/cuda_nccl_lib.hpp"
#include "flx/backend.h"
#include "vendor_library_test.hpp"

using flx_cuda_test::mapped;

// One test, in order: whether NCCL is mapped is a property of the process.
TEST(CudaNcclLib, OpenedOnFirstRequestWithEveryEntryPoint) {
  ASSERT_FALSE(mapped("libnccl.so")) << "linked, not opened on demand";
  const flx_cuda::NcclApi* api = nullptr;
  ASSERT_EQ(flx_cuda::nccl_api(&api, FLX_ERR_DEVICE, "test"), FLX_OK) << flx_cuda::g_last_error;
  EXPECT_TRUE(mapped("libnccl.so"));
  for (const void* f : {(const void*)api->get_version, (const void*)api->get_unique_id,
                        (const void*)api->comm_init_rank_config, (const void*)api->comm_get_async_error,
                        (const void*)api->comm_finalize, (const void*)api->comm_destroy,
                        (const void*)api->comm_abort, (const void*)api->all_reduce, (const void*)api->broadcast,
                        (const void*)api->reduce, (const void*)api->error_string, (const void*)api->last_error})
    EXPECT_NE(f, nullptr);
  // The version was asked for, and is one the plugin takes, of the header's major.
  int version = 0;
  ASSERT_EQ(api->get_version(&version), ncclSuccess);
  EXPECT_EQ(api->version, version);
  EXPECT_GE(version, flx_cuda::kMinNcclVersion);
  EXPECT_EQ(version / 10000, NCCL_MAJOR);
  // Host-only calls through the pointers.
  EXPECT_NE(std::string(api->error_string(ncclInProgress)).find("in progress"), std::string::npos)
      << api->error_string(ncclInProgress);
  EXPECT_NE(api->last_error(nullptr), nullptr);
  const std::string e = flx_cuda::nccl_error(*api, ncclInvalidUsage);
  EXPECT_EQ(e.rfind(api->error_string(ncclInvalidUsage), 0), 0u) << e;
  // A second request answers the same table.
  const flx_cuda::NcclApi* again = nullptr;
  ASSERT_EQ(flx_cuda::nccl_api(&again, FLX_ERR_DEVICE, "test"), FLX_OK);
  EXPECT_EQ(again, api);
}

// Where NCCL is looked for: the soname first (LD_LIBRARY_PATH, RUNPATH, the
// system's paths), then beside the CUDA runtime (a toolkit), then in pip's
// nvidia-nccl wheel beside the runtime's wheel.
TEST(CudaNcclLib, CandidatesAreTheSonameThenBesideTheRuntimeThenTheWheel) {
  const std::string so = "libnccl.so." + std::to_string(NCCL_MAJOR);
  EXPECT_EQ(flx_cuda::nccl_candidates(""), (std::vector<std::string>{so}));
  EXPECT_EQ(flx_cuda::nccl_candidates("/site-packages/nvidia/cu13/lib"),
            (std::vector<std::string>{so, "/site-packages/nvidia/cu13/lib/" + so,
                                      "/site-packages/nvidia/cu13/lib/../../nccl/lib/" + so}));
}

TEST(CudaNcclLib, VersionStrings) {
  EXPECT_EQ(flx_cuda::nccl_version_string(22809), "2.28.9");
  EXPECT_EQ(flx_cuda::nccl_version_string(21400), "2.14.0");
  EXPECT_EQ(flx_cuda::nccl_version_string(2804), "2.8.4");  // the encoding up to 2.8
  EXPECT_EQ(flx_cuda::nccl_version_string(NCCL_VERSION_CODE),
            std::to_string(NCCL_MAJOR) + "." + std::to_string(NCCL_MINOR) + "." + std::to_string(NCCL_PATCH));
  EXPECT_LT(2804, flx_cuda::kMinNcclVersion) << "older codes compare as older";
}

// flx_dtype -> ncclDataType_t and flx_comm_op -> ncclRedOp_t, value by value.
TEST(CudaNcclLib, DtypeAndOpMaps) {
  const std::pair<int32_t, ncclDataType_t> dtypes[] = {
      {FLX_F32, ncclFloat32}, {FLX_F64, ncclFloat64}, {FLX_F16, ncclFloat16}, {FLX_BF16, ncclBfloat16},
      {FLX_I32, ncclInt32},   {FLX_I64, ncclInt64},   {FLX_U8, ncclUint8},    {FLX_BOOL, ncclUint8}};
  for (auto [flx, nccl] : dtypes) {
    ncclDataType_t t = ncclNumTypes;
    ASSERT_TRUE(flx_cuda::nccl_dtype(flx, &t)) << flx;
    EXPECT_EQ(t, nccl) << flx;
  }
  ncclDataType_t t;
  EXPECT_FALSE(flx_cuda::nccl_dtype(8, &t));
  EXPECT_FALSE(flx_cuda::nccl_dtype(-1, &t));
  const std::pair<int32_t, ncclRedOp_t> ops[] = {
      {FLX_COMM_SUM, ncclSum}, {FLX_COMM_MAX, ncclMax}, {FLX_COMM_MIN, ncclMin}, {FLX_COMM_AVG, ncclAvg}};
  for (auto [flx, nccl] : ops) {
    ncclRedOp_t o = ncclProd;
    ASSERT_TRUE(flx_cuda::nccl_op(flx, &o)) << flx;
    EXPECT_EQ(o, nccl) << flx;
  }
  ncclRedOp_t o;
  EXPECT_FALSE(flx_cuda::nccl_op(4, &o));
  EXPECT_FALSE(flx_cuda::nccl_op(-1, &o));
  static_assert(FLX_COMM_ID_BYTES == NCCL_UNIQUE_ID_BYTES);
}
