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

struct Stack {
  std::vector<Dense> layers;
};
FLX_FUNCTOR(Stack, layers)

namespace {
Tensor add2(const Tensor& x, const Tensor& y) { return x + y; }
// Expect the message to name the path and what each tree holds.
void expect_mentions(const std::string& msg, std::initializer_list<const char*> parts) {
  for (const char* p : parts) EXPECT_NE(msg.find(p), std::string::npos) << "'" << p << "' not in: " << msg;
}
}  // namespace

TEST(Functor, ZippedTreesOfDifferentLengthsAreDimensionMismatches) {
  using flx::testing::error_message;
  std::vector<Tensor> two{ones(1), ones(1)}, one{ones(1)};
  expect_mentions(error_message<DimensionMismatch>([&] { fmap(add2, two, one); }), {"(root)", "std::vector", "2", "1"});
  expect_mentions(error_message<DimensionMismatch>([&] { fmap(add2, one, two); }), {"(root)", "2", "1"});
  // the third tree is the odd one out
  auto add3 = [](const Tensor& x, const Tensor& y, const Tensor& z) { return x + y + z; };
  expect_mentions(error_message<DimensionMismatch>([&] { fmap(add3, two, two, one); }), {"tree 3"});
  // nested: the path to the vector that differs
  Stack s2{{Dense(2, 2), Dense(2, 2)}}, s1{{Dense(2, 2)}};
  expect_mentions(error_message<DimensionMismatch>([&] { fmap(add2, s2, s1); }), {"layers", "2", "1"});
  std::map<std::string, std::vector<Tensor>> m2{{"enc", two}}, m1{{"enc", one}};
  expect_mentions(error_message<DimensionMismatch>([&] { fmap(add2, m2, m1); }), {"enc"});
  // walk (setup, update, leaves) checks the same
  auto visit = [](const std::string&, const Tensor&, const Tensor&) {};
  expect_mentions(error_message<DimensionMismatch>([&] { detail::walk<false>(visit, "", s2, s1); }), {"layers"});
  // equal lengths still zip
  auto s = fmap(add2, two, two);
  expect_values(s[1], {2});
}

TEST(Functor, ZippedMapsVariantsOptionalsOfDifferentShapeAreArgumentErrors) {
  using flx::testing::error_message;
  std::map<std::string, Tensor> ab{{"a", ones(1)}, {"b", ones(1)}}, a{{"a", ones(1)}}, ac{{"a", ones(1)}, {"c", ones(1)}};
  expect_mentions(error_message<ArgumentError>([&] { fmap(add2, ab, a); }), {"b"});   // a key missing in tree 2
  expect_mentions(error_message<ArgumentError>([&] { fmap(add2, a, ab); }), {"b"});   // an extra key in tree 2
  expect_mentions(error_message<ArgumentError>([&] { fmap(add2, ab, ac); }), {"b"});  // same size, other keys
  std::vector<std::map<std::string, Tensor>> v1{a, ab}, v2{a, ac};
  expect_mentions(error_message<ArgumentError>([&] { fmap(add2, v1, v2); }), {"1.b"});
  std::variant<Tensor, std::vector<Tensor>> t = ones(1), vec = std::vector<Tensor>{ones(1)};
  expect_mentions(error_message<ArgumentError>([&] { fmap(add2, t, vec); }), {"alternative 0", "alternative 1"});
  std::optional<Tensor> some = ones(1), none;
  expect_mentions(error_message<ArgumentError>([&] { fmap(add2, some, none); }), {"(root)", "empty"});
  expect_mentions(error_message<ArgumentError>([&] { fmap(add2, none, some); }), {"(root)", "empty"});
  auto visit = [](const std::string&, const Tensor&, const Tensor&) {};
  expect_mentions(error_message<ArgumentError>([&] { detail::walk<false>(visit, "", v1, v2); }), {"1.b"});
  expect_mentions(error_message<ArgumentError>([&] { detail::walk<false>(visit, "", t, vec); }), {"alternative"});
  expect_mentions(error_message<ArgumentError>([&] { detail::walk<false>(visit, "", some, none); }), {"empty"});
  // matching trees still zip
  expect_values(fmap(add2, ab, ab).at("b"), {2});
  EXPECT_FALSE(fmap(add2, none, none).has_value());
}
