"""Burst speed in the lab: the timeline from `sbatch` of a job that needs N more nodes to its start.

    sudo python bench/burst.py        # N = 1 and 8; needs root and .ci/install-lab.sh

The real slurmctld runs the rendered ResumeProgram, which scales the pool through the lab's
statefulsets/scale API; the lab starts the pods; the job starts once every node registered.
Printed per step: ResumeProgram's scale reached the API, the pods exist, slurmctld holds the
nodes as registered (no POWERING_UP), the job runs. The gap between the last two is slurmctld's:
the last column names what ended the job's CONFIGURING in slurmctld's log, `prolog` (the busy
PrologSlurmctld returned with the nodes up) or `periodic` (job_time_limit's pass every 30 s).
"""

from __future__ import annotations

import argparse
import re
import statistics
import time

import yaml

from slurmk8s.lab import lifecycle, verify
from slurmk8s.profile import load_profile
from slurmk8s.render import render

EXTRA = (1, 8)
REPEAT = 2


SLURM = "26.05"


def profile_text(max_nodes: int, slurm: str = SLURM) -> bytes:
    """One node always on, room for max_nodes."""
    doc = {"apiVersion": "slurmk8s.io/v1alpha1", "kind": "ClusterProfile", "metadata": {"name": "burst"},
           "spec": {"slurm": {"version": slurm},
                    "pools": [{"name": "cpu", "replicas": 1, "minReplicas": 1, "maxReplicas": max_nodes,
                               "cpus": 1, "memory": "1Gi"}]}}
    return yaml.safe_dump(doc).encode()


STEPS = ("ResumeProgram scaled", "pods created", "slurmd registered", "job started")


def _nodes_up(lab, names: list[str]) -> bool:
    """True once slurmctld holds every one of the nodes as registered (no power-up or no-response flag)."""
    out = lab.exec(["scontrol", "show", "node", "-o", ",".join(names)]).stdout
    states = [line.split("State=", 1)[1].split()[0] for line in out.splitlines() if "State=" in line]
    return len(states) == len(names) and not any(
        flag in state for state in states for flag in ("POWERING_UP", "POWERED_DOWN", "NOT_RESPONDING", "DOWN"))


CONFIGURED_BY = {"prolog_running_decr": "prolog", "job_time_limit": "periodic"}


def configured_by(lab, job: str) -> str:
    """Which slurmctld path ended the job's CONFIGURING, from the controller's log."""
    pod = next(p for p in lab.pods if p.name.endswith("controller-0"))
    text = lab.log_path(pod, "slurmctld").read_text(errors="replace")
    found = re.search(rf"(\w+): Configuration for JobId={job}\b", text)
    return CONFIGURED_BY.get(found.group(1), found.group(1)) if found else "?"


def one_run(extra: int, slurm: str = SLURM) -> tuple[dict[str, float], str]:
    """Seconds from `sbatch` to each step of STEPS (polled every 0.2 s), and what ended CONFIGURING."""
    bundle = render(load_profile(profile_text(1 + extra, slurm), "burst"))
    lab = lifecycle.boot(bundle, log=lambda line: None)
    new_nodes = [f"cpu-{i}" for i in range(1, 1 + extra)]
    try:
        started = time.monotonic()
        job = verify.submit(lab, f"-N{1 + extra}", "--wrap", "sleep 1")
        seen: dict[str, float] = {}
        while time.monotonic() - started < 600:
            now = time.monotonic() - started
            wanted, created = lab.scale_of("burst-cpu")
            if wanted == 1 + extra:
                seen.setdefault("ResumeProgram scaled", now)
            if created == 1 + extra:
                seen.setdefault("pods created", now)
            if "pods created" in seen and "slurmd registered" not in seen and _nodes_up(lab, new_nodes):
                seen["slurmd registered"] = time.monotonic() - started
            state = lab.exec(["squeue", "-h", "-j", job, "-o", "%T"]).stdout.strip()
            if state in ("RUNNING", "COMPLETING", ""):
                seen["job started"] = time.monotonic() - started
                seen.setdefault("slurmd registered", seen["job started"])
                return seen, configured_by(lab, job)
            time.sleep(0.2)
        raise SystemExit(f"job {job} did not start within 600 s; reached {seen}")
    finally:
        lab.down()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--extra", type=int, action="append", help=f"more nodes the job needs (default {EXTRA})")
    parser.add_argument("--repeat", type=int, default=REPEAT, help="runs per N (median)")
    parser.add_argument("--slurm", default=SLURM, help=f"Slurm release of the lab (default {SLURM})")
    args = parser.parse_args()
    print(f"seconds after `sbatch` of a job needing N more nodes, Slurm {args.slurm} (median of {args.repeat})")
    print(f"{'N':>3}" + "".join(f"{step:>22}" for step in STEPS) + "  configured by; runs of `job started`")
    for extra in args.extra or EXTRA:
        runs = [one_run(extra, args.slurm) for _ in range(args.repeat)]
        print(f"{extra:>3}" + "".join(f"{statistics.median(r.get(s, float('nan')) for r, _ in runs):>22.1f}"
                                     for s in STEPS)
              + "  " + ",".join(sorted({by for _, by in runs})) + "; "
              + " ".join(f"{r['job started']:.1f}" for r, _ in runs), flush=True)


if __name__ == "__main__":
    main()
