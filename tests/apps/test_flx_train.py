"""flx-train, the main job, end to end on Fashion-MNIST.

- 10 epochs on the CPU reach >= 0.885 test accuracy; stdout carries one JSON
  object per epoch (the same as --metrics FILE); off a terminal, stderr has
  one plain line per epoch.
- Cut off after 2 epochs and resumed, a run continues exactly where the
  uninterrupted one was (same loss and accuracy at epoch 3).
- On a terminal the progress bar redraws in place.
- Bad arguments, a missing checkpoint and a damaged one are clear errors,
  and the damaged file is left as it was (test_flx_train_args.py and
  test_flx_train_interrupts.py go further).
- With an OpenCL device, one epoch reaches the CPU's accuracy within 0.5
  points (same seed).

usage: test_flx_train.py FLX_TRAIN_EXE WORKDIR
"""
import json
import os
import pty
import re
import shutil
import subprocess
import sys

exe, work = sys.argv[1], sys.argv[2]
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)


def run(*args, expect=0):
    p = subprocess.run([exe, *args], capture_output=True, text=True)
    assert p.returncode == expect, f"{args}: exit {p.returncode}, expected {expect}\n{p.stderr}"
    return p


def epochs(stdout):
    return [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]


# The full run.
full = os.path.join(work, "full")
p = run("--epochs", "10", "--checkpoint-dir", full, "--metrics", os.path.join(full, "metrics.jsonl"))
runs = epochs(p.stdout)
assert [r["epoch"] for r in runs] == list(range(1, 11)), p.stdout
with open(os.path.join(full, "metrics.jsonl")) as f:
    assert [json.loads(line) for line in f] == runs
final = runs[-1]["test_accuracy"]
print(f"10 epochs: test accuracy {final:.4f}, {runs[-1]['samples_per_second']:.0f} samples/s, "
      f"{sum(r['train_seconds'] for r in runs):.1f} s training")
assert final >= 0.885, f"test accuracy {final} < 0.885"
assert runs[-1]["loss"] < runs[0]["loss"]
for r in runs:  # the MLP's recipe: lr 1e-3 decayed by 0.75 each epoch
    assert abs(r["learning_rate"] - 1e-3 * 0.75 ** (r["epoch"] - 1)) < 1e-9, r
plain = [line for line in p.stderr.splitlines() if line.startswith("epoch ")]
assert len(plain) == 10 and "\r" not in p.stderr and "test accuracy" in plain[0], p.stderr
for name in ("checkpoint.safetensors", "model.safetensors"):
    assert os.path.getsize(os.path.join(full, name)) > 0

# Interrupted after epoch 2, resumed to epoch 3: exactly the same epoch 3.
cut = os.path.join(work, "cut")
run("--epochs", "2", "--checkpoint-dir", cut)
resumed = epochs(run("--epochs", "3", "--resume", "--checkpoint-dir", cut).stdout)
assert len(resumed) == 1 and resumed[0]["epoch"] == 3, resumed
for key in ("loss", "test_accuracy", "step"):
    assert resumed[0][key] == runs[2][key], (key, resumed[0], runs[2])
print(f"resumed epoch 3: loss {resumed[0]['loss']} as in the uninterrupted run")

# On a terminal: a bar redrawn in place, with an ETA.
leader, follower = pty.openpty()
p = subprocess.run([exe, "--epochs", "1", "--limit", "12800", "--checkpoint-dir", os.path.join(work, "tty")],
                   stdout=subprocess.PIPE, stderr=follower, text=True)
os.close(follower)
tty = b""
while True:
    try:
        chunk = os.read(leader, 65536)
    except OSError:
        break
    if not chunk:
        break
    tty += chunk
tty = tty.decode()
assert p.returncode == 0, tty
assert "\r\x1b[2Kepoch 1/1 [" in tty and "samples/s" in tty and "took" in tty, repr(tty[-400:])

# Bad input.
assert "bad value \"0\" for --batchsize" in run("--batchsize", "0", expect=2).stderr
assert "unknown option" in run("--bogus", expect=2).stderr
empty = os.path.join(work, "empty")
assert "no checkpoint" in run("--resume", "--checkpoint-dir", empty, expect=1).stderr
checkpoint = os.path.join(cut, "checkpoint.safetensors")
with open(checkpoint, "r+b") as f:
    f.truncate(os.path.getsize(checkpoint) // 2)
size = os.path.getsize(checkpoint)
err = run("--epochs", "4", "--resume", "--checkpoint-dir", cut, expect=1).stderr
assert checkpoint in err, err
assert os.path.getsize(checkpoint) == size, "a damaged checkpoint must not be written over"
print("bad arguments and a damaged checkpoint: clear errors")

# The same program on OpenCL, when there is an OpenCL device.
info = subprocess.run([exe, "--epochs", "1", "--device", "OpenCL", "--checkpoint-dir", os.path.join(work, "ocl")],
                      capture_output=True, text=True)
# Skipped only when flx says there is no OpenCL device: the plugin is not
# built, or it finds no platform or no device (src/devices/registry.cpp,
# backends/opencl/ocl_context.cpp); any other failure fails.
no_opencl = re.fullmatch(r"flx-train: there is no device OpenCL:0: OpenCL is not available: "
                         r"(plugin libflx_backend_opencl\.so not found \(searched: [^\n]*\); build flx with its "
                         r"OpenCL backend or set FLX_BACKEND_PATH|no OpenCL platform found \(install an ICD such as "
                         r"pocl-opencl-icd\)|no OpenCL devices[^\n]*) \[src/devices/registry\.cpp:[0-9]+\]",
                         info.stderr.strip())
if info.returncode == 1 and no_opencl:
    print("SKIP OpenCL: " + info.stderr.strip())
else:
    assert info.returncode == 0, info.stderr
    ocl = epochs(info.stdout)[0]
    assert ocl["device"].startswith("OpenCL"), ocl
    diff = abs(ocl["test_accuracy"] - runs[0]["test_accuracy"])
    print(f"OpenCL epoch 1: test accuracy {ocl['test_accuracy']:.4f} (CPU {runs[0]['test_accuracy']:.4f}), "
          f"{ocl['samples_per_second']:.0f} samples/s")
    assert diff <= 0.005, f"OpenCL accuracy differs from the CPU's by {diff}"
