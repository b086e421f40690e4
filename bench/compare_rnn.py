#!/usr/bin/env python3
"""Compare flx's recurrent layers with PyTorch's (issue 20).

Runs the already-built build/bench/bench_rnn, times the same work in PyTorch
in this process, and prints the medians over --rounds interleaved rounds
(each round: flx, then PyTorch, the order alternating from round to round;
one timed run of about --min-time seconds each, after a warm-up) and the
ratio against the issue's target:

  lstm_step   one training step of an LSTM layer, input 128, hidden 256,
              64 time steps, batch 32: the loss mean(square(lstm(x))), its
              gradients, one Adam(1e-3) update. PyTorch: nn.LSTM(128, 256) on
              x [64, 32, 128] (its default layout, time first),
              torch.set_num_threads(threads). Target flx / PyTorch <= 1.0.
  lstm_fwd    the LSTM's forward pass alone, outside autograd (no target)
  gru_step    the same step for nn.GRU (flx: GRU(128 => 256;
              recurrent_bias=true), the same arithmetic) (no target)
  rnn_step    the same step for nn.RNN(128, 256) (tanh) (no target)

Both use the same number of threads (flx: FLX_NUM_THREADS, PyTorch:
torch.set_num_threads). Missed targets are reported, not failures (exit
status 0).

  python3 bench/compare_rnn.py --build build --rounds 7      # --threads 2 by default
  python3 bench/compare_rnn.py --build build --small --rounds 1   # a check that everything runs
"""
import argparse
import json
import os
import statistics
import sys
from pathlib import Path

from interleaved import find, run_json, run_rounds, threads_in_use_note, torch_time

SIZE = dict(input=128, hidden=256, time=64, batch=32)
SMALL = dict(input=8, hidden=16, time=5, batch=3)
TARGETS = {"lstm_step": 1.0}


# ---- PyTorch side ----------------------------------------------------------

def torch_benches(torch, dev, small):
    s = SMALL if small else SIZE
    nn = torch.nn
    g = torch.Generator().manual_seed(1234)
    x = torch.rand(s["time"], s["batch"], s["input"], generator=g).to(dev)

    def step(module):
        torch.manual_seed(42)
        m = module(s["input"], s["hidden"]).to(dev).train()
        opt = torch.optim.Adam(m.parameters(), lr=1e-3)

        def body():
            opt.zero_grad(set_to_none=True)
            y, _ = m(x)
            loss = y.square().mean()
            loss.backward()
            opt.step()
        return body

    torch.manual_seed(42)
    lstm = nn.LSTM(s["input"], s["hidden"]).to(dev).eval()

    def fwd():
        with torch.no_grad():
            lstm(x)

    return {"lstm_step": step(nn.LSTM), "lstm_fwd": fwd, "gru_step": step(nn.GRU), "rnn_step": step(nn.RNN)}




# ---- the comparison ----------------------------------------------------------

def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=None)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--min-time", type=float, default=0.3)
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    ap.add_argument("--small", action="store_true", help="tiny sizes (a check that everything runs)")
    ap.add_argument("--json", default=None, help="write the medians and ratios here")
    ap.add_argument("--flx-env", action="append", default=[], metavar="KEY=VALUE",
                    help="extra environment for flx only, e.g. FLX_RECURRENT_FUSED=0")
    args = ap.parse_args()

    import torch
    torch.set_num_threads(args.threads)
    dev = args.device
    if dev == "cuda" and not torch.cuda.is_available():
        sys.exit("compare_rnn: --device cuda, but PyTorch sees no GPU")
    torch.backends.cudnn.allow_tf32 = False  # full Float32 on both sides
    torch.backends.cuda.matmul.allow_tf32 = False
    bench_rnn = find(args.build, "bench_rnn", "compare_rnn", "bench_rnn")
    env = dict(os.environ, FLX_NUM_THREADS=str(args.threads), OMP_NUM_THREADS=str(args.threads))
    flx_env = dict(env, **dict(kv.partition("=")[::2] for kv in args.flx_env))
    common = ["--repeats", "1", "--min-time", str(args.min_time)] + (["--small"] if args.small else [])
    flx_cmd = [str(bench_rnn), "--device", "CUDA:0" if dev == "cuda" else "CPU"] + common

    tb = torch_benches(torch, dev, args.small)
    titers = {}
    flx, pt = {}, {}

    def add(store, name, ns):
        store.setdefault(name, []).append(ns)

    def do_flx():
        for name, d in run_json(flx_cmd, flx_env).items():
            add(flx, name, d["ns_per_iter"])
            add(flx, name + ":threads_in_use", d["threads_in_use"])

    def do_torch():
        for name, body in tb.items():
            ns, titers[name] = torch_time(torch, dev, body, args.min_time, titers.get(name))
            add(pt, name, ns)

    order = [do_flx, do_torch]
    run_rounds(args.rounds, order)

    med = statistics.median
    spread = lambda v: f"{min(v) / 1e6:.1f}..{max(v) / 1e6:.1f}"  # noqa: E731
    s = SMALL if args.small else SIZE
    print(f"flx {bench_rnn} vs PyTorch {torch.__version__} (mkldnn {torch.backends.mkldnn.is_available()}) on {dev}, "
          f"{args.threads} threads, medians of {args.rounds} interleaved rounds; input {s['input']}, hidden "
          f"{s['hidden']}, {s['time']} steps, batch {s['batch']}{' (--small)' if args.small else ''}"
          f"{' flx env ' + ' '.join(args.flx_env) if args.flx_env else ''}")
    print(threads_in_use_note(flx, args.threads))
    print(f"{'benchmark':<12}{'flx ms':>10}{'PyTorch ms':>12}{'flx/PyTorch':>13}{'target':>10}  met   "
          f"flx range / PyTorch range (ms)")
    result = {"rounds": args.rounds, "threads": args.threads, "device": dev, "torch": torch.__version__,
              "small": args.small}
    for name in tb:
        f, p = med(flx[name]), med(pt[name])
        limit = TARGETS.get(name)
        ok = None if limit is None else f / p <= limit
        met = "-    " if ok is None else ("yes  " if ok else "NO   ")
        print(f"{name:<12}{f / 1e6:>10.2f}{p / 1e6:>12.2f}{f / p:>13.3f}{('<= ' + str(limit)) if limit else '-':>10}  "
              f"{met} {spread(flx[name])} / {spread(pt[name])}")
        result[name] = {"flx_ns": f, "torch_ns": p, "ratio": f / p, "target": limit, "met": ok}
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
