"""A model zoo Fashion-MNIST example (unet, vae), short: it learns and logs images.

Runs EXE --steps STEPS --seed 3 --tb WORKDIR/runN twice and checks the JSON
line: the model's name, the metric METRIC finite, below MAX and the same in
both runs (the same seed gives the same bits on the CPU), and an event file
in the log directory. With the tensorboard package installed, reads the
event file back and checks that the images IMAGE_TAGS (comma-separated) are
there as PNGs of the sizes given (tag=WxH). Exits 77 (a skip) when the
example finds no Fashion-MNIST (it exits 77).

usage: check_image_model.py EXE MODEL STEPS METRIC MAX WORKDIR TAG=WxH[,TAG=WxH...]
"""
import glob
import json
import math
import os
import shutil
import subprocess
import sys

exe, model, steps, metric, most, work, tags = sys.argv[1:8]
most = float(most)
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)


def run(n):
    logdir = os.path.join(work, f"run{n}")
    p = subprocess.run([exe, "--steps", steps, "--seed", "3", "--tb", logdir], capture_output=True, text=True,
                       timeout=300)
    if p.returncode == 77:
        print(f"SKIPPED: {p.stdout.strip()}")
        sys.exit(77)
    assert p.returncode == 0, f"{exe} exited with {p.returncode}:\n{p.stderr}"
    lines = [l for l in p.stdout.splitlines() if l.startswith("{")]
    assert len(lines) == 1, p.stdout
    assert f"step {steps}: loss" in p.stderr, p.stderr
    files = glob.glob(os.path.join(logdir, "events.out.tfevents.*"))
    assert len(files) == 1, files
    return json.loads(lines[0]), logdir


(first, logdir), (second, _) = run(1), run(2)
assert first["model"] == model and first["steps"] == int(steps), first
value = first[metric]
assert math.isfinite(value) and value < most, f"{metric} {value} (expected below {most} after {steps} steps)"
assert second[metric] == value, f"the same seed gave {value} and then {second[metric]}"
try:
    from tensorboard.backend.event_processing import event_accumulator as ea
except ImportError:
    ea = None
if ea is not None:
    acc = ea.EventAccumulator(logdir, size_guidance={ea.IMAGES: 0})
    acc.Reload()
    for spec in tags.split(","):
        tag, size = spec.split("=")
        w, h = map(int, size.split("x"))
        assert tag in acc.Tags()["images"], (tag, acc.Tags()["images"])
        im = acc.Images(tag)[-1]
        assert (im.width, im.height) == (w, h), (tag, im.width, im.height)
        assert im.encoded_image_string.startswith(b"\x89PNG\r\n\x1a\n"), tag
print(f"{model}: {metric} {value:.5f} after {steps} steps in {first['seconds']:.1f} s; images "
      f"{'checked with tensorboard' if ea else 'not read (no tensorboard package)'}")
