"""Topology render: per-leaf StatefulSets pinned to their domain, topology.conf / topology.yaml per version.

Properties (hypothesis) over generated trees and block sets; examples for the exact files.
"""

from __future__ import annotations

import json
import re

import pytest
import yaml
from hypothesis import HealthCheck, given, settings, strategies as st

from slurmk8s import naming
from slurmk8s.profile.loader import load_profile
from slurmk8s.render import render

SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
POOLS = ("cpu", "gpu")
KEYS = ("example.com/spine", "example.com/rack")


def profile_doc(version: str, topology: dict, pools: dict[str, tuple[int, int, int]]) -> dict:
    """A profile with pools {name: (replicas, min, max)} and the given spec.topology."""
    return {"apiVersion": "slurmk8s.io/v1alpha1", "kind": "ClusterProfile", "metadata": {"name": "t"},
            "spec": {"slurm": {"version": version, "images": {"registry": "r.example/hpc"}},
                     "pools": [{"name": n, "replicas": r, "minReplicas": lo, "maxReplicas": hi, "cpus": 1, "memory": "1Gi"}
                               for n, (r, lo, hi) in pools.items()],
                     "topology": topology}}


def load(doc: dict):
    return load_profile(json.dumps(doc).encode(), "t.yaml")


@st.composite
def trees(draw):
    """(doc, leaves {name: (ancestor labels, {pool: slots})}) for a random two- or one-tier tree."""
    leaves, domains, n = {}, [], 0
    two_tier = draw(st.booleans())
    for s in range(draw(st.integers(1, 3))):
        children = []
        for _ in range(draw(st.integers(1, 3)) if two_tier else 1):
            slots = {p: draw(st.integers(0, 3)) for p in draw(st.sets(st.sampled_from(POOLS), min_size=1))}
            slots = {p: c for p, c in slots.items() if c} or {draw(st.sampled_from(POOLS)): 1}
            name = f"leaf{n}"
            n += 1
            children.append({"name": name, "nodeLabels": {KEYS[-1]: name}, "slots": slots})
            leaves[name] = slots
        domains += [{"name": f"sw{s}", "nodeLabels": {KEYS[0]: f"sw{s}"}, "children": children}] if two_tier else children
    totals = {p: sum(sl.get(p, 0) for sl in leaves.values()) for p in POOLS}
    pools = {}
    for p, total in totals.items():
        if total:
            low = draw(st.integers(0, total))
            pools[p] = (draw(st.integers(low, total)), low, total)
    topology = {"plugin": "tree", "fromLabels": list(KEYS) if two_tier else [KEYS[-1]], "domains": domains}
    return profile_doc(draw(st.sampled_from(["22.05", "24.11", "26.05"])), topology, pools), leaves


def pool_statefulsets(bundle) -> list[dict]:
    return [o for o in bundle.of_kind("StatefulSet") if naming.LABEL_POOL in o["metadata"]["labels"]]


def expand(hostlist: str) -> list[str]:
    """Expand the hostlists render writes (prefix-[a-b] or prefix-a, comma-separated)."""
    out = []
    for part in re.findall(r"[^,\[]+(?:\[[^\]]*\])?", hostlist):
        m = re.fullmatch(r"(.*)-\[(\d+)-(\d+)\]", part)
        out += [f"{m.group(1)}-{i}" for i in range(int(m.group(2)), int(m.group(3)) + 1)] if m else [part]
    return out


def leaf_members(bundle) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """(leaf -> Slurm nodes, switch -> child switches) from topology.conf or topology.yaml."""
    leaves, switches = {}, {}
    if "topology.yaml" in bundle.files:
        (topo,) = yaml.safe_load(bundle.files["topology.yaml"])
        for s in topo["tree"]["switches"]:
            (leaves if "nodes" in s else switches)[s["switch"]] = expand(s.get("nodes") or s["children"])
    else:
        for line in bundle.files["topology.conf"].splitlines():
            m = re.match(r"SwitchName=(\S+) (Nodes|Switches)=(\S+)$", line)
            if m:
                (leaves if m.group(2) == "Nodes" else switches)[m.group(1)] = expand(m.group(3))
    return leaves, switches


