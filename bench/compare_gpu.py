#!/usr/bin/env python3
"""flx on a GPU against PyTorch eager on the same GPU, in the same run (issue 10, item 7).

Runs build/bench/bench_gpu --serve and the same benchmarks in PyTorch,
interleaving one flx round and one PyTorch round (alternating which goes
first) for --rounds rounds, and compares the medians over the rounds:

  (a) MLP 784-256-256-10 training step (Adam) at batch 128 and 4096:
      flx <= 0.7x PyTorch at 128, <= 1.0x at 4096; host time per op dispatch <= 2 us
  (b) GEMM-bound MLP (3 x Dense(4096, 4096), batch 8192) step: time of its
      8 GEMMs alone (flx matmuls) / step time >= 0.95
  (c) add on 2^28 Float32: effective bandwidth (12 N bytes / time) >= 0.85 x
      the device-to-device copy bandwidth (PyTorch copy_, a cudaMemcpy: 8 N bytes / time)
  (d) DataLoader(...) | device host->device rate >= 0.8 x PyTorch's pinned
      .to(device, non_blocking=True); an epoch with the loader bringing the
      data from the host within 5 % of one with the data on the device
  (e) flx-train on Fashion-MNIST on the GPU: median epoch time against
      bench/fashion_mnist_torch.py --device cuda (reported, no target), and
      final test accuracy within 0.3 points of flx-train on the CPU
  (f) low precision: an 8192^3 matmul in Float32 (FP32), BFloat16 and
      Float16 (tensor cores, float accumulation), and a 3x3 convolution
      (128 => 128 channels, 32 images of 56 x 56) forward and with its weight
      gradient, in each dtype (cuDNN): flx/PyTorch <= 1.0 for the halves

  python3 bench/compare_gpu.py --build build [--device CUDA:0] [--rounds 5] [--only a,b,c,d,e,f]
                               [--json FILE] [--small] [--data DIR] [--train-epochs 3]

Missed targets are reported, not failures; the exit status is 1 when a
benchmark could not run or PyTorch is missing (2 for bad arguments). --small (tiny sizes) with
--device CPU or OpenCL:0 is a smoke test without a GPU.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent

# flx benchmark names of each group, in bench_gpu.cpp
GROUPS = {
    "a": ["dispatch_add_f32_100", "mlp_step_b128", "mlp_step_b4096", "mlp_step_b128_onehot"],
    "b": ["gemm_mlp_step", "gemm_mlp_gemms"],
    "c": ["add_f32_2e28", "neg_f32_2e28"],
    "d": ["loader_h2d", "epoch_data_on_device", "epoch_data_from_host"],
    "f": ["gemm_f32_8192", "gemm_bf16_8192", "gemm_f16_8192", "conv3x3_f32_fwd", "conv3x3_bf16_fwd",
          "conv3x3_f16_fwd", "conv3x3_f32_grad", "conv3x3_bf16_grad", "conv3x3_f16_grad"],
}
LOW_PRECISION = GROUPS["f"]  # the same names on both sides


def median(xs):
    return statistics.median(xs) if xs else None


# ---- flx: bench_gpu --serve -------------------------------------------------------

class Flx:
    def __init__(self, exe, device, small, min_time):
        cmd = [str(exe), "--serve", "--device", device, "--min-time", str(min_time)] + (["--small"] if small else [])
        env = dict(os.environ, FLX_SILENCE_WARN_NO_GPU="1")
        self.p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
        first = self.p.stdout.readline()
        if not first.startswith("{"):
            self.p.wait()
            raise RuntimeError(f"bench_gpu --device {device} did not start (exit status {self.p.returncode})")
        self.device = json.loads(first)["device"]

    def request(self, line):
        try:
            self.p.stdin.write(line + "\n")
            self.p.stdin.flush()
        except OSError:  # it has exited
            raise RuntimeError(f"bench_gpu died (exit status {self.p.wait()}) before '{line}'")
        out = self.p.stdout.readline()
        if not out:
            raise RuntimeError(f"bench_gpu died (exit status {self.p.wait()}) during '{line}'")
        return json.loads(out)

    def close(self):
        try:
            self.p.stdin.write("quit\n")
            self.p.stdin.close()
        except OSError:
            pass
        self.p.wait(timeout=60)


# ---- PyTorch: the same benchmarks ---------------------------------------------------

class Torch:
    """One round of a PyTorch benchmark at a time, states kept between rounds."""

    def __init__(self, device, small, min_time):
        import torch
        self.torch = torch
        self.dev = torch.device(device)
        self.small = small
        self.min_time = min_time
        self.cuda = self.dev.type == "cuda"
        torch.backends.cuda.matmul.allow_tf32 = False  # FP32 GEMMs in FP32, as flx's default
        torch.backends.cudnn.allow_tf32 = False
        self.live = {}
        self.name = torch.cuda.get_device_name(self.dev) if self.cuda else "cpu"

    def sync(self):
        if self.cuda:
            self.torch.cuda.synchronize(self.dev)

    def run(self, step, iters, host_only=False):
        """ns per iteration of `iters` iterations (host_only: queueing time, chunks of 256)."""
        if not host_only:
            self.sync()
            t0 = time.perf_counter()
            for _ in range(iters):
                step()
            self.sync()
            return (time.perf_counter() - t0) * 1e9 / iters
        total, done = 0.0, 0
        while done < iters:
            n = min(256, iters - done)
            self.sync()
            t0 = time.perf_counter()
            for _ in range(n):
                step()
            total += time.perf_counter() - t0
            done += n
        self.sync()
        return total * 1e9 / iters

    def round(self, name):
        if name not in self.live:
            step, host_only, extra = getattr(self, "make_" + name)()
            per, t0, k = 1e300, time.perf_counter(), 0
            while k < 3 or (time.perf_counter() - t0 < 0.5 * self.min_time and k < 1000):
                per = min(per, self.run(step, 256 if host_only else 1, host_only))
                k += 1
            self.live[name] = (step, host_only, extra, max(1, int(self.min_time * 1e9 / per)))
        step, host_only, extra, iters = self.live[name]
        return dict(extra, name=name, ns_per_iter=self.run(step, iters, host_only), iters=iters)

    def drop(self, name):
        self.live.pop(name, None)
        if self.cuda:
            self.torch.cuda.empty_cache()

    # the benchmarks: each returns (step, host_only, extra fields)
    def make_dispatch_add_f32_100(self):
        t = self.torch
        a, b = t.rand(100, device=self.dev), t.rand(100, device=self.dev)
        return (lambda: a + b), True, {}

    def _mlp(self, batch):
        t, nn = self.torch, self.torch.nn
        t.manual_seed(42)
        model = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(),
                              nn.Linear(256, 10)).to(self.dev)
        opt = t.optim.Adam(model.parameters(), lr=1e-3)
        pool = [(t.rand(batch, 784, device=self.dev), t.randint(0, 10, (batch,), device=self.dev)) for _ in range(8)]
        k = [0]

        def step():
            x, y = pool[k[0]]
            k[0] = (k[0] + 1) % len(pool)
            opt.zero_grad(set_to_none=True)
            loss = t.nn.functional.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
        return step, False, {"batch": batch}

    def make_mlp_step_b128(self):
        return self._mlp(16 if self.small else 128)

    def make_mlp_step_b4096(self):
        return self._mlp(256 if self.small else 4096)

    def _gemm_sizes(self):
        return (128, 256) if self.small else (4096, 8192)

    def make_gemm_mlp_step(self):
        t, nn = self.torch, self.torch.nn
        w, b = self._gemm_sizes()
        t.manual_seed(7)
        model = nn.Sequential(nn.Linear(w, w), nn.ReLU(), nn.Linear(w, w), nn.ReLU(), nn.Linear(w, w)).to(self.dev)
        opt = t.optim.Adam(model.parameters(), lr=1e-4)
        x, y = t.rand(b, w, device=self.dev), t.rand(b, w, device=self.dev)

        def step():
            opt.zero_grad(set_to_none=True)
            t.nn.functional.mse_loss(model(x), y).backward()
            opt.step()
        return step, False, {"flops": 16.0 * w * w * b}

    def make_gemm_mlp_gemms(self):
        t = self.torch
        w, b = self._gemm_sizes()
        W, X, G, Xt = (t.rand(w, w, device=self.dev), t.rand(w, b, device=self.dev), t.rand(w, b, device=self.dev),
                       t.rand(b, w, device=self.dev))

        def step():
            for _ in range(3):
                t.mm(W, X)
            for _ in range(3):
                t.mm(G, Xt)
            for _ in range(2):
                t.mm(W, G)
        return step, False, {"flops": 16.0 * w * w * b}

    def _n(self):
        return 1 << 16 if self.small else 1 << 28

    def make_add_f32_2e28(self):
        t, n = self.torch, self._n()
        a, b = t.ones(n, device=self.dev), t.full((n,), 2.0, device=self.dev)
        return (lambda: a + b), False, {"bytes": 12.0 * n}

    def make_copy_f32_2e28(self):
        t, n = self.torch, self._n()
        a, c = t.ones(n, device=self.dev), t.empty(n, device=self.dev)
        return (lambda: c.copy_(a)), False, {"bytes": 8.0 * n}

    def make_pinned_h2d(self):
        t = self.torch
        n, bs = (4096, 512) if self.small else (65536, 8192)
        host = [t.rand(bs, 784).pin_memory() if self.cuda else t.rand(bs, 784) for _ in range(n // bs)]

        def step():
            for h in host:
                h.to(self.dev, non_blocking=True)
        return step, False, {"bytes": 4.0 * 784 * n}


    # (f) low precision, named as in bench_gpu.cpp
    def _dtype(self, name):
        t = self.torch
        return {"f32": t.float32, "bf16": t.bfloat16, "f16": t.float16}[name.split("_")[1]]

    def _gemm(self, name):
        t, n = self.torch, 256 if self.small else 8192
        a = t.rand(n, n, device=self.dev).to(self._dtype(name))
        b = t.rand(n, n, device=self.dev).to(self._dtype(name))
        return (lambda: t.mm(a, b)), False, {"flops": 2.0 * n ** 3}

    def _conv(self, name):
        t = self.torch
        hw, c, batch = (8, 8, 2) if self.small else (56, 128, 32)
        t.manual_seed(5)
        conv = t.nn.Conv2d(c, c, 3, padding=1).to(self.dev, self._dtype(name))
        x = t.rand(batch, c, hw, hw, device=self.dev).to(self._dtype(name))
        if name.endswith("_fwd"):
            return (lambda: conv(x)), False, {}

        def step():
            conv.zero_grad(set_to_none=True)
            conv(x).sum().backward()
        return step, False, {}

    def __getattr__(self, attr):  # make_<low-precision name>
        name = attr[len("make_"):] if attr.startswith("make_") else None
        if name in LOW_PRECISION:
            return lambda: self._gemm(name) if name.startswith("gemm") else self._conv(name)
        raise AttributeError(attr)


# ---- (e) flx-train and fashion_mnist_torch.py -----------------------------------------

def find_dataset(explicit):
    files = ["train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"]
    cands = [explicit] if explicit else []
    if os.environ.get("FLX_DATA"):
        cands += [os.path.join(os.environ["FLX_DATA"], "fashion-mnist"), os.environ["FLX_DATA"]]
    cands += ["/usr/share/datasets/fashion-mnist", str(HERE.parent / "data" / "fashion-mnist"),
              os.path.expanduser("~/data/fashion-mnist"), os.path.expanduser("~/data/FashionMNIST/raw"),
              "/data/fashion-mnist", "/opt/gpu-deps/usr/share/datasets/fashion-mnist"]
    for d in cands:
        if d and all(os.path.exists(os.path.join(d, f + ".gz")) or os.path.exists(os.path.join(d, f)) for f in files):
            return d
    return None


def json_lines(text):
    out = []
    for line in text.splitlines():
        if line.startswith("{"):
            try:
                out.append(json.loads(line))
            except ValueError:
                pass
    return out


def run_train(flx_train, device, torch_device, epochs, data, timeout):
    """flx-train on the GPU and on the CPU, fashion_mnist_torch.py on the GPU."""
    res = {"epochs": epochs, "data": data}
    env = dict(os.environ, FLX_DATA=data, FLX_SILENCE_WARN_NO_GPU="1")
    with tempfile.TemporaryDirectory() as tmp:
        for key, dev in (("flx_gpu", device), ("flx_cpu", "CPU")):
            cmd = [str(flx_train), "--epochs", str(epochs), "--device", dev, "--checkpoint-dir", f"{tmp}/{key}"]
            p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
            if p.returncode != 0:
                raise RuntimeError(f"flx-train --device {dev} failed: {p.stderr.strip()[-400:]}")
            res[key] = [{"seconds": r["train_seconds"], "accuracy": r["test_accuracy"]} for r in json_lines(p.stdout)]
    cmd = [sys.executable, str(HERE / "fashion_mnist_torch.py"), "--epochs", str(epochs), "--device", torch_device,
           "--data", data]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if p.returncode != 0:
        raise RuntimeError(f"fashion_mnist_torch.py failed: {p.stderr.strip()[-400:]}")
    res["torch_gpu"] = [{"seconds": r["seconds"], "accuracy": r["test_accuracy"]} for r in json_lines(p.stdout)]
    return res


# ---- driver ----------------------------------------------------------------------

def target(results, key, what, value, goal, ok, unit=""):
    results.append({"id": key, "what": what, "value": value, "target": goal, "unit": unit,
                    "met": None if value is None or ok is None else bool(ok)})


def fmt(v, unit=""):
    if v is None:
        return "n/a"
    return f"{v:.3f}{unit}" if abs(v) < 1000 else f"{v:.0f}{unit}"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default="build", help="CMake build directory (default ./build)")
    ap.add_argument("--binary", help="bench_gpu (default BUILD/bench/bench_gpu)")
    ap.add_argument("--flx-train", help="flx-train (default BUILD/apps/flx-train)")
    ap.add_argument("--device", default="CUDA:0", help="flx device (CUDA:0, OpenCL:0, CPU)")
    ap.add_argument("--torch-device", help="PyTorch device (default cuda:N for CUDA:N, else cpu)")
    ap.add_argument("--rounds", type=int, default=5, help="interleaved flx/PyTorch rounds (medians over them)")
    ap.add_argument("--min-time", type=float, default=0.1, help="seconds per round of each benchmark")
    ap.add_argument("--only", default="a,b,c,d,e,f", help="groups to run (comma-separated subset of a,b,c,d,e,f)")
    ap.add_argument("--small", action="store_true", help="tiny sizes: a smoke test without a GPU")
    ap.add_argument("--data", help="Fashion-MNIST directory for (e) (default: searched)")
    ap.add_argument("--train-epochs", type=int, default=3, help="epochs of (e), on the GPU and on the CPU")
    ap.add_argument("--train-timeout", type=int, default=240, help="seconds per training run of (e)")
    ap.add_argument("--json", help="write the figures and targets here")
    a = ap.parse_args()
    groups = [g.strip() for g in a.only.split(",") if g.strip()]
    if not groups or any(g not in "abcdef" for g in groups):
        ap.error("--only takes a comma-separated subset of a,b,c,d,e,f")
    build = Path(a.build)
    exe = Path(a.binary) if a.binary else build / "bench" / "bench_gpu"
    flx_train = Path(a.flx_train) if a.flx_train else build / "apps" / "flx-train"
    backend, _, ordinal = a.device.partition(":")
    torch_device = a.torch_device or (f"cuda:{ordinal or 0}" if backend.upper() == "CUDA" else "cpu")

    out = {"groups": groups, "device": a.device, "torch_device": torch_device, "rounds": a.rounds, "min_time": a.min_time,
           "small": a.small, "flx": {}, "torch": {}, "targets": [], "errors": []}
    errors = out["errors"]

    torch_side = None
    try:
        torch_side = Torch(torch_device, a.small, a.min_time)
        out["torch_version"] = torch_side.torch.__version__
        out["torch_gpu"] = torch_side.name
        if torch_side.cuda and not torch_side.torch.cuda.is_available():
            raise RuntimeError("torch.cuda.is_available() is False")
    except Exception as e:  # no PyTorch: flx figures alone, ratios n/a
        errors.append(f"PyTorch unavailable on {torch_device}: {e}")
        torch_side = None

    bench_groups = [g for g in groups if g in GROUPS]
    flx = None
    if bench_groups:
        if not exe.is_file():
            sys.exit(f"compare_gpu: {exe} not found; build the bench_gpu target")
        try:
            flx = Flx(exe, a.device, a.small, a.min_time)
            out["flx_device"] = flx.device
        except RuntimeError as e:
            errors.append(str(e))
    # PyTorch counterparts of the flx names (None: flx only)
    torch_of = {"dispatch_add_f32_100": "dispatch_add_f32_100", "mlp_step_b128": "mlp_step_b128",
                "mlp_step_b4096": "mlp_step_b4096", "gemm_mlp_step": "gemm_mlp_step",
                "gemm_mlp_gemms": "gemm_mlp_gemms", "add_f32_2e28": "add_f32_2e28", "neg_f32_2e28": "copy_f32_2e28",
                "loader_h2d": "pinned_h2d", **{n: n for n in LOW_PRECISION}}

    def fm(name):  # flx median ns
        v = out["flx"].get(name)
        return median(v["rounds"]) if v else None

    def tm(name):  # PyTorch median ns
        v = out["torch"].get(name)
        return median(v["rounds"]) if v else None

    def ratio(x, y):
        return x / y if x is not None and y else None

    def info(name, key, side="flx"):
        v = out[side].get(name)
        return v["info"].get(key) if v else None

    def gbps(nbytes, ns):
        return nbytes / ns if nbytes and ns else None  # bytes/ns = GB/s

    def evaluate(done):
        """Targets of the benchmark groups in done, from the rounds so far."""
        T = []
        if "a" in done:
            r128 = ratio(fm("mlp_step_b128"), tm("mlp_step_b128"))
            r4096 = ratio(fm("mlp_step_b4096"), tm("mlp_step_b4096"))
            target(T, "a.b128", "MLP step b128 flx/PyTorch", r128, "<= 0.7", r128 is not None and r128 <= 0.7)
            target(T, "a.b4096", "MLP step b4096 flx/PyTorch", r4096, "<= 1.0", r4096 is not None and r4096 <= 1.0)
            d = fm("dispatch_add_f32_100")
            target(T, "a.dispatch", "host time per op dispatch (us)", d / 1e3 if d else None, "<= 2",
                   d is not None and d <= 2000, " us")
            td = tm("dispatch_add_f32_100")
            target(T, "a.dispatch_torch", "PyTorch host time per op (us), reference", td / 1e3 if td else None, "-", None,
                   " us")
            r1h = ratio(fm("mlp_step_b128_onehot"), tm("mlp_step_b128"))
            target(T, "a.b128_onehot", "MLP step b128 with onehotbatch per step flx/PyTorch, reference", r1h, "-", None)
        if "b" in done:
            rb = ratio(fm("gemm_mlp_gemms"), fm("gemm_mlp_step"))
            target(T, "b.gemm_share", "GEMM-bound MLP: GEMMs alone / step time (flx)", rb, ">= 0.95",
                   rb is not None and rb >= 0.95)
            rbt = ratio(tm("gemm_mlp_gemms"), tm("gemm_mlp_step"))
            target(T, "b.gemm_share_torch", "same for PyTorch, reference", rbt, "-", None)
            rbs = ratio(fm("gemm_mlp_step"), tm("gemm_mlp_step"))
            target(T, "b.step_vs_torch", "GEMM-bound MLP step flx/PyTorch, reference", rbs, "-", None)
            f = fm("gemm_mlp_gemms")
            target(T, "b.gemm_tflops", "flx GEMMs TFLOP/s, reference",
                   info("gemm_mlp_gemms", "flops") / f / 1e3 if f else None, "-", None)

        if "c" in done:
            n_bytes = info("add_f32_2e28", "bytes")
            add_bw = gbps(n_bytes, fm("add_f32_2e28"))
            copy_bw = gbps(info("copy_f32_2e28", "bytes", "torch"), tm("copy_f32_2e28"))
            rc = ratio(add_bw, copy_bw)
            target(T, "c.add_vs_copy", "add 2^28 bandwidth / D2D copy bandwidth", rc, ">= 0.85",
                   rc is not None and rc >= 0.85)
            target(T, "c.add_gbps", "flx add GB/s", add_bw, "-", None, " GB/s")
            target(T, "c.copy_gbps", "D2D copy GB/s (PyTorch copy_)", copy_bw, "-", None, " GB/s")
            target(T, "c.torch_add_gbps", "PyTorch add GB/s, reference", gbps(n_bytes, tm("add_f32_2e28")), "-", None,
                   " GB/s")
            target(T, "c.neg_gbps", "flx neg (copy-like map) GB/s, reference",
                   gbps(info("neg_f32_2e28", "bytes"), fm("neg_f32_2e28")), "-", None, " GB/s")
        if "d" in done:
            lr = gbps(info("loader_h2d", "bytes"), fm("loader_h2d"))
            pr = gbps(info("pinned_h2d", "bytes", "torch"), tm("pinned_h2d"))
            rd = ratio(lr, pr)
            target(T, "d.loader_vs_pinned", "flx DataLoader to device: H2D rate / pinned copy rate", rd, ">= 0.8",
                   rd is not None and rd >= 0.8)
            target(T, "d.loader_gbps", "flx DataLoader H2D GB/s", lr, "-", None, " GB/s")
            target(T, "d.pinned_gbps", "PyTorch pinned .to(non_blocking) GB/s", pr, "-", None, " GB/s")
            ro = ratio(fm("epoch_data_from_host"), fm("epoch_data_on_device"))
            target(T, "d.overlap", "epoch with data from host / data on device", ro, "<= 1.05",
                   ro is not None and ro <= 1.05)
        if "f" in done:
            for dt in ("bf16", "f16"):
                r = ratio(fm(f"gemm_{dt}_8192"), tm(f"gemm_{dt}_8192"))
                target(T, f"f.gemm_{dt}", f"{dt} 8192^3 matmul flx/PyTorch", r, "<= 1.0", r is not None and r <= 1.0)
                f = fm(f"gemm_{dt}_8192")
                target(T, f"f.gemm_{dt}_tflops", f"flx {dt} matmul TFLOP/s",
                       info(f"gemm_{dt}_8192", "flops") / f / 1e3 if f else None, "-", None)
                for kind in ("fwd", "grad"):
                    r = ratio(fm(f"conv3x3_{dt}_{kind}"), tm(f"conv3x3_{dt}_{kind}"))
                    target(T, f"f.conv_{dt}_{kind}", f"{dt} 3x3 conv {kind} flx/PyTorch", r, "<= 1.0",
                           r is not None and r <= 1.0)
            r = ratio(fm("gemm_f32_8192"), fm("gemm_bf16_8192"))
            target(T, "f.bf16_speedup", "flx matmul: Float32 time / BFloat16 time, reference", r, "-", None)
            r = ratio(fm("conv3x3_f32_grad"), fm("conv3x3_bf16_grad"))
            target(T, "f.conv_bf16_speedup", "flx conv with gradient: Float32 time / BFloat16 time, reference", r, "-",
                   None)
        return T

    def write_json():
        for side in ("flx", "torch"):
            for v in out[side].values():
                v["median_ns"] = median(v["rounds"])
        if a.json:
            Path(a.json).write_text(json.dumps(out, indent=1))

    done = []
    for g in bench_groups if flx else []:
        names = GROUPS[g]
        t0 = time.perf_counter()
        for r in range(a.rounds):
            for name in names:
                sides = ["flx", "torch"] if r % 2 == 0 else ["torch", "flx"]
                for side in sides:
                    tname = torch_of.get(name)
                    try:
                        if side == "flx":
                            line = flx.request(name)
                            if "error" in line:
                                raise RuntimeError(line["error"])
                            out["flx"].setdefault(name, {"rounds": [], "info": line})["rounds"].append(
                                line["ns_per_iter"])
                        elif torch_side and tname:
                            line = torch_side.round(tname)
                            out["torch"].setdefault(tname, {"rounds": [], "info": line})["rounds"].append(
                                line["ns_per_iter"])
                    except Exception as e:
                        msg = f"{side} {name}: {e}"
                        if msg not in errors:
                            errors.append(msg)
        for name in names:  # free this group's memory before the next
            try:
                flx.request("drop " + name)
            except RuntimeError as e:
                errors.append(str(e))
            if torch_side and torch_of.get(name):
                torch_side.drop(torch_of[name])
        print(f"group ({g}): {time.perf_counter() - t0:.1f} s", file=sys.stderr)
        done.append(g)
        out["targets"] = evaluate(done)  # written as it goes: a run cut short keeps what it measured
        write_json()
    if flx:
        flx.close()

    out["targets"] = evaluate(bench_groups)  # a group that did not run shows its targets as not run
    T = out["targets"]
    if "e" in groups:
        data = find_dataset(a.data)
        if data is None:
            target(T, "e.epoch_vs_torch", "flx-train GPU epoch / PyTorch GPU epoch (skipped: Fashion-MNIST not "
                   "found; pass --data DIR)", None, "-", None)
            out["train_skipped"] = "Fashion-MNIST not found (searched --data, $FLX_DATA, /usr/share/datasets)"
        elif not flx_train.is_file():
            errors.append(f"(e): {flx_train} not found")
        else:
            try:
                res = run_train(flx_train, a.device, torch_device, a.train_epochs, data, a.train_timeout)
                out["train"] = res
                fg = median([r["seconds"] for r in res["flx_gpu"]])
                tg = median([r["seconds"] for r in res["torch_gpu"]])
                re = ratio(fg, tg)
                target(T, "e.epoch_vs_torch", f"flx-train GPU epoch / PyTorch GPU epoch (median of "
                       f"{a.train_epochs})", re, "- (reported)", None)
                target(T, "e.flx_gpu_epoch_s", "flx-train GPU median epoch (s)", fg, "-", None, " s")
                target(T, "e.torch_gpu_epoch_s", "PyTorch GPU median epoch (s)", tg, "-", None, " s")
                ag, ac = res["flx_gpu"][-1]["accuracy"], res["flx_cpu"][-1]["accuracy"]
                diff = abs(ag - ac) * 100
                target(T, "e.acc_gpu_vs_cpu", f"|accuracy GPU - CPU| after {a.train_epochs} epochs (points; GPU "
                       f"{ag:.4f}, CPU {ac:.4f}, PyTorch GPU {res['torch_gpu'][-1]['accuracy']:.4f})", diff, "<= 0.3",
                       diff <= 0.3)
            except (RuntimeError, subprocess.TimeoutExpired, KeyError, IndexError) as e:
                errors.append(f"(e): {e}")

    write_json()
    print(f"flx {out.get('flx_device', a.device)} vs PyTorch {out.get('torch_version', '-')} on {torch_device} "
          f"({out.get('torch_gpu', '-')}); medians of {a.rounds} interleaved rounds")
    print(f"{'benchmark':24} {'flx ms':>10} {'PyTorch ms':>11}")
    for name in [n for g in bench_groups for n in GROUPS[g]]:
        f, t = fm(name), tm(torch_of.get(name, ""))
        print(f"{name:24} {fmt(f and f / 1e6):>10} {fmt(t and t / 1e6):>11}")
    print(f"{'target':64} {'value':>12} {'goal':>8}  result")
    for t in T:
        res = ("NOT RUN" if t["value"] is None and t["target"] != "-" else "-") if t["met"] is None else \
            ("MET" if t["met"] else "MISSED")
        print(f"{t['what'][:64]:64} {fmt(t['value'], t['unit']):>12} {t['target']:>8}  {res}")
    for e in errors:
        print(f"error: {e}")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
