// Files on disk: non-blocking opening of regular files, atomic replacement.
#include "files.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <random>
#include <string_view>

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

namespace {

template <class... Parts>
[[noreturn]] void fail(const std::string& path, const Parts&... parts) {
  FLX_THROW(CheckpointError, path, ": ", parts...);
}

constexpr const char* unchanged = "; the previous file at this path (if any) is unchanged";

// A hidden name in the same directory, at most 1 + 32 + 1 + 16 + 4 bytes
// whatever the length of the final name (which may be NAME_MAX already):
// ".<start of the name>.<random hex>.tmp". The start is cut at a UTF-8
// character boundary, so that the name stays readable in a listing.
std::string temp_name(std::string_view base) {
  size_t keep = std::min<size_t>(base.size(), 32);
  while (keep > 0 && keep < base.size() && (static_cast<unsigned char>(base[keep]) & 0xc0) == 0x80) --keep;
  static std::atomic<uint64_t> counter{0};
  thread_local std::mt19937_64 rng{(uint64_t(std::random_device{}()) << 32) ^ uint64_t(::getpid())};
  const uint64_t r = rng() ^ counter.fetch_add(1, std::memory_order_relaxed);
  static const char* hex = "0123456789abcdef";
  std::string name = ".";
  name.append(base.substr(0, keep));
  name += '.';
  for (int i = 60; i >= 0; i -= 4) name += hex[(r >> i) & 15];
  return name + ".tmp";
}

// The temporary file: removed on destruction unless it was renamed into place.
struct TempFile {
  int dir;
  std::string name;
  Fd fd;
  bool renamed = false;
  ~TempFile() {
    fd = Fd();
    if (!renamed) ::unlinkat(dir, name.c_str(), 0);
  }
};

}  // namespace

void write_atomic(const std::string& path, std::span<const uint8_t> bytes) {
  FLX_CHECK(!path.empty(), CheckpointError, "<empty path>: cannot write a checkpoint to an empty path");
  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
  const std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
  if (base.empty() || base == "." || base == "..")
    fail(path, "names a directory, not a file; add a file name such as model.safetensors");

  // Everything below works relative to the directory, so the temporary
  // file's path is never longer than the one the caller gave.
  Fd dirfd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (!dirfd) {
    int err = errno;
    fail(path, "cannot open the directory \"", dir, "\" to write the checkpoint in: ", std::strerror(err),
         "; check that the directory exists and is writable");
  }
  // O_EXCL: a fresh file, never one that someone else made; retry the rare clash.
  TempFile tmp{dirfd.get(), "", Fd()};
  for (int attempt = 0; attempt < 100 && !tmp.fd; ++attempt) {
    tmp.name = temp_name(base);
    tmp.fd = Fd(::openat(dirfd.get(), tmp.name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666));
    if (!tmp.fd && errno != EEXIST) {
      int err = errno;
      tmp.renamed = true;  // nothing was created: nothing to remove
      fail(path, "cannot create a temporary file in \"", dir, "\" to write the checkpoint: ", std::strerror(err),
           "; check that the directory is writable", unchanged);
    }
  }
  if (!tmp.fd) {
    tmp.renamed = true;
    fail(path, "cannot create a temporary file in \"", dir, "\": 100 names taken in a row", unchanged);
  }
  // A new file gets the umask's mode; one that replaces a file keeps its mode.
  struct stat old {};
  if (::fstatat(dirfd.get(), base.c_str(), &old, 0) == 0 && S_ISREG(old.st_mode) &&
      ::fchmod(tmp.fd.get(), old.st_mode & 07777) != 0)
    fail(path, "cannot give the temporary file the permissions of the file it replaces: ", std::strerror(errno),
         unchanged);

  size_t done = 0;
  while (done < bytes.size()) {
    ssize_t w = ::write(tmp.fd.get(), bytes.data() + done, bytes.size() - done);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) fail(path, "write error: ", std::strerror(errno), unchanged);
    done += size_t(w);
  }
  if (::fsync(tmp.fd.get()) != 0) fail(path, "fsync failed: ", std::strerror(errno), unchanged);
  if (::close(tmp.fd.release()) != 0) fail(path, "close failed: ", std::strerror(errno), unchanged);
  if (::renameat(dirfd.get(), tmp.name.c_str(), dirfd.get(), base.c_str()) != 0) {
    int err = errno;
    fail(path, "cannot rename the temporary file over the checkpoint: ", std::strerror(err),
         err == EISDIR ? " (the path is a directory)" : "", unchanged);
  }
  tmp.renamed = true;
  // The rename is durable only once the directory entry is on disk. Some file
  // systems do not support fsync on directories; that is not a failure to write.
  if (::fsync(dirfd.get()) != 0 && errno != EINVAL && errno != ENOTSUP)
    fail(path, "written, but fsync of its directory failed: ", std::strerror(errno));
}

}  // namespace flx::io
