#include "atomic_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <random>

namespace flx::detail {
namespace {

constexpr size_t kKeep = 32;  // bytes of the final name kept in the temporary one

// The start of a name cut to at most kKeep bytes, at a UTF-8 character
// boundary, so that the temporary name stays readable in a listing.
std::string_view name_start(std::string_view base) {
  size_t keep = std::min(base.size(), kKeep);
  while (keep > 0 && keep < base.size() && (static_cast<unsigned char>(base[keep]) & 0xc0) == 0x80) --keep;
  return base.substr(0, keep);
}

// ".<start of the name>.<16 hex digits>.tmp": at most 1 + 32 + 1 + 16 + 4
// bytes, whatever the length of the final name (NAME_MAX already, maybe).
std::string temp_name(std::string_view base) {
  static std::atomic<uint64_t> counter{0};
  thread_local std::mt19937_64 rng{(uint64_t(std::random_device{}()) << 32) ^ uint64_t(::getpid())};
  const uint64_t r = rng() ^ counter.fetch_add(1, std::memory_order_relaxed);
  static const char* hex = "0123456789abcdef";
  std::string name = ".";
  name.append(name_start(base));
  name += '.';
  for (int i = 60; i >= 0; i -= 4) name += hex[(r >> i) & 15];
  return name + ".tmp";
}

struct Fd {
  int fd = -1;
  explicit Fd(int f) : fd(f) {}
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
};

}  // namespace

std::string WriteFailure::text() const { return step + ": " + std::strerror(err); }

bool is_temp_name_for(std::string_view name, std::string_view base) {
  std::string_view start = name_start(base);
  if (name.size() != 1 + start.size() + 1 + 16 + 4 || name[0] != '.' || name.substr(1, start.size()) != start ||
      name[1 + start.size()] != '.' || !name.ends_with(".tmp"))
    return false;
  for (char c : name.substr(2 + start.size(), 16))
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

WriteFailure write_file_atomic(const std::string& path, std::span<const uint8_t> bytes) {
  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
  const std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
  if (base.empty() || base == "." || base == "..") return {"names a directory, not a file; add a file name", EISDIR};
  // Everything below works relative to the directory, so the temporary
  // file's path is never longer than the one the caller gave.
  Fd dirfd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dirfd.fd < 0) return {"cannot open the directory " + dir, errno};
  // O_EXCL: a fresh file, never one that someone else made; retry the rare clash.
  std::string tmp;
  int fd = -1;
  for (int attempt = 0; attempt < 100 && fd < 0; ++attempt) {
    tmp = temp_name(base);
    fd = ::openat(dirfd.fd, tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0 && errno != EEXIST) return {"cannot create a temporary file in " + dir, errno};
  }
  if (fd < 0) return {"cannot create a temporary file in " + dir + " (100 names taken in a row)", EEXIST};
  // From here on a failure removes the temporary file.
  auto abandon = [&](const std::string& step, int err) {
    if (fd >= 0) ::close(fd);
    ::unlinkat(dirfd.fd, tmp.c_str(), 0);
    return WriteFailure{step, err};
  };
  // A new file gets the umask's mode; one that replaces a file keeps its mode.
  struct stat old {};
  if (::fstatat(dirfd.fd, base.c_str(), &old, 0) == 0 && S_ISREG(old.st_mode) && ::fchmod(fd, old.st_mode & 07777) != 0)
    return abandon("cannot give the temporary file the permissions of the file it replaces", errno);
  for (size_t done = 0; done < bytes.size();) {
    ssize_t w = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) return abandon("cannot write the temporary file " + dir + "/" + tmp, errno);
    done += size_t(w);
  }
  if (::fsync(fd) != 0) return abandon("cannot fsync the temporary file " + dir + "/" + tmp, errno);
  int rc = ::close(fd);
  fd = -1;
  if (rc != 0) return abandon("cannot close the temporary file " + dir + "/" + tmp, errno);
  if (::renameat(dirfd.fd, tmp.c_str(), dirfd.fd, base.c_str()) != 0)
    return abandon("cannot rename the temporary file " + dir + "/" + tmp + " over it", errno);
  // The rename is durable only once the directory entry is on disk. Some
  // file systems cannot fsync a directory; that is no failure to write.
  if (::fsync(dirfd.fd) != 0 && errno != EINVAL && errno != ENOTSUP)
    return {"written, but the fsync of its directory " + dir + " failed", errno, true};
  return {};
}

}  // namespace flx::detail
