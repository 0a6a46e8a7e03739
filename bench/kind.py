"""Real Kubernetes on this machine, timed: kind build, cluster up, `slurmk8s up` to ready, a burst.

    python bench/kind.py            # warm build, cluster up, up to ready, one burst, down
    python bench/kind.py --cold     # also a cold build (empty Go build cache and kind cache; many minutes)

Needs what tools/install-test-deps.sh installs (root, podman, Go). Uses its own cluster
(slurmk8s-bench) and removes it. The burst timeline is polled every 0.5 s from the `sbatch`:
when the StatefulSet was scaled (ResumeProgram's API call), when the new pod's slurmd container
ran, when Slurm saw the node registered, when the job started and ended.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.e2e.conftest import (  # noqa: E402  (the e2e suite's own cluster helpers)
    KIND_CLUSTER, NAMESPACE, SLURM_SERIES, Cluster, local_profile, tool_env,
)

NAME = "slurmk8s-bench"


def timed(argv: list[str], env: dict | None = None) -> tuple[float, str]:
    start = time.monotonic()
    done = subprocess.run(argv, capture_output=True, text=True, env=env)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} exited {done.returncode}:\n{done.stderr[-3000:]}")
    return time.monotonic() - start, done.stdout


def quiet(cluster: Cluster, *args: str) -> str:
    done = subprocess.run(["kubectl", "--kubeconfig", cluster.kubeconfig, "-n", NAMESPACE, *args],
                          capture_output=True, text=True, env=tool_env())
    return done.stdout.strip()


def burst(cluster: Cluster) -> dict[str, float]:
    """Seconds from sbatch of a 3-node job (2 nodes run) to each step of the resume."""
    login = ["exec", "dev-login-0", "-c", "sshd", "--"]
    start = time.monotonic()
    job = quiet(cluster, *login, "sbatch", "--parsable", "-N3", "--wrap", "srun hostname")
    marks: dict[str, float] = {}
    checks = {
        "StatefulSet scaled": lambda: quiet(cluster, "get", "statefulset", "dev-cpu", "-o",
                                            "jsonpath={.spec.replicas}") == "3",
        "pod running": lambda: "running" in quiet(cluster, "get", "pod", "dev-cpu-2", "-o",
                                                  "jsonpath={.status.containerStatuses[0].state}"),
        "slurmd registered": lambda: "POWERING_UP" not in (s := quiet(cluster, *login, "sinfo", "-h", "-n", "cpu-2",
                                                                      "-o", "%T")) and s != "",
        "job started": lambda: quiet(cluster, *login, "sacct", "-j", job, "-X", "-n", "-o", "Start").strip()
                               not in ("", "Unknown", "None"),
        "job completed": lambda: quiet(cluster, *login, "sacct", "-j", job, "-X", "-n", "-P", "-o",
                                       "State") == "COMPLETED",
    }
    while len(marks) < len(checks) and time.monotonic() - start < 900:
        for step, check in checks.items():
            if step not in marks and check():
                marks[step] = time.monotonic() - start
        time.sleep(0.5)
    return marks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cold", action="store_true", help="also time a cold build (empty caches)")
    args = parser.parse_args()
    rows: list[tuple[str, float]] = []
    if args.cold:
        with tempfile.TemporaryDirectory(prefix="kind-cold-") as tmp:
            env = {**os.environ, "GOCACHE": f"{tmp}/go-build", "SLURMK8S_KIND_CACHE": f"{tmp}/kind",
                   "SLURMK8S_KIND_REBUILD": "1"}
            rows.append(("cold build (Go build cache and kind cache empty; modules cached)",
                         timed(["bash", str(REPO / "tools/kind/build.sh")], env)[0]))
    rows.append(("warm build (every piece cached)", timed(["bash", str(REPO / "tools/kind/build.sh")])[0]))
    env = {**tool_env(), "SLURMK8S_KIND_NAME": NAME, "SLURMK8S_KIND_SLURM": SLURM_SERIES}
    subprocess.run(["bash", str(KIND_CLUSTER), "down"], env=env, capture_output=True)
    seconds, out = timed(["bash", str(KIND_CLUSTER), "up"], env)
    rows.append(("cluster up: kind-configs/dev.yaml, 5 nodes, Slurm images loaded", seconds))
    cluster = Cluster(NAME, out.strip().splitlines()[-1])
    try:
        tmp = Path(tempfile.mkdtemp(prefix="kind-bench-"))
        profile = local_profile(REPO / "profiles/kind-dev.yaml", tmp / "kind-dev.yaml")
        cli = [sys.executable, "-m", "slurmk8s.cli"]
        rows.append(("slurmk8s up kind-dev to ready (first time)",
                     timed([*cli, "up", str(profile), "--kubeconfig", cluster.kubeconfig, "--timeout", "900"],
                           {**env, "PYTHONPATH": str(REPO)})[0]))
        for step, at in burst(cluster).items():
            rows.append((f"burst +1 node: sbatch -> {step}", at))
        rows.append(("slurmk8s down --delete-data",
                     timed([*cli, "down", str(profile), "--kubeconfig", cluster.kubeconfig, "--delete-data", "--yes"],
                           {**env, "PYTHONPATH": str(REPO)})[0]))
        shutil.rmtree(tmp, ignore_errors=True)
    finally:
        subprocess.run(["bash", str(KIND_CLUSTER), "down"], env=env, capture_output=True)
    width = max(len(r[0]) for r in rows)
    print(f"{'step':<{width}}  seconds")
    for step, seconds in rows:
        print(f"{step:<{width}}  {seconds:7.1f}")


if __name__ == "__main__":
    main()
