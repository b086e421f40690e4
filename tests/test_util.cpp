#include "test_util.hpp"

#include <cstdio>
#include <cstdlib>

#include "cpu/cpu_backend.hpp"
#include "tensor_impl.hpp"

namespace flx::testing {

std::vector<Device> accelerator_devices() {
  static const std::vector<Device> devs = [] {
    std::vector<Device> out;
    // FLX_TEST_LOOPBACK=1: the CPU backend's own function table mounted as a
    // second device ("Metal:0"), so the suite checks that no op mixes up
    // devices even on a machine with no second backend.
    if (const char* lb = std::getenv("FLX_TEST_LOOPBACK"); lb && std::string(lb) == "1") {
      detail::register_backend(BackendId::Metal, cpu_backend::core());
      out.push_back(Device(BackendId::Metal, 0));
      return out;
    }
    for (const auto& name : supported_devices()) {
      if (name == "CPU") continue;
      auto st = backend_status(name);
      if (!st.functional) {
        std::fprintf(stderr, "[conformance] %s skipped: %s\n", name.c_str(), st.reason.c_str());
        continue;
      }
      for (const auto& d : devices(name)) out.push_back(d.device);
    }
    return out;
  }();
  return devs;
}

std::vector<Device> conformance_devices() {
  std::vector<Device> out{Device::cpu()};
  for (const auto& d : accelerator_devices()) out.push_back(d);
  return out;
}

}  // namespace flx::testing
