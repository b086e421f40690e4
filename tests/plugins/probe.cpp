// Prints what flx knows of one backend, for tests that must run in a fresh
// process (the registry loads each plugin once per process).
//   probe_backend NAME [gpu|cu|get_device|force|set]
// set: gpu_backend(NAME), writing the preference. A flx::Error is printed
// as "<Type>: <message>".
#include <flx/flx.hpp>

#include <cstdio>
#include <string>

namespace {
const char* error_type(const flx::Error& e) {
  if (dynamic_cast<const flx::BackendUnavailable*>(&e)) return "BackendUnavailable";
  if (dynamic_cast<const flx::ArgumentError*>(&e)) return "ArgumentError";
  return "Error";
}
}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  auto s = flx::backend_status(argv[1]);
  std::printf("found=%d functional=%d path=%s\nreason=%s\n", s.plugin_found, s.functional, s.plugin_path.c_str(),
              s.reason.c_str());
  std::string what = argc > 2 ? argv[2] : "";
  try {
    if (what == "gpu") {
      flx::Tensor moved = flx::rand(flx::Float64, 2) | flx::gpu;
      std::printf("gpu -> %s %s\n", flx::get_device(moved).str().c_str(), std::string(flx::dtype_name(moved.dtype())).c_str());
    }
    if (what == "cu") (void)(flx::rand(2) | flx::cu);
    if (what == "get_device") std::printf("device %s\n", flx::get_device({.verbose = true}).str().c_str());
    if (what == "force") (void)flx::get_device({.force = true});
    if (what == "set") flx::gpu_backend(argv[1]);
  } catch (const flx::Error& e) {
    std::printf("%s: %s\n", error_type(e), e.what());
  }
  return 0;
}
