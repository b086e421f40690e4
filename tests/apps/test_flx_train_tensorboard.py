"""flx-train --logdir: TensorBoard reads back exactly what flx-train printed.

A run of 2 epochs on 2000 images (A), resumed for a third (B); then the
third again from the checkpoint of the second (C), as after a crash between
B's TensorBoard records and its checkpoint. Read back with the tensorboard
package (its record reader checks every CRC-32C):

- each run added one event file, named events.out.tfevents.<time>.<host>...,
  whose first event is file_version "brain.Event:2" (wall time in seconds)
  and whose second is a SessionLog START at the purge step (0 fresh, S + 1
  resumed at step S);
- every scalar (loss, test_accuracy, learning_rate, samples_per_second,
  epoch) is, at the metrics line's step, float32 of the number the line
  printed, and there is one point a step: C's purge step hid B's epoch 3;
- every tensor of the model has a histogram each epoch holding its element
  count; the last epoch's min, max, sum and TensorFlow-bucket counts are
  those of model.safetensors, bucketed here with numpy;
- each run's text "run" holds its command line, the device and the model;
- a run that diverges (a learning rate of 1e38) stops (status 1) before it
  logs, prints or saves anything of the epoch: no scalar, no histogram of
  NaN weights, no metrics line, no checkpoint.

test_tensorboard_server.py then serves WORKDIR/runs with the real server.
Exits 77 (a skip) without the tensorboard, numpy or safetensors packages.

usage: test_flx_train_tensorboard.py FLX_TRAIN_EXE WORKDIR
"""
import json
import os
import re
import shlex
import shutil
import socket
import subprocess
import sys
import time

try:
    import numpy as np
    from safetensors.numpy import load_file
    from tensorboard.backend.event_processing import event_accumulator as ea
    from tensorboard.backend.event_processing.event_file_loader import EventFileLoader
except ImportError as e:
    print(f"SKIP: {e.name} is not installed (scripts/install-deps.sh installs tensorboard, numpy, safetensors)")
    sys.exit(77)

exe, work = sys.argv[1], sys.argv[2]
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
logdir = os.path.join(work, "runs", "mlp")
ckpt = os.path.join(work, "checkpoints")
metrics_file = os.path.join(work, "metrics.jsonl")
common = ["--limit", "2000", "--logdir", logdir, "--checkpoint-dir", ckpt, "--metrics", metrics_file]


