#!/usr/bin/env python3
"""Compare flx's convolutions with PyTorch and with oneDNN itself (issue 19).

Runs the already-built build/bench/bench_cnn (and, on the CPU,
build/bench/onednn_conv), times the same work in PyTorch in this process,
and prints the medians over --rounds interleaved rounds (each round: flx,
oneDNN, PyTorch, in an order that alternates from round to round, one timed
run of about --min-time seconds each after a warm-up) and the ratios against
the issue's targets:

  cnn_step_b16, cnn_step_b128   one training step of flx-train's CNN
      (Conv 1=>32, BatchNorm, relu, MaxPool, Conv 32=>64, BatchNorm, relu,
      MaxPool, flatten, Dense 3136=>128, relu, Dense 128=>10; cross-entropy on logits; Adam 1e-3)
      against torch.nn with the same layers, torch.set_num_threads(threads):
      flx / PyTorch <= 0.8 at batch 16, <= 1.0 at batch 128
  conv3x3_fwd, conv3x3_bwd      one 3x3 convolution, N=32, C=64->64, 56x56,
      pad 1, forward and backward (data + filter): flx's GFLOP/s over
      oneDNN's own (onednn_conv: its primitives with format any) >= 0.9.
      flx's backward is its fwd_bwd run (withgradient of sum(crosscor(x, w)))
      less its forward. PyTorch's figures (mkldnn on the CPU) are shown too.

With --device cuda, bench_cnn runs on CUDA:0 and PyTorch on cuda (cuDNN);
the convolution is then compared with PyTorch's. Both compute in full
Float32 there: PyTorch lets cuDNN use TF32 tensor cores by default, flx only
with FLX_CUDA_ALLOW_TF32=1, so PyTorch's TF32 is turned off unless --tf32
turns it on for both. Missed targets are reported, not failures (exit
status 0).

With --precision bf16, flx's side runs bench_cnn --precision bf16 (the
model converted as flx-train --precision bf16 converts it, Adam under
MixedPrecision) and PyTorch's trains under torch.autocast(dtype=bfloat16)
(Float32 parameters, the layers cast per call), the convolutions and the
products on BFloat16 operands on both sides; oneDNN's own program runs
Float32 only and is left out, and the targets (set for Float32) are only
shown. Both sides also time the products of bench_cnn's gemm_* benchmarks
(1024^3, and the MLP's products at batch 64 and 512).

  python3 bench/compare_cnn.py --build build --rounds 7            # --threads 2 by default
  python3 bench/compare_cnn.py --build build --rounds 7 --precision bf16
  python3 bench/compare_cnn.py --build build --device cuda [--tf32]
"""
import argparse
import json
import os
import statistics
import sys
from pathlib import Path

from interleaved import find, run_json, run_rounds, threads_in_use_note, torch_time

SIZE = dict(n=32, c=64, k=64, hw=56)
SMALL = dict(n=2, c=8, k=8, hw=12)


# ---- PyTorch side ----------------------------------------------------------

def torch_benches(torch, dev, small, bf16=False):
    nn, F = torch.nn, torch.nn.functional
    dt = torch.bfloat16 if bf16 else torch.float32

    def step(batch):
        torch.manual_seed(42)
        model = nn.Sequential(nn.Conv2d(1, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
                              nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2),
                              nn.Flatten(), nn.Linear(64 * 7 * 7, 128), nn.ReLU(), nn.Linear(128, 10)).to(dev).train()
        opt = torch.optim.Adam(model.parameters(), lr=1e-3)
        g = torch.Generator().manual_seed(1234)
        pool = [(torch.rand(batch, 1, 28, 28, generator=g).to(dev), torch.randint(0, 10, (batch,), generator=g).to(dev))
                for _ in range(4)]
        k = [0]

        def body():
            x, y = pool[k[0]]
            k[0] = (k[0] + 1) % len(pool)
            opt.zero_grad(set_to_none=True)
            with torch.autocast(device_type=dev, dtype=torch.bfloat16, enabled=bf16):
                loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
        return body

    s = SMALL if small else SIZE
    torch.manual_seed(7)
    x = torch.randn(s["n"], s["c"], s["hw"], s["hw"], device=dev).to(dt)
    w = (torch.randn(s["k"], s["c"], 3, 3) * 0.05).to(dev).to(dt)

    def fwd():
        with torch.no_grad():
            F.conv2d(x, w, padding=1)

    xg, wg = x.clone().requires_grad_(), w.clone().requires_grad_()

    def fwd_bwd():
        torch.autograd.grad(F.conv2d(xg, wg, padding=1).sum(), (xg, wg))

    def gemms(shapes):  # (m, n, k) products, as bench_cnn's gemm_* (row-major here: C^T = B^T A^T)
        ps = [((torch.rand(n, k) - 0.5).to(dev).to(dt), (torch.rand(k, m) - 0.5).to(dev).to(dt)) for m, n, k in shapes]

        def body():
            with torch.no_grad():
                for a, b in ps:
                    torch.matmul(a, b)
        return body

    def mlp(b):
        dims = ((784, 256), (256, 256), (256, 10))
        return ([(o, b, i) for i, o in dims] + [(o, i, b) for i, o in dims] + [(i, b, o) for i, o in dims[1:]])

    n = 64 if small else 1024
    return {"cnn_step_b16": step(2 if small else 16), "cnn_step_b128": step(4 if small else 128),
            "conv3x3_fwd": fwd, "conv3x3_fwd_bwd": fwd_bwd, "gemm_1024": gemms([(n, n, n)]),
            "gemm_mlp_b64": gemms(mlp(8 if small else 64)), "gemm_mlp_b512": gemms(mlp(16 if small else 512))}




