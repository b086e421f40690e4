#include "flx/device.hpp"

#include <algorithm>
#include <cctype>

#include "devices/names.hpp"
#include "flx/error.hpp"

namespace flx {

namespace {
constexpr std::string_view kNames[backend_id_count] = {"CPU", "CUDA", "AMDGPU", "Metal", "OpenCL"};
}

std::string_view backend_name(BackendId id) { return kNames[int(id)]; }

namespace detail {

std::optional<BackendId> known_backend(std::string_view name) {
  auto lower = [](std::string_view s) {
    std::string r(s);
    std::transform(r.begin(), r.end(), r.begin(), [](unsigned char c) { return char(std::tolower(c)); });
    return r;
  };
  for (int i = 0; i < backend_id_count; ++i)
    if (lower(kNames[i]) == lower(name)) return BackendId(i);
  return std::nullopt;
}

std::string backend_names() {
  std::string out;
  for (auto n : kNames) out += (out.empty() ? "" : ", ") + std::string(n);
  return out;
}

}  // namespace detail

BackendId backend_id_from_name(std::string_view name) {
  if (auto id = detail::known_backend(name)) return *id;
  FLX_THROW(ArgumentError, "unknown backend \"", name, "\"; expected one of ", detail::backend_names());
}

// The CPU is "CPU"; a CPU ordinal other than 0 (which no tensor can be on)
// shows its number, so an error about it does not read "CPU and CPU".
std::string Device::str() const {
  if (is_cpu() && ordinal_ == 0) return "CPU";
  return std::string(backend()) + ":" + std::to_string(ordinal_);
}

std::ostream& operator<<(std::ostream& os, const Device& d) { return os << d.str(); }

std::vector<std::string> supported_devices() { return {kNames, kNames + backend_id_count}; }

}  // namespace flx
