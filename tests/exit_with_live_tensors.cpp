// Tensors alive after main returns, on the CPU and on every device of every
// functional GPU backend: they are freed during process exit, after the
// statics of libflx and of the plugins have been destroyed (a tensor
// declared at namespace scope but assigned in main is destroyed last). The
// backends must free them safely, or leave them to the system: the process
// exits with status 0 and, built with ASan (flx_exit_tests_sanitized), with
// no report. Prints what it left alive.
#include <cstdio>
#include <string>
#include <vector>

#include "flx/flx.hpp"

namespace {
flx::Tensor g_cpu;                   // destroyed after libflx's statics
std::vector<flx::Tensor> g_devices;  // likewise, one tensor per device
}  // namespace

int main() {
  g_cpu = flx::ones(flx::Float32, {4096});
  std::string where = "CPU";
  for (const char* name : {"CUDA", "OpenCL"}) {
    if (!flx::functional(name)) continue;
    for (const flx::DeviceInfo& d : flx::devices(name)) {
      g_devices.push_back(g_cpu.to(d.device) * 2.0);  // an op's result too, not only a copy
      where += " " + d.device.str();
    }
  }
  std::printf("alive after main: %zu tensors on %s\n", g_devices.size() + 1, where.c_str());
  return 0;
}
