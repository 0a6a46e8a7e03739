"""spec.sideBySide: nodes that Slurm and Kubernetes share, and the rules that keep them from double-booking.

Model (frozen dataclasses), loader (raw YAML mapping -> model) and the cross-field
fence check live here, beside the rest of the profile layer; render/fence.py turns a
shape into the plan both sides are generated from.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from slurmk8s.profile.defaults import default
from slurmk8s.quantity import from_mib, to_mib

Problem = tuple[tuple, str, bool]

HOST, POD = "host", "pod"
# slurmd must have room beside the jobs (same floor as a pool's memory).
MIN_SLURM_MEMORY_MIB = 512
_CPULIST = re.compile(r"^[0-9]+(-[0-9]+)?(,[0-9]+(-[0-9]+)?)*$")


def parse_cpulist(value: str | int) -> tuple[int, ...]:
    """CPU ids of a Linux cpulist ("0-3,8" or a single id), sorted, without duplicates.

    Ranges are merged before they are expanded, so the work is bounded by the ids that
    exist (the schema keeps them below 10000), not by how often a range is repeated.
    """
    text = str(value)
    if not _CPULIST.match(text):
        raise ValueError(f"not a cpulist: {text!r}")
    spans = []
    for part in text.split(","):
        first, _, last = part.partition("-")
        spans.append((int(first), int(last or first)))
    ids: list[int] = []
    end = -1
    for low, high in sorted(spans):
        if high > end:
            ids.extend(range(max(low, end + 1), high + 1))
            end = high
    return tuple(ids)


def format_cpulist(ids: tuple[int, ...] | list[int] | set[int] | frozenset[int]) -> str:
    """The shortest cpulist for a set of ids ("0-3,8"); "" for none."""
    runs: list[list[int]] = []
    for i in sorted(set(ids)):
        if runs and i == runs[-1][1] + 1:
            runs[-1][1] = i
        else:
            runs.append([i, i])
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)


@dataclass(frozen=True)
class Share:
    """What one side of a shared node gets: CPU ids, memory, GPU indices."""

    cpus: tuple[int, ...]
    memory_mib: int
    gpus: tuple[int, ...] = ()


@dataclass(frozen=True)
class NodeShape:
    """Nodes with the same hardware and the same split between Slurm, Kubernetes and the system."""

    name: str
    nodes: tuple[str, ...]
    node_selector: tuple[tuple[str, str], ...]
    cpus: tuple[int, ...]
    numa: tuple[tuple[int, ...], ...]
    memory_mib: int
    gpus: tuple[int, ...]
    gpu_type: str | None
    gpu_resource: str
    features: tuple[str, ...]
    slurm: Share
    system: Share
    kubernetes: Share
    kubernetes_explicit: bool  # False: Kubernetes gets the rest

    @property
    def slurm_features(self) -> tuple[str, ...]:
        """Slurm Features of the shape's nodes: the shape name first."""
        return (self.name,) + tuple(f for f in self.features if f != self.name)


@dataclass(frozen=True)
class SideBySide:
    """The shared nodes of a cluster and how they are fenced."""

    mode: str
    partition: str
    shapes: tuple[NodeShape, ...]

    def shape(self, name: str) -> NodeShape:
        return next(s for s in self.shapes if s.name == name)



def _cpus(value: Any) -> tuple[int, ...]:
    return parse_cpulist(value) if value is not None else ()


def load_side_by_side(raw: dict[str, Any] | None) -> SideBySide | None:
    """The model of a schema-valid spec.sideBySide (None when absent)."""
    if not raw:
        return None
    return SideBySide(
        mode=raw.get("mode", default("spec.sideBySide.mode")),
        partition=raw.get("partition", default("spec.sideBySide.partition")),
        shapes=tuple(sorted((_shape(s) for s in raw["shapes"]), key=lambda s: s.name)),
    )


