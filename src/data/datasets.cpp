// IDX readers for MNIST and Fashion-MNIST (gzip through zlib's inflate). Every problem
// with a file is a flx::Error naming the path, what is wrong and what to do.
// The files are downloads, so nothing in them is trusted: the header is
// checked against the split before any data is read, and no more than the
// bytes it promises are ever inflated (a gzip bomb stops there).
#include "flx/datasets.hpp"

#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <new>
#include <vector>

#include "../io/files.hpp"
#include "../tensor_impl.hpp"
#include "flx/ops.hpp"

namespace flx::datasets {

namespace {

namespace fs = std::filesystem;

struct Source {
  const char* name;     // directory name: "fashion-mnist"
  const char* title;    // "Fashion-MNIST"
  const char* install;  // what to do when it is missing
};
constexpr Source kFashion{"fashion-mnist", "Fashion-MNIST",
                          "install the Debian package dataset-fashion-mnist (scripts/install-deps.sh does), or put the "
                          "four IDX files in $FLX_DATA/fashion-mnist"};
constexpr Source kMnist{"mnist", "MNIST",
                        "put the four IDX files of MNIST (train-images-idx3-ubyte.gz, ...) in $FLX_DATA/mnist; Debian "
                        "has no package for them"};

// Both datasets: 28×28 images, 60,000 for training and 10,000 for testing.
// A file may hold fewer (a subset), never more.
constexpr uint32_t kSide = 28;
struct Split {
  const char* name;    // "train"
  const char* prefix;  // of the file names: "train", "t10k"
  uint32_t items;
};
constexpr Split kTrain{"train", "train", 60'000}, kTest{"test", "t10k", 10'000};

// A byte b becomes the Float32 pixel float(b) * kPixelScale, as it always
// has (a product with the rounded reciprocal, not a division by 255): the
// loader and scaled_pixels agree bit for bit.
constexpr float kPixelScale = 1.0f / 255.0f;

std::vector<fs::path> search_dirs(const Source& src) {
  std::vector<fs::path> dirs;
  if (const char* d = std::getenv("FLX_DATA"); d && *d) {
    dirs.push_back(fs::path(d) / src.name);
    dirs.push_back(fs::path(d));
  }
  dirs.push_back(fs::path("/usr/share/datasets") / src.name);
  return dirs;
}

// The first of <dir>/<file>.gz and <dir>/<file> that exists, over the dirs.
// Whatever it is: read_idx says so if it is not a regular file.
fs::path find_file(const Source& src, const std::string& file) {
  std::string searched;
  for (const auto& dir : search_dirs(src)) {
    for (const auto& candidate : {dir / (file + ".gz"), dir / file}) {
      std::error_code ec;
      if (fs::exists(candidate, ec)) return candidate;
    }
    searched += "\n  " + (dir / (file + ".gz")).string();
  }
  FLX_THROW(Error, src.title, ": ", file, " not found; searched:", searched, "\nTo fix: ", src.install);
}

uint32_t big_endian(const uint8_t* p) { return uint32_t(p[0]) << 24 | uint32_t(p[1]) << 16 | uint32_t(p[2]) << 8 | p[3]; }

std::string dims_text(const std::vector<uint32_t>& dims) {
  std::string s;
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? "×" : "") + std::to_string(dims[i]);
  return s;
}

// A gzip file (one member or several, as gunzip joins them) or an
// uncompressed one. Inflated here rather than through zlib's gzread, which
// silently skips whatever follows the last gzip member.
class IdxStream {
 public:
  IdxStream(const fs::path& path, const std::string& where, const std::string& install)
      : where_(where), install_(install) {
    io::OpenedFile f = io::open_regular_file(path.string());
    FLX_CHECK(f.fd, Error, where_, ": ", f.err ? "cannot open it: " : "", f.problem,
              f.err ? "; check its permissions, or reinstall it: " : "; reinstall it: ", install_);
    fd_ = std::move(f.fd);
    gzip_ = fill(2) >= 2 && buf_[0] == 0x1f && buf_[1] == 0x8b;
    if (gzip_ && inflateInit2(&z_, 15 + 16) != Z_OK) throw std::bad_alloc();  // 16: gzip wrapper
  }
  ~IdxStream() {
    if (gzip_) inflateEnd(&z_);
  }
  IdxStream(const IdxStream&) = delete;
  IdxStream& operator=(const IdxStream&) = delete;

