"""A PyTorch conv net's checkpoint loads into flx and computes PyTorch's outputs.

The model is PyTorch's
  nn.Sequential(Conv2d(1, 4, 3, padding=1), BatchNorm2d(4), ReLU(), MaxPool2d(2),
                Conv2d(4, 8, 3), BatchNorm2d(8), ReLU(), MaxPool2d(2),
                Flatten(), Linear(8 * 2 * 2, 10))
on 1x12x12 images (12 -> 12 -> 6 -> 4 -> 2). This script writes its
state_dict as a safetensors file (PyTorch's names and layouts, the BatchNorm
counters num_batches_tracked included) and, in a second file, a batch of
inputs "x" [N, 1, 12, 12] and the outputs "y" [N, 10] of the model in eval
mode. cnn_interop (C++) loads the model into flx twice, with CrossCor layers
(torch_to_crosscor) and with Conv layers (torch_to_conv), runs testmode(model)
on x and saves both outputs, which must equal y. Besides, a ConvTranspose2d(2, 3, (2, 3))
file loads into flx's ConvTranspose (torch_to_conv) and gives its outputs.

With torch installed, the model is PyTorch's own: seeded, trained a few SGD
steps (so BatchNorm's running statistics are not their defaults), saved with
safetensors.torch.save_file, and y is its output in eval mode; the numpy
forward pass below is checked against it too. Without torch (CI installs
numpy and safetensors only) the same file is written with numpy: random
weights and running statistics, in PyTorch's names and layouts, and y is the
numpy forward pass (cross-correlation, BatchNorm inference, max-pooling,
flatten in (C, H, W) order, Linear).

Exits 77 (ctest's skip) when numpy or safetensors is missing.

usage: cnn_interop.py CNN_INTEROP_EXE WORKDIR
"""
import os
import subprocess
import sys

try:
    import numpy as np
    from safetensors.numpy import load_file, save_file
except ImportError as e:
    print(f"SKIPPED: the conv net interop test needs numpy and safetensors in Python ({e}); "
          "scripts/install-deps.sh installs them")
    sys.exit(77)

try:
    import torch
    from safetensors.torch import save_file as torch_save_file
except ImportError:
    torch = None

EPS = 1e-5  # BatchNorm2d's default, and flx's
N = 5


def crosscor(x, w, b, pad):
    """PyTorch's Conv2d: x [N, C, H, W], w [O, C, kH, kW], no flip."""
    x = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    o, _, kh, kw = w.shape
    h, wd = x.shape[2] - kh + 1, x.shape[3] - kw + 1
    y = np.zeros((x.shape[0], o, h, wd), dtype=np.float64)
    for i in range(kh):
        for j in range(kw):
            y += np.einsum("nchw,oc->nohw", x[:, :, i:i + h, j:j + wd], w[:, :, i, j])
    return y + b[None, :, None, None]


def batchnorm(x, sd, p):
    def channel(v):
        return v.astype(np.float64)[None, :, None, None]

    scale = channel(sd[p + "weight"]) / np.sqrt(channel(sd[p + "running_var"]) + EPS)
    return (x - channel(sd[p + "running_mean"])) * scale + channel(sd[p + "bias"])


