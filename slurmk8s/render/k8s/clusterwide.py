"""Cluster-wide objects: Namespace, ServiceAccounts, the Slurm ConfigMap, NetworkPolicies."""

from __future__ import annotations

from slurmk8s import naming
from slurmk8s.profile.model import Profile
from slurmk8s.render.k8s.accounts import manages_accounts
from slurmk8s.render.k8s.common import Obj, meta

def build_namespace(profile: Profile) -> Obj:
    """The profile's namespace."""
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": meta(profile, profile.namespace, namespaced=False)}


def build_configmap_slurm(profile: Profile, files: dict[str, str]) -> Obj:
    """slurm.conf, cgroup.conf and gres.conf, read by every Slurm pod."""
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta(profile, naming.config_map(profile.name)),
            "data": dict(files)}


def slurm_components(profile: Profile) -> tuple[str, ...]:
    """Components whose pods the Slurm NetworkPolicy covers: the daemons, and the account tree's Job
    when the GitOps outputs carry it (it takes no connections; it only reaches slurmdbd)."""
    return naming.SLURM_COMPONENTS + ((naming.ACCOUNTS,) if manages_accounts(profile) else ())


def build_networkpolicy_slurm(profile: Profile) -> Obj:
    """All traffic among this cluster's Slurm pods (srun callbacks, MPI, NCCL use any port); nothing else in."""
    peers = {"podSelector": {"matchLabels": {naming.LABEL_INSTANCE: profile.name, naming.LABEL_PART_OF: "slurm"}}}
    return {
        "apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
        "metadata": meta(profile, naming.network_policy(profile.name, "slurm")),
        "spec": {
            "podSelector": {"matchLabels": {naming.LABEL_INSTANCE: profile.name},
                            "matchExpressions": [{"key": naming.LABEL_COMPONENT, "operator": "In",
                                                  "values": sorted(slurm_components(profile))}]},
            "policyTypes": ["Ingress"],
            "ingress": [{"from": [peers]}],
        },
    }


def ingress_policy(profile: Profile, name: str, component: str, sources: list[Obj] | None, port: int) -> Obj:
    """One component's pods admit TCP on port from sources (None: from anywhere)."""
    rule: Obj = {"ports": [{"protocol": "TCP", "port": port}]}
    if sources is not None:
        rule = {"from": sources, **rule}
    return {
        "apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
        "metadata": meta(profile, naming.network_policy(profile.name, name), component),
        "spec": {
            "podSelector": {"matchLabels": naming.selector_labels(profile.name, component)},
            "policyTypes": ["Ingress"],
            "ingress": [rule],
        },
    }


def build_networkpolicy_database(profile: Profile) -> Obj:
    """MariaDB: 3306 from slurmdbd only, and from the backup and restore Jobs when there are any."""
    sources = [{"podSelector": {"matchLabels": naming.selector_labels(profile.name, naming.ACCOUNTING)}}]
    if profile.accounting.backup is not None:
        sources.append({"podSelector": {"matchLabels": naming.selector_labels(profile.name, naming.DB_BACKUP)}})
    return ingress_policy(profile, "mariadb", naming.DATABASE, sources, 3306)


def build_networkpolicy_login(profile: Profile) -> Obj:
    """ssh to the login pods from the profile's CIDRs (anywhere when none are listed)."""
    sources = [{"ipBlock": {"cidr": c}} for c in profile.login.ssh_from] or None
    return ingress_policy(profile, "login-ssh", naming.LOGIN, sources, 22)


def build_networkpolicy_restapi(profile: Profile) -> Obj:
    """slurmrestd: 6820 from any pod of the namespace (its clients)."""
    return ingress_policy(profile, "restapi", naming.RESTAPI, [{"podSelector": {}}], 6820)
