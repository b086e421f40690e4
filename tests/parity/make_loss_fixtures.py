"""Writes loss_fixtures.safetensors: PyTorch's l1_loss, huber_loss, kl_div,
binary_cross_entropy_with_logits, poisson_nll_loss and ctc_loss, in
Float64, for test_loss_parity.cpp (flx's mae, huber_loss, kldivergence,
logitbinarycrossentropy, poisson_loss and ctc_loss).

For each case "<name>": its operands ("<name>.x", "<name>.y", ...), the loss
"<name>.loss" (a scalar, or "<name>.none" unreduced) and the gradients of the
loss for each operand ("<name>.dx", "<name>.dy"). Arrays are in flx's layout:
PyTorch's dims reversed, so an (N, C) batch is flx's (C, N) with the same
elements (a file holds flx's shape with row-major bytes: docs/checkpoints.md).
Where PyTorch's loss is not Flux's by design, this script computes
PyTorch's, and the test adapts flx's call and says why. Rerun to regenerate
(torch and safetensors needed; the file is committed, so the test needs
neither):

    python3 tests/parity/make_loss_fixtures.py tests/parity/loss_fixtures.safetensors
"""
import sys

import torch
import torch.nn.functional as F
from safetensors.numpy import save_file


def flx_layout(t):
    """PyTorch's tensor with its dims reversed (flx's column-major order), as numpy."""
    t = t.detach()
    if t.dim() == 0:
        return t.numpy()
    return t.permute(*reversed(range(t.dim()))).contiguous().numpy()


def record(out, name, loss_fn, **operands):
    """loss_fn(**operands), and its gradient for each floating operand."""
    leaves = {k: v.clone().requires_grad_(v.is_floating_point()) for k, v in operands.items()}
    loss = loss_fn(**leaves)
    if loss.dim() == 0:
        loss.backward()
        out[f"{name}.loss"] = flx_layout(loss)
    else:  # unreduced: the gradient of sum(loss * c)
        c = torch.randn_like(loss)
        (loss * c).sum().backward()
        out[f"{name}.none"] = flx_layout(loss)
        out[f"{name}.c"] = flx_layout(c)
    for k, v in leaves.items():
        out[f"{name}.{k}"] = flx_layout(v)
        if v.requires_grad:
            out[f"{name}.d{k}"] = flx_layout(v.grad)


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else "loss_fixtures.safetensors"
    torch.manual_seed(29)
    torch.set_default_dtype(torch.float64)
    out = {}

    # mae: l1_loss, mean, sum and unreduced, on a (N, C) = (5, 3) batch.
    x, y = torch.randn(5, 3), torch.randn(5, 3)
    record(out, "l1_mean", lambda x, y: F.l1_loss(x, y), x=x, y=y)
    record(out, "l1_sum", lambda x, y: F.l1_loss(x, y, reduction="sum"), x=x, y=y)
    record(out, "l1_none", lambda x, y: F.l1_loss(x, y, reduction="none"), x=x, y=y)

    # huber_loss: the same formula as Flux's; both branches at delta = 0.8.
    x, y = torch.randn(4, 6) * 1.5, torch.randn(4, 6)
    record(out, "huber", lambda x, y: F.huber_loss(x, y, delta=0.8), x=x, y=y)
    record(out, "huber_default", lambda x, y: F.huber_loss(x, y), x=x, y=y)

    # kl_div(input = log ŷ, target = y, reduction = "batchmean"): the sum over
    # the batch divided by N, as Flux's kldivergence (a mean over columns).
    # Its leaf here is ŷ itself, so the gradients are d/dŷ and d/dy.
    yhat, y = torch.softmax(torch.randn(6, 4), dim=1), torch.softmax(torch.randn(6, 4), dim=1)
    record(out, "kl_div", lambda yhat, y: F.kl_div(torch.log(yhat), y, reduction="batchmean"), yhat=yhat, y=y)

    # binary_cross_entropy_with_logits: logits as large as ±40 (σ rounds to 0
    # or 1 in Float32 there; Float64 keeps it, so both sides stay finite).
    x = torch.cat([torch.randn(3, 4) * 3, torch.tensor([[40.0, -40.0, 25.0, -25.0]])])
    y = torch.rand(4, 4)
    record(out, "bce_logits", lambda x, y: F.binary_cross_entropy_with_logits(x, y), x=x, y=y)
    record(out, "bce_logits_none", lambda x, y: F.binary_cross_entropy_with_logits(x, y, reduction="none"), x=x, y=y)

    # poisson_nll_loss: log_input = True is exp(x) - y x; log_input = False is
    # ŷ - y log(ŷ + 1e-8). full = False (no Stirling term), as Flux has none.
    x, y = torch.randn(3, 5) * 0.5, torch.poisson(torch.rand(3, 5) * 4)
    record(out, "poisson_log_input", lambda x, y: F.poisson_nll_loss(x, y, log_input=True), x=x, y=y)
    yhat = torch.rand(3, 5) * 3 + 0.1
    record(out, "poisson_rate", lambda yhat, y: F.poisson_nll_loss(yhat, y, log_input=False), yhat=yhat, y=y)

    # ctc_loss: three sequences of scores (T, N, C) = (9, 3, 5), the blank the
    # last class (NNlib's), lengths 9, 7, 6 and 3, 4, 2 labels (one repeated),
    # reduction "none" (per sequence: NNlib's loss). log_probs =
    # log_softmax(logits), so the gradients are d/dlogits, as flx's.
    T, N, C = 9, 3, 5
    logits = torch.randn(T, N, C) * 2
    targets = torch.tensor([[0, 2, 1, 0], [3, 3, 1, 2], [1, 0, 0, 0]])
    input_lengths, target_lengths = torch.tensor([9, 7, 6]), torch.tensor([3, 4, 2])
    ctc = lambda logits, targets: F.ctc_loss(F.log_softmax(logits, dim=2), targets, input_lengths, target_lengths,
                                             blank=C - 1, reduction="none")
    record(out, "ctc", ctc, logits=logits, targets=targets)
    out["ctc.input_lengths"] = input_lengths.numpy()
    out["ctc.target_lengths"] = target_lengths.numpy()
    # ... and PyTorch's default reduction, "mean": each loss divided by its
    # target length, then the mean over the batch.
    record(out, "ctc_mean",
           lambda logits, targets: F.ctc_loss(F.log_softmax(logits, dim=2), targets, input_lengths, target_lengths,
                                              blank=C - 1),
           logits=logits, targets=targets)

    save_file(out, path, metadata={"generator": "tests/parity/make_loss_fixtures.py", "torch": torch.__version__})
    print(f"wrote {path}: {len(out)} arrays, {sum(v.nbytes for v in out.values())} bytes of data")


if __name__ == "__main__":
    main()