def _shape(raw: dict[str, Any]) -> NodeShape:
    node_cpus = _cpus(raw["cpus"])
    memory = to_mib(raw["memory"])
    gpus = tuple(sorted(raw.get("gpus", [])))
    s, y = raw["slurm"], raw["system"]
    slurm = Share(_cpus(s["cpus"]), to_mib(s["memory"]), tuple(sorted(s.get("gpus", []))))
    system = Share(_cpus(y.get("cpus")), to_mib(y["memory"]))
    k = raw.get("kubernetes")
    if k is not None:
        rest_cpus = tuple(c for c in node_cpus if c not in set(slurm.cpus) | set(system.cpus))
        kube = Share(_cpus(k["cpus"]) if "cpus" in k else rest_cpus,
                     to_mib(k["memory"]) if "memory" in k else memory - slurm.memory_mib - system.memory_mib,
                     tuple(sorted(k["gpus"])) if "gpus" in k else tuple(g for g in gpus if g not in slurm.gpus))
    else:
        kube = Share(tuple(c for c in node_cpus if c not in set(slurm.cpus) | set(system.cpus)),
                     memory - slurm.memory_mib - system.memory_mib,
                     tuple(g for g in gpus if g not in slurm.gpus))
    return NodeShape(
        name=raw["name"],
        nodes=tuple(sorted(raw.get("nodes", []))),
        node_selector=tuple(sorted(raw.get("nodeSelector", {}).items())),
        cpus=node_cpus,
        numa=tuple(_cpus(n) for n in raw.get("numa", [])),
        memory_mib=memory,
        gpus=gpus,
        gpu_type=raw.get("gpuType"),
        gpu_resource=raw.get("gpuResource", default("spec.sideBySide.shapes[].gpuResource")),
        features=tuple(raw.get("features", [])),
        slurm=slurm,
        system=system,
        kubernetes=kube,
        kubernetes_explicit=k is not None,
    )


# ---------------------------------------------------------------- the fence check


def check_side_by_side(model: SideBySide | None, spec: dict[str, Any], pool_node_names: set[str],
                       partition_names: set[str]) -> list[Problem]:
    """Every double-booking or misfit of the shared nodes, each naming its shape and the overlap."""
    raw = spec.get("sideBySide")
    if not raw or model is None:
        return []
    out: list[Problem] = []
    base = ("spec", "sideBySide")
    if model.partition in partition_names:
        out.append((base + ("partition",), f"partition '{model.partition}' is also in spec.partitions; "
                    "the shared nodes need a partition of their own", False))
    seen_shape: dict[str, int] = {}
    seen_node: dict[str, int] = {}
    for i, raw_shape in enumerate(raw["shapes"]):
        at = base + ("shapes", i)
        name = raw_shape["name"]
        if name in seen_shape:
            out.append((at + ("name",), f"duplicate shape name '{name}' (also spec.sideBySide.shapes[{seen_shape[name]}])", False))
        seen_shape.setdefault(name, i)
        for j, node in enumerate(raw_shape.get("nodes", [])):
            if node in seen_node and seen_node[node] != i:
                out.append((at + ("nodes", j), f"shape '{name}': node '{node}' is also in spec.sideBySide.shapes[{seen_node[node]}]", False))
            seen_node.setdefault(node, i)
            if node in pool_node_names:
                out.append((at + ("nodes", j), f"shape '{name}': node '{node}' has the name of a pool's Slurm node", False))
        out += check_shape(_shape(raw_shape), raw_shape, at, model.mode)
    return out


def _ids(ids: set[int] | tuple[int, ...]) -> str:
    return format_cpulist(ids)


def _gpu_ids(ids: set[int] | tuple[int, ...]) -> str:
    return ",".join(str(g) for g in sorted(ids))


