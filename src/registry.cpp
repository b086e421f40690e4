// The device registry: which backend serves which device. The CPU backend
// is built in; GPU backends come from plugins (see plugin loading).
#include <array>
#include <memory>
#include <mutex>
#include <string>

#include "cpu/cpu_backend.hpp"
#include "tensor_impl.hpp"

namespace flx::detail {

namespace {
const char* status_name(int s) {
  switch (s) {
    case FLX_ERR_OUT_OF_MEMORY: return "out of memory";
    case FLX_ERR_INVALID_ARGUMENT: return "invalid argument";
    case FLX_ERR_UNSUPPORTED: return "unsupported";
    case FLX_ERR_DEVICE: return "device error";
  }
  return "error";
}
}  // namespace

void BackendRt::fail(int status, const char* what) const {
  const char* msg = f->last_error ? f->last_error(f->ctx) : "";
  FLX_THROW(BackendError, f->name, " backend: ", what, " failed (", status_name(status), "): ", msg);
}

namespace {
// Backends by id; the CPU is built in, the others arrive by registration
// (plugins, or tests that present a backend as a second device).
std::array<std::unique_ptr<BackendRt>, backend_id_count>& table() {
  static std::array<std::unique_ptr<BackendRt>, backend_id_count> t;
  return t;
}
std::mutex& table_mutex() {
  static std::mutex m;
  return m;
}
}  // namespace

void register_backend(BackendId id, const flx_backend_iface* iface) {
  FLX_CHECK(id != BackendId::CPU, ArgumentError, "register_backend: the CPU backend is built in");
  FLX_CHECK(iface && iface->api_version == FLX_BACKEND_API_VERSION, BackendUnavailable, "register_backend: ",
            backend_name(id), " backend has ABI version ", iface ? iface->api_version : 0, ", expected ",
            FLX_BACKEND_API_VERSION);
  std::lock_guard lock(table_mutex());
  FLX_CHECK(!table()[size_t(id)], ArgumentError, "register_backend: a ", backend_name(id),
            " backend is already registered");
  table()[size_t(id)] = std::make_unique<BackendRt>(BackendRt{id, iface});
}

const BackendRt& backend_of(Device d) {
  static const BackendRt cpu{BackendId::CPU, cpu_backend::backend_iface()};
  if (d.is_cpu()) [[likely]]
    return cpu;
  const BackendRt* rt;
  {
    std::lock_guard lock(table_mutex());
    rt = table()[size_t(d.backend_id())].get();
  }
  FLX_CHECK(rt, BackendUnavailable, "no ", d.backend(), " backend is available in this installation of flx, so device ",
            d.str(), " cannot be used");
  int n = rt->f->device_count(rt->f->ctx);
  FLX_CHECK(d.ordinal() >= 0 && d.ordinal() < n, BackendUnavailable, d.backend(), " has ", n,
            " device(s) (ordinals 0 to ", n - 1, "); there is no device ", d.str());
  return *rt;
}

}  // namespace flx::detail
