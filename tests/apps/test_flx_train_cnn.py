"""flx-train --model cnn end to end, on the first 6000 Fashion-MNIST images:

- 2 epochs learn (test accuracy >= 0.80 on all 10000 test images, loss
  falling), with one JSON line per epoch as for the MLP;
- the learning rate follows the CNN's recipe: each epoch's metrics give the
  rate of its last step, lr 3e-3 after 0.3 epochs of linear warm-up, then a
  cosine decay per step over the run (closed form below);
- cut off after epoch 1 and resumed, epoch 2 is exactly that of the
  uninterrupted run (the rate depends on the step's place in the run only);
- --decay with the cosine schedule is a usage error; with --schedule exp it
  is that schedule's factor per epoch.

usage: test_flx_train_cnn.py FLX_TRAIN_EXE WORKDIR
"""
import json
import math
import os
import shutil
import subprocess
import sys
import time

exe, work = sys.argv[1], sys.argv[2]
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
LIMIT, BATCH, EPOCHS = 6000, 64, 2
STEPS = math.ceil(LIMIT / BATCH)  # the last batch is partial


def run(*args, expect=0, limit=LIMIT):
    p = subprocess.run([exe, "--model", "cnn", "--limit", str(limit), *args], capture_output=True, text=True)
    assert p.returncode == expect, f"{args}: exit {p.returncode}, expected {expect}\n{p.stderr}"
    return p


def epochs(stdout):
    return [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]


def cosine_rate(epoch, batch, lr=3e-3, warmup=0.3, total_epochs=EPOCHS):
    t, warm = (epoch - 1) * STEPS + batch, warmup * STEPS
    return min(lr, lr * (t + 1) / warm) if t < warm else lr * 0.5 * (1 + math.cos(math.pi * t / (total_epochs * STEPS)))


# The full run; the checkpoint of its epoch 1 is copied aside as it appears
# (written atomically after epoch 1's metrics line, replaced after epoch 2,
# seconds later): a run cut off after epoch 1.
full_dir, cut = os.path.join(work, "full"), os.path.join(work, "cut")
os.makedirs(cut)
p = subprocess.Popen([exe, "--model", "cnn", "--limit", str(LIMIT), "--epochs", str(EPOCHS), "--checkpoint-dir",
                      full_dir], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
first_line = p.stdout.readline()
assert json.loads(first_line)["epoch"] == 1, first_line
checkpoint = os.path.join(full_dir, "checkpoint.safetensors")
deadline = time.monotonic() + 60
while not os.path.exists(checkpoint) and time.monotonic() < deadline:
    time.sleep(0.002)
shutil.copy(checkpoint, cut)
out, err = p.communicate(timeout=600)
assert p.returncode == 0, err
full = epochs(first_line + out)
assert [r["epoch"] for r in full] == [1, 2], full
assert full[-1]["step"] == EPOCHS * STEPS, full[-1]
assert full[-1]["loss"] < full[0]["loss"], full
assert full[-1]["test_accuracy"] >= 0.80, f"test accuracy {full[-1]['test_accuracy']} < 0.80 after {EPOCHS} epochs"
for r in full:
    want = cosine_rate(r["epoch"], STEPS - 1)
    assert math.isclose(r["learning_rate"], want, rel_tol=1e-5), (r, want)
print(f"{EPOCHS} epochs on {LIMIT} images: test accuracy {full[-1]['test_accuracy']:.4f}, "
      f"{full[-1]['samples_per_second']:.0f} samples/s; rates {[r['learning_rate'] for r in full]} as the recipe")

# Resumed from epoch 1's checkpoint: epoch 2 exactly as in the full run.
p = run("--epochs", str(EPOCHS), "--resume", "--checkpoint-dir", cut)
assert "resumed after epoch 1" in p.stderr, p.stderr
resumed = epochs(p.stdout)
assert len(resumed) == 1 and resumed[0]["epoch"] == 2, resumed
for key in ("loss", "test_accuracy", "step", "learning_rate"):
    assert resumed[0][key] == full[1][key], (key, resumed[0], full[1])
print(f"resumed epoch 2: loss {resumed[0]['loss']} as in the uninterrupted run")

# The schedule's options.
err = run("--decay", "0.5", "--checkpoint-dir", os.path.join(work, "never"), expect=2).stderr
assert "--decay applies to --schedule exp only" in err and "cosine" in err, err
assert not os.path.exists(os.path.join(work, "never"))
exp = epochs(run("--epochs", "2", "--schedule", "exp", "--lr", "2e-3", "--decay", "0.5", "--warmup", "0",
                 "--checkpoint-dir", os.path.join(work, "exp"), limit=640).stdout)
assert [r["learning_rate"] for r in exp] == [2e-3, 1e-3], exp
print("--schedule exp with --decay; --decay refused with cosine")
