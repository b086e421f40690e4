// For the tests of a vendor library the CUDA plugin opens on first use
// (test_cuda_blas_libs.cpp, test_cuda_nccl_lib.cpp), linked with the
// plugin's loader alone: the plugin's fail() replaced by one that keeps the
// message, and whether a library is mapped into the process. Include it in
// one file per executable.
#pragma once

#include <fstream>
#include <string>

namespace flx_cuda {
std::string g_last_error;
int fail(int status, const std::string& msg) {
  g_last_error = msg;
  return status;
}
}  // namespace flx_cuda

namespace flx_cuda_test {

// Whether a library whose file name starts with `name` is mapped.
inline bool mapped(const std::string& name) {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line))
    if (line.find("/" + name) != std::string::npos) return true;
  return false;
}

}  // namespace flx_cuda_test
