// A kernel family's source as its programs are built from it: the prelude
// (kernels/prelude.cl), then as the family needs them the element functions
// and constants of the op list (include/flx/backend_elem.h and backend_ops.h),
// all embedded as text at build time (CMakeLists.txt) and the op switches generated from FLX_MAP_OPS, then the
// family's kernels. Adding an op to the list adds its case here with no edit
// to this backend.
#include <string>

#include "backend_common/map_op_info.hpp"
#include "ocl_common.hpp"
#include "ocl_embedded.hpp"

namespace flx_ocl {
namespace {

namespace mo = flx::map_ops;

// One `case` line per op, its body as written in the list (stringified
// before any macro expansion, so K(...) and the FLX_* constants reach the
// OpenCL compiler as they are).
struct OpCase {
  int code;
  const char* line;
};
#define FLX_OCL_CASE_(NAME, CODE, ARITY, CLASS, GRAD, BODY) {CODE, "    case " #CODE ": return " #BODY ";\n"},
constexpr OpCase kCases[] = {FLX_MAP_OPS(FLX_OCL_CASE_)};
#undef FLX_OCL_CASE_

// A switch over the ops `pick` selects. Bodies of FLOAT-class ops use
// floating functions (exp, sigm, ...) and are compiled only into the
// floating programs: the host never sends them another dtype.
template <class Pick>
std::string op_switch(const char* signature, const char* fallback, Pick pick) {
  std::string s = std::string("inline ") + signature + " {\n  switch (op) {\n";
  bool in_float = false;  // inside an `#if IS_FLOAT` run of cases
  for (const OpCase& c : kCases) {
    if (!pick(mo::info(c.code))) continue;
    const bool floating = mo::info(c.code).cls == mo::OpClass::Float;
    if (floating != in_float) s += floating ? "#if IS_FLOAT\n" : "#endif\n";
    in_float = floating;
    s += c.line;
  }
  if (in_float) s += "#endif\n";
  return s + "  }\n  return " + fallback + ";\n}\n";
}

// The op switches, for the families that ask for them.
std::string op_switches() {
  // Unary and binary ops (not comparisons, not WHERE): CT from x, y, a, b.
  std::string s = op_switch("CT op_value(int op, CT x, CT y, CT a, CT b)", "K(0)", [](const mo::OpInfo& i) {
    return (i.arity == 1 || i.arity == 2) && i.cls != mo::OpClass::Cmp;
  });
  return s + op_switch("uchar op_cmp(int op, CT x, CT y)", "0",
                       [](const mo::OpInfo& i) { return i.cls == mo::OpClass::Cmp; });
}

}  // namespace

std::string program_source(const KernelFamily& family) {
  std::string s = embedded::prelude_cl;
  if (family.needs != KernelNeeds::kPrelude) {
    // How backend_elem.h is compiled as OpenCL C (see its header comment).
    s += "\n#define FLX_ELEM_FN inline\n#define FLX_ELEM_IS_FLOAT IS_FLOAT\n";
    s += "\n// ---- include/flx/backend_ops.h (the constants the bodies use) ----\n";
    s += embedded::backend_ops_h;
    s += "\n// ---- include/flx/backend_elem.h ----\n";
    s += embedded::backend_elem_h;
  }
  if (family.needs == KernelNeeds::kOpSwitches) {
    s += "\n// ---- op switches generated from FLX_MAP_OPS ----\n";
    s += op_switches();
  }
  s += "\n// ---- the ";
  s += family.name;
  s += " kernels ----\n";
  for (const char* k : family.kernels) s += k;
  return s;
}

}  // namespace flx_ocl