@SETTINGS
@given(trees())
def test_every_slurm_node_is_in_exactly_one_leaf_and_every_switch_is_reachable(case):
    doc, _ = case
    bundle = render(load(doc))
    leaves, switches = leaf_members(bundle)
    placed = [n for nodes in leaves.values() for n in nodes]
    slurm_nodes = [n for line in bundle.files["slurm.conf"].splitlines() if line.startswith("NodeName=")
                   for n in expand(line.split()[0].removeprefix("NodeName="))]
    assert sorted(placed) == sorted(slurm_nodes) and len(set(placed)) == len(placed)
    roots = set(switches) | set(leaves)
    for children in switches.values():
        roots -= set(children)
    assert len(roots) == 1  # one root: every switch and leaf reachable from it
    seen, todo = set(), list(roots)
    while todo:
        s = todo.pop()
        seen.add(s)
        todo += switches.get(s, [])
    assert seen == set(switches) | set(leaves)


@SETTINGS
@given(trees())
def test_statefulsets_match_their_leaf_counts_and_affinity_names_exactly_their_domain(case):
    doc, leaves = case
    profile = load(doc)
    bundle = render(profile)
    by_leaf: dict[str, dict[str, dict]] = {}
    for sts in pool_statefulsets(bundle):
        labels = sts["metadata"]["labels"]
        by_leaf.setdefault(labels[naming.LABEL_DOMAIN], {})[labels[naming.LABEL_POOL]] = sts
    expected = {leaf: {p: c for p, c in slots.items() if c} for leaf, slots in leaves.items()}
    assert {leaf: {p: int(s["metadata"]["annotations"][naming.ANNOTATION_MAX_REPLICAS]) for p, s in pools.items()}
            for leaf, pools in by_leaf.items()} == expected
    for pool in profile.pools:
        mine = [s for pools in by_leaf.values() for p, s in pools.items() if p == pool.name]
        assert sum(s["spec"]["replicas"] for s in mine) == pool.replicas
        assert sum(int(s["metadata"]["annotations"][naming.ANNOTATION_MIN_REPLICAS]) for s in mine) == pool.min_replicas
    file_leaves, _ = leaf_members(bundle)
    for leaf, pools in by_leaf.items():
        for pool, sts in pools.items():
            spec = sts["spec"]["template"]["spec"]
            terms = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
            (term,) = terms
            wanted = {KEYS[-1]: leaf}
            switch = next((d for d in doc["spec"]["topology"]["domains"] if any(c["name"] == leaf for c in d.get("children", []))), None)
            if switch and switch.get("children"):
                wanted[KEYS[0]] = switch["name"]
            assert {e["key"]: e["values"] for e in term["matchExpressions"]} == {k: [v] for k, v in wanted.items()}
            assert all(e["operator"] == "In" for e in term["matchExpressions"])
            # The pods' hostnames are the NodeHostnames of exactly this leaf's Slurm nodes.
            notes = sts["metadata"]["annotations"]
            nodes = expand(notes[naming.ANNOTATION_NODE_NAMES])
            assert naming.ANNOTATION_NODE_NAMES not in sts["spec"]["template"]["metadata"]["annotations"]
            assert set(nodes) <= set(file_leaves[leaf])
            first = int(notes[naming.ANNOTATION_FIRST_NODE])
            assert nodes == [naming.slurm_node_name(pool, first + i) for i in range(len(nodes))]
            line = next(l for l in bundle.files["slurm.conf"].splitlines() if l.startswith(f"NodeName={notes[naming.ANNOTATION_NODE_NAMES]} "))
            assert f"NodeHostname={naming.statefulset_hostname_range(sts['metadata']['name'], len(nodes))} " in line


