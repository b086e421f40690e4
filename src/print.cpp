// Printing tensors the way Julia prints arrays:
//   2×3 Tensor{Float32} on CPU:
//    0.5  1.0   -2.25
//    3.0  0.125  7.0
// Large tensors are elided with ⋮ and …. Tensors on any device print (the
// values are copied to the host first).
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "flx/ops.hpp"
#include "tensor_impl.hpp"

namespace flx {
namespace {

std::string julia_float(double v, bool single) {
  char buf[64];
  auto res = single ? std::to_chars(buf, buf + sizeof buf, float(v)) : std::to_chars(buf, buf + sizeof buf, v);
  std::string s(buf, res.ptr);
  if (s == "inf") return "Inf";
  if (s == "-inf") return "-Inf";
  if (s == "nan" || s == "-nan") return "NaN";
  auto e = s.find('e');
  std::string mant = s.substr(0, e), ex = e == std::string::npos ? "" : s.substr(e + 1);
  if (mant.find('.') == std::string::npos) mant += ".0";
  if (ex.empty()) return mant;
  bool neg = ex[0] == '-';
  size_t i = (ex[0] == '-' || ex[0] == '+') ? 1 : 0;
  while (i + 1 < ex.size() && ex[i] == '0') ++i;
  return mant + "e" + (neg ? "-" : "") + ex.substr(i);
}

struct Cells {
  std::vector<std::string> text;
  size_t left = 0, right = 0;  // widths around the decimal point
};

// Julia's compact form (matrices): 6 significant digits, as `0.800225`.
std::string compact_float(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return julia_float(std::strtod(buf, nullptr), false);
}

std::string format_value(const std::vector<double>& v, size_t i, DType t, bool compact = false) {
  if (is_floating(t)) return compact ? compact_float(v[i]) : julia_float(v[i], t != DType::Float64);
  return std::to_string(int64_t(v[i]));
}

// Column alignment on the decimal point, as Julia does.
std::string align(const std::string& s, size_t left, size_t right) {
  auto dot = s.find_first_of(".e");
  size_t l = dot == std::string::npos ? s.size() : dot;
  size_t r = s.size() - l;
  return std::string(left - std::min(left, l), ' ') + s + std::string(right - std::min(right, r), ' ');
}

void measure(const std::string& s, size_t& left, size_t& right) {
  auto dot = s.find_first_of(".e");
  size_t l = dot == std::string::npos ? s.size() : dot;
  left = std::max(left, l);
  right = std::max(right, s.size() - l);
}

// Indices to show along a dimension of n entries, with -1 for the elision.
std::vector<int64_t> shown(int64_t n, int64_t limit) {
  std::vector<int64_t> r;
  if (n <= limit) {
    for (int64_t i = 0; i < n; ++i) r.push_back(i);
  } else {
    for (int64_t i = 0; i < limit / 2; ++i) r.push_back(i);
    r.push_back(-1);
    for (int64_t i = n - limit / 2; i < n; ++i) r.push_back(i);
  }
  return r;
}

void print_matrix(std::ostream& os, const std::vector<double>& v, int64_t offset, int64_t rows, int64_t cols,
                  DType t) {
  auto ri = shown(rows, 20), ci = shown(cols, 10);
  std::vector<size_t> left(ci.size()), right(ci.size());
  for (size_t c = 0; c < ci.size(); ++c)
    for (auto r : ri)
      if (r >= 0 && ci[c] >= 0) measure(format_value(v, size_t(offset + r + ci[c] * rows), t, true), left[c], right[c]);
  for (size_t k = 0; k < ri.size(); ++k) {
    int64_t r = ri[k];
    if (k) os << '\n';
    for (size_t c = 0; c < ci.size(); ++c) {
      os << (c ? "  " : " ");
      if (ci[c] < 0) os << (r < 0 ? "⋱" : "…");
      else if (r < 0) os << align("⋮", left[c], right[c] + 2);  // ⋮ is 3 bytes, 1 column
      else os << align(format_value(v, size_t(offset + r + ci[c] * rows), t, true), left[c], right[c]);
    }
  }
}

}  // namespace

namespace detail {
std::string tensor_summary(const Tensor& t) {
  if (!t.defined()) return "Tensor(undefined)";
  const Shape& s = t.shape();
  std::ostringstream os;
  if (s.ndims() == 1) os << s[0] << "-element";
  else if (s.ndims() == 0) os << "0-dim";
  else os << s.str();
  os << " Tensor{" << t.dtype() << "}";
  return os.str();
}
}  // namespace detail

std::ostream& operator<<(std::ostream& os, const Tensor& t) {
  if (!t.defined()) return os << "Tensor(undefined)";
  const Shape& s = t.shape();
  os << detail::tensor_summary(t) << " on " << t.device() << ":";
  std::vector<double> v = t.detach().to(Device::cpu()).to_vector<double>();
  if (s.ndims() == 0) return os << "\n " << format_value(v, 0, t.dtype());
  if (t.numel() == 0) return os;
  os << '\n';
  if (s.ndims() == 1) {
    size_t left = 0, right = 0;
    auto idx = shown(s[0], 20);
    for (auto i : idx)
      if (i >= 0) measure(format_value(v, size_t(i), t.dtype()), left, right);
    for (size_t k = 0; k < idx.size(); ++k) {
      os << ' ' << (idx[k] < 0 ? std::string(" ⋮") : align(format_value(v, size_t(idx[k]), t.dtype()), left, right));
      if (k + 1 < idx.size()) os << '\n';
    }
    return os;
  }
  int64_t rows = s[0], cols = s[1], slices = t.numel() / std::max<int64_t>(rows * cols, 1);
  if (s.ndims() == 2) {
    print_matrix(os, v, 0, rows, cols, t.dtype());
    return os;
  }
  auto si = shown(slices, 6);
  for (size_t j = 0; j < si.size(); ++j) {
    int64_t k = si[j];
    if (j) os << "\n\n";
    if (k < 0) {
      os << "⋮";
      continue;
    }
    os << "[:, :";
    int64_t rem = k;
    for (int d = 2; d < s.ndims(); ++d) {
      os << ", " << rem % s[d];
      rem /= s[d];
    }
    os << "] =\n";
    print_matrix(os, v, k * rows * cols, rows, cols, t.dtype());
  }
  return os;
}

}  // namespace flx
