"""Drain-before-replace rollouts of slurmd pods: the plan and the one driver both runners share.

Pool StatefulSets and side-by-side DaemonSets use `updateStrategy: OnDelete`, so a changed pod template
replaces no pod by itself.
A rollout finds the pods whose `controller-revision-hash` differs from their StatefulSet's
updateRevision and, a batch of spec.rollout.maxUnavailable at a time: drains their Slurm nodes, waits
(at most drainTimeout) until no job runs on them, deletes the pods, waits for the new pods Ready and
their nodes registered, and resumes the nodes it drained. A timeout stops the rollout and says so;
it never kills a job.

It also holds the in-place reconfigure both runners share: wait until slurmctld's mounted Slurm files
are the applied ones, then `scontrol reconfigure` (no pod restarts; docs/day2.md).

Two runners drive it: `slurmk8s rollout` / `up` (actions/rollout.py, through the API and an exec in
slurmctld) and the GitOps hook Job (podside/rollout.py, from inside the cluster). This module
is standard library only and imports nothing of slurmk8s, so the hook's ConfigMap ships this very file;
every effect (API, Slurm, clock) is passed in.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any, Callable

if __package__:  # imported by the CLI, as slurmk8s.podside.rollout_core
    from . import nodestate
else:  # a file of the hook's ConfigMap directory, beside nodestate.py
    import nodestate  # type: ignore[no-redef]

REVISION_LABEL = "controller-revision-hash"
POOL_LABEL = "slurmk8s.io/pool"
SHAPE_LABEL = "slurmk8s.io/shape"  # a side-by-side DaemonSet's (naming.LABEL_SHAPE)
# A DaemonSet's template generation, and the one each of its pods was made from (the DaemonSet controller's own
# test of an updated pod; a DaemonSet status has no updateRevision).
DS_GENERATION_ANNOTATION = "deprecated.daemonset.template.generation"
DS_GENERATION_LABEL = "pod-template-generation"
COMPONENT_LABEL = "app.kubernetes.io/component"
FIRST_NODE_ANNOTATION = "slurmk8s.io/first-node"
WORKER = "worker"
ON_DELETE = "OnDelete"
# The drain reason marks drains a rollout made: only those it resumes (an administrator's drain stays).
DRAIN_REASON = "slurmk8s rollout"
# squeue states that still hold a node.
HOLDING_STATES = "RUNNING,COMPLETING,SUSPENDED,CONFIGURING,STOPPED"

Obj = dict[str, Any]


class RolloutStopped(Exception):
    """The rollout stopped (a drain or a replacement took longer than allowed); nothing was killed."""


@dataclass(frozen=True)
class Replacement:
    """One pod to replace and the Slurm node it runs; `statefulset` names its workload (a pool's StatefulSet,
    or a side-by-side DaemonSet when daemonset is set: its Slurm node is the Kubernetes node's name)."""

    statefulset: str
    pod: str
    node: str
    pool: str
    daemonset: bool = False


@dataclass(frozen=True)
class Settings:
    """spec.rollout, plus how long one replaced pod may take to come back."""

    max_unavailable: int = 1
    drain_timeout: float = 3600
    ready_timeout: float = 600
    interval: float = 5


def is_pool_statefulset(sts: Obj) -> bool:
    """A slurmd pool's StatefulSet (the only kind a rollout replaces pods of)."""
    labels = sts["metadata"].get("labels") or {}
    return labels.get(COMPONENT_LABEL) == WORKER and POOL_LABEL in labels


def is_shared_daemonset(ds: Obj) -> bool:
    """A side-by-side slurmd DaemonSet (one per shape)."""
    labels = ds["metadata"].get("labels") or {}
    return labels.get(COMPONENT_LABEL) == WORKER and SHAPE_LABEL in labels


def owned_by(pod: Obj, workload: Obj) -> bool:
    return any(ref.get("name") == workload["metadata"]["name"] and ref.get("kind") == "DaemonSet"
               for ref in pod["metadata"].get("ownerReferences") or [])


def _on_delete(workload: Obj) -> bool:
    return ((workload.get("spec") or {}).get("updateStrategy") or {}).get("type") == ON_DELETE


def stale_shared_pods(daemonsets: list[Obj], pods: list[Obj]) -> list[Replacement]:
    """Pods of OnDelete side-by-side DaemonSets not on their template generation, by DaemonSet then node."""
    out = []
    for ds in sorted(daemonsets, key=lambda d: d["metadata"]["name"]):
        generation = (ds["metadata"].get("annotations") or {}).get(DS_GENERATION_ANNOTATION)
        if not is_shared_daemonset(ds) or not _on_delete(ds) or not generation:
            continue
        members = sorted((p for p in pods if owned_by(p, ds) and not p["metadata"].get("deletionTimestamp")),
                         key=lambda p: (p.get("spec") or {}).get("nodeName", ""))
        for pod in members:
            node = (pod.get("spec") or {}).get("nodeName")
            if node and (pod["metadata"].get("labels") or {}).get(DS_GENERATION_LABEL) != generation:
                out.append(Replacement(ds["metadata"]["name"], pod["metadata"]["name"], node,
                                       ds["metadata"]["labels"][SHAPE_LABEL], daemonset=True))
    return out


def ordinal_of(statefulset: str, pod_name: str) -> int | None:
    """The ordinal of a pod of that StatefulSet, None for any other pod."""
    rest = pod_name[len(statefulset) + 1:] if pod_name.startswith(statefulset + "-") else ""
    return int(rest) if rest.isdigit() else None


def node_of(sts: Obj, ordinal: int) -> str:
    """Slurm node name of pod `ordinal`: <pool>-<first node + ordinal> (naming.slurm_node_name)."""
    labels = sts["metadata"].get("labels") or {}
    annotations = sts["metadata"].get("annotations") or {}
    return f"{labels[POOL_LABEL]}-{int(annotations.get(FIRST_NODE_ANNOTATION, '0')) + ordinal}"


def stale_pods(statefulsets: list[Obj], pods: list[Obj], pool: str | None = None) -> list[Replacement]:
    """Pods of OnDelete pool StatefulSets not on their updateRevision, by StatefulSet then ordinal; then,
    unless one pool is asked for, those of the side-by-side DaemonSets among the workloads."""
    shared = [] if pool else stale_shared_pods([w for w in statefulsets if is_shared_daemonset(w)], pods)
    return _stale_pool_pods(statefulsets, pods, pool) + shared


def _stale_pool_pods(statefulsets: list[Obj], pods: list[Obj], pool: str | None) -> list[Replacement]:
    out = []
    for sts in sorted(statefulsets, key=lambda s: s["metadata"]["name"]):
        labels = sts["metadata"].get("labels") or {}
        if not is_pool_statefulset(sts) or (pool and labels[POOL_LABEL] != pool):
            continue
        if ((sts.get("spec") or {}).get("updateStrategy") or {}).get("type") != ON_DELETE:
            continue
        revision = (sts.get("status") or {}).get("updateRevision")
        if not revision:
            continue
        name = sts["metadata"]["name"]
        members = sorted(((ordinal_of(name, p["metadata"]["name"]), p) for p in pods
                          if ordinal_of(name, p["metadata"]["name"]) is not None), key=lambda t: t[0])
        for ordinal, pod in members:
            if pod["metadata"].get("deletionTimestamp"):
                continue  # already going: the StatefulSet makes it anew on the update revision
            if (pod["metadata"].get("labels") or {}).get(REVISION_LABEL) != revision:
                out.append(Replacement(name, pod["metadata"]["name"], node_of(sts, ordinal), labels[POOL_LABEL]))
    return out


def batches(replacements: list[Replacement], size: int) -> list[list[Replacement]]:
    """The plan: consecutive batches of at most `size` pods."""
    size = max(1, size)
    return [replacements[i:i + size] for i in range(0, len(replacements), size)]


def jobs_command(node: str) -> list[str]:
    return ["squeue", "--noheader", f"--nodelist={node}", f"--states={HOLDING_STATES}", "--format=%i"]


def drain_command(node: str) -> list[str]:
    return ["scontrol", "update", f"nodename={node}", "state=drain", f"reason={DRAIN_REASON}"]


def resume_command(node: str) -> list[str]:
    return ["scontrol", "update", f"nodename={node}", "state=resume"]


@dataclass
class Effects:
    """What a runner gives the driver: the live objects, pod deletion, Slurm commands, a clock."""

    statefulsets: Callable[[], list[Obj]]
    pods: Callable[[], list[Obj]]
    delete_pod: Callable[[str], None]
    slurm: Callable[[list[str]], str]
    clock: Callable[[], float]
    sleep: Callable[[float], None]
    say: Callable[[str], None] = lambda line: None


@dataclass
class Outcome:
    """What a rollout did."""

    replaced: list[str] = field(default_factory=list)
    resumed: list[str] = field(default_factory=list)


def pod_ready(pod: Obj) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True"
               for c in (pod.get("status") or {}).get("conditions") or [])


