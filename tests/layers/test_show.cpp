// How layers print, as src/layers/show.cpp writes it for every layer
// (include/flx/layers/show.hpp, Flux's show.jl): a big model's multi-line
// form with its totals, non-trainable counts, digit groups and sizes, and
// the names activations print as. Each layer's one-line form is checked
// with its family (tests/layers/test_<family>.cpp).
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "flx/flx.hpp"
#include "test_util.hpp"

using namespace flx;
using flx::testing::shown;

TEST(Layers, ActivationNamesAsFluxPrintsThem) {
  EXPECT_EQ(shown(Activation(sigmoid)), "σ");
  for (auto [a, n] : std::vector<std::pair<Activation, std::string>>{
           {relu, "relu"}, {flx::tanh, "tanh"}, {gelu, "gelu_tanh"}, {leakyrelu, "leakyrelu"}, {elu, "elu"},
           {swish, "swish"}, {softplus, "softplus"}, {identity, "identity"}})
    EXPECT_EQ(shown(a), n);
  EXPECT_EQ(std::string(Softmax::name()), "softmax");
}

TEST(ConvLayers, BigModelsPrintAsFluxDisplaysThem) {
  // Seed 004's model: two layers with arrays, one per line, then the totals.
  EXPECT_EQ(shown(Chain(Dense(1, 256, flx::tanh), Dense(256, 1))),
            "Chain(\n"
            "  Dense(1 => 256, tanh),                # 512 parameters\n"
            "  Dense(256 => 1),                      # 257 parameters\n"
            ")                   # Total: 4 arrays, 769 parameters, 3.004 KiB.");
  // BatchNorm's statistics count apart; layers without arrays have no count;
  // a nested Chain with arrays opens its own block.
  const auto cnn = Chain(Conv({3, 3}, 1, 16, relu, {.pad = 1}), BatchNorm(16), MaxPool({2, 2}),
                         Chain(Flatten(), Dense(16 * 14 * 14, 10)));
  EXPECT_EQ(shown(cnn),
            "Chain(\n"
            "  Conv((3, 3), 1 => 16, relu, pad=1),   # 160 parameters\n"
            "  BatchNorm(16),                        # 32 parameters, plus 32\n"
            "  MaxPool((2, 2)),\n"
            "  Chain(\n"
            "    flatten,\n"
            "    Dense(3136 => 10),                  # 31_370 parameters\n"
            "  ),\n"
            ")         # Total: 6 trainable arrays, 31_562 parameters,\n"
            "          # plus 2 non-trainable, 32 parameters, summarysize 123.414 KiB.");  // (31_562 + 32) × 4 bytes
  // Small models keep the one-line form, with Flux's digit groups.
  EXPECT_EQ(shown(Chain(Dense(784, 256, relu), softmax)), "Chain(Dense(784 => 256, relu), softmax)  # 200_960 parameters");
}
