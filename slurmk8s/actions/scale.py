"""`scale PROFILE POOL N`: up at once; down only after the nodes that go are drained and run no job.

A StatefulSet removes its highest ordinals first, so scaling from R to N removes Slurm
nodes <pool>-N .. <pool>-(R-1): exactly those are drained, waited for, and handed back to
Slurm's power saving (powered down, CLOUD) once their pods are gone.

A pool split over topology leaves (one StatefulSet per leaf, leaf j owning nodes
<pool>-<offset_j> ..) scales the same way: N means nodes <pool>-0 .. <pool>-(N-1) run, so
leaf j gets clamp(N - offset_j, 0, slots_j) pods; every node above N in any leaf is drained first.
"""

from __future__ import annotations

import time
from typing import Callable

from slurmk8s.actions.interface import PoolCluster
from slurmk8s.errors import ClusterError, UsageError
from slurmk8s.profile.files import read_profile
from slurmk8s.podside import nodestate
from slurmk8s.profile.model import Profile
from slurmk8s.render import Bundle, render
from slurmk8s.render.topology import Segment
from slurmk8s.render.topology import pool_segments

SlurmFn = Callable[[list[str]], str]  # run a Slurm command in the controller; raises on failure
DRAIN_REASON = "slurmk8s scale: pod will be removed"


def target(segment: Segment, replicas: int) -> int:
    """The segment's StatefulSet replicas when the pool runs nodes 0..replicas-1."""
    return max(0, min(segment.slots, replicas - segment.offset))


def named_pool_segments(profile: Profile, pool: str) -> list[Segment]:
    """The StatefulSets of the pool named on the command line, in node order (render.topology builds them)."""
    found = next((p for p in profile.pools if p.name == pool), None)
    segments = pool_segments(profile, found) if found else []
    if not segments:
        pools = sorted(p.name for p in profile.pools)
        raise UsageError(f"no pool {pool!r} in cluster {profile.name} (pools: {', '.join(pools)})")
    return segments


def pool_range(profile: Profile, pool: str) -> tuple[str, int, int]:
    """(first StatefulSet, minReplicas, maxReplicas) of a pool, summed over its StatefulSets."""
    segments = named_pool_segments(profile, pool)
    return (segments[0].statefulset, sum(s.min_replicas for s in segments), sum(s.slots for s in segments))


def elastic_pools(profile: Profile) -> list[str]:
    """Names of the pools that Slurm sizes (Pool.elastic)."""
    return sorted(p.name for p in profile.pools if p.elastic)


def checked_segments(profile: Profile, pool: str, replicas: int) -> list[Segment]:
    """The pool's StatefulSets; UsageError (exit 2) for an unknown pool or a count outside min..max."""
    _, low, high = pool_range(profile, pool)
    if not low <= replicas <= high:
        raise UsageError(f"pool {pool}: {replicas} is outside minReplicas..maxReplicas ({low}..{high})")
    return named_pool_segments(profile, pool)


def node_states(cluster: PoolCluster, bundle: Bundle, nodes: list[str]) -> dict[str, nodestate.NodeState]:
    """Slurm's view of nodes (podside/nodestate.py: sinfo, which also lists 22.05's hidden CLOUD nodes)."""
    return nodestate.parse(cluster.slurm(bundle, nodestate.command(nodes)))


def own_drains(cluster: PoolCluster, bundle: Bundle, nodes: list[str]) -> list[str]:
    """Those of nodes that are drained or draining with `slurmk8s scale`'s reason (an administrator's drain is not)."""
    states = node_states(cluster, bundle, nodes)
    return [n for n in nodes if n in states and states[n].drained and states[n].reason == DRAIN_REASON]


def powering_down(cluster: PoolCluster, bundle: Bundle, nodes: list[str]) -> list[str]:
    """Those of nodes that Slurm is powering down, or is about to (sinfo's state suffixes % and !)."""
    return sorted(n for n, state in node_states(cluster, bundle, nodes).items() if state.powering_down)


def wait_power_down_settled(pool: str, nodes: list[str], cluster: PoolCluster, bundle: Bundle, end: float,
                            timeout_s: float, poll_s: float, log: Callable[[str], None]) -> None:
    """Wait until Slurm powers none of nodes down.

    A slurmd that registers while its node is powering down is overruled: Slurm then marks
    the node powered down while its pod runs, and the next job that needs it waits out
    ResumeTimeout and leaves it DOWN (seen in the lab on 26.05). SuspendTimeout bounds the wait.
    """
    said = False
    while busy := powering_down(cluster, bundle, nodes):
        if time.monotonic() > end:
            raise ClusterError(f"pool {pool}: Slurm is still powering down {','.join(busy)} after {timeout_s:.0f} s; "
                               "nothing was scaled")
        if not said:
            log(f"pool {pool}: waiting for Slurm to finish powering down {','.join(busy)}")
            said = True
        time.sleep(poll_s)