def run_rollout(effects: Effects, settings: Settings, pool: str | None = None) -> Outcome:
    """Replace every stale pool pod, batch by batch, draining first; RolloutStopped on a timeout."""
    outcome = Outcome()
    plan = batches(stale_pods(effects.statefulsets(), effects.pods(), pool), settings.max_unavailable)
    total = sum(len(b) for b in plan)
    if not total:
        return outcome  # quiet: `up` runs this after every apply
    effects.say(f"rollout: {total} slurmd pod(s) to replace, {settings.max_unavailable} at a time")
    for batch in plan:
        _replace_batch(effects, settings, batch, outcome)
    effects.say(f"rollout: done, {len(outcome.replaced)} pod(s) replaced")
    return outcome


def _replace_batch(effects: Effects, settings: Settings, batch: list[Replacement], outcome: Outcome) -> None:
    nodes = [r.node for r in batch]
    states = nodestate.parse(effects.slurm(nodestate.command(nodes)))
    # A node that is down or powered off holds no job and is replaced at once; an administrator's drain
    # (another reason) is left as it is, and not resumed afterwards.
    live = [n for n in nodes if n in states and states[n].may_run_jobs]
    ours = [n for n in live if not states[n].drained or states[n].reason == DRAIN_REASON]
    for node in ours:
        effects.slurm(drain_command(node))
    if live:
        effects.say(f"rollout: drained {', '.join(live)}; waiting for their jobs to end")
    deadline = effects.clock() + settings.drain_timeout
    while True:
        # squeue, not the node state, says whether a job still holds a node.
        busy = {n: jobs for n in nodes for jobs in [effects.slurm(jobs_command(n)).split()] if jobs}
        if not busy:
            break
        if effects.clock() >= deadline:
            held = "; ".join(f"{n} runs job(s) {','.join(j)}" for n, j in sorted(busy.items()))
            raise RolloutStopped(f"rollout stopped: jobs still run after drainTimeout {settings.drain_timeout:.0f} s: "
                                 f"{held}. The node(s) stay drained and keep their pods; no job was killed. Run "
                                 f"`slurmk8s rollout` again once they end, or resume them with scontrol")
        effects.sleep(settings.interval)
    for r in batch:
        effects.say(f"rollout: replacing pod {r.pod} (node {r.node})")
        effects.delete_pod(r.pod)
    _wait_replaced(effects, settings, batch)
    for node in ours:
        effects.slurm(resume_command(node))
        outcome.resumed.append(node)
    outcome.replaced += [r.pod for r in batch]


