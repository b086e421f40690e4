#!/usr/bin/env bash
# Build flx and run every test: the README's test command and what CI runs.
#   scripts/test.sh            # install deps, configure, build, ctest
# Environment: BUILD_DIR (default build), JOBS (default: all cores).
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh

BUILD_DIR=${BUILD_DIR:-build}
JOBS=${JOBS:-$(nproc)}
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release
cmake --build "$BUILD_DIR" -j "$JOBS"
# The gpu() fallback warning is part of what tests check: don't silence it.
unset FLX_SILENCE_WARN_NO_GPU FLX_GPU_BACKEND
# OpenCL on PoCL with two devices, so device-to-device moves are tested too.
export POCL_DEVICES=${POCL_DEVICES:-"pthread pthread"}
ctest --test-dir "$BUILD_DIR" -j "$JOBS" --output-on-failure --timeout 600
