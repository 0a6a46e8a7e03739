"""End to end on kind: create a cluster, `slurmk8s up`, run a job through the login pod, `down`.

Needs a working container engine (`docker info`) and the `kind` binary; skipped, with the
reason, where either is missing. Run it as `python -m pytest -m e2e tests/e2e -v -rs`
(docs/kind-e2e.md). The kind nodes pull the Slinky images from ghcr.io.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from waiting import wait_for

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[2]
PROFILE = str(REPO / "profiles" / "kind-dev.yaml")
KIND_CONFIG = str(REPO / "kind-configs" / "dev.yaml")
CLUSTER = os.environ.get("SLURMK8S_E2E_CLUSTER", "slurmk8s-e2e")
NAMESPACE, LOGIN_POD, LOGIN_CONTAINER = "slurm", "dev-login-0", "sshd"


def missing_prerequisite() -> str | None:
    """Why the e2e tests cannot run here (None when they can)."""
    if shutil.which("kind") is None:
        return "no `kind` binary on PATH (https://kind.sigs.k8s.io/docs/user/quick-start/#installation)"
    if shutil.which("kubectl") is None:
        return "no `kubectl` binary on PATH"
    engine = os.environ.get("KIND_EXPERIMENTAL_PROVIDER", "docker")
    if shutil.which(engine) is None:
        return f"no `{engine}` binary on PATH"
    probe = subprocess.run([engine, "info"], capture_output=True, text=True)
    if probe.returncode != 0:
        last = (probe.stderr.strip().splitlines() or ["no output"])[-1]
        return f"`{engine} info` fails, no working container engine: {last}"
    return None


def run(*args: str, timeout: float = 900, check: bool = True) -> subprocess.CompletedProcess:
    """Run a command, echoing it and its output (pytest shows it on failure)."""
    print("$", " ".join(args), flush=True)
    result = subprocess.run(args, capture_output=True, text=True, timeout=timeout)
    print(result.stdout, result.stderr, sep="\n", flush=True)
    if check and result.returncode != 0:
        pytest.fail(f"{' '.join(args)} exited {result.returncode}: {result.stderr.strip()[-2000:]}")
    return result


@pytest.fixture(scope="module")
def kubeconfig(tmp_path_factory):
    """A fresh kind cluster from kind-configs/dev.yaml, deleted afterwards; yields its kubeconfig."""
    reason = missing_prerequisite()
    if reason:
        pytest.skip(reason)
    path = str(tmp_path_factory.mktemp("kind") / "kubeconfig")
    run("kind", "create", "cluster", "--name", CLUSTER, "--config", KIND_CONFIG, "--kubeconfig", path, "--wait", "180s")
    try:
        yield path
    finally:
        run("kind", "delete", "cluster", "--name", CLUSTER, check=False)


def slurmk8s(kubeconfig: str, *args: str, timeout: float = 1200) -> subprocess.CompletedProcess:
    """The slurmk8s CLI against the kind cluster."""
    return run(sys.executable, "-m", "slurmk8s.cli", *args, "--kubeconfig", kubeconfig, timeout=timeout)


def login_exec(kubeconfig: str, *command: str) -> str:
    """stdout of a command in the login pod (as `kubectl exec`)."""
    return run("kubectl", "--kubeconfig", kubeconfig, "-n", NAMESPACE, "exec", LOGIN_POD, "-c", LOGIN_CONTAINER,
               "--", *command, timeout=120).stdout


def test_up_run_a_job_status_noop_up_down(kubeconfig):
    up = slurmk8s(kubeconfig, "up", PROFILE, "--timeout", "900")
    assert "cluster dev is ready" in up.stdout

    job = login_exec(kubeconfig, "sbatch", "--parsable", "--nodes=2", "--wrap", "srun hostname").strip()
    assert job.split(";")[0].isdigit(), job
    state = wait_for(f"job {job} finished", deadline_s=300, every_s=3,
                     observe=lambda: login_exec(kubeconfig, "sacct", "-j", job, "-X", "-n", "-P", "-o", "State").strip(),
                     until=lambda s: s and s not in ("PENDING", "RUNNING", "COMPLETING"))
    assert state == "COMPLETED"

    status = slurmk8s(kubeconfig, "status", PROFILE)
    assert "StatefulSet/dev-cpu" in status.stdout and "2/2 ready" in status.stdout
    assert "debug*" in status.stdout  # sinfo from the controller lists the default partition

    again = slurmk8s(kubeconfig, "up", PROFILE, "--no-wait")
    assert again.stdout.strip().splitlines()[-1].startswith("no changes:")

    slurmk8s(kubeconfig, "down", PROFILE)
    left = run("kubectl", "--kubeconfig", kubeconfig, "-n", NAMESPACE, "get", "statefulsets,pods",
               "-l", "app.kubernetes.io/instance=dev", "-o", "name").stdout
    assert left.strip() == ""
    kept = run("kubectl", "--kubeconfig", kubeconfig, "-n", NAMESPACE, "get", "pvc,secrets",
               "-l", "app.kubernetes.io/instance=dev", "-o", "name").stdout
    assert "persistentvolumeclaim/statesave-dev-controller-0" in kept and "secret/dev-auth-key" in kept


TOPOLOGY_PROFILE = str(REPO / "profiles" / "kind-topology.yaml")


def test_topology_profile_pins_each_leaf_and_keeps_switches1_jobs_in_one_leaf(kubeconfig):
    """profiles/kind-topology.yaml on kind-configs/dev.yaml's labelled workers: discover prints the
    same sub-blocks, `up` applies one StatefulSet per leaf, each pod lands on a node carrying its
    leaf's labels, and a --switches=1 job of two nodes runs inside one sub-block."""
    discovered = slurmk8s(kubeconfig, "topology", "discover", "--labels", "gke", "--pool", "cpu").stdout
    for sub in ("subblock-a1", "subblock-a2", "subblock-b1"):
        assert f"name: {sub}" in discovered

    up = slurmk8s(kubeconfig, "up", TOPOLOGY_PROFILE, "--timeout", "900")
    assert "cluster topo is ready" in up.stdout
    pods = run("kubectl", "--kubeconfig", kubeconfig, "-n", NAMESPACE, "get", "pods", "-l",
               "app.kubernetes.io/instance=topo,app.kubernetes.io/component=worker", "-o",
               "jsonpath={range .items[*]}{.metadata.labels.slurmk8s\\.io/topology-domain} {.spec.nodeName}{\"\\n\"}{end}").stdout
    placed = [line.split() for line in pods.strip().splitlines()]
    assert len(placed) == 4
    for leaf, node in placed:
        label = run("kubectl", "--kubeconfig", kubeconfig, "get", "node", node, "-o",
                    "jsonpath={.metadata.labels.cloud\\.google\\.com/gce-topology-subblock}").stdout.strip()
        assert label == leaf, (leaf, node, label)

    login = "topo-login-0"
    job = run("kubectl", "--kubeconfig", kubeconfig, "-n", NAMESPACE, "exec", login, "-c", LOGIN_CONTAINER, "--",
              "srun", "-N2", "--switches=1", "hostname").stdout.split()
    assert sorted(job) == ["topo-cpu-subblock-a1-0", "topo-cpu-subblock-a1-1"]  # the only leaf with two nodes
    slurmk8s(kubeconfig, "down", TOPOLOGY_PROFILE)
