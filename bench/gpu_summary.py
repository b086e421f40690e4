#!/usr/bin/env python3
"""Markdown for scripts/cuda-check.sh's summary from a --json file of
bench/compare_gpu.py, bench/compare_cnn.py or bench/compare_train.py (told
apart by their keys).

  python3 bench/gpu_summary.py FILE.json
"""
import json
import sys


def fmt(v, unit=""):
    if v is None:
        return "n/a"
    return (f"{v:.3f}" if abs(v) < 1000 else f"{v:.0f}") + unit


def cnn_summary(d):
    """compare_cnn.py: the CNN's training steps and the 3x3 convolution."""
    tf32 = {True: ", TF32 on for both", False: ", TF32 off for both"}.get(d.get("tf32"), "")
    print(f"\n## CNN benchmarks: flx vs PyTorch {d.get('torch', '-')} on {d.get('device')}{tf32}, medians of "
          f"{d.get('rounds')} interleaved rounds\n")
    print("| figure | flx | reference | ratio | target | result |")
    print("|---|---|---|---|---|---|")
    for name in ("cnn_step_b16", "cnn_step_b128"):
        if name in d:
            r = d[name]
            print(f"| {name} (ms) | {fmt(r['flx_ns'] / 1e6)} | PyTorch {fmt(r['torch_ns'] / 1e6)} | {fmt(r['ratio'])} "
                  f"| <= {r['target']} | {'met' if r['met'] else '**missed**'} |")
    for name in ("conv3x3_fwd", "conv3x3_bwd", "conv3x3_fwd_bwd"):
        if name in d:
            r = d[name]
            print(f"| {name} (GFLOP/s) | {fmt(r['flx_gflops'])} | {r['ref']} {fmt(r['ref_gflops'])} | {fmt(r['ratio'])} "
                  f"| >= {r['target']} | {'met' if r['met'] else '**missed**'} |")


def train_summary(d):
    """compare_train.py: flx-train against the same training in PyTorch."""
    print("\n## flx-train vs PyTorch (bench/compare_train.py)\n")
    print("| epoch | flx s | PyTorch s | flx test accuracy | PyTorch test accuracy |")
    print("|---|---|---|---|---|")
    for k, (f, t) in enumerate(zip(d["flx"], d["pytorch"]), 1):
        print(f"| {k} | {fmt(f['seconds'])} | {fmt(t['seconds'])} | {f['accuracy']:.4f} | {t['accuracy']:.4f} |")
    print(f"\nmedian epoch flx/PyTorch: {fmt(d.get('ratio'))}")


def main():
    try:
        d = json.load(open(sys.argv[1]))
    except (OSError, ValueError, IndexError) as e:
        print(f"\n(benchmark figures unreadable: {e})")
        return 0
    if "cnn_step_b16" in d:
        cnn_summary(d)
        return 0
    if isinstance(d.get("flx"), list) and "pytorch" in d:
        train_summary(d)
        return 0
    groups = d.get("groups") or sorted({t["id"][0] for t in d.get("targets", [])})
    print(f"\n## Benchmarks ({','.join(groups) or '-'}): flx {d.get('flx_device', d.get('device'))} vs PyTorch "
          f"{d.get('torch_version', '-')} on {d.get('torch_device')} ({d.get('torch_gpu', '-')}), "
          f"medians of {d.get('rounds')} interleaved rounds of ~{d.get('min_time')} s\n")
    print("| id | figure | value | target | result |")
    print("|---|---|---|---|---|")
    for t in d.get("targets", []):
        res = ("not run" if t["value"] is None and t["target"] != "-" else "-") if t["met"] is None else \
            ("met" if t["met"] else "**missed**")
        what = t["what"].replace("|", "\\|")
        print(f"| {t['id']} | {what} | {fmt(t['value'], t.get('unit', ''))} | {t['target']} | {res} |")
    rows = [(n, v.get("median_ns"), d.get("torch", {})) for n, v in d.get("flx", {}).items()]
    if rows:
        print("\n| benchmark | flx median ms | rounds (ms) |")
        print("|---|---|---|")
        for n, m, _ in rows:
            rounds = ", ".join(f"{r / 1e6:.3f}" for r in d["flx"][n]["rounds"])
            print(f"| {n} | {fmt(m and m / 1e6)} | {rounds} |")
        for n, v in d.get("torch", {}).items():
            rounds = ", ".join(f"{r / 1e6:.3f}" for r in v["rounds"])
            print(f"| PyTorch {n} | {fmt(v.get('median_ns') and v['median_ns'] / 1e6)} | {rounds} |")
    if d.get("train_skipped"):
        print(f"\n(e) skipped: {d['train_skipped']}")
    for e in d.get("errors", []):
        print(f"\n- error: {e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
