"""`up` and elastic pools: Slurm's power saving owns their size; `up` only brings it back into the profile.

Three things can leave a pool outside what the profile says, and `up` converges each:
- maxReplicas was lowered below the pods that run: before anything is applied (the new slurm.conf
  drops those nodes), the nodes above the new max are drained and, once they run no job, their
  pods removed, as `slurmk8s scale` does; a job is never killed (on timeout nothing is applied);
- minReplicas was raised above the pods that run: the apply raises the replicas (kube/apply.py);
- a `slurmk8s scale` down that failed or was interrupted left nodes DRAINED under its own reason:
  after the wait they are resumed (a node whose pod is gone goes back to power saving first).
  Drains made by anyone else (another reason) are never touched.
"""

from __future__ import annotations

import time
from typing import Callable

from slurmk8s import naming
from slurmk8s.actions.scale import (DRAIN_REASON, PoolAccess, PoolSegment, SlurmFn, drain_and_shrink, pool_segments,
                                    wait_power_down_settled)
from slurmk8s.errors import ClusterError
from slurmk8s.kube.client import Kube, dig
from slurmk8s.kube.resources import builtin
from slurmk8s.render import Bundle

ReadReplicas = Callable[[str], int | None]  # a StatefulSet's live replicas; None when it does not exist


def elastic_pools(bundle: Bundle) -> list[str]:
    """Names of the bundle's pools that Slurm sizes (minReplicas < maxReplicas over all their StatefulSets)."""
    ranges: dict[str, list[int]] = {}
    for sts in bundle.of_kind("StatefulSet"):
        notes = sts["metadata"].get("annotations", {})
        pool = sts["metadata"].get("labels", {}).get(naming.LABEL_POOL)
        if pool and naming.ANNOTATION_MAX_REPLICAS in notes:
            tally = ranges.setdefault(pool, [0, 0])
            tally[0] += int(notes.get(naming.ANNOTATION_MIN_REPLICAS, "0"))
            tally[1] += int(notes[naming.ANNOTATION_MAX_REPLICAS])
    return sorted(p for p, (low, high) in ranges.items() if low < high)


def live_replicas(kube: Kube, namespace: str, statefulset: str) -> int | None:
    """spec.replicas of a StatefulSet as it runs; None when it does not exist (yet)."""
    found = kube.request("GET", builtin("apps/v1", "StatefulSet").item(namespace, statefulset),
                         what=f"read StatefulSet/{statefulset}", tolerate=(404,))
    replicas = dig(found.body, "spec", "replicas") if found.status == 200 else None
    return replicas if isinstance(replicas, int) else None


def shrink_above_max(bundle: Bundle, read_replicas: ReadReplicas, access: PoolAccess, timeout_s: float,
                     dry_run: bool = False, poll_s: float = 2.0, log: Callable[[str], None] = print) -> list[str]:
    """Drain and remove the pods above each pool StatefulSet's (new) maxReplicas; returns the nodes that went.

    Runs before the apply. Raises ClusterError when jobs still run on them after timeout_s: the
    nodes then stay drained, nothing is scaled, and `up` applies nothing.
    """
    gone: list[str] = []
    end = time.monotonic() + timeout_s
    for pool in elastic_pools(bundle):
        segments = pool_segments(bundle, pool)
        live = {s.statefulset: read_replicas(s.statefulset) for s in segments}
        over = {s.statefulset: s.max_replicas for s in segments if (live[s.statefulset] or 0) > s.max_replicas}
        if not over:
            continue
        present = {name: n or 0 for name, n in live.items()}
        high = sum(s.max_replicas for s in segments)
        nodes = [naming.slurm_node_name(pool, s.offset + i) for s in segments if s.statefulset in over
                 for i in range(s.max_replicas, present[s.statefulset])]
        if dry_run:
            log(f"pool {pool}: maxReplicas is {high} but {sum(present.values())} run: would drain "
                f"{','.join(nodes)}, wait for their jobs, then remove their pods")
            continue
        log(f"pool {pool}: maxReplicas is {high} but {sum(present.values())} run: removing {','.join(nodes)} first")
        try:
            drain_and_shrink(pool, segments, present, over, access, end, timeout_s, poll_s, log, hand_back=False)
        except ClusterError as e:
            raise ClusterError(f"{e}; nothing was applied: run up again once they end") from e
        gone += nodes
    return gone


