"""`status`: the bundle's objects, the pods, and `sinfo` from the controller, as plain tables."""

from __future__ import annotations

from typing import Callable


def format_table(header: list[str], rows: list[list[str]]) -> str:
    """Left-aligned columns separated by two spaces."""
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows)]
    lines = ["  ".join(str(c).ljust(w) for c, w in zip(r, widths)).rstrip() for r in [header] + rows]
    return "\n".join(lines)


def format_status(status) -> str:
    """The three sections of `slurmk8s status`."""
    objects = format_table(["OBJECT", "STATE"], [[o.ref, o.state] for o in status.objects])
    pods = (format_table(["POD", "READY", "STATE", "RESTARTS", "NODE"],
                         [[p.name, p.ready, p.state, str(p.restarts), p.node] for p in status.pods])
            if status.pods else "no pods")
    return f"{objects}\n\n{pods}\n\nsinfo:\n{status.sinfo}\n"


def run_status(profile_path: str, access, verbose: bool = False, echo: Callable[[str], None] = print,
               exec_in_controller: Callable[[list[str]], str] | None = None):
    """Print the state of the profile's cluster; returns the ClusterStatus."""
    from slurmk8s.actions.render import render_file
    from slurmk8s.actions.up import controller_pod
    from slurmk8s.kube.client import connect
    from slurmk8s.kube.execpod import controller_exec
    from slurmk8s.kube.inspect import cluster_status

    bundle = render_file(profile_path)
    kube = connect(access, verbose=verbose)
    pod = controller_pod(bundle.cluster)
    status = cluster_status(kube, bundle, exec_in_controller or controller_exec(kube, bundle.namespace, pod), pod)
    echo(f"cluster {bundle.cluster} in namespace {bundle.namespace} ({kube.source})\n")
    echo(format_status(status).rstrip("\n"))
    return status
