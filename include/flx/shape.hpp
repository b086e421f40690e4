// Shape: up to 8 extents (the backend ABI's FLX_MAX_DIMS), column-major (first index fastest).
#pragma once

#include "flx/export.hpp"

#include <array>
#include <cstdint>
#include <initializer_list>
#include <ostream>
#include <string>
#include <vector>


namespace flx {

class FLX_API Shape {
 public:
  static constexpr int max_dims = 8;  // FLX_MAX_DIMS, checked in shape.cpp

  Shape() = default;
  Shape(std::initializer_list<int64_t> dims);
  explicit Shape(const std::vector<int64_t>& dims);

  int ndims() const { return n_; }
  int size() const { return n_; }
  int64_t operator[](int i) const { return d_[i]; }
  int64_t& operator[](int i) { return d_[i]; }
  // The product of the dims; a shape whose product does not fit int64_t
  // throws ArgumentError naming it (never a wrapped, wrong count).
  int64_t numel() const {
    int64_t p = 1;
    for (int i = 0; i < n_; ++i)
      if (__builtin_mul_overflow(p, d_[i], &p)) [[unlikely]]
        return numel_overflowed();
    return p;
  }
  const int64_t* begin() const { return d_.data(); }
  const int64_t* end() const { return d_.data() + n_; }
  const int64_t* data() const { return d_.data(); }
  void push_back(int64_t v);
  std::vector<int64_t> vec() const { return {begin(), end()}; }
  bool operator==(const Shape& o) const;
  std::string str() const;  // "2×5", "10-element", "0-dim"

 private:
  int64_t numel_overflowed() const;  // 0 if some dim is 0, else throws
  std::array<int64_t, max_dims> d_{};
  int n_ = 0;
};

FLX_API std::ostream& operator<<(std::ostream& os, const Shape& s);

}  // namespace flx
