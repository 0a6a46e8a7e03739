"""Read the cluster's Kubernetes nodes (name and labels), for `slurmk8s topology discover`."""

from __future__ import annotations

from slurmk8s.kube.client import Kube, dig


def list_node_labels(kube: Kube) -> list[tuple[str, dict[str, str]]]:
    """(node name, labels) of every node, sorted by name; follows list pagination."""
    nodes: list[tuple[str, dict[str, str]]] = []
    token = ""
    while True:
        query = [("limit", "500")] + ([("continue", token)] if token else [])
        page = kube.request("GET", "/api/v1/nodes", what="list nodes", query=query)
        nodes += [(n["metadata"]["name"], dict(n["metadata"].get("labels") or {})) for n in page.items()]
        token = dig(page.body, "metadata", "continue") or ""
        if not token:
            return sorted(nodes)
