#!/usr/bin/env bash
# The one-command GPU check (issue 10, item 5). On a machine with an NVIDIA GPU
# and the CUDA toolkit: configure and build flx with -DFLX_CUDA=ON, run the
# whole test suite (and count its CUDA tests apart), the examples on CUDA,
# an example under CUDA_VISIBLE_DEVICES=-1 (the CPU and exactly one warning),
# the GPU benchmarks against PyTorch (bench/compare_gpu.py; the CNN's
# training step and a 3x3 convolution, bench/compare_cnn.py; flx-train
# --model cnn against the same training in PyTorch, bench/compare_train.py) and
# the sequence models' benchmarks against PyTorch (bench/compare_rnn.py: RNN,
# LSTM and GRU layers' steps; bench/compare_zoo.py: the zoo's char-LSTM,
# char-transformer and GPT training steps; bench/compare_resnet.py:
# ResNet-18's training step), compute-sanitizer (memcheck, racecheck) over the CUDA plugin's test suite
# and memcheck over the conformance suite's and the fused Dense tests' CUDA
# cases;
# then write one summary (markdown) and print its path. It installs nothing:
# the project's libraries come from CMAKE_PREFIX_PATH and the library paths
# (source .gpu-deps/unpack.sh first on a machine without them), cuDNN and
# NCCL from the toolkit or PyTorch's nvidia-* wheels (located and reported).
#
#   scripts/cuda-check.sh [--build-dir DIR] [--summary FILE] [--only STEPS] [--skip-build]
#                         [--no-gpu-ok] [--jobs N] [--budget SECONDS] [--data DIR] [--rounds N]
#                         [--train-epochs N] [--cnn-epochs N] [--ctest-args "ARGS"] [--targets "T..."]
#   STEPS: comma-separated subset of build,tests,examples,bench,seqbench,lowp,sanitizer (default: all)
#   --targets: build only these CMake targets (default: everything), for a
#   short call that runs a few tests (--ctest-args "-R ...") and benchmarks
#
# Exit status: 0 every step passed (or was skipped), 1 a step failed,
# 2 no GPU (without --no-gpu-ok) or bad arguments. Each step has its own
# time limit (written next to it, with what it was set from), and they share
# --budget (default 570 s: a 10-minute device call less unpacking): a step
# starts only when its whole limit fits in what is left, otherwise it is
# reported "skipped: out of time budget", which is no failure. A failing
# step does not stop the later ones. docs/cuda.md gives the device calls.
# Environment: PYTHON (default python3, the one with PyTorch),
# FLX_OPENBLAS_DIR / FLX_OPENBLAS_INCLUDE, CUDA_HOME.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT" || exit 2

BUILD_DIR=build-cuda SUMMARY="" ONLY="build,tests,examples,bench,seqbench,lowp,sanitizer" SKIP_BUILD=0 NO_GPU_OK=0
JOBS=$(nproc) BUDGET=570 DATA="" ROUNDS=5 TRAIN_EPOCHS=3 CNN_EPOCHS=5 CTEST_ARGS="" TARGETS="" PYTHON=${PYTHON:-python3}
usage() { sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; }
while [ $# -gt 0 ]; do
  case $1 in --build-dir|--summary|--only|--jobs|--budget|--data|--rounds|--train-epochs|--cnn-epochs|--ctest-args|--targets)
    [ $# -ge 2 ] || { echo "cuda-check: $1 needs a value" >&2; exit 2; } ;;
  esac
  case $1 in
    --build-dir) BUILD_DIR=$2; shift ;;
    --summary) SUMMARY=$2; shift ;;
    --only) ONLY=$2; shift ;;
    --skip-build) SKIP_BUILD=1 ;;
    --no-gpu-ok) NO_GPU_OK=1 ;;
    --jobs) JOBS=$2; shift ;;
    --budget) BUDGET=$2; shift ;;
    --data) DATA=$2; shift ;;
    --rounds) ROUNDS=$2; shift ;;
    --train-epochs) TRAIN_EPOCHS=$2; shift ;;
    --cnn-epochs) CNN_EPOCHS=$2; shift ;;
    --ctest-args) CTEST_ARGS=$2; shift ;;
    --targets) TARGETS=$2; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "cuda-check: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done
