#include "flx/shape.hpp"

#include "flx/backend.h"

#include "flx/error.hpp"

namespace flx {

Shape::Shape(std::initializer_list<int64_t> dims) {
  for (auto d : dims) push_back(d);
}
Shape::Shape(const std::vector<int64_t>& dims) {
  for (auto d : dims) push_back(d);
}

void Shape::push_back(int64_t v) {
  FLX_CHECK(n_ < max_dims, DimensionMismatch, "a shape has at most ", max_dims, " dims; got more");
  // -1 is allowed as reshape's "infer this dim"; allocation rejects it.
  FLX_CHECK(v >= -1, DimensionMismatch, "dims must be non-negative; got ", v);
  d_[size_t(n_++)] = v;
}

int64_t Shape::numel_overflowed() const {
  for (int i = 0; i < n_; ++i)
    if (d_[size_t(i)] == 0) return 0;
  FLX_THROW(ArgumentError, "a tensor of shape (", str(), ") would have more than 2^63 - 1 elements; ",
            "the product of the dims must fit a 64-bit count (check the dims passed)");
}

bool Shape::operator==(const Shape& o) const {
  if (n_ != o.n_) return false;
  for (int i = 0; i < n_; ++i)
    if (d_[size_t(i)] != o.d_[size_t(i)]) return false;
  return true;
}

std::string Shape::str() const {
  if (n_ == 0) return "()";
  std::string s;
  for (int i = 0; i < n_; ++i) {
    if (i) s += "×";
    s += std::to_string(d_[size_t(i)]);
  }
  return s;
}

std::ostream& operator<<(std::ostream& os, const Shape& s) { return os << '(' << s.str() << ')'; }

}  // namespace flx

static_assert(flx::Shape::max_dims == FLX_MAX_DIMS, "Shape holds as many dims as the backend ABI");
