// The safetensors format: strict header validation, serialisation, reading files.
#include "safetensors.hpp"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <limits>
#include <new>
#include <set>
#include <sstream>
#include <string_view>
#include <tuple>
#include <utility>

#include <nlohmann/json.hpp>

#include "../util/utf8.hpp"
#include "files.hpp"
#include "flx/error.hpp"

namespace flx::safetensors {
namespace {

using detail::utf8_error_at;

using json = nlohmann::json;

constexpr const char* metadata_key = "__metadata__";

struct DTypeCode {
  std::string_view code;
  DType dtype;
};
// safetensors' names for flx's element types are the list's suffixes
// (flx/dtype_list.h): "F32", "BF16", "BOOL", ...
#define FLX_SAFETENSORS_CODE_(code, sfx, name, bytes, kind, rank) {#sfx, DType::name},
constexpr std::array<DTypeCode, FLX_DTYPE_COUNT> dtype_codes{{FLX_DTYPES(FLX_SAFETENSORS_CODE_)}};
#undef FLX_SAFETENSORS_CODE_
#define FLX_SAFETENSORS_NAME_(code, sfx, name, bytes, kind, rank) " " #sfx
constexpr std::string_view supported_codes = std::string_view(FLX_DTYPES(FLX_SAFETENSORS_NAME_)).substr(1);  // "F32 F64 ... BOOL"
#undef FLX_SAFETENSORS_NAME_
// Valid safetensors dtypes that flx has no element type for.
constexpr std::array<std::string_view, 11> unsupported_codes{
    "I8", "I16", "U16", "U32", "U64", "F8_E4M3", "F8_E5M2", "F8_E8M0", "F6_E2M3", "F6_E3M2", "F4"};

bool is_unsupported_code(std::string_view s) {
  if (std::find(unsupported_codes.begin(), unsupported_codes.end(), s) != unsupported_codes.end()) return true;
  // Newer low-precision float formats all follow the F8_/F6_/F4_ pattern.
  return s.starts_with("F8_") || s.starts_with("F6_") || s.starts_with("F4_");
}

template <class... Parts>
[[noreturn]] void fail(const std::string& origin, const Parts&... parts) {
  FLX_THROW(CheckpointError, origin, ": ", parts...);
}

constexpr const char* not_safetensors =
    "; the file is corrupt, truncated or not a safetensors checkpoint: re-create or re-download it";

// Builds a JSON DOM like nlohmann's own SAX DOM parser, but rejects duplicate
// keys at every level (nlohmann silently keeps the last one) and nesting
// deeper than a safetensors header ever needs, and stops at the first error.
class StrictBuilder : public nlohmann::json_sax<json> {
 public:
  json root;
  std::string error;  // set when parsing stopped early

  bool null() override { return add(json(nullptr)); }
  bool boolean(bool v) override { return add(json(v)); }
  bool number_integer(number_integer_t v) override { return add(json(v)); }
  bool number_unsigned(number_unsigned_t v) override { return add(json(v)); }
  bool number_float(number_float_t v, const string_t&) override { return add(json(v)); }
  bool string(string_t& v) override { return add(json(std::move(v))); }
  bool binary(binary_t&) override {
    error = "header holds binary data, which JSON text cannot";
    return false;
  }
  bool start_object(std::size_t) override { return open(json::object()); }
  bool start_array(std::size_t) override { return open(json::array()); }
  bool end_object() override { return close(); }
  bool end_array() override { return close(); }
  bool key(string_t& k) override {
    Frame& f = stack_.back();
    if (!f.keys.insert(k).second) {
      error = "duplicate key " + show_name(k) + (f.name.empty() ? " at the top level" : " in " + show_name(f.name));
      return false;
    }
    pending_key_ = std::move(k);
    return true;
  }
  bool parse_error(std::size_t position, const std::string&, const nlohmann::detail::exception& ex) override {
    // After the top-level object only whitespace may follow: whatever the
    // parser tripped on is a trailing character (position counts the bytes
    // read, the offending one included).
    if (root_closed_)
      error = "header has trailing characters after the JSON object at header offset " +
              std::to_string(position - 1) + "; only spaces, tabs, CR and LF may follow it";
    else
      error = std::string("header is not valid JSON: ") + ex.what();
    return false;
  }

 private:
  struct Frame {
    json* value;
    std::string name;  // the key this container sits under (top level: empty)
    std::set<std::string> keys;
  };
  // Top-level object, an entry object, its shape / data_offsets array.
  static constexpr size_t max_depth = 3;
  std::vector<Frame> stack_;
  std::string pending_key_;
  bool root_closed_ = false;

