#!/usr/bin/env python3
"""Check docs/architecture.md against the code it describes.

The page must

1. state the backend ABI's version as `ABI <major>.<minor>`, once or more but
   always the same, equal to FLX_BACKEND_ABI_MAJOR and FLX_BACKEND_ABI_MINOR
   of include/flx/backend_types.h;
2. name every layer header, include/flx/layers/*.hpp, by its path;
3. name every folder directly under src/ as `src/<folder>/` (in backticks);
4. have a table under a heading "Fused ops", with the columns
   | op | backends with a kernel | fallback |, holding a row for each fused
   op of the ABI. The fused ops are read from the code: the call families
   of the dnn table (the function-pointer members of flx_dnn_table in
   include/flx/backend_dnn.h, grouped by their prefix before the first
   underscore: conv_forward, conv_backward_data, ... are family conv) and
   the compute table's gemm_epilogue and rule_step (members of
   flx_compute_table in include/flx/backend_compute.h).

A row's first cell is one name in backticks: a call of either table
(`conv_forward`, `gemm_epilogue`) or a dnn family written `<prefix>_*`
(`groupnorm_*`). A family is covered by a row naming it or any of its calls.
A row naming neither is reported too (a call renamed in the ABI).

`--self-test` builds a small fake repository in a temporary folder, checks
that its clean page passes, and that each kind of problem (a wrong ABI
minor, a missing layer header, a missing src/ folder, a missing fused-op
row, and a few more) is reported when planted.

usage: check_architecture.py REPO_ROOT | check_architecture.py --self-test
"""
import re
import sys
import tempfile
from pathlib import Path

PAGE = "docs/architecture.md"
TYPES_H = "include/flx/backend_types.h"
DNN_H = "include/flx/backend_dnn.h"
COMPUTE_H = "include/flx/backend_compute.h"
FUSED_H = "include/flx/backend_fused.h"
LAYERS_DIR = "include/flx/layers"
COMPUTE_FUSED = ("gemm_epilogue", "rule_step")
COLUMNS = ["op", "backends with a kernel", "fallback"]


def strip_comments(text):
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.sub(r"//[^\n]*", " ", text)


def table_calls(root, header, struct):
    """The function-pointer members of `typedef struct <struct> {...} <struct>;`
    in header, in order; None (and a problem) when the header or the struct
    is missing."""
    path = root / header
    if not path.is_file():
        return None, f"{header}: missing (the ABI's {struct} is read from it)"
    text = strip_comments(path.read_text(errors="replace"))
    m = re.search(r"typedef\s+struct\s+%s\s*\{(.*?)\}\s*%s\s*;" % (struct, struct), text, re.S)
    if not m:
        return None, f"{header}: no `typedef struct {struct} {{ ... }} {struct};`"
    return re.findall(r"\(\s*\*\s*(\w+)\s*\)\s*\(", m.group(1)), None


def family(call):
    return call.split("_")[0]


def fused_ops_of_their_own(root):
    """The ops of FLX_FUSED_OPS (backend_fused.h) that no older call runs
    (table `none`), by their lower-case names: each needs its own row."""
    path = root / FUSED_H
    if not path.is_file():
        return []
    text = path.read_text(errors="replace")
    return [m.group(1).lower() for m in re.finditer(r"X\(\s*(\w+)\s*,\s*\d+\s*,\s*\w+\s*,\s*none\s*,", text)]


def code_abi(root):
    path = root / TYPES_H
    if not path.is_file():
        return None, f"{TYPES_H}: missing (the ABI's version is read from it)"
    text = path.read_text(errors="replace")
    major = re.search(r"#\s*define\s+FLX_BACKEND_ABI_MAJOR\s+(\d+)", text)
    minor = re.search(r"#\s*define\s+FLX_BACKEND_ABI_MINOR\s+(\d+)", text)
    if not (major and minor):
        return None, f"{TYPES_H}: no FLX_BACKEND_ABI_MAJOR / FLX_BACKEND_ABI_MINOR"
    return (int(major.group(1)), int(minor.group(1))), None


