#!/usr/bin/env python3
"""bench_cnn --small and onednn_conv --small: each runs and prints one JSON
line per benchmark with the fields bench/compare_cnn.py reads. Times are
printed, never checked.

  check_bench_cnn.py BENCH_CNN ONEDNN_CONV
"""
import json
import subprocess
import sys

bench_cnn, onednn = sys.argv[1], sys.argv[2]
names = subprocess.run([bench_cnn, "--list"], capture_output=True, text=True, check=True).stdout.split()
expected = {
    bench_cnn: names,
    onednn: ["onednn_conv3x3_fwd", "onednn_conv3x3_bwd_data", "onednn_conv3x3_bwd_weights", "onednn_conv3x3_bwd",
             "onednn_conv3x3_fwd_bwd", "onednn_conv3x3_fwd_plain", "onednn_conv3x3_bwd_plain"],
}
for exe, want in expected.items():
    p = subprocess.run([exe, "--small", "--repeats", "1", "--min-time", "0.002"], capture_output=True, text=True,
                       timeout=100)
    if p.returncode != 0:
        sys.exit(f"{exe} failed ({p.returncode}): {p.stderr}")
    lines = [json.loads(line) for line in p.stdout.splitlines()]
    got = [d["name"] for d in lines]
    if got != want:
        sys.exit(f"{exe}: benchmarks {got}, expected {want}")
    for d in lines:
        for key in ("ns_per_iter", "min_ns", "max_ns", "repeats", "iters", "device", "threads", "flops", "gflops"):
            if key not in d:
                sys.exit(f"{d['name']}: no {key} in {d}")
        if not d["ns_per_iter"] > 0 or d["device"] != "CPU" or not d["small"]:
            sys.exit(f"{d['name']}: bad line {d}")
    print(f"{exe}: {len(lines)} benchmarks")
