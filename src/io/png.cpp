// The PNG encoder of png.hpp.
#include "png.hpp"

#include <zlib.h>

#include <string_view>
#include <vector>

#include "flx/error.hpp"

namespace flx::io {
namespace {

void put32(std::string& out, uint32_t v) {
  for (int s = 24; s >= 0; s -= 8) out.push_back(char((v >> s) & 0xff));  // big endian, as PNG
}

// length, type, data, CRC-32 of type and data.
void chunk(std::string& out, const char type[4], std::string_view data) {
  put32(out, uint32_t(data.size()));
  const size_t at = out.size();
  out.append(type, 4);
  out.append(data);
  const auto* p = reinterpret_cast<const Bytef*>(out.data() + at);
  put32(out, uint32_t(crc32(crc32(0L, Z_NULL, 0), p, uInt(4 + data.size()))));
}

}  // namespace

std::string encode_png(const uint8_t* pixels, int64_t width, int64_t height, int channels) {
  FLX_CHECK(width >= 1 && height >= 1 && width < (int64_t(1) << 31) && height < (int64_t(1) << 31), ArgumentError,
            "PNG: an image of ", width, "×", height, " pixels cannot be encoded (1 to 2^31 - 1 in each)");
  FLX_CHECK(channels >= 1 && channels <= 4, ArgumentError, "PNG: ", channels,
            " channels; 1 (gray), 2 (gray and alpha), 3 (RGB) or 4 (RGBA)");
  static constexpr uint8_t color_type[5] = {0, 0, 4, 2, 6};
  // Each row: its filter type (0, None), then its bytes.
  const size_t row = size_t(width) * size_t(channels);
  std::vector<uint8_t> raw((row + 1) * size_t(height));
  for (int64_t y = 0; y < height; ++y) {
    raw[size_t(y) * (row + 1)] = 0;
    std::copy(pixels + size_t(y) * row, pixels + size_t(y + 1) * row, raw.begin() + ptrdiff_t(size_t(y) * (row + 1) + 1));
  }
  uLongf zlen = compressBound(uLong(raw.size()));
  std::string z(zlen, '\0');
  const int rc = compress2(reinterpret_cast<Bytef*>(z.data()), &zlen, raw.data(), uLong(raw.size()), 6);
  FLX_CHECK(rc == Z_OK, Error, "PNG: zlib's compress2 failed (", rc, ") on ", raw.size(), " bytes");
  z.resize(zlen);

  std::string out("\x89PNG\r\n\x1a\n", 8);
  std::string ihdr;
  put32(ihdr, uint32_t(width));
  put32(ihdr, uint32_t(height));
  ihdr += {char(8), char(color_type[channels]), char(0), char(0), char(0)};  // depth, colour, deflate, filter, no interlace
  chunk(out, "IHDR", ihdr);
  chunk(out, "IDAT", z);
  chunk(out, "IEND", {});
  return out;
}

}  // namespace flx::io
