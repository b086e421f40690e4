// Replacing a file atomically: a reader (or a crash) sees the old file or the
// new one, never a part. Errors come back as data, so each caller throws its
// own typed error with its own advice.
#pragma once

#include <cstdint>
#include <span>
#include <string>

namespace flx::detail {

// What went wrong: the step ("cannot create a temporary file in /d") and
// errno. No failure when err is 0.
struct WriteFailure {
  std::string step;
  int err = 0;
  bool replaced = false;  // the new file is in place, but not known to be durable
  explicit operator bool() const { return err != 0; }
  std::string text() const;  // "<step>: <strerror(err)>"
};

// Writes bytes to a temporary file beside path (path + ".tmp.XXXXXX"),
// fsyncs it, renames it over path and fsyncs the directory. The new file
// keeps the mode of the one it replaces (0644 if none). On failure the
// temporary file is removed and path is as it was, except when only the
// final fsync of the directory failed (then `replaced` is set).
WriteFailure write_file_atomic(const std::string& path, std::span<const uint8_t> bytes);

// The suffix of write_file_atomic's temporary files before the random part:
// a file named path + temp_suffix + 6 characters, left by a process killed
// while writing, is stale once no writer runs.
inline constexpr const char* temp_suffix = ".tmp.";

}  // namespace flx::detail
