"""spec.topology: the network domains (tree switches or blocks), where each pool's slots sit, and the checks.

Model (frozen dataclasses), loader (raw YAML mapping -> model), the label presets and the
cross-field rules live here, beside the rest of the profile layer; render/topology.py turns
the domains into per-leaf StatefulSets and topology.conf / topology.yaml.

A leaf domain (a leaf switch, or a block) holds `slots`: how many Slurm nodes of each pool
sit in it. A pool's nodes `<pool>-<n>` are numbered leaf by leaf in the order the leaves
are listed, so each leaf owns one contiguous range of every pool it holds.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from slurmk8s import naming, versions

Problem = tuple[tuple, str, bool]

TREE, BLOCK = "tree", "block"
ROOT_SWITCH = "root"  # added above the top-level switches when there are several
UNKNOWN_DOMAIN = "unknown"  # where `topology discover` puts nodes without the labels


@dataclass(frozen=True)
class Preset:
    """A provider's node-label convention: tree tiers from the top to the leaf, and the block label."""

    tree: tuple[str, ...]
    block: str
    about: str


# Label keys as the providers document them (docs/topology.md names the sources).
PRESETS: dict[str, Preset] = {
    "gke": Preset(("cloud.google.com/gce-topology-block", "cloud.google.com/gce-topology-subblock"),
                  "cloud.google.com/gce-topology-subblock", "GKE: block, then sub-block"),
    "eks": Preset(("topology.k8s.aws/network-node-layer-1", "topology.k8s.aws/network-node-layer-2",
                   "topology.k8s.aws/network-node-layer-3"),
                  "topology.k8s.aws/network-node-layer-3", "EKS: network node layers 1 (spine) .. 3 (leaf)"),
    "nvidia": Preset(("nvidia.com/gpu.clique",), "nvidia.com/gpu.clique", "NVIDIA GPU feature discovery: NVLink clique"),
    "oci": Preset(("oci.oraclecloud.com/rdma.hpc_island_id", "oci.oraclecloud.com/rdma.network_block_id",
                   "oci.oraclecloud.com/rdma.local_block_id"),
                  "oci.oraclecloud.com/rdma.local_block_id", "OKE: HPC island, network block, local block"),
    "zone": Preset(("topology.kubernetes.io/zone",), "topology.kubernetes.io/zone", "Kubernetes zone (coarse fallback)"),
}


@dataclass(frozen=True)
class Domain:
    """A switch (tree) or a block. Leaves hold slots; inner switches hold children."""

    name: str
    node_labels: tuple[tuple[str, str], ...]
    slots: tuple[tuple[str, int], ...]  # (pool, count), in pool-name order
    children: tuple["Domain", ...]

    @property
    def is_leaf(self) -> bool:
        return not self.children


@dataclass(frozen=True)
class Topology:
    """A validated spec.topology."""

    plugin: str
    domains: tuple[Domain, ...]
    label_keys: tuple[str, ...]  # fromLabels resolved to keys (top tier first); () when domains are listed
    preset: str | None
    block_sizes: tuple[int, ...]

    def leaves(self) -> list[tuple[tuple[Domain, ...], Domain]]:
        """(ancestors from the top, leaf) for every leaf, in the order written."""
        out: list[tuple[tuple[Domain, ...], Domain]] = []

        def walk(domain: Domain, above: tuple[Domain, ...]) -> None:
            if domain.is_leaf:
                out.append((above, domain))
            for child in domain.children:
                walk(child, above + (domain,))

        for d in self.domains:
            walk(d, ())
        return out

    def affinity_labels(self, ancestors: tuple[Domain, ...], leaf: Domain) -> tuple[tuple[str, str], ...]:
        """Every node label a pod of this leaf requires: the leaf's and each ancestor's."""
        labels: dict[str, str] = {}
        for d in ancestors + (leaf,):
            labels.update(d.node_labels)
        return tuple(sorted(labels.items()))


def resolve_keys(plugin: str, from_labels: Any) -> tuple[tuple[str, ...], str | None]:
    """(label keys top tier first, preset name) of a fromLabels value: a preset name or a list of keys."""
    if from_labels is None:
        return (), None
    if isinstance(from_labels, str):
        preset = PRESETS[from_labels]
        return (preset.tree if plugin == TREE else (preset.block,)), from_labels
    return tuple(from_labels), None


