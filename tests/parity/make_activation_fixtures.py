"""Writes activation_fixtures.safetensors: PyTorch's activations that NNlib
also has, in Float64, for test_activations.cpp (ActivationParity).

One input "x" (fixed points, the kinks of the piecewise ones among them:
0, ±0.5, ±1, ±3, 6), a fixed random cotangent "c", and for each activation
"<name>" its output "<name>.y" and the gradient of sum(y .* c), "<name>.dx".
glu's input is "glu.x", (6, 4) in flx's layout (dims reversed: torch's
[4, 6], split along torch's last dim, flx's dim 0), with its own cotangent
"glu.c". Rerun to regenerate (torch and safetensors needed; the file is
committed, so the test needs neither):

    python3 tests/parity/make_activation_fixtures.py tests/parity/activation_fixtures.safetensors
"""
import sys

import torch
from safetensors.numpy import save_file

F = torch.nn.functional

# flx name -> torch function of x (Float64). Parameters as the test calls
# flx's: NNlib's defaults (softshrink λ = 0.5, trelu θ = 1), and one other.
ACTS = {
    "hardsigmoid": F.hardsigmoid,
    "hardtanh": F.hardtanh,
    "relu6": F.relu6,
    "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"),
    "hardswish": F.hardswish,
    "selu": F.selu,
    "logsigmoid": F.logsigmoid,
    "mish": F.mish,
    "tanhshrink": F.tanhshrink,
    "softshrink": lambda x: F.softshrink(x, 0.5),
    "softshrink_1.2": lambda x: F.softshrink(x, 1.2),
    "trelu": lambda x: F.threshold(x, 1.0, 0.0),  # x > 1 ? x : 0
    # rrelu outside training: the mean slope (lo + hi) / 2, flx's too
    "rrelu_eval": lambda x: F.rrelu(x, 1 / 8, 1 / 3, training=False),
}


def flx_layout(t):
    """PyTorch's tensor with its dims reversed (flx's column-major order), as numpy."""
    return t.detach().permute(*reversed(range(t.dim()))).contiguous().numpy()


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else "activation_fixtures.safetensors"
    torch.manual_seed(29)
    torch.set_default_dtype(torch.float64)
    x = torch.tensor([-40.0, -7.5, -3.0, -2.2, -1.0, -0.5, -0.3, -1e-3, 0.0, 1e-3, 0.3, 0.5, 0.8,
                      1.0, 1.7, 3.0, 4.4, 6.0, 9.0, 40.0])
    c = torch.randn_like(x)
    out = {"x": flx_layout(x), "c": flx_layout(c)}
    for name, f in ACTS.items():
        xi = x.clone().requires_grad_()
        y = f(xi)
        (y * c).sum().backward()
        out[f"{name}.y"] = flx_layout(y)
        out[f"{name}.dx"] = flx_layout(xi.grad)
    g = torch.randn(4, 6).requires_grad_()
    y = F.glu(g, dim=-1)
    gc = torch.randn_like(y)
    (y * gc).sum().backward()
    out["glu.x"] = flx_layout(g)
    out["glu.c"] = flx_layout(gc)
    out["glu.y"] = flx_layout(y)
    out["glu.dx"] = flx_layout(g.grad)
    save_file(out, path)


if __name__ == "__main__":
    main()
