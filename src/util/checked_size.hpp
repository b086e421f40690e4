// Sizes computed from what a caller passed (a padding, a repeat count, an
// upscale factor): a sum or product that does not fit int64 is an
// ArgumentError naming the op and what it was computing, never a wrapped
// count that surfaces later as a negative dim, a division by zero or a
// std::length_error. `what...` are the message's first parts, the op's name
// first ("repeat: dim 0 (2) repeated 9223372036854775807 times").
#pragma once

#include <cstdint>
#include <initializer_list>

#include "flx/error.hpp"
#include "flx/shape.hpp"

namespace flx::detail {

template <class... What>
[[noreturn]] void size_overflow(const What&... what) {
  FLX_THROW(ArgumentError, what..., " does not fit a 64-bit size (at most 2^63 - 1); use smaller sizes");
}

template <class... What>
int64_t checked_mul(int64_t a, int64_t b, const What&... what) {
  int64_t r = 0;
  if (__builtin_mul_overflow(a, b, &r)) size_overflow(what...);
  return r;
}

template <class... What>
int64_t checked_sum(std::initializer_list<int64_t> terms, const What&... what) {
  int64_t r = 0;
  for (int64_t t : terms)
    if (__builtin_add_overflow(r, t, &r)) size_overflow(what...);
  return r;
}

// The element count of s, or the error naming `what` (an op's output shape).
template <class... What>
int64_t checked_numel(const Shape& s, const What&... what) {
  int64_t n = 1;
  for (int64_t d : s)
    if (d == 0) return 0;
  for (int64_t d : s) n = checked_mul(n, d, what..., ": an output of shape (", s.str(), ")");
  return n;
}

}  // namespace flx::detail
