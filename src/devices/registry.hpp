// Registry internals shared by device selection and tensors. Not installed.
#pragma once

#include "backend/backend.hpp"
#include "flx/devices.hpp"

namespace flx::detail {

const Backend& cpu_rt();
// The backend for id if it is installed and functional, else null (loads
// the plugin on first call).
const Backend* find_backend(BackendId id);
BackendStatus status_of(BackendId id);

void note_alloc(BackendId id, int ordinal, int64_t bytes);
void note_free(BackendId id, int ordinal, int64_t bytes);
// Sets memory_stats(d).peak to what is in use now, so that the peak of the
// work that follows can be read (tests and benchmarks of memory growth).
void reset_memory_peak(const Device& d);

}  // namespace flx::detail
