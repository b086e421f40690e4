// Files on disk for the readers and writers of libflx (checkpoints, IDX
// datasets): opening for reading without ever blocking on something that is
// not a regular file, and atomic replacement. Internal.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <span>
#include <string>

namespace flx::io {

// An owned file descriptor, closed on destruction.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& o) noexcept : fd_(o.release()) {}
  Fd& operator=(Fd&& o) noexcept;
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd();
  int get() const { return fd_; }
  int release() {
    int fd = fd_;
    fd_ = -1;
    return fd;
  }
  explicit operator bool() const { return fd_ >= 0; }

 private:
  int fd_ = -1;
};

// What kind of file a st_mode is, for messages: "a directory", "a named pipe (FIFO)", ...
const char* file_kind(mode_t mode);

// A file opened for reading, or why not.
struct OpenedFile {
  Fd fd;                // open on success
  uint64_t size = 0;    // its size in bytes
  int err = 0;          // errno when open() or fstat() failed
  std::string problem;  // on failure: the errno text, or "is a named pipe (FIFO), not a regular file"
};

// Opens path read-only and refuses anything but a regular file (after
// following symbolic links). The type is checked on the open descriptor,
// opened with O_NONBLOCK: a plain open() of a named pipe waits for a writer,
// for ever if none comes.
OpenedFile open_regular_file(const std::string& path);

// Replaces the file at path with bytes atomically (detail::write_file_atomic:
// a short hidden temporary name in the same directory, fsync, rename, fsync
// of the directory). On failure the temporary file is removed, the old file
// at path is untouched, and a CheckpointError names the path, the step and
// the errno text.
void write_atomic(const std::string& path, std::span<const uint8_t> bytes);

}  // namespace flx::io
