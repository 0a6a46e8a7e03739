"""Nudge a pod so the kubelet syncs it now (a ConfigMap volume refreshed without its periodic sync)."""

from __future__ import annotations

from slurmk8s.kube.client import APPLY_PATCH, Kube
from slurmk8s.kube.ownership import FIELD_MANAGER


def annotate_pod(kube: Kube, namespace: str, pod: str, key: str, value: str) -> None:
    """Set one annotation on a pod (its own field manager): the kubelet syncs the pod at once,
    which refreshes its ConfigMap volumes without waiting for its periodic sync."""
    kube.request("PATCH", f"/api/v1/namespaces/{namespace}/pods/{pod}", what=f"annotate Pod/{pod}",
                 body={"apiVersion": "v1", "kind": "Pod", "metadata": {"name": pod, "namespace": namespace,
                                                                       "annotations": {key: value}}},
                 content_type=APPLY_PATCH, query=[("fieldManager", f"{FIELD_MANAGER}-reconfigure"), ("force", "true")])
