// The built-in CPU backend, registered by the device registry at start-up.
#pragma once

#include "flx/backend.h"

namespace flx::cpu_backend {
const flx_backend_iface* backend_iface();
}
