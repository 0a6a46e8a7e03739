"""spec.login: the login pods and their ssh Service, and their loading."""

from __future__ import annotations

from dataclasses import dataclass

from slurmk8s.profile.defaults import value_or_default


@dataclass(frozen=True)
class Login:
    """spec.login: the login pods, their Service and who may reach them over SSH."""

    replicas: int
    service_type: str
    service_port: int
    ssh_from: tuple[str, ...]
    authorized_keys: tuple[str, ...]


def load_login(raw: dict) -> Login:
    service = raw.get("service", {})
    return Login(
        replicas=value_or_default(raw, "replicas", "spec.login.replicas"),
        service_type=value_or_default(service, "type", "spec.login.service.type"),
        service_port=value_or_default(service, "port", "spec.login.service.port"),
        ssh_from=tuple(raw.get("sshFrom", [])),
        authorized_keys=tuple(raw.get("authorizedKeys", [])),
    )



