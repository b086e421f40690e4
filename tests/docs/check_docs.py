#!/usr/bin/env python3
"""Check every page of the documentation (README.md and docs/*.md) against
what the code really does.

Each fenced block is checked by its language, with a marker comment on the
line before it (`<!-- KIND: ARG -->`) where the block needs one:

  cpp     `snippet: NAME [mpiexec: N] [status: S] [env: VAR=value]`: the block
          is docs/snippets/NAME.cpp, which the build compiles
          (BUILD_DIR/docs/doc_NAME) and this script runs in an empty
          directory (with VAR set; under MPIEXEC -n N; expecting exit status
          S, 0 by default).
          `part of: NAME [...]`: the block appears verbatim (indented
          alike) in docs/snippets/NAME.cpp, a program that gives it context.
          NAME may be examples/X: the program examples/X.cpp (BUILD_DIR/examples/X).
          A program under mpiexec (flx::distributed) is skipped, saying so,
          when this script is given no MPIEXEC (flx built without MPI).
          Where the page shows no output block for NAME and a line
          `std::cout << ...;` carries a comment, the comment is what the line
          prints: those comments, in order, are the program's standard output
          lines (`~3`: a number that rounds to 3; a trailing `...`: the line
          starts so).
  text    `output: PROG` / `stderr: PROG`: PROG's standard output / error
  (and    (PROG is a snippet, or flx-info) equals the block, where `(...)`
  plain)  stands for any text within a line.
          `output excerpt: PROG` / `stderr excerpt: PROG`: the block's lines
          appear, consecutively, in PROG's standard output / error (each
          `(...)` standing for any text within its line).
          `figure`: a drawing; it is only checked for paths (below).
  c       `from: FILE`: every line of the block but `...` is a line of FILE
          (spaces aside).
  sh      every repository script it runs exists and is executable, each
          --option passed to one is in its source, and the steps of --only
          are together in one quoted list there (the one it checks them with).
  cmake   built: a project of the block (the targets it names built from a
          small program) is configured, built and run against flx installed
          in PREFIX (the consumer_project test's private prefix); skipped,
          saying so, when it links flx::distributed and there is no MPIEXEC.
  toml    a LocalPreferences.toml: flx-info run beside it must report the
          [Flux] gpu_backend it sets as the preference, from that file.
  python  must compile (the examples need PyTorch, which the tests lack).

Besides: `<!-- quotes: PROG -->` before a paragraph: each `code span` in it
is part of PROG's output (standard output or error), e.g. a quoted error
message. Every path of a source file (src/..., tests/..., docs/...) on a
page must exist. Every docs/snippets/*.cpp must be used by a page.

usage: check_docs.py REPO_ROOT BUILD_DIR FLX_INFO CMAKE PREFIX [MPIEXEC [FLAGS...]]
"""
import ast
import glob
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import tomllib
from typing import NamedTuple

root, build_dir, flx_info, cmake, prefix = sys.argv[1:6]
mpiexec = sys.argv[6:]  # empty: flx::distributed is not built
root, build_dir, flx_info, prefix = map(os.path.abspath, (root, build_dir, flx_info, prefix))
snippet_dir = os.path.join(root, "docs", "snippets")
pages = ["README.md"] + sorted("docs/" + f for f in os.listdir(os.path.join(root, "docs")) if f.endswith(".md"))
failures = []


def fail(where, msg):
    failures.append(f"{where}: {msg}")


# ---- running programs --------------------------------------------------------

def base_env():
    # The pages show a machine whose GPU backend preference is the default.
    return {k: v for k, v in os.environ.items() if k != "FLX_GPU_BACKEND"}


class How(NamedTuple):
    """How a program runs: its environment variable, its number of MPI
    processes (0: no mpiexec) and the exit status it must end with."""
    env: str = ""
    ranks: int = 0
    status: int = 0


CPP_MARKER = re.compile(r"(snippet|part of): ([\w/]+)((?: (?:mpiexec|status): \d+)*)(?: env: (.*))?")


def how_of_marker(m):
    opts = dict(re.findall(r"(mpiexec|status): (\d+)", m.group(3)))
    return How(m.group(4) or "", int(opts.get("mpiexec", 0)), int(opts.get("status", 0)))


def executable(prog):
    if prog == "flx-info":
        return flx_info
    if prog.startswith("examples/"):
        return os.path.join(build_dir, prog)
    return os.path.join(build_dir, "docs", "doc_" + prog)


runs = {}


