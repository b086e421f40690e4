// Functors: FLX_FUNCTOR at global and namespace scope, containers, the
// identity cache, zipped fmap, FLX_TRAINABLE and leaves.
#include <map>
#include <optional>
#include <variant>

#include "test_util.hpp"

using namespace flx;
using flx::testing::expect_values;

struct ActorCritic {
  Tensor actor;
  Tensor critic;
  int steps = 0;
};
FLX_FUNCTOR(ActorCritic, actor, critic)

struct OnlyActor {
  Tensor actor;
  Tensor critic;
};
FLX_FUNCTOR(OnlyActor, actor)  // as Flux's @functor OnlyActor (actor,)

namespace user_models {
struct Block {
  Tensor w;
  std::vector<Tensor> extras;
  std::optional<Tensor> maybe;
};
FLX_FUNCTOR(Block, w, extras, maybe)

struct Norm {
  Tensor scale;
  Tensor running_mean;
};
FLX_FUNCTOR(Norm, scale, running_mean)
FLX_TRAINABLE(Norm, scale)
}  // namespace user_models

struct Config {  // holds no tensors: declared a leaf, copied unchanged
  std::string name;
  double lr;
};
FLX_LEAF(Config)

struct WithConfig {
  Tensor w;
  Config cfg;
};
FLX_FUNCTOR(WithConfig, w, cfg)

namespace {
Tensor times2(const Tensor& t) { return t * 2.0; }
}  // namespace

TEST(Functor, DeclaredFieldsAreMappedOthersCopied) {
  ActorCritic m{ones(2, 2), ones(2), 7};
  auto m2 = fmap(times2, m);
  expect_values(m2.actor, {2, 2, 2, 2});
  expect_values(m2.critic, {2, 2});
  EXPECT_EQ(m2.steps, 7);
  OnlyActor o{ones(2), ones(2)};
  auto o2 = fmap(times2, o);
  expect_values(o2.actor, {2, 2});
  EXPECT_EQ(o2.critic.id(), o.critic.id());  // not listed: copied unchanged
}

TEST(Functor, NamespaceScopeAndContainers) {
  user_models::Block b{ones(1), {ones(2), ones(3)}, ones(1)};
  auto b2 = fmap(times2, b);
  expect_values(b2.extras[1], {2, 2, 2});
  expect_values(*b2.maybe, {2});
  std::tuple<Tensor, std::pair<Tensor, int>> tp{ones(1), {ones(1), 3}};
  auto tp2 = fmap(times2, tp);
  expect_values(std::get<0>(tp2), {2});
  EXPECT_EQ(std::get<1>(tp2).second, 3);
  std::array<Tensor, 2> arr{ones(1), ones(1)};
  expect_values(fmap(times2, arr)[1], {2});
  std::map<std::string, Tensor> mp{{"a", ones(1)}, {"b", zeros(1)}};
  expect_values(fmap(times2, mp).at("a"), {2});
  std::variant<int, Tensor> var = ones(1);
  expect_values(std::get<Tensor>(fmap(times2, var)), {2});
  expect_values(fmap(times2, ones(2)), {2, 2});  // a bare tensor
}

TEST(Functor, TiedTensorsMapOnceAndStayTied) {
  Tensor w = ones(2);
  ActorCritic tied{w, w};
  int calls = 0;
  auto m2 = fmap([&](const Tensor& t) { ++calls; return t * 3.0; }, tied);
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(m2.actor.id(), m2.critic.id());
}

TEST(Functor, ZippedFmap) {
  ActorCritic a{ones(2), ones(1)}, b{full(3.0f, 2), full(4.0f, 1)};
  auto s = fmap([](const Tensor& x, const Tensor& y) { return x + y; }, a, b);
  expect_values(s.actor, {4, 4});
  expect_values(s.critic, {5});
}

TEST(Functor, TrainableNarrowsLeavesWithPaths) {
  user_models::Norm n{ones(3), zeros(3)};
  EXPECT_EQ(leaves(n).size(), 2u);
  auto tr = leaves(n, true);
  ASSERT_EQ(tr.size(), 1u);
  EXPECT_EQ(tr[0].id(), n.scale.id());
  std::vector<std::string> paths;
  auto visit = [&](const std::string& p, const Tensor&) { paths.push_back(p); };
  auto m = std::make_tuple(n, ActorCritic{ones(1), ones(1)});
  detail::walk<false>(visit, "", m);
  EXPECT_EQ(paths, (std::vector<std::string>{"0.scale", "0.running_mean", "1.actor", "1.critic"}));
}

TEST(Functor, LeavesAndEmptyTypesPassThrough) {
  auto t = std::make_tuple(ones(1), std::string("name"), 3.5, relu, Activation(sigmoid));
  auto t2 = fmap(times2, t);
  EXPECT_EQ(std::get<1>(t2), "name");
  EXPECT_EQ(std::get<2>(t2), 3.5);
  expect_values(std::get<0>(t2), {2});
}

TEST(Functor, DeclaredLeavesAreCopied) {
  WithConfig m{ones(1), {"adam", 0.1}};
  auto m2 = fmap(times2, m);
  expect_values(m2.w, {2});
  EXPECT_EQ(m2.cfg.name, "adam");
  EXPECT_EQ(leaves(m).size(), 1u);
  static_assert(detail::is_leaf_v<Config>);
  static_assert(!detail::is_walkable_v<std::unique_ptr<int>>);
}