for s in ${ONLY//,/ }; do
  [[ " build tests examples bench seqbench lowp sanitizer " == *" $s "* ]] || { echo "cuda-check: unknown step $s in --only" >&2; exit 2; }
done
mkdir -p "$BUILD_DIR" && BUILD_DIR=$(cd "$BUILD_DIR" && pwd)
SUMMARY=${SUMMARY:-$BUILD_DIR/cuda-check-summary.md}
mkdir -p "$(dirname "$SUMMARY")" && SUMMARY=$(cd "$(dirname "$SUMMARY")" && pwd)/$(basename "$SUMMARY")
LOGS=$(dirname "$SUMMARY")/cuda-check-logs  # each step's output, beside the summary
mkdir -p "$LOGS"
START=$(date +%s)
ROWS=()        # summary table rows
FAILED=0
HAVE_GPU=0

# ---- helpers -------------------------------------------------------------------
log() { echo "cuda-check: $*" >&2; }
wants() { [[ ",$ONLY," == *",$1,"* ]]; }
# record STEP RESULT DETAILS: one summary row; RESULT FAIL marks the run failed
# (unless the step's command was not run for lack of time: RC -1).
record() {
  if [ "$2" = FAIL ] && [ "${RC:-0}" = -1 ]; then set -- "$1" "skipped: out of time budget" "$SKIP_WHY"; fi
  RC=0
  ROWS+=("| $1 | $2 | ${3//|/\\|} |")
  [ "$2" = FAIL ] && FAILED=1
  log "$1: $2 ${3:+($3)}"
}
# Seconds kept back from a step's limit: timeout's --kill-after grace and
# writing the summary.
RESERVE=15
# run_step NAME LIMIT CMD...: run with a timeout of LIMIT seconds, output to
# $LOGS/NAME.log; sets RC (124/137: timed out) and LIMIT_USED. A step starts
# only when its whole limit (plus RESERVE) fits in what is left of --budget;
# otherwise RC=-1 and it is reported "skipped: out of time budget", never a
# failure. So a step that times out had all of its limit.
run_step() {
  local name=$1 left
  LIMIT_USED=$2; shift 2
  left=$((BUDGET - ($(date +%s) - START)))
  if [ $((LIMIT_USED + RESERVE)) -gt "$left" ]; then
    RC=-1 SKIP_WHY="$name not started: its limit ${LIMIT_USED}s (+${RESERVE}s) > the ${left}s left of --budget $BUDGET"
    log "$SKIP_WHY"
    return
  fi
  log "running $name (timeout ${LIMIT_USED}s): $*"
  timeout --kill-after=10 "$LIMIT_USED" "$@" >"$LOGS/$name.log" 2>&1
  RC=$?
}
rc_text() { [ "$RC" = 124 ] || [ "$RC" = 137 ] && echo "timed out after ${LIMIT_USED}s" || echo "exit status $RC"; }

# ---- the machine -----------------------------------------------------------------
detect_gpu() {
  GPU_INFO="none" DRIVER="-" NVCC_VERSION="-"
  local smi=${FLX_CUDA_CHECK_NVIDIA_SMI:-nvidia-smi}  # tests point it elsewhere to act as if no GPU
  if command -v "$smi" >/dev/null 2>&1 &&
     GPU_INFO=$(timeout 30 "$smi" --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1) &&
     [ -n "$GPU_INFO" ]; then
    HAVE_GPU=1
    GPU_INFO=$(echo "$GPU_INFO" | paste -sd ';')
    DRIVER=$(echo "$GPU_INFO" | head -1 | cut -d, -f2 | tr -d ' ')
  else
    NO_GPU_REASON=$(command -v "$smi" >/dev/null 2>&1 && echo "$smi failed: $(echo "$GPU_INFO" | head -1)" ||
                    echo "$smi not found")
    GPU_INFO="none ($NO_GPU_REASON)"
  fi
  CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
  local nvcc; nvcc=$(command -v nvcc || echo "$CUDA_HOME/bin/nvcc")
  # CMake tries /usr/local/cuda/bin/nvcc by itself; another CUDA_HOME goes through CUDACXX
  [ -z "${CUDACXX:-}" ] && [ -x "$CUDA_HOME/bin/nvcc" ] && ! command -v nvcc >/dev/null && export CUDACXX=$CUDA_HOME/bin/nvcc
  [ -x "$nvcc" ] && NVCC_VERSION=$("$nvcc" --version | grep -o 'release [0-9.]*, V[0-9.]*' | head -1)
}

# cuDNN and NCCL: in the toolkit, the system, or the nvidia-* Python wheels
# (nvidia/cudnn/lib, nvidia/nccl/lib, and the nvidia/cu13 layout). Their lib
# dirs go on LD_LIBRARY_PATH, their roots on CMAKE_PREFIX_PATH and CPATH.
find_vendor_libs() {
  local roots=("$CUDA_HOME" /usr/lib/x86_64-linux-gnu /usr/local/lib) wheel lib dir name inc ver
  wheel=$("$PYTHON" -c 'import nvidia; print("\n".join(nvidia.__path__))' 2>/dev/null) &&
    mapfile -t -O "${#roots[@]}" roots <<<"$wheel"
  for name in cudnn nccl; do
    lib=$(find "${roots[@]}" -maxdepth 4 -name "lib$name.so*" \( -type f -o -type l \) 2>/dev/null | sort | head -1)
    if [ -z "$lib" ]; then
      printf -v "${name^^}_FOUND" '%s' "not found (searched the toolkit, /usr, the nvidia-* wheels)"
      continue
    fi
    dir=$(dirname "$lib") ver=""
    export LD_LIBRARY_PATH=$dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    if [ -d "$dir/../include" ]; then
      inc=$(cd "$dir/../include" && pwd)
      export CPATH=$inc${CPATH:+:$CPATH} CMAKE_PREFIX_PATH=${inc%/include}${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}
      ver=$(grep -hE "#define ${name^^}_(MAJOR|MINOR|PATCH|PATCHLEVEL) " "$inc/cudnn_version.h" "$inc/nccl.h" 2>/dev/null |
            awk '{print $3}' | paste -sd.)
    fi
    printf -v "${name^^}_FOUND" '%s' "${ver:+$ver, }$(basename "$lib") in $dir"
  done
}

# ---- steps -----------------------------------------------------------------------
step_build() {
  local args=(-DCMAKE_BUILD_TYPE=Release -DFLX_CUDA=ON) p=/opt/gpu-deps/usr kind
  [ "$HAVE_GPU" = 0 ] && args=(-DCMAKE_BUILD_TYPE=Release -DFLX_CUDA=AUTO)  # --no-gpu-ok: no toolkit needed
  # Ninja when there is one, for a new build dir (an existing one keeps its generator)
  command -v ninja >/dev/null && [ ! -f "$BUILD_DIR/CMakeCache.txt" ] && args+=(-G Ninja)
  if [ -n "${FLX_OPENBLAS_DIR:-}" ]; then
    args+=(-DFLX_OPENBLAS_DIR="$FLX_OPENBLAS_DIR" -DFLX_OPENBLAS_INCLUDE="${FLX_OPENBLAS_INCLUDE:-$FLX_OPENBLAS_DIR/include}")
  else  # unpacked Debian packages: the pthreads build flx wants, else the OpenMP one
    for kind in pthread openmp; do
      if [ -f "$p/include/x86_64-linux-gnu/openblas-$kind/cblas.h" ] && [ -d "$p/lib/x86_64-linux-gnu/openblas-$kind" ]; then
        args+=(-DFLX_OPENBLAS_DIR="$p/lib/x86_64-linux-gnu/openblas-$kind"
               -DFLX_OPENBLAS_INCLUDE="$p/include/x86_64-linux-gnu/openblas-$kind")
        break
      fi
    done
  fi
  # Limit: 7 s here (a fresh build dir, CUDA found), no faster with more cores.
  run_step configure 30 cmake -S "$ROOT" -B "$BUILD_DIR" "${args[@]}"
  if [ "$RC" != 0 ]; then record build FAIL "configure: $(rc_text); see $LOGS/configure.log"; return; fi
  local t0; t0=$(date +%s)
  # Limit: ~800 s of CPU here for the whole build without ccache (2 cores,
  # 2026-11); on 16 cores that is 50 s of work, and the longest chain, the
  # sanitized cpu_map.cpp (58 s of one core) then libflx_sanitized.a and its
  # tests' link, about 70 s: some 100 s expected, 240 s allows a core 2x slower.
  # shellcheck disable=SC2086
  run_step build 240 cmake --build "$BUILD_DIR" -j "$JOBS" ${TARGETS:+--target $TARGETS}
  if [ "$RC" = 0 ]; then record build PASS "built in $(( $(date +%s) - t0 )) s with -j $JOBS"
  else record build FAIL "$(rc_text)$(grep -m1 -E 'error|FAILED' "$LOGS/build.log" | sed 's/^/: /' | cut -c1-200)"; fi
}

# The whole suite once; the CUDA subset counted from the same run.
step_tests() {
  unset FLX_SILENCE_WARN_NO_GPU FLX_GPU_BACKEND  # the tests check the fallback warning
  export POCL_DEVICES=${POCL_DEVICES:-"pthread pthread"}
  # shellcheck disable=SC2086
  # Limit: 96 s here with -j2 (404 tests, 190 s of test time; the longest,
  # flx_train_fashion_mnist, 43 s); on 16 cores about 45 s for the longest
  # plus the CUDA cases that skip here (each test process starts CUDA, ~1 s):
  # ~60-90 s expected, 240 s allows 3x. No test may take more than 180 s.
  run_step ctest 240 ctest --test-dir "$BUILD_DIR" -j "$JOBS" --timeout 180 $CTEST_ARGS
  if [ "$RC" = -1 ]; then record tests "skipped: out of time budget" "$SKIP_WHY"; return; fi
  local log=$LOGS/ctest.log
  count() { grep -E "Test +#[0-9]+: $1 " "$log" | grep -cE "$2"; }
  local any='[^ ]+' cuda='[^ ]*(CUDA|Cuda|flx_info)[^ ]*'
  local p f s c_p c_f c_s
  p=$(count "$any" ' Passed') f=$(count "$any" '\*\*\*(Failed|Timeout|Exception|Not Run)')
  s=$(count "$any" 'Skipped') c_p=$(count "$cuda" ' Passed') c_s=$(count "$cuda" 'Skipped')
  c_f=$(count "$cuda" '\*\*\*(Failed|Timeout|Exception|Not Run)')
  local res=PASS
  { [ "$RC" != 0 ] || [ "$f" != 0 ]; } && res=FAIL
  record tests "$res" "all: $p passed, $f failed, $s skipped ($(rc_text)); see $log"
  res=PASS
  [ "$c_f" != 0 ] && res=FAIL
  if [ "$HAVE_GPU" = 1 ] && [ "$c_p" -le 1 ]; then res=FAIL; fi  # with a GPU the CUDA cases must run
  record "tests (CUDA subset)" "$res" "$c_p passed, $c_f failed, $c_s skipped$([ "$HAVE_GPU" = 0 ] && echo ', no GPU')"
  grep -E "Test +#[0-9]+: .*\*\*\*(Failed|Timeout|Exception|Not Run)" "$log" | head -20 | sed 's/^/    /' >"$LOGS/ctest-failures.txt"
}

# The examples with gpu/cu on CUDA; then one under CUDA_VISIBLE_DEVICES=-1.
step_examples() {
  local ex out n
  for ex in basics regression; do
    if [ "$HAVE_GPU" = 0 ]; then record "example $ex on CUDA" "skipped: no GPU" ""; continue; fi
    # Limit: 0.1-0.2 s here on the CPU; on the GPU, CUDA's start and cuBLAS's
    # load add ~1-3 s: 30 s.
    FLX_GPU_BACKEND=CUDA run_step "example-$ex" 30 "$BUILD_DIR/examples/$ex"
    out=$LOGS/example-$ex.log
    # no fallback warning, and basics prints where its tensors are
    if [ "$RC" = 0 ] && ! grep -q 'found no functional GPU' "$out" &&
       { [ "$ex" != basics ] || grep -q 'on CUDA' "$out"; }; then
      record "example $ex on CUDA" PASS "$(grep -m1 -E 'on CUDA|loss fell' "$out")"
    else record "example $ex on CUDA" FAIL "$(rc_text); $(grep -q 'found no functional GPU' "$out" &&
      echo "fell back to the CPU: $(grep -m1 'Preferred backend' "$out" | cut -c1-200)" || echo 'not on CUDA'); see $out"; fi
  done
  # The seed's distributed example with one rank on the GPU (NCCLBackend;
  # its collectives through the CUDA plugin's comm table). Limit: 0.5 s
  # here on the CPU (MPI's start); CUDA's start and NCCL's init add ~2-5 s.
  if [ "$HAVE_GPU" = 0 ]; then record "example ddp on CUDA (NCCL, 1 rank)" "skipped: no GPU" ""
  elif [ ! -x "$BUILD_DIR/examples/ddp" ] || ! command -v mpiexec >/dev/null; then
    record "example ddp on CUDA (NCCL, 1 rank)" FAIL "not built, or no mpiexec (OpenMPI: .gpu-deps carries it)"
  else
    run_step example-ddp 60 mpiexec --allow-run-as-root -n 1 "$BUILD_DIR/examples/ddp"
    out=$LOGS/example-ddp.log
    if [ "$RC" = -1 ]; then record "example ddp on CUDA (NCCL, 1 rank)" "skipped: out of time budget" ""
    elif [ "$RC" = 0 ] && grep -q '^NCCLBackend: 1 workers, rank 0 on CUDA:0' "$out" &&
       grep -q 'ranks hold the same parameters: yes' "$out"; then
      record "example ddp on CUDA (NCCL, 1 rank)" PASS "$(grep -m1 'Epoch 100' "$out")"
    else record "example ddp on CUDA (NCCL, 1 rank)" FAIL "$(rc_text); $(grep -m1 -iE 'error|backend' "$out" | cut -c1-200); see $out"; fi
  fi
  # The pages' snippet programs (docs/snippets, built as docs/doc_*), in a scratch
  # dir (select_backend writes LocalPreferences.toml there): they must run
  # and not fall back to the CPU.
  # Snippets that name OpenCL devices (the seed's two-device examples) need
  # the OpenCL plugin: without it they are skipped, and counted apart.
  local snip ok=0 bad="" fell="" n_snip=0 late=0 no_ocl=""
  mkdir -p "$LOGS/snippets"
  for snip in "$BUILD_DIR"/docs/doc_*; do
    [ -x "$snip" ] || continue
    n_snip=$((n_snip + 1))
    if [ "$HAVE_GPU" = 0 ]; then continue; fi
    if [ ! -e "$BUILD_DIR/libflx_backend_opencl.so" ] && grep -q '"OpenCL"' "$ROOT/docs/snippets/${snip##*/doc_}.cpp" 2>/dev/null; then
      no_ocl+=" ${snip##*/doc_}"
      continue
    fi
    rm -f "$LOGS/snippets/LocalPreferences.toml"
    # Limit: the 14 snippets take 0.9 s together here; CUDA's start adds ~1-3 s each: 30 s each.
    run_step "snippet-${snip##*/doc_}" 30 env -C "$LOGS/snippets" FLX_GPU_BACKEND=CUDA \
      POCL_DEVICES="${POCL_DEVICES:-pthread pthread}" "$snip"
    out=$LOGS/snippet-${snip##*/doc_}.log
    [ "$RC" = -1 ] && { late=$((late + 1)); continue; }  # not started: out of time
    if [ "$RC" = 0 ]; then ok=$((ok + 1)); else bad+=" ${snip##*/doc_}"; fi
    grep -q 'found no functional GPU' "$out" && fell+=" ${snip##*/doc_}"
  done
  if [ "$HAVE_GPU" = 0 ]; then record "doc snippets on CUDA" "skipped: no GPU" "$n_snip built"
  elif [ "$n_snip" = 0 ]; then record "doc snippets on CUDA" FAIL "none built in $BUILD_DIR/docs"
  else
    local res=PASS
    [ "$late" != 0 ] && res="skipped: out of time budget"  # only where none failed
    [ -n "$bad$fell" ] && res=FAIL
    local detail="$ok/$n_snip ran"
    [ "$late" != 0 ] && detail+=", $late not started (out of time)"
    [ -n "$no_ocl" ] && detail+=", skipped for want of the OpenCL plugin:$no_ocl"
    RC=0
    record "doc snippets on CUDA" "$res" "$detail${bad:+; failed:$bad}${fell:+; fell back to the CPU:$fell}; logs $LOGS/snippet-*.log"
  fi

  FLX_GPU_BACKEND=CUDA CUDA_VISIBLE_DEVICES=-1 run_step example-novisible 30 "$BUILD_DIR/examples/basics"  # 0.15 s here
  out=$LOGS/example-novisible.log
  n=$(grep -ciE '(^|[^_])warning:' "$out" 2>/dev/null)  # "Warning: flx: gpu() found no functional GPU ..."
  if [ "$RC" = 0 ] && [ "$n" = 1 ] && grep -q 'on CPU' "$out"; then
    record "CUDA_VISIBLE_DEVICES=-1" PASS "CPU, one warning: $(grep -iE -m1 'warning:' "$out" | cut -c1-120)"
  else record "CUDA_VISIBLE_DEVICES=-1" FAIL "$(rc_text), $n warning lines (want 1); see $out"; fi
}

step_bench() {
  if [ "$HAVE_GPU" = 0 ]; then
    record "benchmarks (a)-(e)" "skipped: no GPU" ""
    record "CNN benchmarks" "skipped: no GPU" ""
    return
  fi
  local common=(--build "$BUILD_DIR" --device CUDA:0 --rounds "$ROUNDS")
  # Limits (GPU only, not measured here): (a)-(d) import PyTorch and start
  # CUDA (~10 s), then 5 rounds of 12 flx and 12 PyTorch benchmarks of at
  # least 0.1 s each, and (d)'s loader epochs: ~60 s expected, 180 s.
  run_step bench-abcd 180 "$PYTHON" bench/compare_gpu.py "${common[@]}" --only a,b,c,d --json "$LOGS/bench-abcd.json"
  [ "$RC" = 0 ] && record "benchmarks (a)-(d)" PASS "$ROUNDS interleaved rounds; figures below" ||
    record "benchmarks (a)-(d)" FAIL "$(rc_text); see $LOGS/bench-abcd.log"
  # (e): flx-train takes 1.4 s an epoch here on the CPU (2 cores); 3 epochs
  # on the GPU, on the CPU and in PyTorch (its import ~5 s) ~30 s expected:
  # 120 s, at most 60 s a run.
  run_step bench-e 120 "$PYTHON" bench/compare_gpu.py "${common[@]}" --only e --train-epochs "$TRAIN_EPOCHS" \
    --train-timeout 60 \
    ${DATA:+--data "$DATA"} --json "$LOGS/bench-e.json"
  [ "$RC" = 0 ] && record "benchmark (e) flx-train" PASS "$TRAIN_EPOCHS epochs on GPU and CPU; figures below" ||
    record "benchmark (e) flx-train" FAIL "$(rc_text); see $LOGS/bench-e.log"
  # The CNN's training step at batch 16 and 128 and a 3x3 convolution
  # against PyTorch with cuDNN, both in full Float32 (no TF32). Limit (GPU
  # only, not measured here): PyTorch's import and cuDNN's autotuning
  # ~15 s, then 5 rounds of 4 benchmarks a side of ~0.3 s each: ~40 s
  # expected, 90 s (the bench steps' limits fit one 570 s call together).
  run_step bench-cnn 90 "$PYTHON" bench/compare_cnn.py --build "$BUILD_DIR" --device cuda --rounds "$ROUNDS" \
    --json "$LOGS/bench-cnn.json"
  [ "$RC" = 0 ] && record "CNN benchmarks" PASS "$ROUNDS interleaved rounds; figures below" ||
    record "CNN benchmarks" FAIL "$(rc_text); see $LOGS/bench-cnn.log"
  # flx-train --model cnn against the same training in PyTorch, both on the
  # GPU. Limit: 1.4-1.5 s an epoch for flx and 2.3-2.6 s for PyTorch on an
  # H100 (2026-11), with the data's load and PyTorch's import: ~35 s for 5
  # epochs, 90 s.
  run_step train-cnn 90 "$PYTHON" bench/compare_train.py --build "$BUILD_DIR" --model cnn --epochs "$CNN_EPOCHS" \
    --device cuda --json "$LOGS/train-cnn.json"
  [ "$RC" = 0 ] && record "flx-train --model cnn vs PyTorch" PASS "$CNN_EPOCHS epochs each on the GPU; figures below" ||
    record "flx-train --model cnn vs PyTorch" FAIL "$(rc_text); see $LOGS/train-cnn.log"
}

# The sequence models (issue 20) and the zoo of issue 28 against PyTorch
# with cuDNN, both on the GPU in full Float32: the recurrent layers' steps,
# the zoo's char-LSTM, char-transformer and GPT training steps, then
# ResNet-18's (interleaved rounds, medians).
step_seqbench() {
  if [ "$HAVE_GPU" = 0 ]; then record "sequence-model benchmarks" "skipped: no GPU" ""; return; fi
  # Limit: PyTorch's import and CUDA's start, then per round 5 benchmarks a
  # side of at least 0.3 s each: 11 s for 3 rounds on an H200 (2026-11-26),
  # 120 s allows a slower start and more rounds.
  run_step bench-rnn 120 "$PYTHON" bench/compare_rnn.py --build "$BUILD_DIR" --device cuda --rounds "$ROUNDS" \
    --json "$LOGS/bench-rnn.json"
  [ "$RC" = 0 ] && record "recurrent layers vs PyTorch" PASS "$(grep -m1 'lstm_step' "$LOGS/bench-rnn.log" | cut -c1-160)" ||
    record "recurrent layers vs PyTorch" FAIL "$(rc_text); see $LOGS/bench-rnn.log"
  # Limit: each run starts a process (CUDA's start; PyTorch's import ~5 s)
  # and trains 50 steps (under a second on a GPU): 2 models x 2 sides x
  # ROUNDS runs, about 40 s for 3 rounds on an H200; the GPT (issue 28) is
  # a third model: 150 s.
  run_step bench-zoo 150 "$PYTHON" bench/compare_zoo.py --build "$BUILD_DIR" --device cuda --rounds "$ROUNDS" \
    --models lstm,transformer,gpt --steps 50 --json "$LOGS/bench-zoo.json"
  [ "$RC" = 0 ] && record "char-LSTM, char-transformer, GPT vs PyTorch" PASS "$(grep 'training step' "$LOGS/bench-zoo.log" |
    sed -E 's/.*(flx [0-9.]+ ms, PyTorch [0-9.]+ ms, flx\/PyTorch [0-9.]+).*/\1/' | paste -sd ';')" ||
    record "char-LSTM, char-transformer, GPT vs PyTorch" FAIL "$(rc_text); see $LOGS/bench-zoo.log"
  # ResNet-18's training step on 32x32 images, batch 32, both on cuDNN
  # (issue 28). Limit (not measured on a GPU yet): PyTorch's import and
  # CUDA's start ~10 s, then ROUNDS rounds of 2 benchmarks a side of at
  # least 0.5 s each after a warm-up: ~30 s for 3 rounds, 90 s.
  run_step bench-resnet 90 "$PYTHON" bench/compare_resnet.py --build "$BUILD_DIR" --device cuda --rounds "$ROUNDS" \
    --min-time 0.5 --json "$LOGS/bench-resnet.json"
  [ "$RC" = 0 ] && record "ResNet-18 vs PyTorch" PASS "$(grep -m1 'resnet18_step_b32' "$LOGS/bench-resnet.log" | tr -s ' ' | cut -c1-160)" ||
    record "ResNet-18 vs PyTorch" FAIL "$(rc_text); see $LOGS/bench-resnet.log"
}

