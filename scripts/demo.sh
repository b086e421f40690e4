#!/usr/bin/env bash
# The main job: build flx and run its examples (for now the basic example and
# a regression trained with Adam; a later issue makes this a Fashion-MNIST
# trainer).
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install-deps.sh

BUILD_DIR=${BUILD_DIR:-build}
cmake -S . -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release
cmake --build "$BUILD_DIR" -j "$(nproc)" --target basics regression
"$BUILD_DIR"/examples/basics
"$BUILD_DIR"/examples/regression
