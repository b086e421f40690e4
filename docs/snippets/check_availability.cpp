#include <flx/flx.hpp>

#include <iostream>

int main() {
  std::cout << std::boolalpha;
  std::cout << "CPU functional: " << flx::functional("CPU") << "\n";
  std::cout << "AMDGPU functional: " << flx::functional("AMDGPU") << "\n";
  std::cout << "why not: " << flx::backend_status("AMDGPU").reason << "\n";
  for (const auto& name : flx::supported_devices()) std::cout << name << " ";
  std::cout << "\n";
}
