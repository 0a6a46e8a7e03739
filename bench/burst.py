"""Burst speed in the lab: seconds from `sbatch` of a job that needs N more nodes to its start.

    sudo python bench/burst.py        # N = 1 and 8; needs root and .ci/install-lab.sh

The real slurmctld runs the rendered ResumeProgram, which scales the pool through the lab's
statefulsets/scale API; the lab starts the pods; the job starts once every node registered.
"""

from __future__ import annotations

import statistics
import time

import yaml

from slurmk8s.lab import cluster, verify
from slurmk8s.profile import load_profile
from slurmk8s.render import render

EXTRA = (1, 8)
REPEAT = 2


def profile_text(max_nodes: int) -> bytes:
    """One node always on, room for max_nodes."""
    doc = {"apiVersion": "slurmk8s.io/v1alpha1", "kind": "ClusterProfile", "metadata": {"name": "burst"},
           "spec": {"slurm": {"version": "26.05"},
                    "pools": [{"name": "cpu", "replicas": 1, "minReplicas": 1, "maxReplicas": max_nodes,
                               "cpus": 1, "memory": "1Gi"}]}}
    return yaml.safe_dump(doc).encode()


def one_run(extra: int) -> tuple[float, float]:
    """(seconds sbatch -> RUNNING, seconds sbatch -> pods started by the lab)."""
    bundle = render(load_profile(profile_text(1 + extra), "burst"))
    lab = cluster.boot(bundle, log=lambda line: None)
    try:
        started = time.monotonic()
        job = verify.submit(lab, f"-N{1 + extra}", "--wrap", "sleep 1")
        pods_at = None
        while time.monotonic() - started < 600:
            if pods_at is None and lab.replicas["burst-cpu"] == 1 + extra:
                pods_at = time.monotonic() - started
            state = lab.exec(["squeue", "-h", "-j", job, "-o", "%T"]).stdout.strip()
            if state in ("RUNNING", "COMPLETING", ""):
                return time.monotonic() - started, pods_at or float("nan")
            time.sleep(0.2)
        raise SystemExit(f"job {job} did not start within 600 s")
    finally:
        lab.down()


def main() -> None:
    print(f"{'extra nodes':>11}{'sbatch->start s':>17}{'sbatch->pods up s':>19}   (median of {REPEAT})")
    for extra in EXTRA:
        runs = [one_run(extra) for _ in range(REPEAT)]
        print(f"{extra:>11}{statistics.median(r[0] for r in runs):>17.1f}{statistics.median(r[1] for r in runs):>19.1f}")


if __name__ == "__main__":
    main()
