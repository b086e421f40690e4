// flx-info: what is installed, what is functional on this machine, and why
// not; the devices of each backend, with which of their Float16 and
// BFloat16 paths are fast, emulated or missing; and the GPU preference in
// force.
#include <flx/flx.hpp>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {
std::string show(double gbps) {  // "n/a" where the backend cannot copy that way
  if (gbps <= 0) return "n/a";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", gbps);
  return buf;
}

// --bandwidth: the copy rates of every device of every functional GPU
// backend, and between its first two devices when it has more than one.
void print_bandwidth(size_t bytes) {
  std::printf("\nTransfer rates in GB/s (median of 5 copies of %zu MiB):\n", bytes >> 20);
  bool any = false;
  for (const auto& name : flx::supported_devices()) {
    if (name == "CPU" || !flx::functional(name)) continue;
    auto devs = flx::devices(name);
    for (const auto& d : devs) {
      any = true;
      flx::Bandwidth b = flx::measure_bandwidth(d.device, bytes);
      std::printf("  %-9s host->device pinned %s, pageable %s; device->host pinned %s, pageable %s; "
                  "device->device %s\n",
                  d.device.str().c_str(), show(b.h2d_pinned).c_str(), show(b.h2d_pageable).c_str(),
                  show(b.d2h_pinned).c_str(), show(b.d2h_pageable).c_str(), show(b.d2d).c_str());
    }
    if (devs.size() >= 2)
      std::printf("  %s -> %s: %.1f\n", devs[0].device.str().c_str(), devs[1].device.str().c_str(),
                  flx::measure_peer_bandwidth(devs[0].device, devs[1].device, bytes));
  }
  if (!any) std::printf("  no functional GPU device\n");
}

// How the device runs Float16 and BFloat16 work, a family of ops a line:
//           BFloat16: GEMM fast (oneDNN brg:avx512_core_bf16)
//                     convolution fast (oneDNN jit_bf16:avx512_core_bf16)
//                     batch norm emulated (direct loops widening each value as read; Float32 statistics)
void print_precision_paths(const flx::Device& d) {
  std::vector<flx::PrecisionPath> paths;
  try {
    paths = flx::precision_paths(d);
  } catch (const flx::Error& e) {
    std::printf("          half precision: the backend failed to say (%s)\n", e.what());
    return;
  }
  if (paths.empty()) {
    std::printf("          half precision: not reported (its plugin predates precision_path, ABI 2.9)\n");
    return;
  }
  flx::DType last = flx::Float32;
  for (const auto& p : paths) {
    const std::string label = p.dtype == last ? "" : std::string(flx::dtype_name(p.dtype)) + ":";
    last = p.dtype;
    std::printf("          %-10s%s %s (%s)\n", label.c_str(), p.op.c_str(), p.speed.c_str(), p.how.c_str());
  }
}

}  // namespace

int main(int argc, char** argv) {
  size_t bandwidth_bytes = 0;  // 0: no --bandwidth
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "-h" || a == "--help") {
      std::printf("usage: flx-info [--bandwidth[=MIB]]\nLists flx's backends, whether each is installed and "
                  "functional (and why not),\ntheir devices (with which of their Float16 and BFloat16 paths are fast, emulated\n"
                  "or missing), and the GPU backend preference in force.\n"
                  "--bandwidth also measures host<->device (pinned and pageable) and device<->device copy\n"
                  "rates of every GPU device, with copies of MIB MiB (default 256).\n");
      return 0;
    } else if (a == "--bandwidth") {
      bandwidth_bytes = size_t(256) << 20;
    } else if (a.rfind("--bandwidth=", 0) == 0) {
      char* end = nullptr;
      const unsigned long mib = std::strtoul(a.c_str() + 12, &end, 10);
      if (*end || mib < 1 || mib > (1ul << 20)) {
        std::fprintf(stderr, "flx-info: --bandwidth=MIB takes a whole number of MiB from 1 to 1048576; got '%s'\n",
                     a.c_str() + 12);
        return 2;
      }
      bandwidth_bytes = size_t(mib) << 20;
    } else {
      std::fprintf(stderr, "flx-info: unknown argument '%s'; see flx-info --help\n", a.c_str());
      return 2;
    }
  }
  std::printf("flx %s\n\n", FLX_VERSION);
  try {
    std::printf("GPU backend preference: %s (from %s)\n\n", flx::gpu_backend().c_str(),
                flx::gpu_backend_source().c_str());
  } catch (const flx::Error& e) {
    std::printf("GPU backend preference: invalid: %s\n\n", e.what());
  }
  std::printf("CPU threads: up to %d (FLX_NUM_THREADS, OMP_NUM_THREADS or the usable cores), %d in use now\n\n",
              flx::num_threads(), flx::num_threads_in_use());
  for (const auto& name : flx::supported_devices()) {
    flx::BackendStatus s = flx::backend_status(name);
    std::string plugin = s.built_in ? "built in" : s.plugin_found ? s.plugin_path : "not found";
    std::printf("%-7s plugin: %s\n        functional: %s%s\n", name.c_str(), plugin.c_str(),
                s.functional ? "yes" : "no", s.functional ? "" : (" (" + s.reason + ")").c_str());
    if (!s.abi.empty()) {
      std::string tables;
      for (const auto& t : s.tables) tables += (tables.empty() ? "" : ", ") + t;
      std::printf("        backend ABI %s; op tables: %s\n", s.abi.c_str(), tables.empty() ? "none" : tables.c_str());
    }
    for (const auto& d : flx::devices(name)) {
      std::printf("        %-9s %s [%s]", d.device.str().c_str(), d.name.c_str(), d.kind.c_str());
      if (d.total_memory) std::printf(", %s", flx::format_bytes(int64_t(d.total_memory)).c_str());
      if (d.free_memory) std::printf(" (%s free)", flx::format_bytes(int64_t(d.free_memory)).c_str());
      std::printf("\n");
      print_precision_paths(d.device);
    }
  }
  try {
    std::printf("\nget_device() selects: %s\n", flx::get_device().str().c_str());
  } catch (const flx::Error& e) {
    std::printf("\nget_device() fails: %s\n", e.what());
    return 1;
  }
  if (bandwidth_bytes) {
    try {
      print_bandwidth(bandwidth_bytes);
    } catch (const flx::Error& e) {
      std::printf("bandwidth measurement failed: %s\n", e.what());
      return 1;
    }
  }
  return 0;
}
