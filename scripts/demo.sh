#!/usr/bin/env bash
# The main job: install what flx needs, build it, and train a 784-256-256-10
# MLP on Fashion-MNIST for 10 epochs on get_device() (the CPU unless a GPU
# backend is functional), with a progress bar, test accuracy per epoch and a
# checkpoint per epoch in ./checkpoints. Extra arguments go to flx-train:
#   scripts/demo.sh --device OpenCL --epochs 1
#   scripts/demo.sh --resume --epochs 15
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh

BUILD_DIR=${BUILD_DIR:-build}
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release
cmake --build "$BUILD_DIR" -j "$(nproc)" --target flx-train
exec "$BUILD_DIR"/apps/flx-train --epochs 10 --checkpoint-dir checkpoints --metrics checkpoints/metrics.jsonl "$@"
