// The seed's basic example against the installed flx; prints the loss and
// the hand-computed loss, which must agree.
#include <flx/flx.hpp>

#include <cmath>
#include <cstdio>

using namespace flx;

struct ActorCritic {
  Tensor actor;
  Tensor critic;
};
FLX_FUNCTOR(ActorCritic, actor)

int main() {
  Tensor W = rand(2, 5) | gpu;
  Tensor b = rand(2) | gpu;
  auto predict = [&](const Tensor& x) { return matmul(W, x) + b; };
  auto loss = [&](const Tensor& x, const Tensor& y) { return sum(square(predict(x) - y)); };
  Tensor x = rand(5) | gpu, y = rand(2) | gpu;
  float l = loss(x, y).item<float>();

  auto w = W.to_vector<float>(), bv = b.to_vector<float>(), xv = x.to_vector<float>(), yv = y.to_vector<float>();
  double hand = 0;
  for (int i = 0; i < 2; ++i) {
    double p = bv[i];
    for (int j = 0; j < 5; ++j) p += double(w[i + 2 * j]) * xv[j];
    hand += (p - yv[i]) * (p - yv[i]);
  }
  std::printf("loss %.6f hand %.6f\n", l, hand);

  auto m = Chain(Dense(10, 5, sigmoid), Dense(5, 2), softmax);
  m = fmap(cpu, m);
  auto opt = setup(Adam(1e-3), m);
  auto [val, grads] = withgradient([&](const auto& mm) { return mse(mm(rand(10, 4)), rand(2, 4)); }, m);
  update(opt, m, std::get<0>(grads));
  ActorCritic ac{ones(2, 2), ones(2)};
  ac = ac | cpu;
  Device dev = Device::cpu();
  std::printf("%s %s %d\n", std::string(dev.backend()).c_str(), dev.str().c_str(), dev.ordinal());
  Tensor moved = rand(3) | gpu;
  std::printf("gpu -> %s, sum %.3f\n", get_device(moved).str().c_str(), sum(moved * 0.0 + 1.0).item<double>());
  try {
    (void)(x | cu);
  } catch (const BackendUnavailable& e) {
    std::printf("cu unavailable\n");
  } catch (const Error&) {
    return 2;
  }
  return std::fabs(l - hand) <= 1e-5 * std::max(1.0, hand) ? 0 : 1;
}
