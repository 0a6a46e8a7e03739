"""Cross-field rules the JSON Schema cannot express.

Each rule returns (path, message, point_at_key); paths index the document as
written (the model sorts pools, so positions come from the raw document).
"""

from __future__ import annotations

from typing import Any

from slurmk8s import naming, versions
from slurmk8s.profile.model import Profile
from slurmk8s.profile.identity import check_identity, scheduling_with_identity_accounts
from slurmk8s.profile.pods import check_pods
from slurmk8s.profile.resources import check_resources
from slurmk8s.profile.scheduling import check_scheduling
from slurmk8s.profile.sidebyside import check_side_by_side
from slurmk8s.profile.topology import check_topology
from slurmk8s.profile.volumes import check_volumes
from slurmk8s.quantity import to_bytes, to_mib

Problem = tuple[tuple, str, bool]

# slurm.conf keys the generator writes; a profile may not override them through
# spec.slurm.config because the pods, Services and secrets depend on their values.
OWNED_SLURM_KEYS = frozenset(k.lower() for k in (
    "ClusterName", "SlurmctldHost", "ControlMachine", "ControlAddr", "BackupController", "BackupAddr",
    "SlurmUser", "SlurmdUser", "AuthType", "CredType", "AuthInfo", "AuthAltTypes", "AuthAltParameters",
    "SlurmctldPort", "SlurmdPort", "SrunPortRange", "StateSaveLocation", "SlurmdSpoolDir",
    "SlurmctldPidFile", "SlurmdPidFile", "SlurmctldLogFile", "SlurmdLogFile", "ProctrackType", "TaskPlugin",
    "JobAcctGatherType", "SelectType", "GresTypes", "AccountingStorageType", "AccountingStorageHost",
    "AccountingStoragePort", "AccountingStoragePass", "TopologyPlugin", "NodeName", "NodeSet", "PartitionName",
    "SlurmctldParameters", "TreeWidth", "MailProg", "ResumeProgram", "SuspendProgram", "Include",
    # spec.scheduling
    "SchedulerType", "SchedulerParameters", "PriorityType", "PriorityWeightFairshare", "PriorityWeightAge",
    "PriorityWeightJobSize", "PriorityWeightPartition", "PriorityWeightQOS", "PriorityDecayHalfLife",
    "PriorityMaxAge", "PriorityCalcPeriod", "PreemptType", "PreemptMode", "AccountingStorageEnforce",
))
OWNED_PARTITION_KEYS = frozenset(k.lower() for k in ("PartitionName", "Nodes", "Default", "MaxTime", "State"))
RESERVED_POOL_NAMES = frozenset({naming.CONTROLLER, naming.ACCOUNTING, naming.DATABASE, naming.LOGIN,
                                 naming.RESTAPI, "slurmd", "default"})
MIN_POOL_MEMORY_MIB = 512
DAEMON_PORTS = (6817, 6818, 6819, 6820)  # slurmctld, slurmd, slurmdbd, slurmrestd
# Slurm nodes of one cluster (every pool's maxReplicas): far above real clusters, low enough
# that checking and rendering stay within seconds.
MAX_CLUSTER_NODES = 65536
DEFAULT_IMAGE_REGISTRY = "ghcr.io/slinkyproject"
# Slurm releases SlinkyProject publishes images for (docs/research/slinky-facts.md).
SLINKY_IMAGE_VERSIONS = frozenset({"24.11", "25.05", "25.11", "26.05"})


