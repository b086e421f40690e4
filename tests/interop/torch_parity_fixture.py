"""Writes tests/data/torch_parity.safetensors: PyTorch's nn.EmbeddingBag, nn.Bilinear and
torch.nn.utils.parametrizations.weight_norm(nn.Linear), their outputs on fixed inputs and the
gradients of sum(y * c) for fixed cotangents c, all in Float64 and in flx's layouts, so that
tests/test_torch_parity.cpp compares flx's EmbeddingBag, Bilinear and WeightNorm(Dense) with
them without Python. Run it again (python3 tests/interop/torch_parity_fixture.py) only to
change the fixture; the file is committed.

Layouts: a tensor is written with flx's logical shape (features first), so that
flx's load gives it as flx holds it:
  nn.EmbeddingBag weight [n, d]       -> "bag.weight" (d, n)
  its input [bags, L] (a bag a row)   -> "bag.input" (L, bags) (a bag a column)
  its output [bags, d]                -> (d, bags)
  nn.Bilinear weight [out, in1, in2]  -> "bilinear.weight" (out, in1, in2), the same
  its inputs [batch, in]              -> (in, batch)
  weight_norm's original0 (g) [out, 1] and original1 (v) [out, in] -> "weightnorm.g",
  "weightnorm.v", as flx's WeightNorm(Dense) holds them (norm over dim 1, 0-based).
Indices are Int64, 0-based (PyTorch's and flx's).
"""
import os
import sys

import torch
from safetensors.torch import save_file

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "data", "torch_parity.safetensors")


def t(x):
    """flx's layout of a PyTorch [batch, features] (or [n, d]) matrix: its transpose."""
    return x.detach().t().contiguous()


def main():
    torch.manual_seed(0)
    torch.set_default_dtype(torch.float64)
    nn = torch.nn
    out = {}

    # nn.EmbeddingBag: bags of one length (a 2-D input, a bag a row) and ragged bags
    # (a 1-D input and offsets), each reduction.
    n, d = 10, 4
    weight = torch.randn(n, d)
    bags = torch.tensor([[3, 1, 3], [0, 9, 2], [7, 7, 7], [5, 4, 0], [8, 2, 6]])  # 5 bags of 3
    data = torch.tensor([2, 9, 9, 0, 4, 1, 6, 6, 3, 8, 5])
    offsets = torch.tensor([0, 1, 4, 8])  # bags of 1, 3, 4 and 3
    c_bags, c_ragged = torch.randn(5, d), torch.randn(4, d)
    out["bag.weight"] = t(weight)
    out["bag.input"] = t(bags)
    out["bag.data"] = data
    out["bag.offsets"] = offsets
    out["bag.c_input"] = t(c_bags)
    out["bag.c_offsets"] = t(c_ragged)
    for mode in ("mean", "sum", "max"):
        bag = nn.EmbeddingBag(n, d, mode=mode)
        with torch.no_grad():
            bag.weight.copy_(weight)
        y_bags, y_ragged = bag(bags), bag(data, offsets)
        ((y_bags * c_bags).sum() + (y_ragged * c_ragged).sum()).backward()
        out[f"bag.{mode}.y_input"] = t(y_bags)
        out[f"bag.{mode}.y_offsets"] = t(y_ragged)
        out[f"bag.{mode}.d_weight"] = t(bag.weight.grad)

    # nn.Bilinear(3, 4, 2): y[b, o] = x1[b, :] W[o, :, :] x2[b, :] + bias[o].
    bil = nn.Bilinear(3, 4, 2)
    x1 = torch.randn(5, 3, requires_grad=True)
    x2 = torch.randn(5, 4, requires_grad=True)
    c = torch.randn(5, 2)
    y = bil(x1, x2)
    (y * c).sum().backward()
    out.update({"bilinear.weight": bil.weight.detach().clone(), "bilinear.bias": bil.bias.detach().clone(),
                "bilinear.x": t(x1), "bilinear.y": t(x2), "bilinear.c": t(c), "bilinear.out": t(y),
                "bilinear.d_weight": bil.weight.grad.clone(), "bilinear.d_bias": bil.bias.grad.clone(),
                "bilinear.d_x": t(x1.grad), "bilinear.d_y": t(x2.grad)})

    # weight_norm of nn.Linear(3, 4): weight = g * v / ||v|| over each output row.
    lin = nn.utils.parametrizations.weight_norm(nn.Linear(3, 4), name="weight", dim=0)
    with torch.no_grad():
        lin.parametrizations.weight.original0.mul_(torch.rand(4, 1) + 0.5)  # g no longer the norm of v
    g, v = lin.parametrizations.weight.original0, lin.parametrizations.weight.original1
    x = torch.randn(5, 3, requires_grad=True)
    c = torch.randn(5, 4)
    y = lin(x)
    (y * c).sum().backward()
    out.update({"weightnorm.g": g.detach().clone(), "weightnorm.v": v.detach().clone(),
                "weightnorm.bias": lin.bias.detach().clone(), "weightnorm.x": t(x), "weightnorm.c": t(c),
                "weightnorm.out": t(y), "weightnorm.d_g": g.grad.clone(), "weightnorm.d_v": v.grad.clone(),
                "weightnorm.d_bias": lin.bias.grad.clone(), "weightnorm.d_x": t(x.grad)})

    out = {k: v.contiguous() for k, v in out.items()}
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    save_file(out, OUT, metadata={"generator": "tests/interop/torch_parity_fixture.py",
                                  "torch": torch.__version__})
    print(f"wrote {os.path.normpath(OUT)}: {len(out)} tensors, {os.path.getsize(OUT)} bytes (torch {torch.__version__})")


if __name__ == "__main__":
    sys.exit(main())
