#!/usr/bin/env python3
"""slurmk8s busy marking: slurmctld's PrologSlurmctld/EpilogSlurmctld for pool nodes.

`busy.py prolog` labels the pods of the job's nodes slurmk8s.io/busy=true; `busy.py epilog` labels a
node's pod busy=false once no other job holds the node. A PodDisruptionBudget with maxUnavailable 0
selects busy pods, so `kubectl drain` (an eviction) waits until their jobs end; idle pods go.

It runs as SlurmUser with the controller's ServiceAccount, whose Role allows patching exactly the pool
pods. It always exits 0: a failing PrologSlurmctld would requeue the job, and a missed label costs
only the eviction guard, never a job. Standard library only; nodes.json maps node names to pods, and
kubeapi.py and nodestate.py beside it are the API client and the node-state reader.

The prolog returns only once the job's resumed nodes registered: slurmctld starts a job on powered-up
nodes when its PrologSlurmctld ends with the nodes ready, and otherwise only in a periodic pass that runs
every 30 s (job_time_limit, PERIODIC_TIMEOUT). Waiting here also means the pods exist when labelled.
Not `scontrol wait_job`: it waits for the job to leave CONFIGURING, which needs this prolog to end.
"""

import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import kubeapi  # noqa: E402  (shipped beside this file)
import nodestate  # noqa: E402  (shipped beside this file)

LABEL = "slurmk8s.io/busy"
POLL_S = 0.5  # first pause between the prolog's questions whether the resumed nodes registered
POLL_MAX_S = 2.0  # the pause grows to this: many jobs waiting at once must not flood slurmctld
JOB_CHECK_EVERY = 10  # polls between checks that the job still holds its nodes


def log(message):
    print(f"slurmk8s-busy: {message}", file=sys.stderr, flush=True)


def pod_of(config, node):
    """The pod running Slurm node <pool>-<n>, or None for a node of no pool (side-by-side)."""
    pool, _, number = node.rpartition("-")
    if not number.isdigit():
        return None
    for segment in config["pools"].get(pool, []):
        if segment["offset"] <= int(number) < segment["offset"] + segment["slots"]:
            return f"{segment['statefulset']}-{int(number) - segment['offset']}"
    return None


def label(pod, value):
    # One attempt, briefly: the prolog holds the job's start, and a missed label costs only the guard.
    kubeapi.Api(attempts=1, timeout=5).label_pod(pod, LABEL, value)


def still_held(node, job):
    """True when a job other than `job` still runs on node."""
    out = subprocess.run(["squeue", "--noheader", f"--nodelist={node}", "--states=RUNNING,COMPLETING,SUSPENDED",
                          "--format=%i"], capture_output=True, text=True, timeout=20)
    return out.returncode != 0 or any(j != job for j in out.stdout.split())


def scontrol(*args):
    return subprocess.run(["scontrol", *args], capture_output=True, text=True, timeout=20)


def not_yet_up(nodes):
    """The nodes slurmctld has yet to resume (powered down, `~`), holds as powering up (`#`) or has not heard
    from since (not responding, `*`: sinfo shows one suffix, and a resumed node is both until its slurmd
    registers); empty once any failed (down: slurmctld requeues the job itself) or sinfo did not answer."""
    out = subprocess.run(nodestate.command(nodes), capture_output=True, text=True, timeout=20)
    if out.returncode != 0:
        return []
    states = nodestate.parse(out.stdout)
    if any(s.down for s in states.values()):
        return []
    return [n for n, s in states.items() if s.powering_up or s.powered_down or s.not_responding]


def resume_timeout():
    """slurmctld's ResumeTimeout in seconds (after it, slurmctld gives the nodes up), 600 if unreadable."""
    for line in scontrol("show", "config").stdout.splitlines():
        key, _, value = line.partition("=")
        if key.strip() == "ResumeTimeout":
            digits = value.split()[0] if value.split() else ""
            return int(digits) if digits.isdigit() else 600
    return 600


def job_allocated(job):
    out = scontrol("show", "job", "--oneliner", job)
    return out.returncode == 0 and any(f"JobState={s}" in out.stdout for s in ("RUNNING", "CONFIGURING"))


def wait_for_resumed_nodes(nodes, job):
    """Return once no node of the job is powering up, the job lost its allocation, or ResumeTimeout passed."""
    waiting = not_yet_up(nodes)
    if not waiting:
        return
    deadline = time.monotonic() + resume_timeout() + 30
    polls = 0
    while waiting and time.monotonic() < deadline:
        time.sleep(min(POLL_MAX_S, POLL_S * 1.5 ** polls))
        polls += 1
        if polls % JOB_CHECK_EVERY == 0 and not job_allocated(job):
            return
        waiting = not_yet_up(waiting)


def main(verb):
    with open(os.path.join(HERE, "nodes.json")) as fh:
        config = json.load(fh)
    job = os.environ.get("SLURM_JOB_ID", "")
    hostlist = os.environ.get("SLURM_JOB_NODELIST", "")
    if not hostlist:
        return
    nodes = subprocess.run(["scontrol", "show", "hostnames", hostlist], capture_output=True, text=True,
                           timeout=20).stdout.split()
    if verb == "prolog":
        wait_for_resumed_nodes(nodes, job)
    for node in nodes:
        pod = pod_of(config, node)
        if pod is None or (verb == "epilog" and still_held(node, job)):
            continue
        label(pod, "true" if verb == "prolog" else "false")


if __name__ == "__main__":
    try:
        main(sys.argv[1])
    except Exception as e:  # never fail the job over a label
        log(f"{sys.argv[1:]}: {type(e).__name__}: {e}")
    sys.exit(0)