# Low precision and attention (issue 30) against PyTorch on the GPU: an
# 8192^3 matmul and a 3x3 convolution in Float32, BFloat16 and Float16
# (bench/compare_gpu.py group (f)), then attention forward and backward
# without its scores against scaled_dot_product_attention
# (bench/compare_attention.py), in BFloat16 and Float32.
step_lowp() {
  if [ "$HAVE_GPU" = 0 ]; then record "low-precision benchmarks" "skipped: no GPU" ""; return; fi
  # Limit (GPU only, not measured yet): PyTorch's import and CUDA's start
  # ~10 s, then rounds of 9 benchmarks a side of at least 0.1 s (a bf16
  # 8192^3 matmul is ~2 ms, FP32's ~25 ms): ~30 s expected, 90 s.
  run_step bench-f 90 "$PYTHON" bench/compare_gpu.py --build "$BUILD_DIR" --device CUDA:0 --rounds "$ROUNDS" --only f \
    --json "$LOGS/bench-f.json"
  [ "$RC" = 0 ] && record "low precision: matmul, conv (f)" PASS "$ROUNDS interleaved rounds; figures below" ||
    record "low precision: matmul, conv (f)" FAIL "$(rc_text); see $LOGS/bench-f.log"
  # Limit (not measured yet): 4 lengths x 2 dtypes, both sides, a few
  # rounds of forward+backward of at most ~50 ms each: 120 s.
  if [ ! -f bench/compare_attention.py ]; then record "attention vs SDPA" "skipped: no bench/compare_attention.py" ""; return; fi
  for dt in bf16 f32; do
    run_step "bench-attention-$dt" 60 "$PYTHON" bench/compare_attention.py --build "$BUILD_DIR" --device cuda \
      --dtype "$dt" --rounds "$ROUNDS" --json "$LOGS/bench-attention-$dt.json"
    [ "$RC" = 0 ] && record "attention vs SDPA ($dt)" PASS "$(grep -m4 -E '^ *[0-9]+ ' "$LOGS/bench-attention-$dt.log" | tr -s ' ' | paste -sd ';' | cut -c1-200)" ||
      record "attention vs SDPA ($dt)" FAIL "$(rc_text); see $LOGS/bench-attention-$dt.log"
  done
}

