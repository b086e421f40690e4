#!/usr/bin/env bash
# Prepare .gpu-deps/ for a lent GPU machine (no package registry there): the
# Debian packages a CUDA build and scripts/cuda-check.sh need, within the
# device tool's 64 MiB carry limit (working tree included).
#
#   scripts/gpu-carry.sh      # here, in the checkout; then on the GPU machine, with carry [".gpu-deps"]:
#   source .gpu-deps/unpack.sh && scripts/cuda-check.sh
#
# It runs ../shared/tools/gpu-deps.sh with the pthreads OpenBLAS flx links and
# the Fashion-MNIST dataset (benchmark (e), flx-train's tests) and Python's
# safetensors (the checkpoint interop tests), then drops the
# packages flx does not use yet (the OpenMP OpenBLAS, oneDNN, OpenMPI and
# what only they need): with them the set is ~69 MiB, over the limit.
set -euo pipefail
cd "$(dirname "$0")/.."
tool=${GPU_DEPS_TOOL:-../shared/tools/gpu-deps.sh}
[ -f "$tool" ] || { echo "gpu-carry: $tool not found (set GPU_DEPS_TOOL)" >&2; exit 2; }
mkdir -p "$(git rev-parse --git-dir)/info"  # gpu-deps.sh adds .gpu-deps to .git/info/exclude
bash "$tool" libopenblas0-pthread libopenblas-pthread-dev dataset-fashion-mnist
unused=(libopenblas0-openmp libopenblas-openmp-dev libdnnl2 libdnnl-dev libgomp1
        libopenmpi3 libopenmpi-dev openmpi-bin openmpi-common libhwloc15 libevent-core-2.1-7
        libevent-pthreads-2.1-7 libpmix2 libfabric1 libucx0 libibverbs1 librdmacm1 libnl-3-200
        libnl-route-3-200 libpsm2-2 libpsm-infinipath1 libxnvctrl0 libmunge2)
for p in "${unused[@]}"; do rm -f .gpu-deps/"${p}"_*.deb; done
# Python's safetensors for the checkpoint interop tests (PyTorch's Python
# there may lack it): the abi3 wheel, unpacked (its module is compiled, so
# it cannot be imported from the zip); cuda-check.sh puts it on PYTHONPATH.
rm -rf .gpu-deps/python .gpu-deps/wheel && mkdir -p .gpu-deps/wheel
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.10 safetensors -d .gpu-deps/wheel
python3 -m zipfile -e .gpu-deps/wheel/safetensors-*.whl .gpu-deps/python
rm -rf .gpu-deps/wheel
kib=$(du -sk .gpu-deps | cut -f1)
echo "gpu-carry: $((kib / 1024)) MiB in .gpu-deps ($(ls .gpu-deps/*.deb | wc -l) packages)"
[ "$kib" -le $((60 * 1024)) ] || { echo "gpu-carry: over 60 MiB: too big to carry with the tree" >&2; exit 1; }