def _domain(raw: dict) -> Domain:
    return Domain(
        name=raw["name"],
        node_labels=tuple(sorted(raw.get("nodeLabels", {}).items())),
        slots=tuple(sorted(raw.get("slots", {}).items())),
        children=tuple(_domain(c) for c in raw.get("children", [])),
    )


def load_topology(raw: dict | None) -> Topology | None:
    """The model of a schema-valid spec.topology; None when absent or empty (no topology plugin)."""
    if not raw:
        return None
    plugin = raw["plugin"]
    keys, preset = resolve_keys(plugin, raw.get("fromLabels"))
    return Topology(plugin=plugin, domains=tuple(_domain(d) for d in raw["domains"]), label_keys=keys,
                    preset=preset, block_sizes=tuple(raw.get("blockSizes", [])))


def default_block_sizes(topology: Topology, version: str) -> tuple[int, ...]:
    """BlockSizes to write: the profile's, else the smallest block when sizes differ (24.05+), else none."""
    if topology.block_sizes:
        return topology.block_sizes
    counts = [sum(c for _, c in leaf.slots) for _, leaf in topology.leaves()]
    if len(set(counts)) > 1 and versions.dialect(version).has_block_sizes:
        return (min(counts),)
    return ()


def check_topology(topology: Topology | None, spec: dict, cluster: str, version: str,
                   pools: dict[str, tuple[int, bool]]) -> list[Problem]:
    """Cross-field rules of spec.topology; pools maps a pool name to (maxReplicas, elastic)."""
    if topology is None:
        return []
    at = ("spec", "topology")
    raw = spec["topology"]
    out: list[Problem] = []
    dialect = versions.dialect(version)
    if topology.plugin == BLOCK and not dialect.has_topology_block:
        out.append((at + ("plugin",), f"topology/block needs Slurm 23.11 or newer; {version} has only tree", False))
    if "blockSizes" in raw:
        if topology.plugin != BLOCK:
            out.append((at + ("blockSizes",), "blockSizes applies to plugin 'block' only", True))
        elif not dialect.has_block_sizes:
            out.append((at + ("blockSizes",), f"BlockSizes needs Slurm 24.05 or newer; {version} has none", True))
    config_keys = {k.lower(): k for k in spec.get("slurm", {}).get("config", {})}
    if topology.plugin == TREE and dialect.tree_breaks_dynamic_nodes and "maxnodecount" in config_keys:
        # Pool nodes are static CLOUD nodes (in topology.conf); MaxNodeCount admits dynamic ones, which are not.
        out.append((("spec", "slurm", "config", config_keys["maxnodecount"]), f"dynamic nodes (MaxNodeCount) with "
                    f"topology/tree make every job fail on Slurm {version}; drop one of them", True))
    seen: dict[str, tuple] = {}
    placed: dict[str, int] = {}
    # StatefulSet name -> (pool, leaf, where): <cluster>-<pool>-<leaf> can alias (pool a in leaf b-c
    # and pool a-b in leaf c), and one StatefulSet would then silently replace the other.
    segment_names: dict[str, tuple[str, str, tuple]] = {}

    def walk(domains: list, where: tuple, depth: int) -> None:
        for i, d in enumerate(domains):
            here = where + (i,)
            name = d["name"]
            if name in seen:
                out.append((here + ("name",), f"duplicate domain name '{name}' (also {_path(seen[name])})", False))
            elif name == ROOT_SWITCH and topology.plugin == TREE:
                out.append((here + ("name",), f"'{ROOT_SWITCH}' is reserved (the switch above the top-level switches)", False))
            seen.setdefault(name, here)
            children = d.get("children", [])
            if children and topology.plugin == BLOCK:
                out.append((here + ("children",), "blocks have no children (children are for plugin 'tree')", True))
            if children and d.get("slots"):
                out.append((here + ("slots",), "a switch with children holds no slots; put them in its leaf switches", True))
            if not children and not any(d.get("slots", {}).values()):
                out.append((here + ("name",), f"leaf domain '{name}' holds no slots (give it slots of a pool)", False))
            if topology.label_keys:
                key = topology.label_keys[depth] if depth < len(topology.label_keys) else None
                if key is None:
                    out.append((here + ("name",), f"domain '{name}' is deeper than the {len(topology.label_keys)} "
                                f"label tier(s) of fromLabels", False))
                elif key not in d.get("nodeLabels", {}):
                    out.append((here + ("name",), f"domain '{name}' needs nodeLabels['{key}'] (tier {depth + 1} of fromLabels)", False))
                elif not children and depth != len(topology.label_keys) - 1:
                    out.append((here + ("name",), f"leaf domain '{name}' is at tier {depth + 1}; fromLabels has "
                                f"{len(topology.label_keys)} tiers, so leaves are at tier {len(topology.label_keys)}", False))
            for j, (pool, count) in enumerate(d.get("slots", {}).items()):
                if pool not in pools:
                    out.append((here + ("slots", pool), f"unknown pool {pool!r} (pools: {', '.join(sorted(pools))})", True))
                    continue
                placed[pool] = placed.get(pool, 0) + count
                sts = naming.segment_statefulset(cluster, pool, name)
                if count and len(sts) > naming.MAX_STATEFULSET_NAME:
                    out.append((here + ("name",), f"StatefulSet name '{sts}' would be {len(sts)} characters; the limit "
                                f"is {naming.MAX_STATEFULSET_NAME} (shorten the domain, pool or cluster name)", False))
                if count and not children:
                    other = segment_names.setdefault(sts, (pool, name, here))
                    if other[:2] != (pool, name):
                        out.append((here + ("slots", pool), f"pool '{pool}' in domain '{name}' and pool '{other[0]}' in "
                                    f"domain '{other[1]}' ({_path(other[2])}) would both be StatefulSet '{sts}'; "
                                    "rename a pool or a domain", True))
            walk(children, here + ("children",), depth + 1)

    walk(raw["domains"], at + ("domains",), 0)
    pinned: dict[tuple, str] = {}
    for index, (ancestors, leaf) in enumerate(topology.leaves()):
        labels = topology.affinity_labels(ancestors, leaf)
        where = _leaf_path(raw["domains"], leaf.name)
        if not labels:
            out.append((where + ("name",), f"leaf domain '{leaf.name}' has no nodeLabels (nor has any switch above it): "
                        "nothing would pin its pods to the domain", False))
        elif labels in pinned:
            out.append((where + ("name",), f"leaf domain '{leaf.name}' requires the same node labels as "
                        f"'{pinned[labels]}': its pods could land in the other domain", False))
        pinned.setdefault(labels, leaf.name)
    for pool, (maximum, _) in sorted(pools.items()):
        if placed.get(pool, 0) != maximum:
            out.append((at + ("domains",), f"pool '{pool}' has maxReplicas {maximum} but {placed.get(pool, 0)} slot(s) "
                        "in the leaf domains; every Slurm node must sit in exactly one leaf", True))
    if topology.plugin == BLOCK and not out:
        out += _check_blocks(topology, raw, version)
    return out