# compute-sanitizer over the CUDA plugin's test suite (memcheck, then
# racecheck over its cases whose kernels use shared memory) and over the
# conformance suite's CUDA cases and the fused Dense tests (memcheck).
step_sanitizer() {
  local san
  san=$(command -v compute-sanitizer || ls "$CUDA_HOME"/bin/compute-sanitizer "$CUDA_HOME"/compute-sanitizer/compute-sanitizer \
         2>/dev/null | head -1)
  san=${san:-compute-sanitizer}
  # Limits (GPU only, not measured here; together with 15 s each kept back,
  # 540 s, the recipe's third device call): the plugin suite takes 17 s on
  # PoCL here, some seconds on a GPU, and memcheck slows kernels 10-30x:
  # 180 s. racecheck over the suites with shared-memory kernels
  # (reductions, arg*, softmax): 90 s. The conformance suite's OpenCL:0
  # cases take 16 s here: 150 s for CUDA's under memcheck. Dense: 60 s.
  sanitize "$san" memcheck plugin 180 "$BUILD_DIR/flx_plugin_tests_cuda"
  sanitize "$san" racecheck plugin 90 "$BUILD_DIR/flx_plugin_tests_cuda" \
    --gtest_filter='*Reduction*:*Arg*:*Softmax*'
  sanitize "$san" memcheck conformance 150 "$BUILD_DIR/flx_tests" \
    --gtest_filter='Devices/Conformance.*/CUDA*:MultiDevice.*Cuda*'
  sanitize "$san" memcheck dense 60 "$BUILD_DIR/flx_dense_tests" --gtest_filter='DenseFused.MatchesTheUnfusedOpsOnEveryDevice:DenseFused.CudaIsCovered*'
}

