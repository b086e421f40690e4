// Device: which backend and which of its devices a tensor lives on.
#pragma once

#include "flx/export.hpp"

#include <ostream>
#include <string>
#include <string_view>
#include <vector>

namespace flx {

// Backends flx knows by name, in the order of supported_devices().
enum class BackendId : int { CPU = 0, CUDA = 1, AMDGPU = 2, Metal = 3, OpenCL = 4 };
inline constexpr int backend_id_count = 5;

FLX_API std::string_view backend_name(BackendId id);
// Case-insensitive lookup; throws ArgumentError listing the known names.
FLX_API BackendId backend_id_from_name(std::string_view name);

class FLX_API Device {
 public:
  Device() = default;  // the CPU
  Device(BackendId backend, int ordinal) : backend_(backend), ordinal_(ordinal) {}

  std::string_view backend() const { return backend_name(backend_); }
  BackendId backend_id() const { return backend_; }
  int ordinal() const { return ordinal_; }
  bool is_cpu() const { return backend_ == BackendId::CPU; }
  std::string str() const;  // "CPU", "CUDA:0"

  bool operator==(const Device&) const = default;

  // A device is a function: dev(x) moves a tensor, a whole model or a
  // DataLoader to it, keeping element types (defined in movement.hpp).
  template <class T>
  auto operator()(const T& x) const;

  static Device cpu() { return {}; }

 private:
  BackendId backend_ = BackendId::CPU;
  int ordinal_ = 0;
};

FLX_API std::ostream& operator<<(std::ostream& os, const Device& d);

// CPU, CUDA, AMDGPU, Metal, OpenCL: every backend name flx accepts.
FLX_API std::vector<std::string> supported_devices();

}  // namespace flx
