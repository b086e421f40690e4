#!/usr/bin/env python3
"""Probing a backend maps no vendor compute library (cuBLAS, cuBLASLt,
cuDNN, NCCL, CLBlast): a plugin opens them when a device first needs them,
so CPU-only programs, and flx-info, never pay for them.

1. probe_backend NAME vendor_maps: libflx loads NAME's plugin, looks up
   its op tables and asks functional() (and, where it is functional, the
   devices, as flx-info does); the process then maps the plugin and no
   vendor library. NAME=TABLE arguments say a table the plugin must list
   (CUDA=comm: its comm table was looked up, and still no NCCL). OpenCL
   is probed with no ICD (OCL_ICD_VENDORS on an empty directory: not
   functional) and with the installed one (PoCL here: functional).
2. flx-info, under the dynamic loader's LD_DEBUG=files trace, loads every
   plugin and no vendor library.

Usage: check_vendor_libraries.py PROBE FLX_INFO BACKEND[=TABLE,...]...
"""
import os
import re
import subprocess
import sys
import tempfile

VENDOR = re.compile(r"/?(libcublas\.so|libcublasLt\.so|libcudnn[^/]*\.so|libnccl\.so|libclblast\.so)[^/]*$")
probe, flx_info = sys.argv[1], sys.argv[2]
backends, expect_tables = [], {}
for arg in sys.argv[3:]:
    name, _, tables = arg.partition("=")
    backends.append(name)
    expect_tables[name] = [t for t in tables.split(",") if t]
failures = []


def run(cmd, env_extra):
    env = dict(os.environ, **env_extra)
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    if p.returncode != 0:
        failures.append(f"{' '.join(cmd)} exited {p.returncode}: {p.stderr[-2000:]}")
    return p


with tempfile.TemporaryDirectory() as no_icd:
    cases = [(b, {}) for b in backends]
    if "OpenCL" in backends:
        cases.append(("OpenCL", {"OCL_ICD_VENDORS": no_icd}))
    for name, env in cases:
        out = run([probe, name, "vendor_maps"], env).stdout
        where = f"{name} probed{' with OCL_ICD_VENDORS empty' if env else ''}"
        state = out.splitlines()[0] if out else "(no output)"
        if not re.search(r"^found=1 functional=[01] ", out, re.M):
            failures.append(f"{where}: the plugin was not found: {out}")
        if "\nplugin " not in "\n" + out:
            failures.append(f"{where}: the plugin is not mapped (the check would prove nothing): {out}")
        listed = next((l[len("tables="):] for l in out.splitlines() if l.startswith("tables=")), "")
        for table in expect_tables.get(name, []):
            if not re.search(rf"(^|; ){table} v\d+", listed):
                failures.append(f"{where}: the {table} table is not listed (tables={listed}): the check would prove "
                                f"nothing of it")
        mapped = sorted({l for l in out.splitlines() if l.startswith("mapped ")})
        if mapped:
            failures.append(f"{where} ({state}): vendor libraries mapped by probing:\n  " + "\n  ".join(mapped))
        print(f"{where}: {state}; {len(mapped)} vendor libraries mapped")

    # flx-info: every object the dynamic loader opens, by name.
    p = run([flx_info], {"LD_DEBUG": "files", "OCL_ICD_VENDORS": no_icd})
    loaded = set(re.findall(r"file=(\S+)\s+\[\d+\];", p.stderr))
    for name in backends:
        if not any(f"libflx_backend_{name.lower()}.so" in f for f in loaded):
            failures.append(f"flx-info did not load the {name} plugin (the check would prove nothing); loaded: "
                            f"{sorted(loaded)}")
    vendor = sorted(f for f in loaded if VENDOR.search(f))
    if vendor:
        failures.append("flx-info loaded vendor libraries: " + ", ".join(vendor))
    print(f"flx-info: {len(loaded)} objects loaded, {len(vendor)} vendor libraries")

if failures:
    print("FAILED:\n" + "\n".join(failures))
    sys.exit(1)
print("ok: probing maps no vendor compute library")