# sanitize SANITIZER TOOL LABEL LIMIT EXE [ARGS...]: one sanitizer run of at
# most LIMIT seconds, one summary row.
sanitize() {
  local san=$1 tool=$2 label=$3 limit=$4 exe=$5 out errs api total row
  shift 5
  row="compute-sanitizer $tool ($label)"
  if [ "$HAVE_GPU" = 0 ]; then record "$row" "skipped: no GPU" ""; return; fi
  if [ ! -x "$san" ] || [ ! -x "$exe" ]; then
    record "$row" FAIL "could not run: $([ -x "$san" ] || echo "no compute-sanitizer on PATH or in $CUDA_HOME; ")$([ -x "$exe" ] || echo "no $exe")"
    return
  fi
  run_step "sanitizer-$tool-$label" "$limit" "$san" --tool "$tool" --error-exitcode 99 "$exe" --gtest_brief=1 "$@"
  if [ "$RC" = -1 ]; then record "$row" "skipped: out of time budget" "$SKIP_WHY"; return; fi
  out=$LOGS/sanitizer-$tool-$label.log
  errs=$(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$out" | tail -1 | sed 's/^=* *//')
  # "Program hit cudaError..." lines are CUDA API calls that returned an
  # error (the tests provoke some: too large allocations); the rest are
  # memory or race reports.
  api=$(grep -c '^========= Program hit' "$out") total=$(echo "$errs" | grep -oE '[0-9]+ errors?' | grep -oE '[0-9]+')
  case $RC in
    0) record "$row" PASS "${errs:-no errors reported}" ;;
    99) if [ -n "$total" ] && [ "$total" = "$api" ]; then
          record "$row" PASS "$errs, all $api of them CUDA API calls returning an error (provoked by the tests); no memory reports; see $out"
        else record "$row" FAIL "$errs ($api API-call errors); see $out"; fi ;;
    124|137) record "$row" FAIL "timed out after ${LIMIT_USED}s; $(grep -c '^========= [A-Z]' "$out") report lines so far; see $out" ;;
    *) record "$row" FAIL "could not run or tests failed ($(rc_text)): $(grep -m1 -iE 'error|fail' "$out" | cut -c1-150)" ;;
  esac
}

