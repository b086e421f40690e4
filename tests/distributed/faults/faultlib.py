"""What test_faults.py and test_two_hosts.py share: running fault_worker
under mpirun, acting on a rank at a known step, and checking that the job
ended in time, said why, and left no process behind.

Every process of a job (mpirun, orted, the rsh agent, the ranks) inherits
FLX_FAULT_TEST_TOKEN, a value unique to the job, from mpirun's environment:
scanning /proc/*/environ for it finds whatever the job left, whatever its
parent or namespace."""

import os
import re
import signal
import subprocess
import sys
import threading
import time
import uuid


class Failed(Exception):
    pass


def check(cond, what, job=None):
    if not cond:
        raise Failed(what + ("\n" + job.transcript() if job else ""))


class Job:
    """mpirun and its output, read line by line as it comes (timestamped)."""

    def __init__(self, cmd, env_extra, wrap=()):
        self.token = "flx-fault-" + uuid.uuid4().hex
        env = dict(os.environ)
        env.update(env_extra)
        env["FLX_FAULT_TEST_TOKEN"] = self.token
        self.cmd = list(wrap) + list(cmd)
        self.lines = []  # (time, stream, text)
        self.cv = threading.Condition()
        self.start = time.monotonic()
        self.proc = subprocess.Popen(self.cmd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, errors="replace", start_new_session=True)
        self.readers = [threading.Thread(target=self._read, args=(s, n), daemon=True)
                        for s, n in ((self.proc.stdout, "out"), (self.proc.stderr, "err"))]
        for r in self.readers:
            r.start()

    def _read(self, stream, name):
        for line in stream:
            with self.cv:
                self.lines.append((time.monotonic(), name, line.rstrip("\n")))
                self.cv.notify_all()

    def wait_line(self, pattern, timeout):
        """The first match of pattern in stdout, waiting up to timeout seconds."""
        rx = re.compile(pattern)
        deadline = time.monotonic() + timeout
        with self.cv:
            while True:
                for _, stream, text in self.lines:
                    m = rx.search(text) if stream == "out" else None
                    if m:
                        return m
                left = deadline - time.monotonic()
                if left <= 0 or self.proc.poll() is not None and not self._reading():
                    raise Failed(f"no line matching {pattern!r} within {timeout} s\n" + self.transcript())
                self.cv.wait(min(left, 0.2))

    def _reading(self):
        return any(r.is_alive() for r in self.readers)

    def wait(self, timeout):
        """mpirun's exit status, or None when it is still running after timeout s."""
        try:
            rc = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None
        for r in self.readers:
            r.join(5)
        return rc

    def rank_pids(self):
        with self.cv:
            return {int(m.group(1)): int(m.group(2)) for _, s, t in self.lines
                    if s == "out" and (m := re.search(r"worker rank (\d+) of \d+ pid (\d+)", t))}

    def text(self, stream):
        with self.cv:
            return "\n".join(t for _, s, t in self.lines if s == stream)

    def transcript(self):
        return ("---- command: " + " ".join(self.cmd) + "\n---- stdout:\n" + self.text("out") +
                "\n---- stderr:\n" + self.text("err") + "\n----")