  json* place(json&& v) {
    if (stack_.empty()) {
      root = std::move(v);
      return &root;
    }
    json& top = *stack_.back().value;
    if (top.is_array()) {
      top.push_back(std::move(v));
      return &top.back();
    }
    json& slot = top[pending_key_];
    slot = std::move(v);
    return &slot;
  }
  bool add(json&& v) {
    place(std::move(v));
    return true;
  }
  bool open(json&& v) {
    if (stack_.size() >= max_depth) {
      error = "header nests containers more than " + std::to_string(max_depth) +
              " deep (a safetensors header is an object of objects holding arrays of integers)";
      return false;
    }
    std::string name = stack_.empty() ? std::string() : stack_.back().value->is_object() ? pending_key_ : stack_.back().name;
    json* p = place(std::move(v));
    stack_.push_back(Frame{p, std::move(name), {}});
    return true;
  }
  bool close() {
    stack_.pop_back();
    root_closed_ = stack_.empty();
    return true;
  }
};

// A non-negative integer of the header as uint64, or false.
bool as_u64(const json& v, uint64_t& out) {
  if (v.is_number_unsigned()) {
    out = v.get<uint64_t>();
    return true;
  }
  if (v.is_number_integer() && v.get<int64_t>() >= 0) {
    out = uint64_t(v.get<int64_t>());
    return true;
  }
  return false;
}

std::string describe(const json& v) {
  std::string s = v.dump(-1, ' ', true, json::error_handler_t::replace);
  if (s.size() > 80) s = s.substr(0, 77) + "...";
  return s;
}

Entry parse_entry(const std::string& name, const json& info, const std::string& origin) {
  const std::string who = "tensor " + show_name(name);
  if (name.empty()) fail(origin, "a tensor has an empty name; every tensor needs a non-empty name", not_safetensors);
  if (!info.is_object())
    fail(origin, who, ": expected an object with keys dtype, shape and data_offsets, found ", describe(info),
         not_safetensors);
  for (const auto& [key, value] : info.items()) {
    if (key != "dtype" && key != "shape" && key != "data_offsets")
      fail(origin, who, ": unexpected key ", show_name(key),
           "; an entry must have exactly the keys dtype, shape and data_offsets", not_safetensors);
  }
  for (const char* key : {"dtype", "shape", "data_offsets"}) {
    if (!info.contains(key))
      fail(origin, who, ": missing key \"", key, "\"; an entry must have exactly the keys dtype, shape and data_offsets",
           not_safetensors);
  }
  Entry e;
  e.name = name;

  const json& dt = info["dtype"];
  if (!dt.is_string()) fail(origin, who, ": dtype must be a string such as \"F32\", found ", describe(dt), not_safetensors);
  const auto& code = dt.get_ref<const std::string&>();
  auto it = std::find_if(dtype_codes.begin(), dtype_codes.end(), [&](const DTypeCode& c) { return c.code == code; });
  if (it == dtype_codes.end()) {
    if (is_unsupported_code(code))
      fail(origin, who, ": dtype ", show_name(code),
           " is valid safetensors but not supported by flx (supported: ", supported_codes,
           "); convert the tensor to a supported dtype before saving it");
    fail(origin, who, ": unknown dtype ", show_name(code), " (flx reads ", supported_codes, ")", not_safetensors);
  }
  e.dtype = it->dtype;

  const json& shape = info["shape"];
  if (!shape.is_array())
    fail(origin, who, ": shape must be an array of non-negative integers, found ", describe(shape), not_safetensors);
  e.shape.reserve(shape.size());
  // numel in overflow-checked arithmetic: a product that wraps is an error,
  // never a small or empty tensor (as in the reference implementation).
  uint64_t numel = 1;
  for (const json& d : shape) {
    uint64_t dim;
    if (!as_u64(d, dim))
      fail(origin, who, ": shape must be an array of non-negative integers, found element ", describe(d),
           not_safetensors);
    if (dim > uint64_t(std::numeric_limits<int64_t>::max()))
      fail(origin, who, ": shape dimension ", dim, " overflows int64 (largest allowed ",
           std::numeric_limits<int64_t>::max(), ")", not_safetensors);
    if (dim != 0 && numel > std::numeric_limits<uint64_t>::max() / dim)
      fail(origin, who, ": element count of shape ", describe(shape), " overflows 64 bits", not_safetensors);
    numel *= dim;
    e.shape.push_back(int64_t(dim));
  }
  const uint64_t esize = dtype_size(e.dtype);
  if (numel > uint64_t(std::numeric_limits<int64_t>::max()) / esize)
    fail(origin, who, ": byte size of shape ", describe(shape), " with dtype ", code, " overflows 64 bits",
         not_safetensors);
  const uint64_t nbytes = numel * esize;

  const json& off = info["data_offsets"];
  if (!off.is_array() || off.size() != 2 || !as_u64(off[0], e.begin) || !as_u64(off[1], e.end))
    fail(origin, who, ": data_offsets must be an array of exactly two non-negative integers [begin, end], found ",
         describe(off), not_safetensors);
  if (e.begin > e.end)
    fail(origin, who, ": data_offsets begin ", e.begin, " is after end ", e.end, not_safetensors);
  if (e.end - e.begin != nbytes)
    fail(origin, who, ": data_offsets [", e.begin, ", ", e.end, "] hold ", e.end - e.begin, " bytes but shape ",
         show_shape(e.shape), " of dtype ", code, " needs ", nbytes, " bytes (size mismatch)", not_safetensors);
  return e;
}

std::string errno_text(int err) { return std::strerror(err); }

}  // namespace

// A name as it appears in messages: quoted, with control and non-ASCII bytes
// escaped, and cut short (names come from untrusted files).
std::string show_name(std::string_view s) {
  std::string out = "\"";
  static const char* hex = "0123456789abcdef";
  size_t shown = 0;
  for (unsigned char c : s) {
    if (++shown > 80) {
      out += "...";
      break;
    }
    if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\') {
      out += char(c);
    } else {
      out += "\\x";
      out += hex[c >> 4];
      out += hex[c & 15];
    }
  }
  return out + "\"";
}

