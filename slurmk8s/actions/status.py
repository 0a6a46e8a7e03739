"""`status`: the bundle's objects, the pods, and `sinfo` from the controller, as plain tables."""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Callable

from slurmk8s import naming
from slurmk8s.actions.interface import header
from slurmk8s.actions.diff import format_document
from slurmk8s.actions.render import render_file
from slurmk8s.actions.slurmview import SlurmView, format_table, format_view, read_view, view_document
from slurmk8s.errors import ClusterError


def format_status(status) -> str:
    """The three sections of `slurmk8s status`."""
    objects = format_table(["OBJECT", "STATE"], [[o.ref, o.state] for o in status.objects])
    pods = (format_table(["POD", "READY", "STATE", "RESTARTS", "NODE"],
                         [[p.name, p.ready, p.state, str(p.restarts), p.node] for p in status.pods])
            if status.pods else "no pods")
    return f"{objects}\n\n{pods}\n\nsinfo:\n{status.sinfo}\n"


def status_document(status, bundle, cluster, view=None) -> dict:
    """`status -o json|yaml`: the same sections, plus whether the cluster is healthy and why not (docs/status.md)."""
    doc = {"cluster": bundle.cluster, "namespace": bundle.namespace, "context": cluster.context, "server": cluster.host,
            "healthy": not status.problems, "problems": list(status.problems),
            "objects": [{"ref": o.ref, "kind": o.ref.split("/", 1)[0], "name": o.ref.split("/", 1)[1], "state": o.state}
                        for o in status.objects],
            "pods": [{"name": p.name, "ready": p.ready, "state": p.state, "restarts": p.restarts, "node": p.node}
                     for p in status.pods],
            "sinfo": status.sinfo}
    if view is not None:
        doc["slurm"] = view_document(view, partitions_of(bundle))
    return doc


def pools_of(bundle) -> set[str]:
    """The pools of the bundle, from its StatefulSets' pool labels."""
    return {o["metadata"]["labels"][naming.LABEL_POOL] for o in bundle.of_kind("StatefulSet")
            if naming.LABEL_POOL in o["metadata"]["labels"]}


def partitions_of(bundle) -> list[str]:
    """The partitions slurm.conf defines."""
    return sorted(set(re.findall(r"^PartitionName=(\S+)", bundle.files.get("slurm.conf", ""), re.M)))


def slurm_view(status, run, bundle):
    """What slurmctld says (nodes, jobs, its own health); its error when it cannot be asked."""
    if run is None or status.sinfo.startswith(("unavailable", "(not asked)")):
        return SlurmView(error=status.sinfo)
    try:
        return read_view(run, pools_of(bundle))
    except ClusterError as e:
        return SlurmView(error=f"unavailable: {e}")


def health_line(status, cluster: str) -> str:
    """One line saying why the cluster is not healthy ('' when it is): what `status` exits 1 for."""
    if not status.problems:
        return ""
    missing = [o for o in status.objects if o.state == "missing"]
    if missing and len(missing) == len(status.objects):
        return f"cluster {cluster} does not exist: all {len(missing)} objects are missing"
    shown = "; ".join(status.problems[:5]) + (f"; and {len(status.problems) - 5} more" if len(status.problems) > 5 else "")
    return f"cluster {cluster} is not healthy: {shown}"


def run_status(profile_path: str, cluster, echo: Callable[[str], None] = print, output: str = "text",
               note: Callable[[str], None] | None = None, fail_unhealthy: bool = False, namespace: str | None = None):
    """Print the state of the profile's cluster (tables, or one JSON/YAML document); returns the ClusterStatus.

    With fail_unhealthy, a cluster with problems then raises ClusterError (one line, exit 1).
    """
    bundle = render_file(profile_path, namespace)
    status = cluster.status(bundle)
    view = slurm_view(status, lambda argv: cluster.slurm(bundle, argv), bundle)
    status = replace(status, problems=status.problems + view.problems)  # a degraded Slurm makes status exit 1
    if output != "text":
        (note or echo)(header(bundle, cluster))
        echo(format_document(status_document(status, bundle, cluster, view), output).rstrip("\n"))
    else:
        echo(header(bundle, cluster) + "\n")
        echo(format_status(status).rstrip("\n"))
        if not view.error:
            echo("\n" + format_view(view, partitions_of(bundle)))
    if fail_unhealthy and status.problems:
        raise ClusterError(health_line(status, bundle.cluster))
    return status
