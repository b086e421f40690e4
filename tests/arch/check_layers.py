#!/usr/bin/env python3
"""Architecture checks that a reviewer would otherwise do by hand:

1. No backend table is called outside the dispatch layer (src/backend/):
   no other file of libflx, the apps, the benchmarks or the tests reads a
   table's `ctx`, looks up a table, or names the compute or comm table. Backends
   (backends/), test plugins (tests/plugins/*.c) and test backends
   (tests/plugins/*_backend.cpp, which wrap the CPU backend's tables)
   implement tables, as does the consumer project's out-of-tree plugin
   (tests/consumer/plugin/), and the frozen headers of older ABI versions
   (tests/plugins/abi_*/) define them; they are not callers.
2. libflx's core (src/) includes no GPU header and no backend's internals
   other than the built-in CPU backend's entry and the shared op list.
3. Public headers (include/flx/*.hpp) do not expose the ABI (backend.h or
   op codes) to user programs.
4. Only flx::distributed (src/distributed/) includes MPI, and no public
   header does: a program that does not use it neither links nor loads MPI.
5. flx::distributed (src/distributed/) includes nothing of libflx's but the
   public headers (flx/...) and its declared internal interface
   (internal/distributed_interface.hpp), besides its own headers
   (distributed/...): no private header of libflx.
6. libflx's include path (src/ and backends/) has no folder name twice, so
   an include such as "common/x.hpp" names one place.
7. No public header (include/flx/) is over 400 lines.
8. Each header of the backend ABI (include/flx/backend*.h) defines at most
   one table (the core table flx_backend, or one op table).
9. No file of src/layers/ asks which kernels a backend has (a fused kernel
   or a composition is src/ops/'s choice, ops::use_kernel): no backend
   table, no has_* or supports query, no recording depth there.
10. The CPU backend (backends/cpu/) includes nothing of libflx's sources:
   only its own headers, the public ones (flx/...) and the shared backend
   helpers (backend_common/...), as a plugin; it is built as a target of its
   own without src/ on its include path. And libflx (src/) includes of the
   CPU backend only its entry, cpu/cpu_backend.hpp.

Rules 7 to 10 are checked on planted violations too: `check_layers.py
--self-test` builds a small tree for each, once clean and once with the
violation, and fails unless the rule passes the one and reports the other.

Usage: check_layers.py REPO_ROOT | check_layers.py --self-test
"""
import re
import sys
import tempfile
from pathlib import Path


def sources(root, top, suffixes=(".cpp", ".hpp", ".h", ".c")):
    base = root / top
    return [p for p in base.rglob("*") if p.suffix in suffixes] if base.exists() else []


def quoted_includes(path):
    for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
        m = re.match(r'\s*#\s*include\s*"([^"]+)"', line)
        if m:
            yield n, m.group(1), line.strip()


MAX_PUBLIC_HEADER_LINES = 400


def rule_public_header_length(root):
    out = []
    for p in sources(root, "include/flx", (".hpp", ".h")):
        n = len(p.read_text(errors="replace").splitlines())
        if n > MAX_PUBLIC_HEADER_LINES:
            out.append(f"{p.relative_to(root).as_posix()}: {n} lines, more than a public header's "
                       f"{MAX_PUBLIC_HEADER_LINES}: split it")
    return out


TABLE_END = re.compile(r"^\}\s*(flx_\w+_table|flx_backend)\s*;", re.M)


def rule_one_table_per_abi_header(root):
    out = []
    for p in sorted((root / "include" / "flx").glob("backend*.h")):
        tables = TABLE_END.findall(p.read_text(errors="replace"))
        if len(tables) > 1:
            out.append(f"{p.relative_to(root).as_posix()}: defines {len(tables)} tables ({', '.join(tables)}); "
                       "the ABI keeps one table a header")
    return out


KERNEL_QUERY = re.compile(r"\b(has_\w+|recording_depth|use_kernel|fused_supports|FLX_HAS_FN|get_table)\s*\(|\bdetail::be\s*\(|"
                          r"\bflx_\w+_table\b|\bbackend\.h\b")