def check_shape(shape: NodeShape, raw: dict[str, Any], at: tuple, mode: str) -> list[Problem]:
    """The fence rules of one shape: disjoint CPUs and GPUs, shares that fit the node."""
    out: list[Problem] = []
    who = f"shape '{shape.name}'"
    node_cpus, node_gpus = set(shape.cpus), set(shape.gpus)
    if not shape.nodes:
        # A selector alone would need dynamic Slurm nodes (slurmd -Z), which this generator does not write yet.
        out.append((at, f"{who}: list the shared nodes in 'nodes' (each is a Slurm NodeName; "
                    "'nodeSelector' only narrows where they run)", False))
    if mode == POD and not shape.system.cpus:
        out.append((at + ("system",), f"{who}: pod mode needs system CPUs (the kubelet's static CPU manager "
                    "requires reservedSystemCPUs)", False))
    if mode == POD and shape.slurm.gpus:
        out.append((at + ("slurm", "gpus"), f"{who}: GPUs for Slurm in pod mode are not supported yet "
                    "(the device plugin picks the devices, so gres.conf cannot name them); use host mode", False))
    if mode == POD and shape.kubernetes_explicit:
        out.append((at + ("kubernetes",), f"{who}: in pod mode Kubernetes' share is what the kubelet leaves "
                    "after the system reserve and the slurmd pod; omit 'kubernetes'", True))
    # NUMA nodes partition the node's CPUs.
    numa_seen: set[int] = set()
    for j, numa in enumerate(shape.numa):
        outside = set(numa) - node_cpus
        if outside:
            out.append((at + ("numa", j), f"{who}: CPUs {_ids(outside)} are not among the node's CPUs {_ids(node_cpus)}", False))
        twice = set(numa) & numa_seen
        if twice:
            out.append((at + ("numa", j), f"{who}: CPUs {_ids(twice)} are in two NUMA nodes", False))
        numa_seen |= set(numa)
    if shape.numa and node_cpus - numa_seen:
        out.append((at + ("numa",), f"{who}: CPUs {_ids(node_cpus - numa_seen)} are in no NUMA node", False))
    sides = [("slurm", shape.slurm, True), ("system", shape.system, True),
             ("kubernetes", shape.kubernetes, shape.kubernetes_explicit)]
    for side, share, written in sides:
        if not written:
            continue
        written_cpus = side != "kubernetes" or "cpus" in raw.get("kubernetes", {})
        outside = set(share.cpus) - node_cpus
        if written_cpus and outside:
            out.append((at + (side, "cpus"), f"{who}: CPUs {_ids(outside)} are not on the node (its CPUs are {_ids(node_cpus)})", False))
        outside_gpus = set(share.gpus) - node_gpus
        if outside_gpus:
            out.append((at + (side, "gpus"), f"{who}: GPUs {_gpu_ids(outside_gpus)} are not on the node "
                        f"(its GPUs are {_gpu_ids(node_gpus) or 'none'})", False))
    # Disjointness: each later side is blamed for what it shares with an earlier one.
    pairs = [("system", shape.system, "slurm", shape.slurm)]
    if shape.kubernetes_explicit:
        k = raw.get("kubernetes", {})
        if "cpus" in k:
            pairs += [("kubernetes", shape.kubernetes, "slurm", shape.slurm),
                      ("kubernetes", shape.kubernetes, "system", shape.system)]
        if "gpus" in k:
            both = set(shape.kubernetes.gpus) & set(shape.slurm.gpus)
            if both:
                out.append((at + ("kubernetes", "gpus"), f"{who}: GPUs {_gpu_ids(both)} are both Slurm's and Kubernetes'", False))
    for side, share, other, other_share in pairs:
        both = set(share.cpus) & set(other_share.cpus)
        if both:
            out.append((at + (side, "cpus"), f"{who}: CPUs {_ids(both)} are both {_label(other)} and {_label(side)}", False))
    # In pod mode Kubernetes' pods also run on the system CPUs (the kubelet's shared pool holds
    # reservedSystemCPUs), so only host mode needs a CPU of Kubernetes' own.
    if mode != POD and not (node_cpus - set(shape.slurm.cpus) - set(shape.system.cpus)):
        out.append((at + ("slurm", "cpus"), f"{who}: Slurm and the system reserve take every CPU; "
                    "Kubernetes needs at least one", False))
    if shape.slurm.memory_mib < MIN_SLURM_MEMORY_MIB:
        out.append((at + ("slurm", "memory"), f"{who}: {from_mib(shape.slurm.memory_mib)} is less than the minimum of "
                    f"{MIN_SLURM_MEMORY_MIB}Mi (slurmd needs room beside the jobs)", False))
    kube_mib = shape.kubernetes.memory_mib if shape.kubernetes_explicit and "memory" in raw.get("kubernetes", {}) else 0
    total = shape.slurm.memory_mib + shape.system.memory_mib + kube_mib
    if total > shape.memory_mib or (kube_mib == 0 and total >= shape.memory_mib):
        parts = f"Slurm {from_mib(shape.slurm.memory_mib)} + system {from_mib(shape.system.memory_mib)}"
        if kube_mib:
            parts += f" + Kubernetes {from_mib(kube_mib)}"
        verb = "exceed" if total > shape.memory_mib else "leave Kubernetes nothing of"
        out.append((at + ("slurm", "memory"), f"{who}: {parts} = {from_mib(total)} {verb} the node's {from_mib(shape.memory_mib)}", False))
    return out


def _label(side: str) -> str:
    return {"slurm": "Slurm's", "system": "the system reserve's", "kubernetes": "Kubernetes'"}[side]