static std::string hex_byte(char c) {
  static const char* hex = "0123456789abcdef";
  const auto b = static_cast<unsigned char>(c);
  return {hex[b >> 4], hex[b & 15]};
}

std::string show_shape(const std::vector<int64_t>& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + std::to_string(shape[i]);
  return out + "]";
}

std::string_view dtype_code(DType t) {
  for (const auto& c : dtype_codes)
    if (c.dtype == t) return c.code;
  FLX_THROW(ArgumentError, "no safetensors code for dtype ", int(t));
}

Header parse(std::span<const uint8_t> file, const std::string& origin) {
  if (file.size() < 8)
    fail(origin, "file is too small: ", file.size(),
         " bytes, expected at least the 8-byte header length of a safetensors file", not_safetensors);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | file[size_t(i)];
  if (n > max_header_size)
    fail(origin, "header too large: its length prefix says ", n, " bytes, the limit is ", max_header_size,
         not_safetensors);
  // n <= 1e8, so 8 + n cannot overflow.
  if (8 + n > file.size())
    fail(origin, "header length ", n, " runs past the end of the file (", file.size(), " bytes)", not_safetensors);

  std::string_view text(reinterpret_cast<const char*>(file.data()) + 8, size_t(n));
  if (size_t at = utf8_error_at(text); at != std::string_view::npos)
    fail(origin, "header is not valid UTF-8 (bad byte at header offset ", at, ")", not_safetensors);

  // The reference reader (serde_json::from_str) allows JSON whitespace around
  // the object and nothing else. nlohmann's parser would stop at a NUL as at
  // the end of its input ("{}\0garbage" would load as an empty file) and
  // skip a leading byte order mark, so both are refused here first.
  if (size_t at = text.find('\0'); at != std::string_view::npos)
    fail(origin, "header holds a NUL byte at header offset ", at,
         "; JSON text has none, and only spaces, tabs, CR and LF may pad a header", not_safetensors);
  if (size_t first = text.find_first_not_of(" \t\n\r"); first == std::string_view::npos || text[first] != '{')
    fail(origin, "header is not a JSON object: it must start with '{' (after optional spaces, tabs, CR or LF), found ",
         first == std::string_view::npos ? std::string("nothing else") : "byte 0x" + hex_byte(text[first]),
         first == std::string_view::npos ? "" : " at header offset " + std::to_string(first), not_safetensors);

  StrictBuilder builder;
  // strict: nothing but whitespace after the object; no comments.
  bool ok = json::sax_parse(text.begin(), text.end(), &builder, nlohmann::detail::input_format_t::json, true, false);
  if (!ok) {
    if (builder.error.starts_with("duplicate key"))
      fail(origin, "header has a ", builder.error, "; each key may appear once", not_safetensors);
    fail(origin, builder.error, not_safetensors);
  }
  const json& root = builder.root;

  Header h;
  h.data_start = 8 + n;
  for (const auto& [key, value] : root.items()) {
    if (key == metadata_key) {
      if (!value.is_object())
        fail(origin, "__metadata__ must be an object of string to string, found ", describe(value), not_safetensors);
      for (const auto& [mk, mv] : value.items()) {
        if (!mv.is_string())
          fail(origin, "__metadata__ must be an object of string to string; key ", show_name(mk), " has value ",
               describe(mv), not_safetensors);
        h.metadata.emplace(mk, mv.get<std::string>());
      }
      continue;
    }
    h.entries.push_back(parse_entry(key, value, origin));
  }

  std::sort(h.entries.begin(), h.entries.end(), [](const Entry& a, const Entry& b) {
    return std::tie(a.begin, a.end, a.name) < std::tie(b.begin, b.end, b.name);
  });
  // The byte ranges, sorted, must tile the data section exactly.
  uint64_t pos = 0;
  const Entry* prev = nullptr;
  for (const Entry& e : h.entries) {
    if (e.begin < pos)
      fail(origin, "tensor ", show_name(e.name), ": data_offsets [", e.begin, ", ", e.end, "] overlap tensor ",
           show_name(prev->name), " which ends at ", pos, not_safetensors);
    if (e.begin > pos)
      fail(origin, "tensor ", show_name(e.name), ": data_offsets begin ", e.begin, " leaves a hole in the data section (",
           prev ? "tensor " + show_name(prev->name) + " ends at " + std::to_string(pos) : std::string("data starts at 0"),
           ")", not_safetensors);
    pos = e.end;
    prev = &e;
  }
  const uint64_t data_size = file.size() - h.data_start;
  if (pos > data_size)
    fail(origin, "tensor ", show_name(prev->name), " ends at data offset ", pos, " but the data section has only ",
         data_size, " bytes: the file is truncated (incomplete buffer)", not_safetensors);
  if (pos < data_size)
    fail(origin, "the tensors end at data offset ", pos, " but the data section has ", data_size, " bytes: ",
         data_size - pos, " trailing bytes after the last tensor", not_safetensors);
  return h;
}

