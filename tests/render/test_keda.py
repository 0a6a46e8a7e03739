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


def test_keda_never_scales_a_pool_in_slurm_does():
    """With minReplicaCount 0 KEDA would scale the pool to 0 after its cooldown while jobs run; paused-scale-in stops
    that and disables its HPA's scale-down."""
    scaled = render(load_profile(yaml.safe_dump(PROFILE).encode())).of_kind("ScaledObject")[0]
    assert scaled["metadata"]["annotations"] == {"autoscaling.keda.sh/paused-scale-in": "true"}


TOPOLOGY = {**PROFILE, "spec": {**PROFILE["spec"], "topology": {"plugin": "tree", "domains": [
    {"name": "r1", "nodeLabels": {"example.com/rack": "r1"}, "slots": {"gpu": 2, "cpu": 4}},
    {"name": "r2", "nodeLabels": {"example.com/rack": "r2"}, "slots": {"gpu": 6}}]}}}


def test_with_topology_each_leaf_statefulset_gets_its_own_scaledobject():
    doc = {**TOPOLOGY, "spec": {**TOPOLOGY["spec"], "pools": [dict(TOPOLOGY["spec"]["pools"][0], minReplicas=3, replicas=3),
                                                              TOPOLOGY["spec"]["pools"][1]]}}
    bundle = render(load_profile(yaml.safe_dump(doc).encode()))
    scaled = bundle.of_kind("ScaledObject")
    targets = [s["spec"]["scaleTargetRef"]["name"] for s in scaled]
    assert targets == ["k-gpu-r1", "k-gpu-r2"]
    assert all(bundle.find("StatefulSet", t) for t in targets)  # each target exists
    assert [s["metadata"]["name"] for s in scaled] == targets
    # each leaf within its share of the pool's 3..8: r1 holds gpu-0..1, r2 gpu-2..7
    assert [(s["spec"]["minReplicaCount"], s["spec"]["maxReplicaCount"]) for s in scaled] == [(2, 2), (1, 6)]
    assert [validate_custom_resource(s) for s in scaled] == [[], []]
    assert all(s["metadata"]["annotations"]["autoscaling.keda.sh/paused-scale-in"] == "true" for s in scaled)


def test_with_topology_each_scaledobject_syncs_after_its_own_statefulset_in_argocd():
    from slurmk8s.output.argocd import ANNOTATION_SYNC_WAVE, waved_objects
    objects = waved_objects(render(load_profile(yaml.safe_dump(TOPOLOGY).encode())))
    wave = {(o["kind"], o["metadata"]["name"]): int(o["metadata"]["annotations"][ANNOTATION_SYNC_WAVE]) for o in objects
            if ANNOTATION_SYNC_WAVE in o["metadata"].get("annotations", {})}  # hooks (the rollout's) have no wave
    scaled = [o for o in objects if o["kind"] == "ScaledObject"]
    assert len(scaled) == 2
    for so in scaled:
        assert wave[("ScaledObject", so["metadata"]["name"])] == wave[("StatefulSet", so["spec"]["scaleTargetRef"]["name"])] + 1
    assert {wave[("StatefulSet", "k-gpu-r1")], wave[("StatefulSet", "k-gpu-r2")]} == {4}
