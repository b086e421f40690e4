#!/usr/bin/env python3
"""Two machines, really: two network namespaces joined by a veth pair are
the test's own two hosts (10.201.0.1 and 10.201.0.2, addresses that exist
only inside them). mpirun runs in the first, reads a hostfile with both
addresses, and starts the second host's daemon through an rsh agent that
enters the second namespace where ssh would log in; one rank runs on each
host and they talk over TCP on the veth pair only.

The cases: training matches one process on whole batches; rank 1 (on the
second host) killed with SIGKILL, stopped with SIGSTOP, or throwing, each
end the job within seconds (FLX_DISTRIBUTED_TIMEOUT=3) with a message
naming rank 1, and leave no process on either host. The namespaces are removed afterwards,
whatever happened. Exit status 77 (a skip) where namespaces cannot be made:
not root, no CAP_NET_ADMIN, no `ip`.

    test_two_hosts.py --mpirun MPIRUN --worker FAULT_WORKER
"""

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import faultlib  # noqa: E402

SKIP = 77
TIMEOUT = 3
BUDGET = 20
SUBNET = "10.201.0.0/24"  # private, and only inside the namespaces below
HOSTS = ["10.201.0.1", "10.201.0.2"]

# The rsh agent: OpenMPI calls it as `AGENT [options] HOST COMMAND...`
# (COMMAND a shell command line: the orted and its arguments); it runs
# COMMAND in HOST's namespace instead of logging in to HOST. exec keeps the
# process tree simple: the orted replaces the agent.
AGENT = """#!/bin/sh
while [ $# -gt 0 ]; do case "$1" in -*) shift ;; *) break ;; esac; done
host=$1; shift
case "$host" in
{cases}
  *) echo "flx test rsh agent: $host is not one of this test's hosts" >&2; exit 1 ;;
esac
exec ip netns exec "$ns" /bin/sh -c "$*"
"""


def skip(why):
    print(f"SKIP: two hosts in network namespaces cannot be made here: {why}", flush=True)
    sys.exit(SKIP)


def ip(*args, check=True):
    r = subprocess.run(["ip", *args], capture_output=True, text=True)
    if check and r.returncode != 0:
        raise faultlib.Failed(f"ip {' '.join(args)}: {r.stderr.strip()}")
    return r