def raise_below_min(bundle: Bundle, read_replicas: ReadReplicas, access: PoolAccess, timeout_s: float,
                    dry_run: bool = False, poll_s: float = 2.0, log: Callable[[str], None] = print) -> list[str]:
    """Raise each pool StatefulSet running fewer pods than its (new) minReplicas; returns the nodes that start.

    Runs before the apply, through the scale subresource as power saving does: the apply then sends
    the value the StatefulSet already has, and never conflicts with the manager of its replicas.
    A node Slurm is still powering down is waited for first (as `slurmk8s scale` does).
    """
    started: list[str] = []
    end = time.monotonic() + timeout_s
    for pool in elastic_pools(bundle):
        segments = pool_segments(bundle, pool)
        live = {s.statefulset: read_replicas(s.statefulset) for s in segments}
        under = {s.statefulset: s.min_replicas for s in segments
                 if live[s.statefulset] is not None and live[s.statefulset] < s.min_replicas}
        if not under:
            continue
        low = sum(s.min_replicas for s in segments)
        nodes = [naming.slurm_node_name(pool, s.offset + i) for s in segments if s.statefulset in under
                 for i in range(live[s.statefulset], s.min_replicas)]
        running = sum(n or 0 for n in live.values())
        if dry_run:
            log(f"pool {pool}: minReplicas is {low} but {running} run: would start {','.join(nodes)}")
            continue
        wait_power_down_settled(pool, nodes, access.slurm, end, timeout_s, poll_s, log)
        for statefulset, target in under.items():
            access.set_replicas(statefulset, target)
        log(f"pool {pool}: minReplicas is {low} but {running} ran: started {','.join(nodes)}")
        started += nodes
    return started


def parse_reasons(text: str) -> dict[str, tuple[str, str]]:
    """`sinfo -h -N -o '%N|%t|%E'` -> {node: (compact state, reason)} (a node in two partitions is listed twice)."""
    out = {}
    for line in text.splitlines():
        parts = line.split("|", 2)
        if len(parts) == 3:
            out[parts[0].strip()] = (parts[1].strip().lower(), parts[2].strip())
    return out


def own_drains(slurm: SlurmFn, nodes: list[str]) -> list[str]:
    """Those of nodes that are drained or draining with `slurmk8s scale`'s reason."""
    states = parse_reasons(slurm(["sinfo", "-h", "-N", "-n", ",".join(nodes), "-o", "%N|%t|%E"]))
    return [n for n in nodes if n in states and states[n][0].startswith(("drain", "drng"))
            and states[n][1] == DRAIN_REASON]


def resume_own_drains(bundle: Bundle, read_replicas: ReadReplicas, slurm: SlurmFn,
                      log: Callable[[str], None] = print) -> list[str]:
    """Resume the elastic pools' nodes a failed `slurmk8s scale` left drained; returns them.

    A node whose pod runs is resumed; one whose pod is gone is handed back to power saving
    (powered down, then the drain cleared), as a finished scale-down would have done.
    """
    resumed: list[str] = []
    for pool in elastic_pools(bundle):
        segments = pool_segments(bundle, pool)
        running, idle = _nodes_by_pod(read_replicas, pool, segments)
        drained = own_drains(slurm, running + idle)
        back_up = [n for n in running if n in drained]
        handed_back = [n for n in idle if n in drained]
        if handed_back:
            hostlist = ",".join(handed_back)
            slurm(["scontrol", "update", f"nodename={hostlist}", "state=power_down_force"])
            slurm(["scontrol", "update", f"nodename={hostlist}", "state=resume"])
            log(f"pool {pool}: {hostlist} left drained by an unfinished scale-down; handed back to power saving")
        if back_up:
            slurm(["scontrol", "update", f"nodename={','.join(back_up)}", "state=resume"])
            log(f"pool {pool}: {','.join(back_up)} left drained by an unfinished scale-down; resumed")
        resumed += back_up + handed_back
    return resumed


def _nodes_by_pod(read_replicas: ReadReplicas, pool: str, segments: list[PoolSegment]) -> tuple[list[str], list[str]]:
    """(nodes of the pool whose pod the StatefulSet keeps, nodes without one), within the profile's maxReplicas."""
    running, idle = [], []
    for s in segments:
        n = read_replicas(s.statefulset) or 0
        for i in range(s.max_replicas):
            (running if i < n else idle).append(naming.slurm_node_name(pool, s.offset + i))
    return running, idle
