#!/usr/bin/env python3
"""bench_rnn --small: runs and prints one JSON line per benchmark with the
fields bench/compare_rnn.py reads; with torch installed, compare_rnn.py
--small runs too (one round) and prints its table. Times are printed, never
checked.

  check_bench_rnn.py BENCH_RNN COMPARE_RNN_PY
"""
import json
import os
import subprocess
import sys

bench_rnn, compare = sys.argv[1], sys.argv[2]
names = subprocess.run([bench_rnn, "--list"], capture_output=True, text=True, check=True).stdout.split()
if names != ["lstm_step", "lstm_fwd", "gru_step", "rnn_step"]:
    sys.exit(f"bench_rnn --list: {names}")
p = subprocess.run([bench_rnn, "--small", "--repeats", "1", "--min-time", "0.002"], capture_output=True, text=True,
                   timeout=100)
if p.returncode != 0:
    sys.exit(f"bench_rnn failed ({p.returncode}): {p.stderr}")
lines = [json.loads(line) for line in p.stdout.splitlines()]
if [d["name"] for d in lines] != names:
    sys.exit(f"bench_rnn: benchmarks {[d['name'] for d in lines]}, expected {names}")
for d in lines:
    for key in ("ns_per_iter", "min_ns", "max_ns", "repeats", "iters", "device", "threads", "flops", "gflops"):
        if key not in d:
            sys.exit(f"{d['name']}: no {key} in {d}")
    if not d["ns_per_iter"] > 0 or d["device"] != "CPU" or not d["small"] or not d["flops"] > 0:
        sys.exit(f"{d['name']}: bad line {d}")
print(f"{bench_rnn}: {len(lines)} benchmarks")
try:
    import torch  # noqa: F401
except ImportError:
    print("torch is not installed: compare_rnn.py not run")
    sys.exit(0)
build = os.path.dirname(os.path.dirname(os.path.abspath(bench_rnn)))
p = subprocess.run([sys.executable, compare, "--build", build, "--small", "--rounds", "1", "--min-time", "0.002"],
                   capture_output=True, text=True, timeout=200)
sys.stdout.write(p.stdout)
if p.returncode != 0 or "lstm_step" not in p.stdout:
    sys.exit(f"compare_rnn.py --small failed ({p.returncode}): {p.stderr}")
