"""Side-by-side in pod mode on a real kubelet: kind-configs/side-by-side.yaml, whose worker2 runs
the static CPU manager with CPU 0 reserved, and profiles/side-by-side-pod.yaml, whose slurmd
DaemonSet is Guaranteed on that node so the kubelet pins it to CPUs of its own.

The example profile describes a 4-CPU node; kind nodes here have this machine's CPUs, so the
test's copy describes the node it runs on (see this_machine).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.e2e.conftest import NAMESPACE, REPO, Cluster, kind_cluster, local_profile, sinfo_states, wait_until

pytestmark = pytest.mark.e2e

SHARED_NODE = "slurmk8s-sbs-worker2"  # kind names node 3 of cluster slurmk8s-sbs so; the profile lists it
LOGIN, LOGIN_CONTAINER = "sbs-login-0", "sshd"
SLURM_CPU = "1"


def this_machine(profile: dict) -> None:
    """The shape of a kind node on this machine: CPU 0 reserved for the system (the kind config's
    reserved-cpus), CPU 1 exclusively Slurm's, the rest (if any) Kubernetes'."""
    # The pool elastic from 0: its 1-CPU pod and the Slurm daemons fit the other 2-CPU worker.
    profile["spec"]["pools"][0].update(replicas=0, minReplicas=0, maxReplicas=1)
    shape = profile["spec"]["sideBySide"]["shapes"][0]
    shape.update(cpus=f"0-{os.cpu_count() - 1}", memory="4Gi", system={"cpus": "0", "memory": "512Mi"},
                 slurm={"cpus": SLURM_CPU, "memory": "1Gi"})


@pytest.fixture(scope="module")
def sbs(tmp_path_factory) -> Cluster:
    profile = local_profile(REPO / "profiles" / "side-by-side-pod.yaml", tmp_path_factory.mktemp("sbs") / "sbs.yaml",
                            this_machine)
    with kind_cluster("slurmk8s-sbs", REPO / "kind-configs" / "side-by-side.yaml") as cluster:
        up = cluster.slurmk8s("up", str(profile), "--timeout", "900")
        assert "cluster sbs is ready" in up.stdout
        yield cluster


def shared_pod(cluster: Cluster) -> str:
    names = cluster.jsonpath("-n", NAMESPACE, "get", "pods", "-l", "slurmk8s.io/shape=kind",
                             path="{.items[*].metadata.name}").split()
    assert len(names) == 1, names
    return names[0]


def test_slurmd_on_the_shared_node_registers(sbs: Cluster) -> None:
    states = wait_until(lambda: (s := sinfo_states(sbs, LOGIN, LOGIN_CONTAINER)).get(SHARED_NODE) == "idle" and s,
                        120, f"{SHARED_NODE} idle in sinfo")
    assert states[SHARED_NODE] == "idle"
    node = sbs.jsonpath("-n", NAMESPACE, "get", "pod", shared_pod(sbs), path="{.spec.nodeName}")
    assert node == SHARED_NODE


def test_the_kubelet_pins_slurmd_to_its_exclusive_cpu(sbs: Cluster) -> None:
    """Guaranteed QoS with whole CPUs under the static CPU manager: slurmd's cpuset is exactly
    Slurm's share, not the reserved system CPU."""
    pod = shared_pod(sbs)
    assert sbs.jsonpath("-n", NAMESPACE, "get", "pod", pod, path="{.status.qosClass}") == "Guaranteed"
    cpus = sbs.exec(pod, "slurmd", "cat", "/sys/fs/cgroup/cpuset/cpuset.cpus").stdout.strip()
    assert cpus == SLURM_CPU


def test_a_job_on_the_shared_node_runs_on_slurms_cpu_only(sbs: Cluster) -> None:
    out = sbs.exec(LOGIN, LOGIN_CONTAINER, "srun", "-p", "shared", "-w", SHARED_NODE,
                   "grep", "Cpus_allowed_list", "/proc/self/status", timeout=300).stdout
    assert out.split() == ["Cpus_allowed_list:", SLURM_CPU]
