// TFRecord framing, the container of TensorBoard's event files: each record
// is
//
//   uint64 length (little endian)
//   uint32 masked CRC-32C of those 8 length bytes
//   length bytes of data (here: one serialized tensorflow.Event)
//   uint32 masked CRC-32C of the data
//
// CRC-32C is the Castagnoli CRC (iSCSI's), computed by Intel's ISA-L
// (Debian's libisal-dev: crc32_iscsi, SIMD-accelerated where the CPU can).
// The mask, ((crc >> 15) | (crc << 17)) + 0xa282ead8, keeps the CRC of data
// that itself holds CRCs from being trivially related to them. Internal.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace flx::io {

// The standard CRC-32C of bytes (crc32c("123456789") == 0xE3069283).
uint32_t crc32c(std::string_view bytes);
// TFRecord's masked form of a CRC-32C.
uint32_t mask_crc(uint32_t crc);
inline uint32_t masked_crc32c(std::string_view bytes) { return mask_crc(crc32c(bytes)); }

// Appends one framed record holding data to out.
void append_record(std::string& out, std::string_view data);

}  // namespace flx::io
