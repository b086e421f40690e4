#!/usr/bin/env bash
# The main job: install what flx needs, build it, and train flx-train's CNN
# (two blocks of Conv, BatchNorm, relu and MaxPool, then Dense layers) on
# Fashion-MNIST for 5 epochs on get_device() (the CPU unless a GPU backend
# is functional), with a progress bar, test accuracy per epoch and a
# checkpoint per epoch in ./checkpoints. Extra arguments go to flx-train:
#   scripts/demo.sh --device OpenCL --epochs 1
#   scripts/demo.sh --model mlp          # the 784-256-256-10 MLP, 10 epochs
#   scripts/demo.sh --resume             # after an interrupted run
#   scripts/demo.sh --logdir runs        # TensorBoard logs; to look: tensorboard --logdir runs
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh

BUILD_DIR=${BUILD_DIR:-build}
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release
cmake --build "$BUILD_DIR" -j "$(nproc)" --target flx-train
exec "$BUILD_DIR"/apps/flx-train --model cnn --checkpoint-dir checkpoints --metrics checkpoints/metrics.jsonl "$@"
