"""Models move between flx and the Python ecosystem with no transposes.

flx -> Python: safetensors.numpy reads what flx's save() wrote: the Dense
weight (out, in) is an [out, in] array, and numpy's forward pass matches
the one flx printed. Python -> flx: a file laid out as PyTorch's
nn.Linear(3, 2).state_dict() ("weight" [2, 3], "bias" [2]) loads into
Dense(3 => 2) and computes W x + b; a file laid out as the state_dict of
nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2)) ("0.weight",
"0.bias", "2.weight", "2.bias") is refused by loadmodel with a message that
gives the key map, and with that key map loads into
Chain(Dense(3 => 4, relu), Dense(4 => 2)) and computes the same function.

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

# Python (PyTorch's nn.Sequential(Linear(3, 4), ReLU(), Linear(4, 2)) layout) -> flx Chain
path = os.path.join(work, "torch_sequential.safetensors")
rng = np.random.default_rng(7)
sd = {  # the order and names of nn.Sequential.state_dict(); the ReLU is module 1 and holds nothing
    "0.weight": rng.standard_normal((4, 3)).astype(np.float32),
    "0.bias": rng.standard_normal(4).astype(np.float32),
    "2.weight": rng.standard_normal((2, 4)).astype(np.float32),
    "2.bias": rng.standard_normal(2).astype(np.float32),
}
save_file(sd, path, metadata={"format": "pt"})
out = subprocess.run([exe, "sequential", path], check=True, capture_output=True, text=True).stdout
refusal, values = out.split("\n", 1)
assert refusal.startswith("refused: "), out
assert 'loadmodel(model, s, {{"0.", "layers.0."}, {"2.", "layers.1."}})' in refusal, refusal
got = np.array([float(v) for v in values.split()], dtype=np.float32)
x = np.array([1, 2, 3], dtype=np.float32)
want = sd["2.weight"] @ np.maximum(sd["0.weight"] @ x + sd["0.bias"], 0) + sd["2.bias"]
np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
print("flx's Chain(Dense(3 => 4, relu), Dense(4 => 2)) loads an nn.Sequential file with a key map:", got)
