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
  // Data and checkpoints, by their contract names.
  auto loader = DataLoader(std::tuple{rand(10, 9), rand(2, 9)}, {.batchsize = 4, .shuffle = true, .seed = 1}) | gpu;
  int64_t seen = 0;
  for (auto [bx, by] : loader) seen += bx.size(1);
  auto doubled = DataLoader(mapobs([](const Tensor& t) { return t * 2.0; }, ones(3, 5)), {.batchsize = 5});
  double total = 0;
  for (const Tensor& t : doubled) total += sum(t).item<double>();
  save("consumer_model.safetensors", m);
  State st = load("consumer_model.safetensors");
  auto m2 = Chain(Dense(10, 5, sigmoid), Dense(5, 2), softmax);
  loadmodel(m2, st);
  Tensor probe = rand(10, 2);
  bool same = m2(probe).to_vector<float>() == m(probe).to_vector<float>() && state(m2).size() == 4;
  std::printf("loader %lld of %lld batches %lld, mapobs %.0f, checkpoint round trip %s\n", (long long)seen, 9LL,
              (long long)loader.size(), total, same ? "ok" : "DIFFERS");
  if (seen != 9 || total != 30 || !same) return 3;
  // cu moves to CUDA where a GPU is functional, and says it cannot elsewhere.
  const bool have_cuda = functional("CUDA");
  try {
    Tensor on_cuda = x | cu;
    std::printf("cu -> %s%s\n", on_cuda.device().str().c_str(), have_cuda ? " as expected" : " UNEXPECTED");
  } catch (const BackendUnavailable& e) {
    std::printf("cu unavailable%s\n", have_cuda ? " UNEXPECTED" : " as expected");
  } catch (const Error&) {
    return 2;
  }
  return std::fabs(l - hand) <= 1e-5 * std::max(1.0, hand) ? 0 : 1;
}
