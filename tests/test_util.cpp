#include "test_util.hpp"

namespace flx::testing {
std::vector<Device> conformance_devices() { return {Device::cpu()}; }
}  // namespace flx::testing
