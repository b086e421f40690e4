// How layers print, as src/layers/show.cpp writes it for every layer
// (include/flx/layers/show.hpp, Flux's show.jl): a big model's multi-line
// form with its totals, non-trainable counts, digit groups and sizes, and
// the names activations print as. Each layer's one-line form is checked
// with its family (tests/layers/test_<family>.cpp).
#include <gtest/gtest.h>

#include <cmath>
#include <sstream>
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

// ---- FLX_LAYER: a user's own struct, as Flux's @layer --------------------------------

struct TwoPart {
  Chain<Dense, Dense> body;
  Dense head;
  Tensor operator()(const Tensor& x) const { return head(body(x)); }
};
FLX_LAYER(TwoPart, body, head)

struct Affine {
  Tensor weight, bias;
  int64_t calls = 0;  // not a child
};
FLX_LAYER(Affine, weight, bias)

struct HalfFrozen {
  Dense trained, kept;
};
FLX_LAYER(HalfFrozen, trained, kept)
FLX_TRAINABLE(HalfFrozen, trained)

namespace user {
struct Net {
  Dense layer;
};
FLX_LAYER(Net, layer)
// Printing in the struct's own namespace needs no `using`.
inline std::string printed(const Net& n) {
  std::ostringstream os;
  os << n;
  return os.str();
}
}  // namespace user

TEST(Layers, AStructDeclaredWithFlxLayerPrintsAsFluxPrintsAnAtLayerStruct) {
  const TwoPart m{Chain(Dense(2, 3), Dense(3, 4)), Dense(4, 5)};
  EXPECT_EQ(shown(m),
            "TwoPart(\n"
            "  Chain(\n"
            "    Dense(2 => 3),                      # 9 parameters\n"
            "    Dense(3 => 4),                      # 16 parameters\n"
            "  ),\n"
            "  Dense(4 => 5),                        # 25 parameters\n"
            ")                   # Total: 6 arrays, 50 parameters, 200 bytes.");
  // Inside a Chain it is one child among others, in its one-line form.
  EXPECT_EQ(shown(Chain(Dense(5, 2), m)),
            "Chain(\n"
            "  Dense(5 => 2),                        # 12 parameters\n"
            "  TwoPart(\n"
            "    Chain(\n"
            "      Dense(2 => 3),                    # 9 parameters\n"
            "      Dense(3 => 4),                    # 16 parameters\n"
            "    ),\n"
            "    Dense(4 => 5),                      # 25 parameters\n"
            "  ),\n"
            ")                   # Total: 8 arrays, 62 parameters, 248 bytes.");
  // Arrays are leaf-like: a struct of arrays keeps one line, each shown by its size and type.
  EXPECT_EQ(shown(Affine{rand(2, 3), zeros(Float64, Shape{2})}),
            "Affine(2×3 Tensor{Float32}, 2-element Tensor{Float64})  # 8 parameters");
  // FLX_TRAINABLE narrows what trains and what shows; the rest counts apart.
  EXPECT_EQ(shown(HalfFrozen{Dense(2, 3), Dense(3, 4)}), "HalfFrozen(Dense(2 => 3))  # 9 parameters, plus 16 non-trainable");
  EXPECT_EQ(user::printed(user::Net{Dense(2, 3)}), "Net(Dense(2 => 3))  # 9 parameters");
}

TEST(Layers, AStructDeclaredWithFlxLayerTrainsMovesAndSaves) {
  set_seed(40);
  TwoPart m{Chain(Dense(2, 3), Dense(3, 4)), Dense(4, 5)};
  EXPECT_EQ(flx::testing::names_of(state(m)), (std::vector<std::string>{"body.layers.0.weight", "body.layers.0.bias", "body.layers.1.weight",
                                             "body.layers.1.bias", "head.weight", "head.bias"}));
  auto opt = setup(Descent(0.1), m);
  const Tensor x = rand(2, 7);
  const std::vector<double> before = m.head.weight.to_vector<double>();
  auto [l, g] = withgradient([&](const TwoPart& model) { return sum(model(x)); }, m);
  update(opt, m, std::get<0>(g));
  EXPECT_NE(m.head.weight.to_vector<double>(), before);
  for (const Device& dev : flx::testing::conformance_devices()) {
    const TwoPart moved = m | dev;
    EXPECT_EQ(moved.head.weight.device(), dev);
    EXPECT_EQ(std::get<1>(moved.body.layers).bias.device(), dev);
  }
}