def run(prog, how=How()):
    """(returncode, stdout, stderr) of a snippet program, an example or
    flx-info, run once per way of running it in an empty directory (whose
    empty LocalPreferences.toml keeps any file further up from counting)."""
    key = (prog, how)
    if key not in runs:
        exe = executable(prog)
        env = base_env()
        if how.env:
            var, _, value = how.env.partition("=")
            env[var.strip()] = value.strip()
        argv = [*mpiexec, "-n", str(how.ranks), exe] if how.ranks else [exe]
        if not os.access(exe, os.X_OK):
            runs[key] = (None, "", f"{exe} is not built (docs/CMakeLists.txt builds every snippet)")
        else:
            with tempfile.TemporaryDirectory() as cwd:
                open(os.path.join(cwd, "LocalPreferences.toml"), "w").close()
                r = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)
            runs[key] = (r.returncode, r.stdout, r.stderr)
    return runs[key]


skipped = set()


def needs_opencl(prog):
    """A snippet that names OpenCL devices (the seed's two-device examples)."""
    src = os.path.join(root, "docs", "snippets", prog + ".cpp")
    return os.path.exists(src) and '"OpenCL"' in open(src).read()


def ran(where, prog, how=How()):
    """The program's output, or None: when it did not exit as it must (a
    failure), or when it needs mpiexec and flx::distributed is not built (a
    skip, said once)."""
    if how.ranks and not mpiexec:
        if prog not in skipped:
            print(f"SKIP {where}: {prog} runs under mpiexec, and flx::distributed is not built (no MPI)")
            skipped.add(prog)
        return None
    if needs_opencl(prog) and not os.path.exists(os.path.join(build_dir, "libflx_backend_opencl.so")):
        if prog not in skipped:
            print(f"SKIP {where}: {prog} uses OpenCL devices, and the OpenCL plugin is not built")
            skipped.add(prog)
        return None
    rc, out, err = run(prog, how)
    if rc != how.status:
        fail(where, f"{prog} exited with {rc}, expected {how.status}\n{err}")
        return None
    return out, err


def matches(shown, actual):
    """`shown` with each `(...)` standing for any text within a line."""
    pattern = "[^\n]*?".join(re.escape(part) for part in shown.split("(...)"))
    return re.fullmatch(pattern, actual, re.S) is not None


DECIMAL = re.compile(r"-?\d+\.\d+(?:[eE][-+]?\d+)?")


def close_numbers(shown, actual):
    """The same text with its decimals within 1e-5 (relative), the column
    padding aside. Tensors print their shortest round-trip digits, so a
    last-bit difference between CPUs (OpenBLAS's AVX-512 and AVX2 kernels)
    changes the digits shown and the padding: 0.40500933 on one machine is
    0.4050093 on another (seen on the H100 machine's host)."""
    if "(...)" in shown:
        return False
    a, b = DECIMAL.findall(shown), DECIMAL.findall(actual)

    def skeleton(text):
        return [re.sub(r"[ \t]+", " ", line).strip() for line in DECIMAL.sub("#", text).split("\n")]

    return len(a) == len(b) and skeleton(shown) == skeleton(actual) and \
        all(abs(float(x) - float(y)) <= 1e-5 * max(1.0, abs(float(x))) for x, y in zip(a, b))


# ---- the blocks --------------------------------------------------------------

used_snippets = set()


def snippet_source(where, name):
    rel = name + ".cpp" if name.startswith("examples/") else "docs/snippets/" + name + ".cpp"
    path = os.path.join(root, rel)
    if not os.path.exists(path):
        fail(where, f"no program {rel}")
        return None
    used_snippets.add(name)
    return open(path, encoding="utf-8").read()


def contains_indented(block, source):
    lines = block.rstrip("\n").split("\n")
    for indent in range(0, 13, 2):
        text = "\n".join((" " * indent + line) if line else "" for line in lines) + "\n"
        if text in source:
            return True
    return False


def near(shown, value):
    try:
        want, got = float(shown), float(value)
    except ValueError:
        return False
    return abs(got - want) <= 0.5 * 10.0 ** -len(shown.partition(".")[2])  # rounds to what is shown


def check_printed_comments(where, block, out):
    shown = [m.group(1).strip() for m in re.finditer(r"std::cout <<.*;\s*// ?(.*)$", block, re.M)]
    if not shown:
        return
    lines = out.rstrip("\n").split("\n")
    if len(lines) != len(shown):
        fail(where, f"the block's comments show {len(shown)} printed line(s); the program printed {len(lines)}:\n{out}")
        return
    for s, line in zip(shown, lines):
        ok = (near(s[1:], line) if s.startswith("~")
              else line.startswith(s[:-3].rstrip()) if s.endswith("...") else line == s)
        if not ok:
            fail(where, f"the comment shows `{s}`; the program printed `{line}`")


