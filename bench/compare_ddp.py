#!/usr/bin/env python3
"""Data-parallel training on the CPU: flx::distributed against PyTorch DDP (issue 18).

The flx-train MLP (784-256-256-10, relu, cross-entropy on logits, Adam 1e-3)
on Fashion-MNIST, batch --batch (256) per rank on --ranks (2) processes of
one thread each, against one process of --single-threads (2) threads on the
whole batch (512). Each of --rounds interleaved rounds (the order of the
launches, and of the modes inside one, turns by one each round) runs:

  flx        mpiexec -n 2 bench_ddp --mode ddp,no-overlap,comm-off
             ddp: DistributedOptimizer, buckets overlapped with the backward pass;
             no-overlap: every allreduce in update(); comm-off: the same two
             processes at the same time, plain Adam, no collective
  flx single bench_ddp --mode single (one process, no MPI)
  PyTorch    bench/ddp_torch.py --mode ddp,comm-off: DistributedDataParallel on
             gloo (torch.multiprocessing, 127.0.0.1), torch.set_num_threads(1) per rank;
             comm-off as for flx
  PyTorch single  one process, torch.set_num_threads(2)

Every run reports the median step over --steps timed steps after --warmup
(a job's step is its slowest rank's); this script takes, per figure, the
median over the rounds, and for each ratio the median of the per-round
ratios (two runs of one round saw the same load). Targets:

  wait share      flx ddp: update()'s wait for gradients (StepStats::wait_seconds)
                  over the step time                                      <= 10 %
  flx / PyTorch   flx ddp step over PyTorch DDP's step                    <= 0.75
  flx / comm-off  flx ddp step over the same ranks' step without
                  communication                                          <= 1.2
  speed-up        samples/s of the 2 ranks over one process of 2 threads  (reported)

The same figures with overlap off are printed beside them, and flx's CPU
time per step (every thread of a rank: the step's, flx's communication
thread, MPI's), ddp over comm-off: a measure of what communication costs
that depends less on how much of the machine other jobs leave to each run
(on a shared 2-core machine, the comm-off ranks were seen getting half a
core each while the ddp ranks got nearly a core each). Missed targets
are reported, not failures. Each round also records the load average: on a
shared machine, compare runs made under the same load.

  cmake --build build --target bench_ddp
  python3 bench/compare_ddp.py --build build                  # 5 rounds, 100 steps
  python3 bench/compare_ddp.py --build build --rounds 9 --json ddp.json
  python3 bench/compare_ddp.py --build build --no-torch       # flx alone
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
FLX_DIST_MODES = ["ddp", "no-overlap", "comm-off"]
TORCH_DIST_MODES = ["ddp", "comm-off"]
TARGET_WAIT_SHARE, TARGET_VS_TORCH, TARGET_VS_COMM_OFF = 0.10, 0.75, 1.2


def rotate(xs, k):
    k %= len(xs)
    return xs[k:] + xs[:k]


def json_lines(cmd, env, what):
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=1800)
    if p.returncode != 0:
        sys.exit(f"{what} failed ({p.returncode}): {' '.join(map(str, cmd))}\n{p.stdout}\n{p.stderr}")
    return {d["mode"]: d for d in (json.loads(line) for line in p.stdout.splitlines() if line.startswith("{"))}


def common_args(a):
    args = ["--steps", str(a.steps), "--warmup", str(a.warmup), "--pool", str(a.pool), "--hidden", str(a.hidden)]
    return args + (["--synthetic"] if a.synthetic else [])


def run_flx_dist(a, binary, modes):
    cmd = a.mpiexec + ["-n", str(a.ranks), str(binary), "--mode", ",".join(modes), "--threads", str(a.rank_threads),
                       "--batch", str(a.batch)] + common_args(a) + a.flx_arg
    return json_lines(cmd, dict(os.environ, FLX_NUM_THREADS=str(a.rank_threads)), "bench_ddp under mpiexec")


def run_flx_single(a, binary):
    cmd = [str(binary), "--mode", "single", "--threads", str(a.single_threads), "--batch", str(a.batch * a.ranks)]
    return json_lines(cmd + common_args(a), dict(os.environ, FLX_NUM_THREADS=str(a.single_threads)), "bench_ddp single")


def run_torch(a, modes, threads, batch, ranks):
    cmd = [sys.executable, str(HERE / "ddp_torch.py"), "--mode", ",".join(modes), "--threads", str(threads),
           "--batch", str(batch), "--ranks", str(ranks)] + common_args(a)
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    return json_lines(cmd, env, "ddp_torch.py")


def find_binary(a):
    if a.binary:
        return Path(a.binary)
    b = Path(a.build or "build") / "bench" / "bench_ddp"
    if not b.exists():
        sys.exit(f"{b} not found: cmake --build {a.build or 'build'} --target bench_ddp (needs MPI), or give --binary")
    return b


def mpiexec_command(a):
    exe = a.mpiexec or shutil.which("mpiexec") or shutil.which("mpirun")
    if not exe:
        sys.exit("no mpiexec: install OpenMPI (Debian: openmpi-bin libopenmpi-dev) or give --mpiexec")
    cmd = [exe, "--oversubscribe"]
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        cmd.append("--allow-run-as-root")
    if a.bind_to:
        cmd += ["--bind-to", a.bind_to]
    return cmd


def med(xs):
    return statistics.median(xs) if xs else float("nan")


def spread(xs):
    return f"{min(xs):.2f}..{max(xs):.2f}" if xs else ""


def verdict(value, target):
    return "MET" if value <= target else "MISSED"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", help="CMake build directory holding bench/bench_ddp (default ./build)")
    ap.add_argument("--binary", help="path of bench_ddp (overrides --build)")
    ap.add_argument("--mpiexec", help="the MPI launcher (default: mpiexec or mpirun on PATH)")
    ap.add_argument("--bind-to", default="",
                    help="mpiexec --bind-to for the flx ranks (default: mpiexec's own, as a user gets it: OpenMPI "
                         "binds 2 ranks to a core each; 'none' leaves them unbound, as PyTorch's processes are)")
    ap.add_argument("--rounds", type=int, default=5, help="interleaved rounds; medians over them (default 5)")
    ap.add_argument("--steps", type=int, default=100, help="timed steps per run (default 100)")
    ap.add_argument("--warmup", type=int, default=10, help="untimed steps first (default 10)")
    ap.add_argument("--pool", type=int, default=32, help="distinct batches, cycled (default 32)")
    ap.add_argument("--batch", type=int, default=256, help="per rank (default 256); one process takes ranks x batch")
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--rank-threads", type=int, default=1, help="threads per rank (default 1)")
    ap.add_argument("--single-threads", type=int, default=2, help="threads of the one process (default 2)")
    ap.add_argument("--hidden", type=int, default=256, help="hidden width (default 256; smaller for smoke tests)")
    ap.add_argument("--synthetic", action="store_true", help="random images instead of Fashion-MNIST")
    ap.add_argument("--no-torch", action="store_true", help="flx alone (no PyTorch runs or ratios against it)")
    ap.add_argument("--flx-arg", action="append", default=[],
                    help="extra bench_ddp argument for the ranks, e.g. --flx-arg=--bucket-mib --flx-arg=0.25")
    ap.add_argument("--json", help="also write every run and the summary to this file")
    a = ap.parse_args()
    binary = find_binary(a)
    a.mpiexec = mpiexec_command(a)

    runs = []  # one dict per round: label -> the run's JSON line
    for r in range(a.rounds):
        load = os.getloadavg()[0]
        print(f"round {r + 1}/{a.rounds} (load average {load:.2f}) ...", file=sys.stderr, flush=True)
        got = {"load": load}
        launches = [
            lambda: {f"flx {m}": d for m, d in run_flx_dist(a, binary, rotate(FLX_DIST_MODES, r)).items()},
            lambda: {"flx single": run_flx_single(a, binary)["single"]},
        ]
        if not a.no_torch:
            launches += [
                lambda: {f"PyTorch {m}": d
                         for m, d in run_torch(a, rotate(TORCH_DIST_MODES, r), a.rank_threads, a.batch, a.ranks).items()},
                lambda: {"PyTorch single": run_torch(a, ["single"], a.single_threads, a.batch * a.ranks, 1)["single"]},
            ]
        for launch in rotate(launches, r):
            got.update(launch())
        runs.append(got)
    report(a, runs)
    return 0


def report(a, runs):
    labels = [k for k in runs[0] if k != "load"]
    col = lambda label, key: [run[label][key] for run in runs if label in run and key in run[label]]
    loads = [run["load"] for run in runs]
    print(f"\n{a.ranks} ranks x {a.rank_threads} thread(s), batch {a.batch} per rank, vs one process of "
          f"{a.single_threads} threads at batch {a.batch * a.ranks}; {a.steps} timed steps per run after {a.warmup}; "
          f"median of {a.rounds} interleaved rounds; load average {min(loads):.2f}..{max(loads):.2f} "
          f"(median {med(loads):.2f}) on {os.cpu_count()} CPUs; flx ranks bound: {a.bind_to or 'mpiexec default'}")
    print(f"{'':20}{'step ms':>9}{'min..max':>15}{'samples/s':>11}{'cpu ms':>8}{'wait ms':>9}{'wait %':>8}"
          f"{'skew ms':>9}{'tail ms':>9}  buckets/overlapped")
    for label in labels:
        step, cpu = col(label, "step_ms"), col(label, "cpu_ms")
        line = f"{label:20}{med(step):9.2f}{spread(step):>15}{med(col(label, 'samples_per_s')):11.0f}"
        line += f"{med(cpu):8.2f}" if cpu else f"{'':8}"
        if label in ("flx ddp", "flx no-overlap"):
            line += (f"{med(col(label, 'wait_ms')):9.2f}{100 * med(col(label, 'wait_share')):7.1f}%"
                     f"{med(col(label, 'skew_ms')):9.2f}{med(col(label, 'tail_ms')):9.2f}"
                     f"  {int(med(col(label, 'buckets')))}/{int(med(col(label, 'overlapped')))}")
        print(line)

    def ratio(num, den, key="step_ms"):
        return [run[num][key] / run[den][key] for run in runs if num in run and den in run]

    rows, summary = [], {}

    def row(name, values, target=None):
        m = med(values)
        summary[name] = {"median": m, "rounds": values, "target": target}
        rows.append(f"  {name:50}{m:7.3f}  [{spread(values)}]" +
                    (f"  target <= {target}: {verdict(m, target)}" if target is not None else ""))

    print("\nper-round ratios (median [min..max] over rounds):")
    row("wait share, flx ddp", col("flx ddp", "wait_share"), TARGET_WAIT_SHARE)
    row("wait share, flx no-overlap", col("flx no-overlap", "wait_share"))
    if not a.no_torch:
        row("flx ddp step / PyTorch DDP step", ratio("flx ddp", "PyTorch ddp"), TARGET_VS_TORCH)
        row("flx no-overlap step / PyTorch DDP step", ratio("flx no-overlap", "PyTorch ddp"))
    row("flx ddp step / flx comm-off step", ratio("flx ddp", "flx comm-off"), TARGET_VS_COMM_OFF)
    row("flx no-overlap step / flx comm-off step", ratio("flx no-overlap", "flx comm-off"))
    row("flx ddp CPU per step / flx comm-off CPU per step", ratio("flx ddp", "flx comm-off", "cpu_ms"))
    row("flx speed-up: ddp samples/s / one process", ratio("flx ddp", "flx single", "samples_per_s"))
    row("flx speed-up: no-overlap / one process", ratio("flx no-overlap", "flx single", "samples_per_s"))
    if not a.no_torch:
        row("PyTorch DDP step / PyTorch comm-off step", ratio("PyTorch ddp", "PyTorch comm-off"))
        row("PyTorch speed-up: DDP samples/s / one process", ratio("PyTorch ddp", "PyTorch single", "samples_per_s"))
        row("flx single step / PyTorch single step", ratio("flx single", "PyTorch single"))
        row("flx comm-off step / PyTorch comm-off step", ratio("flx comm-off", "PyTorch comm-off"))
    print("\n".join(rows))
    if a.json:
        with open(a.json, "w") as fh:
            json.dump({"args": {k: v for k, v in vars(a).items()}, "runs": runs, "summary": summary}, fh, indent=2)


if __name__ == "__main__":
    sys.exit(main())
