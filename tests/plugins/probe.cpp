// Prints what flx knows of one backend, for tests that must run in a fresh
// process (the registry loads each plugin once per process).
//   probe_backend NAME [gpu|cu|get_device|force|set|abi|ops|memory|precision|devices|vendor_maps]
// set: gpu_backend(NAME), writing the preference. abi: the ABI version and
// op tables. ops: a round trip through NAME:0, then zeros and x + x there.
// devices: how many devices NAME has.
// memory: memory_stats of NAME:0 with and without a 1000-float tensor there.
// precision: precision_paths of NAME:0 (how it runs half work), a line each.
// vendor_maps: "tables=<its op tables>" (libflx looked each up when it
// loaded the plugin: the comm table too), NAME's devices where it is
// functional (as flx-info lists them), then "plugin <path>" for each
// mapping of NAME's plugin and
// "mapped <path>" for each vendor compute library mapped into the process
// (cuBLAS, cuBLASLt, cuDNN, NCCL, CLBlast), which probing must not map.
// A flx::Error is printed as "<Type>: <message>".
#include <flx/flx.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

namespace {
const char* error_type(const flx::Error& e) {
  if (dynamic_cast<const flx::BackendUnavailable*>(&e)) return "BackendUnavailable";
  if (dynamic_cast<const flx::NotImplemented*>(&e)) return "NotImplemented";
  if (dynamic_cast<const flx::ArgumentError*>(&e)) return "ArgumentError";
  return "Error";
}
// What vendor_maps prints of /proc/self/maps.
void print_vendor_maps(const std::string& plugin_path) {
  static const char* const kVendor[] = {"/libcublas.so", "/libcublasLt.so", "/libcudnn", "/libnccl.so",
                                        "/libclblast.so"};
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line)) {
    const size_t slash = line.find('/');
    if (slash == std::string::npos) continue;
    const std::string path = line.substr(slash);
    if (!plugin_path.empty() && path.ends_with("/" + std::filesystem::path(plugin_path).filename().string()))
      std::printf("plugin %s\n", path.c_str());
    for (const char* v : kVendor)
      if (path.find(v) != std::string::npos) std::printf("mapped %s\n", path.c_str());
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  auto s = flx::backend_status(argv[1]);
  std::printf("found=%d functional=%d path=%s\nreason=%s\n", s.plugin_found, s.functional, s.plugin_path.c_str(),
              s.reason.c_str());
  std::string what = argc > 2 ? argv[2] : "";
  auto show = [](const char* label, const flx::Tensor& t) {
    std::printf("%s", label);
    for (float v : t.to_vector<float>()) std::printf(" %g", v);
    std::printf("\n");
  };
  try {
    if (what == "gpu") {
      flx::Tensor moved = flx::rand(flx::Float64, 2) | flx::gpu;
      std::printf("gpu -> %s %s\n", flx::get_device(moved).str().c_str(), std::string(flx::dtype_name(moved.dtype())).c_str());
    }
    if (what == "cu") (void)(flx::rand(2) | flx::cu);
    if (what == "get_device") std::printf("device %s\n", flx::get_device({.verbose = true}).str().c_str());
    if (what == "force") (void)flx::get_device({.force = true});
    if (what == "set") flx::gpu_backend(argv[1]);
    if (what == "abi") {
      std::string tables;
      for (const auto& t : s.tables) tables += (tables.empty() ? "" : "; ") + t;
      std::printf("abi=%s\ntables=%s\n", s.abi.c_str(), tables.c_str());
    }
    if (what == "ops") {
      flx::Device d = flx::get_device(argv[1], 0);
      flx::Tensor x = flx::tensor(std::vector<float>{1, 2, 3}, {3}).to(d);
      show("roundtrip", x.to(flx::Device::cpu()));
      try {  // a product with k = 0 is a fill of zeros on the device
        show("fill", flx::matmul(flx::zeros(2, 0).to(d), flx::zeros(0, 2).to(d)).to(flx::Device::cpu()));
      } catch (const flx::Error& e) {
        std::printf("%s: %s\n", error_type(e), e.what());
      }
      show("sum", x + x);
    }
    if (what == "devices") std::printf("devices=%zu\n", flx::devices(argv[1]).size());
    if (what == "vendor_maps") {
      std::string tables;
      for (const auto& t : s.tables) tables += (tables.empty() ? "" : "; ") + t;
      std::printf("tables=%s\n", tables.c_str());
      if (s.functional)
        for (const auto& d : flx::devices(argv[1]))
          std::printf("device %s: %s\n", d.device.str().c_str(), d.name.c_str());
      print_vendor_maps(s.plugin_path);
    }
    if (what == "precision") {  // precision_paths of NAME:0, a line each
      const auto paths = flx::precision_paths(flx::get_device(argv[1], 0));
      std::printf("precision_paths=%zu\n", paths.size());
      for (const auto& p : paths)
        std::printf("%s %s: %s (%s)\n", std::string(flx::dtype_name(p.dtype)).c_str(), p.op.c_str(), p.speed.c_str(),
                    p.how.c_str());
    }
    if (what == "memory") {
      flx::Device d = flx::get_device(argv[1], 0);
      auto print = [&](const char* label) {
        auto m = flx::memory_stats(d);
        std::printf("%s in_use=%lld reserved=%lld reserved_peak=%lld\n", label, (long long)m.in_use,
                    (long long)m.reserved, (long long)m.reserved_peak);
      };
      print("before");
      {
        flx::Tensor x = flx::zeros(flx::Float32, {1000}).to(d);
        print("during");
      }
      print("after");
    }
  } catch (const flx::Error& e) {
    std::printf("%s: %s\n", error_type(e), e.what());
  }
  return 0;
}
