// Host buffers whose size comes from user input (class counts, file
// headers, tensor sizes): an allocation that fails is a typed
// flx::OutOfMemory naming what it was for, never a std::bad_alloc, and so
// is one larger than the process could ever fill (backend_common/host_memory.hpp).
#pragma once

#include <new>
#include <stdexcept>
#include <vector>

#include "backend_common/host_memory.hpp"
#include "flx/error.hpp"

namespace flx::detail {

template <class T>
std::vector<T> host_vector(size_t n, const char* what) {
  try {
    if (n <= flx::backend_common::host_memory_limit() / sizeof(T)) return std::vector<T>(n);
  } catch (const std::bad_alloc&) {
  } catch (const std::length_error&) {
  }
  FLX_THROW(OutOfMemory, what, ": cannot allocate ", n, " elements of ", sizeof(T),
            " bytes in host memory; use smaller sizes");
}

}  // namespace flx::detail
