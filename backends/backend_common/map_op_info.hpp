// What the op list (include/flx/backend_ops.h) says about each map op, as
// constexpr lookups for C++ code: libflx's frontend, the CPU backend and the
// host side of the plugins. Installed: <flx/plugin/...>.
#pragma once

#include <cstdint>

#include "flx/backend.h"

namespace flx::map_ops {

enum class OpClass : uint8_t { None, All, Num, Float, Cmp, Select };

struct OpInfo {
  const char* name = nullptr;  // lower case, as in messages ("gelu_erf")
  int arity = 0;               // 0: no such op
  OpClass cls = OpClass::None;
  int grad = FLX_OP_NONE;  // the derivative-product op, or FLX_OP_NONE
  int since = 0;           // the ABI minor version that brought the code (FLX_MAP_OPS_ADDED)
};

// One past the last code of the ranges backend_ops.h sets out.
inline constexpr int kMaxOpCode = 320;

namespace detail {
constexpr OpClass class_ALL = OpClass::All, class_NUM = OpClass::Num, class_FLOAT = OpClass::Float,
                  class_CMP = OpClass::Cmp, class_SELECT = OpClass::Select;
struct Names {
  // "GELU_ERF" -> "gelu_erf" at compile time
  char text[kMaxOpCode][24] = {};
};
constexpr Names make_names() {
  Names n{};
#define FLX_MAP_OP_NAME_(NAME, CODE, ARITY, CLASS, GRAD, BODY)         \
  {                                                                    \
    const char* s = #NAME;                                             \
    for (int i = 0; s[i] && i < 23; ++i)                               \
      n.text[CODE][i] = s[i] >= 'A' && s[i] <= 'Z' ? char(s[i] + 32) : s[i]; \
  }
  FLX_MAP_OPS(FLX_MAP_OP_NAME_)
#undef FLX_MAP_OP_NAME_
  return n;
}
inline constexpr Names names = make_names();
struct Table {
  OpInfo op[kMaxOpCode];
};
constexpr Table make_table() {
  Table t{};
#define FLX_MAP_OP_INFO_(NAME, CODE, ARITY, CLASS, GRAD, BODY) \
  t.op[CODE] = OpInfo{names.text[CODE], ARITY, class_##CLASS, FLX_OP_##GRAD};
  FLX_MAP_OPS(FLX_MAP_OP_INFO_)
#undef FLX_MAP_OP_INFO_
#define FLX_MAP_OP_MINOR_(NAME, MINOR) t.op[FLX_OP_##NAME].since = MINOR;
  FLX_MAP_OPS_ADDED(FLX_MAP_OP_MINOR_)
#undef FLX_MAP_OP_MINOR_
  return t;
}
inline constexpr Table table = make_table();
}  // namespace detail

inline constexpr OpInfo kNoOp{};
// The op's entry; an empty one (arity 0) for codes outside the list.
constexpr const OpInfo& info(int op) { return op >= 0 && op < kMaxOpCode ? detail::table.op[op] : kNoOp; }
constexpr bool exists(int op) { return info(op).arity > 0; }
constexpr int arity(int op) { return info(op).arity; }
constexpr bool is_compare(int op) { return info(op).cls == OpClass::Cmp; }
// The ABI minor version a backend must implement to know op (0 for codes
// outside the list: the backend answers for those itself).
constexpr int since(int op) { return info(op).since; }

// Whether op takes inputs of dtype t (a flx_dtype).
constexpr bool accepts(int op, int32_t t) {
  const bool floating = t == FLX_F32 || t == FLX_F64 || t == FLX_F16 || t == FLX_BF16;
  switch (info(op).cls) {
    case OpClass::All:
    case OpClass::Cmp:
    case OpClass::Select: return true;
    case OpClass::Num: return t != FLX_BOOL;
    case OpClass::Float: return floating;
    case OpClass::None: return false;
  }
  return false;
}

}  // namespace flx::map_ops
