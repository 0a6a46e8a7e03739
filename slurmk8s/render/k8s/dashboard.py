"""A Grafana dashboard of the cluster from slurmctld's own metrics (spec.metrics.dashboard).

A ConfigMap labelled grafana_dashboard=1: the Grafana chart's dashboard sidecar loads every such
ConfigMap it watches. The queries use only series slurmctld 26.05 exports (seen in the lab,
docs/metrics.md) and the slurm_cluster label the monitors add.
"""

from __future__ import annotations

import json

from slurmk8s import naming
from slurmk8s.profile.model import Profile
from slurmk8s.render.k8s.common import Obj, meta

NODE_STATES = ("idle", "alloc", "mixed", "drain", "down", "powered_down")
# Slurm exports no per-node state; a node's pool is the <pool> of its name <pool>-<n>.
POOL_OF_NODE = '"pool", "$1", "node", "(.+)-[0-9]+"'


def _panel(pid: int, title: str, targets: list[tuple[str, str]], x: int, y: int, unit: str = "short",
           stacked: bool = False) -> Obj:
    return {
        "id": pid, "type": "timeseries", "title": title, "datasource": {"type": "prometheus", "uid": "${datasource}"},
        "gridPos": {"h": 8, "w": 12, "x": x, "y": y},
        "fieldConfig": {"defaults": {"unit": unit, "custom": {"stacking": {"mode": "normal" if stacked else "none"}}},
                        "overrides": []},
        "targets": [{"refId": chr(ord("A") + i), "expr": expr, "legendFormat": legend}
                    for i, (expr, legend) in enumerate(targets)],
    }


def dashboard(profile: Profile) -> Obj:
    """The dashboard model (Grafana's JSON), deterministic for one profile."""
    sel = f'slurm_cluster="{profile.name}"'
    nodes = [(f"sum by (partition) (slurm_partition_nodes_{s}{{{sel}}})", f"{{{{partition}}}} {s}")
             for s in NODE_STATES]
    panels = [
        _panel(1, "Nodes by state per partition", nodes, 0, 0, stacked=True),
        _panel(2, "Nodes busy and idle per pool", [
            (f"count by (pool) (label_replace(slurm_node_cpus_alloc{{{sel}}} > 0, {POOL_OF_NODE}))", "{{pool}} busy"),
            (f"count by (pool) (label_replace(slurm_node_cpus_alloc{{{sel}}} == 0, {POOL_OF_NODE}))", "{{pool}} idle")],
            12, 0, stacked=True),
        _panel(3, "Queue by partition", [
            (f"sum by (partition) (slurm_partition_jobs_pending{{{sel}}})", "{{partition}} pending"),
            (f"sum by (partition) (slurm_partition_jobs_running{{{sel}}})", "{{partition}} running")], 0, 8),
        # sdiag's counters restart at midnight; increase() treats that as the reset it is.
        _panel(4, "Jobs started and finished (per 5 minutes)", [
            (f"increase(slurm_sdiag_jobs_started{{{sel}}}[5m])", "started"),
            (f"increase(slurm_sdiag_jobs_completed{{{sel}}}[5m])", "completed"),
            (f"increase(slurm_sdiag_jobs_failed{{{sel}}}[5m])", "failed"),
            (f"increase(slurm_sdiag_jobs_canceled{{{sel}}}[5m])", "cancelled")], 12, 8),
        _panel(5, "Scheduler cycle", [
            (f"slurm_schedule_cycle_last{{{sel}}}", "main cycle (last)"),
            (f"slurm_sched_mean_cycle{{{sel}}}", "main cycle (mean)"),
            (f"slurm_bf_cycle_last{{{sel}}}", "backfill cycle (last)")], 0, 16, unit="µs"),
        _panel(6, "GPU allocation", [
            (f"sum by (partition) (slurm_partition_jobs_gpus_alloc{{{sel}}})", "{{partition}} allocated"),
            (f"sum by (partition) (slurm_partition_gpus{{{sel}}})", "{{partition}} total"),
            (f"sum by (pool) (label_replace(slurm_node_gpus_alloc{{{sel}}}, {POOL_OF_NODE}))", "pool {{pool}} allocated")],
            12, 16),
    ]
    return {
        "title": f"Slurm {profile.name}", "uid": f"slurmk8s-{profile.name}"[:40], "editable": True,
        "schemaVersion": 39, "tags": ["slurm", "slurmk8s"], "time": {"from": "now-6h", "to": "now"},
        "templating": {"list": [{"name": "datasource", "type": "datasource", "query": "prometheus",
                                 "label": "Prometheus"}]},
        "panels": panels,
    }


def build_configmap_dashboard(profile: Profile) -> Obj:
    """The dashboard as a ConfigMap for Grafana's sidecar."""
    m = meta(profile, naming.dashboard_config_map(profile.name), naming.CONTROLLER)
    m["labels"]["grafana_dashboard"] = "1"
    m["labels"] = dict(sorted(m["labels"].items()))
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": m,
            "data": {f"slurm-{profile.name}.json": json.dumps(dashboard(profile), indent=1, sort_keys=True) + "\n"}}
