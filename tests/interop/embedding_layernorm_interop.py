"""PyTorch's Embedding and LayerNorm weights load into flx and give PyTorch's outputs and gradients.

Two PyTorch models, each written as a safetensors state_dict (PyTorch's names
and layouts):
  A: nn.Sequential(nn.Embedding(12, 6), nn.LayerNorm(6)): "0.weight" [12, 6],
     "1.weight" [6], "1.bias" [6]; on token indices "tokens" [3, 7] (Int64,
     with repeats, some of the 12 never used) it gives "y_a" [3, 7, 6].
  B: nn.LayerNorm((4, 5)): "weight" [4, 5], "bias" [4, 5]; on "x_b"
     [3, 4, 5] it gives "y_b".
For the losses sum(y_a * c_a) and sum(y_b * c_b), with fixed random "c_a"
and "c_b", the data file also holds the gradients PyTorch computes:
"d_embedding" [12, 6], "d_scale_a", "d_bias_a" [6], and "d_x_b" [3, 4, 5],
"d_scale_b", "d_bias_b" [4, 5]. embedding_layernorm_interop (C++) loads
both models into flx with the key maps of docs/checkpoints.md, computes the
outputs and gradients in flx's layouts and saves them; they must equal
PyTorch's.

With torch installed, the models are PyTorch's own (seeded; LayerNorm's
weights drawn, not its ones and zeros) and the references come from
autograd; the numpy forward and backward below are checked against them.
Without torch (CI installs numpy and safetensors only) the files are
written with numpy, in the same names and layouts, and numpy's forward and
backward are the reference.

Exits 77 (ctest's skip) when numpy or safetensors is missing.

usage: embedding_layernorm_interop.py INTEROP_EXE WORKDIR
"""
import os
import subprocess
import sys

try:
    import numpy as np
    from safetensors.numpy import load_file, save_file
except ImportError as e:
    print(f"SKIPPED: the Embedding/LayerNorm interop test needs numpy and safetensors in Python ({e}); "
          "scripts/install-deps.sh installs them")
    sys.exit(77)

try:
    import torch
    from safetensors.torch import save_file as torch_save_file
except ImportError:
    torch = None

EPS = 1e-5  # nn.LayerNorm's default, and flx's
VOCAB, DIM = 12, 6
TOKENS = np.array([[3, 11, 0, 3, 3, 7, 0], [5, 5, 5, 2, 11, 9, 3], [0, 1, 3, 3, 10, 2, 2]], dtype=np.int64)


def layernorm(x, w, b, ndims):
    """nn.LayerNorm over the last `ndims` dims, in float64: y and what the backward needs."""
    axes = tuple(range(x.ndim - ndims, x.ndim))
    mu = x.mean(axis=axes, keepdims=True)
    sigma = np.sqrt(((x - mu) ** 2).mean(axis=axes, keepdims=True) + EPS)
    xhat = (x - mu) / sigma
    return xhat * w + b, (xhat, sigma, axes)


def layernorm_backward(dy, w, saved):
    """dx, dw, db of layernorm for the cotangent dy."""
    xhat, sigma, axes = saved
    batch = tuple(range(dy.ndim - len(axes)))
    dw, db = (dy * xhat).sum(axis=batch), dy.sum(axis=batch)
    g = dy * w
    dx = (g - g.mean(axis=axes, keepdims=True) - xhat * (g * xhat).mean(axis=axes, keepdims=True)) / sigma
    return dx, dw, db


def numpy_reference(sd_a, sd_b, data):
    """Model A's and B's outputs and gradients, in float64."""
    f64 = {k: v.astype(np.float64) for k, v in {**sd_a, **{"b." + k: v for k, v in sd_b.items()}}.items()}
    h = f64["0.weight"][data["tokens"]]  # [3, 7, 6]: row k of the weight for token k
    y_a, saved_a = layernorm(h, f64["1.weight"], f64["1.bias"], 1)
    dh, d_scale_a, d_bias_a = layernorm_backward(data["c_a"].astype(np.float64), f64["1.weight"], saved_a)
    d_embedding = np.zeros_like(f64["0.weight"])
    np.add.at(d_embedding, data["tokens"].reshape(-1), dh.reshape(-1, DIM))  # repeated tokens add up
    y_b, saved_b = layernorm(data["x_b"].astype(np.float64), f64["b.weight"], f64["b.bias"], 2)
    d_x_b, d_scale_b, d_bias_b = layernorm_backward(data["c_b"].astype(np.float64), f64["b.weight"], saved_b)
    return {"y_a": y_a, "d_embedding": d_embedding, "d_scale_a": d_scale_a, "d_bias_a": d_bias_a, "y_b": y_b,
            "d_x_b": d_x_b, "d_scale_b": d_scale_b, "d_bias_b": d_bias_b}


