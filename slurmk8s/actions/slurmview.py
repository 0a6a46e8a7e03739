"""The Slurm side of `slurmk8s status`: nodes by state per pool, jobs per partition, the controller's health.

Read through slurmctld's pod with three client commands; parsed here, without any I/O, so the
fields of `status -o json|yaml` (docs/status.md) are tested without a cluster.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Callable

from slurmk8s.podside import nodestate

SINFO = nodestate.command()  # every node, once: its long state with the flag suffixes, and the reason
SQUEUE = ["squeue", "-h", "-a", "-o", "%P|%T"]
PING = ["scontrol", "ping"]
HEALTH_PREFIX = "slurmk8s-health:"


@dataclass(frozen=True)
class SlurmNode:
    name: str
    pool: str
    state: str
    reason: str


@dataclass(frozen=True)
class SlurmView:
    controllers: tuple[tuple[str, str], ...] = ()  # (host, UP | DOWN) as `scontrol ping` says
    nodes: tuple[SlurmNode, ...] = ()
    jobs: tuple[tuple[str, str, int], ...] = ()  # (partition, state, count)
    error: str = ""  # why the view is missing (the controller pod is not Ready, say)
    problems: tuple[str, ...] = field(default=())


def pool_of(node: str, pools: set[str]) -> str:
    """The pool of Slurm node <pool>-<n>; '-' for a node of no pool (side-by-side)."""
    m = re.fullmatch(r"(.+)-\d+", node)
    return m.group(1) if m and m.group(1) in pools else "-"


def parse_ping(text: str) -> tuple[tuple[str, str], ...]:
    """`Slurmctld(primary) at research-controller-0 is UP` -> (host, UP)."""
    return tuple((m.group(1), m.group(2).upper())
                 for m in re.finditer(r"at (\S+) is (\w+)", text))


def parse_nodes(text: str, pools: set[str]) -> tuple[SlurmNode, ...]:
    """SINFO's output -> the nodes by pool, then number; a state as sinfo prints it, lowercase (`idle~`)."""
    seen = [SlurmNode(s.name, pool_of(s.name, pools), s.text, s.reason) for s in nodestate.parse(text).values()]
    return tuple(sorted(seen, key=lambda n: (n.pool, _ordinal_key(n.name))))


def _ordinal_key(name: str) -> tuple:
    m = re.fullmatch(r"(.*?)(\d+)", name)
    return (m.group(1), int(m.group(2))) if m else (name, -1)


def parse_jobs(text: str) -> tuple[tuple[str, str, int], ...]:
    counts: dict[tuple[str, str], int] = {}
    for line in text.splitlines():
        if "|" not in line:
            continue
        partitions, state = line.rsplit("|", 1)
        for part in partitions.split(","):  # a job pending in several partitions counts in each
            key = (part.strip(), state.strip().lower())
            counts[key] = counts.get(key, 0) + 1
    return tuple((p, s, n) for (p, s), n in sorted(counts.items()))


def node_problem(node: SlurmNode) -> str | None:
    """Why a node degrades the cluster (nodestate.BAD, not responding, drained by its health check), or None.
    A powered-down CLOUD node (`~`) is not counted: an elastic pool keeps most of its nodes so on purpose."""
    state = nodestate.state_of(node.name, node.state, node.reason)
    if state.powered_down:
        return None
    if state.not_responding:
        return f"node {node.name} not responding ({node.state})"
    if state.base in nodestate.BAD:
        return f"node {node.name} {node.state}" + (f": {node.reason}" if node.reason else "")
    if node.reason.startswith(HEALTH_PREFIX) and state.drained:
        return f"node {node.name} drained by its health check: {node.reason[len(HEALTH_PREFIX):].strip()}"
    return None


def read_view(run: Callable[[list[str]], str], pools: set[str]) -> SlurmView:
    """Ask slurmctld (through run, an exec in its pod) and judge what it says."""
    controllers = parse_ping(run(PING))
    nodes = parse_nodes(run(SINFO), pools)
    jobs = parse_jobs(run(SQUEUE))
    problems = []
    if not controllers or controllers[0][1] != "UP":
        problems.append("slurmctld does not answer: " + (", ".join(f"{h} {s}" for h, s in controllers) or "no ping"))
    problems += [p for p in (node_problem(n) for n in nodes) if p]
    return SlurmView(controllers, nodes, jobs, "", tuple(problems))


def nodes_by_state(view: SlurmView) -> dict[str, dict[str, int]]:
    """pool -> state -> how many nodes."""
    out: dict[str, dict[str, int]] = {}
    for n in view.nodes:
        states = out.setdefault(n.pool, {})
        states[n.state] = states.get(n.state, 0) + 1
    return {pool: dict(sorted(states.items())) for pool, states in sorted(out.items())}


def jobs_by_partition(view: SlurmView, partitions: list[str]) -> dict[str, dict[str, int]]:
    """partition -> {pending, running, other}: every partition of the profile, zeros included."""
    out = {p: {"pending": 0, "running": 0, "other": 0} for p in partitions}
    for part, state, count in view.jobs:
        row = out.setdefault(part, {"pending": 0, "running": 0, "other": 0})
        row[state if state in ("pending", "running") else "other"] += count
    return dict(sorted(out.items()))


def view_document(view: SlurmView, partitions: list[str]) -> dict:
    """The `slurm` section of `status -o json|yaml` (docs/status.md)."""
    return {
        "available": not view.error,
        "error": view.error,
        "controller": {"healthy": bool(view.controllers) and view.controllers[0][1] == "UP",
                       "hosts": [{"host": h, "state": s} for h, s in view.controllers]},
        "nodesByPool": nodes_by_state(view),
        "jobsByPartition": jobs_by_partition(view, partitions) if not view.error else {},
        "nodes": [{"name": n.name, "pool": n.pool, "state": n.state, "reason": n.reason} for n in view.nodes],
        "problems": list(view.problems),
    }


def format_table(header: list[str], rows: list[list[str]]) -> str:
    """Left-aligned columns separated by two spaces."""
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows)]
    lines = ["  ".join(str(c).ljust(w) for c, w in zip(r, widths)).rstrip() for r in [header] + rows]
    return "\n".join(lines)


def format_view(view: SlurmView, partitions: list[str]) -> str:
    """The Slurm section of the text output."""
    if view.error:
        return f"slurm: {view.error}"
    ctl = ", ".join(f"{h} {s}" for h, s in view.controllers) or "no answer"
    pools = format_table(["POOL", "NODES BY STATE"],
                         [[pool, ", ".join(f"{n} {s}" for s, n in states.items())]
                          for pool, states in nodes_by_state(view).items()]) if view.nodes else "no nodes"
    jobs = format_table(["PARTITION", "PENDING", "RUNNING", "OTHER"],
                        [[p, str(r["pending"]), str(r["running"]), str(r["other"])]
                         for p, r in jobs_by_partition(view, partitions).items()])
    return f"slurmctld: {ctl}\n\n{pools}\n\n{jobs}"
