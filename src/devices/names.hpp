// Backend names without throwing (device.cpp), for callers that report an
// unknown name with their own context (where the name came from).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "flx/device.hpp"

namespace flx::detail {

// The backend called `name` (any case), or nullopt.
std::optional<BackendId> known_backend(std::string_view name);
// "CPU, CUDA, AMDGPU, Metal, OpenCL"
std::string backend_names();

}  // namespace flx::detail
