"""Lab speed: boot-to-first-completed-job and teardown, for 3 and 16 nodes, per Slurm version.

    sudo python bench/lab.py            # prints a table; needs root and .ci/install-lab.sh
"""

from __future__ import annotations

import statistics
import sys
import time

import yaml

from slurmk8s.lab import cluster, verify
from slurmk8s.profile import load_profile
from slurmk8s.render import render

VERSIONS = ("22.05", "24.11", "26.05")
SIZES = (3, 16)
REPEAT = 2


def profile_text(version: str, nodes: int) -> bytes:
    """A one-pool profile with `nodes` running 1-CPU nodes."""
    doc = {
        "apiVersion": "slurmk8s.io/v1alpha1", "kind": "ClusterProfile",
        "metadata": {"name": "bench"},
        "spec": {"slurm": {"version": version, "images": {"registry": "registry.example.org/hpc"}},
                 "pools": [{"name": "cpu", "replicas": nodes, "cpus": 1, "memory": "1Gi"}]},
    }
    return yaml.safe_dump(doc).encode()


def one_run(version: str, nodes: int) -> tuple[float, float]:
    """(seconds from boot start to the first COMPLETED job, seconds to tear down)."""
    bundle = render(load_profile(profile_text(version, nodes), "bench"))
    started = time.monotonic()
    lab = cluster.boot(bundle, log=lambda line: None)
    job = verify.submit(lab, "-N1", "--wrap", "true")
    state = verify.wait_state(lab, job, {"COMPLETED", "FAILED"})
    booted = time.monotonic() - started
    if state != "COMPLETED":
        raise SystemExit(f"{version}/{nodes}: job {job} ended {state}")
    started = time.monotonic()
    left = cluster.down(lab.lab_id)
    if left:
        raise SystemExit(f"{version}/{nodes}: teardown left {left}")
    return booted, time.monotonic() - started


def main() -> None:
    print(f"{'Slurm':<7}{'nodes':>6}{'boot->1st job s':>17}{'teardown s':>12}   (median of {REPEAT})")
    for version in VERSIONS:
        for nodes in SIZES:
            runs = [one_run(version, nodes) for _ in range(REPEAT)]
            print(f"{version:<7}{nodes:>6}{statistics.median(r[0] for r in runs):>17.2f}"
                  f"{statistics.median(r[1] for r in runs):>12.2f}")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
