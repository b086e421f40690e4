"""Models move between flx and the Python ecosystem with no transposes.

flx -> Python: safetensors.numpy reads what flx's save() wrote: the Dense
weight (out, in) is an [out, in] array, and numpy's forward pass matches
the one flx printed. Python -> flx: a file laid out as PyTorch's
nn.Linear(3, 2).state_dict() ("weight" [2, 3], "bias" [2]) loads into
Dense(3 => 2) and computes W x + b.

usage: model_interop.py MODEL_INTEROP_EXE WORKDIR
"""
import os
import subprocess
import sys

import numpy as np
from safetensors.numpy import load_file, save_file

exe, work = sys.argv[1], sys.argv[2]
os.makedirs(work, exist_ok=True)

# flx -> Python
path = os.path.join(work, "flx_model.safetensors")
out = subprocess.run([exe, "save", path], check=True, capture_output=True, text=True).stdout
flx_y = np.array([float(v) for v in out.split()], dtype=np.float32)
t = load_file(path)
assert sorted(t) == ["layers.0.bias", "layers.0.weight", "layers.1.bias", "layers.1.weight"], sorted(t)
w1 = t["layers.0.weight"]
assert w1.shape == (2, 3) and w1.dtype == np.float32, (w1.shape, w1.dtype)
np.testing.assert_array_equal(w1, np.array([[0, 1, 2], [10, 11, 12]], dtype=np.float32))
np.testing.assert_array_equal(t["layers.0.bias"], np.array([0.5, -0.5], dtype=np.float32))
assert t["layers.1.weight"].shape == (1, 2)
x = np.array([1, 2, 3], dtype=np.float32)
y = t["layers.1.weight"] @ (w1 @ x + t["layers.0.bias"]) + t["layers.1.bias"]
np.testing.assert_allclose(flx_y, y, rtol=1e-6)
print("numpy reads flx's Chain: shapes", {k: v.shape for k, v in t.items()}, "output", y)

# Python (PyTorch's nn.Linear layout) -> flx
path = os.path.join(work, "torch_linear.safetensors")
weight = np.array([[1, 2, 3], [4, 5, 6]], dtype=np.float32)
bias = np.array([0.1, 0.2], dtype=np.float32)
save_file({"weight": weight, "bias": bias}, path)
out = subprocess.run([exe, "load", path], check=True, capture_output=True, text=True).stdout
got = np.array([float(v) for v in out.split()], dtype=np.float32)
np.testing.assert_allclose(got, weight @ np.ones(3, dtype=np.float32) + bias, rtol=1e-6)
print("flx's Dense(3 => 2) computes W x + b from a PyTorch-style file:", got)
