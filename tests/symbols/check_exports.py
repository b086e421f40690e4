#!/usr/bin/env python3
"""libflx exports only its public API (docs/architecture.md, "What libflx
exports"): every symbol of its dynamic symbol table (nm -DC --defined-only)
must be

- in namespace flx (the C++ runtime's records of a class: its typeinfo,
  typeinfo name, vtable, VTT and thunks, count as the class's), and
- named after an FLX_API declaration: a class marked FLX_API, or a
  function marked FLX_API, in the public headers (include/flx/) or in the
  internal interface of flx::distributed (src/internal/distributed_interface.hpp,
  namespace flx::internal). An entity of flx::internal must be declared
  there, and one of flx::detail in a public header.

Instantiations of the standard library's templates (std::, __gnu_cxx::)
are the C++ runtime's: libstdc++ declares its namespace with default
visibility, so the compiler exports the weak (W, V) and unique (u) copies
it emits, and they must stay exported so that their statics (the atomic
wait pool, to_chars' digits, ...) are one per process. They are allowed
when weak or unique and when every flx name in them is a public class.

The other way round, the public headers' non-template classes and
functions (at namespace scope) must carry FLX_API: one without it would be
hidden in libflx, and a program using it would not link.

Usage: check_exports.py LIBFLX REPO_ROOT
"""
import re
import subprocess
import sys
from pathlib import Path

lib, root = Path(sys.argv[1]), Path(sys.argv[2])

# ---- what FLX_API marks --------------------------------------------------
CLASS = re.compile(r"\b(?:class|struct)\s+FLX_API\s+(\w+)")
FUNC = re.compile(r"FLX_API\s+([^;{]*?)\b(operator\s*[^\s(]+|~?\w+)\s*\(", re.S)


def marked(paths):
    classes, functions = set(), set()
    for p in paths:
        text = p.read_text(errors="replace")
        text = re.sub(r"//[^\n]*", "", text)
        for ns in re.findall(r"namespace\s+([\w:]+)\s*\{", text):
            namespaces.update(ns.split("::"))
        classes |= set(CLASS.findall(text))
        # The activations' classes are made by a macro whose struct is FLX_API.
        classes |= set(re.findall(r"^FLX_ACTIVATION\((\w+),", text, re.M))
        for m in FUNC.finditer(text):
            if not re.match(r"\s*(class|struct)\b", m.group(1)):
                functions.add(re.sub(r"\s+", "", m.group(2)))
    return classes, functions


namespaces = set()  # every namespace name the headers open (flx, detail, datasets, ...)
public = sorted((root / "include" / "flx").rglob("*.hpp"))
# (and the autograd piece it includes)
interface = [root / "src" / "internal" / "distributed_interface.hpp", root / "src" / "internal" / "gradient_observer.hpp"]
pub_classes, pub_functions = marked(public)
int_classes, int_functions = marked(interface)

# ---- libflx's dynamic symbols ----------------------------------------------
out = subprocess.run(["nm", "-DC", "--defined-only", str(lib)], capture_output=True, text=True, check=True).stdout
symbols = []  # (nm's type letter, demangled name)
for line in out.splitlines():
    parts = line.split(" ", 2)
    if len(parts) < 3 or parts[1] in ("A",):  # version nodes (absolute)
        continue
    symbols.append((parts[1], parts[2]))

RUNTIME = re.compile(r"^(typeinfo name for |typeinfo for |vtable for |VTT for |construction vtable for "
                     r"|non-virtual thunk to |virtual thunk to |covariant return thunk to |guard variable for )")


def strip_templates(name):
    """Drop <...> (template arguments) and the parameter list."""
    out, depth = [], 0
    for i, ch in enumerate(name):
        if ch == "<" and not name[max(0, i - 8):i].endswith("operator"):
            depth += 1
        elif ch == ">" and depth:
            depth -= 1
        elif depth == 0:
            if ch == "(" and out and not "".join(out).endswith("operator"):
                break
            out.append(ch)
    return "".join(out).strip()