def check_cpp(where, marker, block, shown_output):
    m = CPP_MARKER.fullmatch(marker or "")
    if not m:
        fail(where, "a C++ block needs <!-- snippet: NAME --> or <!-- part of: NAME --> (a program in docs/snippets)")
        return
    kind, name, how = m.group(1), m.group(2), how_of_marker(m)
    source = snippet_source(where, name)
    if source is None:
        return
    if kind == "snippet" and block != source:
        fail(where, f"the block differs from the program {name}.cpp")
        return
    if kind == "part of" and not contains_indented(block, source):
        fail(where, f"the block is not in the program {name}.cpp as shown")
        return
    result = ran(where, name, how)
    if result:
        if name not in shown_output:  # else the output block is checked
            check_printed_comments(where, block, result[0])
        print(f"{where}: {name} compiles and runs")


def check_text(where, marker, block, how_of):
    if marker == "figure":
        return
    m = re.fullmatch(r"(output|stderr|output excerpt|stderr excerpt): ([\w/-]+)", marker or "")
    if not m:
        fail(where, "a text block needs <!-- output: PROG -->, <!-- stderr: PROG -->, "
                    "<!-- output excerpt: PROG -->, <!-- stderr excerpt: PROG --> or <!-- figure -->")
        return
    kind, prog = m.groups()
    if prog != "flx-info" and snippet_source(where, prog) is None:
        return
    result = ran(where, prog, how_of.get(prog, How()))
    if not result:
        return
    actual = result[1] if kind.startswith("stderr") else result[0]
    if kind.endswith("excerpt"):
        want = [line.rstrip() for line in block.rstrip("\n").split("\n")]
        have = [line.rstrip() for line in actual.split("\n")]
        ok = any(len(have) - i >= len(want) and all(matches(w, h) for w, h in zip(want, have[i:i + len(want)]))
                 for i in range(len(have)))
    else:
        ok = matches(block, actual) or close_numbers(block, actual)
    if ok:
        print(f"{where}: {kind} of {prog} as shown")
    else:
        fail(where, f"{kind} of {prog} differs\n--- page\n{block}--- {prog}\n{actual}")


def check_c(where, marker, block):
    m = re.fullmatch(r"from: (\S+)", marker or "")
    if not m:
        fail(where, "a C block needs <!-- from: FILE -->, the file it shows")
        return
    path = os.path.join(root, m.group(1))
    if not os.path.isfile(path):
        fail(where, f"no file {m.group(1)}")
        return
    squeeze = lambda s: " ".join(s.split())
    have = {squeeze(line) for line in open(path, encoding="utf-8")}
    for line in block.split("\n"):
        if line.strip() not in ("", "...") and squeeze(line) not in have:
            fail(where, f"`{line.strip()}` is not a line of {m.group(1)}")


def check_sh(where, block):
    for line in block.replace("\\\n", " ").split("\n"):  # a line continued with a backslash is one command
        words = shlex.split(line, comments=True)
        script = None
        for w in words:
            path = os.path.join(root, w)
            if re.fullmatch(r"scripts/[\w.-]+", w):
                if not (os.path.isfile(path) and os.access(path, os.X_OK)):
                    fail(where, f"{w} is not an executable script of the repository")
                    script = None
                else:
                    script = open(path, encoding="utf-8").read()
            elif script is not None and w.startswith("--"):
                option = w.split("=")[0]
                if not re.search(re.escape(option) + r"\b", script):
                    fail(where, f"{option} is not an option of the script it is passed to")
        # --only's steps: together in one quoted list of the script (its check of them);
        # a benchmark's --only (bench/*.py) takes its own values
        name = re.search(r"scripts/[\w.-]+", line)
        for values in re.findall(r"--only[ =]([\w,]+)", line) if name else []:
            text = open(os.path.join(root, name.group(0)), encoding="utf-8").read()
            steps = values.split(",")
            if not any(all(re.search(r"(?<![\w-])" + v + r"(?![\w-])", q) for v in steps)
                       for q in re.findall(r'"[^"\n]*"', text)):
                fail(where, f"--only {values}: {name.group(0)} has no list of steps "
                            "holding them all")


def check_toml(where, block):
    try:
        backend = tomllib.loads(block)["Flux"]["gpu_backend"]
    except (tomllib.TOMLDecodeError, KeyError) as e:
        fail(where, f"not a LocalPreferences.toml with [Flux] gpu_backend: {e}")
        return
    with tempfile.TemporaryDirectory() as cwd:
        prefs = os.path.join(cwd, "LocalPreferences.toml")
        open(prefs, "w", encoding="utf-8").write(block)
        r = subprocess.run([flx_info], cwd=cwd, env=base_env(), capture_output=True, text=True, timeout=300)
    if f"GPU backend preference: {backend} (from {prefs})" not in r.stdout:
        fail(where, f"flx-info beside this file does not report the preference {backend} from it:\n{r.stdout}")


