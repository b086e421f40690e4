"""A model zoo character-level example, short: it learns and samples.

Runs EXE --steps STEPS twice with one seed and checks the JSON line: the
model's name, a validation loss below MAX_LOSS (a model that learned
nothing scores about ln(vocabulary) = 4.5), finite and the same in both runs
(the same seed gives the same bits on the CPU), and a 200-byte sample after
the prompt "The ". Without Debian's license texts the example fails, naming
the directory.

usage: check_char_model.py EXE MODEL STEPS MAX_LOSS [ARGS...]   (ARGS: passed to EXE)
"""
import json
import math
import subprocess
import sys

exe, model, steps, max_loss = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4])
extra = sys.argv[5:]


def run():
    p = subprocess.run([exe, "--steps", steps, "--seed", "3", *extra], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, f"{exe} exited with {p.returncode}:\n{p.stderr}"
    lines = [l for l in p.stdout.splitlines() if l.startswith("{")]
    assert len(lines) == 1, p.stdout
    assert f"step {steps}: loss" in p.stderr, p.stderr
    return json.loads(lines[0])


first, second = run(), run()
assert first["model"] == model and first["steps"] == int(steps), first
loss = first["val_loss"]
assert math.isfinite(loss) and loss < max_loss, f"validation loss {loss} (expected below {max_loss} after {steps} steps)"
assert second["val_loss"] == loss, f"the same seed gave {loss} and then {second['val_loss']}"
assert first["sample"].startswith("The ") and len(first["sample"]) == 204, repr(first["sample"])
assert second["sample"] == first["sample"]
print(f"{model} {' '.join(extra)}: validation loss {loss:.4f} after {steps} steps in {first['seconds']:.1f} s; sample: "
      f"{first['sample'][:60]!r}...")
