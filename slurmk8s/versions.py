"""The Slurm version matrix: which config dialect each supported release speaks.

Sources: the slurm.conf/cgroup.conf/topology.conf man pages of each release and
the RELEASE_NOTES; each Dialect property names its release. Versions are "YY.MM" strings.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

SUPPORTED = ("22.05", "23.02", "23.11", "24.05", "24.11", "25.05", "25.11", "26.05")
DEFAULT = "26.05"


def key(version: str) -> tuple[int, int]:
    """Sortable (year, month) of a "YY.MM" version."""
    year, month = version.split(".")
    return int(year), int(month)


@dataclass(frozen=True)
class Dialect:
    """What one Slurm release accepts, as far as the generator cares."""

    version: str

    def at_least(self, version: str) -> bool:
        return key(self.version) >= key(version)

    @property
    def has_auth_slurm(self) -> bool:
        """auth/slurm + cred/slurm with a shared slurm.key exist from 23.11."""
        return self.at_least("23.11")

    @property
    def default_auth(self) -> str:
        return "slurm" if self.has_auth_slurm else "munge"

    @property
    def has_topology_block(self) -> bool:
        return self.at_least("23.11")

    @property
    def has_block_sizes(self) -> bool:
        return self.at_least("24.05")

    @property
    def has_topology_yaml(self) -> bool:
        """topology.yaml replaces topology.conf from 25.05."""
        return self.at_least("25.05")

    @property
    def has_openmetrics(self) -> bool:
        """MetricsType=metrics/openmetrics: slurmctld serves /metrics/* on its own port from 25.11
        (https://slurm.schedmd.com/metrics.html; checked on 26.05 in the lab)."""
        return self.at_least("25.11")

    @property
    def needs_cloud_reg_addrs(self) -> bool:
        """22.05 needs SlurmctldParameters=cloud_reg_addrs; later releases do it by default
        (24.11 and 26.05 reject the option as defunct, seen in the lab)."""
        return not self.at_least("23.02")

    @property
    def tree_breaks_dynamic_nodes(self) -> bool:
        """topology/tree with dynamic nodes fails every job on 22.05 (LAB-NOTES)."""
        return not self.at_least("23.02")


def dialect(version: str) -> Dialect:
    """The dialect of a supported version."""
    if version not in SUPPORTED:
        raise ValueError(f"unsupported Slurm version {version!r}")
    return Dialect(version)


def upgrade_problem(live: str, target: str) -> str | None:
    """Why Slurm cannot go from release `live` to `target` in one step, or None when it can.

    Slurm upgrades in place from the previous two major releases, and from 24.11 on (6-month
    cycle) from the previous three (https://slurm.schedmd.com/upgrades.html); never downward.
    """
    if live == target or live not in SUPPORTED or target not in SUPPORTED:
        return None
    if key(target) < key(live):
        return f"Slurm {live} -> {target} is a downgrade, which Slurm does not support"
    window = 3 if key(target) >= key("24.11") else 2
    steps = SUPPORTED.index(target) - SUPPORTED.index(live)
    if steps > window:
        via = SUPPORTED[SUPPORTED.index(live) + window]
        return (f"Slurm {live} -> {target} skips {steps - 1} release(s); Slurm {target} upgrades from at most "
                f"{window} releases back: upgrade to {via} first")
    return None



def upgrade_refusal(live: Iterable[str], target: str) -> str | None:
    """Why the releases running now (slurmdbd, slurmctld, slurmd) cannot all go to `target`, or None.

    Both ends count: the newest must not go down, the oldest must not skip. This file is standard library
    only: the GitOps upgrade check ships it (render/k8s/upgradecheck.py).
    """
    running = list(live)
    if not running:
        return None
    return upgrade_problem(max(running, key=key), target) or upgrade_problem(min(running, key=key), target)
