"""Writes layer_fixtures.safetensors: PyTorch's GroupNorm, InstanceNorm2d,
Upsample (nearest; bilinear with align_corners=True), PixelShuffle,
ConvTranspose2d with output_padding, LPPool2d and ConvTranspose1d with a
dilation and an output_padding past the stride, in Float64, for
test_layer_parity.cpp.

For each layer "<name>": its input "<name>.x", its weights (PyTorch's
parameters), a fixed random cotangent "<name>.c", the output "<name>.y" and
the gradients of sum(y * c): "<name>.dx" and "<name>.d<param>". Every array
is written in flx's layout: PyTorch's dims reversed, so an NCHW batch
[N, C, H, W] is flx's (W, H, C, N) with the same elements (a file holds
flx's shape with row-major bytes: docs/checkpoints.md), and a
ConvTranspose2d weight [in, out, kH, kW] is (kW, kH, out, in) (flx's
ConvTranspose, as Flux's, then needs the kernel flipped: flip_kernel).
Sizes and layer options are in the test. Rerun to regenerate (torch and
safetensors needed; the file is committed, so the test needs neither):

    python3 tests/parity/make_layer_fixtures.py tests/parity/layer_fixtures.safetensors
"""
import sys

import torch
from safetensors.numpy import save_file


def flx_layout(t):
    """PyTorch's tensor with its dims reversed (flx's column-major order), as numpy."""
    return t.detach().permute(*reversed(range(t.dim()))).contiguous().numpy()


def record(out, name, layer, x):
    """Runs layer on x, backward of sum(y * c), and stores it all under name."""
    x = x.clone().requires_grad_()
    y = layer(x)
    c = torch.randn_like(y)
    (y * c).sum().backward()
    out[f"{name}.x"] = flx_layout(x)
    out[f"{name}.c"] = flx_layout(c)
    out[f"{name}.y"] = flx_layout(y)
    out[f"{name}.dx"] = flx_layout(x.grad)
    for pname, p in layer.named_parameters():
        out[f"{name}.{pname}"] = flx_layout(p)
        out[f"{name}.d{pname}"] = flx_layout(p.grad)


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else "layer_fixtures.safetensors"
    torch.manual_seed(28)
    torch.set_default_dtype(torch.float64)
    nn = torch.nn
    out = {}

    gn = nn.GroupNorm(num_groups=2, num_channels=6, eps=1e-5)
    with torch.no_grad():
        gn.weight.uniform_(0.5, 1.5)
        gn.bias.uniform_(-0.5, 0.5)
    record(out, "groupnorm", gn, torch.randn(2, 6, 4, 3) * 2 + 0.5)  # flx: GroupNorm(6, 2) on (3, 4, 6, 2)

    inorm = nn.InstanceNorm2d(4, affine=True, eps=1e-5)  # track_running_stats=False, as flx's default
    with torch.no_grad():
        inorm.weight.uniform_(0.5, 1.5)
        inorm.bias.uniform_(-0.5, 0.5)
    record(out, "instancenorm", inorm, torch.randn(2, 4, 5, 3) * 3 - 1)  # flx: InstanceNorm(4, {.affine = true})

    record(out, "upsample_nearest", nn.Upsample(scale_factor=2, mode="nearest"), torch.randn(2, 3, 3, 4))
    # size (H, W) = (5, 7): flx's .size = {7, 5}
    record(out, "upsample_bilinear", nn.Upsample(size=(5, 7), mode="bilinear", align_corners=True),
           torch.randn(2, 3, 3, 4))
    record(out, "pixelshuffle", nn.PixelShuffle(2), torch.randn(2, 8, 2, 3))  # flx: PixelShuffle(2)

    # stride (sH, sW) = (2, 3), padding 1, output_padding (1, 2): flx's stride {3, 2}, outpad {2, 1}
    ct = nn.ConvTranspose2d(3, 4, kernel_size=3, stride=(2, 3), padding=1, output_padding=(1, 2))
    record(out, "convtranspose", ct, torch.randn(2, 3, 4, 5))

    # Recorded after the others, so that their random draws stay as they were.
    # LPPool2d: p = 2 over 2×2 windows (stride = window), and p = 1.5 over
    # (kH, kW) = (3, 2) with stride (sH, sW) = (1, 2): flx's LPNormPool(2, {2, 2})
    # and LPNormPool(1.5, {2, 3}, {.stride = {2, 1}}). Positive inputs (a
    # power 1.5 of a negative number is NaN on both sides).
    record(out, "lppool2", nn.LPPool2d(2, kernel_size=2), torch.rand(2, 3, 4, 6) + 0.1)
    record(out, "lppool15", nn.LPPool2d(1.5, kernel_size=(3, 2), stride=(1, 2)), torch.rand(2, 3, 5, 6) + 0.1)
    # ConvTranspose1d with an output_padding of at least the stride (below
    # the dilation), padding 1: flx's ConvTranspose({3}, 2, 3, {.pad = 1,
    # .dilation = 3, .outpad = 2}); the rows no input reaches hold the bias.
    record(out, "convtranspose_dilated",
           nn.ConvTranspose1d(2, 3, kernel_size=3, padding=1, dilation=3, output_padding=2), torch.randn(2, 2, 5))

    save_file(out, path, metadata={"generator": "tests/parity/make_layer_fixtures.py", "torch": torch.__version__})
    print(f"wrote {path}: {len(out)} arrays, {sum(v.nbytes for v in out.values())} bytes of data")


if __name__ == "__main__":
    main()
