"""spec.pools: the slurmd pools (size, CPUs, memory, GPUs, RDMA, KEDA), their loading and their checks."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from slurmk8s import naming
from slurmk8s.profile.defaults import default
from slurmk8s.quantity import to_bytes, to_mib

if TYPE_CHECKING:  # the section is part of Profile: no import cycle at run time
    from slurmk8s.profile.model import Profile

Problem = tuple[tuple, str, bool]


@dataclass(frozen=True)
class Gpus:
    """A pool's GPUs per node: count, Slurm type, Kubernetes resource."""

    count: int
    type: str | None
    resource: str
    one_pod_per_node: bool = True  # required anti-affinity among the cluster's GPU pods


@dataclass(frozen=True)
class Hugepages:
    """A pool's hugepages per pod: page size and amount."""

    size: str
    amount: str


@dataclass(frozen=True)
class Rdma:
    """A pool's RDMA: the device resource, count and secondary networks."""

    resource: str
    count: int
    networks: tuple[str, ...]
    hugepages: Hugepages | None


@dataclass(frozen=True)
class Keda:
    """A pool's KEDA scaler: the Prometheus query that sizes it."""

    server_address: str
    query: str
    threshold: str
    polling_interval: int


@dataclass(frozen=True)
class Pool:
    """spec.pools[]: Slurm nodes of one shape, a StatefulSet of slurmd pods."""

    name: str
    replicas: int
    min_replicas: int
    max_replicas: int
    cpus: int
    memory_mib: int
    memory: str
    gpus: Gpus | None
    rdma: Rdma | None
    features: tuple[str, ...]
    node_selector: tuple[tuple[str, str], ...]
    tolerations: tuple[tuple[tuple[str, object], ...], ...]
    tmp_size: str  # spec.pools[].tmpSize: the jobs' /tmp
    keda: Keda | None = None
    image: str | None = None  # spec.pools[].image: this pool's slurmd image; None runs spec.slurm.images.worker

    @property
    def elastic(self) -> bool:
        return self.min_replicas < self.max_replicas


RESERVED_POOL_NAMES = frozenset({naming.CONTROLLER, naming.ACCOUNTING, naming.DATABASE, naming.LOGIN,
                                 naming.RESTAPI, "slurmd", "default"})


MIN_POOL_MEMORY_MIB = 512


def load_pool(raw: dict) -> Pool:
    replicas = raw["replicas"]
    gpus = raw.get("gpus")
    rdma = raw.get("rdma")
    hp = rdma.get("hugepages") if rdma else None
    return Pool(
        name=raw["name"],
        replicas=replicas,
        min_replicas=raw.get("minReplicas", replicas),
        max_replicas=raw.get("maxReplicas", max(replicas, 1)),
        cpus=raw["cpus"],
        memory=str(raw["memory"]),
        memory_mib=to_mib(raw["memory"]),
        gpus=Gpus(gpus["count"], gpus.get("type"), gpus.get("resource", default("spec.pools[].gpus.resource")),
                  gpus.get("onePodPerNode", default("spec.pools[].gpus.onePodPerNode"))) if gpus else None,
        rdma=Rdma(
            resource=rdma["resource"],
            count=rdma.get("count", default("spec.pools[].rdma.count")),
            networks=tuple(rdma.get("networks", [])),
            hugepages=Hugepages(hp.get("size", default("spec.pools[].rdma.hugepages.size")), str(hp["amount"])) if hp else None,
        ) if rdma else None,
        features=tuple(raw.get("features", [])),
        node_selector=tuple(sorted(raw.get("nodeSelector", {}).items())),
        tolerations=tuple(tuple(sorted(t.items())) for t in raw.get("tolerations", [])),
        keda=Keda(raw["keda"]["serverAddress"], raw["keda"]["query"], raw["keda"]["threshold"],
                  raw["keda"].get("pollingInterval", default("spec.pools[].keda.pollingInterval"))) if "keda" in raw else None,
        tmp_size=str(raw.get("tmpSize", default("spec.pools[].tmpSize"))),
        image=raw.get("image"),
    )


def check_pools(profile: Profile, spec: dict) -> list[Problem]:
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


