"""flx-train's memory: one epoch on the CPU, with no OpenCL ICD installed
(OCL_ICD_VENDORS on an empty directory), peaks at no more resident memory
than 1.2x the dataset's stored bytes (the four IDX files, uncompressed)
plus 60 MB. The images stay UInt8 and are widened a batch at a time, and
probing the GPU backends maps no vendor library, so the peak is the data,
the model and a few MB of working memory.

The CNN (--model cnn, on 6400 training images: its steps' working set,
then the whole test set's evaluation) peaks at no more than 250 MiB: the
test set is evaluated a training batch at a time, so evaluation needs no
more memory than a training step (1000 images at a time took 800 MiB).

The peak is the child's ru_maxrss from wait4 (what /usr/bin/time -v
reports as the maximum resident set size). Exit 77 (a skip) without
Fashion-MNIST.

usage: test_flx_train_memory.py FLX_TRAIN_EXE WORKDIR
"""
import gzip
import json
import os
import shutil
import subprocess
import sys
import tempfile

exe, work = sys.argv[1], sys.argv[2]
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)

FILES = ["train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"]


def find(name):
    """Where flx looks: $FLX_DATA/fashion-mnist, $FLX_DATA, /usr/share/datasets/fashion-mnist."""
    dirs = []
    if os.environ.get("FLX_DATA"):
        dirs += [os.path.join(os.environ["FLX_DATA"], "fashion-mnist"), os.environ["FLX_DATA"]]
    dirs.append("/usr/share/datasets/fashion-mnist")
    for d in dirs:
        for candidate in (os.path.join(d, name + ".gz"), os.path.join(d, name)):
            if os.path.exists(candidate):
                return candidate
    return None


def stored_bytes(path):
    """The file's bytes as stored in an IDX file (inflated when gzipped)."""
    if not path.endswith(".gz"):
        return os.path.getsize(path)
    n = 0
    with gzip.open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            n += len(chunk)
    return n


paths = [find(name) for name in FILES]
if None in paths:
    print("skipped: Fashion-MNIST is not installed (scripts/install-deps.sh installs dataset-fashion-mnist)")
    sys.exit(77)
dataset = sum(stored_bytes(p) for p in paths)
target = 1.2 * dataset + 60e6


def peak_of(*args):
    """flx-train's exit status, stdout, stderr and peak resident bytes."""
    with tempfile.TemporaryDirectory() as no_icd, tempfile.TemporaryFile("w+") as out, \
            tempfile.TemporaryFile("w+") as err:
        env = dict(os.environ, OCL_ICD_VENDORS=no_icd, FLX_SILENCE_WARN_NO_GPU="1")
        child = subprocess.Popen([exe, *args], stdout=out, stderr=err, env=env)
        _, status, usage = os.wait4(child.pid, 0)  # this child's own rusage
        out.seek(0), err.seek(0)
        return os.waitstatus_to_exitcode(status), out.read(), err.read(), usage.ru_maxrss * 1024  # KiB on Linux


returncode, stdout, stderr, peak = peak_of("--epochs", "1", "--checkpoint-dir", os.path.join(work, "ckpt"))
assert returncode == 0, f"flx-train exited {returncode}\n{stderr}"
runs = [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]
assert len(runs) == 1 and runs[0]["samples"] == 60000 and runs[0]["device"] == "CPU", stdout
print(f"dataset {dataset / 1e6:.1f} MB stored; flx-train --epochs 1 peaked at {peak / 1e6:.1f} MB resident "
      f"(target {target / 1e6:.1f} MB = 1.2 x dataset + 60 MB); test accuracy {runs[0]['test_accuracy']:.4f}")
assert peak <= target, f"peak resident memory {peak / 1e6:.1f} MB exceeds {target / 1e6:.1f} MB"

cnn_target = 250 * 2**20
returncode, stdout, stderr, peak = peak_of("--model", "cnn", "--epochs", "1", "--limit", "6400", "--checkpoint-dir",
                                           os.path.join(work, "ckpt_cnn"))
assert returncode == 0, f"flx-train --model cnn exited {returncode}\n{stderr}"
runs = [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]
assert len(runs) == 1 and runs[0]["samples"] == 6400, stdout
print(f"flx-train --model cnn --epochs 1 --limit 6400 peaked at {peak / 2**20:.1f} MiB resident "
      f"(target 250 MiB); test accuracy {runs[0]['test_accuracy']:.4f}")
assert peak <= cnn_target, f"the CNN's peak resident memory {peak / 2**20:.1f} MiB exceeds 250 MiB"