def job_processes(token):
    """[(pid, state, command)] of the live processes whose environment holds token."""
    found = []
    needle = ("FLX_FAULT_TEST_TOKEN=" + token).encode() + b"\0"
    for d in os.listdir("/proc"):
        if not d.isdigit() or int(d) == os.getpid():
            continue
        try:
            with open(f"/proc/{d}/environ", "rb") as f:
                if needle not in f.read() + b"\0":
                    continue
            with open(f"/proc/{d}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
            with open(f"/proc/{d}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            continue  # gone meanwhile, or not ours to read
        if state != "Z":
            found.append((int(d), state, cmd))
    return found


def leftovers(job, pids=(), settle=3.0):
    """The job's processes still alive `settle` seconds after mpirun exited
    (the ranks it told to go may take a moment), plus any of `pids`."""
    deadline = time.monotonic() + settle
    while True:
        left = job_processes(job.token)
        for pid in pids:
            if pid not in [p for p, _, _ in left] and pid_alive(pid):
                left.append((pid, "?", "rank process"))
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.1)


def pid_alive(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def kill_everything(job):
    """After the assertions: nothing of the job survives the test, stopped
    or not (SIGKILL ends a stopped process too)."""
    for _ in range(3):
        procs = job_processes(job.token)
        if job.proc.poll() is None:
            procs.append((job.proc.pid, "?", "mpirun"))
        if not procs:
            break
        for pid, _, _ in procs:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        time.sleep(0.2)
    try:
        job.proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        pass


def fault_case(name, launch, fault, timeout_s, budget_s, expect, nonzero=True, running=None):
    """Launch a job (launch(env, worker_args) -> Job), let it train to
    step 5, apply `fault` ("kill", "stop", "throw" or "stall") to rank 1,
    and check that mpirun exits non-zero within budget_s of the fault, that
    its output matches every pattern of `expect`, and that no process of
    the job is left (checked before the clean-up kills what is).
    running(job), if given, checks the job while it trains. nonzero=False: mpirun's status is not checked (with
    --enable-recovery it reports 0 even after MPI_Abort). Returns (seconds
    from the fault to mpirun's exit, stderr)."""
    step = 5
    extra = ["--steps", "100000", "--step-sleep", "0.05"]
    if fault in ("throw", "stall"):
        extra += [f"--{fault}-at", str(step), "--on-rank", "1"]
    job = launch({"FLX_DISTRIBUTED_TIMEOUT": str(timeout_s)}, extra)
    try:
        if fault in ("throw", "stall"):
            job.wait_line(rf"^{fault}ing rank 1 step", 30)
            t0 = time.monotonic()
        else:
            job.wait_line(rf"^step {step} rank 1$", 30)
            if running:
                running(job)
            pid = job.rank_pids().get(1)
            check(pid, "rank 1 printed no pid", job)
            t0 = time.monotonic()
            os.kill(pid, signal.SIGKILL if fault == "kill" else signal.SIGSTOP)
        rc = job.wait(budget_s)
        elapsed = time.monotonic() - t0
        check(rc is not None, f"{name}: mpirun still running {budget_s} s after the fault (a hang)", job)
        check(rc != 0 or not nonzero, f"{name}: mpirun exited with status 0 after a fault", job)
        out = job.text("out") + "\n" + job.text("err")
        for pattern in expect:
            check(re.search(pattern, out), f"{name}: the output does not match {pattern!r}", job)
        left = leftovers(job, job.rank_pids().values())
        check(not left, f"{name}: processes left behind after mpirun exited: " +
              "; ".join(f"pid {p} state {s}: {c[:150]}" for p, s, c in left), job)
        with job.cv:
            said = [t - t0 for t, s, text in job.lines if s == "err" and "flx::distributed" in text and t >= t0]
        flx_said = f"flx's message after {said[0]:.1f} s, " if said else ""
        print(f"ok   {name}: {flx_said}mpirun exited with status {rc} {elapsed:.1f} s after the fault "
              f"(deadline {timeout_s} s), no process left", flush=True)
        return elapsed, job.text("err")
    finally:
        kill_everything(job)


def mismatch_case(name, launch, kind, timeout_s, budget_s, expect, reject):
    """A job whose rank 1 makes a collective unlike rank 0's (fault_worker
    --mismatch kind): mpirun exits non-zero within budget_s, the output
    matches every pattern of `expect` and none of `reject` (advice that
    blames something else), and no process of the job is left."""
    job = launch({"FLX_DISTRIBUTED_TIMEOUT": str(timeout_s)}, ["--mismatch", kind, "--on-rank", "1"])
    try:
        t0 = time.monotonic()
        rc = job.wait(budget_s)
        check(rc is not None, f"{name}: mpirun still running after {budget_s} s (a hang)", job)
        check(rc != 0, f"{name}: mpirun exited with status 0", job)
        check("survived" not in job.text("out"), f"{name}: a rank went on after the mismatched collective", job)
        out = job.text("out") + "\n" + job.text("err")
        for pattern in expect:
            check(re.search(pattern, out), f"{name}: the output does not match {pattern!r}", job)
        for pattern in reject:
            check(not re.search(pattern, out), f"{name}: the output matches {pattern!r}", job)
        left = leftovers(job, job.rank_pids().values())
        check(not left, f"{name}: processes left behind after mpirun exited: " +
              "; ".join(f"pid {p} state {s}: {c[:150]}" for p, s, c in left), job)
        print(f"ok   {name}: mpirun exited with status {rc} after {time.monotonic() - t0:.1f} s, naming the "
              f"mismatch, no process left", flush=True)
        return job.text("err")
    finally:
        kill_everything(job)


def train_case(name, launch, nranks):
    """A job that trains to the end: every rank matches one process on
    whole batches (Float64, 1e-6 relative) and the ranks agree exactly."""
    job = launch({"FLX_DISTRIBUTED_TIMEOUT": "60"}, ["--steps", "20"])
    try:
        rc = job.wait(60)
        check(rc == 0, f"{name}: mpirun exited with status {rc}", job)
        results = re.findall(r"^result rank (\d+) checksum (\S+) max_rel_diff (\S+)$", job.text("out"), re.M)
        check(len(results) == nranks, f"{name}: {len(results)} result lines for {nranks} ranks", job)
        worst = max(float(d) for _, _, d in results)
        check(worst <= 1e-6, f"{name}: parameters differ from one process's by {worst} (relative)", job)
        check(len({c for _, c, _ in results}) == 1, f"{name}: the ranks hold different parameters", job)
        check(not leftovers(job, settle=1.0), f"{name}: processes left behind", job)
        print(f"ok   {name}: {nranks} ranks match one process on whole batches "
              f"(largest relative difference {worst:.2g})", flush=True)
    finally:
        kill_everything(job)


def run_cases(cases, give_up_after=200):
    """Run each (name, thunk), report, and exit 1 if any failed. No case
    starts past give_up_after seconds (cases that hang take their budget
    each), so the driver ends, cleaning up, before ctest's TIMEOUT kills it."""
    failed = []
    start = time.monotonic()
    for name, thunk in cases:
        if time.monotonic() - start > give_up_after:
            print(f"FAIL {name}: not run, the cases before it took over {give_up_after} s", flush=True)
            failed.append(name)
            continue
        try:
            thunk()
        except Failed as e:
            print(f"FAIL {name}: {e}", flush=True)
            failed.append(name)
    if failed:
        print("failed: " + ", ".join(failed))
        sys.exit(1)
    print("all passed")
