#!/usr/bin/env python3
"""bench_ddp's modes in PyTorch, for bench/compare_ddp.py (issue 18).

The same MLP (784-256-256-10, relu), loss (cross-entropy on logits, class
indices), optimiser (Adam 1e-3) and batches (Fashion-MNIST, columns
[r B, (r+1) B) of each global batch of n B images, made before the timing) as
bench_ddp, on the CPU:

  ddp_torch.py --mode ddp,comm-off --ranks 2 --threads 1 --batch 256
  ddp_torch.py --mode single --threads 2 --batch 512

  ddp       DistributedDataParallel over gloo (default buckets: 25 MiB, the
            first 1 MiB), --ranks processes started with torch.multiprocessing
            on this machine (127.0.0.1), torch.set_num_threads(--threads) each
  comm-off  the same processes at the same time, each stepping its plain model
            (no DDP): a rank's step without communication
  single    this process alone, no process group

A step is zero_grad(set_to_none=True), forward, loss, backward (DDP's
allreduces overlap it), optimizer.step(). Rank 0 prints one JSON line per
mode: step_ms (median over --steps timed steps after --warmup; the largest
over the ranks), step_ms_per_rank, samples_per_s (global batch / step).
"""
import argparse
import json
import os
import socket
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fashion_mnist_torch import load  # noqa: E402

DATA_DIRS = [os.environ.get("FLX_DATA", ""), "/usr/share/datasets/fashion-mnist"]


def make_model(hidden):
    return torch.nn.Sequential(torch.nn.Linear(784, hidden), torch.nn.ReLU(), torch.nn.Linear(hidden, hidden),
                               torch.nn.ReLU(), torch.nn.Linear(hidden, 10))


def make_batches(a, rank, workers):
    glob = a.batch * workers
    if a.synthetic:
        g = torch.Generator().manual_seed(7 + rank)
        return [(torch.rand(a.batch, 784, generator=g), torch.randint(0, 10, (a.batch,), generator=g))
                for _ in range(a.pool)]
    root = next(d for d in DATA_DIRS if d and os.path.exists(os.path.join(d, "train-labels-idx1-ubyte.gz")))
    x, y = load(root, "train")
    n = min(a.pool, x.shape[0] // glob)
    out = []
    for k in range(n):
        lo = k * glob + rank * a.batch
        out.append((x[lo:lo + a.batch].contiguous(), y[lo:lo + a.batch].contiguous()))
    return out


def run_mode(mode, a, batches, rank):
    torch.manual_seed(42)
    model = make_model(a.hidden)
    net = torch.nn.parallel.DistributedDataParallel(model) if mode == "ddp" else model
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    steps = []
    if dist.is_initialized():
        dist.barrier()
    for i in range(a.warmup + a.steps):
        x, y = batches[i % len(batches)]
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(net(x), y)
        loss.backward()
        opt.step()
        t1 = time.perf_counter()
        if i >= a.warmup:
            steps.append(t1 - t0)
    if dist.is_initialized():
        dist.barrier()
    return statistics.median(steps) * 1e3


def report(mode, a, per_rank, workers):
    step = max(per_rank)
    print(json.dumps({"mode": mode, "ranks": workers, "threads": torch.get_num_threads(), "batch_per_rank": a.batch,
                      "global_batch": a.batch * workers, "steps": a.steps, "warmup": a.warmup,
                      "step_ms": step, "step_ms_per_rank": per_rank,
                      "samples_per_s": a.batch * workers / step * 1e3, "torch": torch.__version__}), flush=True)


def worker(rank, a, port):
    torch.set_num_threads(a.threads)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=a.ranks)
    batches = make_batches(a, rank, a.ranks)
    for mode in a.mode:
        mine = run_mode(mode, a, batches, rank)
        every = [None] * a.ranks
        dist.all_gather_object(every, mine)
        if rank == 0:
            report(mode, a, every, a.ranks)
    dist.destroy_process_group()


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--mode", default="ddp", help="ddp,comm-off (with --ranks) or single")
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--batch", type=int, default=256, help="per process")
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--pool", type=int, default=32, help="distinct batches, cycled")
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--synthetic", action="store_true", help="random images instead of Fashion-MNIST")
    a = ap.parse_args()
    a.mode = [m for m in a.mode.split(",") if m]
    if a.mode == ["single"]:
        torch.set_num_threads(a.threads)
        report("single", a, [run_mode("single", a, make_batches(a, 0, 1), 0)], 1)
        return 0
    if "single" in a.mode or any(m not in ("ddp", "comm-off") for m in a.mode):
        ap.error(f"modes {a.mode}: ddp and comm-off together, or single alone")
    mp.spawn(worker, args=(a, free_port()), nprocs=a.ranks, join=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