def fused_table(lines):
    """(header cells, [(line number, cells)]) of the first table after the
    heading "Fused ops" and before the next heading; None when there is no
    such heading, ([], []) when it holds no table."""
    start = next((i for i, line in enumerate(lines) if re.fullmatch(r"#+\s+Fused ops\s*", line.strip())), None)
    if start is None:
        return None
    cells = lambda line: [c.strip() for c in line.strip().strip("|").split("|")]
    i = start + 1
    while i < len(lines) and not lines[i].lstrip().startswith(("|", "#")):
        i += 1
    if i >= len(lines) or not lines[i].lstrip().startswith("|"):
        return [], []
    header = cells(lines[i])
    rows = []
    i += 2  # the header and the |---| line
    while i < len(lines) and lines[i].lstrip().startswith("|"):
        rows.append((i + 1, cells(lines[i])))
        i += 1
    return header, rows


def check(root):
    """The page's problems, as (kind, message) pairs, and a summary of what
    was checked."""
    root = Path(root)
    problems = []
    page_path = root / PAGE
    if not page_path.is_file():
        return [("page", f"{PAGE}: missing")], ""
    page = page_path.read_text(encoding="utf-8", errors="replace")
    lines = page.split("\n")

    # 1. the ABI's version
    version, err = code_abi(root)
    if err:
        problems.append(("abi", err))
    stated = sorted({(int(a), int(b)) for a, b in re.findall(r"\bABI (\d+)\.(\d+)\b", page)})
    if not stated:
        problems.append(("abi", f"{PAGE}: states no ABI version (write `ABI <major>.<minor>`, as {TYPES_H} has it)"))
    elif len(stated) > 1:
        problems.append(("abi", f"{PAGE}: states several ABI versions: "
                                + ", ".join(f"ABI {a}.{b}" for a, b in stated)))
    elif version and stated[0] != version:
        problems.append(("abi", f"{PAGE}: states ABI {stated[0][0]}.{stated[0][1]}; {TYPES_H} says "
                                f"{version[0]}.{version[1]} (FLX_BACKEND_ABI_MAJOR, FLX_BACKEND_ABI_MINOR)"))

    # 2. the layer headers
    headers = sorted(p.relative_to(root).as_posix() for p in (root / LAYERS_DIR).glob("*.hpp"))
    for h in headers:
        if not re.search(r"(?<![\w/.-])" + re.escape(h) + r"(?![\w.])", page):
            problems.append(("layer", f"{PAGE}: does not name the layer header {h}"))

    # 3. the folders of src/
    src = root / "src"
    folders = sorted(d.name for d in src.iterdir()
                     if d.is_dir() and not d.name.startswith(".") and d.name != "__pycache__") if src.is_dir() else []
    for f in folders:
        if f"`src/{f}/`" not in page:
            problems.append(("src", f"{PAGE}: does not name the folder `src/{f}/`"))

    # 4. the fused ops
    dnn, err = table_calls(root, DNN_H, "flx_dnn_table")
    if err:
        problems.append(("fused", err))
    compute, err = table_calls(root, COMPUTE_H, "flx_compute_table")
    if err:
        problems.append(("fused", err))
    dnn, compute = dnn or [], compute or []
    families = list(dict.fromkeys(family(c) for c in dnn))
    for op in COMPUTE_FUSED:
        if compute and op not in compute:
            problems.append(("fused", f"{COMPUTE_H}: flx_compute_table has no {op}; "
                                      "update COMPUTE_FUSED in tests/docs/check_architecture.py"))
    own = fused_ops_of_their_own(root)
    table = fused_table(lines)
    names = set()
    if table is None:
        problems.append(("table", f'{PAGE}: no heading "Fused ops" (with a table | op | backends with a kernel | '
                                  "fallback |)"))
    else:
        header, rows = table
        if [c.lower() for c in header] != COLUMNS:
            problems.append(("table", f'{PAGE}: the table under "Fused ops" must have the columns | '
                                      + " | ".join(COLUMNS) + f" |; found {header or 'no table'}"))
        for n, cells in rows:
            m = re.fullmatch(r"`(\w+(?:_\*)?)`", cells[0] if cells else "")
            if not m:
                problems.append(("table", f"{PAGE}:{n}: a row of \"Fused ops\" must begin with one op's name in "
                                          f"backticks (`conv_forward`, `groupnorm_*`); found {cells[0] if cells else ''!r}"))
                continue
            name = m.group(1)
            names.add(name)
            known = name in dnn or name in compute or name in own or (name.endswith("_*") and name[:-2] in families)
            if not known:
                problems.append(("table", f"{PAGE}:{n}: `{name}` is no call of flx_dnn_table or flx_compute_table, "
                                          "nor a family `<prefix>_*` of the dnn table"))
    for fam in families:
        if not any(n == fam + "_*" or (n in dnn and family(n) == fam) for n in names):
            calls = ", ".join(c for c in dnn if family(c) == fam)
            problems.append(("fused", f'{PAGE}: "Fused ops" has no row for the dnn family {fam} ({calls}); '
                                      f"add | `{fam}_*` | ... | or a row per call"))
    for op in COMPUTE_FUSED:
        if op in compute and op not in names:
            problems.append(("fused", f'{PAGE}: "Fused ops" has no row for the compute table\'s {op}'))
    for op in own:
        if op not in names:
            problems.append(("fused", f'{PAGE}: "Fused ops" has no row for `{op}` (FLX_FUSED_OPS in {FUSED_H})'))

    summary = (f"{PAGE} states ABI {version[0]}.{version[1]}, " if version else f"{PAGE} ") + \
        f"names {len(headers)} layer headers and {len(folders)} folders of src/, and has a row for each of " \
        f"{len(families) + len([o for o in COMPUTE_FUSED if o in compute]) + len(own)} fused ops"
    return problems, summary