class Hosts:
    """The two namespaces and the veth pair; close() removes them."""

    def __init__(self):
        tag = str(os.getpid())
        self.ns = [f"flx-host-a-{tag}", f"flx-host-b-{tag}"]
        self.dev = [f"flxa{tag}"[:15], f"flxb{tag}"[:15]]
        self.made = []
        r = ip("netns", "add", self.ns[0], check=False)
        if r.returncode != 0:
            skip(f"`ip netns add` failed: {r.stderr.strip()} (it needs root, or CAP_NET_ADMIN and CAP_SYS_ADMIN)")
        self.made.append(self.ns[0])
        try:
            ip("netns", "add", self.ns[1])
            self.made.append(self.ns[1])
            # The pair is made inside the namespaces: it never appears on this machine's own network.
            ip("link", "add", self.dev[0], "netns", self.ns[0], "type", "veth", "peer", "name", self.dev[1],
               "netns", self.ns[1])
            for ns, dev, addr in zip(self.ns, self.dev, HOSTS):
                ip("-n", ns, "addr", "add", addr + "/24", "dev", dev)
                ip("-n", ns, "link", "set", "lo", "up")
                ip("-n", ns, "link", "set", dev, "up")
            if shutil.which("ping"):
                r = subprocess.run(["ip", "netns", "exec", self.ns[0], "ping", "-c", "1", "-W", "2", HOSTS[1]],
                                   capture_output=True, text=True)
                if r.returncode != 0:
                    raise faultlib.Failed(f"the hosts cannot reach each other: {r.stdout}{r.stderr}")
        except BaseException:
            self.close()
            raise

    def sent_bytes(self):
        """Bytes the first host has sent over the veth pair."""
        stats = f"/sys/class/net/{self.dev[0]}/statistics/tx_bytes"
        r = subprocess.run(["ip", "netns", "exec", self.ns[0], "cat", stats], capture_output=True, text=True,
                           check=True)
        return int(r.stdout)

    def check_placement(self, job):
        """Rank r runs in the namespace of host r."""
        for rank, pid in sorted(job.rank_pids().items()):
            inside = os.stat(f"/proc/{pid}/ns/net").st_ino
            faultlib.check(inside == os.stat(f"/run/netns/{self.ns[rank]}").st_ino,
                           f"rank {rank} (pid {pid}) does not run in {self.ns[rank]}", job)

    def close(self):
        # Deleting a namespace deletes the veth end inside it, and so the pair.
        for ns in reversed(self.made):
            ip("netns", "del", ns, check=False)
        left = [ns for ns in self.made if ns in ip("netns", "list", check=False).stdout.split()]
        if left:
            print(f"warning: namespaces not removed: {left}", flush=True)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--mpirun", required=True)
    p.add_argument("--worker", required=True)
    a = p.parse_args()
    if os.geteuid() != 0:
        skip("not root (making network namespaces needs root)")
    if not shutil.which("ip"):
        skip("no `ip` command (iproute2)")

    # A SIGTERM (ctest's timeout, ^C) unwinds through the finally blocks, so
    # that the job is killed and the namespaces go.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit("SIGTERM: cleaning up"))
    hosts = Hosts()
    tmp = tempfile.mkdtemp(prefix="flx-two-hosts-")
    try:
        hostfile = os.path.join(tmp, "hostfile")
        with open(hostfile, "w") as f:
            f.writelines(f"{h} slots=1\n" for h in HOSTS)
        agent = os.path.join(tmp, "rsh-agent")
        with open(agent, "w") as f:
            f.write(AGENT.format(cases="\n".join(f"  {h}) ns={ns} ;;" for h, ns in zip(HOSTS, hosts.ns))))
        os.chmod(agent, 0o755)
        mpirun = [a.mpirun, "--allow-run-as-root", "--hostfile", hostfile, "-n", "2", "--map-by", "node",
                  "--mca", "plm_rsh_agent", agent,
                  "--mca", "btl", "tcp,self", "--mca", "btl_tcp_if_include", SUBNET,
                  "--mca", "oob_tcp_if_include", SUBNET,
                  "-x", "FLX_DISTRIBUTED_TIMEOUT", "-x", "FLX_NUM_THREADS"]

        def launch(env, args):
            env = dict(env, FLX_NUM_THREADS="1")
            return faultlib.Job([*mpirun, a.worker, *args], env, wrap=["ip", "netns", "exec", hosts.ns[0]])

        def fault(name, kind, expect):
            def run():
                _, err = faultlib.fault_case(name, launch, kind, TIMEOUT, BUDGET, expect,
                                             running=hosts.check_placement)
                print(f"---- stderr of {name}:\n{err}\n----", flush=True)
            return name, run

        def train():
            # 20 steps send at least 20 gradients of 161 Float64 values each
            # way: over the veth pair, as between machines.
            before = hosts.sent_bytes()
            faultlib.train_case("two hosts: train", launch, 2)
            sent = hosts.sent_bytes() - before
            faultlib.check(sent >= 20 * 161 * 8, f"two hosts: train: only {sent} bytes went over the veth pair")
            print(f"ok   two hosts: train: {sent} bytes went from host a to host b over the veth pair", flush=True)

        print("launch: ip netns exec " + hosts.ns[0] + " " + " ".join(mpirun) + " " + a.worker + " ...",
              flush=True)
        faultlib.run_cases([
            ("two hosts: train", train),
            fault("two hosts: SIGKILL rank 1", "kill", [r"rank 1 with PID \d+ .*exited on signal 9"]),
            fault("two hosts: SIGSTOP rank 1", "stop",
                  [r"rank 0 of 2: allreduce of gradient bucket 1 of 1 .* did not complete",
                   r"Rank 1 \(pid \d+ on .*\) does not answer", r"MPI_Abort"]),
            fault("two hosts: rank 1 throws", "throw",
                  [r"rank 1 of 2: uncaught exception: fault_worker: rank 1 throws at step 5", r"MPI_Abort"]),
        ])
    finally:
        hosts.close()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
