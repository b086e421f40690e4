// TFRecord framing (tfrecord.hpp), CRC-32C from ISA-L.
#include "tfrecord.hpp"

#include <isa-l/crc.h>

#include <algorithm>
#include <climits>

namespace flx::io {

uint32_t crc32c(std::string_view bytes) {
  // ISA-L keeps the CRC's running state un-inverted: start from ~0 and
  // invert at the end for the standard value. It takes an int length (and a
  // non-const pointer it only reads), so long inputs go in chunks.
  uint32_t state = 0xffffffffu;
  auto* p = reinterpret_cast<unsigned char*>(const_cast<char*>(bytes.data()));
  for (size_t left = bytes.size(); left > 0;) {
    const int n = int(std::min<size_t>(left, INT_MAX));
    state = crc32_iscsi(p, n, state);
    p += n;
    left -= size_t(n);
  }
  return state ^ 0xffffffffu;
}

uint32_t mask_crc(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }

namespace {

void append_le(std::string& out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(char((v >> (8 * i)) & 0xff));
}

}  // namespace

void append_record(std::string& out, std::string_view data) {
  std::string length;
  append_le(length, data.size(), 8);
  out += length;
  append_le(out, masked_crc32c(length), 4);
  out += data;
  append_le(out, masked_crc32c(data), 4);
}

}  // namespace flx::io
