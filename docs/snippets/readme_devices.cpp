// README.md, "Devices": get_device as the block uses it (two OpenCL devices:
// POCL_DEVICES="pthread pthread").
#include <flx/flx.hpp>

#include <iostream>

using namespace flx;

int main() {
  Device dev = get_device({.verbose = true});  // preference, else a functional GPU, else the CPU
  auto model = Chain(Dense(784, 256, relu), Dense(256, 10)) | dev;
  Device d1 = get_device("OpenCL", 1);          // a given device, 0-based
  if (get_device(model) != dev || d1.str() != "OpenCL:1") {
    std::cerr << "the model is on " << get_device(model) << ", not " << dev << "; d1 is " << d1 << "\n";
    return 1;
  }
}
