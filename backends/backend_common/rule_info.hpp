// What the optimiser rules' list (include/flx/backend_rules.h) says about
// each rule, as constexpr lookups for C++ code: libflx's frontend and
// dispatch layer, and the host side of the plugins. Installed:
// <flx/plugin/...>.
#pragma once

#include <cstdint>

#include "flx/backend.h"

namespace flx::rules {

// How many state tensors rule `code` keeps; -1 for a code not in the list.
constexpr int states(int32_t code) {
#define FLX_RULE_STATES_(NAME, CODE, STATES, BODY) \
  if (code == CODE) return STATES;
  FLX_RULES(FLX_RULE_STATES_)
#undef FLX_RULE_STATES_
  return -1;
}

// The ABI minor version that brought rule `code` (FLX_RULES_ADDED); 0 for
// a code not in the list.
constexpr uint32_t since(int32_t code) {
#define FLX_RULE_SINCE_(NAME, MINOR) \
  if (code == FLX_RULE_##NAME) return MINOR;
  FLX_RULES_ADDED(FLX_RULE_SINCE_)
#undef FLX_RULE_SINCE_
  return 0;
}

}  // namespace flx::rules
