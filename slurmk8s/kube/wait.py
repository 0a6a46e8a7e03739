"""Wait until a cluster is usable: workloads Ready, then every running slurmd known to slurmctld.

The Slurm half goes through an injected exec function, so it can be tested without a
websocket-capable API server.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import Callable, TypeVar

from slurmk8s import naming
from slurmk8s.errors import ClusterError, ExecRefused
from slurmk8s.kube.client import RETRY_STATUSES, Kube, KubeApiError, Obj, dig
from slurmk8s.kube.ownership import owned_selector
from slurmk8s.kube.resources import builtin
from slurmk8s.podside import nodestate
from slurmk8s.podside.nodestate import NodeState
from slurmk8s.render import Bundle

SINFO_NODES = nodestate.command()
# A poll's requests may run this long even when the wait's own deadline has (nearly) passed.
MIN_REQUEST_BUDGET = 5.0
T = TypeVar("T")
# A pod condition that waiting does not heal (stuck_conditions) ends the wait once it has been seen this
# long without a break: long enough for a Secret created moments later, a tag pushed mid-`up` or a DNS blip
# to show up, short enough that a user hears of it at once. The wait then fails at its next poll: within
# UNHEALABLE_AFTER + one interval (2 s) + one poll's requests, about 35 s on a responsive API server.
UNHEALABLE_AFTER = 30.0


@dataclass(frozen=True)
class WorkloadStatus:
    """Readiness of one StatefulSet/Deployment of the bundle."""

    kind: str
    name: str
    component: str
    desired: int
    ready: int
    rolled_out: bool

    @property
    def done(self) -> bool:
        """Every desired replica Ready and on the current revision."""
        return self.rolled_out and self.ready >= self.desired


def workload_statuses(kube: Kube, bundle: Bundle) -> list[WorkloadStatus]:
    """Status of every workload of the bundle (a missing one counts as 0 ready)."""
    live: dict[tuple[str, str], Obj] = {}
    for kind in sorted({o["kind"] for o in bundle.objects if o["kind"] in naming.WORKLOAD_KINDS}):
        resource = builtin("apps/v1", kind)
        listing = kube.request("GET", resource.collection(bundle.namespace), what=f"list {resource.plural}",
                               query=[("labelSelector", owned_selector(bundle.cluster))])
        for listed in listing.items():
            live[(kind, listed["metadata"]["name"])] = listed
    out = []
    for obj in bundle.objects:
        if obj["kind"] not in naming.WORKLOAD_KINDS:
            continue
        name = obj["metadata"]["name"]
        component = obj["metadata"]["labels"].get(naming.LABEL_COMPONENT, "")
        item = live.get((obj["kind"], name))
        if obj["kind"] == "DaemonSet":  # as many pods as nodes it selects: only the live object knows
            desired = int(((item or {}).get("status") or {}).get("desiredNumberScheduled", 1) or 0)
        elif naming.elastic_range(obj) and isinstance(dig(item, "spec", "replicas"), int):
            desired = dig(item, "spec", "replicas")  # Slurm sizes an elastic pool: wait for what it asked
        else:
            desired = int(obj["spec"].get("replicas", 1))
        out.append(status_of_workload(obj["kind"], name, component, desired, item))
    return out


def status_of_workload(kind: str, name: str, component: str, desired: int, item: Obj | None) -> WorkloadStatus:
    """Readiness of one live workload (None = it does not exist)."""
    if item is None:
        return WorkloadStatus(kind, name, component, desired, 0, False)
    status = item.get("status") or {}
    observed = status.get("observedGeneration", 0) >= item["metadata"].get("generation", 1)
    ready_field, updated_field = {"Deployment": ("availableReplicas", "updatedReplicas"),
                                  "DaemonSet": ("numberReady", "updatedNumberScheduled")}.get(
                                      kind, ("readyReplicas", "updatedReplicas"))
    ready = int(status.get(ready_field, 0) or 0)
    updated = int(status.get(updated_field, 0) or 0)
    if ((item.get("spec") or {}).get("updateStrategy") or {}).get("type") == "OnDelete":
        updated = desired  # its old pods wait for `slurmk8s rollout` (drain first), not for this wait
    return WorkloadStatus(kind, name, component, desired, ready, observed and updated >= desired)


def running_slurm_nodes(kube: Kube, bundle: Bundle) -> list[str]:
    """Slurm node names of the slurmd pods that are Ready now: <pool>-<ordinal> for pool pods, the
    Kubernetes node's name for side-by-side pods."""
    pods = list_pods(kube, bundle, component=naming.WORKER)
    nodes = []
    for pod in pods:
        labels = pod["metadata"].get("labels") or {}
        if naming.LABEL_SHAPE in labels:
            if pod_ready(pod) and (pod.get("spec") or {}).get("nodeName"):
                nodes.append(pod["spec"]["nodeName"])
            continue
        pool = labels.get(naming.LABEL_POOL)
        ordinal = pod["metadata"]["name"].rsplit("-", 1)[-1]
        # A per-leaf StatefulSet of a topology numbers its pods from its first node.
        first = int((pod["metadata"].get("annotations") or {}).get(naming.ANNOTATION_FIRST_NODE, "0"))
        if pool and ordinal.isdigit() and pod_ready(pod):
            nodes.append(naming.slurm_node_name(pool, first + int(ordinal)))
    return sorted(nodes)