  // Up to n bytes, fewer only at the end of the data. A corrupt or truncated
  // gzip stream, or bytes after it that are not another member, are errors.
  size_t read(uint8_t* dst, size_t n) {
    size_t done = 0;
    while (done < n) {
      if (!gzip_) {
        if (fill(1) == 0) break;
        const size_t k = std::min(n - done, end_ - pos_);
        std::memcpy(dst + done, buf_.data() + pos_, k);
        pos_ += k, done += k;
        continue;
      }
      if (member_done_) {
        const size_t have = fill(2);
        if (have == 0) break;  // the end of the file
        FLX_CHECK(have >= 2 && buf_[pos_] == 0x1f && buf_[pos_ + 1] == 0x8b, Error, where_,
                  ": trailing data after the end of its gzip stream (bytes that are not another gzip member)",
                  "; the file is damaged; reinstall it: ", install_);
        inflateReset(&z_);
        member_done_ = false;
      }
      if (fill(1) == 0) damaged("the gzip stream ends early");
      z_.next_in = buf_.data() + pos_;
      z_.avail_in = uInt(end_ - pos_);
      z_.next_out = dst + done;
      z_.avail_out = uInt(std::min<size_t>(n - done, 1u << 30));
      const uInt out_before = z_.avail_out;
      const int rc = inflate(&z_, Z_NO_FLUSH);
      done += out_before - z_.avail_out;
      pos_ = end_ - z_.avail_in;
      if (rc == Z_STREAM_END) member_done_ = true;
      else if (rc == Z_MEM_ERROR) throw std::bad_alloc();
      else if (rc != Z_OK && rc != Z_BUF_ERROR) damaged(z_.msg ? z_.msg : "corrupt gzip data");
    }
    return done;
  }

 private:
  io::Fd fd_;
  std::string where_, install_;
  std::vector<uint8_t> buf_ = std::vector<uint8_t>(1 << 17);
  size_t pos_ = 0, end_ = 0;  // the unread input is buf_[pos_, end_)
  bool eof_ = false, gzip_ = false, member_done_ = false;
  z_stream z_{};

