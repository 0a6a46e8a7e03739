"""`up` and elastic pools: Slurm's power saving owns their size; `up` only brings it back into the profile.

Four things can leave a pool outside what the profile says, and `up` converges each:
- maxReplicas was lowered below the pods that run: before anything is applied (the new slurm.conf
  drops those nodes), the nodes above the new max are drained and, once they run no job, their
  pods removed, as `slurmk8s scale` does; a job is never killed (on timeout nothing is applied);
- minReplicas was raised above the pods that run: before the apply, the replicas are raised
  (once Slurm no longer powers those nodes down);
- a pool or topology leaf left the profile: before prune deletes its StatefulSet, its nodes are
  drained and its pods removed once they run no job;
- a `slurmk8s scale` down that failed or was interrupted left nodes DRAINED under its own reason:
  after the wait they are resumed (a node whose pod is gone goes back to power saving first).
  Drains made by anyone else (another reason) are never touched.
"""

from __future__ import annotations

import time
from typing import Callable

from slurmk8s import naming
from slurmk8s.actions.interface import Cluster, PoolCluster
from slurmk8s.actions.scale import (DRAIN_REASON, drain_and_shrink, elastic_pools, named_pool_segments, own_drains,
                                    wait_power_down_settled)
from slurmk8s.errors import ClusterError
from slurmk8s.profile.model import Profile
from slurmk8s.render import Bundle
from slurmk8s.render.topology import Segment


def into_range(profile: Profile, bundle: Bundle, cluster: PoolCluster, timeout_s: float,
               dry_run: bool = False, poll_s: float = 2.0, log: Callable[[str], None] = print) -> None:
    """Bring every elastic pool that runs outside its (new) minReplicas..maxReplicas back into it.

    Runs before the apply, through the scale subresource as power saving does: the apply then
    sends the replicas the StatefulSet already has, and never conflicts with the manager of
    that field. Raises ClusterError when jobs still run on nodes above a lowered max after
    timeout_s: the nodes then stay drained, nothing is scaled, and `up` applies nothing.
    A dry run only reads.
    """
    end = time.monotonic() + timeout_s
    for pool in elastic_pools(profile):
        segments = named_pool_segments(profile, pool)
        live = {s.statefulset: cluster.live_replicas(bundle, s.statefulset) for s in segments}
        present = {name: n for name, n in live.items() if n is not None}  # a new StatefulSet is the apply's
        _raise_to_min(pool, segments, present, cluster, bundle, end, timeout_s, poll_s, dry_run, log)
        _shrink_to_max(pool, segments, present, cluster, bundle, end, timeout_s, poll_s, dry_run, log)


def _raise_to_min(pool: str, segments: list[Segment], live: dict[str, int], cluster: PoolCluster, bundle: Bundle,
                  end: float, timeout_s: float, poll_s: float, dry_run: bool, log: Callable[[str], None]) -> None:
    """Start the pods below each StatefulSet's minReplicas, once Slurm no longer powers those nodes down."""
    under = {s.statefulset: s.min_replicas for s in segments
             if s.statefulset in live and live[s.statefulset] < s.min_replicas}
    if not under:
        return
    low, running = sum(s.min_replicas for s in segments), sum(live.values())
    nodes = ",".join(s.node(i) for s in segments if s.statefulset in under
                     for i in range(live[s.statefulset], s.min_replicas))
    if dry_run:
        log(f"pool {pool}: minReplicas is {low} but {running} run: would start {nodes}")
        return
    wait_power_down_settled(pool, nodes.split(","), cluster, bundle, end, timeout_s, poll_s, log)
    for statefulset, target in under.items():
        cluster.set_replicas(bundle, statefulset, target)
        live[statefulset] = target
    log(f"pool {pool}: minReplicas is {low} but {running} ran: started {nodes}")


def _shrink_to_max(pool: str, segments: list[Segment], live: dict[str, int], cluster: PoolCluster, bundle: Bundle,
                   end: float, timeout_s: float, poll_s: float, dry_run: bool, log: Callable[[str], None]) -> None:
    """Drain the nodes above each StatefulSet's maxReplicas, wait for their jobs, then remove their pods."""
    over = {s.statefulset: s.slots for s in segments
            if s.statefulset in live and live[s.statefulset] > s.slots}
    if not over:
        return
    high, running = sum(s.slots for s in segments), sum(live.values())
    nodes = ",".join(s.node(i) for s in segments if s.statefulset in over
                     for i in range(s.slots, live[s.statefulset]))
    if dry_run:
        log(f"pool {pool}: maxReplicas is {high} but {running} run: would drain {nodes}, "
            "wait for their jobs, then remove their pods")
        return
    log(f"pool {pool}: maxReplicas is {high} but {running} run: removing {nodes} first")
    try:
        # Kept drained: the new slurm.conf drops these nodes, and power saving must not resume them meanwhile.
        drain_and_shrink(pool, [s for s in segments if s.statefulset in live], live, over, cluster, bundle, end,
                         timeout_s, poll_s, log, hand_back=False)
    except ClusterError as e:
        raise ClusterError(f"{e}; nothing was applied: run up again once they end") from e


