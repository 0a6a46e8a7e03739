"""statefulsets/scale through the API (what `slurmk8s scale` and the power-saving programs use)."""

from __future__ import annotations

from slurmk8s.errors import ClusterError
from slurmk8s.kube.client import Kube, dig

MERGE_PATCH = "application/merge-patch+json"


def scale_path(namespace: str, statefulset: str) -> str:
    return f"/apis/apps/v1/namespaces/{namespace}/statefulsets/{statefulset}/scale"


def get_replicas(kube: Kube, namespace: str, statefulset: str) -> int:
    """spec.replicas of a StatefulSet, through its scale subresource."""
    found = kube.request("GET", scale_path(namespace, statefulset), what=f"read scale of StatefulSet/{statefulset}")
    replicas = dig(found.body, "spec", "replicas", default=0)
    if not isinstance(replicas, int):
        raise ClusterError(f"read scale of StatefulSet/{statefulset}: malformed reply from the Kubernetes API: "
                           f"spec.replicas is {replicas!r}")
    return replicas


def set_replicas(kube: Kube, namespace: str, statefulset: str, replicas: int) -> None:
    """Patch spec.replicas through the scale subresource (an update, not an apply: no field-manager fight)."""
    kube.request("PATCH", scale_path(namespace, statefulset), what=f"scale StatefulSet/{statefulset}",
                 query=[("fieldManager", "slurmk8s-scale")], body={"spec": {"replicas": replicas}},
                 content_type=MERGE_PATCH)