def list_pods(kube: Kube, bundle: Bundle, component: str | None = None) -> list[Obj]:
    """Pods of this cluster (the pod template carries our labels), optionally of one component."""
    selector = owned_selector(bundle.cluster)
    if component:
        selector += f",{naming.LABEL_COMPONENT}={component}"
    listing = kube.request("GET", builtin("v1", "Pod").collection(bundle.namespace), what="list pods",
                           query=[("labelSelector", selector)])
    return sorted(listing.items(), key=lambda p: p["metadata"]["name"])


def pod_ready(pod: Obj) -> bool:
    """The pod's Ready condition is True."""
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (pod.get("status") or {}).get("conditions") or [])


def unregistered(expected: list[str], states: dict[str, NodeState]) -> dict[str, str]:
    """Expected nodes slurmctld does not list as registered and responding, with their state (nodestate's rule)."""
    return {n: states[n].text if n in states else "not listed by sinfo" for n in expected
            if not (n in states and states[n].registered)}


class Waiter:
    """Polls until the bundle's cluster is usable; prints a line whenever the picture changes."""

    def __init__(self, kube: Kube, bundle: Bundle, exec_in_controller: Callable[[list[str]], str] | None, *,
                 timeout: float = 600, interval: float = 2.0, progress: Callable[[str], None] = lambda line: None,
                 clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep,
                 every_poll: bool = False):
        """every_poll: call progress at every poll, not only when the line changes (a live line redraws
        its clock; it drops repeats itself)."""
        self.kube = kube
        self.bundle = bundle
        self.exec_in_controller = exec_in_controller
        self.timeout = timeout
        self.interval = interval
        self.progress = progress
        self.clock = clock
        self.sleep = sleep
        self.every_poll = every_poll
        self._last_line = ""

    def _poll(self, deadline: float, read: Callable[[], T]) -> T | None:
        """read() with its requests bounded by the wait's deadline; None after a temporary API failure.

        A 429, 5xx or dropped connection mid-wait (after Kube.request's own retries) is one more
        reason to poll again, until the deadline; the last such failure is raised after it.
        """
        budget = max(deadline - self.clock(), MIN_REQUEST_BUDGET)
        try:
            with self.kube.deadline(time.monotonic() + budget):
                return read()
        except KubeApiError as e:
            if not (e.status in RETRY_STATUSES or e.status == 0 or e.status >= 500) or self.clock() >= deadline:
                raise
            self._say(f"api: {e}; polling again")
            return None

    def wait(self) -> list[WorkloadStatus]:
        """Return once usable; raise ClusterError naming what is not ready on timeout, or at once (within
        UNHEALABLE_AFTER of being seen) naming a pod condition that waiting does not heal."""
        deadline = self.clock() + self.timeout
        trouble: dict[tuple[str, str, str], tuple[float, Stuck]] = {}  # since when, and what
        while True:
            statuses = self._poll(deadline, lambda: workload_statuses(self.kube, self.bundle))
            if statuses is None:
                self.sleep(self.interval)
                continue
            line = "pods ready: " + summarize(statuses)
            if all(s.done for s in statuses):
                self._say(line)
                break
            stuck = self._poll(deadline, lambda: stuck_pods(self.kube, self.bundle))
            if stuck is not None:
                now = self.clock()
                # A back-off that does not say why continues a pull failure already seen; a healed one
                # starts afresh.
                seen = {s.key: s if s.certain else trouble[s.key][1] for s in stuck
                        if s.certain or s.key in trouble}
                trouble = {key: (trouble.get(key, (now,))[0], s) for key, s in seen.items()}
                if any(now - since >= UNHEALABLE_AFTER for since, _ in trouble.values()):
                    raise ClusterError(unhealable_message([s for _, s in trouble.values()],
                                                          now - min(since for since, _ in trouble.values())))
            if trouble:
                line += "; cannot start: " + ", ".join(sorted({f"{s.pod} ({s.reason})" for _, s in trouble.values()}))
            self._say(line)
            if self.clock() >= deadline:
                raise ClusterError(self._timeout_message(statuses))
            self.sleep(self.interval)
        if self.exec_in_controller is None:
            return statuses
        last_problem = ""
        while True:
            expected = self._poll(deadline, lambda: running_slurm_nodes(self.kube, self.bundle))
            if expected is None:
                self.sleep(self.interval)
                continue
            try:
                missing = unregistered(expected, nodestate.parse(self.exec_in_controller(SINFO_NODES)))
                last_problem = ", ".join(f"{n} ({s})" for n, s in sorted(missing.items()))
            except ExecRefused:
                raise  # RBAC or a missing pod: no retry fixes it
            except ClusterError as e:
                missing, last_problem = {"?": "?"}, str(e)
            if not missing:
                self._say(f"slurm: all {len(expected)} running node(s) registered with slurmctld")
                return statuses
            self._say(f"slurm: waiting for {last_problem}")
            if self.clock() >= deadline:
                raise ClusterError(f"timed out after {self.timeout:.0f} s: pods are Ready but slurmctld does not "
                                   f"know every running node: {last_problem}")
            self.sleep(self.interval)

    def _say(self, line: str) -> None:
        if line != self._last_line or self.every_poll:
            self._last_line = line
            self.progress(line)

    def _timeout_message(self, statuses: list[WorkloadStatus]) -> str:
        lagging = [s for s in statuses if not s.done]
        lines = [f"timed out after {self.timeout:.0f} s waiting for "
                 + ", ".join(f"{s.kind}/{s.name} ({s.ready}/{s.desired} ready)" for s in lagging)]
        lagging_components = {s.component for s in lagging}
        pods = [p for p in list_pods(self.kube, self.bundle)
                if (p["metadata"].get("labels") or {}).get(naming.LABEL_COMPONENT) in lagging_components]
        for pod in pods:
            if not pod_ready(pod):
                lines.append(f"  pod {pod['metadata']['name']} not Ready: {why_not_ready(pod)}"
                             + _events_suffix(self.kube, self.bundle.namespace, pod["metadata"]["name"]))
        for s in lagging:
            have = sum(1 for p in pods if p["metadata"]["name"].startswith(f"{s.name}-"))
            if have < s.desired:
                lines.append(f"  {s.kind}/{s.name} has {have} of {s.desired} pods"
                             + _events_suffix(self.kube, self.bundle.namespace, s.name))
        return "\n".join(lines)