def components(qualified):
    return [c for c in re.split(r"::", qualified) if c]


def check(kind, sym):
    """None when allowed, else the reason."""
    sym = re.sub(r"\[abi:\w+\]", "", sym)  # libstdc++'s ABI tags (functions returning std::string)
    base = RUNTIME.sub("", sym)
    while RUNTIME.match(base):
        base = RUNTIME.sub("", base)
    # the leading qualified name (a return type may precede it in templates)
    name = strip_templates(base)
    name = name.split(" ")[-1] if " " in name and not name.startswith("flx::") else name
    if name.startswith(("std::", "__gnu_cxx::")):
        if kind not in ("W", "V", "u"):
            return "a strong definition in the standard library's namespace"
        bad = [n for n in re.findall(r"flx::(?:\w+::)*(\w+)", base) if n not in pub_classes]
        return f"a standard-library instantiation over flx's non-public {bad}" if bad else None
    if not name.startswith("flx::"):
        return "outside namespace flx"
    parts = components(name)
    ns = parts[1] if len(parts) > 2 else ""
    if ns == "internal":
        if any(p in int_classes for p in parts[2:]) or parts[-1] in int_functions:
            return None
        return "in flx::internal but not declared FLX_API in src/internal/ (distributed_interface.hpp, gradient_observer.hpp)"
    if any(p in pub_classes for p in parts[1:]):
        return None
    last = parts[-1]
    if any(p not in namespaces for p in parts[:-1]):
        return "in a namespace that no public header opens"
    if last in pub_functions or re.sub(r"\s+", "", last) in pub_functions:
        return None
    return "names no FLX_API class or function of the public headers"


bad = [(s, why) for kind, s in symbols if (why := check(kind, s))]

# ---- and the other way: what the public headers declare carries FLX_API ----
# A class, or a function declared here and defined in libflx, without
# FLX_API is hidden in libflx and a program using it fails to link. Checked
# in the headers' layout (declarations at column 0, one namespace level
# deep is not indented): a non-template class or struct definition, or a
# non-inline, non-template function declaration, must carry FLX_API.
DECL_CLASS = re.compile(r"^(struct|class) (\w+)( final)?( : [^{]*)?\s*\{")
DECL_FUNC = re.compile(r"^(?!(FLX_API|template|inline|constexpr|using|static_assert|return|namespace|class|struct|enum|"
                       r"typedef|FLX_|concept|extern|friend)\b)[A-Za-z][\w:<>,*& ]*[ &*]~?\w+\(.*\)( const)?;")
unmarked = []
for p in public:
    lines = p.read_text(errors="replace").split("\n")
    for i, line in enumerate(lines):
        before = [lines[j] for j in range(i - 1, -1, -1) if lines[j].strip() and not lines[j].strip().startswith("//")]
        prev = before[0].lstrip() if before else ""
        if prev.startswith("requires") and len(before) > 1:  # template <...> / requires ... / declaration
            prev = before[1].lstrip()
        if prev.startswith("template") or "= delete" in line:
            continue
        code = line.split("//")[0].rstrip()
        if DECL_CLASS.match(code) or DECL_FUNC.match(code):
            unmarked.append(f"{p.relative_to(root)}:{i + 1}: declared without FLX_API: {line.strip()}")

print(f"libflx exports {len(symbols)} symbols; {len(pub_classes)} FLX_API classes and "
      f"{len(pub_functions)} FLX_API function names in the public headers, "
      f"{len(int_classes) + len(int_functions)} in the internal interface")
for u in unmarked:
    print(u)
if bad:
    for s, why in bad[:200]:
        print(f"not public API: {s}  ({why})")
    print(f"{len(bad)} exported symbols are not public API")
if bad or unmarked:
    sys.exit(1)
print("ok: every exported symbol is public API or the declared internal interface, and the public "
      "headers' classes and functions carry FLX_API")
