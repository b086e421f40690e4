// A minimal PNG encoder (TensorBoardLogger::log_image): 8 bits per channel,
// no interlacing, every row with filter type 0 (None), the image data one
// zlib stream in one IDAT chunk; each chunk's CRC-32 is zlib's crc32 over
// its type and data (the PNG specification, ISO/IEC 15948). Internal.
#pragma once

#include <cstdint>
#include <string>

namespace flx::io {

// `pixels`: height rows of width pixels of `channels` interleaved bytes
// (1 gray, 2 gray + alpha, 3 RGB, 4 RGBA), row after row from the top.
// Returns the PNG file's bytes.
std::string encode_png(const uint8_t* pixels, int64_t width, int64_t height, int channels);

}  // namespace flx::io
