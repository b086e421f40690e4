// Host-only: the reason text of functional() and the CUDA_VISIBLE_DEVICES
// parser (see cuda_reason.hpp). No CUDA header, so tests compile it alone.
#include "cuda_reason.hpp"

#include <cctype>
#include <string>

namespace flx_cuda {

std::string cuda_version_string(int v) { return std::to_string(v / 1000) + "." + std::to_string(v % 1000 / 10); }

std::optional<std::vector<int>> parse_visible_devices(const char* value) {
  if (!value) return std::nullopt;
  std::vector<int> out;
  std::string s(value);
  size_t pos = 0;
  while (pos <= s.size()) {
    size_t comma = s.find(',', pos);
    std::string tok = s.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    // trim spaces, as the runtime does
    while (!tok.empty() && std::isspace(static_cast<unsigned char>(tok.front()))) tok.erase(tok.begin());
    while (!tok.empty() && std::isspace(static_cast<unsigned char>(tok.back()))) tok.pop_back();
    if (tok.rfind("GPU-", 0) == 0 || tok.rfind("MIG-", 0) == 0) {
      out.push_back(-1);
    } else {
      // The runtime stops at the first entry that is not a non-negative
      // index: "0,-1,1" selects device 0 only, "-1" selects none.
      if (tok.empty()) break;
      size_t i = 0;
      while (i < tok.size() && std::isdigit(static_cast<unsigned char>(tok[i]))) ++i;
      if (i == 0 || i != tok.size() || i > 9) break;
      out.push_back(std::stoi(tok));
    }
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return out;
}

std::string unusable_reason(const ProbeResult& p) {
  if (p.error == 0 && p.device_count > 0) return {};
  // A driver older than the runtime fails with cudaErrorInsufficientDriver
  // too; the versions say which of the two it is.
  if (p.driver_version > 0 && p.runtime_version > 0 && p.driver_version < p.runtime_version)
    return "the driver (CUDA " + cuda_version_string(p.driver_version) + ") is older than the runtime (CUDA " +
           cuda_version_string(p.runtime_version) + "); update the driver";
  if (p.error == kErrInsufficientDriver || (p.error != 0 && p.error != kErrNoDevice && p.driver_version == 0))
    return "no NVIDIA driver (cudaGetDeviceCount: " + p.error_string + ")";
  auto visible = parse_visible_devices(p.visible);
  if (visible && visible->empty())
    return "CUDA_VISIBLE_DEVICES=" + std::string(p.visible) + " hides every GPU";
  if (p.error == 0 || p.error == kErrNoDevice) return "no CUDA device";
  return "the CUDA runtime cannot be used (cudaGetDeviceCount: " + p.error_string + ")";
}

}  // namespace flx_cuda
