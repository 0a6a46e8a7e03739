"""KubeCluster: the Kubernetes side of the interface actions talk through (actions/interface.py).

Each method is one of this package's functions bound to one API connection, made on first use:
a command that refuses its input never reads a kubeconfig.
"""

from __future__ import annotations

from typing import Callable

from slurmk8s import naming
from slurmk8s.kube import poolpods as live
from slurmk8s.kube.apply import Plan, apply_bundle, ensure_secrets, refuse_unowned
from slurmk8s.kube.client import Access, Kube, Obj, connect, dig, request_budget
from slurmk8s.kube.execpod import exec_in_pod
from slurmk8s.kube.inspect import ClusterStatus, cluster_status
from slurmk8s.kube.nodes import list_node_labels
from slurmk8s.kube.podnudge import annotate_pod
from slurmk8s.kube.resources import builtin
from slurmk8s.kube.scale import get_replicas, set_replicas
from slurmk8s.kube.teardown import tear_down
from slurmk8s.kube.wait import wait_until_usable
from slurmk8s.render import Bundle, RequiredSecret

CONTROLLER_CONTAINER = naming.DAEMON[naming.CONTROLLER]


class KubeCluster:
    """A Kubernetes cluster reached as kubectl would (--kubeconfig, --context), through one Kube handle."""

    def __init__(self, kubeconfig: str | None = None, context: str | None = None, *, verbose: bool = False,
                 timeout: float = 60, pool_size: int = 16):
        self.access = Access(kubeconfig, context)
        self.verbose, self.pool_size = verbose, pool_size
        self.timeout = request_budget(timeout)
        self._kube: Kube | None = None

    @property
    def kube(self) -> Kube:
        """The API connection, made on first use."""
        if self._kube is None:
            self._kube = connect(self.access, verbose=self.verbose, pool_size=self.pool_size, timeout=self.timeout)
        return self._kube

    @property
    def source(self) -> str:
        return self.kube.source

    @property
    def context(self) -> dict[str, str | None]:
        """The kubeconfig context, its file and the API server, for -o json|yaml (name and file None in-cluster)."""
        return {"name": self.kube.context_name, "file": self.kube.kubeconfig, "server": self.kube.host}

    @property
    def host(self) -> str:
        return self.kube.host

    def get_replicas(self, bundle: Bundle, statefulset: str) -> int:
        return get_replicas(self.kube, bundle.namespace, statefulset)

    def set_replicas(self, bundle: Bundle, statefulset: str, replicas: int) -> None:
        set_replicas(self.kube, bundle.namespace, statefulset, replicas)

    def live_replicas(self, bundle: Bundle, statefulset: str) -> int | None:
        found = self.kube.request("GET", builtin("apps/v1", "StatefulSet").item(bundle.namespace, statefulset),
                                  what=f"read StatefulSet/{statefulset}", tolerate=(404,))
        replicas = dig(found.body, "spec", "replicas") if found.status == 200 else None
        return replicas if isinstance(replicas, int) else None

    def slurm(self, bundle: Bundle, argv: list[str]) -> str:
        pod = naming.controller_pod(bundle.cluster)
        return exec_in_pod(self.kube, bundle.namespace, pod, CONTROLLER_CONTAINER, argv)

    def _slurm_of(self, bundle: Bundle) -> Callable[[list[str]], str]:
        return lambda argv: self.slurm(bundle, argv)

    def apply(self, bundle: Bundle, make_secret: Callable[[RequiredSecret], Obj], *, workers: int = 8,
              force_conflicts: bool = False, dry_run: bool = False, prune: bool = True,
              before_writes: Callable[[], None] | None = None, adopt: tuple[str, ...] = ()) -> Plan:
        return apply_bundle(self.kube, bundle, make_secret, workers=workers, force_conflicts=force_conflicts,
                            dry_run=dry_run, prune=prune, before_writes=before_writes, adopt=adopt)

    def refuse_unowned(self, bundle: Bundle, adopt: tuple[str, ...] = ()) -> None:
        refuse_unowned(self.kube, bundle, adopt)

    def ensure_secrets(self, bundle: Bundle, make_secret: Callable[[RequiredSecret], Obj],
                       progress: Callable[[str], None] = lambda line: None) -> Plan:
        return ensure_secrets(self.kube, bundle, make_secret, progress=progress)

    def tear_down(self, bundle: Bundle, *, delete_data: bool, wait_timeout: float | None = 300, dry_run: bool = False,
                  progress: Callable[[str], None] = lambda line: None) -> tuple[Plan, list[str]]:
        return tear_down(self.kube, bundle, delete_data=delete_data, wait_timeout=wait_timeout, dry_run=dry_run,
                         progress=progress)

    def status(self, bundle: Bundle) -> ClusterStatus:
        pod = naming.controller_pod(bundle.cluster)
        return cluster_status(self.kube, bundle, self._slurm_of(bundle), pod)

    def wait_until_usable(self, bundle: Bundle, *, timeout: float, progress: Callable[[str], None],
                          ask_slurm: bool = True, every_poll: bool = False) -> None:
        wait_until_usable(self.kube, bundle, self._slurm_of(bundle) if ask_slurm else None, timeout=timeout,
                          progress=progress, every_poll=every_poll)

    def slurm_versions(self, bundle: Bundle) -> dict[str, str]:
        return live.live_slurm_versions(self.kube, bundle)

    def clear_rolling_update(self, bundle: Bundle) -> list[str]:
        return live.clear_rolling_update(self.kube, bundle)

    def pool_statefulsets(self, bundle: Bundle) -> list[Obj]:
        return live.pool_statefulsets(self.kube, bundle)

    def pool_workloads(self, bundle: Bundle) -> list[Obj]:
        return live.pool_workloads(self.kube, bundle)

    def worker_pods(self, bundle: Bundle) -> list[Obj]:
        return live.worker_pods(self.kube, bundle)

    def delete_pod(self, bundle: Bundle, pod: str) -> None:
        live.delete_pod(self.kube, bundle.namespace, pod)

    def annotate_pod(self, bundle: Bundle, pod: str, key: str, value: str) -> None:
        annotate_pod(self.kube, bundle.namespace, pod, key, value)

    def node_labels(self) -> list[tuple[str, dict[str, str]]]:
        return list_node_labels(self.kube)