def rule_layers_ask_no_kernels(root):
    out = []
    for p in sources(root, "src/layers"):
        rel = p.relative_to(root).as_posix()
        for n, line in enumerate(p.read_text(errors="replace").splitlines(), 1):
            code = line.split("//")[0]
            if KERNEL_QUERY.search(code):
                out.append(f"{rel}:{n}: a layer asks which kernels a backend has (src/ops/ chooses): {line.strip()}")
    return out


CPU_ALLOWED = re.compile(r"(cpu_[\w.]+|flx/[\w./]+|backend_common/[\w./]+)$")


def rule_cpu_backend_walls(root):
    out = []
    for p in sources(root, "backends/cpu"):
        rel = p.relative_to(root).as_posix()
        for n, inc, line in quoted_includes(p):
            if not CPU_ALLOWED.fullmatch(inc):
                out.append(f"{rel}:{n}: the CPU backend includes what is not its own, public or backend_common/: "
                           f"{line}")
    for p in sources(root, "src"):
        rel = p.relative_to(root).as_posix()
        for n, inc, line in quoted_includes(p):
            if inc.startswith("cpu/") and inc != "cpu/cpu_backend.hpp":
                out.append(f"{rel}:{n}: libflx includes the CPU backend's internals (only its entry, "
                           f"cpu/cpu_backend.hpp): {line}")
    return out


NEW_RULES = [rule_public_header_length, rule_one_table_per_abi_header, rule_layers_ask_no_kernels,
             rule_cpu_backend_walls]


def self_test():
    """Each new rule passes a clean tree and reports its planted violation."""
    clean = {
        "include/flx/small.hpp": "#pragma once\n" + "// line\n" * 10,
        "include/flx/backend.h": "typedef struct flx_backend {\n  int x;\n} flx_backend;\n",
        "include/flx/backend_dnn.h": "typedef struct flx_dnn_table {\n  int y;\n} flx_dnn_table;\n",
        "src/layers/norm.cpp": '#include "ops/ops_internal.hpp"\nTensor f(const Tensor& x) { return ops::group_norm(x); }\n',
        "src/devices/registry.cpp": '#include "cpu/cpu_backend.hpp"\n',
        "backends/cpu/cpu_map.cpp": '#include "cpu_common.hpp"\n#include "flx/dtype.hpp"\n'
                                    '#include "backend_common/saturating_cast.hpp"\n#include <vector>\n',
    }
    plants = {
        rule_public_header_length: ("include/flx/long.hpp", "#pragma once\n" + "// line\n" * 401),
        rule_one_table_per_abi_header: ("include/flx/backend_dnn.h",
                                        "typedef struct flx_dnn_table {\n} flx_dnn_table;\n"
                                        "typedef struct flx_comm_table {\n} flx_comm_table;\n"),
        rule_layers_ask_no_kernels: ("src/layers/norm.cpp",
                                     "if (autograd::recording_depth() < 2 && ops::has_fused_group_norm(x)) {}\n"),
        rule_cpu_backend_walls: ("backends/cpu/cpu_map.cpp", '#include "ops/ops_internal.hpp"\n'),
    }
    failures = []
    for rule, (path, text) in plants.items():
        for planted in (False, True):
            with tempfile.TemporaryDirectory() as d:
                tree = Path(d)
                files = dict(clean)
                if planted:
                    files[path] = text
                for rel, body in files.items():
                    (tree / rel).parent.mkdir(parents=True, exist_ok=True)
                    (tree / rel).write_text(body)
                found = rule(tree)
                if planted and not found:
                    failures.append(f"{rule.__name__} missed its planted violation in {path}")
                if not planted and found:
                    failures.append(f"{rule.__name__} reported a clean tree: {found}")
    # libflx including a CPU internal, the other direction of rule 10
    with tempfile.TemporaryDirectory() as d:
        tree = Path(d)
        (tree / "src/ops").mkdir(parents=True)
        (tree / "src/ops/x.cpp").write_text('#include "cpu/cpu_pool.hpp"\n')
        if not rule_cpu_backend_walls(tree):
            failures.append("rule_cpu_backend_walls missed src/ including cpu/cpu_pool.hpp")
    if failures:
        print("\n".join(failures))
        sys.exit(1)
    print(f"ok: {len(plants)} rules pass their clean trees and report their planted violations")


