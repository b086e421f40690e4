"""flx-train refuses what would silently go wrong (issue 27):

- the learning rate never passes its peak: a warm-up shorter than one step
  (--warmup 1e-300) or not a whole number of steps (the CNN recipe's 0.3
  epochs with one step an epoch, --limit 64) trains at the peak, not above;
- a loss that becomes NaN or Inf stops the run (status 1) with a message
  naming the step and what to do, and no checkpoint of it is written: the
  last good one stays, byte for byte;
- several processes of an MPI launcher (OpenMPI's mpiexec, Hydra, srun)
  without --distributed are refused (status 2) with a message naming
  --distributed, before anything is read or written; one process is not.

usage: test_flx_train_guards.py FLX_TRAIN_EXE WORKDIR [MPIEXEC ARGS...]
"""
import json
import math
import os
import shutil
import subprocess
import sys

exe, work, mpiexec = sys.argv[1], sys.argv[2], sys.argv[3:]
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
LAUNCHER_VARS = ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_STEP_NUM_TASKS", "SLURM_NTASKS", "SLURM_PROCID")
BASE_ENV = {k: v for k, v in os.environ.items() if k not in LAUNCHER_VARS}


def run(*args, env=None, expect=0):
    p = subprocess.run([exe, *args], capture_output=True, text=True, timeout=300, env={**BASE_ENV, **(env or {})})
    assert p.returncode == expect, f"{args} {env}: exit {p.returncode}, expected {expect}\n{p.stderr}"
    return p


def epochs(stdout):
    return [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]


def files(d):
    return {f: open(os.path.join(d, f), "rb").read() for f in sorted(os.listdir(d))} if os.path.isdir(d) else {}


# ---- the warm-up never passes the peak -------------------------------------------
# The CNN recipe on 64 images: one step an epoch, 0.3 of a step of warm-up.
r = epochs(run("--model", "cnn", "--limit", "64", "--epochs", "1", "--checkpoint-dir", f"{work}/cnn").stdout)
assert r[0]["learning_rate"] == 3e-3, r
# A warm-up shorter than one step: the peak from step 1, and the model learns.
r = epochs(run("--limit", "640", "--epochs", "1", "--warmup", "1e-300", "--checkpoint-dir", f"{work}/tiny").stdout)
assert r[0]["learning_rate"] == 1e-3 and math.isfinite(r[0]["loss"]) and r[0]["test_accuracy"] > 0.3, r
print("warm-up: at most the peak (CNN recipe on one step an epoch; --warmup 1e-300)")

# ---- a loss that becomes NaN or Inf ends the run, saving nothing of it ------------
good = f"{work}/good"
run("--limit", "640", "--epochs", "1", "--checkpoint-dir", good)
before = files(good)
assert set(before) == {"checkpoint.safetensors", "model.safetensors"}, before.keys()
p = run("--limit", "640", "--epochs", "2", "--resume", "--lr", "1e30", "--checkpoint-dir", good, expect=1)
for part in ("flx-train: the training loss became", "at step 1", "(epoch 2, batch ", "training diverged",
             "Epoch 2 was not saved", "lower --lr (now 1e+30)", "--warmup"):
    assert part in p.stderr, f"{part!r} not in\n{p.stderr}"
assert epochs(p.stdout) == [], p.stdout  # no metrics line for the epoch
assert files(good) == before, "the last good checkpoint changed"
# From the start: no checkpoint at all.
fresh = f"{work}/fresh"
p = run("--limit", "640", "--epochs", "1", "--lr", "1e30", "--checkpoint-dir", fresh, expect=1)
assert "at step " in p.stderr and "(epoch 1, batch " in p.stderr, p.stderr
assert "checkpoint.safetensors" not in files(fresh) and "model.safetensors" not in files(fresh), files(fresh).keys()
print("a NaN loss: status 1, the step named, the last good checkpoint kept")

# ---- several processes of a launcher without --distributed -------------------------
for env, n, var in (({"OMPI_COMM_WORLD_SIZE": "2"}, 2, "OMPI_COMM_WORLD_SIZE"), ({"PMI_SIZE": "3"}, 3, "PMI_SIZE"),
                    ({"SLURM_STEP_NUM_TASKS": "4"}, 4, "SLURM_STEP_NUM_TASKS"),
                    ({"SLURM_NTASKS": "2", "SLURM_PROCID": "1"}, 2, "SLURM_NTASKS")):
    ckpt = f"{work}/never"
    p = run("--limit", "64", "--epochs", "1", "--checkpoint-dir", ckpt, env=env, expect=2)
    for part in (f"one of {n} processes", f"{var}={n}", "--distributed", f"mpiexec -n {n} flx-train --distributed"):
        assert part in p.stderr, f"{env}: {part!r} not in\n{p.stderr}"
    assert p.stdout == "" and "test images" not in p.stderr and not os.path.exists(ckpt), (env, p.stderr)
# One process of a launcher, or a Slurm batch script's own shell (no srun task): trains.
for env in ({"OMPI_COMM_WORLD_SIZE": "1"}, {"SLURM_NTASKS": "4"}):
    assert len(epochs(run("--limit", "64", "--epochs", "1", "--checkpoint-dir", f"{work}/one", env=env).stdout)) == 1
# The real launcher.
if mpiexec:
    p = subprocess.run([*mpiexec, "-n", "2", exe, "--limit", "64", "--epochs", "1", "--checkpoint-dir",
                        f"{work}/never"], capture_output=True, text=True, timeout=300, env=BASE_ENV)
    assert p.returncode != 0, p.stderr
    assert "one of 2 processes" in p.stderr and "--distributed" in p.stderr, p.stderr
    assert not os.path.exists(f"{work}/never"), "a rank wrote a checkpoint"
    print("mpiexec -n 2 without --distributed: refused")
print("launchers' worlds above 1 without --distributed: refused (status 2); a world of 1 trains")