def train(*args):
    """Runs flx-train: (its arguments, its metrics lines, start, end, the event file it added)."""
    argv = [*args, *common]
    before = set(os.listdir(logdir)) if os.path.isdir(logdir) else set()
    start = time.time()
    p = subprocess.run([exe, *argv], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, f"{argv}: exit {p.returncode}\n{p.stderr}"
    assert "--logdir" not in p.stderr, p.stderr  # no histogram was refused
    lines = [json.loads(line) for line in p.stdout.splitlines() if line.startswith("{")]
    added = sorted(set(os.listdir(logdir)) - before)
    assert len(added) == 1, f"{argv}: expected one new event file, got {added}"
    return argv, lines, start, time.time(), added[0]


runs = [train("--epochs", "2")]  # A
shutil.copytree(ckpt, ckpt + ".epoch2")
runs.append(train("--epochs", "3", "--resume"))  # B
# C: the third epoch again, from epoch 2's checkpoint, as if B had been
# killed after logging its epoch but before its checkpoint was written.
shutil.rmtree(ckpt)
shutil.copytree(ckpt + ".epoch2", ckpt)
runs.append(train("--epochs", "3", "--resume"))
# The metrics kept: per epoch, the last run's line (C's for epoch 3).
by_epoch = {}
for r in runs:
    for m in r[1]:
        by_epoch[m["epoch"]] = m
assert sorted(by_epoch) == [1, 2, 3], by_epoch
kept = [by_epoch[e] for e in (1, 2, 3)]
with open(metrics_file) as f:
    assert [json.loads(line) for line in f] == [m for r in runs for m in r[1]]

# ---- the files, event by event ----------------------------------------------
host = socket.gethostname()
s2 = by_epoch[2]["step"]
for (argv, lines, start, end, name), purge in zip(runs, (0, s2 + 1, s2 + 1)):
    m = re.fullmatch(r"events\.out\.tfevents\.(\d{10})\.(.+)\.(\d+)\.(\d+)", name)
    assert m and m.group(2) == host, name
    assert int(start) - 1 <= int(m.group(1)) <= end, (name, start, end)
    events = list(EventFileLoader(os.path.join(logdir, name)).Load())  # CRCs checked
    assert events[0].file_version == "brain.Event:2", events[0]
    assert start - 1 <= events[0].wall_time <= end + 1, (events[0].wall_time, start, end)
    assert events[1].session_log.status == events[1].session_log.START and events[1].step == purge, events[1]
    assert all(start - 1 <= e.wall_time <= end + 1 for e in events), name
print(f"{len(runs)} event files, each starting with brain.Event:2 and its purge step")

acc = ea.EventAccumulator(logdir, size_guidance={ea.SCALARS: 0, ea.HISTOGRAMS: 0, ea.TENSORS: 0})
acc.Reload()
tags = acc.Tags()

# ---- scalars: float32 of the printed numbers ------------------------------------
names = ["loss", "test_accuracy", "learning_rate", "samples_per_second", "epoch"]
assert sorted(tags["scalars"]) == sorted(names), tags["scalars"]
for tag in names:
    got = [(e.step, e.value) for e in acc.Scalars(tag)]
    # json parsed the printed text to the nearest double; flx-train logged
    # float32 of the nearest double to the same text.
    want = [(m["step"], float(np.float32(m[tag]))) for m in kept]
    assert got == want, f"{tag}: TensorBoard has {got}, the metrics lines say {want}"
print("scalars: exactly the metrics lines' values (as float32), one point per step")

# ---- histograms --------------------------------------------------------------------
model = load_file(os.path.join(ckpt, "model.safetensors"))
assert sorted(tags["histograms"]) == sorted("model/" + k for k in model), (tags["histograms"], list(model))


def tensorflow_buckets(values):
    """TensorFlow's default histogram (bucket limits 1e-12 * 1.1^k, their
    negatives, 0 and +-DBL_MAX; runs of empty buckets merged into one),
    from the first bucket that holds a value to the last."""
    pos = []
    v = 1e-12
    while v < 1e20:
        pos.append(v)
        v *= 1.1
    pos.append(sys.float_info.max)
    limits = [-x for x in reversed(pos)] + [0.0] + pos
    counts = np.bincount(np.searchsorted(limits, values, side="right"), minlength=len(limits))
    held = np.flatnonzero(counts)
    out_limits, out_counts, i, last = [], [], held[0], held[-1] + 1
    while i < last:
        end, count = limits[i], counts[i]
        i += 1
        if count == 0:
            while i < last and counts[i] == 0:
                end = limits[i]
                i += 1
        out_limits.append(end)
        out_counts.append(float(count))
    return out_limits, out_counts


for name, weights in model.items():
    events = acc.Histograms("model/" + name)
    assert [e.step for e in events] == [m["step"] for m in kept], (name, [e.step for e in events])
    for e in events:
        assert e.histogram_value.num == weights.size, (name, e.histogram_value.num, weights.size)
        assert sum(e.histogram_value.bucket) == weights.size, name
    h = events[-1].histogram_value  # the last epoch: the model in the checkpoint
    x = weights.astype(np.float64).ravel()
    assert (h.min, h.max) == (x.min(), x.max()), (name, h.min, h.max, x.min(), x.max())
    assert np.isclose(h.sum, x.sum(), rtol=1e-9, atol=1e-9 * np.abs(x).sum()), (name, h.sum, x.sum())
    assert np.isclose(h.sum_squares, (x * x).sum(), rtol=1e-9), (name, h.sum_squares, (x * x).sum())
    limits, counts = tensorflow_buckets(x)
    assert list(h.bucket_limit) == limits and list(h.bucket) == counts, name
print(f"histograms: {len(model)} tensors each epoch; the last epoch's buckets are numpy's of model.safetensors")

# ---- text ------------------------------------------------------------------------------
assert tags["tensors"] == ["run"], tags["tensors"]
texts = [(e.step, e.tensor_proto.string_val[0].decode()) for e in acc.Tensors("run")]
# All three: this reader purges scalars and histograms, not tensors, at a
# SessionLog START (the server's readers purge text too).
assert [s for s, _ in texts] == [0, s2 + 1, s2 + 1], texts
for (step, text), run in zip(texts, runs):
    lines = text.split("\n")
    assert all(line.startswith("    ") for line in lines), text  # a Markdown code block
    lines = [line[4:] for line in lines]
    assert lines[0] == shlex.join(["flx-train", *run[0]]), (lines[0], run[0])
    resumed = ["resumed after epoch 2 (step %d)" % s2] if step else []
    assert lines[1:2 + len(resumed)] == resumed + ["device: CPU"], lines
    assert lines[2 + len(resumed)] == "Chain(" and "269_322 parameters" in lines[-1], lines
print("text: the command line, device and model of each run")

# ---- a diverged run stops before it logs (or saves) the epoch ---------------------------
nan_dir = os.path.join(work, "diverged")
p = subprocess.run([exe, "--lr", "1e38", "--limit", "640", "--epochs", "1", "--checkpoint-dir", nan_dir,
                    "--logdir", nan_dir], capture_output=True, text=True, timeout=300)
assert p.returncode == 1, p.stderr
assert re.search(r"the training loss became (NaN|infinite) at step \d+ \(epoch 1, ", p.stderr), p.stderr
assert p.stdout == "", p.stdout
assert not os.path.exists(os.path.join(nan_dir, "checkpoint.safetensors")), os.listdir(nan_dir)
acc = ea.EventAccumulator(nan_dir, size_guidance={ea.SCALARS: 0, ea.HISTOGRAMS: 0})
acc.Reload()
assert acc.Tags()["scalars"] == [] and acc.Tags()["histograms"] == [], acc.Tags()
print("a diverged run: status 1 naming the step; no scalar, histogram, metrics line or checkpoint of it")
