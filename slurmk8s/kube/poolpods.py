"""What a rollout reads and does through the API: the pool StatefulSets, their pods, a pod's deletion,
and the Slurm release the live workloads run."""

from __future__ import annotations

from slurmk8s import naming
from slurmk8s.kube.client import Kube, KubeApiError, Obj
from slurmk8s.kube.ownership import owned_selector
from slurmk8s.kube.resources import builtin
from slurmk8s.kube.scale import MERGE_PATCH
from slurmk8s.kube.wait import list_pods
from slurmk8s.render import Bundle
from slurmk8s.versions import key


def pool_statefulsets(kube: Kube, bundle: Bundle) -> list[Obj]:
    """The live slurmd StatefulSets of the cluster."""
    selector = f"{owned_selector(bundle.cluster)},{naming.LABEL_COMPONENT}={naming.WORKER}"
    listing = kube.request("GET", builtin("apps/v1", "StatefulSet").collection(bundle.namespace),
                           what="list statefulsets", query=[("labelSelector", selector)])
    return sorted(listing.items(), key=lambda s: s["metadata"]["name"])


def pool_workloads(kube: Kube, bundle: Bundle) -> list[Obj]:
    """The live slurmd StatefulSets, then the side-by-side slurmd DaemonSets, of the cluster (what a rollout replaces
    pods of)."""
    selector = f"{owned_selector(bundle.cluster)},{naming.LABEL_COMPONENT}={naming.WORKER}"
    listing = kube.request("GET", builtin("apps/v1", "DaemonSet").collection(bundle.namespace),
                           what="list daemonsets", query=[("labelSelector", selector)])
    return pool_statefulsets(kube, bundle) + sorted(listing.items(), key=lambda d: d["metadata"]["name"])


def worker_pods(kube: Kube, bundle: Bundle) -> list[Obj]:
    """The live slurmd pods of the cluster."""
    return list_pods(kube, bundle, component=naming.WORKER)


def delete_pod(kube: Kube, namespace: str, name: str) -> None:
    """Delete one pod (its StatefulSet makes it anew on the update revision); gone already is fine."""
    try:
        kube.request("DELETE", builtin("v1", "Pod").item(namespace, name), what=f"delete pod {name}")
    except KubeApiError as e:
        if e.status != 404:
            raise


def live_slurm_versions(kube: Kube, bundle: Bundle) -> dict[str, str]:
    """component -> Slurm release its live StatefulSet runs (the slurm-version annotation), for slurmdbd,
    slurmctld and slurmd; the oldest of a component's StatefulSets wins."""
    listing = kube.request("GET", builtin("apps/v1", "StatefulSet").collection(bundle.namespace),
                           what=f"list statefulsets in {bundle.namespace}",
                           query=[("labelSelector", owned_selector(bundle.cluster))])
    out: dict[str, str] = {}
    for sts in listing.items():
        component = (sts["metadata"].get("labels") or {}).get(naming.LABEL_COMPONENT)
        version = (sts["metadata"].get("annotations") or {}).get(naming.ANNOTATION_SLURM_VERSION)
        if component in (naming.ACCOUNTING, naming.CONTROLLER, naming.WORKER) and version:
            out[component] = min(version, out.get(component, version), key=key)
    return out


def clear_rolling_update(kube: Kube, bundle: Bundle) -> list[str]:
    """Switch live pool StatefulSets that are not OnDelete yet with a merge patch that also drops the
    API server's defaulted `rollingUpdate` (server-side apply leaves a defaulted field in place, and the
    API refuses it beside OnDelete: kubernetes/kubernetes#100151). Returns the names switched."""
    wanted = {o["metadata"]["name"] for o in bundle.objects if o["kind"] == "StatefulSet"
              and (o["spec"].get("updateStrategy") or {}).get("type") == "OnDelete"}
    switched = []
    for sts in pool_statefulsets(kube, bundle):
        name = sts["metadata"]["name"]
        strategy = (sts.get("spec") or {}).get("updateStrategy") or {}
        if name in wanted and (strategy.get("type") != "OnDelete" or "rollingUpdate" in strategy):
            kube.request("PATCH", builtin("apps/v1", "StatefulSet").item(bundle.namespace, name),
                         what=f"switch StatefulSet/{name} to OnDelete", content_type=MERGE_PATCH,
                         body={"spec": {"updateStrategy": {"type": "OnDelete", "rollingUpdate": None}}},
                         query=[("fieldManager", naming.MANAGER)])
            switched.append(name)
    return switched
