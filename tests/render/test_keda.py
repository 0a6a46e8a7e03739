"""KEDA ScaledObjects: scale an elastic pool up on a metric, never down (Slurm shrinks it)."""

from __future__ import annotations

import yaml

from crdschema import validate_custom_resource
from slurmk8s.profile import load_profile
from slurmk8s.render import render

PROFILE = {
    "apiVersion": "slurmk8s.io/v1alpha1", "kind": "ClusterProfile", "metadata": {"name": "k"},
    "spec": {"metrics": {"enabled": True}, "pools": [
        {"name": "gpu", "replicas": 1, "minReplicas": 0, "maxReplicas": 8, "cpus": 4, "memory": "8Gi",
         "keda": {"serverAddress": "http://prom:9090", "query": "sum(pending)", "threshold": "2"}},
        {"name": "cpu", "replicas": 2, "maxReplicas": 4, "cpus": 2, "memory": "2Gi"},
    ]},
}


def test_only_pools_with_keda_get_a_valid_scaledobject_on_their_statefulset():
    bundle = render(load_profile(yaml.safe_dump(PROFILE).encode()))
    scaled = bundle.of_kind("ScaledObject")
    assert [s["metadata"]["name"] for s in scaled] == ["k-gpu"]
    spec = scaled[0]["spec"]
    assert spec["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "k-gpu"}
    assert bundle.find("StatefulSet", "k-gpu")
    assert (spec["minReplicaCount"], spec["maxReplicaCount"], spec["pollingInterval"]) == (0, 8, 30)
    assert spec["advanced"]["horizontalPodAutoscalerConfig"]["behavior"]["scaleDown"] == {"selectPolicy": "Disabled"}
    assert spec["triggers"] == [{"type": "prometheus", "metadata": {"serverAddress": "http://prom:9090",
                                                                    "query": "sum(pending)", "threshold": "2"}}]
    assert validate_custom_resource(scaled[0]) == []


def test_a_keda_pool_stays_under_slurm_power_saving():
    bundle = render(load_profile(yaml.safe_dump(PROFILE).encode()))
    pools = bundle.find("ConfigMap", "k-power")["data"]["pools.json"]
    assert '"k-gpu"' in pools  # Slurm's SuspendProgram still shrinks it