def torch_models(work):
    """PyTorch's models, saved; returns the data (inputs, cotangents, outputs, gradients)."""
    torch.manual_seed(0)
    nn = torch.nn
    model_a = nn.Sequential(nn.Embedding(VOCAB, DIM), nn.LayerNorm(DIM))
    model_b = nn.LayerNorm((4, 5))
    with torch.no_grad():
        for ln in (model_a[1], model_b):
            ln.weight.uniform_(0.5, 1.5)
            ln.bias.uniform_(-0.5, 0.5)
    torch_save_file(model_a.state_dict(), os.path.join(work, "torch_embedding_layernorm.safetensors"))
    torch_save_file(model_b.state_dict(), os.path.join(work, "torch_layernorm_2d.safetensors"))
    tokens = torch.from_numpy(TOKENS)
    x_b = (torch.randn(3, 4, 5) * 2 + 0.5).requires_grad_()
    c_a, c_b = torch.randn(3, 7, DIM), torch.randn(3, 4, 5)
    y_a, y_b = model_a(tokens), model_b(x_b)
    ((y_a * c_a).sum() + (y_b * c_b).sum()).backward()
    out = {"tokens": tokens, "x_b": x_b.detach(), "c_a": c_a, "c_b": c_b, "y_a": y_a.detach(), "y_b": y_b.detach(),
           "d_embedding": model_a[0].weight.grad, "d_scale_a": model_a[1].weight.grad,
           "d_bias_a": model_a[1].bias.grad, "d_x_b": x_b.grad, "d_scale_b": model_b.weight.grad,
           "d_bias_b": model_b.bias.grad}
    return {k: v.numpy() for k, v in out.items()}


def numpy_models(work):
    """The same files written with numpy, in PyTorch's names and layouts; returns the data."""
    rng = np.random.default_rng(0)

    def f32(*shape, lo=None, hi=None):
        v = rng.standard_normal(shape) if lo is None else rng.uniform(lo, hi, shape)
        return v.astype(np.float32)

    sd_a = {"0.weight": f32(VOCAB, DIM), "1.weight": f32(DIM, lo=0.5, hi=1.5), "1.bias": f32(DIM, lo=-0.5, hi=0.5)}
    sd_b = {"weight": f32(4, 5, lo=0.5, hi=1.5), "bias": f32(4, 5, lo=-0.5, hi=0.5)}
    save_file(sd_a, os.path.join(work, "torch_embedding_layernorm.safetensors"), metadata={"format": "pt"})
    save_file(sd_b, os.path.join(work, "torch_layernorm_2d.safetensors"), metadata={"format": "pt"})
    data = {"tokens": TOKENS, "x_b": f32(3, 4, 5) * 2 + 0.5, "c_a": f32(3, 7, DIM), "c_b": f32(3, 4, 5)}
    ref = numpy_reference(sd_a, sd_b, data)
    return {**data, **{k: v.astype(np.float32) for k, v in ref.items()}}


def main():
    exe, work = sys.argv[1], sys.argv[2]
    os.makedirs(work, exist_ok=True)
    path_a = os.path.join(work, "torch_embedding_layernorm.safetensors")
    path_b = os.path.join(work, "torch_layernorm_2d.safetensors")
    data_path = os.path.join(work, "torch_embedding_layernorm_data.safetensors")
    out_path = os.path.join(work, "flx_embedding_layernorm.safetensors")
    if torch is not None:
        print(f"torch {torch.__version__}: PyTorch's models and autograd are the reference")
        data = torch_models(work)
    else:
        print("torch is not installed: the checkpoints are written with numpy, and numpy's forward and backward "
              "are the reference")
        data = numpy_models(work)
    reference = "PyTorch's" if torch is not None else "numpy's"

    sd_a, sd_b = load_file(path_a), load_file(path_b)
    assert sorted(sd_a) == ["0.weight", "1.bias", "1.weight"] and sd_a["0.weight"].shape == (VOCAB, DIM), sd_a.keys()
    assert sorted(sd_b) == ["bias", "weight"] and sd_b["weight"].shape == (4, 5), sd_b.keys()
    # numpy's forward and backward are PyTorch's (checked against torch when there is one).
    for k, v in numpy_reference(sd_a, sd_b, data).items():
        np.testing.assert_allclose(v, data[k], rtol=1e-5, atol=1e-5, err_msg=f"numpy's {k}")
    assert np.count_nonzero(np.abs(data["d_embedding"]).sum(axis=1)) == len(np.unique(TOKENS)) < VOCAB
    save_file(data, data_path)

    run = subprocess.run([exe, path_a, path_b, data_path, out_path], capture_output=True, text=True)
    sys.stdout.write(run.stdout)
    sys.stderr.write(run.stderr)
    assert run.returncode == 0, f"embedding_layernorm_interop exited with {run.returncode}"
    out = load_file(out_path)
    # flx's layouts: column-major (6, 7, 3) is [6, 7, 3] in the file, PyTorch's [3, 7, 6]
    # with its dims reversed; the Embedding weight's gradient (6, 12) likewise.
    got = {"y_a": out["y_a"].transpose(2, 1, 0), "d_embedding": out["d_embedding"].T, "d_scale_a": out["d_scale_a"],
           "d_bias_a": out["d_bias_a"], "y_b": out["y_b"].transpose(2, 1, 0), "d_x_b": out["d_x_b"].transpose(2, 1, 0),
           "d_scale_b": out["d_scale_b"].T, "d_bias_b": out["d_bias_b"].T}
    for k, v in got.items():
        assert v.shape == data[k].shape, (k, v.shape, data[k].shape)
        np.testing.assert_allclose(v, data[k], rtol=1e-5, atol=2e-5, err_msg=f"flx's {k}")
        print(f"flx's {k} {list(v.shape)} matches {reference}: max |diff| {np.abs(v - data[k]).max():.2e}")
    # Without the transposition the Embedding weight is refused, with the reason.
    refusal = [line for line in run.stdout.splitlines() if line.startswith("refused: ")]
    assert len(refusal) == 1 and "(12×6) in the checkpoint but (6×12) in the model" in refusal[0] \
        and "its dims reversed are the model's" in refusal[0], run.stdout


if __name__ == "__main__":
    main()