def summarize(statuses: list[WorkloadStatus]) -> str:
    """'mariadb 1/1, controller 0/1, ...' in component order."""
    by_component: dict[str, list[int]] = {}
    for s in statuses:
        tally = by_component.setdefault(s.component, [0, 0])
        tally[0] += min(s.ready, s.desired)
        tally[1] += s.desired
    order = [c for c in naming.COMPONENTS if c in by_component] + sorted(set(by_component) - set(naming.COMPONENTS))
    return ", ".join(f"{c} {by_component[c][0]}/{by_component[c][1]}" for c in order)


def why_not_ready(pod: Obj) -> str:
    """The most telling reason a pod is not Ready: unschedulable, a waiting or crashing container."""
    status = pod.get("status") or {}
    for cond in status.get("conditions") or []:
        if cond.get("type") == "PodScheduled" and cond.get("status") == "False":
            return f"not scheduled: {cond.get('reason', '')}: {cond.get('message', '')}".strip(": ")
    for group in ("initContainerStatuses", "containerStatuses"):
        for c in status.get(group) or []:
            state = c.get("state") or {}
            if "waiting" in state:
                w = state["waiting"]
                last = (c.get("lastState") or {}).get("terminated")
                crashed = f" (last exit {last.get('exitCode')}: {last.get('reason', '')})" if last else ""
                return f"container {c['name']} waiting: {w.get('reason', '')}{crashed} {w.get('message', '')}".strip()
            if "terminated" in state and group == "initContainerStatuses" and state["terminated"].get("exitCode"):
                t = state["terminated"]
                return f"init container {c['name']} failed: exit {t.get('exitCode')} {t.get('reason', '')}".strip()
            if "running" in state and not c.get("ready"):
                return f"container {c['name']} running but its readiness probe fails"
    return f"phase {status.get('phase', 'Unknown')}"


