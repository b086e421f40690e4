"""flx -> Python: the C++ program writes a checkpoint with serialize() +
write_atomic(); the reference reader (safetensors.numpy) must load it with the
names, shapes, dtypes and values flx wrote.
usage: read_flx_file.py INTEROP_EXE PATH"""
import subprocess
import sys

import numpy as np
from safetensors import safe_open
from safetensors.numpy import load_file

exe, path = sys.argv[1], sys.argv[2]
subprocess.run([exe, "write", path], check=True)

t = load_file(path)
expected = {
    "layers.0.weight": np.arange(12, dtype=np.float32).reshape(4, 3) * np.float32(0.5) - np.float32(1),
    "layers.0.bias": np.arange(4, dtype=np.float32) / np.float32(4),
    "d": np.array([[1.0 / 3.0, -2.0], [1e300, 0.0]], dtype=np.float64),
    "counts": np.array([-5, 0, 1 << 40], dtype=np.int64),
    "step": np.array(42, dtype=np.int32),
    "bytes": np.array([0, 7, 255], dtype=np.uint8),
    "flags": np.array([True, False]),
    "half": np.array([1.5, -2.0], dtype=np.float16),
    "empty": np.zeros((0, 2), dtype=np.float32),
}
assert sorted(t) == sorted(expected), f"names: {sorted(t)} != {sorted(expected)}"
for name, want in expected.items():
    got = t[name]
    assert got.dtype == want.dtype, f"{name}: dtype {got.dtype} != {want.dtype}"
    assert got.shape == want.shape, f"{name}: shape {got.shape} != {want.shape}"
    assert np.array_equal(got, want), f"{name}: values {got} != {want}"

with safe_open(path, framework="np") as f:
    meta = f.metadata()
assert meta == {"format": "flx", "epoch": "3"}, f"metadata {meta}"
print(f"safetensors.numpy read the flx file: {len(t)} tensors OK")