def maxpool2(x):
    n, c, h, w = x.shape
    return x[:, :, :h // 2 * 2, :w // 2 * 2].reshape(n, c, h // 2, 2, w // 2, 2).max(axis=(3, 5))


def forward(sd, x):
    """The model in eval mode, in float64."""
    h = maxpool2(np.maximum(batchnorm(crosscor(x, sd["0.weight"], sd["0.bias"], 1), sd, "1."), 0))
    h = maxpool2(np.maximum(batchnorm(crosscor(h, sd["4.weight"], sd["4.bias"], 0), sd, "5."), 0))
    h = h.reshape(h.shape[0], -1)  # nn.Flatten: (C, H, W) per sample, row-major
    return h @ sd["9.weight"].T.astype(np.float64) + sd["9.bias"]


def conv_transpose(x, w, b):
    """PyTorch's ConvTranspose2d (stride 1, no padding): x [N, C, H, W], w [C, O, kH, kW]."""
    n, _, h, wd = x.shape
    _, o, kh, kw = w.shape
    y = np.zeros((n, o, h + kh - 1, wd + kw - 1), dtype=np.float64)
    for i in range(kh):
        for j in range(kw):
            y[:, :, i:i + h, j:j + wd] += np.einsum("nchw,co->nohw", x, w[:, :, i, j])
    return y + b[None, :, None, None]


def transpose_case():
    """A ConvTranspose2d(2, 3, (2, 3)) file ("weight", "bias"), an input and its output."""
    rng = np.random.default_rng(1)
    w = rng.standard_normal((2, 3, 2, 3)).astype(np.float32)
    b = rng.standard_normal(3).astype(np.float32)
    x = rng.standard_normal((N, 2, 4, 5)).astype(np.float32)
    y = conv_transpose(x.astype(np.float64), w, b).astype(np.float32)
    if torch is not None:
        m = torch.nn.ConvTranspose2d(2, 3, (2, 3))
        with torch.no_grad():
            m.weight.copy_(torch.from_numpy(w))
            m.bias.copy_(torch.from_numpy(b))
            np.testing.assert_allclose(m(torch.from_numpy(x)).numpy(), y, rtol=1e-5, atol=1e-5)
    return {"weight": w, "bias": b}, x, y


def torch_model(work):
    """PyTorch's model, trained a few steps, saved; returns (x, y)."""
    torch.manual_seed(0)
    nn = torch.nn
    model = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Conv2d(4, 8, 3), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                          nn.Linear(8 * 2 * 2, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    model.train()
    for _ in range(3):
        xb = torch.randn(16, 1, 12, 12) * 2 + 0.5
        loss = nn.functional.cross_entropy(model(xb), torch.randint(0, 10, (16,)))
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval()
    sd = model.state_dict()
    assert not torch.equal(sd["1.running_mean"], torch.zeros(4)), "training left BatchNorm's running mean at zero"
    assert int(sd["1.num_batches_tracked"]) == 3
    torch_save_file(sd, os.path.join(work, "torch_cnn.safetensors"))
    x = torch.randn(N, 1, 12, 12)
    with torch.no_grad():
        y = model(x)
    return x.numpy(), y.numpy()


def numpy_model(work):
    """The same file written with numpy, in PyTorch's names and layouts; returns (x, y)."""
    rng = np.random.default_rng(0)

    def f32(*shape, scale=1.0, shift=0.0):
        return (rng.standard_normal(shape) * scale + shift).astype(np.float32)

    sd = {}
    for conv, bn, cin, cout in (("0.", "1.", 1, 4), ("4.", "5.", 4, 8)):
        sd[conv + "weight"] = f32(cout, cin, 3, 3, scale=1 / np.sqrt(9 * cin))
        sd[conv + "bias"] = f32(cout, scale=0.1)
        sd[bn + "weight"] = f32(cout, scale=0.2, shift=1.0)
        sd[bn + "bias"] = f32(cout, scale=0.1)
        sd[bn + "running_mean"] = f32(cout, scale=0.3)
        sd[bn + "running_var"] = rng.uniform(0.5, 2.0, cout).astype(np.float32)
        sd[bn + "num_batches_tracked"] = np.array(3, dtype=np.int64)  # a 0-d Int64, as PyTorch saves it
    sd["9.weight"] = f32(10, 32, scale=1 / np.sqrt(32))
    sd["9.bias"] = f32(10, scale=0.1)
    save_file(sd, os.path.join(work, "torch_cnn.safetensors"), metadata={"format": "pt"})
    x = f32(N, 1, 12, 12)
    return x, forward(sd, x.astype(np.float64)).astype(np.float32)


def main():
    exe, work = sys.argv[1], sys.argv[2]
    os.makedirs(work, exist_ok=True)
    model_path = os.path.join(work, "torch_cnn.safetensors")
    data_path = os.path.join(work, "torch_cnn_data.safetensors")
    out_path = os.path.join(work, "flx_cnn_outputs.safetensors")
    if torch is not None:
        print(f"torch {torch.__version__}: PyTorch's model, trained 3 steps, is the reference")
        x, y = torch_model(work)
    else:
        print("torch is not installed: the checkpoint is written with numpy and the reference is numpy's forward pass")
        x, y = numpy_model(work)

    reference = "PyTorch's outputs" if torch is not None else "numpy's forward pass"
    sd = load_file(model_path)
    want_shapes = {"0.weight": (4, 1, 3, 3), "1.running_var": (4,), "4.weight": (8, 4, 3, 3), "9.weight": (10, 32)}
    for k, s in want_shapes.items():
        assert sd[k].shape == s, (k, sd[k].shape)
    assert sd["5.num_batches_tracked"].dtype == np.int64 and sd["5.num_batches_tracked"].shape == ()
    assert np.all(sd["5.running_var"] != 1) and np.all(sd["5.running_mean"] != 0), "running statistics are defaults"
    # The numpy forward pass is PyTorch's (checked against torch when there is one).
    np.testing.assert_allclose(forward(sd, x.astype(np.float64)), y, rtol=1e-5, atol=1e-5)
    save_file({"x": x, "y": y}, data_path)
    transpose_path = os.path.join(work, "torch_conv_transpose.safetensors")
    ct_sd, ct_x, ct_y = transpose_case()
    save_file(ct_sd, transpose_path)
    save_file({"x": ct_x}, transpose_path + ".x")

    run = subprocess.run([exe, model_path, data_path, out_path, transpose_path], capture_output=True, text=True)
    sys.stdout.write(run.stdout)
    sys.stderr.write(run.stderr)
    assert run.returncode == 0, f"cnn_interop exited with {run.returncode}"
    out = load_file(out_path)
    for layer in ("crosscor", "conv"):
        got = out[layer]  # flx's (10, N): [10, N] in the file
        assert got.shape == (10, N), (layer, got.shape)
        np.testing.assert_allclose(got.T, y, rtol=1e-5, atol=1e-5, err_msg=f"flx with {layer} layers")
        print(f"flx with {layer} layers matches {reference}: max |diff| {np.abs(got.T - y).max():.2e}")
    got = out["conv_transpose"]  # flx's WHCN (7, 5, 3, N): [7, 5, 3, N] in the file
    np.testing.assert_allclose(got.transpose(3, 2, 1, 0), ct_y, rtol=1e-5, atol=1e-5, err_msg="flx's ConvTranspose")
    print(f"flx's ConvTranspose with torch_to_conv matches {reference} of ConvTranspose2d:",
          f"max |diff| {np.abs(got.transpose(3, 2, 1, 0) - ct_y).max():.2e}")
    # Without the conversion the weight is refused, and the message says which conversion.
    refusal = [line for line in run.stdout.splitlines() if line.startswith("refused: ")]
    assert len(refusal) == 1 and "torch_to_crosscor" in refusal[0] and "(3×3×1×4) in the model" in refusal[0], \
        run.stdout


if __name__ == "__main__":
    main()
