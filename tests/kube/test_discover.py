"""`slurmk8s topology discover` through the real kubernetes client against the recording API stub."""

from __future__ import annotations

import subprocess
import sys

import pytest
import yaml

from slurmk8s.kube.kubecluster import KubeCluster
from slurmk8s.actions.topology import discover_topology, domain_name, run_discover
from slurmk8s.errors import UsageError
from slurmk8s.profile.loader import load_profile

GKE_BLOCK, GKE_SUB = "cloud.google.com/gce-topology-block", "cloud.google.com/gce-topology-subblock"
CLIQUE = "nvidia.com/gpu.clique"
PROFILE_HEAD = """\
apiVersion: slurmk8s.io/v1alpha1
kind: ClusterProfile
metadata: {name: disc}
spec:
  pools:
    - {name: gpu, replicas: 0, maxReplicas: %d, cpus: 2, memory: 2Gi}
  spec_topology_here: 1
"""


def seed_nodes(stub, nodes: dict[str, dict[str, str]]) -> None:
    for name, labels in nodes.items():
        stub.seed("/api/v1/nodes", {"apiVersion": "v1", "kind": "Node",
                                    "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **labels}}})


def sixty_four_in_eight_blocks() -> dict[str, dict[str, str]]:
    """64 GPU nodes in 8 NVLink cliques of 8 (clique ids as the GPU operator writes them: <uuid>.<n>)."""
    return {f"gpu-node-{i:02d}": {CLIQUE: f"6f1c2a9e-41b7-4f0e-9a11-0c3d5e7f9b21.{i // 8}"} for i in range(64)}


def gke_nodes() -> dict[str, dict[str, str]]:
    """A GKE A3-style list: 2 blocks, 3 sub-blocks, 12 nodes (uneven on purpose)."""
    layout = {("b-7f3a", "sb-11"): 4, ("b-7f3a", "sb-12"): 4, ("b-9c0d", "sb-21"): 4}
    nodes, i = {}, 0
    for (block, sub), count in layout.items():
        for _ in range(count):
            nodes[f"gke-a3-pool-{i:03d}"] = {GKE_BLOCK: block, GKE_SUB: sub, "topology.kubernetes.io/zone": "us-c1-a"}
            i += 1
    return nodes


def as_profile(section: dict, max_replicas: int) -> bytes:
    """A profile holding the discovered section (node-count keys dropped, as the printed YAML comments them)."""
    def strip(domains):
        for d in domains:
            d.pop("nodes", None)
            strip(d.get("children", []))
    section = yaml.safe_load(yaml.safe_dump(section))
    strip(section["domains"])
    return (PROFILE_HEAD % max_replicas).replace("  spec_topology_here: 1\n",
                                                yaml.safe_dump({"topology": section}).replace("\n", "\n  ").join(["  ", ""]).rstrip() + "\n").encode()


def test_sixty_four_nodes_in_eight_blocks(stub, kubeconfig):
    seed_nodes(stub, sixty_four_in_eight_blocks())
    text, unlabelled = run_discover(KubeCluster(kubeconfig), "block", "nvidia", pool="gpu")
    section = yaml.safe_load(text)["topology"]
    assert unlabelled == [] and section["plugin"] == "block" and section["fromLabels"] == "nvidia"
    assert len(section["domains"]) == 8
    assert [d["slots"] for d in section["domains"]] == [{"gpu": 8}] * 8
    assert text.count("# 8 node(s)") == 8
    values = [d["nodeLabels"][CLIQUE] for d in section["domains"]]
    assert values == [f"6f1c2a9e-41b7-4f0e-9a11-0c3d5e7f9b21.{i}" for i in range(8)]
    assert all(len(d["name"]) <= 20 for d in section["domains"])  # uuid values become short DNS names
    # What discover prints is a valid profile section: 64 Slurm nodes, 8 per-leaf StatefulSets.
    profile = load_profile(as_profile(section, 64))
    assert sum(c for _, leaf in profile.topology.leaves() for _, c in leaf.slots) == 64
    assert ("GET", "/api/v1/nodes") in [(c.method, c.path) for c in stub.calls()]


def test_gke_labels_make_a_two_tier_tree(stub, kubeconfig):
    seed_nodes(stub, gke_nodes())
    text, unlabelled = run_discover(KubeCluster(kubeconfig), "tree", "gke", pool="gpu")
    section = yaml.safe_load(text)["topology"]
    assert unlabelled == [] and section["fromLabels"] == "gke"
    tree = {d["name"]: {c["name"]: c["slots"]["gpu"] for c in d["children"]} for d in section["domains"]}
    assert tree == {"b-7f3a": {"sb-11": 4, "sb-12": 4}, "b-9c0d": {"sb-21": 4}}
    assert section["domains"][0]["nodeLabels"] == {GKE_BLOCK: "b-7f3a"}
    assert section["domains"][0]["children"][1]["nodeLabels"] == {GKE_SUB: "sb-12"}
    assert load_profile(as_profile(section, 12)).topology.label_keys == (GKE_BLOCK, GKE_SUB)


def test_unlabelled_nodes_go_to_unknown_and_are_reported(stub, kubeconfig):
    nodes = gke_nodes()
    nodes["cpu-node-a"] = {"topology.kubernetes.io/zone": "us-c1-a"}
    nodes["gke-a3-pool-003"].pop(GKE_SUB)  # half-labelled: counts as unlabelled
    seed_nodes(stub, nodes)
    text, unlabelled = run_discover(KubeCluster(kubeconfig), "tree", "gke")
    assert unlabelled == ["cpu-node-a", "gke-a3-pool-003"]
    section = yaml.safe_load(text)["topology"]
    assert section["domains"][-1] == {"name": "unknown", "slots": {}}
    assert "2 node(s) lack the labels and sit in domain 'unknown'" in text
    assert "cpu-node-a, gke-a3-pool-003" in text
    assert {c["name"]: c for d in section["domains"][:-1] for c in d["children"]}["sb-11"]  # 3 labelled remain


def test_cli_prints_the_section_and_warns_on_stderr(stub, kubeconfig):
    nodes = sixty_four_in_eight_blocks()
    nodes["login-node"] = {}
    seed_nodes(stub, nodes)
    run = subprocess.run([sys.executable, "-m", "slurmk8s.cli", "topology", "discover", "--plugin", "block",
                          "--labels", CLIQUE, "--kubeconfig", kubeconfig], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert yaml.safe_load(run.stdout)["topology"]["fromLabels"] == [CLIQUE]
    assert run.stderr.strip() == "warning: 1 node(s) without the labels went to domain 'unknown': login-node"


@pytest.mark.parametrize("plugin, labels, message", [
    ("tree", "not a key!", "--labels: expected a preset (gke, eks, nvidia, oci, zone) or comma-separated label keys, found 'not a key!'"),
    ("block", "a/b,c/d", "--labels: plugin block takes one label key (the block label), found 2"),
    ("ring", "zone", "--plugin: expected tree or block, found 'ring'"),
], ids=["bad-key", "block-two-keys", "bad-plugin"])
def test_bad_arguments_are_refused_without_a_cluster(plugin, labels, message):
    with pytest.raises(UsageError) as info:
        discover_topology([], plugin, labels)
    assert str(info.value) == message


def test_domain_names_are_dns_labels_and_distinct():
    names = {domain_name(v) for v in ["Rack_1", "rack-1", "6f1c2a9e-41b7-4f0e-9a11-0c3d5e7f9b21.3", "a" * 60]}
    assert len(names) == 4
    assert all(n and len(n) <= 20 and n == n.lower() and not n.startswith("-") for n in names)
    assert domain_name("block-a") == "block-a"
