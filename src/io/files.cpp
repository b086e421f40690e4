// Files on disk: non-blocking opening of regular files; atomic replacement
// (util/atomic_file.hpp) with a CheckpointError.
#include "files.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "../util/atomic_file.hpp"
#include "flx/error.hpp"

namespace flx::io {

Fd& Fd::operator=(Fd&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = o.release();
  }
  return *this;
}

Fd::~Fd() {
  if (fd_ >= 0) ::close(fd_);
}

const char* file_kind(mode_t mode) {
  if (S_ISREG(mode)) return "a regular file";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a named pipe (FIFO)";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

OpenedFile open_regular_file(const std::string& path) {
  OpenedFile f;
  auto failed = [&](int err) {
    f.fd = Fd();
    f.err = err;
    f.problem = std::strerror(err);
    return std::move(f);
  };
  auto not_regular = [&](mode_t mode) {
    f.fd = Fd();
    f.problem = std::string("is ") + file_kind(mode) + ", not a regular file";
    return std::move(f);
  };
  // stat first, so that a device is refused without being opened (opening
  // some has side effects); fstat after, in case the path changed in between.
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return failed(errno);
  if (!S_ISREG(st.st_mode)) return not_regular(st.st_mode);
  f.fd = Fd(::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY));
  if (!f.fd) return failed(errno);
  if (::fstat(f.fd.get(), &st) != 0) return failed(errno);
  if (!S_ISREG(st.st_mode)) return not_regular(st.st_mode);
  // Reads of a regular file ignore O_NONBLOCK; clear it all the same, so that
  // the descriptor behaves as a plain open() would have made it.
  if (int fl = ::fcntl(f.fd.get(), F_GETFL); fl < 0 || ::fcntl(f.fd.get(), F_SETFL, fl & ~O_NONBLOCK) != 0)
    return failed(errno);
  f.size = uint64_t(st.st_size);
  return f;
}

void write_atomic(const std::string& path, std::span<const uint8_t> bytes) {
  FLX_CHECK(!path.empty(), CheckpointError, "<empty path>: cannot write a checkpoint to an empty path");
  detail::WriteFailure f = detail::write_file_atomic(path, bytes);
  if (!f) return;
  std::string advice = f.err == EACCES || f.err == EROFS || f.err == EPERM ? "; check that the directory is writable"
                       : f.err == ENOSPC || f.err == EDQUOT || f.err == EFBIG ? "; free some disk space"
                                                                               : "";
  FLX_THROW(CheckpointError, path, ": ", f.text(), f.err == EISDIR ? " (the path is a directory)" : "", advice,
            f.replaced ? "; the new file is in place but may not survive a crash"
                       : "; the previous file at this path (if any) is unchanged");
}

}  // namespace flx::io
