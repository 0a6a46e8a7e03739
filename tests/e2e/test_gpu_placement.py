"""GPU placement on a real scheduler: two pods of one GPU pool never share a Kubernetes node.

kind nodes have no GPUs, so the test advertises nvidia.com/gpu on a worker as an extended resource
(a PATCH of the node's status capacity, as
https://kubernetes.io/docs/tasks/administer-cluster/extended-resource-node/ describes): 8 on one
worker, enough for both 2-GPU pods of the pool. Without the pool's anti-affinity the scheduler
could put both there; with it, one runs there and the other stays Pending until a second worker
has GPUs. Only the pool's StatefulSet, its namespace and ServiceAccount are applied: scheduling is
under test, not slurmd (there are no /dev/nvidia* here).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from slurmk8s.profile.files import read_profile
from slurmk8s.render import render
from tests.e2e.conftest import NAMESPACE, Cluster, kind_cluster, local_profile, wait_until, REPO

pytestmark = pytest.mark.e2e

NAME = "slurmk8s-gpu"
WORKERS = [f"{NAME}-worker", f"{NAME}-worker2"]  # kind's names for the config's two workers
KIND_CONFIG = {"kind": "Cluster", "apiVersion": "kind.x-k8s.io/v1alpha4",
               "nodes": [{"role": "control-plane"}, {"role": "worker"}, {"role": "worker"}]}


def gpu_pool(profile: dict) -> None:
    profile["metadata"]["name"] = "gpuplace"
    profile["spec"]["pools"] = [{"name": "gpu", "replicas": 2, "maxReplicas": 2, "cpus": 1, "memory": "512Mi",
                                 "gpus": {"count": 2, "type": "fake"}}]
    profile["spec"]["partitions"] = [{"name": "gpu", "pools": ["gpu"], "default": True}]


@pytest.fixture(scope="module")
def gpu_cluster(tmp_path_factory) -> Cluster:
    work = tmp_path_factory.mktemp("gpu")
    config = work / "kind.yaml"
    config.write_text(yaml.safe_dump(KIND_CONFIG))
    profile = local_profile(REPO / "profiles" / "kind-dev.yaml", work / "gpuplace.yaml", gpu_pool)
    bundle = render(read_profile(profile))
    wanted = [o for o in bundle.objects
              if o["kind"] == "Namespace"
              or (o["kind"] in ("ServiceAccount", "StatefulSet") and o["metadata"]["name"] in ("gpuplace-worker", "gpuplace-gpu"))]
    assert [o["kind"] for o in wanted] == ["Namespace", "ServiceAccount", "StatefulSet"], [o["kind"] for o in wanted]
    with kind_cluster(NAME, config) as cluster:
        advertise_gpus(cluster, WORKERS[0], 8)
        cluster.kubectl("apply", "-f", "-", input="\n---\n".join(yaml.safe_dump(o) for o in wanted))
        yield cluster


def advertise_gpus(cluster: Cluster, node: str, count: int) -> None:
    patch = [{"op": "add", "path": "/status/capacity/nvidia.com~1gpu", "value": str(count)}]
    cluster.kubectl("patch", "node", node, "--subresource=status", "--type=json", "-p", json.dumps(patch))
    wait_until(lambda: cluster.jsonpath("get", "node", node, path="{.status.allocatable.nvidia\\.com/gpu}") == str(count),
               60, f"{node} to offer {count} nvidia.com/gpu")


def placements(cluster: Cluster) -> dict[str, tuple[str, str]]:
    """{pod: (node or '', the scheduler's Unschedulable message or '')} of the pool's pods."""
    pods = json.loads(cluster.kubectl("-n", NAMESPACE, "get", "pods", "-l", "slurmk8s.io/pool=gpu", "-o", "json").stdout)
    out = {}
    for pod in pods["items"]:
        unschedulable = next((c.get("message", "") for c in pod["status"].get("conditions", [])
                              if c["type"] == "PodScheduled" and c["status"] == "False" and c.get("reason") == "Unschedulable"), "")
        out[pod["metadata"]["name"]] = (pod["spec"].get("nodeName", ""), unschedulable)
    return out


def test_the_second_gpu_pod_waits_rather_than_share_the_only_gpu_node(gpu_cluster: Cluster) -> None:
    def settled() -> dict | None:
        p = placements(gpu_cluster)
        return p if len(p) == 2 and all(node or why for node, why in p.values()) else None

    seen = wait_until(settled, 180, "both GPU pods scheduled or found unschedulable")
    nodes = sorted(node for node, _ in seen.values() if node)
    assert nodes == [WORKERS[0]], seen  # room for both there, yet only one runs there
    (why,) = [why for node, why in seen.values() if not node]
    assert "anti-affinity" in why, why


def test_a_second_gpu_node_takes_the_waiting_pod(gpu_cluster: Cluster) -> None:
    advertise_gpus(gpu_cluster, WORKERS[1], 8)
    def scheduled() -> dict | None:
        p = placements(gpu_cluster)
        return p if len(p) == 2 and all(node for node, _ in p.values()) else None

    seen = wait_until(scheduled, 180, "both GPU pods scheduled")
    assert sorted(node for node, _ in seen.values()) == WORKERS, seen
