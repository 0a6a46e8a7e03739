"""Slurm's own metrics (MetricsType=metrics/openmetrics, https://slurm.schedmd.com/metrics.html):
slurmctld serves /metrics/jobs, /nodes, /partitions and /scheduler over HTTP on its own port.

What this adds: a ClusterIP Service on that port, a ServiceMonitor or PodMonitor (prometheus-operator,
https://prometheus-operator.dev/docs/api-reference/api/) scraping each endpoint, and a NetworkPolicy
admitting the scraper's namespace to the port. The port is slurmctld's RPC port too: the scraper can
reach slurmctld, which still authenticates every RPC (auth/slurm or munge) as it does for any pod.
"""

from __future__ import annotations

from slurmk8s import naming
from slurmk8s.profile.model import Profile
from slurmk8s.profile.observe import METRIC_PATHS
from slurmk8s.render.k8s.clusterwide import ingress_policy
from slurmk8s.render.k8s.common import Obj, meta
from slurmk8s.render.k8s.dashboard import build_configmap_dashboard

SLURMCTLD_PORT = 6817
PORT_NAME = "metrics"
CLUSTER_LABEL = "slurm_cluster"  # added to every scraped series, so one Prometheus can hold many clusters


def metrics_on(profile: Profile) -> bool:
    return profile.metrics.enabled


def build_service_metrics(profile: Profile) -> Obj:
    """ClusterIP Service on slurmctld's port, for scrapers and for `curl .../metrics/jobs`."""
    m = meta(profile, naming.metrics_service(profile.name), naming.CONTROLLER)
    m["labels"][naming.LABEL_METRICS] = "openmetrics"
    return {
        "apiVersion": "v1", "kind": "Service", "metadata": m,
        "spec": {
            "type": "ClusterIP",
            "selector": naming.selector_labels(profile.name, naming.CONTROLLER),
            "ports": [{"name": PORT_NAME, "port": SLURMCTLD_PORT, "targetPort": SLURMCTLD_PORT, "protocol": "TCP"}],
        },
    }


def _endpoint(profile: Profile, path: str, port_key: str, port: str) -> Obj:
    return {port_key: port, "path": path, "scheme": "http", "interval": profile.metrics.interval,
            "relabelings": [{"action": "replace", "targetLabel": CLUSTER_LABEL, "replacement": profile.name}]}


def _monitor_meta(profile: Profile) -> Obj:
    m = meta(profile, naming.metrics_service(profile.name), naming.CONTROLLER)
    m["labels"].update(dict(profile.metrics.labels))
    m["labels"] = dict(sorted(m["labels"].items()))
    return m


def build_servicemonitor(profile: Profile) -> Obj:
    """One endpoint per OpenMetrics path, through the metrics Service (its own namespace only)."""
    selector = {naming.LABEL_INSTANCE: profile.name, naming.LABEL_METRICS: "openmetrics"}
    return {
        "apiVersion": "monitoring.coreos.com/v1", "kind": "ServiceMonitor", "metadata": _monitor_meta(profile),
        "spec": {"selector": {"matchLabels": selector},
                 "endpoints": [_endpoint(profile, p, "port", PORT_NAME) for p in METRIC_PATHS]},
    }


def build_podmonitor(profile: Profile) -> Obj:
    """The controller pods directly, on their named slurmctld port."""
    return {
        "apiVersion": "monitoring.coreos.com/v1", "kind": "PodMonitor", "metadata": _monitor_meta(profile),
        "spec": {"selector": {"matchLabels": naming.selector_labels(profile.name, naming.CONTROLLER)},
                 "podMetricsEndpoints": [_endpoint(profile, p, "port", "slurmctld") for p in METRIC_PATHS]},
    }


def build_networkpolicy_metrics(profile: Profile) -> Obj:
    """slurmctld's port from the scraper's namespace (the Slurm policy admits only the cluster's own pods)."""
    scraper = {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": profile.metrics.scraper_namespace}}}
    return ingress_policy(profile, "metrics", naming.CONTROLLER, [scraper], SLURMCTLD_PORT)


def build_metrics_objects(profile: Profile) -> list[Obj]:
    """Everything spec.metrics renders besides slurm.conf's MetricsType (none when it is off)."""
    if not metrics_on(profile):
        return []
    objects = [build_service_metrics(profile)]
    if profile.network_policy:
        objects.append(build_networkpolicy_metrics(profile))
    if profile.metrics.monitor == "ServiceMonitor":
        objects.append(build_servicemonitor(profile))
    elif profile.metrics.monitor == "PodMonitor":
        objects.append(build_podmonitor(profile))
    if profile.metrics.dashboard:
        objects.append(build_configmap_dashboard(profile))
    return objects
