"""The one typed interface actions talk to a cluster through, as helm's action.Configuration holds a kube.Interface.

The CLI builds the client with `connect` and passes it in; an action never asks which kind it has.
kube.kubecluster.KubeCluster serves all of `Cluster`; lab.access.LabCluster serves `PoolCluster`,
the part a lab answers (`scale --lab`). Tests pass fakes. Every method takes the bundle it acts
on: it names the namespace, the cluster (and so the lab) and the controller pod.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Protocol, runtime_checkable

if TYPE_CHECKING:  # annotations only: importing kube here would load `kubernetes` for every action
    from slurmk8s.kube.apply import Plan
    from slurmk8s.kube.inspect import ClusterStatus
    from slurmk8s.render import Bundle, RequiredSecret

Obj = dict[str, Any]


@runtime_checkable
class PoolCluster(Protocol):
    """A pool StatefulSet's replicas and Slurm commands in the controller: what `scale` needs, and what a lab serves."""

    def get_replicas(self, bundle: Bundle, statefulset: str) -> int:
        """spec.replicas through the scale subresource (what Slurm's power saving sets)."""

    def set_replicas(self, bundle: Bundle, statefulset: str, replicas: int) -> None:
        """Set spec.replicas through the scale subresource."""

    def live_replicas(self, bundle: Bundle, statefulset: str) -> int | None:
        """spec.replicas of the StatefulSet as it runs; None when it does not exist (yet)."""

    def slurm(self, bundle: Bundle, argv: list[str]) -> str:
        """stdout of a Slurm command run in the (primary) slurmctld pod; ClusterError when it fails."""


@runtime_checkable
class Cluster(PoolCluster, Protocol):
    """A Kubernetes cluster as every action sees it."""

    @property
    def source(self) -> str:
        """Where the credentials came from (kubeconfig context and file, or in-cluster)."""

    @property
    def host(self) -> str:
        """The API server's address."""

    @property
    def context(self) -> dict[str, str | None]:
        """name (the kubeconfig context), file (the kubeconfig) and server; name and file None in-cluster."""

    def apply(self, bundle: Bundle, make_secret: Callable[[RequiredSecret], Obj], *, workers: int = 8,
              force_conflicts: bool = False, dry_run: bool = False, prune: bool = True,
              before_writes: Callable[[], None] | None = None, adopt: tuple[str, ...] = ()) -> Plan:
        """Server-side apply the bundle in stages (or dry-run it), Secrets created once, leftovers pruned;
        an existing object someone else made is refused unless adopt names it (KIND/NAME)."""

    def refuse_unowned(self, bundle: Bundle, adopt: tuple[str, ...] = ()) -> None:
        """ClusterError when an object of the bundle exists and is neither this cluster's nor adopted."""

    def ensure_secrets(self, bundle: Bundle, make_secret: Callable[[RequiredSecret], Obj],
                       progress: Callable[[str], None]) -> Plan:
        """Create the bundle's missing Secrets (and its Namespace); existing ones stay."""

    def tear_down(self, bundle: Bundle, *, delete_data: bool, wait_timeout: float | None, dry_run: bool,
                  progress: Callable[[str], None]) -> tuple[Plan, list[str]]:
        """Delete the bundle's objects; (what was done, what was kept)."""

    def status(self, bundle: Bundle) -> ClusterStatus:
        """Every object's state, the pods, and `sinfo` from the controller."""

    def wait_until_usable(self, bundle: Bundle, *, timeout: float, progress: Callable[[str], None],
                          ask_slurm: bool = True, every_poll: bool = False) -> None:
        """Block until every workload is Ready and (ask_slurm) slurmctld knows every running pool member;
        progress gets each new line, or (every_poll) the current line at every poll, for a live line."""

    def slurm_versions(self, bundle: Bundle) -> dict[str, str]:
        """component -> the Slurm release its live StatefulSets run (slurmdbd, slurmctld, slurmd)."""

    def clear_rolling_update(self, bundle: Bundle) -> list[str]:
        """Switch live pool StatefulSets to OnDelete; the names switched."""

    def pool_statefulsets(self, bundle: Bundle) -> list[Obj]:
        """The live slurmd StatefulSets of the bundle's cluster (those the profile dropped too), by name."""

    def pool_workloads(self, bundle: Bundle) -> list[Obj]:
        """The live slurmd StatefulSets, then the side-by-side slurmd DaemonSets: what a rollout replaces pods of."""

    def worker_pods(self, bundle: Bundle) -> list[Obj]:
        """The live slurmd pods."""

    def delete_pod(self, bundle: Bundle, pod: str) -> None:
        """Delete one pod; gone already is fine."""

    def annotate_pod(self, bundle: Bundle, pod: str, key: str, value: str) -> None:
        """Set one annotation on a pod, so the kubelet syncs it now."""

    def node_labels(self) -> list[tuple[str, dict[str, str]]]:
        """(name, labels) of every Kubernetes node, by name."""


def header(bundle: Bundle, cluster: Cluster) -> str:
    """Which cluster, namespace, kubeconfig context and API server a command acts on."""
    return f"cluster {bundle.cluster} in namespace {bundle.namespace} ({cluster.source}, {cluster.host})"


def connect(kubeconfig: str | None = None, context: str | None = None, *, lab: bool = False, verbose: bool = False,
            timeout: float = 60, workers: int | None = None) -> Cluster | PoolCluster:
    """The client a command acts through: the profile's running lab with lab, else the Kubernetes cluster
    kubectl would use. Nothing is read or connected until the first call, so an action still refuses bad
    input before it touches a cluster."""
    # Each client is imported when it is built, the one lazy import below the CLI (tests/test_layers.py
    # DEFERRED_ALLOWED): KubeCluster loads the kubernetes package, which a lab and every action's import skip.
    if lab:
        from slurmk8s.lab.access import LabCluster
        return LabCluster()
    from slurmk8s.kube.kubecluster import KubeCluster
    return KubeCluster(kubeconfig, context, verbose=verbose, timeout=timeout,
                       pool_size=max(workers, 4) * 2 if workers else 16)
