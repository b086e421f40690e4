#!/usr/bin/env python3
"""bench_resnet --small: runs and prints one JSON line per benchmark with the
fields bench/compare_resnet.py reads; with torch installed, compare_resnet.py
--small runs too (one round) and prints its table. Times are printed, never
checked.

  check_bench_resnet.py BENCH_RESNET COMPARE_RESNET_PY
"""
import json
import os
import subprocess
import sys

bench, compare = sys.argv[1], sys.argv[2]
names = subprocess.run([bench, "--list"], capture_output=True, text=True, check=True).stdout.split()
if names != ["resnet18_step_b32", "resnet18_fwd_b32"]:
    sys.exit(f"bench_resnet --list: {names}")
p = subprocess.run([bench, "--small", "--repeats", "1", "--min-time", "0.002"], capture_output=True, text=True,
                   timeout=200)
if p.returncode != 0:
    sys.exit(f"bench_resnet failed ({p.returncode}): {p.stderr}")
lines = [json.loads(line) for line in p.stdout.splitlines()]
if [d["name"] for d in lines] != names:
    sys.exit(f"bench_resnet: benchmarks {[d['name'] for d in lines]}, expected {names}")
for d in lines:
    for key in ("ns_per_iter", "repeats", "iters", "device", "threads", "threads_in_use"):
        if key not in d:
            sys.exit(f"{d['name']}: no {key} in {d}")
    if not d["ns_per_iter"] > 0 or d["device"] != "CPU" or not d["small"]:
        sys.exit(f"{d['name']}: bad line {d}")
print(f"{bench}: {len(lines)} benchmarks")
try:
    import torch  # noqa: F401
except ImportError:
    print("torch is not installed: compare_resnet.py not run")
    sys.exit(0)
build = os.path.dirname(os.path.dirname(os.path.abspath(bench)))
p = subprocess.run([sys.executable, compare, "--build", build, "--small", "--rounds", "1", "--min-time", "0.002"],
                   capture_output=True, text=True, timeout=250)
sys.stdout.write(p.stdout)
if p.returncode != 0 or "resnet18_step_b32" not in p.stdout:
    sys.exit(f"compare_resnet.py --small failed ({p.returncode}): {p.stderr}")
