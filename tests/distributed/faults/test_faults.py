#!/usr/bin/env python3
"""Faults end the job, never hang it (one machine): fault_worker under
`mpirun -n 2`, with rank 1 killed (SIGKILL; also with mpirun told not to
end the job itself), stopped (SIGSTOP), throwing, or stalled in its own
code at step 5. Each ends the job with a non-zero status within a few seconds of
the fault (the deadline is FLX_DISTRIBUTED_TIMEOUT=3), with a message that
names rank 1 (and, for the stop and the stall, the collective rank 0 waited
in), and no
process of the job is left, the stopped one included. First, the same
program trains to the end and matches one process on whole batches.
Then ranks that disagree (an allreduce of 4 elements on rank 0 and of 6 on
rank 1; Float32 and Float64; an allreduce and a bcast; DistributedOptimizer
over models of different sizes) end the job with a message that names the
collective and what each rank gave, not advice about the network.

    test_faults.py --mpirun MPIRUN --worker FAULT_WORKER
"""

import argparse
import os
import signal
import sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import faultlib  # noqa: E402

TIMEOUT = 3    # FLX_DISTRIBUTED_TIMEOUT for the fault cases, seconds
BUDGET = 20    # from the fault to mpirun's exit, at most (a loaded machine)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--mpirun", required=True)
    p.add_argument("--worker", required=True)
    a = p.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit("SIGTERM: cleaning up"))  # run the finally blocks
    root = ["--allow-run-as-root"] if os.geteuid() == 0 else []

    def launcher(n, opts=()):
        def launch(env, args):
            env = dict(env, FLX_NUM_THREADS="1")
            return faultlib.Job([a.mpirun, *root, "--oversubscribe", *opts, "-n", str(n), a.worker, *args], env)
        return launch

    def fault(name, kind, expect, opts=(), nonzero=True):
        def run():
            _, err = faultlib.fault_case(name, launcher(2, opts), kind, TIMEOUT, BUDGET, expect, nonzero)
            print(f"---- stderr of {name}:\n{err}\n----", flush=True)
        return name, run

    def mismatch(name, kind, expect):
        def run():
            err = faultlib.mismatch_case(name, launcher(2), kind, TIMEOUT, BUDGET, expect + [r"MPI_Abort"],
                                         [r"check the network", r"btl_tcp_if_include"])
            print(f"---- stderr of {name}:\n{err}\n----", flush=True)
        return name, run

    faultlib.run_cases([
        ("train with 2 ranks", lambda: faultlib.train_case("train with 2 ranks", launcher(2), 2)),
        ("train with 3 ranks", lambda: faultlib.train_case("train with 3 ranks", launcher(3), 3)),
        # mpirun sees its child die and ends the job itself, naming the rank.
        fault("SIGKILL rank 1", "kill", [r"rank 1 with PID \d+ .*exited on signal 9"]),
        # The same where the launcher does not end the job (mpirun
        # --enable-recovery; over TCP, as between machines): flx alone
        # notices, by rank 0's deadline, and ends it.
        fault("SIGKILL rank 1, launcher keeps going", "kill",
              [r"rank 0 of 2: allreduce of gradient bucket 1 of 1 .* did not complete",
               r"Rank 1 \(pid \d+ on .*\) does not answer", r"MPI_Abort"],
              opts=["--enable-recovery", "--mca", "btl", "tcp,self"], nonzero=False),
        # Rank 0's allreduce misses its deadline; the ping names rank 1.
        fault("SIGSTOP rank 1", "stop", [r"rank 0 of 2: allreduce of gradient bucket 1 of 1 .* did not complete",
                                         r"Rank 1 \(pid \d+ on .*\) does not answer", r"MPI_Abort"]),
        fault("rank 1 throws", "throw", [r"rank 1 of 2: uncaught exception: fault_worker: rank 1 throws at step 5",
                                         r"MPI_Abort"]),
        # Rank 1 is stuck in its own code; flx's thread there still answers,
        # saying how far it got.
        fault("rank 1 stalls", "stall", [r"rank 0 of 2: allreduce of gradient bucket 1 of 1 .* did not complete",
                                         r"Rank 1 \(pid \d+ on .*\) answers but has started only \d+ collectives",
                                         r"MPI_Abort"]),
        mismatch("4 and 6 elements", "size", [
            r"The ranks called it with different shapes or element types as their collective #1",
            r"allreduce of a \(4\) Float32 tensor on CPU \(Sum, 4 elements of Float32\)",
            r"on rank 1 \(pid \d+ on .*\), allreduce of a \(6\) Float32 tensor on CPU \(Sum, 6 elements of Float32\)"]),
        mismatch("Float32 and Float64", "dtype", [
            r"The ranks called it with different shapes or element types as their collective #1",
            r"\(4\) Float32 tensor on CPU \(Sum, 4 elements of Float32\)",
            r"\(4\) Float64 tensor on CPU \(Sum, 4 elements of Float64\)"]),
        mismatch("allreduce and bcast", "collective", [
            r"rank 0 of 2: allreduce of a \(4\) Float32 tensor on CPU \(collective #1\) did not complete",
            r"The ranks called different collectives as their collective #1",
            r"on rank 1 \(pid \d+ on .*\), bcast from rank 0 of a \(4\) Float32 tensor on CPU \(root 0, 4 elements"]),
        mismatch("models of different sizes", "model", [
            r"allreduce of gradient bucket 1 of 1 \(161 Float32 values",
            r"The ranks called it with different shapes or element types",
            r"on rank 1 \(pid \d+ on .*\), allreduce of gradient bucket 1 of 1 \(191 Float32 values"]),
    ])


if __name__ == "__main__":
    main()
