#!/usr/bin/env python3
"""The char-transformer's training steps against PyTorch's, without torch
(issue 27, item 14).

tests/data/transformer_steps/ is a case that bench/compare_transformer_steps.py
--fixture wrote: a small char-transformer of bench/char_models_torch.py
(PyTorch's initialisation, Float64), its state_dict (init.safetensors),
three batches of the zoo's training windows (batches.safetensors), and
PyTorch's loss, gradients and parameters after each Adam step
(torch.safetensors, under flx's names). transformer_steps loads the same
state_dict through docs/checkpoints.md's key maps, takes the same steps,
and every number must agree to rounding (Float64): the embeddings, layer
norms (ε, affine), causal attention (scale, mask, no biases), the tanh GELU,
the mean cross-entropy over positions and Adam (ε outside the square root)
are PyTorch's.

Then flx_random.py (the numpy replay of flx's draws that
char_models_torch.py --init flx / --windows flx use) must give
bit for bit the initial weights and training windows of
examples/char_transformer.cpp, as transformer_steps --write-init and
--write-batches draw them.

  check_transformer_steps.py TRANSFORMER_STEPS FIXTURE_DIR BENCH_DIR WORKDIR
"""
import json
import os
import subprocess
import sys

try:
    import numpy as np
    from safetensors.numpy import load_file
except ImportError as e:  # scripts/install-deps.sh installs both
    print(f"SKIP: {e}; install numpy and safetensors (scripts/install-deps.sh)")
    sys.exit(77)

tool, fixture, bench, work = sys.argv[1:5]
os.makedirs(work, exist_ok=True)
expect = load_file(os.path.join(fixture, "torch.safetensors"))
with open(os.path.join(fixture, "torch.safetensors"), "rb") as f:  # the metadata: the run's settings
    n = int.from_bytes(f.read(8), "little")
    meta = json.loads(f.read(n))["__metadata__"]
out = os.path.join(work, "flx.safetensors")
subprocess.run([tool, "--init", os.path.join(fixture, "init.safetensors"), "--batches",
                os.path.join(fixture, "batches.safetensors"), "--out", out, "--dtype", meta["dtype"], "--dim",
                meta["dim"], "--heads", meta["heads"], "--layers", meta["layers"], "--lr", meta["lr"], "--dump",
                meta["dump"]], check=True)
got = load_file(out)

steps, dump = int(meta["steps"]), int(meta["dump"])
assert meta["dtype"] == "f64" and steps >= 2 and dump == steps, meta
np.testing.assert_allclose(got["loss"], expect["loss"], rtol=1e-12)
print("losses, flx:", got["loss"], "PyTorch:", expect["loss"])
worst = (0.0, "")
names = [k for k in expect if k != "loss"]
assert len(names) == 2 * dump * len([k for k in names if k.startswith("grad.0.")]), len(names)
for k in names:
    assert got[k].shape == expect[k].shape, (k, got[k].shape, expect[k].shape)
    scale = max(float(np.max(np.abs(expect[k]))), 1e-300)
    d = float(np.max(np.abs(got[k] - expect[k]))) / scale
    worst = max(worst, (d, k))
    assert d < 1e-10, f"{k}: flx and PyTorch differ by {d:.3g} of the largest entry"
# the steps moved the parameters: the comparison is not of an idle model
moved = np.max(np.abs(got["param.0.out.weight"] - got[f"param.{dump - 1}.out.weight"]))
assert moved > 1e-4, moved
print(f"{len(names)} gradients and parameters over {steps} steps agree with PyTorch's; worst {worst[0]:.2g} ({worst[1]})")

# flx_random.py against flx's own draws
sys.path.insert(0, bench)
import flx_random  # noqa: E402

init = os.path.join(work, "flx_init.safetensors")
subprocess.run([tool, "--write-init", init, "--seed", "5", "--seq", "8", "--dim", "16", "--layers", "2"], check=True)
f = load_file(init)
vocab = f["tokens.weight"].shape[1]
sd = flx_random.char_transformer_init(5, vocab, 8, 16, 2)
pairs = [("tokens.weight", sd["emb.weight"].T), ("positions.weight", sd["pos.weight"].T), ("out.weight", sd["out.weight"])]
for b in range(2):
    p = f"blocks.{b}."
    w = sd[p + "attn.in_proj_weight"]
    pairs += [(p + "attn.q_proj.weight", w[:16]), (p + "attn.k_proj.weight", w[16:32]), (p + "attn.v_proj.weight", w[32:]),
              (p + "attn.out_proj.weight", sd[p + "attn.out_proj.weight"]), (p + "up.weight", sd[p + "mlp.0.weight"]),
              (p + "down.weight", sd[p + "mlp.2.weight"])]
for k, want in pairs:
    assert np.array_equal(f[k], want), f"flx_random: {k} is not flx's (max difference {np.max(np.abs(f[k] - want))})"
print(f"flx_random.char_transformer_init gives flx's {len(pairs)} random weights bit for bit")

if os.path.isdir("/usr/share/common-licenses"):
    batches = os.path.join(work, "flx_batches.safetensors")
    subprocess.run([tool, "--write-batches", batches, "--seed", "9", "--steps", "40", "--batch", "8", "--seq", "16"],
                   check=True)
    b = load_file(batches)
    windows = flx_random.Windows(9)
    # the windows' text positions, recovered from flx's: each row must start where flx_random says
    names = sorted(n for n in os.listdir("/usr/share/common-licenses")
                   if os.path.isfile(os.path.join("/usr/share/common-licenses", n))
                   and not os.path.islink(os.path.join("/usr/share/common-licenses", n)))
    data = b"".join(open(os.path.join("/usr/share/common-licenses", n), "rb").read() for n in names)
    index = {c: i for i, c in enumerate(sorted(set(data)))}
    train = np.array([index[c] for c in data[:len(data) * 9 // 10]], dtype=np.int64)
    want = np.stack([np.stack([train[s:s + 16] for s in windows.starts(len(train), 16, 8)]) for _ in range(40)])
    assert np.array_equal(b["x"], want), "flx_random.Windows: not the windows flx draws"
    assert np.array_equal(b["y"][:, :, :-1], b["x"][:, :, 1:])
    print("flx_random.Windows gives flx's 320 training windows")
else:
    print("no /usr/share/common-licenses (base-files): the windows are not checked")