@dataclass(frozen=True)
class Stuck:
    """A pod condition that waiting does not heal: what it is, and what the user can do."""

    pod: str
    container: str  # "" when the pod is not scheduled
    reason: str
    message: str
    hint: str
    certain: bool = True  # False: a pull back-off whose message and events do not say why the last pull failed
    image: str = ""  # the image a pull trouble is about (IMAGE_HINT names them all in one line)

    @property
    def key(self) -> tuple[str, str, str]:
        """The same trouble from one poll to the next: ErrImagePull and ImagePullBackOff alternate."""
        return self.pod, self.container, "image" if self.reason in PULL_REASONS else self.reason


# The kubelet's waiting reasons of an image pull: the last pull failed (with a message; RegistryUnavailable
# from a runtime that says so), or it waits to retry (since 1.30ish its message carries the last error).
PULL_REASONS = frozenset({"ErrImagePull", "ImagePullBackOff", "RegistryUnavailable"})
# Waiting reasons that no retry changes: a malformed reference; pullPolicy Never and the image is absent;
# a Secret or ConfigMap (or a key of one) that the container's env or volumes name does not exist, or the
# security context cannot be met.
UNHEALABLE_REASONS = frozenset({"InvalidImageName", "ErrImageNeverPull", "SignatureValidationFailed",
                                "CreateContainerConfigError"})
# A pull that failed for a reason the next pull shares: the registry has no such image or tag, refuses
# these credentials, or its name does not resolve (NXDOMAIN; a DNS server failure or timeout may heal).
UNPULLABLE = re.compile(r"not found|manifest unknown|name unknown|unauthorized|authentication required|"
                        r"access denied|access to the requested resource is not authorized|denied:|403 forbidden|"
                        r"no such host", re.IGNORECASE)
# The scheduler's per-node reasons that no change of the running pods heals: a node's labels, its taints
# (but those of a node not yet Ready, cordoned or under pressure), a volume pinned elsewhere. Not among
# them: Insufficient cpu/memory/<resource> (a burst scales down, a job ends), ports, anti-affinity,
# topology spread, unbound claims (a provisioner is working). A node autoscaler that adds nodes of new
# labels is not known here: with one, such a pod waits until --timeout.
NEVER_FITS = re.compile(r"didn't match pod's node affinity/selector|didn't match node selector|"
                        r"had volume node affinity conflict|had untolerated taint", re.IGNORECASE)
HEALING_TAINTS = re.compile(r"node\.kubernetes\.io/|node\.cloudprovider\.kubernetes\.io/uninitialized|"
                            r"ToBeDeletedByClusterAutoscaler")
IMAGE_HINT = ("images: {image} cannot be pulled here; build them with `slurmk8s images build` and set "
              "spec.slurm.images (on kind: `slurmk8s up PROFILE --images local`), see docs/images.md")
CONFIG_HINT = ("the pod names a Secret or ConfigMap, or a key of one, that does not exist: create it (kubectl "
               "-n {namespace} create secret ...) or fix the profile field that names it, then run `up` again")
SETTINGS_HINT = ("the container's settings cannot be met by its image (see the message): fix the profile or "
                 "the image, then run `up` again")
SCHEDULE_HINT = ("no node can ever run this pod: label or untaint nodes to match its nodeSelector and "
                 "tolerations (the profile's pool), or change the profile; then run `up` again")


def never_fits(message: str) -> bool:
    """The scheduler's 'Unschedulable' message says that no node can take the pod whatever else runs.

    '0/4 nodes are available: 1 node(s) had untolerated taint {...}, 3 node(s) didn't match ... .
    preemption: ...': every per-node reason must be one that does not heal; any other keeps waiting.
    """
    head = message.split(". preemption:")[0]
    if ": " not in head:
        return False
    reasons = [r.strip().rstrip(".") for r in re.split(r", (?=\d+ )", head.split(": ", 1)[1])]
    return bool(reasons) and all(NEVER_FITS.search(r) and not HEALING_TAINTS.search(r) for r in reasons)