write_summary() {
  {
    echo "# cuda-check summary"
    echo
    echo "- date: $(date -u '+%Y-%m-%d %H:%M UTC'); commit $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?')"
    echo "- GPU: $GPU_INFO"
    echo "- driver: $DRIVER; nvcc: $NVCC_VERSION"
    echo "- cuDNN: $CUDNN_FOUND"
    echo "- NCCL: $NCCL_FOUND"
    echo "- Fashion-MNIST: ${FLX_DATA:-/usr/share/datasets}$([ -n "${FLX_DATA:-}" ] || [ -d /usr/share/datasets/fashion-mnist ] || echo ' (absent)')"
    echo "- OpenBLAS: $(sed -n 's/^FLX_OPENBLAS_LIB:FILEPATH=//p' "$BUILD_DIR/CMakeCache.txt" 2>/dev/null || echo '?')"
    echo "- build dir: $BUILD_DIR; logs: $LOGS; took $(( $(date +%s) - START )) s of a $BUDGET s budget"
    echo
    echo "| step | result | details |"
    echo "|---|---|---|"
    printf '%s\n' "${ROWS[@]}"
    if [ -s "$LOGS/ctest-failures.txt" ]; then echo; echo "Failing tests (first 20):"; echo; cat "$LOGS/ctest-failures.txt"; fi
    for j in "$LOGS/bench-abcd.json" "$LOGS/bench-e.json" "$LOGS/bench-cnn.json" "$LOGS/train-cnn.json" "$LOGS/bench-f.json"; do
      [ -f "$j" ] && "$PYTHON" "$ROOT/bench/gpu_summary.py" "$j"
    done
    echo
    echo "Overall: $([ "$FAILED" = 0 ] && echo PASS || echo FAIL)"
  } >"$SUMMARY"
}

