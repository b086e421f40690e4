"""PyTorch's nn.MultiheadAttention loads into flx's MultiHeadAttention and gives its outputs and gradients.

The module is nn.MultiheadAttention(8, 2, batch_first=True) (biases on, as
PyTorch's default), used as causal self-attention on x [N, L, 8]. This
script writes its state_dict (in_proj_weight [24, 8], in_proj_bias,
out_proj.weight, out_proj.bias) as a safetensors file and, in a second file,
x and a cotangent c [N, L, 8]. mha_interop (C++) loads the state through
torch_to_mha into MultiHeadAttention(8, nheads=2, bias=true), runs it on x
(as (8, L, N)) with the causal option, and saves the output, the attention
weights and the gradients of sum(y .* c) with respect to x and to every
weight and bias, which must equal the reference's.

The reference is numpy's, in float64: the forward pass written out below and
central finite differences for the gradients. With torch installed, the
weights are a seeded nn.MultiheadAttention's and numpy's reference is
checked against PyTorch's forward pass (need_weights,
average_attn_weights=False, a boolean causal attn_mask) and autograd first.
Without torch (CI installs numpy and safetensors only) the weights are
random numbers in PyTorch's names and layouts.

Exits 77 (ctest's skip) when numpy or safetensors is missing.

usage: mha_interop.py MHA_INTEROP_EXE WORKDIR
"""
import os
import subprocess
import sys

try:
    import numpy as np
    from safetensors.numpy import load_file, save_file
except ImportError as e:
    print(f"SKIPPED: the attention interop test needs numpy and safetensors in Python ({e}); "
          "scripts/install-deps.sh installs them")
    sys.exit(77)

try:
    import torch
except ImportError:
    torch = None

E, H, N, L = 8, 2, 3, 5
PARAMS = ("in_proj_weight", "in_proj_bias", "out_proj.weight", "out_proj.bias")


def forward(sd, x):
    """PyTorch's MultiheadAttention on x [N, L, E], causal: (y [N, L, E], attention [N, H, L, L])."""
    w, b = sd["in_proj_weight"], sd["in_proj_bias"]
    q, k, v = (x @ w[i * E:(i + 1) * E].T + b[i * E:(i + 1) * E] for i in range(3))
    d = E // H

    def heads(t):  # [N, L, E] -> [N, H, L, d]
        return t.reshape(N, L, H, d).transpose(0, 2, 1, 3)

    s = heads(q) @ heads(k).transpose(0, 1, 3, 2) / np.sqrt(d)  # [N, H, Lq, Lk]
    s = np.where(np.tril(np.ones((L, L), dtype=bool)), s, -np.inf)
    a = np.exp(s - s.max(axis=-1, keepdims=True))
    a /= a.sum(axis=-1, keepdims=True)
    o = (a @ heads(v)).transpose(0, 2, 1, 3).reshape(N, L, E)
    return o @ sd["out_proj.weight"].T + sd["out_proj.bias"], a


def finite_differences(sd, x, c, h=1e-6):
    """Gradients of sum(y * c) by central differences, for x and every parameter."""
    def loss(s, xx):
        return float((forward(s, xx)[0] * c).sum())

    grads = {}
    for name, arr in [("x", x)] + [(p, sd[p]) for p in PARAMS]:
        g = np.zeros_like(arr)
        for i in np.ndindex(arr.shape):
            keep = arr[i]
            arr[i] = keep + h
            up = loss(sd, x)
            arr[i] = keep - h
            down = loss(sd, x)
            arr[i] = keep
            g[i] = (up - down) / (2 * h)
        grads[name] = g
    return grads


def weights():
    """The state_dict in float64: a seeded PyTorch module's, or random numbers without torch."""
    if torch is not None:
        torch.manual_seed(0)
        m = torch.nn.MultiheadAttention(E, H, batch_first=True)
        with torch.no_grad():  # biases away from PyTorch's zeros, so that they are tested
            m.in_proj_bias.uniform_(-0.5, 0.5)
            m.out_proj.bias.uniform_(-0.5, 0.5)
        return {k: v.detach().double().numpy().copy() for k, v in m.state_dict().items()}, m
    rng = np.random.default_rng(0)
    sd = {"in_proj_weight": rng.uniform(-0.6, 0.6, (3 * E, E)), "in_proj_bias": rng.uniform(-0.5, 0.5, 3 * E),
          "out_proj.weight": rng.uniform(-0.35, 0.35, (E, E)), "out_proj.bias": rng.uniform(-0.5, 0.5, E)}
    return sd, None


