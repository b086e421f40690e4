#!/usr/bin/env bash
# scripts/cuda-check.sh without a GPU (nvidia-smi pointed at nothing): it
# stops with status 2 and one line; with --no-gpu-ok it runs what it can (here
# the CUDA_VISIBLE_DEVICES=-1 check against an existing build) and writes its
# summary. Then its time budget, with a fake GPU (nvidia-smi and
# compute-sanitizer that answer at once): a step starts only when its whole
# limit fits in what is left, and one that does not is "skipped: out of time
# budget", never a failure. Usage: check_cuda_check.sh SOURCE_DIR BUILD_DIR WORK_DIR
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
  grep -q '| benchmarks (a)-(e) | skipped: no GPU |' "$work/summary.md" &&
  grep -q '| CNN benchmarks | skipped: no GPU |' "$work/summary.md" || { echo "FAIL: summary"; exit 1; }
echo "cuda-check: no-GPU paths ok"

# ---- the budget, with a fake GPU ------------------------------------------------
fake=$work/fake
mkdir -p "$fake" "$work/fb"
printf '#!/bin/sh\necho "NVIDIA H100 80GB HBM3, 580.159.04, 81559 MiB"\n' >"$fake/nvidia-smi"
printf '#!/bin/sh\necho "========= ERROR SUMMARY: 0 errors"\n' >"$fake/compute-sanitizer"
# (White-box tests lie in the build dir's top folder, beside libflx: cmake/FlxTestEnvironment.cmake.)
for t in flx_plugin_tests_cuda flx_tests flx_dense_tests; do printf '#!/bin/sh\n' >"$work/fb/$t"; done
chmod +x "$fake"/* "$work"/fb/flx_*
export FLX_CUDA_CHECK_NVIDIA_SMI=$fake/nvidia-smi PATH=$fake:$PATH
# The sanitizer runs' labels and limits, as the script sets them.
mapfile -t runs < <(grep -oE '^ *sanitize "\$san" [a-z]+ [a-z]+ [0-9]+' "$src/scripts/cuda-check.sh" |
                    awk '{print $3 " (" $4 ")|" $5}')
[ "${#runs[@]}" = 4 ] || { echo "FAIL: found ${#runs[@]} sanitizer runs in the script (want 4)"; exit 1; }
least=$(printf '%s\n' "${runs[@]}" | cut -d'|' -f2 | sort -n | head -1)
budget_check() {  # BUDGET SUMMARY: the sanitizer step alone under that budget
  "$src/scripts/cuda-check.sh" --skip-build --build-dir "$work/fb" --only sanitizer --budget "$1" \
    --summary "$2" >"$2.log" 2>&1
}
# Room for the shortest run's limit, its 15 s kept back and 5 s of the
# script's own: the runs of that limit start (the fakes return at once),
# those of a longer one (at least 6 s longer) are skipped, with the reason.
budget_check $((least + 15 + 5)) "$work/some.md"; rc=$?
cat "$work/some.md"
[ "$rc" = 0 ] || { echo "FAIL: status $rc when steps were skipped for time (a skip is no failure)"; exit 1; }
skipped=0
for r in "${runs[@]}"; do
  row=${r%|*} limit=${r#*|}
  if [ "$limit" = "$least" ]; then want='PASS'
  elif [ "$limit" -ge $((least + 6)) ]; then want='skipped: out of time budget | sanitizer-'; skipped=$((skipped + 1))
  else echo "FAIL: limits $limit and $least are too close for this check"; exit 1; fi
  grep -qF "| compute-sanitizer $row | $want" "$work/some.md" || { echo "FAIL: $row (limit $limit s): want $want"; exit 1; }
done
[ "$skipped" -gt 0 ] || echo "note: every sanitizer run has the same limit; only the next check skips"
grep -q 'Overall: PASS' "$work/some.md" || { echo "FAIL: overall"; exit 1; }
# A budget short of every limit starts nothing, and still passes.
budget_check $((least + 14)) "$work/none.md"; rc=$?
[ "$rc" = 0 ] && [ "$(grep -c '| skipped: out of time budget | sanitizer-' "$work/none.md")" = 4 ] ||
  { echo "FAIL: with a budget short of every limit (status $rc)"; cat "$work/none.md"; exit 1; }
echo "cuda-check: budget ok"
