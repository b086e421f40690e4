#!/usr/bin/env bash
# Prepare .gpu-deps/ for a lent GPU machine (no package registry there): the
# Debian packages a CUDA build and scripts/cuda-check.sh need, within the
# device tool's 64 MiB carry limit (working tree included).
#
#   scripts/gpu-carry.sh      # here, in the checkout; then on the GPU machine, with carry [".gpu-deps"]:
#   source .gpu-deps/unpack.sh && scripts/cuda-check.sh
#
# It runs ../shared/tools/gpu-deps.sh with the pthreads OpenBLAS flx links,
# ISA-L (CRC-32C for TensorBoard's event files), the Fashion-MNIST dataset
# (benchmark (e), flx-train's tests) and Python's safetensors (the
# checkpoint interop tests), then drops the
# packages flx does not use (the OpenMP OpenBLAS): with it the set is over the
# limit. OpenMPI (flx::distributed, examples/ddp) and oneDNN (the CPU's
# convolutions) stay, with the OpenCL loader and headers oneDNN's CMake
# config and library ask for.
set -euo pipefail
cd "$(dirname "$0")/.."
tool=${GPU_DEPS_TOOL:-../shared/tools/gpu-deps.sh}
[ -f "$tool" ] || { echo "gpu-carry: $tool not found (set GPU_DEPS_TOOL)" >&2; exit 2; }
mkdir -p "$(git rev-parse --git-dir)/info"  # gpu-deps.sh adds .gpu-deps to .git/info/exclude
bash "$tool" libopenblas0-pthread libopenblas-pthread-dev dataset-fashion-mnist zlib1g \
  ocl-icd-opencl-dev ocl-icd-libopencl1 opencl-c-headers libcli11-dev libisal-dev libisal2
unused=(libopenblas0-openmp libopenblas-openmp-dev)
for p in "${unused[@]}"; do rm -f .gpu-deps/"${p}"_*.deb; done
# Debian's -dev symlinks can be absolute (libz.so -> /lib/x86_64-linux-gnu/libz.so.1.2.13),
# dangling once unpacked into /opt/gpu-deps: CMake then takes libz.a, which cannot
# go into libflx.so. unpack.sh re-points them inside the prefix (zlib1g travels for that).
cat >>.gpu-deps/unpack.sh <<'EOS'
# (scripts/gpu-carry.sh) absolute symlinks re-pointed into the prefix
find /opt/gpu-deps -xtype l | while read -r _s; do
  _t=$(readlink "$_s"); case $_t in /*) [ -e "/opt/gpu-deps$_t" ] && ln -sf "/opt/gpu-deps$_t" "$_s" ;; esac
done
EOS
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
