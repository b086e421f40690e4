#!/usr/bin/env python3
"""bench_gpu --small on the CPU: every benchmark runs and prints one JSON line
with the fields bench/compare_gpu.py reads.

  check_bench_gpu.py BENCH_GPU
"""
import json
import os
import subprocess
import sys

exe = sys.argv[1]
names = subprocess.run([exe, "--list"], capture_output=True, text=True, check=True).stdout.split()
env = dict(os.environ, FLX_SILENCE_WARN_NO_GPU="1")
p = subprocess.run([exe, "--device", "CPU", "--small", "--repeats", "1", "--min-time", "0.002"], env=env,
                   capture_output=True, text=True, timeout=120)
if p.returncode != 0:
    sys.exit(f"bench_gpu failed ({p.returncode}): {p.stderr}")
lines = [json.loads(line) for line in p.stdout.splitlines()]
got = [d["name"] for d in lines]
if got != names:
    sys.exit(f"benchmarks {got}, expected {names}")
# The CPU has no Float16/BFloat16 convolution yet: those say so (NotImplemented), nothing else may.
unsupported = [d for d in lines if "unsupported" in d]
for d in unsupported:
    if not (d["name"].startswith("conv3x3_") and "f32" not in d["name"] and "answered unsupported" in d["unsupported"]):
        sys.exit(f"{d['name']}: unexpectedly unsupported: {d['unsupported']}")
lines = [d for d in lines if "unsupported" not in d]
for d in lines:
    for key in ("ns_per_iter", "min_ns", "max_ns", "iters", "device", "bytes", "flops"):
        if key not in d:
            sys.exit(f"{d['name']}: no {key} in {d}")
    if not d["ns_per_iter"] > 0 or d["device"] != "CPU":
        sys.exit(f"{d['name']}: bad line {d}")
# --serve answers one line per request, an error line for an unknown name.
s = subprocess.run([exe, "--serve", "--device", "CPU", "--small", "--min-time", "0.002"], env=env,
                   input="add_f32_2e28\nadd_f32_2e28\nnope\ndrop add_f32_2e28\nquit\n", capture_output=True,
                   text=True, timeout=60)
out = [json.loads(line) for line in s.stdout.splitlines()]
if s.returncode != 0 or len(out) != 5 or not out[0].get("ready") or "error" not in out[3] or \
        out[1]["name"] != "add_f32_2e28" or out[4].get("dropped") != "add_f32_2e28":
    sys.exit(f"--serve: {s.returncode} {out} {s.stderr}")
print(f"bench_gpu: {len(lines)} benchmarks on the CPU, --serve ok")