std::vector<uint8_t> read_file(const std::string& path) {
  io::OpenedFile f = io::open_regular_file(path);
  if (!f.fd && f.err)
    fail(path, "cannot open checkpoint for reading: ", f.problem,
         f.err == ENOENT ? "; check the path" : "; check the path and its permissions");
  if (!f.fd) fail(path, f.problem, "; pass the path of a .safetensors file");
  const int fd = f.fd.get();
  const uint64_t size = f.size;

  auto read_exact = [&](uint8_t* dst, size_t count, uint64_t at) {
    size_t done = 0;
    while (done < count) {
      ssize_t r = ::pread(fd, dst + done, count - done, off_t(at + done));
      if (r < 0 && errno == EINTR) continue;
      if (r < 0) fail(path, "read error: ", errno_text(errno));
      if (r == 0) fail(path, "file shrank while being read (expected ", size, " bytes); is another process writing it?");
      done += size_t(r);
    }
  };

  if (size < 8)
    fail(path, "file is too small: ", size, " bytes, expected at least the 8-byte header length of a safetensors file",
         not_safetensors);
  uint8_t prefix[8];
  read_exact(prefix, 8, 0);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | prefix[i];
  // Checked before allocating anything the size of the file.
  if (n > max_header_size)
    fail(path, "header too large: its length prefix says ", n, " bytes, the limit is ", max_header_size,
         not_safetensors);
  if (8 + n > size)
    fail(path, "header length ", n, " runs past the end of the file (", size, " bytes)", not_safetensors);
  if (size > uint64_t(std::numeric_limits<size_t>::max() / 2))
    fail(path, "file of ", size, " bytes is too large to read into memory");

  std::vector<uint8_t> bytes;
  try {
    bytes.resize(static_cast<size_t>(size));
  } catch (const std::bad_alloc&) {
    fail(path, "not enough memory to read the ", size, "-byte checkpoint into memory; free memory, or load it on a "
         "machine with more");
  }
  std::memcpy(bytes.data(), prefix, 8);
  read_exact(bytes.data() + 8, size_t(size - 8), 8);
  return bytes;
}