# ---- the self-test ----------------------------------------------------------------

FAKE = {
    TYPES_H: "#define FLX_BACKEND_ABI_MAJOR 2u\n#define FLX_BACKEND_ABI_MINOR 7u\n",
    DNN_H: "typedef struct flx_dnn_table {\n"
           "  uint32_t struct_size;\n"
           "  /* bytes of workspace; int (*not_a_call)(void) in a comment */\n"
           "  int (*conv_workspace)(void* ctx, int dev, uint64_t* bytes);\n"
           "  int (*conv_forward)(void* ctx, int dev, flx_stream s);\n"
           "  int (*conv_backward_data)(void* ctx, int dev, flx_stream s);\n"
           "  int (*pool_forward)(void* ctx, int dev, flx_stream s);\n"
           "#if FLX_BACKEND_TARGET_MINOR >= 7\n"
           "  int (*groupnorm_forward)(void* ctx, int dev, flx_stream s);\n"
           "  int (*groupnorm_backward)(void* ctx, int dev, flx_stream s);\n"
           "#endif\n"
           "} flx_dnn_table;\n",
    COMPUTE_H: "typedef struct flx_compute_table {\n"
               "  uint32_t struct_size;\n"
               "  int (*fill)(void* ctx, int dev, flx_stream s);\n"
               "  int (*gemm_epilogue)(void* ctx, int dev, flx_stream s);\n"
               "  int (*rule_step)(void* ctx, int dev, flx_stream s);\n"
               "} flx_compute_table;\n",
    "include/flx/layers/conv.hpp": "#pragma once\n",
    "include/flx/layers/show.hpp": "#pragma once\n",
    "src/ops/dense.cpp": "\n",
    "src/layers/conv.cpp": "\n",
    PAGE: "# Architecture\n\n"
          "The ABI is at ABI 2.7; `include/flx/backend_types.h` says so.\n\n"
          "Layers: `include/flx/layers/conv.hpp`, `include/flx/layers/show.hpp`.\n\n"
          "Folders: `src/ops/`, `src/layers/`.\n\n"
          "### Fused ops\n\n"
          "Which backends have a kernel.\n\n"
          "| op | backends with a kernel | fallback |\n"
          "| --- | --- | --- |\n"
          "| `conv_forward` | CPU | none |\n"
          "| `pool_*` | CPU | none |\n"
          "| `groupnorm_*` | CPU | batchnorm or maps |\n"
          "| `gemm_epilogue` | CPU | the unfused ops |\n"
          "| `rule_step` | CPU | NotImplemented |\n\n"
          "## Next\n",
}