# ---- the comparison ----------------------------------------------------------

def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default=None)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--min-time", type=float, default=0.3)
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    ap.add_argument("--small", action="store_true", help="tiny sizes (a check that everything runs)")
    ap.add_argument("--tf32", action="store_true",
                    help="on CUDA, let both use TF32 tensor cores (flx: FLX_CUDA_ALLOW_TF32=1); default: neither")
    ap.add_argument("--precision", choices=["f32", "bf16"], default="f32",
                    help="bf16: flx's model in BFloat16 with MixedPrecision, PyTorch's under autocast (see above)")
    ap.add_argument("--json", default=None, help="write the medians and ratios here")
    ap.add_argument("--flx-env", action="append", default=[], metavar="KEY=VALUE",
                    help="extra environment for flx only, e.g. FLX_ADAPTIVE_THREADS=0")
    args = ap.parse_args()

    import torch
    torch.set_num_threads(args.threads)
    dev = args.device
    if dev == "cuda" and not torch.cuda.is_available():
        sys.exit("compare_cnn: --device cuda, but PyTorch sees no GPU")
    # The same arithmetic on both sides (see the docstring).
    torch.backends.cudnn.allow_tf32 = args.tf32
    torch.backends.cuda.matmul.allow_tf32 = args.tf32
    bench_cnn = find(args.build, "bench_cnn", "compare_cnn", "bench_cnn onednn_conv")
    bf16 = args.precision == "bf16"
    onednn = find(args.build, "onednn_conv", "compare_cnn", "bench_cnn onednn_conv") if dev == "cpu" and not bf16 else None
    env = dict(os.environ, FLX_NUM_THREADS=str(args.threads), OMP_NUM_THREADS=str(args.threads))
    flx_env = dict(env, **dict(kv.partition("=")[::2] for kv in args.flx_env))
    if args.tf32:
        flx_env["FLX_CUDA_ALLOW_TF32"] = "1"
    common = ["--repeats", "1", "--min-time", str(args.min_time)] + (["--small"] if args.small else [])
    flx_cmd = [str(bench_cnn), "--device", "CUDA:0" if dev == "cuda" else "CPU", "--precision", args.precision] + common
    one_cmd = [str(onednn), "--threads", str(args.threads)] + common if onednn else None

    tb = torch_benches(torch, dev, args.small, bf16)
    titers = {}
    flx, one, pt = {}, {}, {}

    def add(store, name, ns):
        store.setdefault(name, []).append(ns)

    def do_flx():
        for name, d in run_json(flx_cmd, flx_env).items():
            name = name.removesuffix("_bf16")
            add(flx, name, d["ns_per_iter"])
            add(flx, name + ":threads_in_use", d["threads_in_use"])

    def do_one():
        if one_cmd:
            for name, d in run_json(one_cmd, env).items():
                add(one, name, d["ns_per_iter"])

    def do_torch():
        for name, body in tb.items():
            ns, titers[name] = torch_time(torch, dev, body, args.min_time, titers.get(name))
            add(pt, name, ns)

    order = [do_flx, do_one, do_torch]
    run_rounds(args.rounds, order)

    med = lambda v: statistics.median(v)  # noqa: E731
    spread = lambda v: f"{min(v) / 1e6:.1f}..{max(v) / 1e6:.1f}"  # noqa: E731
    # Derived: each round's backward = its fwd_bwd - its fwd (same process, adjacent runs).
    for store in (flx, pt):
        if "conv3x3_fwd_bwd" in store:
            store["conv3x3_bwd"] = [fb - f for fb, f in zip(store["conv3x3_fwd_bwd"], store["conv3x3_fwd"])]
    if "onednn_conv3x3_fwd_plain" in one:
        one["onednn_conv3x3_fwd_bwd_plain"] = [f + b for f, b in zip(one["onednn_conv3x3_fwd_plain"],
                                                                      one["onednn_conv3x3_bwd_plain"])]
    s = SMALL if args.small else SIZE
    gf = 2.0 * s["n"] * s["k"] * s["c"] * 9 * s["hw"] ** 2 / 1e9  # GFLOP of one pass

    print(f"flx {bench_cnn} vs PyTorch {torch.__version__} (mkldnn {torch.backends.mkldnn.is_available()}) on "
          f"{dev}, {'BFloat16 (PyTorch: autocast)' if bf16 else 'Float32'}{(', TF32 ' + ('on' if args.tf32 else 'off') + ' for both') if dev == 'cuda' else ''}, "
          f"{args.threads} threads, medians of {args.rounds} interleaved rounds"
          f"{' (--small)' if args.small else ''}{' flx env ' + ' '.join(args.flx_env) if args.flx_env else ''}")
    print(threads_in_use_note(flx, args.threads))
    print(f"{'benchmark':<18}{'flx ms':>10}{'PyTorch ms':>12}{'flx/PyTorch':>13}{'target':>10}  met   "
          f"flx range / PyTorch range (ms)")
    result = {"rounds": args.rounds, "threads": args.threads, "device": dev, "torch": torch.__version__,
              "precision": args.precision,
              "tf32": args.tf32 if dev == "cuda" else None}
    for name, limit in (("cnn_step_b16", 0.8), ("cnn_step_b128", 1.0)):
        f, p = med(flx[name]), med(pt[name])
        ok = f / p <= limit
        print(f"{name:<18}{f / 1e6:>10.2f}{p / 1e6:>12.2f}{f / p:>13.3f}{'<= ' + str(limit):>10}  "
              f"{'yes' if ok else 'NO ':<5} {spread(flx[name])} / {spread(pt[name])}")
        result[name] = {"flx_ns": f, "torch_ns": p, "ratio": f / p, "target": limit, "met": ok}

    print(f"\n3x3 convolution N={s['n']} C={s['c']}->{s['k']} {s['hw']}x{s['hw']} pad 1: GFLOP/s (median time)")
    ref_name = "oneDNN" if one else "PyTorch"
    print(f"{'pass':<8}{'flx':>17}{'oneDNN':>17}{'oneDNN+reorders':>17}{'PyTorch':>17}{'flx/' + ref_name:>12}"
          f"{'target':>9}  met")
    for pas, mult, oname in (("fwd", 1, "onednn_conv3x3_fwd"), ("bwd", 2, "onednn_conv3x3_bwd"),
                             ("fwd_bwd", 3, "onednn_conv3x3_fwd_bwd")):
        name = "conv3x3_" + pas
        rate = lambda ns: mult * gf / (ns / 1e9)  # noqa: E731
        cell = lambda v: f"{rate(med(v)):7.2f} ({med(v) / 1e6:6.1f}ms)" if v else f"{'-':>16}"  # noqa: E731
        plain = one.get(oname + "_plain")
        ref = one.get(oname) if one else pt.get(name)
        ratio = rate(med(flx[name])) / rate(med(ref))
        ok = ratio >= 0.9
        print(f"{pas:<8}{cell(flx[name]):>17}{cell(one.get(oname)):>17}{cell(plain):>17}{cell(pt.get(name)):>17}"
              f"{ratio:>12.3f}{'>= 0.9':>9}  {'yes' if ok else 'NO'}")
        result[name] = {"flx_gflops": rate(med(flx[name])), "ref": ref_name, "ref_gflops": rate(med(ref)),
                        "torch_gflops": rate(med(pt[name])), "ratio": ratio, "target": 0.9, "met": ok,
                        "onednn_with_reorders_gflops": rate(med(plain)) if plain else None}
    print(f"\nproducts{' (BFloat16 operands)' if bf16 else ''}: GFLOP/s (median time)")
    print(f"{'benchmark':<18}{'flx':>20}{'PyTorch':>20}{'flx/PyTorch time':>18}")
    for name, flops in (("gemm_1024", 2 * (64 if args.small else 1024) ** 3),
                        ("gemm_mlp_b64", None), ("gemm_mlp_b512", None)):
        if name not in flx or name not in pt:
            continue
        f, p = med(flx[name]), med(pt[name])
        cell = lambda ns: (f"{flops / ns:7.1f} ({ns / 1e6:7.2f}ms)" if flops else f"{ns / 1e6:7.2f}ms")  # noqa: E731
        print(f"{name:<18}{cell(f):>20}{cell(p):>20}{f / p:>18.3f}")
        result[name] = {"flx_ns": f, "torch_ns": p, "ratio": f / p}
    print("\n(bwd = data + filter gradients; flx's includes the sum and its gradient's fill, a few ms, as its "
          "fwd_bwd - fwd. oneDNN+reorders: the same primitives with plain nchw/oihw operands reordered in and out "
          "at each call, as flx's CPU backend does, but dy once for each backward primitive where flx reorders it "
          "once for both)")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
