// The fused table (include/flx/backend_fused.h, ABI minor 14): the CPU
// backend serves it, answering supports() for every code of FLX_FUSED_OPS
// and refusing a code it does not know; and a backend built before it (here
// the CPU's tables with the fused one hidden, mounted as AMDGPU:0 in this
// process of its own) runs every fused op through the older calls, giving
// the CPU's bits for convolutions, pools, batch and group normalisation,
// the recurrent op, attention, the fused Dense and an optimiser rule.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "backend/backend.hpp"
#include "cpu/cpu_backend.hpp"
#include "devices/registry.hpp"
#include "flx/flx.hpp"
#include "test_util.hpp"

using namespace flx;

namespace {

const flx_backend& cpu_core() { return *cpu_backend::core(); }

// The CPU's core table with get_table and list_tables leaving out "fused":
// what a plugin of minor 13 looks like to libflx.
const flx_backend* cpu_without_fused_table() {
  static const flx_backend core = [] {
    flx_backend c = cpu_core();
    c.name = "AMDGPU";
    c.get_table = [](void* ctx, const char* name, uint32_t version) -> const void* {
      if (name && std::strcmp(name, FLX_TABLE_FUSED) == 0) return nullptr;
      return cpu_core().get_table(ctx, name, version);
    };
    c.list_tables = [](void*, uint32_t* count) -> const flx_table_ref* {
      static const flx_table_ref refs[] = {{FLX_TABLE_COMPUTE, FLX_TABLE_COMPUTE_VERSION},
                                           {FLX_TABLE_DNN, FLX_TABLE_DNN_VERSION}};
      *count = 2;
      return refs;
    };
    return c;
  }();
  return &core;
}

const Device kOlder{BackendId::AMDGPU, 0};

class FusedTable : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!detail::find_backend(BackendId::AMDGPU)) detail::register_backend(BackendId::AMDGPU, cpu_without_fused_table());
  }
};

// y computed on the CPU and on the backend without a fused table: the same bits.
void expect_same_bits(const Tensor& cpu, const Tensor& older, const std::string& what) {
  EXPECT_EQ(older.device(), kOlder) << what;
  EXPECT_EQ(cpu.to_vector<double>(), older.to(Device::cpu()).to_vector<double>()) << what;
}

}  // namespace

TEST_F(FusedTable, TheCpuServesItForEveryFusedOp) {
  const detail::Backend& cpu = detail::backend_of(Device::cpu());
  ASSERT_TRUE(cpu.table<flx_fused_table>().served);
  const int32_t codes[] = {
#define FLX_TEST_CODE_(NAME, code, desc, table, call) code,
      FLX_FUSED_OPS(FLX_TEST_CODE_)
#undef FLX_TEST_CODE_
  };
  EXPECT_EQ(sizeof codes / sizeof codes[0], 16u);
  for (int32_t code : codes) EXPECT_EQ(cpu.fused_supports(0, code, nullptr), FLX_OK) << "code " << code;
  // A code it does not know (one a later libflx may send): unsupported, not an error.
  EXPECT_EQ(cpu.fused_supports(0, 999, nullptr), FLX_ERR_UNSUPPORTED);
  EXPECT_EQ(cpu.fused_run(0, 999, nullptr), FLX_ERR_UNSUPPORTED);
  uint64_t bytes = 1;
  EXPECT_EQ(cpu.fused_scratch_bytes(0, 999, nullptr, FLX_FUSED_WORKSPACE, &bytes), FLX_OK);
  EXPECT_EQ(bytes, 0u);
}

TEST_F(FusedTable, ABackendWithoutItRunsEveryFusedOpThroughTheOlderCalls) {
  const detail::Backend& older = detail::backend_of(kOlder);
  ASSERT_FALSE(older.table<flx_fused_table>().served);
  // It runs every fused op through the older calls, as the CPU does.
#define FLX_TEST_SUPPORTED_(NAME, code, desc, table, call) \
  EXPECT_EQ(older.fused_supports(0, code, nullptr), FLX_OK) << #NAME;
  FLX_FUSED_OPS(FLX_TEST_SUPPORTED_)
#undef FLX_TEST_SUPPORTED_
  set_seed(40);
  const Tensor img = flx::testing::rand64({6, 5, 3, 2}), seq = rand(4, 7, 3);
  auto both = [&](const auto& layer, const Tensor& x, const std::string& what) {
    const auto on_older = layer | kOlder;
    expect_same_bits(layer(x), on_older(x.to(kOlder)), what);
    // and its gradients (the backward ops)
    auto grads = [](const auto& l, const Tensor& input) {
      auto [g] = gradient([&](const Tensor& u) { return sum(l(u) * l(u)); }, input);
      return g;
    };
    expect_same_bits(grads(layer, x), grads(on_older, x.to(kOlder)), what + " gradient");
  };
  both(f64(Conv({3, 3}, 3, 4, relu, {.pad = 1})), img, "conv");  // conv_backward: both gradients in one call
  both(MaxPool({2, 2}), img, "maxpool");
  both(MeanPool({3, 3}, {.stride = 1, .pad = 1}), img, "meanpool");
  both(trainmode(f64(BatchNorm(3))), img, "batchnorm");
  both(f64(GroupNorm(3, 1, flx::tanh)), img, "groupnorm");
  both(LSTM(4, 5), seq, "lstm");
  // attention without its scores (the CPU's attention_* calls)
  const Tensor q = rand(8, 6, 2), k = rand(8, 9, 2), v = rand(8, 9, 2);
  auto attend = [](const Tensor& a, const Tensor& b, const Tensor& c) {
    return dot_product_attention(a, b, c, 2, {.scores = false}).first;
  };
  expect_same_bits(attend(q, k, v), attend(q.to(kOlder), k.to(kOlder), v.to(kOlder)), "attention");
  auto [gq] = gradient([&](const Tensor& a) { return sum(square(attend(a, k, v))); }, q);
  auto [gq2] = gradient([&](const Tensor& a) { return sum(square(attend(a, k.to(kOlder), v.to(kOlder)))); },
                        q.to(kOlder));
  expect_same_bits(gq, gq2, "attention gradient");
  both(Dense(4, 6, relu), rand(4, 9), "dense");
  // An optimiser rule's step (rule_step) on both.
  Dense d(3, 2);
  Dense d2 = d | kOlder;
  auto s1 = setup(NAdam(0.01), d);
  auto s2 = setup(NAdam(0.01), d2);
  for (int step = 0; step < 2; ++step) {
    auto g1 = std::get<0>(gradient([](const Dense& m) { return sum(m(ones(3, 4))); }, d));
    auto g2 = std::get<0>(gradient([](const Dense& m) { return sum(m(ones(3, 4).to(kOlder))); }, d2));
    update(s1, d, g1);
    update(s2, d2, g2);
  }
  expect_same_bits(d.weight, d2.weight, "NAdam's steps");
}
