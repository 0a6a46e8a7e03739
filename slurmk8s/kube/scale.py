"""statefulsets/scale through the API (what `slurmk8s scale` and the power-saving programs use)."""

from __future__ import annotations

from slurmk8s.kube.client import Kube

MERGE_PATCH = "application/merge-patch+json"


def scale_path(namespace: str, statefulset: str) -> str:
    return f"/apis/apps/v1/namespaces/{namespace}/statefulsets/{statefulset}/scale"


def get_replicas(kube: Kube, namespace: str, statefulset: str) -> int:
    """spec.replicas of a StatefulSet, through its scale subresource."""
    found = kube.request("GET", scale_path(namespace, statefulset), what=f"read scale of StatefulSet/{statefulset}")
    return int(found.body.get("spec", {}).get("replicas", 0))


def set_replicas(kube: Kube, namespace: str, statefulset: str, replicas: int) -> None:
    """Patch spec.replicas through the scale subresource (an update, not an apply: no field-manager fight)."""
    kube.request("PATCH", scale_path(namespace, statefulset), what=f"scale StatefulSet/{statefulset}",
                 query=[("fieldManager", "slurmk8s-scale")], body={"spec": {"replicas": replicas}},
                 content_type=MERGE_PATCH)
