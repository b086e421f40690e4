#!/usr/bin/env python3
"""Writes resnet18_fixture.safetensors: torchvision's ResNet-18 (1000
classes, bench/resnet_torch.py's copy of it) in Float64, for
tests/test_resnet.cpp.

The weights (46 MB in Float32) are not in the file: both sides make them
from a formula of the state_dict key and the element's index (row-major, as
PyTorch flattens the tensor), exact in Float64 on both sides:

    h(key, i) = splitmix64 finaliser of (fnv1a64(key) + (i + 1) * 0x9E3779B97F4A7C15)   (mod 2^64)
    u(key, i) = (h(key, i) >> 11) * 2^-53                       in [0, 1)
    v(key, i) = 2 u(key, i) - 1                                 in [-1, 1)

    Conv2d weight [out, in, kH, kW]   sqrt(6 / (in kH kW)) * v     (He-uniform: activations keep their size)
    BatchNorm2d weight, running_var   1 + 0.25 v
    BatchNorm2d bias, running_mean    0.1 v
    num_batches_tracked               0
    fc.weight [1000, 512]             sqrt(3 / 512) * v
    fc.bias                           0.1 v
    the input [2, 3, 64, 64]          v("input", i)
    the cotangent [2, 1000]           v("cotangent", i)

The file holds, for each state_dict key, "shape/<key>": its shape (Int64),
so the test builds exactly torchvision's state_dict, names and shapes, and
loads it through zoo::load_torchvision. Then:

    y_eval     model.eval()(x)                  [2, 1000]
    y_train    model.train()(x)                 [2, 1000] (batch statistics)
    loss       sum(y_train * c)
    then the gradients of loss, for the input ("x") and every parameter, and
    the running statistics after that training forward pass ("running/<key>"),
    each flattened in PyTorch's row-major order:
      a tensor of at most 4096 elements: all of it, "full/<name>";
      a larger one (the convolutions' and fc's weights, the input):
        "proj/<name>"   8 projections sum_i g_i r_k(i), r_k(i) = v("proj<k>:<name>", i), k = 0..7
                        (every element of the gradient counts in each),
        "sample/<name>" 64 elements g[h("sample:<name>", j) mod n], j = 0..63,
        "sumsq/<name>"  sum_i g_i^2.
    <name> is "grad/<key>" for a parameter's gradient, "grad/x" for the input's.

Arrays are written in PyTorch's order as plain 1-d vectors (y: [2, 1000]
flattened row-major: y[n, k] at n * 1000 + k). Rerun to regenerate (torch
and safetensors needed; the file is committed, so the test needs neither):

    python3 tests/parity/make_resnet18_fixture.py tests/parity/resnet18_fixture.safetensors
"""
import os
import sys

import numpy as np
import torch
from safetensors.numpy import save_file

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))
from resnet_torch import resnet18  # noqa: E402

M64 = (1 << 64) - 1
GOLDEN = 0x9E3779B97F4A7C15
FULL_MAX = 4096
NPROJ, NSAMPLE = 8, 64
BATCH, SIZE = 2, 64


def fnv1a64(s):
    h = 0xCBF29CE484222325
    for b in s.encode():
        h = ((h ^ b) * 0x100000001B3) & M64
    return h


def hashes(key, n):
    z = (np.uint64(fnv1a64(key)) + (np.arange(1, n + 1, dtype=np.uint64) * np.uint64(GOLDEN)))
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def v(key, n):
    return 2.0 * ((hashes(key, n) >> np.uint64(11)).astype(np.float64) * 2.0 ** -53) - 1.0


def weight_for(key, shape):
    n = int(np.prod(shape, dtype=np.int64))
    if key.endswith("num_batches_tracked"):
        return np.zeros(shape, dtype=np.int64)
    r = v(key, n)
    if len(shape) == 4:
        out = np.sqrt(6.0 / float(shape[1] * shape[2] * shape[3])) * r
    elif key == "fc.weight":
        out = np.sqrt(3.0 / 512.0) * r
    elif key == "fc.bias" or key.endswith("bias") or key.endswith("running_mean"):
        out = 0.1 * r
    elif key.endswith("weight") or key.endswith("running_var"):
        out = 1.0 + 0.25 * r
    else:
        raise ValueError(key)
    return out.reshape(shape)


def summarise(out, name, g):
    g = np.ascontiguousarray(g, dtype=np.float64).reshape(-1)
    n = g.size
    if n <= FULL_MAX:
        out[f"full/{name}"] = g
        return
    out[f"proj/{name}"] = np.array([np.dot(g, v(f"proj{k}:{name}", n)) for k in range(NPROJ)])
    out[f"sample/{name}"] = g[(hashes(f"sample:{name}", NSAMPLE) % np.uint64(n)).astype(np.int64)]
    out[f"sumsq/{name}"] = np.array([np.dot(g, g)])


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else "resnet18_fixture.safetensors"
    torch.set_default_dtype(torch.float64)
    model = resnet18(1000)
    assert sum(p.numel() for p in model.parameters()) == 11_689_512
    sd = model.state_dict()
    model.load_state_dict({k: torch.from_numpy(weight_for(k, tuple(t.shape))) for k, t in sd.items()})
    out = {f"shape/{k}": np.array(t.shape, dtype=np.int64) for k, t in sd.items()}

    x = torch.from_numpy(v("input", BATCH * 3 * SIZE * SIZE).reshape(BATCH, 3, SIZE, SIZE))
    c = torch.from_numpy(v("cotangent", BATCH * 1000).reshape(BATCH, 1000))
    model.eval()
    with torch.no_grad():
        out["y_eval"] = model(x).numpy().reshape(-1).copy()
    model.train()
    x.requires_grad_()
    y = model(x)
    loss = (y * c).sum()
    loss.backward()
    out["y_train"] = y.detach().numpy().reshape(-1).copy()
    out["loss"] = np.array([loss.item()])
    summarise(out, "grad/x", x.grad.numpy())
    for k, p in model.named_parameters():
        summarise(out, f"grad/{k}", p.grad.numpy())
    for k, t in model.state_dict().items():
        if k.endswith("running_mean") or k.endswith("running_var"):
            out[f"running/{k}"] = t.numpy().reshape(-1).copy()
    save_file(out, path, metadata={"generator": "tests/parity/make_resnet18_fixture.py", "torch": torch.__version__,
                                   "input": f"{BATCH}x3x{SIZE}x{SIZE}", "dtype": "float64"})
    print(f"wrote {path}: {len(out)} arrays, {sum(a.nbytes for a in out.values())} bytes of data; "
          f"loss {loss.item():.12g}")


if __name__ == "__main__":
    main()
