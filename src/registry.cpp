// The device registry: which backend serves which device. The CPU backend
// is built in; GPU backends come from plugins (see plugin loading).
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

const BackendRt& backend_of(Device d) {
  static const BackendRt cpu{BackendId::CPU, cpu::backend_iface()};
  if (d.is_cpu()) [[likely]]
    return cpu;
  FLX_THROW(BackendUnavailable, "no ", d.backend(), " backend is available in this build of flx, so device ", d.str(),
            " cannot be used; only the CPU backend is built in");
}

}  // namespace flx::detail
