// A minimal Protocol Buffers encoder for the few messages TensorBoard's event
// files hold (tensorboard.cpp). Written by hand on purpose: five
// small messages do not justify libprotobuf, protoc and TensorFlow's .proto
// files in the build. Only what those messages use is here:
//
//   wire type 0 (varint): int64, int32, enum, bool
//   wire type 1 (64-bit): double, little endian
//   wire type 2 (length-delimited): string, bytes, sub-messages, packed repeated doubles
//   wire type 5 (32-bit): float, little endian
//
// Each field is written as its key, varint(field_number << 3 | wire_type),
// then its value; fields may come in any order. Internal.
#pragma once

#include <bit>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace flx::io {

class ProtoWriter {
 public:
  // int64 and enum fields: a varint (a negative int64 takes 10 bytes, as
  // its two's complement, which is what protobuf does).
  ProtoWriter& int64(int field, int64_t v) {
    key(field, 0);
    varint(uint64_t(v));
    return *this;
  }
  ProtoWriter& enumeration(int field, int v) { return int64(field, v); }
  ProtoWriter& float64(int field, double v) {
    key(field, 1);
    fixed(std::bit_cast<uint64_t>(v), 8);
    return *this;
  }
  ProtoWriter& float32(int field, float v) {
    key(field, 5);
    fixed(std::bit_cast<uint32_t>(v), 4);
    return *this;
  }
  // string and bytes fields alike (strings must be UTF-8: the caller checks).
  ProtoWriter& bytes(int field, std::string_view v) {
    key(field, 2);
    varint(v.size());
    out_ += v;
    return *this;
  }
  ProtoWriter& message(int field, const ProtoWriter& m) { return bytes(field, m.out_); }
  // A packed repeated double: one length-delimited field of 8-byte values.
  ProtoWriter& packed_float64(int field, std::span<const double> vs) {
    key(field, 2);
    varint(vs.size() * 8);
    for (double v : vs) fixed(std::bit_cast<uint64_t>(v), 8);
    return *this;
  }

  // The message so far, serialized.
  const std::string& encoded() const { return out_; }

 private:
  void key(int field, int wire_type) { varint(uint64_t(field) << 3 | uint64_t(wire_type)); }
  void varint(uint64_t v) {
    while (v >= 0x80) {
      out_.push_back(char((v & 0x7f) | 0x80));
      v >>= 7;
    }
    out_.push_back(char(v));
  }
  void fixed(uint64_t v, int n) {
    for (int i = 0; i < n; ++i) out_.push_back(char((v >> (8 * i)) & 0xff));
  }

  std::string out_;
};

}  // namespace flx::io
