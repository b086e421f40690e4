// Replacing a file atomically: a reader (or a crash) sees the old file or the
// new one, never a part. One implementation for every writer of libflx
// (checkpoints, preferences). Errors come back as data, so each caller throws
// its own typed error with its own advice.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

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

// Writes bytes to a temporary file in path's directory, fsyncs it, renames
// it over path and fsyncs the directory. The new file keeps the mode of the
// one it replaces. Works relative to the directory with a short temporary
// name (temp_name_for), so any legal file name works. On failure the
// temporary file is removed and path is as it was, except when only the
// final fsync of the directory failed (then `replaced` is set).
WriteFailure write_file_atomic(const std::string& path, std::span<const uint8_t> bytes);

// Whether a file name (no directory) is one of write_file_atomic's temporary
// names for the file named `base`: ".<base, cut to 32 bytes>.<16 hex
// digits>.tmp". One left behind by a killed process is stale once no writer
// runs.
bool is_temp_name_for(std::string_view name, std::string_view base);

}  // namespace flx::detail
