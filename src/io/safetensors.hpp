// The safetensors file format (https://github.com/huggingface/safetensors):
// an 8-byte little-endian header length N, N bytes of UTF-8 JSON describing
// each tensor (dtype, shape, byte range), then the data section. Internal: the
// public checkpoint API (save, load, loadmodel) is built on this layer.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "flx/dtype.hpp"

namespace flx::safetensors {

// Largest header accepted, as in the reference implementation.
inline constexpr uint64_t max_header_size = 100'000'000;

// One tensor of a file. shape is as written in the file (row-major order, e.g. [out, in]).
struct Entry {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;  // byte offsets relative to the start of the data section
};

struct Header {
  std::vector<Entry> entries;                   // sorted by begin offset
  std::map<std::string, std::string> metadata;  // "__metadata__", empty if absent
  uint64_t data_start = 0;                      // 8 + header length: where the data section starts in the file
};

// Validates everything on the complete file contents; throws
// flx::CheckpointError whose message starts with `origin` (a path, or
// "<memory>"), names the tensor and the rule broken, and what to do. Never
// allocates per-tensor data; never trusts a size before checking it.
Header parse(std::span<const uint8_t> file, const std::string& origin);

// Reads a whole file (CheckpointError naming the path if it is missing,
// unreadable, not a regular file, or larger than the memory there is);
// checks the 8-byte length prefix against the file size before reading the
// rest. Never blocks on a named pipe. (Writing: io::write_atomic.)
std::vector<uint8_t> read_file(const std::string& path);

// What to write: data are the row-major bytes (nbytes must equal numel * dtype_size).
struct WriteEntry {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  const void* data = nullptr;
  size_t nbytes = 0;
};

// The complete file as bytes: header JSON padded with spaces to a multiple of
// 8, tensors sorted by element size (descending) then name so that every
// offset is aligned to its element size, metadata as "__metadata__" when
// non-empty. ArgumentError for empty, duplicate or non-UTF-8 names, negative
// dims, or data whose size does not match the shape.
std::vector<uint8_t> serialize(const std::vector<WriteEntry>& entries,
                               const std::map<std::string, std::string>& metadata);

// A tensor name as messages show it: quoted, control and non-ASCII bytes
// escaped, cut short (names come from untrusted files).
std::string show_name(std::string_view name);
// A shape as the file has it: "[4, 3]".
std::string show_shape(const std::vector<int64_t>& shape);

// The file's name of a dtype ("F32", ...).
std::string_view dtype_code(DType t);

}  // namespace flx::safetensors
