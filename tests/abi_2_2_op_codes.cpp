// The map op codes of backend ABI 2.2, from its header as it was
// (tests/plugins/abi_2_2, a frozen copy), for tests/test_op_list.cpp. In a
// file of its own: the current op list defines the same macros.
#include <vector>

#include "plugins/abi_2_2/flx/backend_ops.h"

std::vector<int> abi_2_2_op_codes() {
#define FLX_ABI_2_2_CODE_(NAME, CODE, ...) CODE,
  return {FLX_MAP_OPS(FLX_ABI_2_2_CODE_)};
#undef FLX_ABI_2_2_CODE_
}
