"""Apply order: which stage each object belongs to (pure; no client import).

Objects of one stage do not depend on each other and are applied in parallel; a stage
starts when the previous one has been accepted by the API server.
"""

from __future__ import annotations

from typing import Any, Iterable

from slurmk8s import naming

_FOUNDATION = [
    ("namespace", {"Namespace"}),
    ("service accounts and RBAC", {"ServiceAccount", "Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding"}),
    ("secrets", {"Secret"}),
    ("config maps", {"ConfigMap"}),
]
# A ScaledObject goes out with the workload it scales.
WORKLOADS = {"StatefulSet", "Deployment", "DaemonSet", "Job", "ScaledObject"}
NETWORK_AND_STORAGE = "services, claims, policies"
# Workloads start in the order their daemons need each other: the database before slurmdbd,
# slurmdbd before slurmctld registers the cluster, slurmctld before slurmd and clients.
COMPONENT_ORDER = (naming.DATABASE, naming.ACCOUNTING, naming.CONTROLLER, naming.WORKER, naming.LOGIN, naming.RESTAPI)
STAGE_NAMES = tuple([n for n, _ in _FOUNDATION] + [NETWORK_AND_STORAGE] + list(COMPONENT_ORDER) + ["other workloads"])


def stage_of(obj: dict[str, Any]) -> int:
    """Index into STAGE_NAMES of the stage that applies obj."""
    kind = obj["kind"]
    for i, (_, kinds) in enumerate(_FOUNDATION):
        if kind in kinds:
            return i
    if kind not in WORKLOADS:
        return len(_FOUNDATION)
    component = (obj.get("metadata", {}).get("labels") or {}).get(naming.LABEL_COMPONENT)
    if component in COMPONENT_ORDER:
        return len(_FOUNDATION) + 1 + COMPONENT_ORDER.index(component)
    return len(STAGE_NAMES) - 1


def group_by_stage(objects: Iterable[dict[str, Any]]) -> list[tuple[str, list[dict[str, Any]]]]:
    """Non-empty stages in apply order, each with its objects in their given order."""
    buckets: dict[int, list[dict[str, Any]]] = {}
    for obj in objects:
        buckets.setdefault(stage_of(obj), []).append(obj)
    return [(STAGE_NAMES[i], buckets[i]) for i in sorted(buckets)]


def object_ref(obj: dict[str, Any]) -> str:
    """Kind/name, as kubectl prints it."""
    return f"{obj['kind']}/{obj['metadata']['name']}"
