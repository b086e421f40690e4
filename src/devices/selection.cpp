// Device selection (get_device), backend queries, and the targets of gpu()
// and cu().
#include <cstdlib>
#include <mutex>

#include "../tensor_impl.hpp"
#include "flx/devices.hpp"
#include "flx/movement.hpp"
#include "log.hpp"
#include "registry.hpp"

namespace flx {
namespace {

constexpr BackendId kGpuOrder[] = {BackendId::CUDA, BackendId::AMDGPU, BackendId::Metal, BackendId::OpenCL};

flx_device_props props(const detail::Backend& rt, int ordinal) { return rt.device_props(ordinal); }

// The first device of a backend that automatic selection may use: any for
// CUDA/AMDGPU/Metal; for OpenCL only GPUs and accelerators (a CPU OpenCL
// device such as PoCL loses to the built-in CPU backend).
std::optional<int> auto_ordinal(BackendId id, std::string* why) {
  const detail::Backend* rt = detail::find_backend(id);
  if (!rt) {
    if (why) *why = detail::status_of(id).reason;
    return std::nullopt;
  }
  int n = rt->device_count();
  for (int i = 0; i < n; ++i)
    if (id != BackendId::OpenCL || props(*rt, i).kind != FLX_DEVICE_CPU) return i;
  if (why) *why = n ? "only CPU OpenCL devices, which automatic selection skips (ask for \"OpenCL\" by name)" : "no devices";
  return std::nullopt;
}

}  // namespace

Device get_device(const GetDeviceOptions& opts) {
  std::string pref = gpu_backend();
  BackendId pid = backend_id_from_name(pref);
  if (opts.verbose) detail::log_info("Using backend set in preferences: " + pref + ".");
  if (pid == BackendId::CPU) return Device::cpu();
  // A backend named by the preference may use any of its devices.
  if (const detail::Backend* rt = detail::find_backend(pid); rt && rt->device_count() > 0)
    return Device(pid, 0);
  std::string reason = detail::status_of(pid).reason;
  if (reason.empty()) reason = "it has no devices";
  if (opts.force)
    FLX_THROW(BackendUnavailable, "get_device: the preferred backend ", pref, " is not functional: ", reason);
  if (opts.verbose)
    detail::log_warn_box({"Trying to use backend: " + pref + " but it is not functional: " + reason + ".",
                          "Install or fix it and call this function again to respect the preferences backend."});
  for (BackendId id : kGpuOrder) {
    if (id == pid) continue;
    if (auto ord = auto_ordinal(id, nullptr)) {
      if (opts.verbose) detail::log_info("Using backend: " + std::string(backend_name(id)) + ".");
      return Device(id, *ord);
    }
  }
  if (opts.verbose) detail::log_info("Using backend: CPU.");
  return Device::cpu();
}

Device get_device(std::string_view name, int ordinal) {
  Device d(backend_id_from_name(name), ordinal);
  detail::backend_of(d);  // throws with the reason or the devices there are
  return d;
}

Device common_device(const std::vector<Tensor>& ts) {
  if (ts.empty()) return Device::cpu();
  Device d = ts.front().device();
  for (const auto& t : ts)
    FLX_CHECK(t.device() == d, DeviceMismatch, "get_device: the leaves live on different devices (", d, " and ",
              t.device(), "); move them to one device first");
  return d;
}

void load_backend(std::string_view name) {
  BackendId id = backend_id_from_name(name);
  if (id == BackendId::CPU) return;
  if (!detail::find_backend(id))
    FLX_THROW(BackendUnavailable, "load_backend: ", backend_name(id), " is not available: ", detail::status_of(id).reason);
}

bool functional(std::string_view name) { return backend_status(name).functional; }

BackendStatus backend_status(std::string_view name) { return detail::status_of(backend_id_from_name(name)); }

std::vector<DeviceInfo> devices(std::string_view backend) {
  BackendId id = backend_id_from_name(backend);
  const detail::Backend* rt = detail::find_backend(id);
  std::vector<DeviceInfo> out;
  if (!rt) return out;
  int n = rt->device_count();
  for (int i = 0; i < n; ++i) {
    flx_device_props p = props(*rt, i);
    const char* kind = p.kind == FLX_DEVICE_GPU ? "GPU" : p.kind == FLX_DEVICE_ACCELERATOR ? "accelerator" : "CPU";
    out.push_back({Device(id, i), p.name, kind, p.total_memory, p.free_memory});
  }
  return out;
}

namespace detail {

Device gpu_target() {
  // Chosen once per process, as Flux fixes its GPU backend at load time.
  static const Device target = [] {
    Device d = get_device();
    if (d.is_cpu()) {
      const char* silence = std::getenv("FLX_SILENCE_WARN_NO_GPU");
      if (!(silence && std::string(silence) == "1")) {
        std::string pref = gpu_backend();
        std::string why = pref == "CPU" ? "the preference selects the CPU" : status_of(backend_id_from_name(pref)).reason;
        log_warn_box({"flx: gpu() found no functional GPU; data stays on the CPU.",
                      "Preferred backend " + pref + ": " + why + ".",
                      "Set FLX_SILENCE_WARN_NO_GPU=1 to silence this warning."});
      }
    }
    return d;
  }();
  return target;
}

Device cuda_target() {
  const Backend* rt = find_backend(BackendId::CUDA);
  if (!rt || rt->device_count() == 0)
    FLX_THROW(BackendUnavailable, "cu: the CUDA backend is not available: ",
              rt ? std::string("no CUDA devices") : status_of(BackendId::CUDA).reason,
              ". Use gpu() to fall back to the CPU when there is no GPU");
  return Device(BackendId::CUDA, 0);
}

}  // namespace detail
}  // namespace flx