def _wait_replaced(effects: Effects, settings: Settings, batch: list[Replacement]) -> None:
    """Until each pod of the batch is back on the update revision, Ready, and its node registered."""
    deadline = effects.clock() + settings.ready_timeout
    while True:
        waiting = _not_back(effects, batch)
        if not waiting:
            return
        if effects.clock() >= deadline:
            raise RolloutStopped(f"rollout stopped: replaced pod(s) not back after {settings.ready_timeout:.0f} s: "
                                 f"{'; '.join(waiting)}")
        effects.sleep(settings.interval)


def _shared_not_back(r: Replacement, ds: Obj, pods: list[Obj]) -> str | None:
    """Why a side-by-side node's new pod is not back yet (the DaemonSet makes it anew, under another name)."""
    generation = (ds["metadata"].get("annotations") or {}).get(DS_GENERATION_ANNOTATION)
    mine = [p for p in pods if owned_by(p, ds) and (p.get("spec") or {}).get("nodeName") == r.node
            and not p["metadata"].get("deletionTimestamp") and p["metadata"]["name"] != r.pod]
    if not mine:
        return f"no new pod of {r.statefulset} on {r.node} yet"
    if (mine[0]["metadata"].get("labels") or {}).get(DS_GENERATION_LABEL) != generation:
        return f"{mine[0]['metadata']['name']} still on its old template"
    return None if pod_ready(mine[0]) else f"{mine[0]['metadata']['name']} not Ready"


