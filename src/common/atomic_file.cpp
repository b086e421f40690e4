#include "atomic_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace flx::detail {

std::string WriteFailure::text() const { return step + ": " + std::strerror(err); }

WriteFailure write_file_atomic(const std::string& path, std::span<const uint8_t> bytes) {
  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
  std::string tmp = path + temp_suffix + "XXXXXX";
  int fd = ::mkstemp(tmp.data());
  if (fd < 0) return {"cannot create a temporary file in " + dir, errno};
  // From here on a failure removes the temporary file.
  auto abandon = [&](const std::string& step, int err) {
    if (fd >= 0) ::close(fd);
    ::unlink(tmp.c_str());
    return WriteFailure{step, err};
  };
  // mkstemp creates 0600: keep the mode of the file being replaced.
  struct stat old {};
  mode_t mode = (::stat(path.c_str(), &old) == 0 && S_ISREG(old.st_mode)) ? (old.st_mode & 07777) : 0644;
  if (::fchmod(fd, mode) != 0) return abandon("cannot set the permissions of " + tmp, errno);
  for (size_t done = 0; done < bytes.size();) {
    ssize_t w = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) return abandon("cannot write " + tmp, errno);
    done += size_t(w);
  }
  if (::fsync(fd) != 0) return abandon("cannot fsync " + tmp, errno);
  int rc = ::close(fd);
  fd = -1;
  if (rc != 0) return abandon("cannot close " + tmp, errno);
  if (::rename(tmp.c_str(), path.c_str()) != 0)
    return abandon("cannot rename " + tmp + " to " + path, errno);
  // The rename is durable only once the directory entry is on disk. Some
  // file systems cannot fsync a directory; that is no failure to write.
  int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) return {"written, but cannot open " + dir + " to fsync it", errno, true};
  rc = ::fsync(dfd);
  int err = errno;
  ::close(dfd);
  if (rc != 0 && err != EINVAL && err != ENOTSUP) return {"written, but the fsync of " + dir + " failed", err, true};
  return {};
}

}  // namespace flx::detail