# ---- main ------------------------------------------------------------------------
detect_gpu
if [ "$HAVE_GPU" = 0 ] && [ "$NO_GPU_OK" = 0 ]; then
  echo "cuda-check: no GPU: $NO_GPU_REASON (use --no-gpu-ok to build and test without one)" >&2
  exit 2
fi
find_vendor_libs
# Fashion-MNIST for the tests and (e): --data, else $FLX_DATA, else Debian's
# place, else the same package unpacked under /opt/gpu-deps.
if [ -n "$DATA" ]; then export FLX_DATA=$DATA
elif [ -z "${FLX_DATA:-}" ] && [ ! -d /usr/share/datasets/fashion-mnist ] &&
     [ -d /opt/gpu-deps/usr/share/datasets/fashion-mnist ]; then
  export FLX_DATA=/opt/gpu-deps/usr/share/datasets
fi
# The checkpoint interop tests read and write files with Python's
# safetensors: where the Python lacks it, the wheel scripts/gpu-carry.sh
# unpacked into .gpu-deps/python.
if ! "$PYTHON" -c 'import safetensors' 2>/dev/null && [ -d "$ROOT/.gpu-deps/python/safetensors" ]; then
  export PYTHONPATH=$ROOT/.gpu-deps/python${PYTHONPATH:+:$PYTHONPATH}
fi
log "GPU: $GPU_INFO; nvcc: $NVCC_VERSION; cuDNN: $CUDNN_FOUND; NCCL: $NCCL_FOUND"
if wants build; then
  if [ "$SKIP_BUILD" = 1 ]; then record build "skipped: --skip-build" "using $BUILD_DIR"; else step_build; fi
fi
wants tests && step_tests
wants examples && step_examples
wants bench && step_bench
wants seqbench && step_seqbench
wants lowp && step_lowp
wants sanitizer && step_sanitizer
write_summary
echo "cuda-check: summary in $SUMMARY ($([ "$FAILED" = 0 ] && echo all passed || echo some steps FAILED))"
exit "$FAILED"
