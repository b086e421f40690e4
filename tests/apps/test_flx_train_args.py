"""flx-train checks every argument before it starts: a bad one is a usage
error (exit status 2) naming the flag and the value, before any data is read
or anything is written, and so is a checkpoint directory, metrics file or
TensorBoard log directory it cannot create.

usage: test_flx_train_args.py FLX_TRAIN_EXE WORKDIR
"""
import os
import shutil
import subprocess
import sys

exe, work = sys.argv[1], sys.argv[2]
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
# A plain file: paths through it fail with ENOTDIR, which stops root too
# (permission bits do not).
a_file = os.path.join(work, "a_file")
with open(a_file, "w") as f:
    f.write("not a directory\n")


def refused(*args, says=()):
    ckpt = os.path.join(work, "never")
    argv = [exe, *args] if "--checkpoint-dir" in args else [exe, "--checkpoint-dir", ckpt, *args]
    p = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    assert p.returncode == 2, f"{args}: exit {p.returncode}, expected 2\n{p.stderr}"
    assert p.stdout == "", f"{args}: trained anyway\n{p.stdout}"
    assert "test images" not in p.stderr and "epoch 1/" not in p.stderr, f"{args}: started\n{p.stderr}"
    for s in says:
        assert s in p.stderr, f"{args}: {s!r} not in\n{p.stderr}"
    assert not os.path.exists(ckpt), f"{args}: created {ckpt}"
    return p.stderr


# Every numeric flag: out of range, not a number, trailing junk, overflow.
bad = {
    "--epochs": ["0", "-1", "3x", "x", "", "1.5", "99999999999"],
    "--batchsize": ["0", "-3", "64x", "1e3"],
    "--seed": ["-1", "abc", "1.0", "99999999999999999999"],
    "--lr": ["-1", "0", "nan", "inf", "1e999", "abc", "1e-3x"],
    "--decay": ["-0.5", "0", "1.5", "nan", "x"],
    "--limit": ["-5", "10x", "-0.5"],
    "--warmup": ["-1", "x", "nan", "inf", "0.5x"],
}
for flag, values in bad.items():
    for v in values:
        err = refused(flag, v, says=(flag, f'"{v}"'))
        assert "expected" in err, err
assert "--epochs needs a value" in refused("--epochs")
assert "unknown option --bogus" in refused("--bogus")
assert 'flx-train takes options only' in refused("stray")
for v in ("lin", "", "COSINE"):
    refused("--schedule", v, says=("--schedule", f'"{v}"', "exp or cosine"))
for v in ("", "rnn"):
    refused("--model", v, says=("--model", f'"{v}"', "mlp or cnn"))
# The schedule's options against each other and the run's length.
refused("--warmup", "2", "--epochs", "2", says=("--warmup 2", "before the last epoch", "--epochs 2"))
refused("--model", "cnn", "--decay", "0.5", says=("--decay applies to --schedule exp only", "cosine"))
refused("--schedule", "cosine", "--decay", "0.5", says=("--decay",))
for spec in ("Bogus", "OpenCL:x", "OpenCL:-1", "CPU:", ":0"):
    refused("--device", spec, says=("--device", f'"{spec}"'))
print("bad numbers, names and missing values: usage errors before anything starts")

# A checkpoint directory or metrics file that cannot be made: found before
# the first epoch, with the system's reason.
under_file = os.path.join(a_file, "ckpt")
refused("--checkpoint-dir", under_file, says=("--checkpoint-dir", under_file, "Not a directory"))
refused("--checkpoint-dir", a_file, says=("--checkpoint-dir", a_file))
refused("--metrics", os.path.join(a_file, "m.jsonl"), says=("--metrics", "Not a directory"))
refused("--logdir", os.path.join(a_file, "runs"), says=("--logdir", os.path.join(a_file, "runs"), "Not a directory",
                                                        "choose a directory you can write to"))
refused("--logdir", a_file, says=("--logdir", a_file, "Not a directory"))
refused("--logdir", "", says=('bad value "" for --logdir: expected a directory',))
assert "--logdir needs a value (DIR)" in refused("--logdir")
with open(a_file) as f:
    assert f.read() == "not a directory\n"
print("an unwritable checkpoint directory, metrics file or log directory: refused before training")
