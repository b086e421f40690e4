// README.md, "A first example": a struct of tensors moves once its fields are
// declared (the block is at namespace scope here, as in a program).
#include <flx/flx.hpp>

#include <iostream>

using namespace flx;

struct ActorCritic { Tensor actor; Tensor critic; };
FLX_FUNCTOR(ActorCritic, actor, critic)
auto m = ActorCritic{ones(2, 2), ones(2)} | gpu;

int main() {
  if (m.actor.device() != get_device() || m.critic.device() != get_device()) {
    std::cerr << "the fields stayed behind: actor on " << m.actor.device() << ", critic on " << m.critic.device() << "\n";
    return 1;
  }
}
