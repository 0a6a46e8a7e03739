"""spec.login: the login pods and their ssh Service, and their loading."""

from __future__ import annotations

from dataclasses import dataclass

from slurmk8s.profile.defaults import value_or_default
from slurmk8s.profile.kubevalues import annotations_size_problem

Problem = tuple[tuple, str, bool]

SERVICE = ("spec", "login", "service")
GENERATOR_PREFIX = "slurmk8s.io/"
# Service fields the API server takes only with some types (or, for loadBalancerIP, that only a load balancer reads).
TYPES_OF = {"loadBalancerIP": ("LoadBalancer",), "loadBalancerSourceRanges": ("LoadBalancer",),
            "externalTrafficPolicy": ("NodePort", "LoadBalancer")}


@dataclass(frozen=True)
class Login:
    """spec.login: the login pods, their Service and who may reach them over SSH."""

    replicas: int
    service_type: str
    service_port: int
    ssh_from: tuple[str, ...]
    authorized_keys: tuple[str, ...]
    service_annotations: tuple[tuple[str, str], ...] = ()
    load_balancer_ip: str | None = None
    load_balancer_source_ranges: tuple[str, ...] = ()
    # None with ClusterIP, which has no such field; Local when a NodePort or LoadBalancer leaves it out.
    external_traffic_policy: str | None = None


def load_login(raw: dict) -> Login:
    service = raw.get("service", {})
    service_type = value_or_default(service, "type", "spec.login.service.type")
    # Local keeps the client's address for sshFrom's NetworkPolicy; the Service had it before it was a field.
    policy = service.get("externalTrafficPolicy", None if service_type == "ClusterIP" else "Local")
    return Login(
        replicas=value_or_default(raw, "replicas", "spec.login.replicas"),
        service_type=service_type,
        service_port=value_or_default(service, "port", "spec.login.service.port"),
        ssh_from=tuple(raw.get("sshFrom", [])),
        authorized_keys=tuple(raw.get("authorizedKeys", [])),
        service_annotations=tuple(sorted(service.get("annotations", {}).items())),
        load_balancer_ip=service.get("loadBalancerIP"),
        load_balancer_source_ranges=tuple(service.get("loadBalancerSourceRanges", [])),
        external_traffic_policy=policy,
    )


def check_login(spec: dict) -> list[Problem]:
    """Service fields its type does not take, and annotations over the API server's total."""
    service = (spec.get("login") or {}).get("service") or {}
    kind = value_or_default(service, "type", "spec.login.service.type")
    out: list[Problem] = []
    for field, types in TYPES_OF.items():
        if field in service and kind not in types:
            out.append((SERVICE + (field,), f"applies only to type {' or '.join(types)}; this Service is {kind}", True))
    for key in service.get("annotations") or {}:
        if key.startswith(GENERATOR_PREFIX):
            out.append((SERVICE + ("annotations", key), f"{key!r} is the generator's (its tools read "
                        f"{GENERATOR_PREFIX} keys)", True))
    problem = annotations_size_problem(service.get("annotations") or {})
    if problem:
        out.append((SERVICE + ("annotations",), problem, True))
    return out
