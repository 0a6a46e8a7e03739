"""`status`: what of the bundle exists, how its pods are doing, and what slurmctld says."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from slurmk8s import naming
from slurmk8s.errors import ClusterError
from slurmk8s.kube.client import Kube, Obj, dig
from slurmk8s.kube.ownership import key_of, owned_selector
from slurmk8s.kube.resources import Resolver, Resource, builtin
from slurmk8s.kube.stages import object_ref
from slurmk8s.kube.wait import list_pods, pod_ready, status_of_workload, why_not_ready
from slurmk8s.render import Bundle


@dataclass(frozen=True)
class ObjectRow:
    """One bundle object (or Secret) and its state in the cluster."""

    ref: str
    state: str


@dataclass(frozen=True)
class PodRow:
    """One pod: name, ready containers, what it is doing, restarts, node."""

    name: str
    ready: str
    state: str
    restarts: int
    node: str


@dataclass(frozen=True)
class ClusterStatus:
    """Everything `status` prints; problems (missing objects, workloads not ready) make it exit 1."""

    objects: tuple[ObjectRow, ...]
    pods: tuple[PodRow, ...]
    sinfo: str
    problems: tuple[str, ...] = ()


def cluster_status(kube: Kube, bundle: Bundle, exec_in_controller: Callable[[list[str]], str] | None,
                   controller_pod: str) -> ClusterStatus:
    """Read the state of every object of the bundle, the pods, and `sinfo` from the controller."""
    resolver = Resolver(kube)
    live: dict[tuple[str, str], Obj] = {}
    seen_kinds: dict[str, Resource] = {}
    for obj in bundle.objects:
        seen_kinds.setdefault(obj["kind"], resolver.of(obj))
    for kind, resource in seen_kinds.items():
        listing = kube.request("GET", resource.collection(bundle.namespace), what=f"list {resource.plural}",
                               query=[("labelSelector", owned_selector(bundle.cluster))])
        for listed in listing.items():
            listed.setdefault("kind", kind)
            live[key_of(listed)] = listed
    rows, problems = [], []
    for obj in bundle.objects:
        item = live.get(key_of(obj))
        state = _object_state(obj, item)
        rows.append(ObjectRow(object_ref(obj), state))
        if state == "missing" or (obj["kind"] in naming.WORKLOAD_KINDS and not _workload_done(obj, item)):
            problems.append(f"{object_ref(obj)} {state}")
    for required in bundle.secrets:
        found = kube.request("GET", builtin("v1", "Secret").item(bundle.namespace, required.name),
                             what=f"read Secret/{required.name}", tolerate=(404,))
        rows.append(ObjectRow(f"Secret/{required.name}", "present" if found.status == 200 else "missing"))
        if found.status != 200:
            problems.append(f"Secret/{required.name} missing")
    pods = list_pods(kube, bundle)
    pod_rows = tuple(_pod_row(p) for p in pods)
    controller = next((p for p in pods if p["metadata"]["name"] == controller_pod), None)
    if exec_in_controller is None:
        sinfo = "(not asked)"
    elif controller is None or not pod_ready(controller):
        sinfo = f"unavailable: controller pod {controller_pod} is not Ready"
    else:
        try:
            sinfo = exec_in_controller(["sinfo"]).rstrip("\n")
        except ClusterError as e:
            sinfo = f"unavailable: {e}"
    return ClusterStatus(tuple(rows), pod_rows, sinfo, tuple(problems))


def _desired(obj: Obj, item: Obj) -> int:
    """Replicas the workload should have now: the live spec (Slurm resizes elastic pools), else the profile's."""
    live = dig(item, "spec", "replicas")
    return live if isinstance(live, int) else int(obj["spec"].get("replicas", 1))


def _workload_done(obj: Obj, item: Obj | None) -> bool:
    if item is None:
        return False
    return status_of_workload(obj["kind"], obj["metadata"]["name"], "", _desired(obj, item), item).done


def _object_state(obj: Obj, item: Obj | None) -> str:
    if item is None:
        return "missing"
    if obj["kind"] in naming.WORKLOAD_KINDS:
        s = status_of_workload(obj["kind"], obj["metadata"]["name"], "", _desired(obj, item), item)
        rolling = "" if s.rolled_out else ", rolling out"
        bounds = naming.elastic_range(obj)
        if bounds is not None:
            # Slurm's power saving sets how many run: any count in range is healthy once it is up.
            starting = f" ({s.desired} asked)" if s.ready < s.desired else ""
            return f"{s.ready} of {bounds[0]}..{bounds[1]} running{starting}, Slurm-managed{rolling}"
        return f"{s.ready}/{s.desired} ready{rolling}"
    return "present"


def _pod_row(pod: Obj) -> PodRow:
    status = pod.get("status") or {}
    containers = status.get("containerStatuses") or []
    ready = sum(1 for c in containers if c.get("ready"))
    total = len(containers) or len(pod.get("spec", {}).get("containers") or [])
    state = "Running" if pod_ready(pod) else why_not_ready(pod)
    restarts = sum(int(c.get("restartCount", 0)) for c in containers)
    return PodRow(pod["metadata"]["name"], f"{ready}/{total}", state, restarts, pod.get("spec", {}).get("nodeName", ""))
