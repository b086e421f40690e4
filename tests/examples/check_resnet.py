"""The model zoo's ResNet-18 example, short: it learns.

Runs EXE --steps 30 --limit 1920 --test 1000 and checks what it prints: the
model as Flux prints it (its BasicBlocks a SkipConnection and a Parallel
with the downsampling shortcut, addrelu their connection) and its JSON
line: 30 steps, a finite
training loss below ln 10 = 2.30 (a model that learned nothing), a test
accuracy well above chance (0.1). Without Fashion-MNIST the example exits
with 77 and so does this (the test skips).

usage: check_resnet.py EXE
"""
import json
import math
import subprocess
import sys

exe = sys.argv[1]
p = subprocess.run([exe, "--steps", "30", "--limit", "1920", "--test", "1000", "--seed", "2"], capture_output=True,
                   text=True, timeout=280)
if p.returncode == 77:
    print(p.stdout)
    sys.exit(77)
assert p.returncode == 0, f"{exe} exited with {p.returncode}:\n{p.stdout}\n{p.stderr}"
for part in ("Conv((7, 7), 3 => 64, pad=3, stride=2, bias=false)", "MaxPool((3, 3), pad=1, stride=2)",
             "SkipConnection(", "Parallel(\n        addrelu,", "Conv((1, 1), 256 => 512, stride=2, bias=false)",
             "AdaptiveMeanPool((1, 1))", "Dense(512 => 10)", "11_181_642 parameters"):
    assert part in p.stderr, f"the model's printing lacks {part!r}:\n{p.stderr}"
lines = [l for l in p.stdout.splitlines() if l.startswith("{")]
assert len(lines) == 1, p.stdout
r = json.loads(lines[0])
assert r["model"] == "resnet18" and r["steps"] == 30 and r["images"] == 1920, r
assert math.isfinite(r["train_loss"]) and r["train_loss"] < 2.2, f"training loss {r['train_loss']} after 30 steps"
assert r["test_accuracy"] >= 0.3, f"test accuracy {r['test_accuracy']} after 30 steps (expected 0.3 or more)"
print(f"resnet18: training loss {r['train_loss']:.4f}, test accuracy {r['test_accuracy']:.4f} after 30 steps "
      f"({r['seconds']:.1f} s)")
