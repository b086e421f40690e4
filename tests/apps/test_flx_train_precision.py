"""flx-train --precision, on the first 4096 Fashion-MNIST images (a few
seconds in all):

- bf16 trains the MLP about as well as f32 (within 3 points of test
  accuracy), with metrics lines of the same keys; the checkpoint holds the
  model in BFloat16 and MixedPrecision(Float32, Adam)'s state (Float32
  copies), and says its precision;
- cut off after epoch 1 and resumed, a bf16 run and an f16 run (with its
  loss scale) give epoch 2 exactly as the uninterrupted runs;
- a bf16 checkpoint resumes in f32 (loaded into the Float32 model, its
  weights from the optimiser's Float32 copies, and says so), an f32 one in
  bf16 and f16;
- the CNN in bf16: convolution weights in BFloat16, BatchNorm's parameters
  and statistics in Float32;
- a bad --precision, and f16 with --distributed, exit with status 2.

usage: test_flx_train_precision.py FLX_TRAIN_EXE WORKDIR
"""
import json
import os
import shutil
import struct
import subprocess
import sys

exe, work = sys.argv[1], sys.argv[2]
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
LIMIT = "4096"


def run(*args, expect=0):
    p = subprocess.run([exe, "--limit", LIMIT, *args], capture_output=True, text=True)
    assert p.returncode == expect, f"{args}: exit {p.returncode}, expected {expect}\n{p.stderr}"
    return p


def epochs(stdout):
    return [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]


def header(path):
    """A safetensors file's header: {name: {dtype, shape, ...}, "__metadata__": {...}}."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        return json.loads(f.read(n))


def d(name):
    return os.path.join(work, name)


# f32 and bf16, two epochs each.
f32 = epochs(run("--epochs", "2", "--checkpoint-dir", d("f32")).stdout)
bf16 = epochs(run("--epochs", "2", "--precision", "bf16", "--checkpoint-dir", d("bf16")).stdout)
assert [set(r) for r in bf16] == [set(r) for r in f32], (bf16, f32)
gap = f32[-1]["test_accuracy"] - bf16[-1]["test_accuracy"]
print(f"MLP, 2 epochs on {LIMIT} images: f32 {f32[-1]['test_accuracy']:.4f}, bf16 {bf16[-1]['test_accuracy']:.4f}")
assert abs(gap) <= 0.03, (f32[-1], bf16[-1])
assert bf16[-1]["loss"] < bf16[0]["loss"]

ck = header(d("bf16/checkpoint.safetensors"))
meta = ck["__metadata__"]
assert meta["precision"] == "bf16" and meta["step"] == str(bf16[-1]["step"]), meta
assert meta["optimiser.flx.rule"].startswith("MixedPrecision{Float32, Adam}(Adam("), meta
assert ck["model.layers.0.weight"]["dtype"] == "BF16", ck["model.layers.0.weight"]
assert ck["optimiser.layers.0.weight.state.t0"]["dtype"] == "F32"  # the Float32 copy
assert ck["optimiser.layers.0.weight.state.child0.t0"]["dtype"] == "F32"  # Adam's moment of it
alone = header(d("bf16/model.safetensors"))
assert alone["layers.2.bias"]["dtype"] == "BF16" and alone["__metadata__"]["precision"] == "bf16"
assert header(d("f32/checkpoint.safetensors"))["__metadata__"]["precision"] == "f32"

# Cut after epoch 1 and resumed: the same epoch 2, for bf16 and f16.
f16 = epochs(run("--epochs", "2", "--precision", "f16", "--checkpoint-dir", d("f16")).stdout)
assert f16[-1]["loss"] == f16[-1]["loss"] and f16[-1]["test_accuracy"] > 0.7, f16  # finite, learning
f16meta = header(d("f16/checkpoint.safetensors"))["__metadata__"]
assert float(f16meta["loss_scale"]) > 0 and int(f16meta["loss_scale_good_steps"]) >= 0, f16meta
for precision, full in (("bf16", bf16), ("f16", f16)):
    cut = d(f"cut_{precision}")
    run("--epochs", "1", "--precision", precision, "--checkpoint-dir", cut)
    resumed = epochs(run("--epochs", "2", "--precision", precision, "--resume", "--checkpoint-dir", cut).stdout)
    for key in ("loss", "test_accuracy", "step"):
        assert resumed[0][key] == full[1][key], (precision, key, resumed[0], full[1])
    print(f"{precision}: resumed epoch 2 is the uninterrupted run's (loss {full[1]['loss']})")

# Across precisions: bf16 -> f32 (the Float32 model loads the bf16
# checkpoint), f32 -> bf16 and f16.
for saved, resumed in (("bf16", "f32"), ("f32", "bf16"), ("f32", "f16")):
    to = d(f"{saved}_to_{resumed}")
    run("--epochs", "1", "--precision", saved, "--checkpoint-dir", to)
    p = run("--epochs", "2", "--precision", resumed, "--resume", "--checkpoint-dir", to)
    assert f"the checkpoint was trained in {saved}: its weights are converted to {resumed}" in p.stderr, p.stderr
    r = epochs(p.stdout)
    assert len(r) == 1 and r[0]["epoch"] == 2 and r[0]["test_accuracy"] > 0.7, r
    model = header(os.path.join(to, "model.safetensors"))
    want = {"f32": "F32", "bf16": "BF16", "f16": "F16"}[resumed]
    assert model["layers.0.weight"]["dtype"] == want and model["__metadata__"]["precision"] == resumed, model
print("checkpoints resume across precisions")

# The CNN in bf16: BatchNorm stays Float32.
cnn = epochs(run("--model", "cnn", "--epochs", "1", "--precision", "bf16", "--checkpoint-dir", d("cnn")).stdout)
assert cnn[0]["test_accuracy"] > 0.5, cnn
m = header(d("cnn/model.safetensors"))
assert m["layers.1.weight"]["dtype"] == "BF16", m["layers.1.weight"]  # the first Conv
for k in ("bias", "scale", "running_mean", "running_var"):
    assert m[f"layers.2.{k}"]["dtype"] == "F32", (k, m[f"layers.2.{k}"])

# Bad arguments: status 2, before anything is written.
p = run("--precision", "f8", "--checkpoint-dir", d("bad"), expect=2)
assert 'bad value "f8" for --precision: expected f32, bf16 or f16' in p.stderr, p.stderr
p = run("--precision", "f16", "--distributed", "--checkpoint-dir", d("bad"), expect=2)
assert "--precision f16 with --distributed" in p.stderr or "built without MPI" in p.stderr, p.stderr
assert not os.path.exists(d("bad"))
print("ok")