def stuck_conditions(pod: Obj, pull_events: Callable[[], list[str]], namespace: str) -> list[Stuck]:
    """The pod's conditions that waiting does not heal. pull_events() gives the pod's newest events, asked
    only for a back-off whose message does not say why the last pull failed."""
    name = pod["metadata"]["name"]
    status = pod.get("status") or {}
    out = []
    for cond in status.get("conditions") or []:
        if (cond.get("type") == "PodScheduled" and cond.get("status") == "False"
                and cond.get("reason") == "Unschedulable" and never_fits(cond.get("message", ""))):
            out.append(Stuck(name, "", "Unschedulable", cond.get("message", ""), SCHEDULE_HINT))
    images = {c.get("name"): c.get("image", "") for group in ("initContainers", "containers")
              for c in (pod.get("spec") or {}).get(group) or []}
    for group in ("initContainerStatuses", "containerStatuses"):
        for c in status.get(group) or []:
            waiting = (c.get("state") or {}).get("waiting") or {}
            reason, message = waiting.get("reason", ""), " ".join(str(waiting.get("message", "")).split())
            image = images.get(c.get("name")) or c.get("image", "")
            if reason in PULL_REASONS and not UNPULLABLE.search(message):
                failed = [e for e in pull_events() if e.startswith("Failed: ") and image in e]
                message = f"{message}; last event: {failed[-1]}" if failed else message
            if reason == "CreateContainerConfigError":
                hint = CONFIG_HINT if re.search(r"secret|configmap", message, re.IGNORECASE) else SETTINGS_HINT
                out.append(Stuck(name, c.get("name", ""), reason, message, hint.format(namespace=namespace)))
            elif reason in UNHEALABLE_REASONS or reason in PULL_REASONS:
                certain = reason in UNHEALABLE_REASONS or bool(UNPULLABLE.search(message))
                if certain or reason == "ImagePullBackOff":
                    out.append(Stuck(name, c.get("name", ""), reason, message, IMAGE_HINT, certain, image))
    return out


def stuck_pods(kube: Kube, bundle: Bundle) -> list[Stuck]:
    """Every condition that waiting does not heal, of this cluster's pods that are not Ready."""
    out = []
    for pod in list_pods(kube, bundle):
        if not pod_ready(pod):
            name = pod["metadata"]["name"]
            out += stuck_conditions(pod, lambda: last_events(kube, bundle.namespace, name), bundle.namespace)
    return out


def unhealable_message(stuck: list[Stuck], seen_for: float) -> str:
    """What cannot start and why, what to do, and that nothing was undone."""
    lines = [f"pods cannot start, and waiting will not help (seen for {seen_for:.0f} s):"]
    for s in stuck:
        where = f"pod {s.pod}" + (f" container {s.container}" if s.container else "")
        lines.append(f"  {where}: {s.reason}: {s.message}")
    images = ", ".join(dict.fromkeys(s.image or "the image" for s in stuck if s.hint == IMAGE_HINT))
    for hint in dict.fromkeys(s.hint for s in stuck):
        lines.append(f"  {hint.format(image=images) if hint == IMAGE_HINT else hint}")
    lines.append("  the objects stay as applied: `slurmk8s status PROFILE` shows them, `slurmk8s down PROFILE` removes them")
    return "\n".join(lines)


def last_events(kube: Kube, namespace: str, involved: str, limit: int = 3) -> list[str]:
    """The newest events about an object: 'Reason: message'."""
    listing = kube.request("GET", builtin("v1", "Event").collection(namespace), what=f"list events of {involved}",
                           query=[("fieldSelector", f"involvedObject.name={involved}")])
    events = sorted(listing.items(),
                    key=lambda e: e.get("lastTimestamp") or e.get("eventTime") or "")
    return [f"{e.get('reason', '')}: {' '.join(str(e.get('message', '')).split())}" for e in events[-limit:]]


def _events_suffix(kube: Kube, namespace: str, involved: str) -> str:
    events = last_events(kube, namespace, involved)
    return f"; last events: {' | '.join(events)}" if events else ""


def wait_until_usable(kube: Kube, bundle: Bundle, exec_in_controller: Callable[[list[str]], str] | None, *,
                      timeout: float = 600, interval: float = 2.0,
                      progress: Callable[[str], None] = lambda line: None,
                      every_poll: bool = False) -> list[WorkloadStatus]:
    """Block until every workload is Ready and slurmctld knows every running pool member."""
    return Waiter(kube, bundle, exec_in_controller, timeout=timeout, interval=interval, progress=progress,
                  every_poll=every_poll).wait()