def check_profile(profile: Profile, doc: dict[str, Any]) -> list[Problem]:
    """Every cross-field problem of a schema-valid profile."""
    spec = doc["spec"]
    total = sum(p.max_replicas for p in profile.pools)
    if total > MAX_CLUSTER_NODES:
        # Checked first and alone: the node-by-node checks below would take minutes.
        return [(("spec", "pools"), f"the pools hold {total} Slurm nodes (the sum of maxReplicas); "
                 f"at most {MAX_CLUSTER_NODES} are supported", True)]
    problems: list[Problem] = []
    problems += _check_pools(profile, spec)
    problems += _check_partitions(spec)
    problems += _check_slurm(profile, spec)
    problems += _check_accounting(spec)
    # A user's identity.accounts count as membership (the paths of listed users are unchanged).
    problems += check_scheduling({**spec, "scheduling": scheduling_with_identity_accounts(spec)})
    problems += check_identity(spec)
    problems += check_volumes(spec)
    problems += check_resources(spec, profile.daemon_resources)
    problems += _check_extra_files(spec)
    problems += check_pods(spec)
    # Every node's name (10,000 in a large profile) only when there are shared nodes to compare.
    problems += check_side_by_side(profile.side_by_side, spec,
                                   _pool_node_names(profile) if profile.side_by_side else set(),
                                   {p.name for p in profile.partitions})
    problems += check_topology(profile.topology, spec, profile.name, profile.version,
                               {p.name: (p.max_replicas, p.elastic) for p in profile.pools})
    return problems


def _pool_node_names(profile: Profile) -> set[str]:
    return {naming.slurm_node_name(p.name, i) for p in profile.pools for i in range(p.max_replicas)}


def _check_pools(profile: Profile, spec: dict) -> list[Problem]:
    out: list[Problem] = []
    seen: dict[str, int] = {}
    by_name = {p.name: p for p in profile.pools}
    for i, raw in enumerate(spec["pools"]):
        at = ("spec", "pools", i)
        name = raw["name"]
        if name in seen:
            out.append((at + ("name",), f"duplicate pool name '{name}' (also spec.pools[{seen[name]}])", False))
        seen.setdefault(name, i)
        if name in RESERVED_POOL_NAMES:
            out.append((at + ("name",), f"'{name}' is reserved (it would collide with a component's objects)", False))
        sts = naming.pool_statefulset(profile.name, name)
        if len(sts) > naming.MAX_STATEFULSET_NAME:
            out.append((at + ("name",), f"StatefulSet name '{sts}' would be {len(sts)} characters; "
                        f"the limit is {naming.MAX_STATEFULSET_NAME} (shorten metadata.name or the pool name)", False))
        # Only bounds the user wrote are blamed: an omitted one defaults to replicas.
        replicas, low, high = raw["replicas"], raw.get("minReplicas"), raw.get("maxReplicas")
        if low is not None and high is not None and low > high:
            out.append((at + ("minReplicas",), f"{low} is greater than maxReplicas {high}", False))
        elif low is not None and replicas < low:
            out.append((at + ("replicas",), f"{replicas} is less than minReplicas {low}", False))
        elif high is not None and replicas > high:
            out.append((at + ("replicas",), f"{replicas} is greater than maxReplicas {high}", False))
        pool = by_name[name]
        if "keda" in raw and not pool.elastic:
            out.append((at + ("keda",), "KEDA needs an elastic pool (minReplicas < maxReplicas); this one has "
                        f"{pool.min_replicas}..{pool.max_replicas}", True))
        if to_mib(raw["memory"]) < MIN_POOL_MEMORY_MIB:
            out.append((at + ("memory",), f"{raw['memory']} is less than the minimum of {MIN_POOL_MEMORY_MIB}Mi (slurmd needs room beside the jobs)", False))
        rdma = raw.get("rdma") or {}
        hp = rdma.get("hugepages")
        if hp:
            size = to_bytes(hp.get("size", "2Mi"))
            if to_bytes(hp["amount"]) % size:
                out.append((at + ("rdma", "hugepages", "amount"), f"{hp['amount']} is not a multiple of the page size {hp.get('size', '2Mi')}", False))
        listed: set[str] = set()
        for j, net in enumerate(rdma.get("networks", [])):
            if net in listed:
                out.append((at + ("rdma", "networks", j), f"network '{net}' is listed twice", False))
            listed.add(net)
    if "partitions" in spec:
        covered = {p for part in spec["partitions"] for p in part["pools"]}
        for i, raw in enumerate(spec["pools"]):
            if raw["name"] not in covered:
                out.append((("spec", "pools", i, "name"), f"pool '{raw['name']}' is in no partition; add it to one so its nodes can run jobs", False))
    return out


