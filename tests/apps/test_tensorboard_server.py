"""The real TensorBoard server over flx-train's logs answers with what
flx-train printed.

Serves WORKDIR/runs, the directory test_flx_train_tensorboard.py left (run
"mlp": three runs of flx-train, the last one resumed after a simulated
crash), with `tensorboard --logdir` on 127.0.0.1 at a free port, as a user
would start it (its default loader), polls until it lists the run, and asks
its HTTP API:

- /data/plugin/scalars/scalars: each scalar is float32 of the number the
  metrics line printed, one point per epoch (the purge step hid the crashed
  run's epoch 3 here too);
- /data/plugin/histograms/histograms: every tensor of the model each epoch,
  buckets that count its elements, from its min to its max, none backwards;
- /data/plugin/text/text: each run's command line.

The server is stopped in every case. Exits 77 (a skip) without the
tensorboard or numpy packages.

usage: test_tensorboard_server.py WORKDIR
"""
import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

try:
    import numpy as np
    import tensorboard  # noqa: F401 (the server below is its module)
    from safetensors.numpy import load_file
except ImportError as e:
    print(f"SKIP: {e.name} is not installed (scripts/install-deps.sh installs tensorboard, numpy, safetensors)")
    sys.exit(77)

work = sys.argv[1]
runs_dir = os.path.join(work, "runs")
assert os.path.isdir(os.path.join(runs_dir, "mlp")), f"{runs_dir}/mlp: run test_flx_train_tensorboard.py first"

by_epoch = {}
with open(os.path.join(work, "metrics.jsonl")) as f:
    for line in f:
        m = json.loads(line)
        by_epoch[m["epoch"]] = m  # a repeated epoch: the last run's line
kept = [by_epoch[e] for e in sorted(by_epoch)]
model = load_file(os.path.join(work, "checkpoints", "model.safetensors"))


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


port = free_port()
base = f"http://127.0.0.1:{port}"
log = open(os.path.join(work, "tensorboard_server.log"), "w")
server = subprocess.Popen([sys.executable, "-m", "tensorboard.main", "--logdir", runs_dir, "--host", "127.0.0.1",
                           "--port", str(port), "--reload_interval", "1"],
                          stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)


def get(route, **params):
    url = base + route + ("?" + urllib.parse.urlencode(params) if params else "")
    with urllib.request.urlopen(url, timeout=10) as r:
        assert r.status == 200, (url, r.status)
        return json.loads(r.read())


def server_log():
    log.flush()
    with open(log.name) as f:
        return f.read()


try:
    # Up, and done loading: the run listed with all its scalar tags and
    # every epoch's points (bounded: 90 s at most, one request a second).
    deadline = time.time() + 90
    while True:
        assert server.poll() is None, f"tensorboard exited with status {server.returncode}\n{server_log()}"
        try:
            tags = get("/data/plugin/scalars/tags")
            if "mlp" in tags and len(tags["mlp"]) == 5 and \
                    len(get("/data/plugin/scalars/scalars", run="mlp", tag="epoch")) == len(kept):
                break
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        assert time.time() < deadline, f"tensorboard did not answer within 90 s\n{server_log()}"
        time.sleep(1)
    assert get("/data/runs") == ["mlp"]
    print(f"tensorboard {tensorboard.__version__} on {base} serves run mlp")

    for tag in ("loss", "test_accuracy", "learning_rate", "samples_per_second", "epoch"):
        got = [(step, value) for _, step, value in get("/data/plugin/scalars/scalars", run="mlp", tag=tag)]
        want = [(m["step"], float(np.float32(m[tag]))) for m in kept]
        assert got == want, f"{tag}: the server says {got}, the metrics lines {want}"
    print("scalars: the metrics lines' values (as float32), one point per epoch")

    assert sorted(get("/data/plugin/histograms/tags")["mlp"]) == sorted("model/" + k for k in model)
    for name, weights in model.items():
        series = get("/data/plugin/histograms/histograms", run="mlp", tag="model/" + name)
        assert [step for _, step, _ in series] == [m["step"] for m in kept], (name, series)
        for _, step, buckets in series:
            assert sum(count for _, _, count in buckets) == weights.size, (name, step)
            assert all(left <= right for left, right, _ in buckets), (name, step, buckets)
        last = series[-1][2]  # the model in the checkpoint; the server sends float32 edges
        x = weights.astype(np.float64)
        assert (last[0][0], last[-1][1]) == (float(np.float32(x.min())), float(np.float32(x.max()))), (name, last)
    print(f"histograms: {len(model)} tensors each epoch, every element counted, from min to max")

    texts = get("/data/plugin/text/text", run="mlp", tag="run")
    assert texts and all(t["text"].startswith("<pre><code>flx-train --epochs ") for t in texts), texts
    assert "resumed after epoch 2" in texts[-1]["text"], texts[-1]
    print(f"text: {len(texts)} runs described")
finally:
    server.terminate()
    try:
        server.wait(timeout=20)
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait()
    log.close()
