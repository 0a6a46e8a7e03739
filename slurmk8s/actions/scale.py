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
from dataclasses import dataclass
from typing import Callable

from slurmk8s import naming
from slurmk8s.errors import ClusterError, UsageError
from slurmk8s.render import Bundle

SlurmFn = Callable[[list[str]], str]  # run a Slurm command in the controller; raises on failure
DRAIN_REASON = "slurmk8s scale: pod will be removed"


@dataclass
class PoolAccess:
    """How to read and set a pool StatefulSet's replicas, and run Slurm commands, on some cluster."""

    get_replicas: Callable[[str], int]
    set_replicas: Callable[[str, int], None]
    slurm: SlurmFn


@dataclass(frozen=True)
class PoolSegment:
    """One StatefulSet of a pool: pod i is Slurm node <pool>-<offset + i>."""

    statefulset: str
    offset: int
    min_replicas: int
    max_replicas: int

    def target(self, replicas: int) -> int:
        """This StatefulSet's replicas when the pool runs nodes 0..replicas-1."""
        return max(0, min(self.max_replicas, replicas - self.offset))


def pool_segments(bundle: Bundle, pool: str) -> list[PoolSegment]:
    """The pool's StatefulSets in node order, from the rendered labels and annotations."""
    found = []
    for sts in bundle.of_kind("StatefulSet"):
        labels, notes = sts["metadata"].get("labels", {}), sts["metadata"].get("annotations", {})
        if labels.get(naming.LABEL_POOL) == pool and naming.ANNOTATION_MAX_REPLICAS in notes:
            found.append(PoolSegment(sts["metadata"]["name"], int(notes.get(naming.ANNOTATION_FIRST_NODE, "0")),
                                     int(notes[naming.ANNOTATION_MIN_REPLICAS]), int(notes[naming.ANNOTATION_MAX_REPLICAS])))
    if not found:
        pools = sorted({o["metadata"]["labels"][naming.LABEL_POOL] for o in bundle.of_kind("StatefulSet")
                        if naming.LABEL_POOL in o["metadata"]["labels"]})
        raise UsageError(f"no pool {pool!r} in cluster {bundle.cluster} (pools: {', '.join(pools)})")
    return sorted(found, key=lambda s: s.offset)


def pool_range(bundle: Bundle, pool: str) -> tuple[str, int, int]:
    """(first StatefulSet, minReplicas, maxReplicas) of a pool, from the rendered annotations."""
    segments = pool_segments(bundle, pool)
    return (segments[0].statefulset, sum(s.min_replicas for s in segments), sum(s.max_replicas for s in segments))


def checked_segments(bundle: Bundle, pool: str, replicas: int) -> list[PoolSegment]:
    """The pool's StatefulSets; UsageError (exit 2) for an unknown pool or a count outside min..max."""
    _, low, high = pool_range(bundle, pool)
    if not low <= replicas <= high:
        raise UsageError(f"pool {pool}: {replicas} is outside minReplicas..maxReplicas ({low}..{high})")
    return pool_segments(bundle, pool)


def checked_target(bundle: Bundle, pool: str, replicas: int) -> str:
    """The pool's (first) StatefulSet; UsageError (exit 2) for an unknown pool or a count outside min..max."""
    return checked_segments(bundle, pool, replicas)[0].statefulset


def powering_down(slurm: SlurmFn, nodes: list[str]) -> list[str]:
    """Those of nodes that Slurm is powering down, or is about to (sinfo's state suffixes % and !).

    sinfo, not scontrol: 22.05 hides powered-down CLOUD nodes, and scontrol fails on a hidden one.
    """
    out = slurm(["sinfo", "-h", "-N", "-n", ",".join(nodes), "-o", "%N %t"])
    states = dict(line.split() for line in out.splitlines() if line.strip())
    return sorted(n for n, state in states.items() if {"%", "!"} & set(state.lstrip("abcdefghijklmnopqrstuvwxyz")))


def wait_power_down_settled(pool: str, nodes: list[str], slurm: SlurmFn, end: float, timeout_s: float,
                            poll_s: float, log: Callable[[str], None]) -> None:
    """Wait until Slurm powers none of nodes down.

    A slurmd that registers while its node is powering down is overruled: Slurm then marks
    the node powered down while its pod runs, and the next job that needs it waits out
    ResumeTimeout and leaves it DOWN (seen in the lab on 26.05). SuspendTimeout bounds the wait.
    """
    said = False
    while busy := powering_down(slurm, nodes):
        if time.monotonic() > end:
            raise ClusterError(f"pool {pool}: Slurm is still powering down {','.join(busy)} after {timeout_s:.0f} s; "
                               "nothing was scaled")
        if not said:
            log(f"pool {pool}: waiting for Slurm to finish powering down {','.join(busy)}")
            said = True
        time.sleep(poll_s)


