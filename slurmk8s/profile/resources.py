"""Requests and limits of the daemons a profile sizes: slurmctld, slurmdbd, the embedded MariaDB and login's sshd.

Pools are sized by their Slurm node shape (cpus, memory); these are the fixed daemons.
"""

from __future__ import annotations

from dataclasses import dataclass

from slurmk8s.profile.defaults import DEFAULTS
from slurmk8s.quantity import parse_quantity

Problem = tuple[tuple, str, bool]

# component -> where its `resources` sits in the profile
SECTIONS = {
    "controller": ("spec", "controller"),
    "accounting": ("spec", "accounting"),
    "database": ("spec", "accounting", "database", "embedded"),
    "login": ("spec", "login"),
}


@dataclass(frozen=True)
class Resources:
    """A container's requests and limits (cpu, memory), as Kubernetes quantities."""

    requests_cpu: str
    requests_memory: str
    limits_cpu: str
    limits_memory: str

    def as_kubernetes(self) -> dict:
        return {"requests": {"cpu": self.requests_cpu, "memory": self.requests_memory},
                "limits": {"cpu": self.limits_cpu, "memory": self.limits_memory}}


@dataclass(frozen=True)
class DaemonResources:
    """spec.resources: each daemon container's requests and limits."""

    controller: Resources
    accounting: Resources
    database: Resources
    login: Resources  # sshd, where users' shells and builds run


def _section(spec: dict, path: tuple) -> dict:
    node = {"spec": spec}
    for key in path:
        node = node.get(key) or {} if isinstance(node, dict) else {}
    return node.get("resources") or {} if isinstance(node, dict) else {}


def load_resources(spec: dict) -> DaemonResources:
    """The model of the schema-valid daemon resources, defaults filled in."""
    def one(component: str) -> Resources:
        path = SECTIONS[component]
        raw = _section(spec, path)
        base = ".".join(path) + ".resources"

        def get(kind: str, what: str) -> str:
            value = (raw.get(kind) or {}).get(what, DEFAULTS[f"{base}.{kind}.{what}"])
            return str(value)
        return Resources(get("requests", "cpu"), get("requests", "memory"), get("limits", "cpu"), get("limits", "memory"))
    return DaemonResources(one("controller"), one("accounting"), one("database"), one("login"))


def check_resources(spec: dict, resources: DaemonResources) -> list[Problem]:
    """A request above its limit: the API server refuses the whole StatefulSet."""
    out: list[Problem] = []
    for component, path in SECTIONS.items():
        r: Resources = getattr(resources, component)
        for what, request, limit in (("cpu", r.requests_cpu, r.limits_cpu), ("memory", r.requests_memory, r.limits_memory)):
            low, high = parse_quantity(request), parse_quantity(limit)
            if low is not None and high is not None and low > high:
                raw = _section(spec, path)
                where = ("requests", what) if what in (raw.get("requests") or {}) else ("limits", what)
                out.append((path + ("resources",) + where, f"the {what} request {request} is above the limit {limit}", False))
    return out
