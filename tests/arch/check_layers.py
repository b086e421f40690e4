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

Usage: check_layers.py REPO_ROOT
"""
import re
import sys
from pathlib import Path

root = Path(sys.argv[1])
problems = []

RAW_CALL = re.compile(r"(->|\.)ctx\b|\bget_table\b|\bflx_(compute|comm)_table\b")
callers = [p for d in ("src", "apps", "bench", "tests", "examples") for p in (root / d).rglob("*")
           if p.suffix in (".cpp", ".hpp", ".h", ".cc")]
for p in callers:
    rel = p.relative_to(root).as_posix()
    if rel.startswith(("src/backend/", "tests/plugins/abi_", "tests/consumer/plugin/")) or re.fullmatch(r"tests/plugins/\w+_backend\.cpp", rel):
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

if problems:
    print("\n".join(problems))
    sys.exit(1)
print(f"ok: {len(callers)} files checked; tables are called only in src/backend/")
