"""Writes optimiser_fixtures.safetensors: PyTorch's NAdam, RAdam, Adagrad,
Adadelta, Adamax, Adam(amsgrad=True) and Rprop stepping one Float64 vector,
for test_optimiser_parity.cpp (flx's NAdam, RAdam, AdaGrad, AdaDelta,
AdaMax, AMSGrad and Rprop).

The file holds the start "x0" and the gradients "g1".."g8" (none zero, and
signs that change), and for each case "<name>" the vector after each step,
"<name>.x1".."<name>.x8". Gradients are given, not computed from x, so a
step depends on the step count and the gradients only. Where PyTorch's rule
is not Optimisers.jl's by design, the settings here are the ones that make
them agree, and test_optimiser_parity.cpp says why (NAdam's momentum
schedule and √β₂, the ϵ placements of RAdam and Adamax, RAdam's threshold
5 for ρₜ against Optimisers.jl's 4, Adagrad's initial accumulator, AMSGrad's
bias correction). Rerun to regenerate (torch and safetensors needed; the
file is committed, so the test needs neither):

    python3 tests/parity/make_optimiser_fixtures.py tests/parity/optimiser_fixtures.safetensors
"""
import math
import sys

import torch
from safetensors.numpy import save_file

STEPS = 8


def run(out, name, make, x0, grads):
    x = x0.clone().requires_grad_(True)
    opt = make([x])
    for k, g in enumerate(grads, start=1):
        x.grad = g.clone()
        opt.step()
        out[f"{name}.x{k}"] = x.detach().clone().numpy()


def main(path):
    # Float64 scalars too: NAdam keeps its μ product in the default dtype.
    torch.set_default_dtype(torch.float64)
    torch.manual_seed(7)
    n = 10
    x0 = torch.randn(n, dtype=torch.float64)
    grads = []
    for k in range(STEPS):
        g = torch.randn(n, dtype=torch.float64) * (1.0 if k % 2 == 0 else 0.1)
        g = torch.where(g.abs() < 1e-3, torch.full_like(g, 1e-3), g)  # none zero
        grads.append(g)
    out = {"x0": x0.numpy()}
    for k, g in enumerate(grads, start=1):
        out[f"g{k}"] = g.numpy()

    b1, b2 = 0.9, 0.99
    # NAdam: momentum_decay so large that 0.96^(t*ψ) is 0 and μₜ = β₁ at
    # every step; Optimisers.jl's denominator is √(vβ₂/(1-β₂ᵗ)) + ϵ, so
    # lr = η/√β₂ and eps = ϵ/√β₂ here match NAdam(η, (β₁, β₂), ϵ).
    eta, eps = 0.01, 1e-8
    run(out, "nadam", lambda p: torch.optim.NAdam(p, lr=eta / math.sqrt(b2), betas=(b1, b2),
                                                   eps=eps / math.sqrt(b2), momentum_decay=1e4), x0, grads)
    # RAdam with eps = 0 (PyTorch adds ϵ to √v, Optimisers.jl to √(v/(1-β₂ᵗ))).
    run(out, "radam", lambda p: torch.optim.RAdam(p, lr=0.01, betas=(0.9, 0.9), eps=0.0), x0, grads)
    # Adagrad with its accumulator starting at ϵ, as Optimisers.jl's.
    run(out, "adagrad", lambda p: torch.optim.Adagrad(p, lr=0.1, eps=1e-4, initial_accumulator_value=1e-4),
        x0, grads)
    # Adadelta: PyTorch's lr (1.0) multiplies the step; Optimisers.jl has none.
    run(out, "adadelta", lambda p: torch.optim.Adadelta(p, lr=1.0, rho=0.9, eps=1e-6), x0, grads)
    # Adamax with eps = 0 (PyTorch: max(β₂u, |g| + ϵ); Optimisers.jl: m/(u + ϵ)).
    run(out, "adamax", lambda p: torch.optim.Adamax(p, lr=0.01, betas=(b1, b2), eps=0.0), x0, grads)
    # Adam(amsgrad=True) with eps = 0: PyTorch's step is Optimisers.jl's
    # AMSGrad step (with ϵ = 0: its states start at 0) times √(1-β₂ᵗ)/(1-β₁ᵗ).
    run(out, "amsgrad", lambda p: torch.optim.Adam(p, lr=0.01, betas=(b1, b2), eps=0.0, amsgrad=True), x0, grads)
    # Rprop: the same rule when the first step size lies within step_sizes.
    run(out, "rprop", lambda p: torch.optim.Rprop(p, lr=0.01, etas=(0.5, 1.2), step_sizes=(0.004, 0.02)),
        x0, grads)
    save_file(out, path)


if __name__ == "__main__":
    main(sys.argv[1])
