#!/usr/bin/env python3
"""Check docs/gpu.md against its snippet programs.

For each `<!-- snippet: NAME [env: VAR=value ...] -->` the next ```cpp block
must equal docs/snippets/NAME.cpp, and the program built from it (BIN_DIR/
doc_NAME) is run in an empty directory; its standard output must equal the
```text block after `<!-- output: NAME -->`.
usage: check_guide.py GUIDE SNIPPET_DIR BIN_DIR
"""
import os
import re
import subprocess
import sys
import tempfile

guide, snippet_dir, bin_dir = sys.argv[1:4]
text = open(guide, encoding="utf-8").read()
failures = []
snippets = re.findall(r"<!-- snippet: (\w+)(?: env: ([^>]*?))? -->\n```cpp\n(.*?)```", text, re.S)
if not snippets:
    sys.exit("no snippets found in " + guide)
for name, env_spec, code in snippets:
    source = open(os.path.join(snippet_dir, name + ".cpp"), encoding="utf-8").read()
    if code != source:
        failures.append(f"{name}: the guide's code differs from docs/snippets/{name}.cpp")
        continue
    m = re.search(r"<!-- output: " + name + r" -->\n```text\n(.*?)```", text, re.S)
    if not m:
        failures.append(f"{name}: no output block")
        continue
    env = {k: v for k, v in os.environ.items() if k not in ("FLX_GPU_BACKEND",)}
    if env_spec:
        key, _, value = env_spec.partition("=")
        env[key.strip()] = value.strip()
    with tempfile.TemporaryDirectory() as cwd:
        run = subprocess.run([os.path.join(bin_dir, "doc_" + name)], cwd=cwd, env=env,
                             capture_output=True, text=True, timeout=300)
    if run.returncode != 0:
        failures.append(f"{name}: exit {run.returncode}\n{run.stderr}")
    elif run.stdout != m.group(1):
        failures.append(f"{name}: output differs\n--- guide\n{m.group(1)}--- program\n{run.stdout}")
    else:
        print(f"{name}: ok")
for f in failures:
    print("FAIL", f)
sys.exit(1 if failures else 0)
