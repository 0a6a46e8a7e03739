"""KEDA ScaledObjects for pools that burst on a metric (https://keda.sh/docs/latest/reference/scaledobject-spec/).

KEDA only ever scales such a pool up: its scale-down is disabled, because the HPA would
remove the highest pods whether or not they run jobs. Shrinking stays with Slurm's power
saving, which removes only idle, powered-down nodes (docs/elastic-pools.md).
"""

from __future__ import annotations

from slurmk8s import naming
from slurmk8s.profile.model import Pool, Profile
from slurmk8s.render.k8s.common import Obj, meta


def build_scaledobject_pool(profile: Profile, pool: Pool) -> Obj:
    """A Prometheus-triggered ScaledObject on the pool's StatefulSet, within minReplicas..maxReplicas."""
    sts = naming.pool_statefulset(profile.name, pool.name)
    return {
        "apiVersion": "keda.sh/v1alpha1",
        "kind": "ScaledObject",
        "metadata": meta(profile, sts, naming.WORKER, pool.name),
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": sts},
            "minReplicaCount": pool.min_replicas,
            "maxReplicaCount": pool.max_replicas,
            "pollingInterval": pool.keda.polling_interval,
            "advanced": {"horizontalPodAutoscalerConfig": {"behavior": {"scaleDown": {"selectPolicy": "Disabled"}}}},
            "triggers": [{"type": "prometheus", "metadata": {"serverAddress": pool.keda.server_address,
                                                            "query": pool.keda.query,
                                                            "threshold": pool.keda.threshold}}],
        },
    }