def planted(files, path, old=None, new=""):
    """files with `path` changed: `old` replaced by `new`, or (old None) the
    file set to `new`."""
    out = dict(files)
    if old is None:
        out[path] = new
    else:
        assert old in out[path], (path, old)
        out[path] = out[path].replace(old, new)
    return out


PLANTS = [
    # (what, the files, the kind of problem it must raise)
    ("a wrong ABI minor", planted(FAKE, PAGE, "ABI 2.7", "ABI 2.6"), "abi"),
    ("a new ABI minor in the code", planted(FAKE, TYPES_H, "MINOR 7u", "MINOR 8u"), "abi"),
    ("no ABI version on the page", planted(FAKE, PAGE, "ABI 2.7", "ABI two"), "abi"),
    ("two ABI versions on the page", planted(FAKE, PAGE, "Folders:", "Once ABI 2.6. Folders:"), "abi"),
    ("a missing layer header", planted(FAKE, "include/flx/layers/upsample.hpp", None, "#pragma once\n"), "layer"),
    ("a missing src folder", planted(FAKE, "src/io/files.cpp", None, "\n"), "src"),
    ("a src folder named without its slash", planted(FAKE, PAGE, "`src/ops/`", "`src/ops`"), "src"),
    ("a missing fused-op row (a row removed)", planted(FAKE, PAGE, "| `pool_*` | CPU | none |\n", ""), "fused"),
    ("a missing fused-op row (a new dnn family)",
     planted(FAKE, DNN_H, "} flx_dnn_table;", "  int (*attention_forward)(void* ctx, int dev, flx_stream s);\n"
                                              "} flx_dnn_table;"), "fused"),
    ("a missing fused-op row (rule_step)", planted(FAKE, PAGE, "| `rule_step` | CPU | NotImplemented |\n", ""),
     "fused"),
    ("a missing fused-op row (an op of the fused table's own)",
     dict(FAKE, **{FUSED_H: "#define FLX_FUSED_OPS(X) \\\n  X(LPNORM_POOL, 17, flx_pool_desc, none, none)\n"}),
     "fused"),
    ("a row naming no call", planted(FAKE, PAGE, "`pool_*`", "`pooling_*`"), "table"),
    ("no Fused ops heading", planted(FAKE, PAGE, "### Fused ops", "### Kernels"), "table"),
]


def write_tree(base, files):
    for rel, body in files.items():
        p = base / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(body, encoding="utf-8")


def self_test():
    failures = []
    with tempfile.TemporaryDirectory() as d:
        write_tree(Path(d), FAKE)
        found, _ = check(d)
        if found:
            failures.append("the clean fake page is reported: " + "; ".join(m for _, m in found))
    for what, files, kind in PLANTS:
        with tempfile.TemporaryDirectory() as d:
            write_tree(Path(d), files)
            found, _ = check(d)
            if not any(k == kind for k, _ in found):
                failures.append(f"{what}: not reported as a problem of kind {kind!r}; found "
                                + ("; ".join(f"{k}: {m}" for k, m in found) or "nothing"))
    if failures:
        print("\n".join(failures))
        sys.exit(1)
    print(f"ok: the clean fake page passes and each of {len(PLANTS)} planted problems is reported")


def main(argv):
    if len(argv) == 2 and argv[1] == "--self-test":
        self_test()
        return 0
    if len(argv) != 2:
        print(__doc__.strip().split("\n")[-1])
        return 2
    problems, summary = check(argv[1])
    if problems:
        print("\n".join(m for _, m in problems))
        return 1
    print(f"ok: {summary}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
