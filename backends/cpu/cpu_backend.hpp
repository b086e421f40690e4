// The built-in CPU backend: its core table, served to the registry at
// start-up like a plugin's.
#pragma once

#include "flx/backend.h"

namespace flx::cpu_backend {
const flx_backend* core();
}
