"""spec.metrics and spec.healthChecks (with pools[].healthChecks): seeing the cluster from outside.

Metrics are Slurm's own (MetricsType=metrics/openmetrics, slurmctld's port, 25.11+); health checks
are Slurm's HealthCheckProgram, one rendered script per pool (render/k8s/health.py).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

from slurmk8s import versions
from slurmk8s.profile.defaults import default
from slurmk8s.quantity import parse_quantity, to_mib

Problem = tuple[tuple, str, bool]

MONITOR_KINDS = ("ServiceMonitor", "PodMonitor", "none")
# The endpoints slurmctld serves with metrics/openmetrics that the monitors scrape (jobs-users-accts is
# left out: one series per user and account grows without bound on a big site).
METRIC_PATHS = ("/metrics/jobs", "/metrics/nodes", "/metrics/partitions", "/metrics/scheduler")


@dataclass(frozen=True)
class Metrics:
    """spec.metrics: Slurm's metrics, how Prometheus scrapes them, the dashboard."""

    enabled: bool
    monitor: str  # ServiceMonitor | PodMonitor | none
    interval: str
    scraper_namespace: str
    labels: tuple[tuple[str, str], ...]
    dashboard: bool


@dataclass(frozen=True)
class PoolCheck:
    """A pool's own check: a shell command; non-zero exit drains the node naming the check."""

    name: str
    command: str


@dataclass(frozen=True)
class HealthChecks:
    """spec.healthChecks: the HealthCheckProgram every pool node runs."""

    enabled: bool
    interval: int
    min_free_disk_mib: int
    disk_paths: tuple[str, ...]
    mounts: tuple[str, ...]
    pool_checks: tuple[tuple[str, tuple[PoolCheck, ...]], ...]  # pool name -> its own checks, sorted

    def of_pool(self, pool: str) -> tuple[PoolCheck, ...]:
        return dict(self.pool_checks).get(pool, ())



def load_metrics(raw: dict | None) -> Metrics:
    raw = raw or {}
    return Metrics(
        enabled=raw.get("enabled", default("spec.metrics.enabled")),
        monitor=raw.get("monitor", default("spec.metrics.monitor")),
        interval=raw.get("interval", default("spec.metrics.interval")),
        scraper_namespace=raw.get("scraperNamespace", default("spec.metrics.scraperNamespace")),
        labels=tuple(sorted((raw.get("labels") or {}).items())),
        dashboard=raw.get("dashboard", default("spec.metrics.dashboard")),
    )


def load_health_checks(raw: dict | None, pools: list[dict]) -> HealthChecks:
    raw = raw or {}
    own = []
    for pool in pools:
        checks = tuple(PoolCheck(c["name"], c["command"]) for c in pool.get("healthChecks") or [])
        if checks:
            own.append((pool["name"], checks))
    return HealthChecks(
        enabled=raw.get("enabled", default("spec.healthChecks.enabled")),
        interval=raw.get("interval", default("spec.healthChecks.interval")),
        min_free_disk_mib=to_mib(raw.get("minFreeDisk", default("spec.healthChecks.minFreeDisk"))),
        disk_paths=tuple(raw.get("diskPaths", default("spec.healthChecks.diskPaths"))),
        mounts=tuple(raw.get("mounts", [])),
        pool_checks=tuple(sorted(own)),
    )


_METRIC_NAME = re.compile(r"\bslurm_[a-z0-9_]+\b")


def check_observe(spec: dict, version: str, metrics: Metrics, health: HealthChecks) -> list[Problem]:
    """Metrics need a release that serves them; a KEDA trigger needs a metric source; pool checks need checks on."""
    out: list[Problem] = []
    raw_metrics = spec.get("metrics") or {}
    if metrics.enabled and not versions.dialect(version).has_openmetrics:
        out.append((("spec", "metrics", "enabled"),
                    f"Slurm {version} has no metrics/openmetrics (it came in 25.11); use 25.11 or later, or run an "
                    "exporter yourself (docs/metrics.md says which)", False))
    if metrics.enabled:
        private = [k for k in (spec.get("slurm") or {}).get("config", {}) if k.lower() == "privatedata"]
        for key in private:
            out.append((("spec", "slurm", "config", key),
                        "slurmctld turns its metrics off when PrivateData is set; drop it or spec.metrics", True))
    elif any(k in raw_metrics for k in ("monitor", "dashboard", "scraperNamespace", "labels", "interval")):
        out.append((("spec", "metrics"), "metrics settings without spec.metrics.enabled: true do nothing", False))
    raw_health = spec.get("healthChecks") or {}
    if health.min_free_disk_mib == 0 and (parse_quantity(raw_health.get("minFreeDisk", 0)) or 0) > 0:
        # The check compares whole KiB of free space with whole MiB: under 1 MiB it compares with 0, never failing.
        out.append((("spec", "healthChecks", "minFreeDisk"), f"{raw_health['minFreeDisk']!r} is less than 1Mi, which "
                    "the check rounds down to 0 and so never fails; give at least 1Mi (or 0 to say so)", False))
    if health.enabled and spec.get("sideBySide"):
        out.append((("spec", "healthChecks", "enabled"),
                    "health checks run on pool nodes only; side-by-side nodes have none yet (drop one of the two)",
                    False))
    for i, pool in enumerate(spec.get("pools") or []):
        keda = pool.get("keda")
        if keda and not metrics.enabled:
            out.append((("spec", "pools", i, "keda"),
                        "this KEDA trigger has no metric source: nothing in the cluster exports metrics; "
                        "set spec.metrics.enabled: true (Slurm's own openmetrics, 25.11+)", True))
        elif keda and metrics.enabled:
            unknown = sorted({m for m in _METRIC_NAME.findall(_metric_part(keda["query"])) if not _known_metric(m)})
            if unknown:
                out.append((("spec", "pools", i, "keda", "query"),
                            f"{', '.join(unknown)} is not a metric slurmctld exports (docs/metrics.md lists them)",
                            False))
        if pool.get("healthChecks") and not health.enabled:
            out.append((("spec", "pools", i, "healthChecks"),
                        "pool checks run only with spec.healthChecks.enabled: true", True))
        names = [c["name"] for c in pool.get("healthChecks") or []]
        for j, name in enumerate(names):
            if name in names[:j]:
                out.append((("spec", "pools", i, "healthChecks", j, "name"), f"duplicate check name '{name}'", False))
    return out


@lru_cache(maxsize=1)
def exported_metrics() -> frozenset[str]:
    """What slurmctld serves on the scraped endpoints (openmetrics.json, from a scrape of real 26.05)."""
    raw = resources.files("slurmk8s.profile").joinpath("openmetrics.json").read_text("utf-8")
    return frozenset(json.loads(raw)["names"])


def _metric_part(query: str) -> str:
    """The query without label matchers, grouping clauses and strings (where label names appear)."""
    query = re.sub(r"\{[^}]*\}", " ", query)
    query = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", query)
    return re.sub(r"\"[^\"]*\"|'[^']*'", " ", query)


def _known_metric(name: str) -> bool:
    return name in exported_metrics()
