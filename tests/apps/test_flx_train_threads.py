"""flx-train gives the same bits whatever the thread count and the load (issue 16).

One epoch on 6000 images, the same seed, run at FLX_NUM_THREADS=1, 2 and 3,
at 16 (the split of a big machine: more threads than cores, the load
measurement off so that all 16 are used), and with the adaptive pool while
two busy-looping processes compete for the cores: model.safetensors and
checkpoint.safetensors must be byte-identical, and so must the epoch's
loss, accuracy and step count.

usage: test_flx_train_threads.py FLX_TRAIN_EXE WORKDIR
"""
import contextlib
import json
import os
import shutil
import subprocess
import sys

exe, work = sys.argv[1], sys.argv[2]
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
FILES = ("model.safetensors", "checkpoint.safetensors")


@contextlib.contextmanager
def busy_processes(n):
    """n processes spinning, one per core, for as long as the block runs."""
    procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(n)]
    try:
        yield
    finally:
        for p in procs:
            p.kill()
            p.wait()


def train(name, **env):
    d = os.path.join(work, name)
    p = subprocess.run([exe, "--epochs", "1", "--limit", "6000", "--checkpoint-dir", d],
                       capture_output=True, text=True, env={**os.environ, **env}, timeout=300)
    assert p.returncode == 0, f"{name}: exit {p.returncode}\n{p.stderr}"
    [epoch] = [json.loads(line) for line in p.stdout.splitlines() if line.startswith("{")]
    metrics = {k: epoch[k] for k in ("loss", "test_accuracy", "step")}
    blobs = {}
    for f in FILES:
        with open(os.path.join(d, f), "rb") as fh:
            blobs[f] = fh.read()
    return metrics, blobs


runs = {}
for n in (1, 2, 3):
    runs[f"{n} threads"] = train(f"t{n}", FLX_NUM_THREADS=str(n), FLX_ADAPTIVE_THREADS="0")
runs["16 threads"] = train("t16", FLX_NUM_THREADS="16", FLX_ADAPTIVE_THREADS="0")
with busy_processes(2):
    runs["adaptive, 2 busy processes"] = train("busy")

ref_metrics, ref_blobs = runs["1 threads"]
print(f"1 thread: loss {ref_metrics['loss']}, test accuracy {ref_metrics['test_accuracy']}")
for name, (metrics, blobs) in runs.items():
    assert metrics == ref_metrics, f"{name}: {metrics}, on one thread {ref_metrics}"
    for f in FILES:
        assert blobs[f] == ref_blobs[f], f"{name}: {f} differs from the one-thread run's"
    print(f"{name}: the same metrics, byte-identical {' and '.join(FILES)}")