def scale_pool(bundle: Bundle, pool: str, replicas: int, access: PoolAccess, timeout_s: float = 24 * 3600,
               poll_s: float = 2.0, log: Callable[[str], None] = print) -> int:
    """Scale a pool without killing a job; returns the replicas before. UsageError outside min..max."""
    segments = checked_segments(bundle, pool, replicas)
    end = time.monotonic() + timeout_s
    # First let Slurm finish powering down any node that is to run: its SuspendProgram may still
    # lower the replicas, so they are read only after that.
    staying = [naming.slurm_node_name(pool, s.offset + i) for s in segments for i in range(s.target(replicas))]
    if staying:
        wait_power_down_settled(pool, staying, access.slurm, end, timeout_s, poll_s, log)
    live = {s.statefulset: access.get_replicas(s.statefulset) for s in segments}
    current = sum(live.values())
    # Growing never kills anything: at once.
    for s in segments:
        if s.target(replicas) > live[s.statefulset]:
            access.set_replicas(s.statefulset, s.target(replicas))
    shrinking = {s.statefulset: s.target(replicas) for s in segments if s.target(replicas) < live[s.statefulset]}
    if not shrinking:
        log(f"pool {pool}: {current} -> {replicas} replicas")
        return current
    nodes = drain_and_shrink(pool, segments, live, shrinking, access, end, timeout_s, poll_s, log)
    log(f"pool {pool}: {current} -> {replicas} replicas; {nodes} powered down")
    return current


def drain_and_shrink(pool: str, segments: list[PoolSegment], live: dict[str, int], targets: dict[str, int],
                     access: PoolAccess, end: float, timeout_s: float, poll_s: float, log: Callable[[str], None],
                     hand_back: bool = True) -> str:
    """Drain the nodes above each StatefulSet's target, wait until they run no job, then lower the replicas.

    Returns the hostlist that went. With hand_back the nodes go back to power saving (powered
    down, drain cleared); without, they stay DRAINED under DRAIN_REASON (nodes a new slurm.conf
    drops must not be resumed meanwhile). On timeout nothing is scaled and the nodes stay drained.
    """
    going = [naming.slurm_node_name(pool, s.offset + i) for s in segments if s.statefulset in targets
             for i in range(targets[s.statefulset], live[s.statefulset])]
    current = sum(live.values())
    nodes = ",".join(going)
    access.slurm(["scontrol", "update", f"nodename={nodes}", "state=drain", f"reason={DRAIN_REASON}"])
    log(f"pool {pool}: draining {nodes}; waiting for their jobs to finish")
    while True:
        jobs = access.slurm(["squeue", "-h", "-w", nodes, "-o", "%i %T"]).split("\n")
        jobs = [j for j in jobs if j.strip()]
        if not jobs:
            break
        if time.monotonic() > end:
            raise ClusterError(f"pool {pool}: jobs still running on {nodes} after {timeout_s:.0f} s "
                               f"({'; '.join(jobs)}); the nodes stay drained and the pool keeps {current} replicas")
        time.sleep(poll_s)
    for statefulset, target in targets.items():
        access.set_replicas(statefulset, target)
    if hand_back:
        # The pods are going: hand the nodes back to power saving (powered down, no longer drained).
        access.slurm(["scontrol", "update", f"nodename={nodes}", "state=power_down_force"])
        access.slurm(["scontrol", "update", f"nodename={nodes}", "state=resume"])
    return nodes


def run_scale(profile_path: str, pool: str, replicas: int, lab: bool, timeout_s: float, access,
              verbose: bool = False, echo: Callable[[str], None] = print) -> int:
    """`slurmk8s scale`: against Kubernetes, or the profile's running lab with --lab."""
    from slurmk8s.actions.render import render_file
    bundle = render_file(profile_path)
    checked_target(bundle, pool, replicas)  # refused before any connection
    if lab:
        from slurmk8s.lab.access import lab_pool_access
        get, put, slurm = lab_pool_access(bundle)
    else:
        from slurmk8s.actions.up import controller_pod
        from slurmk8s.kube import scale as kscale
        from slurmk8s.kube.client import connect, request_budget
        from slurmk8s.kube.execpod import controller_exec
        kube = connect(access, verbose=verbose, timeout=request_budget(timeout_s))
        get = lambda sts: kscale.get_replicas(kube, bundle.namespace, sts)  # noqa: E731
        put = lambda sts, n: kscale.set_replicas(kube, bundle.namespace, sts, n)  # noqa: E731
        slurm = controller_exec(kube, bundle.namespace, controller_pod(bundle.cluster))
    return scale_pool(bundle, pool, replicas, PoolAccess(get, put, slurm), timeout_s, log=echo)
