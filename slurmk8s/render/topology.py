"""Topology: a pool's segments (one StatefulSet per leaf domain) and topology.conf / topology.yaml.

Pure. A pool without spec.topology is one segment covering all its nodes, exactly as
before; with it, leaf j of a pool owns Slurm nodes <pool>-<offset_j> .. <offset_j + slots_j - 1>
and runs them as StatefulSet <cluster>-<pool>-<leaf>, pod i being node offset_j + i.
"""

from __future__ import annotations

from dataclasses import dataclass

from slurmk8s import naming, versions
from slurmk8s.profile.model import Pool, Profile
from slurmk8s.profile.topology import BLOCK, ROOT_SWITCH, TREE, Domain, Topology, default_block_sizes

TOPOLOGY_NAME = "default"  # the one topology in topology.yaml (cluster_default)


@dataclass(frozen=True)
class Segment:
    """The nodes of one pool in one leaf domain (or the whole pool without topology)."""

    pool: str
    domain: str | None
    statefulset: str
    offset: int  # Slurm node number of pod 0
    slots: int  # pods the StatefulSet may have (its maxReplicas)
    replicas: int
    min_replicas: int
    affinity: tuple[tuple[str, str], ...]  # node labels every pod requires

    @property
    def node_names(self) -> str:
        """Slurm hostlist of the segment's nodes."""
        return naming.slurm_node_span(self.pool, self.offset, self.slots)

    def node(self, ordinal: int) -> str:
        """Slurm node name of pod `ordinal`."""
        return naming.slurm_node_name(self.pool, self.offset + ordinal)


def _clamp(value: int, low: int, high: int) -> int:
    return max(low, min(high, value))


def pool_segments(profile: Profile, pool: Pool) -> list[Segment]:
    """The pool's segments in node order; the running nodes stay <pool>-0 .. <pool>-(replicas-1)."""
    topo = profile.topology
    if topo is None:
        return [Segment(pool.name, None, naming.pool_statefulset(profile.name, pool.name), 0, pool.max_replicas,
                        pool.replicas, pool.min_replicas, ())]
    out, offset = [], 0
    for ancestors, leaf in topo.leaves():
        slots = dict(leaf.slots).get(pool.name, 0)
        if not slots:
            continue
        out.append(Segment(pool.name, leaf.name, naming.segment_statefulset(profile.name, pool.name, leaf.name), offset,
                           slots, _clamp(pool.replicas - offset, 0, slots), _clamp(pool.min_replicas - offset, 0, slots),
                           topo.affinity_labels(ancestors, leaf)))
        offset += slots
    return out


def all_segments(profile: Profile) -> list[Segment]:
    """Every segment of every pool, pools in name order."""
    return [s for p in profile.pools for s in pool_segments(profile, p)]


def node_affinity(segment: Segment) -> dict | None:
    """Required node affinity to the segment's domain labels (None when unpinned)."""
    if not segment.affinity:
        return None
    expressions = [{"key": k, "operator": "In", "values": [v]} for k, v in segment.affinity]
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
        "nodeSelectorTerms": [{"matchExpressions": expressions}]}}}


def leaf_nodes(profile: Profile) -> dict[str, str]:
    """Leaf domain name -> Slurm hostlist of its nodes (each pool's span, pools in name order)."""
    spans: dict[str, list[str]] = {}
    for seg in all_segments(profile):
        if seg.domain is not None:
            spans.setdefault(seg.domain, []).append(seg.node_names)
    return {leaf: ",".join(s) for leaf, s in spans.items()}


def _switches(topo: Topology, nodes: dict[str, str]) -> list[tuple[str, str, str]]:
    """(switch, 'Switches' | 'Nodes', members) top-down: a root above several top-level switches."""
    out: list[tuple[str, str, str]] = []
    if len(topo.domains) > 1:
        out.append((ROOT_SWITCH, "Switches", ",".join(d.name for d in topo.domains)))

    def walk(d: Domain) -> None:
        if d.is_leaf:
            out.append((d.name, "Nodes", nodes[d.name]))
        else:
            out.append((d.name, "Switches", ",".join(c.name for c in d.children)))
            for c in d.children:
                walk(c)

    for d in topo.domains:
        walk(d)
    return out


def topology_file_name(profile: Profile) -> str | None:
    """topology.yaml from 25.05, topology.conf before; None without topology."""
    if profile.topology is None:
        return None
    return "topology.yaml" if versions.dialect(profile.version).has_topology_yaml else "topology.conf"


def topology_plugin(profile: Profile) -> str | None:
    """slurm.conf TopologyPlugin: only with topology.conf (Slurm ignores it when topology.yaml exists)."""
    if topology_file_name(profile) != "topology.conf":
        return None
    assert profile.topology is not None  # topology_file_name is None without one
    return f"topology/{profile.topology.plugin}"


def topology_data(profile: Profile) -> dict[str, object]:
    """What the topology templates lay out."""
    topo = profile.topology
    assert topo is not None  # rendered only when topology_file_name is set, i.e. with a topology
    nodes = leaf_nodes(profile)
    data: dict[str, object] = {"cluster": profile.name, "version": profile.version, "plugin": topo.plugin,
                               "name": TOPOLOGY_NAME, "switches": [], "blocks": [], "block_sizes": []}
    if topo.plugin == TREE:
        data["switches"] = _switches(topo, nodes)
    elif topo.plugin == BLOCK:
        data["blocks"] = [(leaf.name, nodes[leaf.name]) for _, leaf in topo.leaves()]
        data["block_sizes"] = list(default_block_sizes(topo, profile.version))
    return data
