"""`slurmk8s topology discover`: group a cluster's nodes by topology labels into the profile's spec.topology.

The grouping is pure (discover_topology); only run_discover reads the cluster.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field

import yaml

from slurmk8s.errors import UsageError
from slurmk8s.profile.topology import BLOCK, PRESETS, TREE, UNKNOWN_DOMAIN, resolve_keys

MAX_DOMAIN_NAME = 20  # leaves name StatefulSets <cluster>-<pool>-<leaf> (at most 52 characters)
_LABEL_KEY = re.compile(r"^([a-z0-9.-]+/)?[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?$")


@dataclass
class Found:
    """One discovered domain: its label value, the nodes under it, and its children by value."""

    key: str
    value: str
    nodes: list[str] = field(default_factory=list)
    children: dict[str, "Found"] = field(default_factory=dict)


def parse_labels(plugin: str, labels: str) -> tuple[tuple[str, ...], str | None]:
    """(label keys, preset) of --labels: a preset name or comma-separated keys; UsageError otherwise."""
    if labels in PRESETS:
        return resolve_keys(plugin, labels)
    keys = tuple(k.strip() for k in labels.split(",") if k.strip())
    bad = [k for k in keys if not _LABEL_KEY.match(k)]
    if not keys or bad:
        raise UsageError(f"--labels: expected a preset ({', '.join(PRESETS)}) or comma-separated label keys, "
                         f"found {labels!r}")
    if plugin == BLOCK and len(keys) != 1:
        raise UsageError(f"--labels: plugin block takes one label key (the block label), found {len(keys)}")
    return keys, None


def domain_name(value: str) -> str:
    """A DNS-label domain name for a label value; long or unusual values keep a short hash."""
    clean = re.sub(r"[^a-z0-9-]+", "-", value.lower()).strip("-")
    if clean == value and len(clean) <= MAX_DOMAIN_NAME:
        return clean
    digest = hashlib.sha256(value.encode()).hexdigest()[:6]
    return f"{clean[:MAX_DOMAIN_NAME - 7].strip('-')}-{digest}".strip("-")


def group_nodes(nodes: list[tuple[str, dict[str, str]]], keys: tuple[str, ...]) -> tuple[dict[str, Found], list[str]]:
    """Top-tier domains (by label value) holding the nodes that carry every key; the other nodes, apart."""
    top: dict[str, Found] = {}
    unlabelled = []
    for name, labels in sorted(nodes):
        if not all(k in labels for k in keys):
            unlabelled.append(name)
            continue
        level = top
        for key in keys:
            found = level.setdefault(labels[key], Found(key, labels[key]))
            found.nodes.append(name)
            level = found.children
    return top, unlabelled


def discover_topology(nodes: list[tuple[str, dict[str, str]]], plugin: str, labels: str,
                      pool: str | None = None) -> tuple[dict, list[str]]:
    """(spec.topology mapping, unlabelled node names) for the nodes of a cluster.

    Each leaf gets `slots: {pool: nodes}` with --pool (one slurmd pod per Kubernetes node),
    else `slots: {}` for the user to fill. Unlabelled nodes form the explicit 'unknown' leaf
    (no nodeLabels): validate refuses it until it is removed or labelled.
    """
    if plugin not in (TREE, BLOCK):
        raise UsageError(f"--plugin: expected tree or block, found {plugin!r}")
    keys, preset = parse_labels(plugin, labels)
    top, unlabelled = group_nodes(nodes, keys)
    used: set[str] = set()

    def unique(value: str) -> str:
        name = domain_name(value)
        while name in used or name in (UNKNOWN_DOMAIN, "root"):
            name = domain_name(name + "'")
        used.add(name)
        return name

    def build(found: Found) -> dict:
        domain: dict = {"name": unique(found.value), "nodeLabels": {found.key: found.value}}
        if found.children:
            domain["children"] = [build(c) for _, c in sorted(found.children.items())]
        else:
            domain["slots"] = {pool: len(found.nodes)} if pool else {}
        domain["nodes"] = len(found.nodes)
        return domain

    domains = [build(f) for _, f in sorted(top.items())]
    if unlabelled:
        domains.append({"name": UNKNOWN_DOMAIN, "slots": {pool: len(unlabelled)} if pool else {},
                        "nodes": len(unlabelled)})
    section = {"plugin": plugin, "fromLabels": preset or list(keys), "domains": domains}
    return section, unlabelled


def render_section(section: dict, unlabelled: list[str]) -> str:
    """The section as profile YAML under `topology:` (node counts as comments: they are not profile fields)."""
    text = yaml.safe_dump({"topology": section}, sort_keys=False, default_flow_style=False, width=120)
    text = re.sub(r"^(\s*)nodes: (\d+)\n", lambda m: f"{m.group(1)}# {m.group(2)} node(s)\n", text, flags=re.M)
    head = "# spec.topology from node labels (slurmk8s topology discover); paste under spec:\n"
    if unlabelled:
        head += (f"# {len(unlabelled)} node(s) lack the labels and sit in domain '{UNKNOWN_DOMAIN}' "
                 f"(no nodeLabels: validate refuses it until you label or drop them): {', '.join(unlabelled)}\n")
    return head + text


def run_discover(cluster, plugin: str, labels: str, pool: str | None = None) -> tuple[str, list[str]]:
    """Read the cluster's nodes and return (the topology section as YAML, unlabelled nodes)."""
    parse_labels(plugin, labels)  # refused before any connection
    section, unlabelled = discover_topology(cluster.node_labels(), plugin, labels, pool)
    return render_section(section, unlabelled), unlabelled
