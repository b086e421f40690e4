#include <flx/flx.hpp>

#include <iostream>

using namespace flx;

int main() {
  set_seed(1);
  auto model = Chain(Dense(4, 8, relu), Dense(8, 2)) | gpu;
  auto opt_state = setup(Adam(1e-2), model);
  Tensor x = rand(4, 16) | gpu, y = rand(2, 16) | gpu;
  for (int step = 0; step < 10; ++step) {
    auto grads = gradient([&](const auto& m) { return mse(m(x), y); }, model);
    update(opt_state, model, std::get<0>(grads));
  }

  // No `| cpu` first: save copies to the host, and writes atomically.
  save("model.safetensors", model);
  save("opt_state.safetensors", opt_state);

  State s = load("model.safetensors");  // CPU tensors, by name
  for (const auto& [name, t] : s) std::cout << name << " " << t.shape() << "\n";

  auto model_cpu = Chain(Dense(4, 8, relu), Dense(8, 2));  // a fresh model, on the CPU
  loadmodel(model_cpu, s);
  std::cout << "same outputs: " << std::boolalpha
            << (model_cpu(x | cpu).to_vector<float>() == (model(x) | cpu).to_vector<float>()) << "\n";

  // Training resumes exactly with the optimiser state.
  auto resumed = setup(Adam(1e-2), model_cpu);
  loadmodel(resumed, load("opt_state.safetensors"));

  // A checkpoint of another model is refused, naming the key; nothing changes.
  try {
    loadmodel(Chain(Dense(4, 16, relu), Dense(16, 2)), s);
  } catch (const CheckpointError& e) {
    std::string msg = e.what();
    std::cout << msg.substr(0, msg.find(';')) << "\n";
  }
}
