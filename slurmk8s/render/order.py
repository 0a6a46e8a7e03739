"""The install order: one table, as helm's InstallOrder is, that every way of deploying reads.

`up` applies stage by stage (kube/stages.py): a stage starts once the API server accepted the
previous one, and its objects go out in parallel. Argo CD syncs wave by wave (output/argocd.py),
waiting for each wave to be healthy. Both come from INSTALL_ORDER, so they cannot disagree.

The first rows place objects by kind; the workload rows by component, in the order the daemons
start (naming.COMPONENTS). Waves are coarser than stages: slurmd, login and slurmrestd need only
slurmctld, so Argo CD may start them together.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from slurmk8s import naming

SECRETS = "secrets"  # `up` creates the bundle's RequiredSecrets in this stage
OTHER = "services, claims, policies"  # every kind no other row names


@dataclass(frozen=True)
class Stage:
    """One row: the objects it holds (by kind, or workloads by component) and their Argo CD sync wave."""

    name: str
    kinds: frozenset[str] = frozenset()
    component: str | None = None
    wave: int = 0


# A ScaledObject goes out with the workload it scales (Argo CD: in the wave after it, output/argocd.py); a CronJob
# (the tokens') with the other workloads, once slurmctld is there to answer it.
WORKLOAD_KINDS = frozenset(naming.POD_TEMPLATE_KINDS + ("ScaledObject", "CronJob"))

INSTALL_ORDER: tuple[Stage, ...] = (
    Stage("namespace", frozenset({"Namespace"})),
    Stage("service accounts and RBAC",
          frozenset({"ServiceAccount", "Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding"})),
    Stage(SECRETS, frozenset({"Secret"})),
    Stage("config maps", frozenset({"ConfigMap"})),
    Stage(OTHER),
    Stage(naming.DATABASE, WORKLOAD_KINDS, naming.DATABASE, wave=1),
    Stage(naming.ACCOUNTING, WORKLOAD_KINDS, naming.ACCOUNTING, wave=2),
    Stage(naming.CONTROLLER, WORKLOAD_KINDS, naming.CONTROLLER, wave=3),
    Stage(naming.WORKER, WORKLOAD_KINDS, naming.WORKER, wave=4),
    Stage(naming.LOGIN, WORKLOAD_KINDS, naming.LOGIN, wave=4),
    Stage(naming.RESTAPI, WORKLOAD_KINDS, naming.RESTAPI, wave=4),
    Stage("other workloads", WORKLOAD_KINDS, wave=4),  # a workload of no known component: last
)
STAGE_NAMES = tuple(s.name for s in INSTALL_ORDER)
_BY_KIND = {kind: i for i, s in enumerate(INSTALL_ORDER) if s.component is None for kind in s.kinds
            if kind not in WORKLOAD_KINDS}
_BY_COMPONENT: dict[str | None, int] = {s.component: i for i, s in enumerate(INSTALL_ORDER) if s.component is not None}


def stage_of(obj: dict[str, Any]) -> int:
    """Index into INSTALL_ORDER of the stage that applies obj."""
    kind = obj["kind"]
    if kind not in WORKLOAD_KINDS:
        return _BY_KIND.get(kind, STAGE_NAMES.index(OTHER))
    component = (obj.get("metadata", {}).get("labels") or {}).get(naming.LABEL_COMPONENT)
    return _BY_COMPONENT.get(component, len(INSTALL_ORDER) - 1)