std::vector<uint8_t> serialize(const std::vector<WriteEntry>& entries,
                               const std::map<std::string, std::string>& metadata) {
  std::set<std::string_view> names;
  for (const WriteEntry& e : entries) {
    FLX_CHECK(!e.name.empty(), ArgumentError, "safetensors: a tensor has an empty name; give every tensor a name");
    FLX_CHECK(e.name != metadata_key, ArgumentError, "safetensors: the tensor name \"__metadata__\" is reserved by "
              "the format; rename the tensor");
    FLX_CHECK(utf8_error_at(e.name) == std::string_view::npos, ArgumentError, "safetensors: tensor name ",
              show_name(e.name), " is not valid UTF-8; names must be UTF-8 text");
    FLX_CHECK(names.insert(e.name).second, ArgumentError, "safetensors: duplicate tensor name ", show_name(e.name),
              "; every tensor needs a distinct name");
    uint64_t numel = 1;
    for (int64_t d : e.shape) {
      FLX_CHECK(d >= 0, ArgumentError, "safetensors: tensor ", show_name(e.name), " has negative dimension ", d,
                " in shape ", show_shape(e.shape));
      FLX_CHECK(d == 0 || numel <= std::numeric_limits<uint64_t>::max() / uint64_t(d), ArgumentError,
                "safetensors: tensor ", show_name(e.name), ": element count of shape ", show_shape(e.shape),
                " overflows 64 bits");
      numel *= uint64_t(d);
    }
    const uint64_t esize = dtype_size(e.dtype);
    FLX_CHECK(numel <= std::numeric_limits<uint64_t>::max() / esize && numel * esize == e.nbytes, ArgumentError,
              "safetensors: tensor ", show_name(e.name), " of shape ", show_shape(e.shape), " and dtype ",
              dtype_code(e.dtype), " needs ", numel, " x ", esize, " bytes, but ", e.nbytes, " were given");
    FLX_CHECK(e.nbytes == 0 || e.data != nullptr, ArgumentError, "safetensors: tensor ", show_name(e.name),
              " has no data pointer for its ", e.nbytes, " bytes");
  }
  for (const auto& [k, v] : metadata) {
    FLX_CHECK(utf8_error_at(k) == std::string_view::npos && utf8_error_at(v) == std::string_view::npos,
              ArgumentError, "safetensors: metadata entry ", show_name(k), " is not valid UTF-8; metadata must be UTF-8 text");
  }

  // Largest elements first, so that every offset is a multiple of its
  // element size (sizes are powers of two and the data section starts at a
  // multiple of 8).
  std::vector<const WriteEntry*> order;
  order.reserve(entries.size());
  for (const WriteEntry& e : entries) order.push_back(&e);
  std::sort(order.begin(), order.end(), [](const WriteEntry* a, const WriteEntry* b) {
    size_t sa = dtype_size(a->dtype), sb = dtype_size(b->dtype);
    return sa != sb ? sa > sb : a->name < b->name;
  });

  // ordered_json: entries appear in data order, metadata first, as the reference writer does.
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata.empty()) {
    nlohmann::ordered_json m = nlohmann::ordered_json::object();
    for (const auto& [k, v] : metadata) m[k] = v;
    header[metadata_key] = std::move(m);
  }
  uint64_t offset = 0;
  for (const WriteEntry* e : order) {
    nlohmann::ordered_json info = nlohmann::ordered_json::object();
    info["dtype"] = std::string(dtype_code(e->dtype));
    info["shape"] = e->shape;
    FLX_CHECK(e->nbytes <= std::numeric_limits<uint64_t>::max() - offset, ArgumentError,
              "safetensors: the total size of the tensors overflows 64 bits");
    info["data_offsets"] = {offset, offset + e->nbytes};
    offset += e->nbytes;
    header[e->name] = std::move(info);
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  FLX_CHECK(text.size() <= max_header_size, ArgumentError, "safetensors: the header would be ", text.size(),
            " bytes, over the format's limit of ", max_header_size, "; save fewer tensors per file");

  std::vector<uint8_t> out;
  out.reserve(8 + text.size() + offset);
  const uint64_t n = text.size();
  for (int i = 0; i < 8; ++i) out.push_back(uint8_t(n >> (8 * i)));
  out.insert(out.end(), text.begin(), text.end());
  for (const WriteEntry* e : order) {
    const auto* p = static_cast<const uint8_t*>(e->data);
    if (e->nbytes) out.insert(out.end(), p, p + e->nbytes);
  }
  return out;
}

}  // namespace flx::safetensors
