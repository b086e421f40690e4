// Layers as a hostile user meets them (issue 27), across every family:
// constructors given sizes below 1, each error typed and naming the layer
// and the value. The other hostile cases live with their family's tests:
// SamePad on a strided ConvTranspose, pooling gradients of empty batches,
// convolution geometry that overflows int64 and a convolution's dtype hint
// in tests/layers/test_conv.cpp; dropout of Inf and NaN in
// tests/layers/test_normalise.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "flx/flx.hpp"
#include "test_util.hpp"

using namespace flx;
using flx::testing::error_message;
using flx::testing::has;

// ---- constructors given sizes below 1 (issue 27) ------------------------------------

TEST(HostileLayers, ConstructorsRejectBadSizesNamingTheLayer) {
  struct Case {
    std::string layer, value;
    std::function<void()> make;
  };
  const std::vector<Case> cases = {
      {"LayerNorm", "-3", [] { LayerNorm(-3); }},
      {"LayerNorm", "0", [] { LayerNorm(0); }},
      {"LayerNorm", "-3", [] { LayerNorm({4, -3}); }},
      {"Embedding", "-5", [] { Embedding(-5, 3); }},
      {"Embedding", "0", [] { Embedding(5, 0); }},
      {"Dense", "-2", [] { Dense(-2, 3); }},
      {"Dense", "-7", [] { Dense(3, -7, relu); }},
      {"Dense", "0", [] { Dense(0, 3); }},
      {"Conv", "-1", [] { Conv({3, 3}, -1, 2); }},
      {"Conv", "-3", [] { Conv({-3, 3}, 1, 2); }},
      {"CrossCor", "0", [] { CrossCor({3}, 2, 0); }},
      {"ConvTranspose", "-4", [] { ConvTranspose({3, 3}, 1, -4); }},
      {"BatchNorm", "-2", [] { BatchNorm(-2); }},
      {"BatchNorm", "0", [] { BatchNorm(0, relu); }},
      {"RNN", "-1", [] { RNN(-1, 3); }},
      {"LSTM", "0", [] { LSTM(3, 0); }},
      {"GRU", "-6", [] { GRU(2, -6); }},
      {"RNNCell", "-1", [] { RNNCell(-1, 3); }},
      {"LSTMCell", "-2", [] { LSTMCell(4, -2); }},
      {"GRUCell", "0", [] { GRUCell(0, 2); }},
      {"MaxPool", "0", [] { MaxPool({2, 0}); }},
      {"MeanPool", "-2", [] { MeanPool({-2}); }},
      {"AdaptiveMaxPool", "0", [] { AdaptiveMaxPool({0, 2}); }},
      {"AdaptiveMeanPool", "-1", [] { AdaptiveMeanPool({-1}); }},
      {"Dropout", "-1", [] { Dropout(0.5, {-1}); }},
      {"Dropout", "1.5", [] { Dropout(1.5); }},
  };
  for (const auto& c : cases) {
    EXPECT_THROW(c.make(), ArgumentError) << c.layer << " " << c.value;
    const std::string m = error_message(c.make);
    EXPECT_EQ(m.rfind(c.layer, 0), 0u) << c.layer << ": " << m;  // the message starts with the layer
    EXPECT_TRUE(has(m, c.value)) << c.layer << ": " << m;
    EXPECT_FALSE(has(m, "dims must be non-negative")) << c.layer << ": " << m;
  }
}
