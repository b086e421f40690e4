#include <flx/flx.hpp>

#include <iostream>

using namespace flx;

struct ActorCritic {
  Tensor actor;
  Tensor critic;
};
FLX_FUNCTOR(ActorCritic, actor, critic)

int main() {
  ActorCritic m{ones(2, 2), ones(2)};
  auto g = m | gpu;  // both fields move, because they are declared
  std::cout << "actor on " << g.actor.device() << ", critic on " << g.critic.device() << "\n";
  std::cout << (g.critic | cpu) << "\n";
}
