"""Every default of the cluster profile, in one place.

Keys are field paths with `[]` for "each item of a list". The JSON Schema repeats
these as `default` (for editors); tests/profile/test_schema.py keeps the two equal.
Defaults that depend on other fields (auth by version, min/max replicas by
replicas, image tags by version) are computed in loader.py and documented in the
schema's descriptions instead.

Default images are SlinkyProject's public ones (ghcr.io/slinkyproject/<daemon>:
<slurm version>-<os>); facts checked against their build files are in
docs/research/slinky-facts.md: daemons live in /usr/sbin, config in /etc/slurm, SlurmUser is
`slurm`; the login image runs sshd. They carry auth/slurm, not munged.
"""

from __future__ import annotations

from typing import Any

DEFAULTS: dict[str, object] = {
    "metadata.namespace": "slurm",
    "spec.clusterDomain": "cluster.local",
    "spec.slurm.version": "26.05",
    "spec.slurm.images.registry": "ghcr.io/slinkyproject",
    "spec.slurm.images.os": "ubuntu24.04",
    "spec.slurm.images.pullPolicy": "IfNotPresent",
    "spec.slurm.images.database": "mariadb:11.4",
    "spec.slurm.srunPortRange": "60001-63000",
    "spec.controller.replicas": 1,
    "spec.controller.storage.size": "4Gi",
    "spec.controller.resources.requests.cpu": "500m",
    "spec.controller.resources.requests.memory": "512Mi",
    "spec.controller.resources.limits.cpu": "2",
    "spec.controller.resources.limits.memory": "2Gi",
    "spec.accounting.resources.requests.cpu": "250m",
    "spec.accounting.resources.requests.memory": "256Mi",
    "spec.accounting.resources.limits.cpu": "1",
    "spec.accounting.resources.limits.memory": "1Gi",
    "spec.accounting.database.embedded.resources.requests.cpu": "250m",
    "spec.accounting.database.embedded.resources.requests.memory": "512Mi",
    "spec.accounting.database.embedded.resources.limits.cpu": "1",
    "spec.accounting.database.embedded.resources.limits.memory": "1Gi",
    "spec.accounting.enabled": True,
    "spec.accounting.database.embedded.storage": "10Gi",
    "spec.accounting.database.external.port": 3306,
    "spec.accounting.database.external.user": "slurm",
    "spec.accounting.database.external.database": "slurm_acct_db",
    "spec.login.replicas": 1,
    "spec.login.resources.requests.cpu": "250m",
    "spec.login.resources.requests.memory": "256Mi",
    "spec.login.resources.limits.cpu": "2",
    "spec.login.resources.limits.memory": "2Gi",
    "spec.login.service.type": "ClusterIP",
    "spec.login.service.port": 22,
    "spec.identity.users[].shell": "/bin/bash",
    "spec.volumes[].readOnly": False,
    "spec.volumes[].mountOn": ["login", "pools"],
    "spec.volumes[].claim.accessMode": "ReadWriteMany",
    "spec.restapi.enabled": False,
    "spec.restapi.replicas": 1,
    "spec.restapi.tokens[].lifespan": 3600,
    "spec.accounting.database.embedded.backup.schedule": "0 3 * * *",
    "spec.accounting.database.embedded.backup.keep": 7,
    "spec.accounting.database.embedded.backup.storage": "10Gi",
    "spec.pools[].tmpSize": "10Gi",
    "spec.pools[].gpus.resource": "nvidia.com/gpu",
    "spec.pools[].gpus.onePodPerNode": True,
    "spec.pools[].rdma.count": 1,
    "spec.pools[].rdma.hugepages.size": "2Mi",
    "spec.pools[].keda.pollingInterval": 30,
    "spec.partitions[].default": False,
    "spec.partitions[].maxTime": "UNLIMITED",
    "spec.networkPolicy.enabled": True,
    "spec.admissionPolicy.enabled": True,
    "spec.powerSaving.suspendTime": 300,
    "spec.powerSaving.suspendTimeout": 45,
    "spec.powerSaving.resumeTimeout": 600,
    "spec.rollout.drainTimeout": 3600,
    "spec.rollout.maxUnavailable": 1,
    "spec.rollout.drainOnCordon": True,
    "spec.sideBySide.mode": "host",
    "spec.sideBySide.partition": "shared",
    "spec.sideBySide.shapes[].gpuResource": "nvidia.com/gpu",
    "spec.scheduling.scheduler.type": "backfill",
    "spec.scheduling.scheduler.interval": 30,
    "spec.scheduling.scheduler.window": 1440,
    "spec.scheduling.scheduler.continue": True,
    "spec.scheduling.scheduler.maxJobTest": 500,
    "spec.scheduling.priority.type": "multifactor",
    "spec.scheduling.priority.weights.fairshare": 10000,
    "spec.scheduling.priority.weights.age": 1000,
    "spec.scheduling.priority.weights.jobSize": 1000,
    "spec.scheduling.priority.weights.partition": 1000,
    "spec.scheduling.priority.weights.qos": 10000,
    "spec.scheduling.priority.decayHalfLife": "7-0",
    "spec.scheduling.priority.maxAge": "7-0",
    "spec.scheduling.priority.calcPeriod": 5,
    "spec.scheduling.preemption.type": "none",
    "spec.scheduling.preemption.mode": "requeue",
    "spec.scheduling.accounts[].fairshare": 1,
    "spec.scheduling.qos[].priority": 0,
    "spec.metrics.enabled": False,
    "spec.metrics.monitor": "ServiceMonitor",
    "spec.metrics.interval": "30s",
    "spec.metrics.scraperNamespace": "monitoring",
    "spec.metrics.dashboard": False,
    "spec.healthChecks.enabled": False,
    "spec.healthChecks.interval": 60,
    "spec.healthChecks.minFreeDisk": "1Gi",
    "spec.healthChecks.diskPaths": ["/var/spool/slurmd", "/tmp"],
}

# Used when the profile lists no partitions: one default partition with every pool.
DEFAULT_PARTITION_NAME = "main"


def default(path: str) -> Any:
    """The default of one profile field, by its dotted path."""
    return DEFAULTS[path]


def value_or_default(obj: dict, key: str, default_path: str | None = None) -> Any:
    """obj[key] when the profile has it, else the default at default_path (None without one)."""
    if key in obj:
        return obj[key]
    return DEFAULTS[default_path] if default_path else None