def check_against_torch(m, sd, x, c, y, a, grads):
    """numpy's reference is PyTorch's: forward and autograd."""
    m = m.double()
    xt = torch.from_numpy(x).requires_grad_()
    mask = ~torch.tril(torch.ones(L, L, dtype=torch.bool))  # PyTorch's boolean mask: True is not allowed
    yt, at = m(xt, xt, xt, attn_mask=mask, need_weights=True, average_attn_weights=False)
    (yt * torch.from_numpy(c)).sum().backward()
    np.testing.assert_allclose(yt.detach().numpy(), y, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(at.detach().numpy(), a, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(xt.grad.numpy(), grads["x"], rtol=1e-5, atol=1e-7)
    params = dict(m.named_parameters())
    for p in PARAMS:
        np.testing.assert_allclose(params[p].grad.numpy(), grads[p], rtol=1e-5, atol=1e-7, err_msg=p)
    print(f"torch {torch.__version__}: numpy's reference is nn.MultiheadAttention's output, weights and gradients")


def main():
    exe, work = sys.argv[1], sys.argv[2]
    os.makedirs(work, exist_ok=True)
    model_path, data_path, out_path = (os.path.join(work, f) for f in
                                       ("torch_mha.safetensors", "mha_data.safetensors", "flx_mha.safetensors"))
    sd, module = weights()
    rng = np.random.default_rng(1)
    x, c = rng.standard_normal((N, L, E)), rng.standard_normal((N, L, E))
    y, a = forward(sd, x)
    grads = finite_differences(sd, x, c)
    if module is not None:
        check_against_torch(module, sd, x, c, y, a, grads)
    save_file({k: v.astype(np.float32) for k, v in sd.items()}, model_path, metadata={"format": "pt"})
    save_file({"x": x.astype(np.float32), "c": c.astype(np.float32)}, data_path)
    # flx computes in Float32 from the float32 file: the reference from the same rounded numbers.
    sd32 = {k: v.astype(np.float32).astype(np.float64) for k, v in sd.items()}
    x32, c32 = x.astype(np.float32).astype(np.float64), c.astype(np.float32).astype(np.float64)
    y, a = forward(sd32, x32)
    grads = finite_differences(sd32, x32, c32)

    run = subprocess.run([exe, model_path, data_path, out_path], capture_output=True, text=True)
    sys.stdout.write(run.stdout)
    sys.stderr.write(run.stderr)
    assert run.returncode == 0, f"mha_interop exited with {run.returncode}"
    out = load_file(out_path)
    # flx's (E, L, N) is [E, L, N] in the file: reversed, PyTorch's [N, L, E]; its attention
    # weights (Lk, Lq, H, N), reversed, are PyTorch's [N, H, Lq, Lk].
    checks = [("y", out["y"].transpose(2, 1, 0), y), ("attention", out["alpha"].transpose(3, 2, 1, 0), a),
              ("dx", out["dx"].transpose(2, 1, 0), grads["x"])]
    for i, proj in enumerate(("q_proj", "k_proj", "v_proj")):
        checks.append((f"d{proj}.weight", out[f"d{proj}.weight"], grads["in_proj_weight"][i * E:(i + 1) * E]))
        checks.append((f"d{proj}.bias", out[f"d{proj}.bias"], grads["in_proj_bias"][i * E:(i + 1) * E]))
    checks += [("dout_proj.weight", out["dout_proj.weight"], grads["out_proj.weight"]),
               ("dout_proj.bias", out["dout_proj.bias"], grads["out_proj.bias"])]
    for name, got, want in checks:
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=2e-5, err_msg=f"flx's {name}")
        print(f"{name:18s} matches: max |diff| {np.abs(got - want).max():.2e}")
    print("flx's MultiHeadAttention, loaded through torch_to_mha, gives nn.MultiheadAttention's outputs and gradients")


if __name__ == "__main__":
    main()