def scale_pool(profile: Profile, bundle: Bundle, pool: str, replicas: int, cluster: PoolCluster,
               timeout_s: float = 24 * 3600, poll_s: float = 2.0, log: Callable[[str], None] = print) -> int:
    """Scale a pool without killing a job; returns the replicas before. UsageError outside min..max."""
    segments = checked_segments(profile, pool, replicas)
    end = time.monotonic() + timeout_s
    # First let Slurm finish powering down any node that is to run: its SuspendProgram may still
    # lower the replicas, so they are read only after that.
    staying = [s.node(i) for s in segments for i in range(target(s, replicas))]
    if staying:
        wait_power_down_settled(pool, staying, cluster, bundle, end, timeout_s, poll_s, log)
    live = {s.statefulset: cluster.get_replicas(bundle, s.statefulset) for s in segments}
    current = sum(live.values())
    # A scale-down whose wait failed left its nodes drained: those that are to run again are resumed.
    left_drained = own_drains(cluster, bundle, staying) if staying else []
    if left_drained:
        cluster.slurm(bundle, ["scontrol", "update", f"nodename={','.join(left_drained)}", "state=resume"])
        log(f"pool {pool}: {','.join(left_drained)} left drained by an earlier scale-down; resumed")
    # Growing never kills anything: at once.
    for s in segments:
        if target(s, replicas) > live[s.statefulset]:
            cluster.set_replicas(bundle, s.statefulset, target(s, replicas))
    shrinking = {s.statefulset: target(s, replicas) for s in segments if target(s, replicas) < live[s.statefulset]}
    if not shrinking:
        log(f"pool {pool}: {current} -> {replicas} replicas")
        return current
    nodes = drain_and_shrink(pool, segments, live, shrinking, cluster, bundle, end, timeout_s, poll_s, log)
    log(f"pool {pool}: {current} -> {replicas} replicas; {nodes} powered down")
    return current


def drain_and_shrink(pool: str, segments: list[Segment], live: dict[str, int], targets: dict[str, int],
                     cluster: PoolCluster, bundle: Bundle, end: float, timeout_s: float, poll_s: float,
                     log: Callable[[str], None], hand_back: bool = True) -> str:
    """Drain the nodes above each StatefulSet's target, wait until they run no job, then lower the replicas.

    Returns the hostlist that went. With hand_back the nodes go back to power saving (powered
    down, drain cleared); without, they stay DRAINED under DRAIN_REASON (nodes a new slurm.conf
    drops must not be resumed meanwhile). On timeout nothing is scaled and the nodes stay drained.
    """
    going = [s.node(i) for s in segments if s.statefulset in targets
             for i in range(targets[s.statefulset], live[s.statefulset])]
    current = sum(live.values())
    nodes = ",".join(going)
    cluster.slurm(bundle, ["scontrol", "update", f"nodename={nodes}", "state=drain", f"reason={DRAIN_REASON}"])
    log(f"pool {pool}: draining {nodes}; waiting for their jobs to finish")
    try:
        while True:
            jobs = cluster.slurm(bundle, ["squeue", "-h", "-w", nodes, "-o", "%i %T"]).split("\n")
            jobs = [j for j in jobs if j.strip()]
            if not jobs:
                break
            if time.monotonic() > end:
                raise ClusterError(f"pool {pool}: jobs still running on {nodes} after {timeout_s:.0f} s "
                                   f"({'; '.join(jobs)})")
            time.sleep(poll_s)
    except ClusterError as e:  # a timeout, or squeue failing: nothing was scaled, the drain stays
        if not hand_back:
            raise ClusterError(f"{e}; the nodes stay drained and the pool keeps {current} replicas") from e
        raise ClusterError(f"{e}; the pool keeps {current} replicas and {nodes} stay DRAINED (reason "
                           f"\"{DRAIN_REASON}\"): `slurmk8s scale PROFILE {pool} {current}` resumes them, or "
                           f"`scontrol update nodename={nodes} state=resume`") from e
    for statefulset, replicas in targets.items():
        cluster.set_replicas(bundle, statefulset, replicas)
    if hand_back:
        # The pods are going: hand the nodes back to power saving (powered down, no longer drained).
        cluster.slurm(bundle, ["scontrol", "update", f"nodename={nodes}", "state=power_down_force"])
        cluster.slurm(bundle, ["scontrol", "update", f"nodename={nodes}", "state=resume"])
    return nodes


def run_scale(profile_path: str, pool: str, replicas: int, cluster: PoolCluster, timeout_s: float = 24 * 3600,
              echo: Callable[[str], None] = print, namespace: str | None = None) -> int:
    """`slurmk8s scale`: through whichever cluster the CLI built (Kubernetes, or the profile's lab with --lab)."""
    profile = read_profile(profile_path, namespace)
    checked_segments(profile, pool, replicas)  # refused before rendering or any connection
    return scale_pool(profile, render(profile), pool, replicas, cluster, timeout_s, log=echo)
