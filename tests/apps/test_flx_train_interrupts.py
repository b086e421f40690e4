"""flx-train's checkpoints survive an interrupt at any moment.

- Killed (SIGKILL) at every call that changes a file in the checkpoint
  directory during an epoch (each write cut off half way, each fsync,
  rename and unlink), a run resumed with --resume ends exactly as the
  uninterrupted one: the same metrics and byte-identical checkpoint files,
  with no temporary file left behind.
- A refused --resume (no checkpoint, a damaged one, malformed metadata)
  changes nothing on disk, and says which file, which key, which value and
  what was expected.

usage: test_flx_train_interrupts.py FLX_TRAIN_EXE CRASH_SHIM WORKDIR
(CRASH_SHIM: tests/apps/crash_shim.c built as a shared library)
"""
import json
import os
import shutil
import signal
import subprocess
import sys

exe, shim, work = sys.argv[1], sys.argv[2], os.path.realpath(sys.argv[3])
shutil.rmtree(work, ignore_errors=True)
os.makedirs(work)
SMALL = ["--limit", "256", "--batchsize", "32"]  # 8 steps an epoch: quick


def run(*args, expect=0, env=None):
    p = subprocess.run([exe, *SMALL, *args], capture_output=True, text=True, env=env, timeout=300)
    assert p.returncode == expect, f"{args}: exit {p.returncode}, expected {expect}\n{p.stderr}"
    return p


def epochs(stdout):
    return [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]


def files(d):
    """Every file in d with its bytes."""
    out = {}
    for name in sorted(os.listdir(d)):
        with open(os.path.join(d, name), "rb") as f:
            out[name] = f.read()
    return out


# The uninterrupted run, and a run stopped after epoch 2 to resume from.
ref = os.path.join(work, "ref")
reference = epochs(run("--epochs", "3", "--checkpoint-dir", ref).stdout)
assert [r["epoch"] for r in reference] == [1, 2, 3], reference
base = os.path.join(work, "base")
run("--epochs", "2", "--checkpoint-dir", base)
want = files(ref)
assert not any(".tmp" in name for name in want), list(want)

# Kill epoch 3 at its 1st, 2nd, ... file-changing call, until a run gets
# through: then every moment has been tried.
for n in range(1, 100):
    d = os.path.join(work, f"kill{n}")
    shutil.copytree(base, d)
    with open(os.path.join(d, ".checkpoint.safetensors.0123456789abcdef.tmp"), "wb") as f:
        f.write(b"left by a run killed earlier")  # removed on the way: a moment to kill at too
    env = dict(os.environ, LD_PRELOAD=shim, FLX_CRASH_DIR=d, FLX_CRASH_AT=str(n))
    p = subprocess.run([exe, *SMALL, "--epochs", "3", "--resume", "--checkpoint-dir", d], capture_output=True,
                       text=True, env=env, timeout=300)
    if p.returncode == 0:
        break
    assert p.returncode == -signal.SIGKILL, f"kill at {n}: exit {p.returncode}\n{p.stderr}"
    # Whatever it left, --resume finishes the run exactly.
    resumed = run("--epochs", "3", "--resume", "--checkpoint-dir", d)
    done = epochs(resumed.stdout)
    if done:  # epoch 3 was not saved yet: trained again, the same
        assert len(done) == 1 and done[0]["epoch"] == 3, done
        for key in ("loss", "test_accuracy", "step"):
            assert done[0][key] == reference[2][key], (n, key, done[0], reference[2])
    else:
        assert "already at epoch 3" in resumed.stderr, resumed.stderr
    got = files(d)
    assert sorted(got) == sorted(want), f"kill at {n}: {sorted(got)}, expected {sorted(want)}"
    for name in want:
        assert got[name] == want[name], f"kill at {n}: {name} differs from the uninterrupted run's"
    shutil.rmtree(d)
else:
    raise AssertionError("the run was killed at 99 points; the shim counts something it should not")
assert n > 4, f"only {n - 1} file-changing calls in an epoch: the shim saw too little"
print(f"killed at each of {n - 1} moments of writing a checkpoint: resumed exactly every time")


# A refused --resume changes nothing.
def refused_resume(d, says):
    before = files(d) if os.path.isdir(d) else None
    err = run("--epochs", "3", "--resume", "--checkpoint-dir", d, expect=1).stderr
    for s in says:
        assert s in err, f"{s!r} not in\n{err}"
    assert "stoi" not in err and "stoll" not in err, err
    after = files(d) if os.path.isdir(d) else None
    assert after == before, f"a refused --resume changed {d}"
    return err


missing = os.path.join(work, "missing")
refused_resume(missing, ["no checkpoint", missing])
assert not os.path.exists(missing), "a refused --resume created the checkpoint directory"

checkpoint = [name for name in os.listdir(base) if name != "model.safetensors"]
assert checkpoint == ["checkpoint.safetensors"], os.listdir(base)


def doctored(name, change):
    """A copy of base whose checkpoint went through change(header dict), plus
    a stale temporary file (which a refused resume must leave too)."""
    d = os.path.join(work, name)
    shutil.copytree(base, d)
    path = os.path.join(d, "checkpoint.safetensors")
    with open(path, "rb") as f:
        data = f.read()
    n = int.from_bytes(data[:8], "little")
    header = json.loads(data[8:8 + n])
    change(header)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(len(text).to_bytes(8, "little") + text + data[8 + n:])
    with open(os.path.join(os.path.dirname(path), "." + os.path.basename(path) + ".fedcba9876543210.tmp"), "wb") as f:
        f.write(data[:100])
    return d, path


def set_meta(key, value):
    def change(header):
        if value is None:
            del header["__metadata__"][key]
        else:
            header["__metadata__"][key] = value
    return change


# Malformed metadata: the file, the key, the value and what was expected.
for i, (key, value) in enumerate([("epoch", "x"), ("epoch", "3x"), ("epoch", "-1"), ("epoch", "0"), ("epoch", ""),
                   ("epoch", "99999999999"), ("epoch", " 2"), ("step", "abc"), ("step", "-5"), ("step", "1.5"),
                                  ("step", "99999999999999999999")]):
    d, path = doctored(f"meta{i}", set_meta(key, value))
    refused_resume(d, [path, f'"{key}"', f'"{value}"', "expected"])
for key in ("epoch", "step"):
    d, path = doctored(f"meta_no_{key}", set_meta(key, None))
    refused_resume(d, [path, f'"{key}"', "expected"])
print("malformed checkpoint metadata: refused, naming the file, key and value; nothing changed")

# A damaged checkpoint (cut short): refused, left as it was.
d = os.path.join(work, "damaged")
shutil.copytree(base, d)
path = os.path.join(d, "checkpoint.safetensors")
with open(path, "r+b") as f:
    f.truncate(os.path.getsize(path) // 2)
refused_resume(d, [path])
print("a damaged checkpoint: refused and left as it was")
