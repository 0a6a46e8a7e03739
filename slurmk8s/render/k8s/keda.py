"""KEDA ScaledObjects for pools that burst on a metric (https://keda.sh/docs/latest/reference/scaledobject-spec/).

KEDA only ever grows such a pool. The `autoscaling.keda.sh/paused-scale-in` annotation makes KEDA
set its HPA's scale-down policy to Disabled and block its own scale to zero (after cooldownPeriod,
with minReplicaCount 0), because either would remove the highest pods whether or not they run
jobs. Shrinking stays with Slurm's power saving, which removes only idle, powered-down nodes
(docs/elastic-pools.md).

With topology a pool runs one StatefulSet per leaf domain, so it gets one ScaledObject per leaf,
each within that leaf's share of minReplicas..maxReplicas.
"""

from __future__ import annotations

from slurmk8s import naming
from slurmk8s.profile.model import Pool, Profile
from slurmk8s.render.k8s.common import Obj, meta
from slurmk8s.render.topology import pool_segments

ANNOTATION_PAUSED_SCALE_IN = "autoscaling.keda.sh/paused-scale-in"


def build_scaledobjects_pool(profile: Profile, pool: Pool) -> list[Obj]:
    """One Prometheus-triggered ScaledObject per StatefulSet of the pool, never scaling in."""
    assert pool.keda is not None  # render() passes only pools with keda
    out = []
    for segment in pool_segments(profile, pool):
        metadata = meta(profile, segment.statefulset, naming.WORKER, pool.name, {ANNOTATION_PAUSED_SCALE_IN: "true"})
        out.append({
            "apiVersion": "keda.sh/v1alpha1",
            "kind": "ScaledObject",
            "metadata": metadata,
            "spec": {
                "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": segment.statefulset},
                # Slurm never suspends below minReplicas (SuspendExcNodes): the HPA's floor agrees with it.
                "minReplicaCount": segment.min_replicas,
                "maxReplicaCount": segment.slots,
                "pollingInterval": pool.keda.polling_interval,
                "advanced": {"horizontalPodAutoscalerConfig": {"behavior": {"scaleDown": {"selectPolicy": "Disabled"}}}},
                "triggers": [{"type": "prometheus", "metadata": {"serverAddress": pool.keda.server_address,
                                                                "query": pool.keda.query,
                                                                "threshold": pool.keda.threshold}}],
            },
        })
    return out
