#!/usr/bin/env bash
# Install everything flx needs to build and test on Debian 12. Idempotent:
# skips apt when every package is already there.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config
  libopenblas-pthread-dev libtomlplusplus-dev libdnnl-dev
  ocl-icd-opencl-dev opencl-headers pocl-opencl-icd libclblast-dev clinfo
  libgtest-dev libgmock-dev libbenchmark-dev
  zlib1g-dev nlohmann-json3-dev libcli11-dev dataset-fashion-mnist libisal-dev
  libopenmpi-dev openmpi-bin iproute2
  libblis-pthread-dev
  python3 python3-pip
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "install-deps: installing ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# Python packages: numpy + safetensors for the checkpoint interop test (the
# reference reader/writer); tensorboard for the TensorBoard tests (it reads
# flx's event files back, and its server answers over HTTP); torch only for
# the benchmarks.
pip_install() {
  python3 -m pip install -q "$@" 2>/dev/null ||
    python3 -m pip install -q --break-system-packages "$@"
}
python3 -c "import numpy, safetensors" 2>/dev/null || pip_install numpy safetensors
python3 -c "import tensorboard" 2>/dev/null || pip_install tensorboard
if [ "${FLX_BENCH_DEPS:-0}" = "1" ]; then
  python3 -c "import torch" 2>/dev/null || pip_install torch
fi
