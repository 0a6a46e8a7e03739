"""spec.partitions: the Slurm partitions over the pools, their loading and their checks."""

from __future__ import annotations

from dataclasses import dataclass

from slurmk8s.profile.defaults import DEFAULT_PARTITION_NAME, default
from slurmk8s.profile.slurm import conf_value, one_word_problem

Problem = tuple[tuple, str, bool]


@dataclass(frozen=True)
class Partition:
    """spec.partitions[]: a Slurm partition over pools."""

    name: str
    pools: tuple[str, ...]
    default: bool
    max_time: str
    config: tuple[tuple[str, str], ...]


OWNED_PARTITION_KEYS = frozenset(k.lower() for k in ("PartitionName", "Nodes", "Default", "MaxTime", "State"))


def load_partitions(spec: dict) -> tuple[Partition, ...]:
    if "partitions" not in spec:
        return (Partition(DEFAULT_PARTITION_NAME, tuple(sorted(p["name"] for p in spec["pools"])), True,
                          default("spec.partitions[].maxTime"), ()),)
    parts = [
        Partition(
            name=p["name"],
            pools=tuple(sorted(set(p["pools"]))),
            default=p.get("default", default("spec.partitions[].default")),
            max_time=str(p.get("maxTime", default("spec.partitions[].maxTime"))),
            config=tuple(sorted((k, conf_value(v)) for k, v in p.get("config", {}).items())),
        )
        for p in spec["partitions"]
    ]
    return tuple(sorted(parts, key=lambda p: p.name))


def check_partitions(spec: dict) -> list[Problem]:
    out: list[Problem] = []
    pools = {p["name"] for p in spec["pools"]}
    known = ", ".join(sorted(pools)) if len(pools) <= 12 else f"{', '.join(sorted(pools)[:12])}, ... ({len(pools)} in all)"
    seen: dict[str, int] = {}
    defaults = []
    for i, part in enumerate(spec.get("partitions", [])):
        at = ("spec", "partitions", i)
        if part["name"] in seen:
            out.append((at + ("name",), f"duplicate partition name '{part['name']}' (also spec.partitions[{seen[part['name']]}])", False))
        seen.setdefault(part["name"], i)
        if part["name"].lower() == "default":
            out.append((at + ("name",), "'default' is reserved by Slurm (PartitionName=DEFAULT sets defaults)", False))
        for j, pool in enumerate(part["pools"]):
            if pool not in pools:
                out.append((at + ("pools", j), f"unknown pool {pool!r} (pools: {known})", False))
        for key, value in part.get("config", {}).items():
            if key.lower() in OWNED_PARTITION_KEYS:
                out.append((at + ("config", key), f"'{key}' is set by the generator; use the partition's own fields", True))
            elif one_word_problem(value):
                out.append((at + ("config", key), f"{value!r} {one_word_problem(value)} (it is written into the "
                            "PartitionName line)", False))
        if part.get("default"):
            defaults.append(i)
    for i in defaults[1:]:
        out.append((("spec", "partitions", i, "default"), f"only one partition may be the default (spec.partitions[{defaults[0]}] already is)", False))
    return out


