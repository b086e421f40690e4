// The op list (include/flx/backend_ops.h) checked as a whole: its codes and
// classes are consistent, and every fused derivative it names agrees with
// finite differences of its op's body. A new op is covered here without a
// line of test code; the plugin suites run every op of the list on each
// backend, and the conformance suite compares devices.
#include <algorithm>
#include <cmath>
#include <set>
#include <string>

#include "backend_common/map_op_info.hpp"
#include "ops/ops_internal.hpp"
#include "test_util.hpp"

using namespace flx;

namespace {
std::vector<int> all_ops() {
  std::vector<int> ops;
  for (int op = 0; op < map_ops::kMaxOpCode; ++op)
    if (map_ops::exists(op)) ops.push_back(op);
  return ops;
}
}  // namespace

TEST(OpList, CodesNamesAndClassesAreConsistent) {
  std::set<std::string> names;
  for (int op : all_ops()) {
    const auto& in = map_ops::info(op);
    SCOPED_TRACE(in.name);
    EXPECT_TRUE(names.insert(in.name).second) << "duplicate name";
    // Code ranges by arity (backend_ops.h): unary 0-31 and 128-191, binary
    // 32-63 and 192-255, derivative products (binary) 64-95 and 256-319,
    // ternary 96-127.
    auto in_range = [&](int lo, int hi) { return op >= lo && op <= hi; };
    if (in.arity == 1) EXPECT_TRUE(in_range(0, 31) || in_range(128, 191));
    if (in.arity == 2) EXPECT_TRUE(in_range(32, 95) || in_range(192, 319));
    if (in.arity == 3) EXPECT_TRUE(in_range(96, 127));
    if (in.grad != FLX_OP_NONE) {
      EXPECT_EQ(in.arity, 1) << "only unary ops have a fused derivative";
      EXPECT_EQ(map_ops::arity(in.grad), 2);
      EXPECT_TRUE((in.grad >= 64 && in.grad <= 95) || in.grad >= 256) << "derivative products use codes 64-95, 256-319";
    }
    EXPECT_TRUE(map_ops::accepts(op, FLX_F32));
    EXPECT_EQ(map_ops::accepts(op, FLX_I32), in.cls != map_ops::OpClass::Float);
    EXPECT_EQ(map_ops::accepts(op, FLX_BOOL), in.cls != map_ops::OpClass::Float && in.cls != map_ops::OpClass::Num);
  }
  EXPECT_STREQ(map_ops::info(FLX_OP_GELU_ERF).name, "gelu_erf");
  EXPECT_FALSE(map_ops::exists(127));
  EXPECT_FALSE(map_ops::exists(map_ops::kMaxOpCode));
  // Room for 30 more unary and 30 more binary ops without a new major version.
  int free_unary = 0, free_binary = 0;
  for (int op = 0; op < map_ops::kMaxOpCode; ++op) {
    if (map_ops::exists(op)) continue;
    free_unary += op < 32 || (op >= 128 && op < 192);
    free_binary += (op >= 32 && op < 64) || (op >= 192 && op < 256);
  }
  EXPECT_GE(free_unary, 30);
  EXPECT_GE(free_binary, 30);
}

// Each code records the ABI minor version that brought it, so libflx can
// refuse an op that a plugin of an older minor does not know (the frozen
// headers of ABI 2.2 in tests/plugins/abi_2_2 say which codes existed then).
std::vector<int> abi_2_2_op_codes();  // abi_2_2_op_codes.cpp
TEST(OpList, EveryCodeRecordsTheMinorVersionThatBroughtIt) {
  const std::vector<int> old = abi_2_2_op_codes();
  ASSERT_GE(old.size(), 46u);
  for (int op : old) {
    EXPECT_TRUE(map_ops::exists(op)) << "code " << op << " of ABI 2.2 is gone: codes are never removed";
    EXPECT_EQ(map_ops::since(op), 0) << map_ops::info(op).name;
  }
  for (int op : all_ops()) {
    if (std::find(old.begin(), old.end(), op) != old.end()) continue;
    SCOPED_TRACE(map_ops::info(op).name);
    EXPECT_GE(map_ops::since(op), 3) << "a code added after ABI 2.2 needs its line in FLX_MAP_OPS_ADDED";
    EXPECT_LE(map_ops::since(op), int(FLX_BACKEND_ABI_MINOR));
  }
  EXPECT_EQ(map_ops::since(FLX_OP_SOFTSIGN), 3);
  EXPECT_EQ(map_ops::since(FLX_OP_MISH), 11);
  EXPECT_EQ(map_ops::since(FLX_OP_RRELU), 11);
  EXPECT_EQ(map_ops::since(FLX_OP_LISHT_GRAD), 11);
}

TEST(OpList, EveryFusedDerivativeMatchesFiniteDifferencesOfItsOp) {
  // Away from the kinks: 0, ±1 (hardtanh), ±3 (hardσ, hardswish), 6 (relu6),
  // ±alpha (clamp's ±0.5, softshrink's ±0.5, trelu's 0.7).
  const std::vector<double> xs{-2.3, -0.7, -0.1, 0.3, 0.9, 2.1, 3.4, -3.6, 6.5};
  const double h = 1e-6;
  int checked = 0;
  for (int op : all_ops()) {
    const auto& in = map_ops::info(op);
    if (in.grad == FLX_OP_NONE) continue;
    SCOPED_TRACE(in.name);
    const double alpha = op == FLX_OP_CLAMP || op == FLX_OP_SOFTSHRINK ? (op == FLX_OP_CLAMP ? -0.5 : 0.5) : 0.7,
                 beta = op == FLX_OP_CLAMP ? 0.5 : 0;
    Tensor x = tensor(xs), up = tensor(xs) + h, down = tensor(xs) - h;
    Tensor g = tensor(std::vector<double>(xs.size(), 1.0));
    std::vector<double> fused = ops::raw_binary(in.grad, x, g, alpha, beta).to_vector<double>();
    std::vector<double> fu = ops::raw_unary(op, up, alpha, beta).to_vector<double>();
    std::vector<double> fd = ops::raw_unary(op, down, alpha, beta).to_vector<double>();
    for (size_t i = 0; i < xs.size(); ++i)
      EXPECT_NEAR(fused[i], (fu[i] - fd[i]) / (2 * h), 1e-6) << "at x = " << xs[i];
    ++checked;
  }
  // gelu, gelu_erf, leakyrelu, elu, swish, softplus, clamp, celu, softsign, and
  // the 13 of ABI 2.11: hardsigmoid ... lisht
  EXPECT_GE(checked, 22);
}