BLOCKS = {"plugin": "block", "domains": [
    {"name": "b1", "nodeLabels": {"nvidia.com/gpu.clique": "x.1"}, "slots": {"gpu": 4}},
    {"name": "b2", "nodeLabels": {"nvidia.com/gpu.clique": "x.2"}, "slots": {"gpu": 2}}]}


@pytest.mark.parametrize("version, name, expected", [
    ("23.11", "topology.conf", "BlockName=b1 Nodes=gpu-[0-3]\nBlockName=b2 Nodes=gpu-[4-5]\n"),
    ("24.11", "topology.conf", "BlockName=b1 Nodes=gpu-[0-3]\nBlockName=b2 Nodes=gpu-[4-5]\nBlockSizes=2\n"),
    ("26.05", "topology.yaml", "- topology: default\n  cluster_default: true\n  block:\n    block_sizes: [2]\n    blocks:\n"
                               "      - block: b1\n        nodes: \"gpu-[0-3]\"\n      - block: b2\n        nodes: \"gpu-[4-5]\"\n"),
], ids=["23.11-equal-only", "24.11-blocksizes", "26.05-yaml"])
def test_block_file_per_version(version, name, expected):
    topo = BLOCKS if version != "23.11" else {**BLOCKS, "domains": [
        BLOCKS["domains"][0], {**BLOCKS["domains"][1], "slots": {"gpu": 4}}]}
    if version == "23.11":
        expected = expected.replace("gpu-[4-5]", "gpu-[4-7]")
    bundle = render(load(profile_doc(version, topo, {"gpu": (6 if version != "23.11" else 8,) * 3})))
    body = "".join(l + "\n" for l in bundle.files[name].splitlines() if not l.startswith("#") and l != "---")
    assert body == expected
    other = "topology.conf" if name == "topology.yaml" else "topology.yaml"
    assert other not in bundle.files
    plugin_line = "TopologyPlugin=topology/block" in bundle.files["slurm.conf"]
    assert plugin_line == (name == "topology.conf")  # Slurm ignores TopologyPlugin when topology.yaml exists


def test_elastic_split_pool_lists_segments_and_rbac_names_each():
    topo = {"plugin": "tree", "domains": [
        {"name": "r1", "nodeLabels": {"example.com/rack": "r1"}, "slots": {"cpu": 2}},
        {"name": "r2", "nodeLabels": {"example.com/rack": "r2"}, "slots": {"cpu": 3}}]}
    bundle = render(load(profile_doc("26.05", topo, {"cpu": (3, 1, 5)})))
    pools = json.loads(bundle.find("ConfigMap", "t-power")["data"]["pools.json"])["pools"]
    assert pools == {"cpu": {"segments": [{"max": 2, "min": 1, "offset": 0, "statefulset": "t-cpu-r1"},
                                          {"max": 3, "min": 0, "offset": 2, "statefulset": "t-cpu-r2"}]}}
    assert bundle.find("Role", "t-power")["rules"][0]["resourceNames"] == ["t-cpu-r1", "t-cpu-r2"]
    assert [bundle.find("StatefulSet", s)["spec"]["replicas"] for s in ("t-cpu-r1", "t-cpu-r2")] == [2, 1]
    assert "SuspendExcNodes=cpu-0\n" in bundle.files["slurm.conf"]
    assert "switch: root" in bundle.files["topology.yaml"]  # two top-level leaves get a root above them


def test_profile_without_topology_keeps_one_statefulset_and_no_topology_file():
    bundle = render(load(profile_doc("26.05", {}, {"cpu": (1, 1, 2)})))
    assert [s["metadata"]["name"] for s in pool_statefulsets(bundle)] == ["t-cpu"]
    assert not {"topology.conf", "topology.yaml"} & set(bundle.files)
    assert "Topology" not in bundle.files["slurm.conf"]
