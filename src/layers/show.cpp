// The non-template half of layer printing (include/flx/layers/show.hpp):
// counts, bytes, widths and Flux's totals.
#include "flx/layers/show.hpp"

#include <cstdio>

#include "flx/activations.hpp"

namespace flx {

std::string format_bytes(int64_t bytes) {
  // Julia's prettyprint_getunits: the unit is the smallest power of 1024
  // that the count does not pass (so 1024 bytes stay bytes), PiB at most.
  static const char* units[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB"};
  if (bytes < 0) return "-" + format_bytes(-bytes);
  int unit = 0;
  double scale = 1;
  while (unit < 5 && double(bytes) > scale * 1024) {
    scale *= 1024;
    ++unit;
  }
  if (unit == 0) return std::to_string(bytes) + (bytes == 1 ? " byte" : " bytes");
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.3f %s", double(bytes) / scale, units[unit]);
  return buf;
}

std::ostream& operator<<(std::ostream& os, const Activation& a) { return os << a.name(); }

namespace detail {

std::string underscored(int64_t n) {
  std::string digits = std::to_string(n < 0 ? -n : n), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i && (digits.size() - i) % 3 == 0) out += '_';
    out += digits[i];
  }
  return n < 0 ? "-" + out : out;
}

size_t display_width(const std::string& s) {
  size_t n = 0;
  for (unsigned char ch : s) n += (ch & 0xC0) != 0x80;  // count the first byte of each UTF-8 character
  return n;
}

int64_t count_of(const std::vector<Tensor>& ts) {
  int64_t n = 0;
  for (const auto& t : ts) n += t.numel();
  return n;
}

int64_t bytes_of(const std::vector<Tensor>& ts) {
  int64_t n = 0;
  for (const auto& t : ts) n += t.numel() * int64_t(dtype_size(t.dtype()));
  return n;
}

void show_count(std::ostream& os, int pad, int64_t trainable, int64_t others, bool top_level) {
  os << std::string(size_t(pad), ' ') << "# " << underscored(trainable) << " parameters";
  if (others > 0) os << ", plus " << underscored(others) << (top_level ? " non-trainable" : "");
}

void show_totals(std::ostream& os, const std::vector<Tensor>& trainable, const std::vector<Tensor>& all) {
  if (trainable.size() <= 2) return;  // Flux totals only models of more than two arrays
  const int64_t n_train = count_of(trainable), others = int64_t(all.size() - trainable.size());
  if (others > 0) {
    os << std::string(9, ' ') << "# Total: " << trainable.size() << " trainable arrays, " << underscored(n_train)
       << " parameters,\n"
       << std::string(10, ' ') << "# plus " << others << " non-trainable, " << underscored(count_of(all) - n_train)
       << " parameters, summarysize " << format_bytes(bytes_of(all)) << ".";
  } else {
    os << std::string(19, ' ') << "# Total: " << trainable.size() << " arrays, " << underscored(n_train)
       << " parameters, " << format_bytes(bytes_of(all)) << ".";
  }
}

}  // namespace detail
}  // namespace flx