def _not_back(effects: Effects, batch: list[Replacement]) -> list[str]:
    by_name = {s["metadata"]["name"]: s for s in effects.statefulsets()}
    listed = effects.pods()
    pods = {p["metadata"]["name"]: p for p in listed}
    out = []
    for r in batch:
        if r.daemonset:
            why = _shared_not_back(r, by_name[r.statefulset], listed) if r.statefulset in by_name else None
            out += [why] if why else []
            continue
        pod, sts = pods.get(r.pod), by_name.get(r.statefulset)
        if sts is None:
            continue  # the pool went away: nothing to wait for
        revision = (sts.get("status") or {}).get("updateRevision")
        if ordinal_of(r.statefulset, r.pod) >= int((sts.get("spec") or {}).get("replicas", 0)):
            continue  # scaled away meanwhile (power saving)
        if pod is None or pod["metadata"].get("deletionTimestamp"):
            out.append(f"{r.pod} not recreated yet")
        elif (pod["metadata"].get("labels") or {}).get(REVISION_LABEL) != revision:
            out.append(f"{r.pod} still on its old revision")
        elif not pod_ready(pod):
            out.append(f"{r.pod} not Ready")
    if out:
        return out
    states = nodestate.parse(effects.slurm(nodestate.command([r.node for r in batch])))
    return [f"node {r.node} not registered ({states[r.node].text if r.node in states else 'not listed'})"
            for r in batch if (r.daemonset or r.pod in pods) and not (r.node in states and states[r.node].registered)]


def pods_waiting(statefulsets: list[Obj], pods: list[Obj]) -> int:
    """How many slurmd pods wait for a rollout."""
    return len(stale_pods(statefulsets, pods))


# The digest of the files slurmctld reads (links in /etc/slurm into the ConfigMap volume), run in slurmctld.
SEEN_DIGEST = ["/bin/sh", "-c", "cat /mnt/slurm-config/* | sha256sum"]
RECONFIGURE = ["scontrol", "reconfigure"]


class ReconfigureStopped(Exception):
    """slurmctld never saw the applied Slurm files (the kubelet did not refresh its ConfigMap volume)."""


def files_digest(files: dict[str, str]) -> str:
    """sha256 of the ConfigMap's files concatenated in name order, as `cat dir/* | sha256sum` prints it."""
    return hashlib.sha256("".join(files[name] for name in sorted(files)).encode()).hexdigest()


def reconfigure_when_seen(want: str, controller_pods: list[str], nudge: Callable[[str, str], None],
                          seen: Callable[[], str], slurm: Callable[[list[str]], str], clock: Callable[[], float],
                          sleep: Callable[[float], None], timeout: float, poll: float = 2.0) -> float:
    """Nudge the controller pods (the kubelet refreshes a pod's ConfigMap volumes when it syncs it), wait
    until slurmctld's files have digest `want`, then `scontrol reconfigure`; the seconds it took.

    `seen()` is the SEEN_DIGEST output in slurmctld ('' when it cannot be read). ReconfigureStopped
    when the files never show within timeout.
    """
    started = clock()
    for pod in controller_pods:
        nudge(pod, want[:16])
    while True:
        found = (seen().split() or [""])[0]
        if found == want:
            break
        if clock() - started >= timeout:
            raise ReconfigureStopped(f"the controller did not see the new Slurm config within {timeout:.0f} s "
                                     f"(kubelet ConfigMap refresh)")
        sleep(poll)
    slurm(RECONFIGURE)
    return clock() - started
