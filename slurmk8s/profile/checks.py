"""Cross-field rules the JSON Schema cannot express.

Each rule returns (path, message, point_at_key); paths index the document as
written (the model sorts pools, so positions come from the raw document).
"""

from __future__ import annotations

from typing import Any

from slurmk8s import naming
from slurmk8s.profile.accounting import check_accounting
from slurmk8s.profile.model import Profile
from slurmk8s.profile.observe import check_observe
from slurmk8s.profile.partitions import check_partitions
from slurmk8s.profile.identity import check_identity, scheduling_with_identity_accounts
from slurmk8s.profile.login import check_login
from slurmk8s.profile.pods import check_pods
from slurmk8s.profile.pools import check_pools
from slurmk8s.profile.resources import check_resources
from slurmk8s.profile.restapi import check_restapi
from slurmk8s.profile.scheduling import check_scheduling
from slurmk8s.profile.sidebyside import check_side_by_side
from slurmk8s.profile.slurm import check_extra_files, check_slurm
from slurmk8s.profile.topology import check_topology
from slurmk8s.profile.volumes import check_volumes

Problem = tuple[tuple, str, bool]

# Slurm nodes of one cluster (every pool's maxReplicas): far above real clusters, low enough
# that checking and rendering stay within seconds.
MAX_CLUSTER_NODES = 65536


def check_profile(profile: Profile, doc: dict[str, Any]) -> list[Problem]:
    """Every cross-field problem of a schema-valid profile."""
    spec = doc["spec"]
    total = sum(p.max_replicas for p in profile.pools)
    if total > MAX_CLUSTER_NODES:
        # Checked first and alone: the node-by-node checks below would take minutes.
        return [(("spec", "pools"), f"the pools hold {total} Slurm nodes (the sum of maxReplicas); "
                 f"at most {MAX_CLUSTER_NODES} are supported", True)]
    problems: list[Problem] = []
    problems += check_pools(profile, spec)
    problems += check_partitions(spec)
    problems += check_slurm(profile, spec)
    problems += check_accounting(spec, profile.name)
    # A user's identity.accounts count as membership (the paths of listed users are unchanged).
    problems += check_scheduling({**spec, "scheduling": scheduling_with_identity_accounts(spec)})
    problems += check_identity(spec)
    problems += check_volumes(spec, profile.name)
    problems += check_resources(spec, profile.daemon_resources)
    problems += check_extra_files(spec)
    problems += check_pods(spec)
    problems += check_login(spec)
    problems += check_restapi(spec)
    # Every node's name (10,000 in a large profile) only when there are shared nodes to compare.
    problems += check_side_by_side(profile.side_by_side, spec,
                                   _pool_node_names(profile) if profile.side_by_side else set(),
                                   {p.name for p in profile.partitions})
    problems += check_topology(profile.topology, spec, profile.name, profile.version,
                               {p.name: (p.max_replicas, p.elastic) for p in profile.pools})
    problems += check_observe(spec, profile.version, profile.metrics, profile.health_checks)
    return problems


def _pool_node_names(profile: Profile) -> set[str]:
    return {naming.slurm_node_name(p.name, i) for p in profile.pools for i in range(p.max_replicas)}
