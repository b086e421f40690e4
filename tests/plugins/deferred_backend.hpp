// The deferred test backend of tests/plugins/deferred_backend.cpp: the CPU
// backend's tables with every op, copy and free queued until the stream (or
// an event) is synchronized.
#pragma once

#include <cstddef>

#include "flx/backend.h"

// The deferred backend over `cpu` (the CPU backend's core table), named `name`.
const flx_backend* flx_test_deferred_backend(const flx_backend* cpu, const char* name);
// Calls queued and not yet run.
size_t flx_test_deferred_pending();
// Where the bytes of m lie, to read them without a copy that would run the queue.
const void* flx_test_deferred_address(flx_mem m);