if len(sys.argv) > 1 and sys.argv[1] == "--self-test":
    self_test()
    sys.exit(0)

root = Path(sys.argv[1])
problems = []

RAW_CALL = re.compile(r"(->|\.)ctx\b|\bget_table\b|\bflx_(compute|comm)_table\b")
callers = [p for d in ("src", "apps", "bench", "tests", "examples") for p in (root / d).rglob("*")
           if p.suffix in (".cpp", ".hpp", ".h", ".cc")]
for p in callers:
    rel = p.relative_to(root).as_posix()
    # (test_fused_table.cpp stands a plugin of minor 13 in: the CPU's tables without the fused one)
    if rel.startswith(("src/backend/", "tests/plugins/abi_", "tests/consumer/plugin/", "tests/test_fused_table.cpp")) or re.fullmatch(r"tests/plugins/\w+_backend\.cpp", rel):
        continue
    for n, line in enumerate(p.read_text(errors="replace").splitlines(), 1):
        code = line.split("//")[0]
        if RAW_CALL.search(code):
            problems.append(f"{rel}:{n}: a backend table used outside src/backend/: {line.strip()}")

GPU_HEADER = re.compile(r'#\s*include\s*[<"](cuda|cublas|cudnn|nccl|CL/|clblast|hip/)')
for p in (root / "src").rglob("*"):
    if p.suffix not in (".cpp", ".hpp", ".h"):
        continue
    rel = p.relative_to(root).as_posix()
    for n, line in enumerate(p.read_text(errors="replace").splitlines(), 1):
        if GPU_HEADER.search(line):
            problems.append(f"{rel}:{n}: libflx's core includes a GPU header: {line.strip()}")
        m = re.search(r'#\s*include\s*"(opencl|cuda)/', line)
        if m:
            problems.append(f"{rel}:{n}: libflx includes a plugin's internals: {line.strip()}")

for p in (root / "include" / "flx").rglob("*.hpp"):
    rel = p.relative_to(root).as_posix()
    for n, line in enumerate(p.read_text(errors="replace").splitlines(), 1):
        if re.search(r'#\s*include\s*"flx/backend', line) or re.search(r"\bFLX_(OP|REDUCE)_[A-Z]", line.split("//")[0]):
            problems.append(f"{rel}:{n}: a public header exposes the backend ABI: {line.strip()}")

MPI_HEADER = re.compile(r'#\s*include\s*[<"]mpi(-ext)?\.h[>"]')
for p in list((root / "src").rglob("*")) + list((root / "include").rglob("*")):
    if p.suffix not in (".cpp", ".hpp", ".h"):
        continue
    rel = p.relative_to(root).as_posix()
    if rel.startswith("src/distributed/"):
        continue
    for n, line in enumerate(p.read_text(errors="replace").splitlines(), 1):
        if MPI_HEADER.search(line):
            problems.append(f"{rel}:{n}: MPI included outside src/distributed/: {line.strip()}")

DIST_ALLOWED = re.compile(r'(flx/|distributed/|internal/distributed_interface\.hpp$)')
for p in (root / "src" / "distributed").rglob("*"):
    if p.suffix not in (".cpp", ".hpp", ".h"):
        continue
    rel = p.relative_to(root).as_posix()
    for n, line in enumerate(p.read_text(errors="replace").splitlines(), 1):
        m = re.match(r'\s*#\s*include\s*"([^"]+)"', line)
        if m and not DIST_ALLOWED.match(m.group(1)):
            problems.append(f"{rel}:{n}: flx::distributed includes a private header of libflx (use "
                            f"internal/distributed_interface.hpp): {line.strip()}")

folders = {}
for top in ("src", "backends"):
    for d in (root / top).iterdir():
        if d.is_dir():
            folders.setdefault(d.name, []).append(f"{top}/{d.name}")
for name, where in sorted(folders.items()):
    if len(where) > 1:
        problems.append(f"{' and '.join(where)}: two folders named {name}/ on libflx's include path")

for rule in NEW_RULES:
    problems += rule(root)

if problems:
    print("\n".join(problems))
    sys.exit(1)
print(f"ok: {len(callers)} files checked; tables are called only in src/backend/")