def _check_blocks(topology: Topology, raw: dict, version: str) -> list[Problem]:
    at = ("spec", "topology")
    counts = [sum(c for _, c in leaf.slots) for _, leaf in topology.leaves()]
    sizes = topology.block_sizes
    if not sizes and len(set(counts)) > 1 and not versions.dialect(version).has_block_sizes:
        return [(at + ("domains",), f"blocks of unequal sizes ({', '.join(map(str, counts))} nodes) need BlockSizes, "
                 f"which Slurm {version} lacks (24.05+); make the blocks equal", True)]
    out: list[Problem] = []
    if sizes:
        if min(counts) < sizes[0]:
            out.append((at + ("blockSizes",), f"every block needs at least the base size {sizes[0]} nodes; the smallest "
                        f"has {min(counts)}", True))
        for a, b in zip(sizes, sizes[1:]):
            if b <= a or (b // a) & (b // a - 1) or b % a:
                out.append((at + ("blockSizes",), f"{b} must be a power-of-two multiple of {a} (Slurm's rule)", True))
                break
    return out


def _leaf_path(domains: list, name: str, where: tuple = ("spec", "topology", "domains")) -> tuple:
    """Path of the first domain called name (the one the leaves() walk met)."""
    for i, d in enumerate(domains):
        if d["name"] == name and not d.get("children"):
            return where + (i,)
        found = _leaf_path(d.get("children", []), name, where + (i, "children"))
        if found:
            return found
    return ()


def _path(path: tuple) -> str:
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else part)
    return text
