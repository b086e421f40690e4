#!/usr/bin/env bash
# scripts/cuda-check.sh without a GPU (nvidia-smi pointed at nothing): it
# stops with status 2 and one line; with --no-gpu-ok it runs what it can (here
# the CUDA_VISIBLE_DEVICES=-1 check against an existing build) and writes its
# summary. Usage: check_cuda_check.sh SOURCE_DIR BUILD_DIR WORK_DIR
set -u
src=$1 build=$2 work=$3
rm -rf "$work" && mkdir -p "$work"
export FLX_CUDA_CHECK_NVIDIA_SMI=/nonexistent/nvidia-smi
bash -n "$src/scripts/cuda-check.sh" || { echo "FAIL: syntax"; exit 1; }
err=$("$src/scripts/cuda-check.sh" --build-dir "$work/b" 2>&1); rc=$?
[ "$rc" = 2 ] || { echo "FAIL: status $rc without a GPU (want 2): $err"; exit 1; }
[ "$(echo "$err" | wc -l)" = 1 ] && [[ $err == "cuda-check: no GPU: "* ]] || { echo "FAIL: message: $err"; exit 1; }
"$src/scripts/cuda-check.sh" --no-gpu-ok --skip-build --build-dir "$build" --only examples,bench \
  --summary "$work/summary.md" >"$work/out.log" 2>&1; rc=$?
cat "$work/summary.md"
[ "$rc" = 0 ] || { echo "FAIL: status $rc with --no-gpu-ok"; cat "$work/out.log"; exit 1; }
grep -q '| CUDA_VISIBLE_DEVICES=-1 | PASS |' "$work/summary.md" &&
  grep -q '| benchmarks (a)-(e) | skipped: no GPU |' "$work/summary.md" || { echo "FAIL: summary"; exit 1; }
echo "cuda-check: no-GPU paths ok"
