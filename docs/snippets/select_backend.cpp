#include <flx/flx.hpp>

#include <iostream>

int main() {
  std::cout << "in force: " << flx::gpu_backend() << " (from " << flx::gpu_backend_source() << ")\n";
  flx::gpu_backend("CPU");  // writes LocalPreferences.toml; new processes use it
  std::cout << "still in force here: " << flx::gpu_backend() << "\n";
}