  // Buffers at least `want` unread bytes unless the file ends first; returns how many there are.
  size_t fill(size_t want) {
    if (end_ - pos_ >= want || eof_) return end_ - pos_;
    std::memmove(buf_.data(), buf_.data() + pos_, end_ - pos_);
    end_ -= pos_;
    pos_ = 0;
    while (end_ < want && !eof_) {
      const ssize_t r = ::read(fd_.get(), buf_.data() + end_, buf_.size() - end_);
      if (r < 0 && errno == EINTR) continue;
      FLX_CHECK(r >= 0, Error, where_, ": read error: ", std::strerror(errno), "; reinstall it: ", install_);
      if (r == 0) eof_ = true;
      end_ += size_t(r);
    }
    return end_ - pos_;
  }
  [[noreturn]] void damaged(const char* why) {
    FLX_THROW(Error, where_, " is damaged (", why, "); reinstall it: ", install_);
  }
};

// An IDX file opened for reading, with its name for messages and the fix
// they suggest.
struct IdxFile {
  std::string where, fix;
  IdxStream in;
  IdxFile(const fs::path& path, const Source& src)
      : where(std::string(src.title) + ": " + path.string()),
        fix("; the file is damaged or not an IDX file of this kind; reinstall it: " + std::string(src.install)),
        in(path, where, src.install) {}
};

// An IDX file's header, checked against the split; the stream is left at
// the data.
struct IdxHeader {
  std::vector<uint32_t> dims;
  size_t head_size = 0;  // bytes of header
  size_t payload = 0;    // bytes of data the dims promise
};

// Reads the header of an IDX file of unsigned bytes with ndims dims (3:
// images, 1: labels) and checks it against the split before any data is read.
IdxHeader read_header(IdxFile& f, int ndims, const Split& split) {
  const std::string& where = f.where;
  const std::string& fix = f.fix;
  uint8_t head[16];
  const size_t head_size = 4 + 4 * size_t(ndims);
  const size_t got_head = f.in.read(head, head_size);
  FLX_CHECK(got_head == head_size, Error, where, " is too short for an IDX header (", got_head, " bytes, expected ",
            head_size, ")", fix);
  FLX_CHECK(head[0] == 0 && head[1] == 0, Error, where, " does not start with the IDX magic 00 00", fix);
  FLX_CHECK(head[2] == 0x08, Error, where, ": expected unsigned byte data (type 0x08); found type 0x", std::hex,
            int(head[2]), fix);
  FLX_CHECK(head[3] == ndims, Error, where, ": expected ", ndims, " dims; found ", int(head[3]), fix);
  IdxHeader h;
  h.head_size = head_size;
  for (int k = 0; k < ndims; ++k) h.dims.push_back(big_endian(&head[4 + 4 * size_t(k)]));
  FLX_CHECK(h.dims[0] <= split.items, Error, where, ": the header promises ", h.dims[0], " items, but the ",
            split.name, " split has ", split.items, fix);
  FLX_CHECK(ndims == 1 || (h.dims[1] == kSide && h.dims[2] == kSide), Error, where, ": expected images of ", kSide,
            "×", kSide, " pixels; found ", h.dims[1], "×", h.dims[2], fix);
  // At most 60,000 × 28 × 28 bytes after the checks above: no overflow.
  h.payload = size_t(h.dims[0]) * (ndims == 1 ? 1 : kSide * kSide);
  return h;
}

// Reads exactly the bytes the header promises, handing them to
// sink(bytes, count, offset) a chunk at a time (so that no copy of the
// whole file is ever held), then one more byte to find trailing data.
template <class Sink>
void read_payload(IdxFile& f, const IdxHeader& h, Sink&& sink) {
  constexpr size_t kChunk = size_t(1) << 16;
  uint8_t chunk[kChunk];
  size_t done = 0;
  while (done < h.payload) {
    const size_t want = std::min(kChunk, h.payload - done);
    const size_t got = f.in.read(chunk, want);
    FLX_CHECK(got == want, Error, f.where, ": the header's dims ", dims_text(h.dims),
              " promise more data than the file holds: expected ", h.head_size + h.payload, " bytes in all (",
              h.head_size, " of header, ", h.payload, " of data), found ", h.head_size + done + got, f.fix);
    sink(static_cast<const uint8_t*>(chunk), got, done);
    done += got;
  }
  uint8_t extra;
  FLX_CHECK(f.in.read(&extra, 1) == 0, Error, f.where, ": trailing data after the ", h.payload,
            " bytes its header's dims ", dims_text(h.dims), " promise (the file holds more than ",
            h.head_size + h.payload, " bytes)", f.fix);
}

// The images of an IDX file as a (28, 28, 1, N) tensor of `eltype`, read
// straight into it: UInt8 keeps the stored bytes, Float32 scales them as
// scaled_pixels does. IDX images are row-major (row, column), so
// column-major (width, height) needs no permutation: x[c, r] is byte r*w + c.
Tensor read_images(const fs::path& path, DType eltype, const Split& split, const Source& src) {
  IdxFile f(path, src);
  const IdxHeader h = read_header(f, 3, split);
  Tensor x = empty(eltype, {int64_t(h.dims[2]), int64_t(h.dims[1]), 1, int64_t(h.dims[0])});
  if (eltype == DType::UInt8) {
    auto* xp = static_cast<uint8_t*>(detail::host_data(x));
    read_payload(f, h, [&](const uint8_t* b, size_t n, size_t at) { std::memcpy(xp + at, b, n); });
  } else {
    auto* xp = static_cast<float*>(detail::host_data(x));
    read_payload(f, h, [&](const uint8_t* b, size_t n, size_t at) {
      for (size_t i = 0; i < n; ++i) xp[at + i] = float(b[i]) * kPixelScale;
    });
  }
  return x;
}

// The labels of an IDX file (each checked to be 0..9) as an (N) Int64 tensor.
Tensor read_labels(const fs::path& path, const Split& split, const Source& src) {
  IdxFile f(path, src);
  const IdxHeader h = read_header(f, 1, split);
  Tensor y = empty(DType::Int64, {int64_t(h.dims[0])});
  auto* yp = static_cast<int64_t*>(detail::host_data(y));
  read_payload(f, h, [&](const uint8_t* b, size_t n, size_t at) {
    for (size_t i = 0; i < n; ++i) {
      yp[at + i] = b[i];
      FLX_CHECK(b[i] < 10, Error, src.title, ": ", path.string(), " holds label ", int(b[i]), " at index ", at + i,
                "; labels are 0..9. Reinstall it: ", src.install);
    }
  });
  return y;
}

Dataset load(const Source& src, const Split& split, DType eltype) {
  const fs::path ipath = find_file(src, std::string(split.prefix) + "-images-idx3-ubyte");
  const fs::path lpath = find_file(src, std::string(split.prefix) + "-labels-idx1-ubyte");
  Tensor x = read_images(ipath, eltype, split, src);
  Tensor y = read_labels(lpath, split, src);
  FLX_CHECK(x.size(3) == y.size(0), Error, src.title, ": ", ipath.string(), " holds ", x.size(3), " images but ",
            lpath.string(), " holds ", y.size(0), " labels; reinstall them: ", src.install);
  return {x, y};
}

Dataset load(const Source& src, const std::string& split, DType eltype) {
  FLX_CHECK(split == "train" || split == "test", ArgumentError, src.title, ": split must be \"train\" or \"test\"; got \"",
            split, "\"");
  FLX_CHECK(eltype == DType::Float32 || eltype == DType::UInt8, ArgumentError, src.title,
            ": images load as Float32 (in [0, 1]) or UInt8 (the stored bytes 0..255); got ", eltype,
            ". Load UInt8 and convert each batch (datasets::scaled_pixels, then .to(dtype))");
  const Split& s = split == "train" ? kTrain : kTest;
  try {
    return load(src, s, eltype);
  } catch (const std::bad_alloc&) {
    FLX_THROW(OutOfMemory, src.title, ": not enough memory to read the ", split, " split (up to ",
              s.items * (kSide * kSide * dtype_size(eltype) + 8) / 1'000'000, " MB: the ", eltype,
              " images and the Int64 labels); free memory and try again");
  }
}

}  // namespace

Tensor scaled_pixels(const Tensor& pixels) {
  FLX_CHECK(pixels.dtype() == DType::UInt8, ArgumentError, "scaled_pixels: expected UInt8 pixels (0..255), as "
            "datasets::fashion_mnist(split, UInt8) loads them; got ", pixels.dtype());
  return pixels.to(DType::Float32) * kPixelScale;
}

Dataset fashion_mnist(const std::string& split, DType eltype) { return load(kFashion, split, eltype); }
Dataset mnist(const std::string& split, DType eltype) { return load(kMnist, split, eltype); }

}  // namespace flx::datasets
