// Errors: every failure in flx is a typed exception derived from flx::Error.
// Messages say what was expected, what was found and what to do; the throw
// site's source location is appended by FLX_THROW / FLX_CHECK.
#pragma once

#include "flx/export.hpp"

#include <source_location>
#include <sstream>
#include <stdexcept>
#include <string>

namespace flx {

class FLX_API Error : public std::runtime_error {
 public:
  explicit Error(const std::string& msg) : std::runtime_error(msg) {}
};

// Shapes that do not fit an operation (broadcasting, matmul, reshape, ...).
class FLX_API DimensionMismatch : public Error {
 public:
  using Error::Error;
};
// Operands of one operation live on different devices.
class FLX_API DeviceMismatch : public Error {
 public:
  using Error::Error;
};
// A backend that is not installed, not functional, or has no such device.
class FLX_API BackendUnavailable : public Error {
 public:
  using Error::Error;
};
// A backend call failed at run time (driver error, out of memory, ...).
class FLX_API BackendError : public Error {
 public:
  using Error::Error;
};
// Memory for a tensor or a host buffer could not be allocated (the device's
// or the host's); a BackendError, so existing handlers still catch it.
class FLX_API OutOfMemory : public BackendError {
 public:
  using BackendError::BackendError;
};
// The backend serving a device lacks the table or function an operation
// needs (a plugin built against an older ABI minor version, or one that
// does not implement that family of ops yet).
class FLX_API NotImplemented : public BackendError {
 public:
  using BackendError::BackendError;
};
// An element type that an operation does not accept.
class FLX_API TypeError : public Error {
 public:
  using Error::Error;
};
// Any other bad argument (negative sizes, bad dims, empty input, ...).
class FLX_API ArgumentError : public Error {
 public:
  using Error::Error;
};
// A checkpoint file that cannot be read or does not fit the model.
class FLX_API CheckpointError : public Error {
 public:
  using Error::Error;
};
// A file or directory that cannot be made, written or read (a log
// directory, an event file, ...); checkpoints raise CheckpointError.
class FLX_API IOError : public Error {
 public:
  using Error::Error;
};

namespace detail {

template <class... Parts>
std::string concat(const Parts&... parts) {
  std::ostringstream os;
  (os << ... << parts);
  return os.str();
}

template <class E>
[[noreturn]] void throw_at(const std::string& msg, const std::source_location& loc) {
  std::string file = loc.file_name();
  if (auto pos = file.rfind("/src/"); pos != std::string::npos) file = file.substr(pos + 1);
  else if (auto pos2 = file.rfind("/include/"); pos2 != std::string::npos) file = file.substr(pos2 + 1);
  throw E(msg + " [" + file + ":" + std::to_string(loc.line()) + "]");
}

}  // namespace detail
}  // namespace flx

// FLX_THROW(Type, parts...): throw Type with the concatenated message.
#define FLX_THROW(Type, ...) \
  ::flx::detail::throw_at<Type>(::flx::detail::concat(__VA_ARGS__), std::source_location::current())
// FLX_CHECK(cond, Type, parts...): the one check macro.
#define FLX_CHECK(cond, Type, ...)    \
  do {                                \
    if (!(cond)) [[unlikely]] {       \
      FLX_THROW(Type, __VA_ARGS__);   \
    }                                 \
  } while (0)
