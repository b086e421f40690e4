// IDX readers for MNIST and Fashion-MNIST (gzip through zlib). Every problem
// with a file is a flx::Error naming the path, what is wrong and what to do.
#include "flx/datasets.hpp"

#include <zlib.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <vector>

#include "../tensor_impl.hpp"

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
fs::path find_file(const Source& src, const std::string& file) {
  std::string searched;
  for (const auto& dir : search_dirs(src)) {
    for (const auto& candidate : {dir / (file + ".gz"), dir / file}) {
      std::error_code ec;
      if (fs::is_regular_file(candidate, ec)) return candidate;
    }
    searched += "\n  " + (dir / (file + ".gz")).string();
  }
  FLX_THROW(Error, src.title, ": ", file, " not found; searched:", searched, "\nTo fix: ", src.install);
}

// The whole (decompressed) file. gzread reads uncompressed files as they are.
std::vector<uint8_t> read_all(const fs::path& path, const Source& src) {
  gzFile f = gzopen(path.c_str(), "rb");
  FLX_CHECK(f, Error, src.title, ": cannot open ", path.string(), ": ", std::strerror(errno));
  std::vector<uint8_t> out;
  uint8_t buf[1 << 16];
  int n;
  while ((n = gzread(f, buf, sizeof buf)) > 0) out.insert(out.end(), buf, buf + n);
  int err = 0;
  std::string msg = n < 0 ? gzerror(f, &err) : "the gzip stream ends early";
  // gzclose reports Z_BUF_ERROR when the data ended inside a gzip stream.
  const bool cut_short = gzclose(f) == Z_BUF_ERROR;
  FLX_CHECK(n == 0 && !cut_short, Error, src.title, ": ", path.string(), " is damaged (", msg, "); reinstall it: ", src.install);
  return out;
}

uint32_t big_endian(const uint8_t* p) { return uint32_t(p[0]) << 24 | uint32_t(p[1]) << 16 | uint32_t(p[2]) << 8 | p[3]; }

// An IDX file of unsigned bytes with `ndims` dims: its dims and where the data starts.
std::vector<int64_t> idx_dims(const std::vector<uint8_t>& b, int ndims, const fs::path& path, const Source& src) {
  const std::string where = std::string(src.title) + ": " + path.string();
  const std::string fix = "; the file is not an IDX file of this kind; reinstall it: " + std::string(src.install);
  FLX_CHECK(b.size() >= 4 + 4 * size_t(ndims), Error, where, " is too short for an IDX header (", b.size(), " bytes)",
            fix);
  FLX_CHECK(b[0] == 0 && b[1] == 0, Error, where, " does not start with the IDX magic 00 00", fix);
  FLX_CHECK(b[2] == 0x08, Error, where, ": expected unsigned byte data (type 0x08); found type 0x", std::hex, int(b[2]),
            fix);
  FLX_CHECK(b[3] == ndims, Error, where, ": expected ", ndims, " dims; found ", int(b[3]), fix);
  std::vector<int64_t> dims;
  uint64_t total = 1;
  for (int k = 0; k < ndims; ++k) {
    dims.push_back(big_endian(&b[4 + 4 * size_t(k)]));
    total *= uint64_t(dims.back());  // no overflow: total ≤ file size < 2^32 before each step
    FLX_CHECK(total <= b.size(), Error, where, ": the header's dims promise more data than the file holds", fix);
  }
  const size_t expected = 4 + 4 * size_t(ndims) + size_t(total);
  FLX_CHECK(b.size() == expected, Error, where, ": expected ", expected, " bytes for dims", [&] {
    std::string s;
    for (auto d : dims) s += " " + std::to_string(d);
    return s;
  }(), "; found ", b.size(), fix);
  return dims;
}

Dataset load(const Source& src, const std::string& split) {
  FLX_CHECK(split == "train" || split == "test", ArgumentError, src.title, ": split must be \"train\" or \"test\"; got \"",
            split, "\"");
  const std::string prefix = split == "train" ? "train" : "t10k";
  const fs::path ipath = find_file(src, prefix + "-images-idx3-ubyte");
  const fs::path lpath = find_file(src, prefix + "-labels-idx1-ubyte");
  const auto images = read_all(ipath, src);
  const auto labels = read_all(lpath, src);
  const auto idims = idx_dims(images, 3, ipath, src);
  const auto ldims = idx_dims(labels, 1, lpath, src);
  FLX_CHECK(idims[0] == ldims[0], Error, src.title, ": ", ipath.string(), " holds ", idims[0], " images but ",
            lpath.string(), " holds ", ldims[0], " labels; reinstall them: ", src.install);
  const int64_t n = idims[0], h = idims[1], w = idims[2];
  // IDX images are row-major (row, column), so column-major (width, height)
  // needs no permutation: x[c, r] is byte r*w + c.
  Tensor x = empty(DType::Float32, {w, h, 1, n});
  float* xp = static_cast<float*>(detail::host_data(x));
  const uint8_t* ip = images.data() + 16;
  for (int64_t i = 0; i < x.numel(); ++i) xp[i] = float(ip[i]) * (1.0f / 255.0f);
  Tensor y = empty(DType::Int64, {n});
  int64_t* yp = static_cast<int64_t*>(detail::host_data(y));
  for (int64_t i = 0; i < n; ++i) {
    yp[i] = labels[8 + size_t(i)];
    FLX_CHECK(yp[i] < 10, Error, src.title, ": ", lpath.string(), " holds label ", yp[i], " at index ", i,
              "; labels are 0..9. Reinstall it: ", src.install);
  }
  return {x, y};
}

}  // namespace

Dataset fashion_mnist(const std::string& split) { return load(kFashion, split); }
Dataset mnist(const std::string& split) { return load(kMnist, split); }

}  // namespace flx::datasets
