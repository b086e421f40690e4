// flx-info: what is installed, what is functional on this machine, and why
// not; the devices of each backend; and the GPU preference in force.
#include <flx/flx.hpp>

#include <cstdio>
#include <string>

namespace {
std::string gib(uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f GiB", double(bytes) / (1024.0 * 1024 * 1024));
  return buf;
}
}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && (std::string(argv[1]) == "-h" || std::string(argv[1]) == "--help")) {
    std::printf("usage: flx-info\nLists flx's backends, whether each is installed and functional (and why not),\n"
                "their devices, and the GPU backend preference in force.\n");
    return 0;
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
      if (d.total_memory) std::printf(", %s", gib(d.total_memory).c_str());
      if (d.free_memory) std::printf(" (%s free)", gib(d.free_memory).c_str());
      std::printf("\n");
    }
  }
  try {
    std::printf("\nget_device() selects: %s\n", flx::get_device().str().c_str());
  } catch (const flx::Error& e) {
    std::printf("\nget_device() fails: %s\n", e.what());
    return 1;
  }
  return 0;
}
