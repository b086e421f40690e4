"""flx-train --distributed under mpiexec -n 2, on the first 6000 training
images (each rank 3000), against one process on the same data.

- One JSON line per epoch, from rank 0 alone, with "workers": 2 and the
  global sample count; the metrics file holds the same lines; the progress
  lines are rank 0's alone.
- Rank 0 alone writes checkpoints and TensorBoard logs: rank 1 is given a
  checkpoint and a log directory of its own (an MPMD launch, `A : B`) that
  must never appear, and they are never needed: a run cut after epoch 1
  and resumed (rank 1's directory still missing) gives exactly the
  uninterrupted run's epoch 2 (loss, accuracy, step). A distributed
  checkpoint also resumes in one process.
- The maths: with Avg over equal shares, 2 ranks at batch B are one process
  at batch 2B. With whole batches (B = 3000 per rank against 6000) the
  shuffle plays no part, and the losses of 3 epochs agree to 1e-4 relative,
  the accuracies to 0.002 (a few test images, rounding). With mini-batches
  the shuffles differ (each rank shuffles its own share): the accuracy after
  2 epochs is >= 0.75 and within 0.03 of one process at batch 128 (over
  seeds 1-5 the two differ by up to 0.02).
- Bad arguments exit 2 on every rank before MPI starts; a missing
  checkpoint stops every rank with status 1 and one message; a rank that
  fails at run time (damaged data on rank 1) ends the whole job at once
  with its message, leaving no process behind.

usage: test_flx_train_distributed.py FLX_TRAIN_EXE WORKDIR MPIEXEC [MPIEXEC_FLAGS...]
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import time

exe, work, mpiexec = sys.argv[1], sys.argv[2], sys.argv[3:]
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
COMMON = ["--limit", "6000"]


def launch(argv, timeout=120, env=None):
    """(returncode, stdout, stderr, seconds); the whole process group is
    killed on timeout, so nothing is left behind."""
    t0 = time.monotonic()
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
                         env=env)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, err = p.communicate()
        raise AssertionError(f"{' '.join(argv)}: still running after {timeout} s\n{out}\n{err}")
    return p.returncode, out, err, time.monotonic() - t0


def solo(*args):
    rc, out, err, _ = launch([exe, *COMMON, *args])
    assert rc == 0, f"{args}: exit {rc}\n{err}"
    return epochs(out)


def ranks(args0, args1=None, expect=0, rank1_env=()):
    """mpiexec: rank 0 with args0, rank 1 with args1 (default args0)."""
    args1 = args0 if args1 is None else args1
    rank1 = ["env", *rank1_env] if rank1_env else []
    argv = [*mpiexec, "-n", "1", exe, "--distributed", *COMMON, *args0, ":",
            "-n", "1", *rank1, exe, "--distributed", *COMMON, *args1]
    rc, out, err, took = launch(argv)
    assert rc == expect, f"{' '.join(argv)}: exit {rc}, expected {expect}\n{out}\n{err}"
    return out, err, took


def epochs(stdout):
    return [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]


def ckpt(name):
    return ["--checkpoint-dir", os.path.join(work, name)]


# ---- the full run: two epochs, rank 0's output and files alone ---------------
metrics = os.path.join(work, "full0", "metrics.jsonl")
logdir = os.path.join(work, "full0", "runs")
out, err, took = ranks([*ckpt("full0"), "--epochs", "2", "--metrics", metrics, "--logdir", logdir],
                       [*ckpt("full1"), "--epochs", "2", "--metrics", os.path.join(work, "full1", "m.jsonl"),
                        "--logdir", os.path.join(work, "full1", "runs")])
full = epochs(out)
assert len(out.splitlines()) == 2 and [r["epoch"] for r in full] == [1, 2], out
for r in full:
    assert r["workers"] == 2 and r["samples"] == 6000 and r["step"] == 47 * r["epoch"], r
with open(metrics) as f:
    assert [json.loads(line) for line in f] == full
for e in (1, 2):
    assert sum(line.startswith(f"epoch {e}/2") for line in err.splitlines()) == 1, err
assert err.count("Fashion-MNIST, 6000 training") == 1 and "2 ranks (MPIBackend)" in err, err
for name in ("checkpoint.safetensors", "model.safetensors"):
    assert os.path.getsize(os.path.join(work, "full0", name)) > 0
assert not os.path.exists(os.path.join(work, "full1")), "rank 1 wrote files"
# One TensorBoard event file, rank 0's, describing the team (its text "run").
logs = os.listdir(logdir)
assert len(logs) == 1 and logs[0].startswith("events.out.tfevents."), logs
with open(os.path.join(logdir, logs[0]), "rb") as f:
    assert b"device: CPU, 2 ranks (MPIBackend)" in f.read()
print(f"2 ranks, 2 epochs: loss {full[-1]['loss']:.4f}, test accuracy {full[-1]['test_accuracy']:.4f}, "
      f"{sum(r['train_seconds'] for r in full):.2f} s training ({took:.1f} s in all)")

# ---- against one process at the global batch ---------------------------------
alone = solo(*ckpt("solo"), "--epochs", "2", "--batchsize", "128")
acc, acc1 = full[-1]["test_accuracy"], alone[-1]["test_accuracy"]
print(f"one process at batch 128: test accuracy {acc1:.4f} (2 ranks at 64 each: {acc:.4f})")
assert acc >= 0.75 and abs(acc - acc1) <= 0.03, (full[-1], alone[-1])

whole = epochs(ranks([*ckpt("whole"), "--epochs", "3", "--batchsize", "3000"])[0])
whole1 = solo(*ckpt("whole_solo"), "--epochs", "3", "--batchsize", "6000")
for a, b in zip(whole, whole1, strict=True):
    assert abs(a["loss"] - b["loss"]) <= 1e-4 * b["loss"], (a, b)
    assert abs(a["test_accuracy"] - b["test_accuracy"]) <= 0.002, (a, b)
print("whole batches: 2 ranks x 3000 = one process x 6000 (losses "
      + ", ".join(f"{a['loss']:.6f}/{b['loss']:.6f}" for a, b in zip(whole, whole1)) + ")")

# ---- cut after epoch 1 and resumed: rank 0 alone holds the checkpoint ---------
ranks([*ckpt("cut0"), "--epochs", "1"], [*ckpt("cut1"), "--epochs", "1"])
out, err, _ = ranks([*ckpt("cut0"), "--epochs", "2", "--resume"], [*ckpt("cut1"), "--epochs", "2", "--resume"])
resumed = epochs(out)
assert err.count("resumed after epoch 1") == 1, err
assert len(resumed) == 1 and resumed[0]["epoch"] == 2, out
for key in ("loss", "test_accuracy", "step"):
    assert resumed[0][key] == full[1][key], (key, resumed[0], full[1])
assert not os.path.exists(os.path.join(work, "cut1")), "rank 1 wrote or needed files"
print(f"resumed on 2 ranks (checkpoint on rank 0 only): epoch 2 loss {resumed[0]['loss']} as uninterrupted")
shutil.copytree(os.path.join(work, "cut0"), os.path.join(work, "cut_solo"))  # a checkpoint of 2 ranks, in one process
one = solo(*ckpt("cut_solo"), "--epochs", "3", "--resume", "--batchsize", "128")
assert [r["epoch"] for r in one] == [3] and "workers" not in one[0], one

# ---- failures ------------------------------------------------------------------
out, err, _ = ranks(["--batchsize", "0"], expect=2)
assert out == "" and 'bad value "0" for --batchsize' in err, err
rc, _, err, _ = launch([exe, "--distributed", "--device", "CUDA:1"])
assert rc == 2 and "node_rank % ndevices" in err, err
out, err, took = ranks([*ckpt("none"), "--resume"], expect=1)
assert out == "" and err.count("no checkpoint in") == 1, err
bad = os.path.join(work, "damaged", "fashion-mnist")
os.makedirs(bad)
with open(os.path.join(bad, "train-images-idx3-ubyte"), "wb") as f:
    f.write(b"\x01\x02\x03\x04 not an IDX file")
# The other three files are the real ones (FLX_DATA's where it is set, as on
# a GPU machine that carries the dataset, else the Debian package's), so the
# damaged images are what rank 1 stops at.
real = os.path.join(os.environ["FLX_DATA"], "fashion-mnist") if os.environ.get("FLX_DATA") else \
    "/usr/share/datasets/fashion-mnist"
for name in ("train-labels-idx1-ubyte", "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"):
    os.symlink(os.path.join(real, name + ".gz"), os.path.join(bad, name + ".gz"))
out, err, took = ranks([*ckpt("damaged0")], rank1_env=[f"FLX_DATA={os.path.dirname(bad)}"], expect=1)
assert "rank 1 of 2: flx-train: Fashion-MNIST" in err and "IDX magic" in err and "MPI_Abort" in err, err
assert took < 60, f"the job took {took:.0f} s to end"
print(f"bad arguments: status 2; no checkpoint: status 1, one message; rank 1 failing: the job ended in {took:.1f} s")
