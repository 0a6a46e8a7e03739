"""Topology on real Slurm: the rendered topology file is what slurmctld shows, and jobs respect it.

tree on 22.05 (topology.conf), block on 24.11 (topology.conf), tree on 26.05 (topology.yaml).
The lab has no Kubernetes nodes, so node affinity is not exercised here (tests/render/test_topology_render.py
check it); it runs every pod of every per-leaf StatefulSet.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from slurmk8s.lab import verify

import slurmfacts
from labenv import boot_or_skip, down_and_check_clean

ROOT = Path(__file__).resolve().parents[2]
PROFILES = {
    "tree-22.05": ROOT / "tests/lab/profiles/topo-tree-2205.yaml",
    "block-24.11": ROOT / "tests/lab/profiles/topo-block-2411.yaml",
    "yaml-tree-26.05": ROOT / "tests/lab/profiles/topo-yaml-2605.yaml",
}

pytestmark = pytest.mark.lab


@pytest.fixture(scope="module", params=sorted(PROFILES), ids=sorted(PROFILES))
def booted(request):
    """A booted lab per topology profile, torn down (and checked clean) afterwards."""
    lab, bundle = boot_or_skip(PROFILES[request.param])
    yield lab, bundle
    down_and_check_clean(lab)


def expand(lab, hostlist: str) -> list[str]:
    """Slurm's own expansion of a hostlist."""
    return lab.exec(["scontrol", "show", "hostnames", hostlist], timeout=15).stdout.split()


def rendered_domains(bundle) -> dict[str, tuple[str, str]]:
    """Domain -> ('Nodes' | 'Switches', members) from the rendered topology.conf or topology.yaml."""
    if "topology.yaml" in bundle.files:
        (topo,) = yaml.safe_load(bundle.files["topology.yaml"])
        if "tree" in topo:
            return {s["switch"]: ("Nodes", s["nodes"]) if "nodes" in s else ("Switches", s["children"])
                    for s in topo["tree"]["switches"]}
        return {b["block"]: ("Nodes", b["nodes"]) for b in topo["block"]["blocks"]}
    out = {}
    for line in bundle.files["topology.conf"].splitlines():
        fields = dict(f.split("=", 1) for f in line.split()) if line and not line.startswith("#") else {}
        name = fields.get("SwitchName") or fields.get("BlockName")
        if name:
            kind = "Nodes" if "Nodes" in fields else "Switches"
            out[name] = (kind, fields[kind])
    return out


def shown_domains(lab) -> dict[str, tuple[str, str]]:
    """Domain -> ('Nodes' | 'Switches', members) from `scontrol show topology`."""
    out = {}
    for line in lab.exec(["scontrol", "show", "topology"], timeout=15).stdout.splitlines():
        name = re.search(r"(?:SwitchName|BlockName)=(\S+)", line)
        if not name:
            continue
        switches = re.search(r"\bSwitches=(\S+)", line)
        nodes = re.search(r"\bNodes=(\S+)", line)
        out[name.group(1)] = ("Switches", switches.group(1)) if switches and switches.group(1) != "(null)" \
            else ("Nodes", nodes.group(1))
    return out


def leaves(lab, bundle) -> dict[str, set[str]]:
    """Leaf domain -> its Slurm node names, from the rendered file."""
    return {name: set(expand(lab, members)) for name, (kind, members) in rendered_domains(bundle).items()
            if kind == "Nodes"}


def test_scontrol_show_topology_equals_the_rendered_file(booted):
    lab, bundle = booted
    shown, rendered = shown_domains(lab), rendered_domains(bundle)
    assert sorted(shown) == sorted(rendered)
    for name, (kind, members) in rendered.items():
        assert shown[name][0] == kind, name
        assert sorted(expand(lab, shown[name][1])) == sorted(expand(lab, members)), name


def test_every_node_is_idle_and_registered_from_its_leaf_pod(booted):
    lab, bundle = booted
    check = verify.check_nodes_idle(lab, bundle)
    assert check.ok, check.detail
    # Slurm's own view: each leaf StatefulSet's pod is the idle node of its number, on that pod's host
    # (read before the srun below: its nodes are COMPLETING for a moment after it)
    pods = {p.slurm_node: p for p in lab.pods if p.pool}
    assert {n for n, s in slurmfacts.node_states(lab).items() if s == "idle"} == set(pods)
    for name, pod in pods.items():
        assert slurmfacts.node(lab, name)["NodeHostName"] == pod.hostname, (name, pod.name)
    checks = verify.check_srun_hostnames(lab, bundle)
    assert checks and all(c.ok for c in checks), [str(c) for c in checks]


def job_nodes(lab, job: str) -> set[str]:
    out = lab.exec(["scontrol", "-o", "show", "job", job], timeout=15).stdout
    return set(expand(lab, re.search(r" NodeList=(\S+)", out).group(1)))


def test_two_node_job_stays_inside_one_leaf_when_the_first_free_nodes_straddle_two(booted):
    """One node of the first leaf is taken: without topology the next job would take the two
    lowest free nodes, one in each leaf; with it (--switches=1 for tree, the block plugin's own
    placement for block) both nodes come from one leaf."""
    lab, bundle = booted
    domains = leaves(lab, bundle)
    first = sorted(domains, key=lambda d: min(domains[d]))[0]
    blocker = verify.submit(lab, "-N1", "-w", sorted(domains[first])[0], "--wrap", "sleep 60")
    try:
        assert verify.wait_state(lab, blocker, {"RUNNING"}, deadline_s=30) == "RUNNING"
        extra = ["--switches=1"] if bundle.files.get("topology.conf", "").find("SwitchName") >= 0 \
            or "tree:" in bundle.files.get("topology.yaml", "") else []
        job = verify.submit(lab, "-N2", *extra, "--wrap", "sleep 1")
        assert verify.wait_state(lab, job, {"RUNNING", "COMPLETED"}, deadline_s=30) in ("RUNNING", "COMPLETED")
        placed = job_nodes(lab, job)
        assert len(placed) == 2
        assert [d for d, nodes in domains.items() if placed <= nodes], (placed, domains)
    finally:
        lab.exec(["scancel", blocker], timeout=15)
