#include <flx/flx.hpp>

#include <iostream>

using namespace flx;

int main() {
  Device device = get_device({.verbose = true});  // logs each step on stderr
  std::cout << "device: " << device << "\n";
  set_seed(3);
  auto model = Dense(2, 3);
  std::cout << model.weight << "\n";
  model = model | device;  // moves the whole model
  std::cout << model << "\n";
  std::cout << "weight on " << get_device(model) << "\n";
}
