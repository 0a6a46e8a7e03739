"""Prune and `down` cover every kind through one ApplySet inventory (issue 16, KEP-3659).

Before: prune and down knew nine kinds, so the KEDA ScaledObject was never pruned nor deleted, and a
re-`up` reported PVCs and ScaledObjects "configured" because they were never listed to compare.
"""

from __future__ import annotations

import base64
import hashlib

import pytest

from conftest import GPU_IB, KIND_DEV, object_count

from slurmk8s.errors import ClusterError
from slurmk8s.kube.applyset import applyset_id, group_kind

NS = "/api/v1/namespaces/hpc"
PART_OF = "applyset.kubernetes.io/part-of"
KINDS = "applyset.kubernetes.io/contains-group-kinds"


def parent(stub, ns: str = "hpc", name: str = "research-applyset") -> dict | None:
    return stub.get(f"/api/v1/namespaces/{ns}/configmaps", name)


def test_the_id_is_kubectls() -> None:
    """applyset-<base64url(sha256(<name>.<namespace>.<kind>.<group>)) unpadded>-v1, a valid label value."""
    digest = hashlib.sha256(b"research-applyset.hpc.ConfigMap.").digest()
    expected = "applyset-" + base64.urlsafe_b64encode(digest).decode().rstrip("=") + "-v1"
    assert applyset_id("research-applyset", "hpc") == expected
    assert len(expected) <= 63 and "=" not in expected
    assert (group_kind("v1", "Secret"), group_kind("apps/v1", "StatefulSet"),
            group_kind("keda.sh/v1alpha1", "ScaledObject")) == ("Secret", "StatefulSet.apps", "ScaledObject.keda.sh")


def test_every_applied_object_and_secret_joins_the_set(stub, up):
    up(GPU_IB)
    set_id = applyset_id("research-applyset", "hpc")
    applied = [r for r in stub.calls("PATCH") if r.name != "research-applyset"]
    assert applied and all(r.body["metadata"]["labels"][PART_OF] == set_id for r in applied)
    created = stub.calls("POST", "/secrets")
    assert created and all(r.body["metadata"]["labels"][PART_OF] == set_id for r in created)
    meta = parent(stub)["metadata"]
    assert meta["labels"]["applyset.kubernetes.io/id"] == set_id
    assert meta["annotations"]["applyset.kubernetes.io/tooling"].startswith("slurmk8s/v")
    kinds = meta["annotations"][KINDS].split(",")
    assert kinds == sorted(kinds)
    assert {"Namespace", "Secret", "PersistentVolumeClaim", "ScaledObject.keda.sh", "StatefulSet.apps",
            "NetworkPolicy.networking.k8s.io"} <= set(kinds)


def test_a_second_up_reports_no_change_for_any_kind(stub, up):
    """PVCs and ScaledObjects were reported 'configured' on every re-up."""
    up(GPU_IB)
    plan, lines = up(GPU_IB)
    assert not plan.changed
    assert {c.action for c in plan.changes} == {"unchanged", "kept"}
    assert lines[-1] == f"no changes: {object_count(GPU_IB)} objects unchanged, 5 of 5 secrets kept"


def test_a_scaled_object_the_profile_dropped_is_pruned(stub, up, edited_profile):
    up(GPU_IB)
    assert stub.names(f"{NS.replace('/api/v1', '/apis/keda.sh/v1alpha1')}/scaledobjects") == ["research-h100"]
    no_keda = edited_profile(GPU_IB, lambda p: [pool.pop("keda", None) for pool in p["spec"]["pools"]])
    dry, _ = up(no_keda, dry_run=True)
    assert [c.ref for c in dry.changes if c.action == "pruned"] == ["ScaledObject/research-h100"]
    plan, lines = up(no_keda)
    assert [c.ref for c in plan.changes if c.action == "pruned"] == ["ScaledObject/research-h100"]
    assert stub.names("/apis/keda.sh/v1alpha1/namespaces/hpc/scaledobjects") == []
    assert "ScaledObject.keda.sh" not in parent(stub)["metadata"]["annotations"][KINDS]
    # KEDA may now be uninstalled: its kind is no longer served, and up does not need it
    stub.discovery.pop("/apis/keda.sh/v1alpha1")
    again, _ = up(no_keda)
    assert not again.changed


def test_down_deletes_the_scaled_object_too(stub, up, kubeconfig):
    from slurmk8s.actions.down import run_down
    from slurmk8s.kube.kubecluster import KubeCluster
    up(GPU_IB)
    lines: list[str] = []
    plan = run_down(GPU_IB, KubeCluster(kubeconfig), wait=False, echo=lines.append)
    assert "ScaledObject/research-h100" in [c.ref for c in plan.changes if c.action == "deleted"]
    assert stub.names("/apis/keda.sh/v1alpha1/namespaces/hpc/scaledobjects") == []
    # the data stays, and so does the inventory that lists it
    assert stub.names(f"{NS}/persistentvolumeclaims") == [
        "research-controller-statesave", "research-db-backup", "research-home"]  # /home and the dumps too
    assert parent(stub)["metadata"]["annotations"][KINDS] == "Namespace,PersistentVolumeClaim,Secret"
    run_down(GPU_IB, KubeCluster(kubeconfig), wait=False, delete_data=True, yes=True, echo=lines.append)
    assert parent(stub) is None and stub.names(f"{NS}/persistentvolumeclaims") == []


def test_objects_applied_before_applysets_are_still_pruned(stub, up):
    """An upgrade keeps working: our labels and field manager without a part-of label count as members."""
    ours = {"app.kubernetes.io/instance": "dev", "app.kubernetes.io/managed-by": "slurmk8s"}
    up(KIND_DEV)
    stub.seed("/apis/apps/v1/namespaces/slurm/deployments", {"kind": "Deployment", "apiVersion": "apps/v1",
                                                            "metadata": {"name": "dev-old", "labels": ours},
                                                            "spec": {"replicas": 0, "template": {"metadata": {}}}})
    plan, _ = up(KIND_DEV)
    assert [c.ref for c in plan.changes if c.action == "pruned"] == ["Deployment/dev-old"]


def test_a_member_of_another_applyset_is_never_pruned(stub, up):
    labels = {"app.kubernetes.io/instance": "dev", "app.kubernetes.io/managed-by": "slurmk8s",
              PART_OF: applyset_id("someone-else", "slurm")}
    up(KIND_DEV)
    stub.seed("/api/v1/namespaces/slurm/configmaps", {"kind": "ConfigMap", "metadata": {"name": "dev-x", "labels": labels}})
    plan, _ = up(KIND_DEV)
    assert plan.count("pruned") == 0 and "dev-x" in stub.names("/api/v1/namespaces/slurm/configmaps")


def test_a_parent_name_held_by_another_tool_is_refused_before_any_write(stub, up):
    stub.seed("/api/v1/namespaces", {"kind": "Namespace", "metadata": {"name": "slurm"}})
    stub.seed("/api/v1/namespaces/slurm/configmaps", {"kind": "ConfigMap", "metadata": {
        "name": "dev-applyset", "labels": {"applyset.kubernetes.io/id": applyset_id("dev-applyset", "slurm")},
        "annotations": {"applyset.kubernetes.io/tooling": "kubectl/v1.31"}}})
    stub.reset_log()
    with pytest.raises(ClusterError, match="ConfigMap/dev-applyset in namespace slurm is not the ApplySet parent "
                                           "slurmk8s keeps for cluster dev .*tooling kubectl/v1.31"):
        up(KIND_DEV)
    assert [r for r in stub.requests if r.method != "GET"] == []
