#!/usr/bin/env python3
"""The model zoo's ResNet-18 against torchvision's in PyTorch (issue 28).

The training step: build/bench/bench_resnet (resnet18_step_b32: withgradient
of the cross-entropy of ResNet-18 with a 10-class head on (32, 32, 3, 32)
images, then Adam(1e-3)) and the same step of bench/resnet_torch.py's
resnet18(10) (torchvision's, written out), torch.set_num_threads(threads),
timed in --rounds interleaved rounds (each round: flx, then PyTorch, the
order alternating from round to round; one timed run of about --min-time
seconds each after a warm-up), medians; target flx / PyTorch <= 0.9. The
forward pass alone (training mode) is shown beside it.

--epoch: then trains one epoch each, examples/resnet and
bench/resnet_torch.py one after the other (the same data, model, batch 32,
Adam 1e-3, seed; --limit N images of the training set, the first N), and
prints both test accuracies and training times.

  python3 bench/compare_resnet.py --build build --rounds 5                  # --threads 2 by default
  python3 bench/compare_resnet.py --build build --rounds 5 --torch-passive  # on a machine shared with other jobs
  python3 bench/compare_resnet.py --build build --rounds 0 --epoch --limit 60000
  python3 bench/compare_resnet.py --build build --rounds 3 --device cuda    # on a GPU (scripts/cuda-check.sh)
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

from interleaved import find, run_json, run_rounds, threads_in_use_note, torch_time

HERE = Path(__file__).resolve().parent


def torch_benches(torch, small, device):
    from resnet_torch import resnet18
    F = torch.nn.functional
    batch = 2 if small else 32

    def make(step):
        torch.manual_seed(42)
        model = resnet18(10).train().to(device)
        opt = torch.optim.Adam(model.parameters(), lr=1e-3)
        g = torch.Generator().manual_seed(1234)
        pool = [(torch.rand(batch, 3, 32, 32, generator=g).to(device),
                 torch.randint(0, 10, (batch,), generator=g).to(device)) for _ in range(4)]
        k = [0]

        def body():
            x, y = pool[k[0]]
            k[0] = (k[0] + 1) % len(pool)
            if step:
                opt.zero_grad(set_to_none=True)
                F.cross_entropy(model(x), y).backward()
                opt.step()
            else:
                with torch.no_grad():  # as flx's: nothing recorded for a gradient
                    model(x)
        return body

    return {"resnet18_step_b32": make(True), "resnet18_fwd_b32": make(False)}


def json_line(cmd, env):
    p = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"compare_resnet: {' '.join(map(str, cmd))} failed:\n{p.stdout}\n{p.stderr}")
    return json.loads([line for line in p.stdout.splitlines() if line.startswith("{")][-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=None)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu",
                    help="cuda: both steps on the GPU (flx's CUDA:0 with cuDNN; PyTorch's cuda with cuDNN, its "
                         "defaults: cudnn.benchmark off)")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--min-time", type=float, default=2.0)
    ap.add_argument("--small", action="store_true", help="batch 2 (a check that everything runs)")
    ap.add_argument("--epoch", action="store_true", help="then one epoch of training each (see above)")
    ap.add_argument("--limit", type=int, default=60000, help="--epoch's training images")
    ap.add_argument("--json", default=None, help="write the medians, ratios and epoch results here")
    ap.add_argument("--flx-env", action="append", default=[], metavar="KEY=VALUE",
                    help="extra environment for flx only, e.g. FLX_ADAPTIVE_THREADS=0")
    ap.add_argument("--torch-passive", action="store_true",
                    help="PyTorch's OpenMP threads sleep when they wait (OMP_WAIT_POLICY=PASSIVE) instead of "
                         "spinning: on a machine whose cores other processes share, its spinning threads wait for "
                         "each other at every parallel region")
    args = ap.parse_args()

    env = dict(os.environ, FLX_NUM_THREADS=str(args.threads), OMP_NUM_THREADS=str(args.threads))
    flx_env = dict(env, **dict(kv.partition("=")[::2] for kv in args.flx_env))
    if args.torch_passive:  # before torch (and its OpenMP runtime) loads
        os.environ["OMP_WAIT_POLICY"] = env["OMP_WAIT_POLICY"] = "PASSIVE"
    import torch
    torch.set_num_threads(args.threads)
    result = {"device": args.device, "threads": args.threads, "torch": torch.__version__, "rounds": args.rounds,
              "torch_passive": args.torch_passive, "flx_env": args.flx_env}

    if args.rounds:
        bench = find(args.build, "bench_resnet", "compare_resnet", "bench_resnet")
        flx_cmd = [str(bench), "--repeats", "1", "--min-time", str(args.min_time),
                   "--device", "CUDA:0" if args.device == "cuda" else "CPU"] + (["--small"] if args.small else [])
        tb = torch_benches(torch, args.small, args.device)
        flx, pt, titers = {}, {}, {}

        def do_flx():
            for name, d in run_json(flx_cmd, flx_env).items():
                flx.setdefault(name, []).append(d["ns_per_iter"])
                flx.setdefault(name + ":threads_in_use", []).append(d["threads_in_use"])

        def do_torch():
            for name, body in tb.items():
                ns, titers[name] = torch_time(torch, args.device, body, args.min_time, titers.get(name))
                pt.setdefault(name, []).append(ns)

        run_rounds(args.rounds, [do_flx, do_torch])
        med = statistics.median
        where = "the GPU (cuDNN)" if args.device == "cuda" else f"the CPU, {args.threads} threads"
        print(f"flx {bench} vs PyTorch {torch.__version__} on {where}, Float32, medians of "
              f"{args.rounds} interleaved rounds{' (--small)' if args.small else ''}"
              f"{', PyTorch with OMP_WAIT_POLICY=PASSIVE' if args.torch_passive else ''}"
              f"{' flx env ' + ' '.join(args.flx_env) if args.flx_env else ''}")
        if any(v < args.threads for k, vs in flx.items() if k.endswith(":threads_in_use") for v in vs):
            print(threads_in_use_note(flx, args.threads))
        print(f"{'benchmark':<20}{'flx ms':>10}{'PyTorch ms':>12}{'flx/PyTorch':>13}{'target':>9}  met   "
              f"flx range / PyTorch range (ms)")
        for name, target in (("resnet18_step_b32", 0.9), ("resnet18_fwd_b32", None)):
            f, p = med(flx[name]), med(pt[name])
            ok = target is None or f / p <= target
            print(f"{name:<20}{f / 1e6:>10.1f}{p / 1e6:>12.1f}{f / p:>13.3f}"
                  f"{('<= ' + str(target)) if target else '':>9}  {('yes' if ok else 'NO') if target else '':<5} "
                  f"{min(flx[name]) / 1e6:.0f}..{max(flx[name]) / 1e6:.0f} / {min(pt[name]) / 1e6:.0f}.."
                  f"{max(pt[name]) / 1e6:.0f}")
            result[name] = {"flx_ns": f, "torch_ns": p, "ratio": f / p, "target": target,
                            "flx_runs_ns": flx[name], "torch_runs_ns": pt[name]}

    if args.epoch:
        exe = None
        for root in ([Path(args.build)] if args.build else []) + [Path("build"), HERE.parent / "build"]:
            if (root / "examples" / "resnet").is_file():
                exe = root / "examples" / "resnet"
                break
        if exe is None:
            sys.exit("compare_resnet: examples/resnet not found; build it first (ninja -C build resnet)")
        common = ["--epochs", "1", "--limit", str(args.limit)]
        lf = json_line([str(exe)] + common, flx_env)
        print(f"flx:     {json.dumps(lf)}", flush=True)
        lt = json_line([sys.executable, str(HERE / "resnet_torch.py"), "--threads", str(args.threads)] + common, env)
        print(f"PyTorch: {json.dumps(lt)}")
        print(f"one epoch of {args.limit} images: test accuracy flx {lf['test_accuracy']:.4f} in {lf['seconds']:.0f} s, "
              f"PyTorch {lt['test_accuracy']:.4f} in {lt['seconds']:.0f} s")
        result["epoch"] = {"limit": args.limit, "flx": lf, "torch": lt}
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
