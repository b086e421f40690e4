#!/usr/bin/env python3
"""bench_ddp with tiny sizes: under mpiexec -n 2 every distributed mode prints
the JSON fields bench/compare_ddp.py reads, with the buckets it expects;
one process runs alone; and compare_ddp.py --no-torch runs one round.

  check_bench_ddp.py BENCH_DDP MPIEXEC [MPIEXEC_ARG...]
"""
import json
import os
import subprocess
import sys
from pathlib import Path

exe, mpiexec = sys.argv[1], sys.argv[2:]
root = Path(__file__).resolve().parents[2]
tiny = ["--synthetic", "--hidden", "16", "--batch", "8", "--steps", "3", "--warmup", "1", "--pool", "2"]
# 0.0005 MiB buckets cut the 784-16-16-10 MLP's gradients into 3 buckets.
buckets = ["--bucket-mib", "0.0005", "--first-bucket-mib", "0.0005"]
env = dict(os.environ, FLX_NUM_THREADS="1")


def run(cmd):
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=240)
    if p.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({p.returncode}):\n{p.stdout}\n{p.stderr}")
    return [json.loads(line) for line in p.stdout.splitlines() if line.startswith("{")]


FIELDS = ["mode", "ranks", "threads", "batch_per_rank", "global_batch", "step_ms", "step_ms_per_rank", "grad_ms",
          "update_ms", "samples_per_s", "wait_ms", "wait_share", "buckets", "allreduces", "overlapped",
          "lead_first_ms", "lead_last_ms", "backward_end_to_update_ms", "skew_ms", "tail_ms", "params_agree"]


def check(d, mode, ranks):
    for key in FIELDS:
        if key not in d:
            sys.exit(f"{mode}: no {key} in {d}")
    if d["mode"] != mode or d["ranks"] != ranks or not d["step_ms"] > 0 or len(d["step_ms_per_rank"]) != ranks:
        sys.exit(f"{mode}: bad line {d}")
    # step_ms is printed to 4 decimals: on a fast machine (0.02 ms a step)
    # that rounding alone moves the product by more than 1e-3.
    rate_tol = 1e-3 + 0.5e-4 / d["step_ms"] if d["step_ms"] > 0 else 1e-3
    if d["global_batch"] != 8 * ranks or abs(d["samples_per_s"] * d["step_ms"] / 1e3 / d["global_batch"] - 1) > rate_tol:
        sys.exit(f"{mode}: batch or rate wrong in {d}")


lines = run(mpiexec + ["-n", "2", exe, "--mode", "ddp,no-overlap,comm-off"] + tiny + buckets)
if [d.get("mode") for d in lines] != ["ddp", "no-overlap", "comm-off"]:
    sys.exit(f"modes {lines}")
ddp, no_overlap, comm_off = lines
for d in lines:
    check(d, d["mode"], 2)
for d in (ddp, no_overlap):
    if d["buckets"] != 3 or d["allreduces"] != 3 or d["params_agree"] is not True or not 0 <= d["wait_share"] <= 1:
        sys.exit(f"{d['mode']}: expected 3 buckets, 3 allreduces, the same parameters on both ranks: {d}")
if ddp["overlapped"] < 1 or no_overlap["overlapped"] != 0:
    sys.exit(f"overlapped buckets: ddp {ddp['overlapped']} (expected >= 1), no-overlap {no_overlap['overlapped']}")
if comm_off["allreduces"] != 0 or comm_off["wait_ms"] != 0 or comm_off["params_agree"] is not None:
    sys.exit(f"comm-off communicated: {comm_off}")

(single,) = run([exe, "--mode", "single"] + tiny)
check(single, "single", 1)

# The driver, flx alone, one round.
p = subprocess.run([sys.executable, str(root / "bench" / "compare_ddp.py"), "--binary", exe, "--mpiexec", mpiexec[0],
                    "--no-torch", "--rounds", "1", "--synthetic", "--hidden", "16", "--batch", "8", "--steps", "3",
                    "--warmup", "1", "--pool", "2"], env=env, capture_output=True, text=True, timeout=240)
if p.returncode != 0 or "wait share, flx ddp" not in p.stdout or "flx comm-off" not in p.stdout:
    sys.exit(f"compare_ddp.py --no-torch failed ({p.returncode}):\n{p.stdout}\n{p.stderr}")
print(f"bench_ddp: ddp {ddp['step_ms']:.3f} ms, no-overlap {no_overlap['step_ms']:.3f} ms, "
      f"comm-off {comm_off['step_ms']:.3f} ms, single {single['step_ms']:.3f} ms; compare_ddp.py ok")
