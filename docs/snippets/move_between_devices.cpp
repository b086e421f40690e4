#include <flx/flx.hpp>

#include <iostream>

using namespace flx;

int main() {
  for (const auto& d : devices("OpenCL")) std::cout << d.device << ": " << d.kind << "\n";
  Device device0 = get_device("OpenCL", 0);
  Device device1 = get_device("OpenCL", 1);

  set_seed(4);
  auto dense_model = Dense(2, 3);
  Tensor w = dense_model.weight;
  dense_model = dense_model | device0;
  std::cout << "on " << get_device(dense_model) << "\n";
  dense_model = dense_model | device1;  // device to device
  std::cout << "on " << get_device(dense_model) << "\n";
  std::cout << dense_model << "\n";      // printing works on any device
  auto back = dense_model | cpu;
  std::cout << "values intact: " << std::boolalpha
            << (back.weight.to_vector<float>() == w.to_vector<float>()) << "\n";
}