def check_cmake(where, block):
    if "flx::distributed" in block and not mpiexec:
        print(f"SKIP {where}: the block links flx::distributed, which is not built (no MPI)")
        return
    work = os.path.join(build_dir, "docs", "cmake_check")
    shutil.rmtree(work, ignore_errors=True)
    project = os.path.join(work, "project")
    os.makedirs(project, exist_ok=True)
    targets = sorted(set(re.findall(r"target_link_libraries\((\w+)", block)))
    with open(os.path.join(project, "main.cpp"), "w") as f:
        f.write('#include <flx/flx.hpp>\nint main() { return flx::sum(flx::ones(2)).item<float>() == 2.0f ? 0 : 1; }\n')
    with open(os.path.join(project, "CMakeLists.txt"), "w") as f:
        f.write("cmake_minimum_required(VERSION 3.25)\nproject(doc_cmake_block LANGUAGES CXX)\n")
        f.write("".join(f"add_executable({t} main.cpp)\n" for t in targets) + block)
    steps = [[cmake, "-S", project, "-B", os.path.join(work, "build"), "-DCMAKE_PREFIX_PATH=" + prefix,
              "-DCMAKE_BUILD_TYPE=Release"],
             [cmake, "--build", os.path.join(work, "build")]]
    steps += [[os.path.join(work, "build", t)] for t in targets]
    for step in steps:
        r = subprocess.run(step, capture_output=True, text=True, timeout=600)
        if r.returncode != 0:
            fail(where, f"{' '.join(step)} failed ({r.returncode}):\n{r.stdout}{r.stderr}")
            return
    print(f"{where}: the CMake block builds and links against the installed flx")


def check_python(where, block):
    try:
        ast.parse(block)
    except SyntaxError as e:
        fail(where, f"Python syntax error: {e}")


# ---- pages ---------------------------------------------------------------------

FENCE = re.compile(r"^( *)```(\w*)\n(.*?)^\1```[ \t]*$", re.M | re.S)
MARKER = re.compile(r"<!-- (.*?) -->[ \t]*\n\Z")
# A source file's path (with an extension; build outputs such as examples/basics have none).
PATH = re.compile(r"(?<![\w./-])((?:src|backends|include|tests|docs|apps|scripts|bench|examples|cmake)/[\w./*+-]*"
                  r"\.(?:cpp|hpp|h|c|cu|cuh|py|sh|md|cmake|txt|toml|in|inc|map))\b")

for page in pages:
    text = open(os.path.join(root, page), encoding="utf-8").read()
    line_of = lambda pos: text.count("\n", 0, pos) + 1
    # how each program runs (environment, mpiexec), for the output blocks after it
    how_of = {m.group(2): how_of_marker(m) for m in
              (CPP_MARKER.fullmatch(c) for c in re.findall(r"<!-- ((?:snippet|part of): .*?) -->", text)) if m}
    shown_output = set(re.findall(r"<!-- output: ([\w/-]+) -->", text))
    for m in FENCE.finditer(text):
        indent, lang, body = m.groups()
        block = "".join(line[len(indent):] + "\n" for line in body.rstrip("\n").split("\n"))
        mk = MARKER.search(text, 0, m.start())
        marker = mk.group(1) if mk and text[mk.end():m.start()] == "" else None
        where = f"{page}:{line_of(m.start())}"
        if lang == "cpp":
            check_cpp(where, marker, block, shown_output)
        elif lang in ("text", ""):
            check_text(where, marker, block, how_of)
        elif lang == "c":
            check_c(where, marker, block)
        elif lang == "sh":
            check_sh(where, block)
        elif lang == "cmake":
            check_cmake(where, block)
        elif lang == "toml":
            check_toml(where, block)
        elif lang == "python":
            check_python(where, block)
        else:
            fail(where, f"no check for ```{lang} blocks; add one to tests/docs/check_docs.py")
    for m in re.finditer(r"<!-- quotes: ([\w/-]+) -->\n(.*?)(?:\n\n|\Z)", text, re.S):
        where = f"{page}:{line_of(m.start())}"
        result = ran(where, m.group(1), how_of.get(m.group(1), How()))
        if result:
            said = " ".join((result[0] + result[1]).split())
            for span in re.findall(r"`([^`]+)`", m.group(2)):
                if " ".join(span.split()) not in said:
                    fail(where, f"`{span}` is not what {m.group(1)} prints:\n{result[0]}{result[1]}")
    for m in PATH.finditer(text):
        if not glob.glob(os.path.join(root, m.group(1))):  # a path, or a pattern such as src/*.cpp
            fail(f"{page}:{line_of(m.start())}", f"no {m.group(1)} in the repository")

for f in sorted(os.listdir(snippet_dir)):
    if f.endswith(".cpp") and f[:-4] not in used_snippets:
        fail("docs/snippets", f"{f} is shown on no page")

for f in failures:
    print("FAIL", f)
sys.exit(1 if failures else 0)