def _check_partitions(spec: dict) -> list[Problem]:
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
            elif isinstance(value, str) and (not value or any(ch.isspace() for ch in value)):
                out.append((at + ("config", key), f"{value!r} must be one word (it is written into the PartitionName line)", False))
        if part.get("default"):
            defaults.append(i)
    for i in defaults[1:]:
        out.append((("spec", "partitions", i, "default"), f"only one partition may be the default (spec.partitions[{defaults[0]}] already is)", False))
    return out


def _check_slurm(profile: Profile, spec: dict) -> list[Problem]:
    out: list[Problem] = []
    slurm = spec.get("slurm", {})
    dialect = versions.dialect(profile.version)
    if profile.auth == "slurm" and not dialect.has_auth_slurm:
        out.append((("spec", "slurm", "auth"), f"auth 'slurm' needs Slurm 23.11 or newer; {profile.version} has only munge", False))
    for key in slurm.get("config", {}):
        # A value with a line break (which could smuggle in owned keys) never gets here: loader.unsafe_text.
        if key.lower() in OWNED_SLURM_KEYS:
            out.append((("spec", "slurm", "config", key), f"'{key}' is set by the generator and cannot be overridden here", True))
    low, high = (int(x) for x in profile.srun_port_range.split("-"))
    if not 1024 <= low <= high <= 65535:
        out.append((("spec", "slurm", "srunPortRange"), f"'{profile.srun_port_range}' must be LOW-HIGH with 1024 <= LOW <= HIGH <= 65535", False))
    elif low <= DAEMON_PORTS[-1] and high >= DAEMON_PORTS[0]:
        out.append((("spec", "slurm", "srunPortRange"), f"'{profile.srun_port_range}' overlaps the ports of the Slurm "
                    f"daemons ({DAEMON_PORTS[0]}-{DAEMON_PORTS[-1]}: slurmctld, slurmd, slurmdbd, slurmrestd); "
                    "choose a range outside them, such as 60001-63000", False))
    images = slurm.get("images", {})
    custom = "tag" in images or images.get("registry", DEFAULT_IMAGE_REGISTRY) != DEFAULT_IMAGE_REGISTRY
    components = ("controller", "worker", "accounting", "login", "restapi")
    if not custom and not all(c in images for c in components):
        if profile.auth == "munge":
            out.append((("spec", "slurm", "auth"), "SlinkyProject's images carry no munged: with auth 'munge' set "
                        "spec.slurm.images (registry/tag or per component) to images that do, such as those of "
                        "`slurmk8s images build`", False))
        elif profile.version not in SLINKY_IMAGE_VERSIONS:
            out.append((("spec", "slurm", "version"), f"SlinkyProject publishes no images for Slurm {profile.version}; "
                        "set spec.slurm.images.registry/tag to images you build (`slurmk8s images build` makes "
                        "them for 22.05, 24.11 and 26.05)", False))
    return out


def _check_accounting(spec: dict) -> list[Problem]:
    acc = spec.get("accounting", {})
    if acc.get("enabled") is False and acc.get("database"):
        return [(("spec", "accounting", "database"), "a database is configured but accounting.enabled is false", True)]
    return []


# Files the generator writes into /etc/slurm (slurm.conf's companions, keys, scripts).
GENERATED_FILES = frozenset({"slurm.conf", "cgroup.conf", "gres.conf", "topology.conf", "slurmdbd.conf",
                             "task_prolog.sh", "acct_gather.conf", "oci.conf"})


def _check_extra_files(spec: dict) -> list[Problem]:
    files = spec.get("slurm", {}).get("extraFiles", {})
    return [(("spec", "slurm", "extraFiles", name), f"{name} is written by the generator; it cannot be replaced here",
             True) for name in files if name in GENERATED_FILES]