def drain_dropped(bundle: Bundle, cluster: Cluster, timeout_s: float, dry_run: bool = False,
                  poll_s: float = 2.0, log: Callable[[str], None] = print) -> None:
    """Empty, without killing a job, the pool StatefulSets the profile dropped (a pool or a topology leaf removed)
    before prune deletes them: their nodes drained, their jobs waited for, then their pods removed.

    The nodes stay drained: the new slurm.conf no longer has them (or gives them to another
    StatefulSet, which starts them again). On timeout nothing is applied, as for a lowered max.
    A dry run only reads.
    """
    wanted = {o["metadata"]["name"] for o in bundle.of_kind("StatefulSet")}
    listing = cluster.pool_statefulsets(bundle)
    end = time.monotonic() + timeout_s
    for item in listing:
        name, labels = item["metadata"]["name"], item["metadata"].get("labels") or {}
        spec = item.get("spec")
        pool, replicas = labels.get(naming.LABEL_POOL), spec.get("replicas") if isinstance(spec, dict) else None
        if name in wanted or not pool or not isinstance(replicas, int) or replicas <= 0:
            continue
        # Gone from the profile: what it runs is known only from the live object.
        first = int((item["metadata"].get("annotations") or {}).get(naming.ANNOTATION_FIRST_NODE, "0"))
        segment = Segment(pool, None, name, first, replicas, replicas, 0, ())
        nodes = naming.slurm_node_span(pool, first, replicas)
        if dry_run:
            log(f"StatefulSet/{name} left the profile: would drain {nodes}, wait for their jobs, then remove its pods")
            continue
        log(f"StatefulSet/{name} left the profile: removing {nodes} first")
        try:
            drain_and_shrink(pool, [segment], {name: replicas}, {name: 0}, cluster, bundle, end, timeout_s, poll_s,
                             log, hand_back=False)
        except ClusterError as e:
            raise ClusterError(f"{e}; nothing was applied: run up again once they end") from e


def resume_own_drains(profile: Profile, bundle: Bundle, cluster: PoolCluster,
                      log: Callable[[str], None] = print) -> list[str]:
    """Resume the elastic pools' nodes a failed `slurmk8s scale` left drained; returns them.

    A node whose pod runs is resumed; one whose pod is gone is handed back to power saving
    (powered down, then the drain cleared), as a finished scale-down would have done.
    """
    resumed: list[str] = []
    for pool in elastic_pools(profile):
        running, idle = _nodes_by_pod(cluster, bundle, named_pool_segments(profile, pool))
        drained = own_drains(cluster, bundle, running + idle)
        back_up = [n for n in running if n in drained]
        handed_back = [n for n in idle if n in drained]
        if handed_back:
            hostlist = ",".join(handed_back)
            cluster.slurm(bundle, ["scontrol", "update", f"nodename={hostlist}", "state=power_down_force"])
            cluster.slurm(bundle, ["scontrol", "update", f"nodename={hostlist}", "state=resume"])
            log(f"pool {pool}: {hostlist} left drained by slurmk8s; handed back to power saving")
        if back_up:
            cluster.slurm(bundle, ["scontrol", "update", f"nodename={','.join(back_up)}", "state=resume"])
            log(f"pool {pool}: {','.join(back_up)} left drained by slurmk8s; resumed")
        resumed += back_up + handed_back
    return resumed


def _nodes_by_pod(cluster: PoolCluster, bundle: Bundle, segments: list[Segment]) -> tuple[list[str], list[str]]:
    """(nodes of the pool whose pod the StatefulSet keeps, nodes without one), within the profile's maxReplicas."""
    running: list[str] = []
    idle: list[str] = []
    for s in segments:
        n = cluster.live_replicas(bundle, s.statefulset) or 0
        for i in range(s.slots):
            (running if i < n else idle).append(s.node(i))
    return running, idle
